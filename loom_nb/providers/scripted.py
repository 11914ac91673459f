"""``ScriptedProvider``: an offline, deterministic provider that plays a script of turns.

What notebooks on Binder, the demo and the tests run without a key. It behaves like a shipped
provider where that matters (ADR 0120 decisions 6, 7, 8): it checks the request against its
capabilities and guards it before "answering", refuses an unresolved ref (providers only ever see
inline data), records every request as it saw it (after its guard) in ``requests``, and streams
text and tool-call deltas the way a vendor would.

Its default capabilities declare ``image/*``, ``audio/*``, ``application/pdf`` and ``text/plain``,
because it is a stand-in for a multimodal model in notebooks; pass ``capabilities=Capabilities()``
to play a text-only model (then media is refused like on any provider that did not declare it).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from typing import Any, TypeAlias

from pydantic import BaseModel, ValidationError

from loom_nb._args import check_type
from loom_nb.capabilities import Capabilities, guard_supported
from loom_nb.content import (
    LlmRequest,
    LlmResponse,
    canonical_json,
    content_error,
)
from loom_nb.errors import ConfigurationError, ContentValidationError, ProviderError
from loom_nb.guard import checked_already, iter_media
from loom_nb.limits import MAX_RESOLVED_BYTES
from loom_nb.providers._base import LlmStreamChunk, ToolDelta
from loom_nb.providers._structured import check_output_type, effective_request, validate_output
from loom_nb.providers._wire_util import inline_data
from loom_nb.settings import ModelSettings, merge_settings

__all__ = ["SCRIPTED_CAPABILITIES", "ScriptedProvider", "Turn"]

SCRIPTED_CAPABILITIES = Capabilities(
    image=["image/*"], audio=["audio/*"], file=["application/pdf", "text/plain"]
)
"""What a ``ScriptedProvider`` declares unless told otherwise: a multimodal stand-in."""

Turn: TypeAlias = (
    LlmResponse | Mapping[str, Any] | Callable[[LlmRequest], "LlmResponse | Mapping[str, Any]"]
)
"""A scripted turn: a response, a dict like ``{"text": ..., "tool_calls": [...]}``, or a function
of the (guarded) request returning one of those."""

_TURN_KEYS = frozenset(
    {"text", "content", "tool_calls", "stop_reason", "usage", "model", "provider_data", "reasoning"}
)


def _response_of(turn: LlmResponse | Mapping[str, Any], where: str) -> LlmResponse:
    if isinstance(turn, LlmResponse):
        return turn
    if not isinstance(turn, Mapping):
        raise ContentValidationError(
            f"{where}: a scripted turn is an LlmResponse, a dict or a function of the request, "
            f"not {type(turn).__name__}.",
            field=where,
        )
    unknown = set(turn) - _TURN_KEYS
    if unknown or ("text" in turn and "content" in turn):
        raise ContentValidationError(
            f"{where}: a scripted turn takes the keys {sorted(_TURN_KEYS)} (text or content, not "
            f"both); got {sorted(turn)}.",
            field=where,
        )
    data = dict(turn)
    if "text" in data:
        data["content"] = data.pop("text")
    data.setdefault("stop_reason", "tool_use" if data.get("tool_calls") else "end_turn")
    data.setdefault("model", "scripted")
    try:
        return LlmResponse.model_validate(data)
    except ValidationError as exc:
        raise content_error(exc, f"scripted turn ({where})") from exc


class ScriptedProvider:
    """Plays ``turns`` in order, one per ``complete``/``stream`` call; no network, no key.

    ``ScriptedProvider([{"tool_calls": [{"id": "t1", "name": "f", "input": {}}]}, {"text": "done"}])``.
    ``chunk_size`` splits streamed text and tool-input JSON into fragments of that many characters
    (None: one fragment each). Running out of turns raises ``ProviderError(code="script_exhausted")``.
    """

    def __init__(
        self,
        turns: Iterable[Turn],
        *,
        capabilities: Capabilities | None = None,
        chunk_size: int | None = None,
        settings: ModelSettings | None = None,
    ) -> None:
        where = "ScriptedProvider()"
        if isinstance(turns, str | bytes | dict) or not isinstance(turns, Iterable):
            raise ContentValidationError(
                f"{where}: turns must be a list of LlmResponse values or dicts such as "
                f"{{'text': '...'}}, not {type(turns).__name__}.",
                code="invalid_argument",
                field="turns",
            )
        check_type(
            chunk_size,
            int,
            name="chunk_size",
            where=where,
            error=ContentValidationError,
            optional=True,
        )
        check_type(
            capabilities,
            Capabilities,
            name="capabilities",
            where=where,
            error=ConfigurationError,
            optional=True,
        )
        check_type(
            settings,
            ModelSettings,
            name="settings",
            where=where,
            error=ConfigurationError,
            optional=True,
        )
        if chunk_size is not None and chunk_size < 1:
            raise ContentValidationError(
                f"chunk_size must be a positive number of characters or None, not {chunk_size}.",
                field="chunk_size",
            )
        self._turns: list[LlmResponse | Callable[[LlmRequest], Any]] = []
        for i, turn in enumerate(turns):
            self._turns.append(turn if callable(turn) else _response_of(turn, f"turns[{i}]"))
        self._settings = merge_settings(settings)
        self._capabilities = capabilities if capabilities is not None else SCRIPTED_CAPABILITIES
        self._chunk_size = chunk_size
        self._played = 0
        self.requests: list[LlmRequest] = []
        """Every request received, as this provider saw it after its own guard."""

    def __repr__(self) -> str:
        return f"ScriptedProvider(turns={len(self._turns)}, played={self._played})"

    @property
    def capabilities(self) -> Capabilities:
        """The media this provider accepts (multimodal by default; see the module docstring)."""
        return self._capabilities

    @property
    def settings(self) -> ModelSettings | None:
        """The construction defaults, merged under each request's and call's settings."""
        return self._settings

    @property
    def remaining(self) -> int:
        """How many scripted turns are left."""
        return len(self._turns) - self._played

    def _answer(
        self,
        request: LlmRequest | Mapping[str, Any],
        settings: ModelSettings | None,
        output_type: type[BaseModel] | None,
    ) -> LlmResponse:
        checked_type = check_output_type(output_type)
        parsed = effective_request(request, self._settings, settings, checked_type)
        if checked_already(parsed, self._capabilities, MAX_RESOLVED_BYTES, MAX_RESOLVED_BYTES):
            guarded = parsed  # the journaled call checked this very request, refs resolved
        else:
            # As on a shipped provider: the capability check, structure and provenance, with the
            # resolve budget as the cap (the inline caps bound the journaled request, before refs
            # are resolved).
            guarded = guard_supported(
                parsed,
                self._capabilities,
                provider="scripted",
                max_inline_bytes=MAX_RESOLVED_BYTES,
                max_inline_total_bytes=MAX_RESOLVED_BYTES,
            )
            for location in iter_media(guarded):
                # A ref is refused, as on the wire: providers only ever see inline data.
                inline_data(location.part, vendor="scripted", where=location.path)
        self.requests.append(guarded)
        if self._played >= len(self._turns):
            raise ProviderError(
                f"the ScriptedProvider played all {len(self._turns)} turns and was called again "
                f"(call #{self._played + 1}). Add a turn to the script for this call.",
                code="script_exhausted",
                provider="scripted",
            )
        turn = self._turns[self._played]
        self._played += 1
        if callable(turn):
            turn = _response_of(turn(guarded), f"turns[{self._played - 1}] (returned)")
        if guarded.output_schema is not None:
            return validate_output(turn, checked_type, vendor="scripted")
        return turn

    async def complete(
        self,
        request: LlmRequest | Mapping[str, Any],
        *,
        settings: ModelSettings | None = None,
        output_type: type[BaseModel] | None = None,
    ) -> LlmResponse:
        """The next scripted response.

        ``settings`` are merged over the request's and the construction defaults and recorded on
        the request in ``requests`` (a script plays the same whatever they say). With
        ``output_type`` the scripted text is validated into it as a vendor's answer would be.
        """
        return self._answer(request, settings, output_type)

    async def stream(
        self,
        request: LlmRequest | Mapping[str, Any],
        *,
        settings: ModelSettings | None = None,
        output_type: type[BaseModel] | None = None,
    ) -> AsyncIterator[LlmStreamChunk]:
        """The next scripted response as reasoning deltas, text deltas, tool deltas (id and name,
        then input JSON), then ``done``."""
        response = self._answer(request, settings, output_type)
        for part in response.reasoning:
            for piece in self._split(part.text):
                yield LlmStreamChunk(kind="reasoning", text=piece)
        for piece in self._split(response.content):  # raw-content: LlmResponse.content is str
            yield LlmStreamChunk(kind="text", text=piece)
        for index, call in enumerate(response.tool_calls):
            first = ToolDelta(index=index, id=call.id, name=call.name)
            yield LlmStreamChunk(kind="tool_delta", tool_delta=first)
            for piece in self._split(canonical_json(call.input)):
                yield LlmStreamChunk(
                    kind="tool_delta", tool_delta=ToolDelta(index=index, input_json=piece)
                )
        yield LlmStreamChunk(kind="done", response=response)

    def _split(self, text: str) -> list[str]:
        if not text:
            return []
        size = self._chunk_size or len(text)
        return [text[i : i + size] for i in range(0, len(text), size)]
