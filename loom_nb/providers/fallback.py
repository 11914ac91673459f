"""``FallbackProvider``: when a model is down or cannot take the request, ask the next one.

pydantic-ai's ``FallbackModel`` and LiteLLM's fallbacks switch models when one fails; here an
overloaded vendor used to end the turn (issue 29). ``FallbackProvider([primary, secondary, ...])``
is itself a provider: each call goes to the first provider, and on an error that says *this
provider cannot answer now or cannot answer this* it goes to the next one:

- the vendor is unavailable after the provider's own retries: HTTP 408, 429, 5xx and Anthropic's
  529, a timeout, an unreachable host, a stream that broke or timed out;
- a capability refusal, raised by that provider before any I/O: media it does not declare
  (``UnsupportedModalityError``: the first model cannot take the request's audio, say), a setting
  or an output type its model does not take (``ConfigurationError`` codes
  ``unsupported_setting``, ``unsupported_output_type``).

Anything else is raised at once, never retried elsewhere: a 400 (the request is wrong, and
another vendor would be as wrong to take it), an authentication failure, a guard refusal (the
request is unsafe whoever answers), an answer that does not validate. The error that ends the
call after some provider was skipped (every provider failed over, or the next one failed in a way
that never falls over) is raised as it is, with ``details["fallback_attempts"]`` listing each
attempt in order, that error's last.

There is no second pipeline: each provider still checks its capabilities and guards the request
itself. The fallback declares the union of their capabilities, so a request any of them can take
passes the journaled step's own check. The answer says who gave it: ``response.provider`` is the
label of the provider that answered (``"anthropic"``, ``"openai"``, ``"gemini"``, ...) and
``response.model`` its model; ``provider_data["fallback"]`` lists the providers skipped and why.
The journal keeps that response, so a replay shows the same provider and calls none of them.

Streaming: a provider that fails before any chunk is skipped silently; one that fails after
yielding some chunks is followed by a ``reset`` chunk, so a consumer drops its partial output
(ADR 0120 decision 8) before the next provider's chunks arrive.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

from pydantic import BaseModel

from loom_nb.capabilities import Capabilities
from loom_nb.content import LlmRequest, LlmResponse, parse_request
from loom_nb.errors import (
    ConfigurationError,
    LoomError,
    ProviderError,
    UnsupportedModalityError,
)
from loom_nb.providers._base import LlmProvider, LlmStreamChunk
from loom_nb.providers._defaults import default_max_tokens, default_thinking_budget
from loom_nb.settings import ModelSettings

__all__ = ["FallbackProvider", "falls_back"]

_CAPABILITY_CODES = frozenset({"unsupported_setting", "unsupported_output_type"})
"""``ConfigurationError`` codes that mean "this model cannot take the request" (before any I/O)."""

_UNAVAILABLE_CODES = frozenset(
    {
        "provider_timeout",
        "provider_unreachable",
        "provider_overloaded",
        "provider_server_error",
        "rate_limited",
        "request_timeout",
        "stream_timeout",
        "stream_incomplete",
    }
)
"""``ProviderError`` codes that mean "the vendor cannot answer now"."""


def falls_back(error: BaseException) -> bool:
    """Whether ``error`` from one provider sends the call to the next one (see the module doc)."""
    if isinstance(error, UnsupportedModalityError):
        return True
    if isinstance(error, ProviderError):
        status = error.status
        if status is not None:
            return status in (408, 429) or status >= 500
        return error.code in _UNAVAILABLE_CODES or (
            error.code == "stream_error" and error.retryable
        )
    if isinstance(error, ConfigurationError):
        return error.code in _CAPABILITY_CODES
    return False


def _label(provider: object) -> str:
    name = getattr(provider, "name", None)
    if isinstance(name, str) and name:
        return name
    base = type(provider).__name__.removesuffix("Provider")
    words = {"OpenAIResponses": "openai-responses", "OpenAI": "openai"}
    return words.get(base, base.lower() or "provider")


def _union(capabilities: Sequence[Capabilities]) -> Capabilities:
    merged: dict[str, list[str]] = {"image": [], "audio": [], "file": []}
    for declared in capabilities:
        for modality, patterns in merged.items():
            for pattern in getattr(declared, modality):
                if pattern not in patterns:
                    patterns.append(pattern)
    return Capabilities(**merged)


class FallbackProvider:
    """Try ``providers`` in order; go on to the next one only when a provider cannot answer.

    ``FallbackProvider([AnthropicProvider("claude-sonnet-4-5"), OpenAIProvider("gpt-4.1")])``.
    Falls over on unavailability (408, 429, 5xx, 529, timeouts, connection failures, broken
    streams) and on a capability refusal; never on a 400, an authentication error or a guard
    refusal. ``response.provider`` names the provider that answered (its ``name`` attribute, else
    ``"anthropic"``, ``"openai"``, ``"openai-responses"``, ``"gemini"``, ``"scripted"``; a
    repeated label gets ``#<position>``) and ``response.model`` its model. A ``FallbackProvider``
    given among the providers is taken as its own providers, in its place.
    """

    def __init__(self, providers: Sequence[LlmProvider], *, name: str | None = None) -> None:
        if isinstance(providers, str | bytes | Mapping) or not isinstance(providers, Sequence):
            raise ConfigurationError(
                f"FallbackProvider takes a list of providers, not {type(providers).__name__}.",
                code="invalid_argument",
            )
        members = list(providers)
        if not members:
            raise ConfigurationError(
                "FallbackProvider needs at least one provider.", code="invalid_argument"
            )
        for index, member in enumerate(members):
            if not callable(getattr(member, "complete", None)) or not hasattr(
                member, "capabilities"
            ):
                raise ConfigurationError(
                    f"FallbackProvider: providers[{index}] is {type(member).__name__}, not a "
                    "provider (it needs capabilities, complete() and stream()).",
                    code="invalid_provider",
                )
        if name is not None and (not isinstance(name, str) or not name.strip()):
            raise ConfigurationError(
                f"name is a non-empty string or None, not {name!r}.", code="invalid_argument"
            )
        # A fallback among the providers is its own providers in its place (the same order,
        # the same rules): an answer then names the provider that gave it, as pricing needs.
        members = [
            inner
            for m in members
            for inner in (m.providers if isinstance(m, FallbackProvider) else [m])
        ]
        self.providers: tuple[LlmProvider, ...] = tuple(members)
        """The providers, in the order they are tried (a fallback given among them: its own)."""
        self.name = name or "fallback"
        """This provider's own name (errors and views)."""
        labels = [_label(p) for p in members]
        self.labels: tuple[str, ...] = tuple(
            f"{label}#{i}" if labels.count(label) > 1 else label for i, label in enumerate(labels)
        )
        """Each provider's label, as ``response.provider`` names the one that answered."""
        self._capabilities = _union([p.capabilities for p in members])

    def __repr__(self) -> str:
        return f"FallbackProvider({', '.join(self.labels)})"

    @property
    def capabilities(self) -> Capabilities:
        """What at least one provider accepts (each still refuses what it does not)."""
        return self._capabilities

    @property
    def model(self) -> str | None:
        """The first provider's model (``response.model`` says which model answered)."""
        model = getattr(self.providers[0], "model", None)
        return model if isinstance(model, str) else None

    @property
    def max_tokens(self) -> int | None:
        """The most tokens any provider generates when a call sets no ``max_tokens``: the largest
        default (a provider's ``settings.max_tokens``, else its ``max_tokens``), None when a
        provider sets none (it may generate without bound).

        A spending limit's output cap is left off only when it is above this, so it bounds
        whichever provider answers.
        """
        values = [default_max_tokens(p) for p in self.providers]
        ints = [v for v in values if v is not None]
        return max(ints) if ints and len(ints) == len(values) else None

    @property
    def thinking_budget(self) -> int | None:
        """The largest thinking budget a provider's settings set when a call sets none, None
        when no provider sets one.

        Unlike ``max_tokens``, a provider without one does not make this unknown: it does not
        think, which asks for less. A spending limit whose output cap could not hold this refuses
        the call, as it would refuse that provider alone (and the provider, capped, would refuse
        the call itself, sending it to the next one).
        """
        values = [v for v in map(default_thinking_budget, self.providers) if v is not None]
        return max(values) if values else None

    @property
    def caches_prompts(self) -> bool:
        """Whether any provider maps ``ModelSettings.cache`` (each ignores what it cannot use)."""
        return any(getattr(p, "caches_prompts", False) is True for p in self.providers)

    def answered_by(self, response: LlmResponse) -> LlmProvider | None:
        """The provider that gave ``response`` (by its label), or None."""
        if response.provider in self.labels:
            return self.providers[self.labels.index(response.provider)]
        return None

    async def aclose(self) -> None:
        """Close every provider that can be closed."""
        for provider in self.providers:
            close = getattr(provider, "aclose", None)
            if callable(close):
                await close()

    async def complete(
        self,
        request: LlmRequest | Mapping[str, Any],
        *,
        settings: ModelSettings | None = None,
        output_type: type[BaseModel] | None = None,
    ) -> LlmResponse:
        """The first answer a provider gives, falling over as the class says."""
        request = parse_request(request)
        skipped: list[dict[str, Any]] = []
        for index, provider in enumerate(self.providers):
            try:
                response = await provider.complete(
                    request, **_call_kwargs(provider, settings, output_type)
                )
            except Exception as exc:
                self._skip(exc, index, skipped)
                continue
            return self._mark(response, index, skipped)
        raise AssertionError("unreachable: the last provider's error is raised")  # pragma: no cover

    async def stream(
        self,
        request: LlmRequest | Mapping[str, Any],
        *,
        settings: ModelSettings | None = None,
        output_type: type[BaseModel] | None = None,
    ) -> AsyncIterator[LlmStreamChunk]:
        """The first provider's stream that completes; a failed partial stream is reset."""
        request = parse_request(request)
        skipped: list[dict[str, Any]] = []
        for index, provider in enumerate(self.providers):
            emitted = False
            try:
                kwargs = _call_kwargs(provider, settings, output_type)
                async for chunk in provider.stream(request, **kwargs):
                    if chunk.kind == "done" and chunk.response is not None:
                        marked = self._mark(chunk.response, index, skipped)
                        yield chunk.model_copy(update={"response": marked})
                        return
                    yield chunk
                    emitted = emitted or chunk.kind != "reset"
                # a stream that ends without its final response broke: the next provider answers
                raise ProviderError(
                    f"the stream of {self.labels[index]} ended without a final response. Retry.",
                    code="stream_incomplete",
                    provider=self.labels[index],
                    retryable=True,
                )
            except Exception as exc:
                self._skip(exc, index, skipped)
                if emitted:
                    yield LlmStreamChunk(kind="reset")

    def _skip(self, error: Exception, index: int, skipped: list[dict[str, Any]]) -> None:
        """Note a provider that failed over; re-raise when the error is final or none is left.

        A raised error after a skipped provider lists every attempt (``fallback_attempts``), so
        the user sees why a later provider was asked at all.
        """
        entry = {
            "provider": self.labels[index],
            "code": getattr(error, "code", type(error).__name__),
            "message": str(error)[:300],
        }
        moves_on = falls_back(error)
        if moves_on and index < len(self.providers) - 1:
            skipped.append(entry)
            return
        # every provider failed over, or this one failed for good after others were skipped
        if isinstance(error, LoomError) and (moves_on or skipped):
            error.details["fallback_attempts"] = [*skipped, entry]
        raise error

    def _mark(
        self, response: LlmResponse, index: int, skipped: list[dict[str, Any]]
    ) -> LlmResponse:
        """The response, saying which provider and model answered and who was skipped."""
        update: dict[str, Any] = {"provider": self.labels[index]}
        if response.model is None:
            model = getattr(self.providers[index], "model", None)
            if isinstance(model, str):
                update["model"] = model
        if skipped:
            update["provider_data"] = {**response.provider_data, "fallback": list(skipped)}
        return response.model_copy(update=update)


def _call_kwargs(
    provider: object, settings: ModelSettings | None, output_type: type[BaseModel] | None
) -> dict[str, Any]:
    """The keyword arguments this provider gets: only what was given (older providers)."""
    kwargs: dict[str, Any] = {}
    if settings is not None:
        if settings.cache is not None and getattr(provider, "caches_prompts", False) is not True:
            settings = settings.model_copy(update={"cache": None})
        if not settings.is_empty():
            kwargs["settings"] = settings
    if output_type is not None:
        kwargs["output_type"] = output_type
    return kwargs
