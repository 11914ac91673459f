"""Anthropic's Message Batches API (``/v1/messages/batches``) behind ``BatchApi``.

The wire format, as the API reference describes it and the ``anthropic`` SDK types it
(``anthropic.types.messages.MessageBatch``, ``MessageBatchIndividualResponse``):

- submit: ``POST /v1/messages/batches`` with ``{"requests": [{"custom_id", "params"}]}``, where
  ``params`` is a whole Messages API body; the answer is a ``message_batch`` object;
- poll: ``GET /v1/messages/batches/{id}``: ``processing_status`` is ``in_progress``,
  ``canceling`` or ``ended``; ``request_counts`` tallies ``processing``, ``succeeded``,
  ``errored``, ``canceled`` and ``expired``; ``results_url`` is set once it ended;
- results: a JSON Lines file, one ``{"custom_id", "result"}`` per request in any order, where
  ``result.type`` is ``succeeded`` (with the ``message``), ``errored`` (with an ``error``
  response ``{"type": "error", "error": {type, message}}``), ``canceled`` or ``expired``.

Limits: 100,000 requests or 256 MB per batch (the batch-processing guide). Pricing: 50% of the
standard rates, which ``genai-prices`` knows as the ``processing: batch`` price variant.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any, ClassVar

from loom_nb.content import LlmResponse
from loom_nb.errors import ProviderError
from loom_nb.providers._batch import BatchApi, BatchCounts, BatchItem, BatchState, item_error
from loom_nb.providers._http import encode_json
from loom_nb.providers.anthropic_wire import RETRYABLE_ERROR_TYPES, anthropic_error_fields

__all__ = ["AnthropicBatchApi", "anthropic_batch_state"]

_PATH = "/v1/messages/batches"


def anthropic_batch_state(data: dict[str, Any], custom_ids: Sequence[str]) -> BatchState:
    """The ``BatchState`` of a ``message_batch`` object."""
    counts = data.get("request_counts")
    counts = counts if isinstance(counts, dict) else {}
    tallies = {
        name: counts.get(name) if isinstance(counts.get(name), int) else 0
        for name in ("processing", "succeeded", "errored", "canceled", "expired")
    }
    status = str(data.get("processing_status") or "unknown")
    return BatchState(
        vendor="Anthropic",
        batch_id=str(data["id"]),
        status=status,
        ended=status == "ended",
        counts=BatchCounts(total=sum(tallies.values()), **tallies),
        results={"results_url": data.get("results_url")},
        custom_ids=list(custom_ids),
    )


class AnthropicBatchApi(BatchApi):
    """Message Batches for an ``AnthropicProvider`` (its client, key, base URL and parser)."""

    vendor: ClassVar[str] = "Anthropic"
    max_requests: ClassVar[int] = 100_000
    max_bytes: ClassVar[int] = 256 * 1000 * 1000

    async def submit(self, items: Sequence[BatchItem], *, tag: str) -> BatchState:
        """``POST /v1/messages/batches`` with every item; the created batch's state."""
        body = {"requests": [{"custom_id": i.custom_id, "params": i.body} for i in items]}
        data = await self._json(
            "POST",
            self._url(_PATH),
            content=encode_json(body),
            headers={"content-type": "application/json"},
            idempotent=False,
        )
        return self._state(data, [i.custom_id for i in items])

    async def poll(self, state: BatchState) -> BatchState:
        """``GET /v1/messages/batches/{id}``."""
        data = await self._json("GET", self._url(f"{_PATH}/{state.batch_id}"))
        return self._state(data, state.custom_ids)

    def _state(self, data: dict[str, Any], custom_ids: Sequence[str]) -> BatchState:
        if not isinstance(data.get("id"), str):
            raise ProviderError(
                "Anthropic answered a batch request without a batch id. Check base_url.",
                code="malformed_response",
                provider=self.vendor,
            )
        return anthropic_batch_state(data, custom_ids)

    async def lines(
        self, state: BatchState
    ) -> AsyncIterator[tuple[str, LlmResponse | ProviderError]]:
        """The results file's lines (from ``results_url`` when it is on the configured host)."""
        url = state.results.get("results_url")
        if not url or not self._same_host(url):
            url = self._url(f"{_PATH}/{state.batch_id}/results")
        async for line in self._jsonl(url):
            yield self._outcome(line)

    def _outcome(self, line: dict[str, Any]) -> tuple[str, LlmResponse | ProviderError]:
        custom_id = str(line.get("custom_id"))
        result = line.get("result")
        kind = result.get("type") if isinstance(result, dict) else None
        if isinstance(result, dict) and kind == "succeeded":
            try:
                return custom_id, self._parse(result.get("message"))
            except ProviderError as exc:
                return custom_id, exc
        if isinstance(result, dict) and kind == "errored":
            error = result.get("error")
            error_type, message = anthropic_error_fields(error)
            request_id = error.get("request_id") if isinstance(error, dict) else None
            return custom_id, item_error(
                self.vendor,
                custom_id,
                "batch_item_errored",
                f"{error_type or 'error'}: {message}. Run the map again to retry the failed items.",
                error_type=error_type,
                retryable=error_type in RETRYABLE_ERROR_TYPES,
                **({"request_id": request_id} if request_id else {}),
            )
        if kind in ("canceled", "expired"):
            why = (
                "the batch was canceled before this request ran"
                if kind == "canceled"
                else "the vendor did not reach this request within 24 hours"
            )
            return custom_id, item_error(
                self.vendor,
                custom_id,
                f"batch_item_{kind}",
                f"{why}. Run the map again to send it in a new batch.",
                retryable=True,
            )
        return custom_id, item_error(
            self.vendor,
            custom_id,
            "malformed_response",
            f"a result of type {kind!r} that loom_nb cannot read.",
        )
