"""Fake vendor batch endpoints for ``httpx.MockTransport``, answering with the reconstructed traffic.

``AnthropicBatches`` and ``OpenAIBatches`` keep what they were sent and count each kind of call
(``submits``, ``polls``, ``fetches``), so a test can say "zero submits, one poll". Their answers
are the fixtures under ``tests/fixtures/batch-traffic`` (see its SOURCES.md) with the ids,
counts and texts of the batch at hand put into the recorded shapes. ``outcomes`` decides how
each ``custom_id`` ends (``succeeded`` by default, or ``errored`` / ``expired`` / ``canceled``,
or ``missing`` for no result line at all); a succeeded item's text is ``reply to <custom_id>``.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "batch-traffic"


def fixture(name: str) -> Any:
    """A JSON fixture (``vendor/name.json``) or the list of lines of a ``.jsonl`` one."""
    text = (FIXTURES / name).read_text(encoding="utf-8")
    if name.endswith(".jsonl"):
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    return json.loads(text)


def _answer(data: Any, status: int = 200) -> httpx.Response:
    return httpx.Response(status, json=data)


def _jsonl(lines: list[dict[str, Any]]) -> httpx.Response:
    body = "".join(json.dumps(line, separators=(",", ":")) + "\n" for line in lines)
    return httpx.Response(
        200, content=body.encode(), headers={"content-type": "application/binary"}
    )


class _Fake:
    def __init__(
        self,
        *,
        polls_until_end: int = 1,
        outcomes: dict[str, str] | None = None,
        fail_submit: Callable[[httpx.Request], httpx.Response | None] | None = None,
        reply: Callable[[str], str] | None = None,
    ) -> None:
        self.reply = reply or (lambda custom_id: f"reply to {custom_id}")
        self.polls_until_end = polls_until_end
        self.outcomes = outcomes or {}
        self.fail_submit = fail_submit
        self.submits: list[Any] = []
        self.polls = 0
        self.fetches = 0
        self.requests: list[httpx.Request] = []
        self.custom_ids: list[str] = []

    def transport(self) -> httpx.MockTransport:
        """A transport answering as the vendor would."""
        return httpx.MockTransport(self.handle)

    def client(self) -> httpx.AsyncClient:
        """An ``httpx.AsyncClient`` on that transport."""
        return httpx.AsyncClient(transport=self.transport())

    def handle(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        return self.route(request)

    def route(self, request: httpx.Request) -> httpx.Response:
        raise NotImplementedError

    def outcome(self, custom_id: str) -> str:
        return self.outcomes.get(custom_id, "succeeded")

    def ended(self) -> bool:
        return self.polls >= self.polls_until_end


class AnthropicBatches(_Fake):
    """``/v1/messages/batches`` as Anthropic answers it."""

    batch_id = "msgbatch_013Zva2CMHLNnXjNJJKqJ2EF"

    def route(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if request.method == "POST" and path == "/v1/messages/batches":
            if self.fail_submit is not None and (failed := self.fail_submit(request)) is not None:
                return failed
            body = json.loads(request.content)
            self.submits.append(body)
            self.custom_ids = [r["custom_id"] for r in body["requests"]]
            return _answer(self._batch(ended=False))
        if request.method == "GET" and path == f"/v1/messages/batches/{self.batch_id}":
            self.polls += 1
            return _answer(self._batch(ended=self.ended()))
        if request.method == "GET" and path == f"/v1/messages/batches/{self.batch_id}/results":
            self.fetches += 1
            return _jsonl(self._results())
        return httpx.Response(
            404, json={"type": "error", "error": {"type": "not_found_error", "message": path}}
        )

    def _batch(self, *, ended: bool) -> dict[str, Any]:
        batch = fixture("anthropic/batch-ended.json" if ended else "anthropic/batch-created.json")
        counts = dict.fromkeys(("canceled", "errored", "expired", "processing", "succeeded"), 0)
        for custom_id in self.custom_ids:
            kind = self.outcome(custom_id) if ended else "processing"
            counts["succeeded" if kind == "missing" else kind] += 1
        batch["request_counts"] = counts
        return batch

    def _results(self) -> list[dict[str, Any]]:
        succeeded = fixture("anthropic/results.jsonl")[0]
        others = {
            line["result"]["type"]: line
            for line in fixture("anthropic/results-not-succeeded.jsonl")
        }
        lines = []
        for custom_id in reversed(self.custom_ids):  # results come in any order
            kind = self.outcome(custom_id)
            if kind == "missing":
                continue
            line = copy.deepcopy(succeeded if kind == "succeeded" else others[kind])
            line["custom_id"] = custom_id
            if kind == "succeeded":
                line["result"]["message"]["content"][0]["text"] = self.reply(custom_id)
            lines.append(line)
        return lines


class OpenAIBatches(_Fake):
    """``/v1/files`` and ``/v1/batches`` as OpenAI answers them."""

    batch_id = "batch_abc123"

    def __init__(
        self, *, endpoint: str = "/v1/chat/completions", failed: str | None = None, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.failed = failed
        """When set, the batch fails validation as a whole with this message."""
        self.endpoint = endpoint
        self.uploads: list[bytes] = []
        self.lists = 0
        self.metadata: dict[str, str] | None = None

    def route(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if request.method == "POST" and path == "/v1/files":
            self.uploads.append(request.content)
            return _answer(fixture("openai/file-uploaded.json"))
        if request.method == "POST" and path == "/v1/batches":
            if self.fail_submit is not None and (failed := self.fail_submit(request)) is not None:
                return failed
            body = json.loads(request.content)
            self.submits.append(body)
            self.metadata = body.get("metadata")
            lines = _uploaded_lines(self.uploads[-1])
            self.custom_ids = [line["custom_id"] for line in lines]
            return _answer(self._batch(ended=False))
        if request.method == "GET" and path == "/v1/batches":
            self.lists += 1
            data = [self._batch(ended=self.ended())] if self.submits else []
            return _answer({"object": "list", "data": data, "has_more": False})
        if request.method == "GET" and path == f"/v1/batches/{self.batch_id}":
            self.polls += 1
            return _answer(self._batch(ended=self.ended()))
        if request.method == "GET" and path == "/v1/files/file-cvaTdG/content":
            self.fetches += 1
            return _jsonl(self._lines(error_file=False))
        if request.method == "GET" and path == "/v1/files/file-HOWS94/content":
            self.fetches += 1
            return _jsonl(self._lines(error_file=True))
        return httpx.Response(
            404, json={"error": {"message": path, "type": "invalid_request_error"}}
        )

    def _batch(self, *, ended: bool) -> dict[str, Any]:
        batch = fixture("openai/batch-completed.json" if ended else "openai/batch-validating.json")
        batch["endpoint"] = self.endpoint
        batch["metadata"] = self.metadata
        failed = sum(self.outcome(c) not in ("succeeded", "missing") for c in self.custom_ids)
        total = len(self.custom_ids)
        batch["request_counts"] = {
            "total": total,
            "completed": total - failed if ended else 0,
            "failed": failed if ended else 0,
        }
        if ended and not failed:
            batch["error_file_id"] = None
        if ended and self.failed is not None:
            batch.update(
                status="failed",
                output_file_id=None,
                error_file_id=None,
                completed_at=None,
                failed_at=batch["finalizing_at"],
                errors={
                    "object": "list",
                    "data": [{"code": "invalid_request", "message": self.failed, "line": 1}],
                },
            )
        return batch

    def _lines(self, *, error_file: bool) -> list[dict[str, Any]]:
        succeeded = fixture("openai/output.jsonl")[0]
        refused, expired = fixture("openai/errors.jsonl")
        lines = []
        for custom_id in self.custom_ids:
            kind = self.outcome(custom_id)
            if kind == "missing" or (kind != "succeeded") != error_file:
                continue
            template = {"succeeded": succeeded, "errored": refused, "expired": expired}[kind]
            line = copy.deepcopy(template)
            line["custom_id"] = custom_id
            if kind == "succeeded":
                body = line["response"]["body"]
                if self.endpoint == "/v1/responses":
                    line["response"]["body"] = _responses_body(self.reply(custom_id), body)
                else:
                    body["choices"][0]["message"]["content"] = self.reply(custom_id)
            lines.append(line)
        return lines


def _uploaded_lines(content: bytes) -> list[dict[str, Any]]:
    """The JSON Lines of the file part of a multipart upload."""
    start = content.index(b"\r\n\r\n", content.index(b'name="file"')) + 4
    end = content.index(b"\r\n--", start)
    return [json.loads(line) for line in content[start:end].splitlines() if line.strip()]


def uploaded_lines(fake: OpenAIBatches) -> list[dict[str, Any]]:
    """The input file lines of the last upload."""
    return _uploaded_lines(fake.uploads[-1])


def _responses_body(text: str, chat: dict[str, Any]) -> dict[str, Any]:
    """A Responses API body with the chat body's model and usage (shape: openai.types.responses.Response)."""
    usage = chat["usage"]
    return {
        "id": "resp_" + chat["id"].removeprefix("chatcmpl-"),
        "object": "response",
        "created_at": chat["created"],
        "status": "completed",
        "model": chat["model"],
        "output": [
            {
                "type": "message",
                "id": "msg_1",
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": text, "annotations": []}],
            }
        ],
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": {
            "input_tokens": usage["prompt_tokens"],
            "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
            "output_tokens": usage["completion_tokens"],
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": usage["total_tokens"],
        },
    }
