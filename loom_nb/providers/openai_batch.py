"""OpenAI's Batch API (``/v1/files`` + ``/v1/batches``) behind ``BatchApi``.

The wire format, as the API reference and the batch guide describe it and the ``openai`` SDK
types it (``openai.types.Batch``, ``FileObject``, ``BatchCreateParams``):

- the items go up as one JSON Lines file (``POST /v1/files``, multipart, ``purpose=batch``),
  one ``{"custom_id", "method": "POST", "url", "body"}`` per line, where ``url`` is the batch's
  endpoint (``/v1/chat/completions`` for ``OpenAIProvider``, ``/v1/responses`` for
  ``OpenAIResponsesProvider``: the Batch API takes both) and ``body`` the whole request body;
- submit: ``POST /v1/batches`` with ``input_file_id``, ``endpoint``, ``completion_window:
  "24h"`` and ``metadata``; loom_nb puts a digest of the items there (``loom_nb_tag``), so a
  process resumed after a submit whose answer it never saw finds the batch (``find``) instead of
  paying for a second one;
- poll: ``GET /v1/batches/{id}``: ``status`` is ``validating``, ``in_progress``, ``finalizing``,
  ``cancelling`` (running) or ``completed``, ``failed``, ``expired``, ``cancelled`` (ended);
  ``request_counts`` holds ``total``, ``completed`` and ``failed``;
- results: ``GET /v1/files/{output_file_id}/content`` and the same for ``error_file_id``: one
  ``{"id", "custom_id", "response": {"status_code", "request_id", "body"}, "error"}`` per
  request. A request the endpoint refused has a ``response`` with an error status and the
  error in its ``body``; one that never ran has ``response: null`` and ``error: {code,
  message}`` (``batch_expired`` when the 24 hours ran out).

Limits: 50,000 requests and 200 MB per input file. Pricing: 50% of the synchronous price,
which ``genai-prices`` knows as the ``processing: batch`` price variant for most models.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from loom_nb.content import LlmResponse
from loom_nb.errors import ProviderError
from loom_nb.providers._batch import BatchApi, BatchCounts, BatchItem, BatchState, item_error
from loom_nb.providers._http import encode_json
from loom_nb.providers.openai_answer import openai_error_fields, openai_error_retryable

if TYPE_CHECKING:
    from loom_nb.providers._http_provider import HttpProvider

__all__ = ["ENDED_STATUSES", "OpenAIBatchApi", "batch_input_file", "openai_batch_state"]

ENDED_STATUSES = frozenset({"completed", "failed", "expired", "cancelled"})
"""The statuses after which a batch changes no more."""

TAG_KEY = "loom_nb_tag"
"""The ``metadata`` key holding the digest of a batch's items."""


def batch_input_file(items: Sequence[BatchItem], endpoint: str) -> bytes:
    """The JSON Lines input file of ``items`` for ``endpoint``."""
    lines = (
        encode_json({"custom_id": i.custom_id, "method": "POST", "url": endpoint, "body": i.body})
        for i in items
    )
    return b"".join(line + b"\n" for line in lines)


def _count(counts: dict[str, Any], name: str) -> int:
    value = counts.get(name)
    return value if isinstance(value, int) else 0


def openai_batch_state(data: dict[str, Any], custom_ids: Sequence[str]) -> BatchState:
    """The ``BatchState`` of a ``batch`` object."""
    counts = data.get("request_counts")
    counts = counts if isinstance(counts, dict) else {}
    total, done, failed = (_count(counts, k) for k in ("total", "completed", "failed"))
    status = str(data.get("status") or "unknown")
    error = None
    if status == "failed":
        errors = data.get("errors")
        found = errors.get("data") if isinstance(errors, dict) else None
        messages = [
            str(e.get("message") or e.get("code")) for e in found or () if isinstance(e, dict)
        ]
        error = "; ".join(messages) or "no reason given"
    return BatchState(
        vendor="OpenAI",
        batch_id=str(data["id"]),
        status=status,
        ended=status in ENDED_STATUSES,
        counts=BatchCounts(
            total=total or len(custom_ids),
            processing=0
            if status in ENDED_STATUSES
            else max((total or len(custom_ids)) - done - failed, 0),
            succeeded=done,
            errored=failed,
        ),
        results={
            "output_file_id": data.get("output_file_id"),
            "error_file_id": data.get("error_file_id"),
        },
        custom_ids=list(custom_ids),
        error=error,
    )


class OpenAIBatchApi(BatchApi):
    """The Batch API for an ``OpenAIProvider`` or ``OpenAIResponsesProvider``."""

    vendor: ClassVar[str] = "OpenAI"
    max_requests: ClassVar[int] = 50_000
    max_bytes: ClassVar[int] = 200 * 1000 * 1000
    can_find: ClassVar[bool] = True

    def __init__(self, provider: HttpProvider, *, endpoint: str) -> None:
        super().__init__(provider)
        self.endpoint = endpoint
        """The API every item goes to (``/v1/chat/completions`` or ``/v1/responses``)."""

    async def submit(self, items: Sequence[BatchItem], *, tag: str) -> BatchState:
        """Upload the input file, then create the batch; the created batch's state."""
        upload = await self._json(
            "POST",
            self._url("/files"),
            files={
                "file": (f"loom-batch-{tag[:16]}.jsonl", batch_input_file(items, self.endpoint))
            },
            data={"purpose": "batch"},
        )
        file_id = upload.get("id")
        if not isinstance(file_id, str):
            raise ProviderError(
                "OpenAI answered the batch file upload without a file id. Check base_url.",
                code="malformed_response",
                provider=self.vendor,
            )
        body = {
            "input_file_id": file_id,
            "endpoint": self.endpoint,
            "completion_window": "24h",
            "metadata": {TAG_KEY: tag},
        }
        data = await self._json(
            "POST",
            self._url("/batches"),
            content=encode_json(body),
            headers={"content-type": "application/json"},
            idempotent=False,
        )
        return self._state(data, [i.custom_id for i in items])

    async def find(self, tag: str, items: Sequence[BatchItem]) -> BatchState | None:
        """The newest batch (of the last 100) tagged ``tag`` that did not fail, expire or get
        cancelled, or None."""
        data = await self._json("GET", self._url("/batches?limit=100"))
        for batch in data.get("data") or ():
            if not isinstance(batch, dict) or not isinstance(batch.get("id"), str):
                continue
            metadata = batch.get("metadata")
            if not isinstance(metadata, dict) or metadata.get(TAG_KEY) != tag:
                continue
            if batch.get("endpoint") != self.endpoint:
                continue
            if batch.get("status") in {"failed", "expired", "cancelled", "cancelling"}:
                continue
            return self._state(batch, [i.custom_id for i in items])
        return None

    async def poll(self, state: BatchState) -> BatchState:
        """``GET /v1/batches/{id}``."""
        data = await self._json("GET", self._url(f"/batches/{state.batch_id}"))
        return self._state(data, state.custom_ids)

    def _state(self, data: dict[str, Any], custom_ids: Sequence[str]) -> BatchState:
        if not isinstance(data.get("id"), str):
            raise ProviderError(
                "OpenAI answered a batch request without a batch id. Check base_url.",
                code="malformed_response",
                provider=self.vendor,
            )
        return openai_batch_state(data, custom_ids)

    async def lines(
        self, state: BatchState
    ) -> AsyncIterator[tuple[str, LlmResponse | ProviderError]]:
        """The lines of the output file, then of the error file."""
        for key in ("output_file_id", "error_file_id"):
            file_id = state.results.get(key)
            if not file_id:
                continue
            async for line in self._jsonl(self._url(f"/files/{file_id}/content")):
                yield self._outcome(line)

    def _outcome(self, line: dict[str, Any]) -> tuple[str, LlmResponse | ProviderError]:
        custom_id = str(line.get("custom_id"))
        response = line.get("response")
        error = line.get("error")
        if isinstance(response, dict):
            status = response.get("status_code")
            body = response.get("body")
            if isinstance(status, int) and 200 <= status < 300:
                try:
                    return custom_id, self._parse(body)
                except ProviderError as exc:
                    return custom_id, exc
            error_type, text, details = openai_error_fields(body)
            request_id = response.get("request_id")
            if request_id:
                details["request_id"] = request_id
            return custom_id, item_error(
                self.vendor,
                custom_id,
                "batch_item_errored",
                f"HTTP {status} ({error_type or 'error'}): {text}. Fix the request, or run "
                "the map again to retry the failed items.",
                status=status if isinstance(status, int) else None,
                error_type=error_type,
                retryable=openai_error_retryable(status if isinstance(status, int) else None, body),
                **details,
            )
        vendor_code = error.get("code") if isinstance(error, dict) else None
        message = error.get("message") if isinstance(error, dict) else None
        code = {"batch_expired": "batch_item_expired", "batch_cancelled": "batch_item_canceled"}
        return custom_id, item_error(
            self.vendor,
            custom_id,
            code.get(str(vendor_code), "batch_item_errored"),
            f"{vendor_code or 'error'}: {message or 'no message'}. Run the map again to send it "
            "in a new batch.",
            vendor_code=vendor_code,
            retryable=vendor_code in code,
        )
