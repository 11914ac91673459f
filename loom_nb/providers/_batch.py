"""Vendor batch APIs: what Anthropic's Message Batches and OpenAI's Batch API have in common.

Both take many requests at once at half the price, answer within 24 hours, and are driven the
same way: submit the items (each with a ``custom_id``), poll the batch's status, then read one
result line per item. ``BatchApi`` is that shape; ``anthropic_batch`` and ``openai_batch`` are
the two vendors' wire formats behind it, and ``batches.batch_api(provider)`` picks one for a
provider (any other provider is a ``ConfigurationError`` naming the remedy, before any I/O).

Design decisions:

- An item's body is built by the provider's own ``wire_body``: the same capability check,
  guard (decision 7), settings and structured-output fields as ``complete`` would send, so a
  batch never carries what a live call would refuse.
- ``BatchState`` is plain data (ids, the vendor's status, request counts, where the results
  are): the caller journals it, and a process that resumes later polls the same batch from it.
- Submitting is not idempotent (a second batch is paid twice), so a submit is retried only when
  the vendor answered with a retryable error status or the connection was never made; a timeout
  after the body was sent is ``ProviderError(code="batch_submit_uncertain")``, never a silent
  second batch. Polls and result downloads are idempotent and retried like any call.
- The API key goes only to the configured endpoint: a results URL on another host is not
  followed (the vendor's documented path on the configured host is used instead).
- A result becomes an ``LlmResponse`` through the provider's own response parser, marked with
  ``provider_data["batch_id"]`` so pricing applies the batch discount; an item that did not
  succeed becomes a ``ProviderError`` whose code says why (``batch_item_errored``,
  ``batch_item_expired``, ``batch_item_canceled``, ``batch_item_missing``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import httpx
from pydantic import BaseModel, ConfigDict, Field

from loom_nb.content import LlmRequest, LlmResponse
from loom_nb.errors import ProviderError
from loom_nb.providers._http import _transport_error, decode_json, redact_error, speaker
from loom_nb.providers._read import read_body, read_whole, too_large, with_body
from loom_nb.providers._structured import validate_output
from loom_nb.settings import ModelSettings

if TYPE_CHECKING:
    from loom_nb.providers._http_provider import HttpProvider

__all__ = [
    "BATCH_ID_FIELD",
    "BatchApi",
    "BatchCounts",
    "BatchItem",
    "BatchState",
    "item_error",
]

BATCH_ID_FIELD = "batch_id"
"""The ``LlmResponse.provider_data`` key naming the batch that answered (pricing reads it)."""


class BatchCounts(BaseModel):
    """How many of a batch's requests are in each state (the vendor's tallies, mapped)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    total: int = 0
    """Requests in the batch."""
    processing: int = 0
    """Requests not finished yet."""
    succeeded: int = 0
    """Requests answered."""
    errored: int = 0
    """Requests that ended with an error."""
    canceled: int = 0
    """Requests canceled before they ran."""
    expired: int = 0
    """Requests the vendor did not reach within 24 hours."""


class BatchState(BaseModel):
    """One submitted batch as the vendor last described it; plain data, journaled by the caller."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    vendor: str
    """``"Anthropic"`` or ``"OpenAI"``."""
    batch_id: str
    """The vendor's id of the batch (``msgbatch_...``, ``batch_...``)."""
    status: str
    """The vendor's own status word (``in_progress``, ``ended``, ``validating``, ``completed`` ...)."""
    ended: bool = False
    """Whether processing has ended (results can be read, or the batch failed as a whole)."""
    counts: BatchCounts = Field(default_factory=BatchCounts)
    """Request tallies."""
    results: dict[str, str | None] = Field(default_factory=dict)
    """Where the results are: ``results_url`` (Anthropic), ``output_file_id`` and
    ``error_file_id`` (OpenAI)."""
    custom_ids: list[str] = Field(default_factory=list)
    """The items submitted, in order (an item with no result line is ``batch_item_missing``)."""
    error: str | None = None
    """Why the whole batch failed, when it did (OpenAI ``failed``: its validation errors)."""


class BatchItem(BaseModel):
    """One request of a batch: its ``custom_id`` and the exact body ``complete`` would send."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    custom_id: str
    """Unique within the batch; ``[A-Za-z0-9_-]{1,64}`` (both vendors accept that)."""
    body: dict[str, Any]
    """The vendor body, built by the provider's ``wire_body``."""


def item_error(
    vendor: str, custom_id: str, code: str, message: str, **details: Any
) -> ProviderError:
    """The ``ProviderError`` of one item that did not succeed."""
    return ProviderError(
        f"{vendor} batch item {custom_id!r}: {message}",
        code=code,
        provider=vendor,
        custom_id=custom_id,
        **details,
    )


class BatchApi(ABC):
    """A vendor's batch API bound to one provider (its client, key, endpoint and parsers)."""

    vendor: ClassVar[str]
    max_requests: ClassVar[int]
    """The most requests the vendor takes in one batch."""
    max_bytes: ClassVar[int]
    """The largest batch the vendor takes, in bytes of request bodies."""
    can_find: ClassVar[bool] = False
    """Whether ``find`` can recognise a batch submitted earlier (by its tag)."""

    def __init__(self, provider: HttpProvider) -> None:
        self.provider = provider

    # -- items ----------------------------------------------------------------------------------

    def item(
        self,
        custom_id: str,
        request: LlmRequest | Mapping[str, Any],
        *,
        settings: ModelSettings | None = None,
        output_type: type[BaseModel] | None = None,
    ) -> BatchItem:
        """The batch item for ``request``: the body ``complete`` would send (checks and guard
        included, so a refusal comes here, before any I/O)."""
        body = self.provider.wire_body(request, settings=settings, output_type=output_type)
        return BatchItem(custom_id=custom_id, body=body)

    # -- the vendor's part ----------------------------------------------------------------------

    @abstractmethod
    async def submit(self, items: Sequence[BatchItem], *, tag: str) -> BatchState:
        """Create the batch; ``tag`` (a digest of the items) lets ``find`` recognise it later."""

    async def find(self, tag: str, items: Sequence[BatchItem]) -> BatchState | None:
        """A batch submitted earlier with ``tag`` and still usable, or None (the default: the
        vendor cannot tell)."""
        return None

    @abstractmethod
    async def poll(self, state: BatchState) -> BatchState:
        """The batch's current state."""

    @abstractmethod
    def lines(self, state: BatchState) -> AsyncIterator[tuple[str, LlmResponse | ProviderError]]:
        """Each result as ``(custom_id, response or error)``, in the vendor's order."""

    async def results(
        self,
        state: BatchState,
        output_types: Mapping[str, type[BaseModel] | None] | None = None,
    ) -> dict[str, LlmResponse | ProviderError | Exception]:
        """Every submitted item's outcome by ``custom_id``.

        A response is marked with the batch id; with an ``output_types`` entry its text is
        validated (``StructuredOutputError`` as that item's outcome on a mismatch). An item with
        no result line is ``batch_item_missing``.
        """
        if state.error is not None:
            failure = ProviderError(
                f"the {self.vendor} batch {state.batch_id} failed as a whole: {state.error}. Fix "
                "the requests and run the map again.",
                code="batch_failed",
                provider=self.vendor,
                batch_id=state.batch_id,
            )
            return dict.fromkeys(state.custom_ids, failure)
        outcomes: dict[str, LlmResponse | ProviderError | Exception] = {}
        async for custom_id, outcome in self.lines(state):
            if isinstance(outcome, LlmResponse):
                data = {**outcome.provider_data, BATCH_ID_FIELD: state.batch_id}
                outcome = outcome.model_copy(update={"provider_data": data})
                wanted = (output_types or {}).get(custom_id)
                if wanted is not None:
                    try:
                        outcome = validate_output(outcome, wanted, vendor=self.vendor)
                    except Exception as exc:  # StructuredOutputError: this item's outcome
                        outcomes[custom_id] = exc
                        continue
            outcomes[custom_id] = outcome
        for custom_id in state.custom_ids:
            if custom_id not in outcomes:
                outcomes[custom_id] = item_error(
                    self.vendor,
                    custom_id,
                    "batch_item_missing",
                    "the batch ended without a result for this item. Run the map again to retry it.",
                )
        return outcomes

    # -- HTTP -----------------------------------------------------------------------------------

    def _url(self, path: str) -> str:
        base = self.provider.base_url or self.provider._DEFAULT_BASE_URL
        return base.rstrip("/") + path

    def _same_host(self, url: str) -> bool:
        return httpx.URL(url).host == httpx.URL(self._url("/")).host

    async def _send(
        self,
        method: str,
        url: str,
        *,
        content: bytes | None = None,
        headers: Mapping[str, str] | None = None,
        files: Mapping[str, Any] | None = None,
        data: Mapping[str, str] | None = None,
        idempotent: bool = True,
    ) -> httpx.Response:
        """Send one request and return the 2xx response, retrying what is safe to retry.

        A non-idempotent call (a submit) is retried only after a retryable error status or a
        failed connection; a timeout once the body was sent is ``batch_submit_uncertain``.
        """
        provider = self.provider
        policy = provider._policy
        who = speaker(self.vendor, url)[0]
        retry = 0
        try:
            while True:
                request = provider._client.build_request(
                    method,
                    url,
                    headers={**provider._headers(), **(headers or {})},
                    content=content,
                    files=files,
                    data=data,
                    timeout=provider._timeout,
                )
                response: httpx.Response | None = None
                try:
                    response = await read_whole(
                        provider._client,
                        request,
                        who=who,
                        deadline=provider._request_deadline,
                        limit=provider._max_response_bytes,
                    )
                except httpx.HTTPError as exc:
                    unsent = isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout)
                    if not idempotent and not unsent:
                        raise self._uncertain(url) from exc
                    if retry >= policy.max_retries:
                        raise _transport_error(exc, self.vendor, url) from exc
                except ProviderError as exc:
                    exc.provider = exc.provider or self.vendor
                    if not idempotent and exc.code == "request_timeout":
                        raise self._uncertain(url) from exc
                    if not exc.retryable or retry >= policy.max_retries:
                        raise
                else:
                    if response.is_success:
                        return response
                    error = provider._parse_error(response)
                    if not error.retryable or retry >= policy.max_retries:
                        raise error
                await policy.sleep(policy.delay(retry, response))
                retry += 1
        except ProviderError as exc:
            raise redact_error(exc, provider._secrets()) from exc.__cause__

    def _uncertain(self, url: str) -> ProviderError:
        return ProviderError(
            f"the request creating a {self.vendor} batch at {url} was sent but not answered, so "
            "loom_nb cannot tell whether the batch exists. Nothing was retried (a second batch "
            "would be paid twice): look for it in the vendor's console, cancel it if it is there, "
            "then run the map again.",
            code="batch_submit_uncertain",
            provider=self.vendor,
            retryable=False,
        )

    async def _json(self, method: str, url: str, **kwargs: Any) -> Any:
        response = await self._send(method, url, **kwargs)
        raw = response.content  # raw-content: httpx.Response.content is bytes
        data = decode_json(raw, provider=self.vendor, what="a batch answer")
        if not isinstance(data, dict):
            raise ProviderError(
                f"{self.vendor} answered a batch request with JSON that is not an object. Check "
                "base_url.",
                code="malformed_response",
                provider=self.vendor,
            )
        return data

    async def _jsonl(self, url: str) -> AsyncIterator[dict[str, Any]]:
        """The JSON objects of a JSON Lines body (a results file), one per non-empty line.

        The file is streamed: memory holds one line at a time, and no line may exceed the
        provider's ``max_response_bytes`` (a whole results file may: a 100,000-item batch's is
        hundreds of megabytes). A failed download starts again from the top (retried like any
        idempotent call); lines seen twice are harmless, results are keyed by ``custom_id``.
        """
        provider = self.provider
        policy = provider._policy
        who = speaker(self.vendor, url)[0]
        limit = provider._max_response_bytes
        retry = 0
        while True:
            response: httpx.Response | None = None
            try:
                request = provider._client.build_request(
                    "GET", url, headers=provider._headers(), timeout=provider._timeout
                )
                response = await provider._client.send(request, stream=True)
                try:
                    if not response.is_success:
                        raw = await read_body(response, limit=limit, who=who, cut=True)
                        raise provider._parse_error(with_body(response, raw))
                    number = 0
                    async for line in _lines(response, limit, who):
                        number += 1
                        if line.strip():
                            yield self._object(line, number)
                    return
                finally:
                    await response.aclose()
            except httpx.HTTPError as exc:
                if retry >= policy.max_retries:
                    error = _transport_error(exc, self.vendor, url)
                    raise redact_error(error, provider._secrets()) from exc
            except ProviderError as exc:
                exc.provider = exc.provider or self.vendor
                if not exc.retryable or retry >= policy.max_retries:
                    raise redact_error(exc, provider._secrets()) from exc.__cause__
            await policy.sleep(policy.delay(retry, response))
            retry += 1

    def _object(self, line: bytes, number: int) -> dict[str, Any]:
        value = decode_json(line, provider=self.vendor, what=f"line {number} of batch results")
        if not isinstance(value, dict):
            raise ProviderError(
                f"line {number} of the {self.vendor} batch results is not a JSON object.",
                code="malformed_response",
                provider=self.vendor,
            )
        return value

    def _parse(self, body: Any) -> LlmResponse:
        """An answer body, read by the provider's own parser."""
        if self.provider._REQUIRES_OBJECT and not isinstance(body, dict):
            raise ProviderError(
                f"{self.vendor} batch result body is not a JSON object.",
                code="malformed_response",
                provider=self.vendor,
            )
        return self.provider._parse_response(body)


async def _lines(response: httpx.Response, limit: int | None, who: str) -> AsyncIterator[bytes]:
    """The lines of a streamed body, each at most ``limit`` bytes (``response_too_large``)."""
    pending = b""
    async for chunk in response.aiter_bytes():
        pending += chunk
        *complete, pending = pending.split(b"\n")
        for line in complete:
            if limit is not None and len(line) > limit:
                raise too_large(who, "a line of batch results", limit)
            yield line
        if limit is not None and len(pending) > limit:
            raise too_large(who, "a line of batch results", limit)
    if pending:
        yield pending
