"""The provider protocol, stream chunks and ``collect_stream`` (ADR 0120 decisions 2, 6, 8).

A provider maps the one canonical request shape to a vendor's wire format and back. It declares
what media it accepts (``capabilities``) and refuses anything else before any I/O. Streaming
yields ``LlmStreamChunk``s: text deltas, reasoning deltas (the model's visible thinking, never
part of the answer text), tool deltas (a call's id and name first, then fragments of its input
JSON), a reset when a retried attempt starts over, and one terminal chunk carrying
the whole response, which is all that is ever journaled.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict

from loom_nb._strict import StrictModel
from loom_nb.capabilities import Capabilities
from loom_nb.content import LlmRequest, LlmResponse, canonical_json
from loom_nb.errors import ConfigurationError, ProviderError
from loom_nb.settings import ModelSettings

__all__ = ["LlmProvider", "LlmStreamChunk", "ToolDelta", "chunks_of", "collect_stream"]


class ToolDelta(BaseModel):
    """A fragment of a tool call while it streams.

    The first delta of a call carries its ``id`` and ``name`` (and usually an empty
    ``input_json``); later ones carry only the next fragment of the input JSON.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    index: int
    """Position of the call in the response (0 for the first call)."""
    id: str | None = None
    """The call's id, on the first delta of the call."""
    name: str | None = None
    """The tool's name, on the first delta of the call."""
    input_json: str = ""
    """The next fragment of the call's input JSON (concatenate fragments per index)."""


class LlmStreamChunk(StrictModel):
    """One event of a streamed model call."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["text", "reasoning", "tool_delta", "reset", "done"]
    """``text``: a text delta; ``reasoning``: a delta of the model's visible thinking (it ends up
    in ``response.reasoning``, not in ``response.content``); ``tool_delta``: a tool-call fragment;
    ``reset``: a retry started over, discard earlier deltas; ``done``: the terminal chunk with the
    whole response."""
    text: str = ""
    """The text delta (``kind == "text"``) or the reasoning delta (``kind == "reasoning"``)."""
    tool_delta: ToolDelta | None = None
    """The tool-call fragment (``kind == "tool_delta"``)."""
    response: LlmResponse | None = None
    """The assembled response (``kind == "done"``)."""


@runtime_checkable
class LlmProvider(Protocol):
    """What the journal, the agent loop and the notebook views need from a model provider."""

    @property
    def capabilities(self) -> Capabilities:
        """The media types this provider accepts; anything else is refused before any I/O."""
        ...

    async def complete(
        self,
        request: LlmRequest,
        *,
        settings: ModelSettings | None = None,
        output_type: type[BaseModel] | None = None,
    ) -> LlmResponse:
        """Send the request and return the whole response.

        ``settings`` override the request's (and the provider's defaults) field by field;
        ``output_type`` asks for structured output and sets ``response.output``.
        """
        ...

    def stream(
        self,
        request: LlmRequest,
        *,
        settings: ModelSettings | None = None,
        output_type: type[BaseModel] | None = None,
    ) -> AsyncIterator[LlmStreamChunk]:
        """Send the request and yield chunks as they arrive; the last one is ``done``."""
        ...


TextCallback = Callable[[str], Awaitable[None] | None]
ToolDeltaCallback = Callable[[ToolDelta], Awaitable[None] | None]
ResetCallback = Callable[[], Awaitable[None] | None]


async def _call(callback: Callable[..., Awaitable[None] | None] | None, *args: object) -> None:
    if callback is None:
        return
    result = callback(*args)
    if result is not None:
        await result


async def collect_stream(
    stream: AsyncIterator[LlmStreamChunk],
    *,
    on_text: TextCallback | None = None,
    on_tool_delta: ToolDeltaCallback | None = None,
    on_tool_reset: ResetCallback | None = None,
    on_reasoning: TextCallback | None = None,
) -> LlmResponse:
    """Drain a stream, calling the callbacks as deltas arrive, and return the terminal response.

    ``on_reasoning`` gets the reasoning deltas (the model's visible thinking), ``on_text`` only
    the answer's text. Callbacks may be plain functions or coroutines. A ``reset`` chunk (a retried attempt)
    reaches ``on_tool_reset`` so the consumer can discard the failed attempt's fragments.
    A stream that ends without a ``done`` chunk raises ``ProviderError``.
    """
    if not hasattr(stream, "__aiter__"):
        raise ConfigurationError(
            f"collect_stream() takes the async iterator provider.stream(request) returns, not "
            f"{type(stream).__name__}.",
            code="invalid_argument",
            argument="stream",
        )
    for name, callback in (
        ("on_text", on_text),
        ("on_tool_delta", on_tool_delta),
        ("on_tool_reset", on_tool_reset),
        ("on_reasoning", on_reasoning),
    ):
        if callback is not None and not callable(callback):
            raise ConfigurationError(
                f"collect_stream(): {name} must be a function or None, not "
                f"{type(callback).__name__}.",
                code="invalid_argument",
                argument=name,
            )
    response: LlmResponse | None = None
    async for chunk in stream:
        if not isinstance(chunk, LlmStreamChunk):
            raise ProviderError(
                f"the stream yielded {type(chunk).__name__}, not LlmStreamChunk; a provider's "
                "stream() must yield LlmStreamChunk values.",
                code="bad_stream_chunk",
            )
        if chunk.kind == "text":
            await _call(on_text, chunk.text)
        elif chunk.kind == "reasoning":
            await _call(on_reasoning, chunk.text)
        elif chunk.kind == "tool_delta" and chunk.tool_delta is not None:
            await _call(on_tool_delta, chunk.tool_delta)
        elif chunk.kind == "reset":
            await _call(on_tool_reset)
        elif chunk.kind == "done":
            response = chunk.response
    if response is None:
        raise ProviderError(
            "the stream ended without a final response; the connection may have dropped. "
            "Retry the call, or use complete() instead of stream().",
            code="stream_incomplete",
        )
    return response


def chunks_of(response: LlmResponse) -> list[LlmStreamChunk]:
    """A whole response as the chunks a stream of it would have yielded, ``done`` last."""
    chunks = [LlmStreamChunk(kind="reasoning", text=p.text) for p in response.reasoning if p.text]
    text = response.content  # raw-content: LlmResponse.content is str
    if text:
        chunks.append(LlmStreamChunk(kind="text", text=text))
    for index, call in enumerate(response.tool_calls):
        first = ToolDelta(index=index, id=call.id, name=call.name)
        rest = ToolDelta(index=index, input_json=canonical_json(call.input))
        chunks += [
            LlmStreamChunk(kind="tool_delta", tool_delta=first),
            LlmStreamChunk(kind="tool_delta", tool_delta=rest),
        ]
    chunks.append(LlmStreamChunk(kind="done", response=response))
    return chunks
