"""``create_llm_effect``: a model call as a journaled step (ADR 0120 decisions 4, 6, 7, 8, 10).

The step's input is the request as JSON, ``{messages, tools, system}``, exactly as the caller
built it: media travel as addresses and untrusted marks stay on (``{"__loomUntrusted": ...}``),
so the journal grows with the conversation, never with the media. Its messages are journaled as
a delta of the execution's previous model step (``_requests``), so a turn costs what it added;
its input hash covers the whole request and the provider's declared capabilities, so a replay
with an edited transcript or on a provider declaring other capabilities raises
``ReplayDivergenceError('input_changed')`` rather than rebuilding a different run. The step's output is the
response's JSON; the effect returns it as an ``LlmResponse`` whether the call ran or was
served from the log.

Live, the step runs, in this order: ``guard_request`` (structure, provenance, fences) →
``assert_request_supported`` against the provider's declared capabilities (before any I/O) →
``resolve_request_content`` (refs become bytes immediately before the call, attributed to this
execution, step and principal) → ``provider.complete``, or ``provider.stream`` drained by
``collect_stream``. A request with no media part at all (the step's hashing met no media part in its messages'
JSON, or the walk that found the step's pins says so) has
nothing for the capability check to refuse and nothing to resolve: both are skipped (the
context's tenant is still checked). Replayed, none of that happens: the recorded response is served, so a replay
needs neither the blobs nor the resolver nor an API key.

Streaming callbacks (``on_text``, ``on_reasoning``, ``on_tool_delta``, ``on_tool_reset``) are transient: they see
deltas of a live call as they arrive and are never journaled; only the assembled response is.

Settings and structured output are part of the step input: the provider's construction
``settings`` are merged under the request's before it is recorded (so the journal holds the
effective settings and a replay with other settings diverges), and an effect made with
``output_type=Model`` records the model's JSON Schema as the request's ``output_schema`` (a
changed schema diverges too). The recorded output is the plain response; the effect validates
its text into ``Model`` live and on replay alike, so a replayed step returns a response whose
``output`` is a fresh instance.

Money (issue 29). An effect made with a ``budget`` (``loom_nb.spending``) asks it first thing in
the step, before the guard or any I/O: a reached limit raises ``BudgetExceededError`` there, so
the refusal is journaled as the step's failure and a later call (limit raised) runs the step
again. The budget may cap the call's ``max_tokens``; that cap and the caller's default prompt
caching (``cache=``, e.g. ``Chat``'s ``"auto"`` with the chat id as the cache key) reach the
provider as the call's own ``settings=``, never the journaled request: they change what is
spent, not what is asked, so raising a limit or changing the cache default never makes a replay
diverge. Every answer, live or served from the log, is counted by the budget.
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Any, cast

from pydantic import BaseModel

from loom_nb.capabilities import assert_request_supported
from loom_nb.content import LlmRequest, LlmResponse
from loom_nb.errors import ConfigurationError, ContentAccessDeniedError
from loom_nb.guard import guard_request, handing_over
from loom_nb.journal._content_pins import MediaOnce
from loom_nb.journal._execution import Execution
from loom_nb.journal._requests import ModelStepInput
from loom_nb.limits import MAX_INLINE_BYTES, MAX_INLINE_TOTAL_BYTES
from loom_nb.providers._base import (
    LlmProvider,
    ResetCallback,
    TextCallback,
    ToolDeltaCallback,
    collect_stream,
)
from loom_nb.providers._structured import check_output_type, effective_request, validate_output
from loom_nb.settings import CacheSetting, ModelSettings, default_call_settings, resolve_cache
from loom_nb.spending import Budget
from loom_nb.store import ContentResolver, Principal, ResolveContext, resolve_request_content

__all__ = ["LlmEffect", "create_llm_effect"]


class LlmEffect:
    """A journaled model call: ``await effect(execution, step_id, request) -> LlmResponse``."""

    def __init__(
        self,
        provider: LlmProvider,
        *,
        resolve_content: ContentResolver | None = None,
        context: ResolveContext | None = None,
        on_text: TextCallback | None = None,
        on_tool_delta: ToolDeltaCallback | None = None,
        on_tool_reset: ResetCallback | None = None,
        stream: bool = False,
        output_type: type[BaseModel] | None = None,
        on_reasoning: TextCallback | None = None,
        budget: Budget | None = None,
        cache: CacheSetting | None = None,
        cache_key: str | None = None,
    ) -> None:
        if not callable(getattr(provider, "complete", None)):
            raise ConfigurationError(
                f"create_llm_effect needs a provider with complete() and stream(), not "
                f"{type(provider).__name__}.",
                code="invalid_provider",
            )
        self.provider = provider
        """The provider live calls go to."""
        self.stream = stream
        """Whether live calls stream (callbacks see deltas) or complete in one response."""
        self.output_type = check_output_type(output_type)
        """The pydantic model every answer is validated into (``response.output``), or None."""
        self._resolver = resolve_content
        self._context = context
        self._on_text = on_text
        self._on_tool_delta = on_tool_delta
        self._on_tool_reset = on_tool_reset
        self._on_reasoning = on_reasoning
        self.budget = budget if budget else None
        """The spending limits every call is checked against (None: none)."""
        self._cache = cache
        self._cache_key = cache_key

    def __repr__(self) -> str:
        return f"LlmEffect({self.provider!r}, stream={self.stream})"

    async def __call__(
        self, execution: Execution, step_id: str, request: LlmRequest | dict[str, Any]
    ) -> LlmResponse:
        """Make the call as step ``step_id`` of ``execution`` (or serve it from the log)."""
        defaults = getattr(self.provider, "settings", None)
        req = effective_request(
            request,
            defaults if isinstance(defaults, ModelSettings) else None,
            None,
            self.output_type,
        )

        media = MediaOnce(req)  # walked only live: for the step's pins, then for the checks

        async def call(_input: Any) -> LlmResponse:
            # The budget first: a refusal is this step's journaled failure, before any I/O.
            return await self._live(execution, step_id, req, self._call_settings(req), media)

        capabilities = getattr(self.provider, "capabilities", None)
        if isinstance(cast(object, execution), Execution):
            output = await execution._model_step(step_id, call, req, capabilities, media=media)
        else:
            # A stand-in (a wrapper that records or filters steps) gets the plain contract,
            # execute(step_id, fn, input) with the whole request, which the execution behind it
            # journals exactly as above.
            output = await execution.execute(step_id, call, ModelStepInput(req, capabilities))
        # Live on an Execution the step returns the response itself (``model_output``); served
        # from the log, or through a stand-in, its JSON value.
        response = output if type(output) is LlmResponse else LlmResponse.model_validate(output)
        if self.budget is not None:
            self.budget.record(response)  # live or served: the chat's totals count it too
        return self._response(req, response)

    def _call_settings(self, req: LlmRequest) -> ModelSettings | None:
        """The call's own settings: the budget's ``max_tokens`` cap and the default caching.

        Raises ``BudgetExceededError`` when a limit is reached. Caching defaults go only to a
        provider that says it maps ``ModelSettings.cache`` (``caches_prompts``).
        """
        settings = req.settings
        caches = getattr(self.provider, "caches_prompts", False) is True
        if self.budget is None and (settings is None or settings.cache is None):
            # No cap and no caching of the request's own: the default caching alone, the same
            # frozen settings for every call (a Chat makes an effect per turn): made once.
            return default_call_settings(self._cache if caches else None, self._cache_key)
        changes: dict[str, Any] = {}
        if self.budget is not None:
            cap = self.budget.admit(
                settings.max_tokens if settings is not None else None,
                settings.thinking_budget if settings is not None else None,
            )
            if cap is not None:
                changes["max_tokens"] = cap
        if caches:
            asked = settings.cache if settings is not None else None
            policy = resolve_cache(asked if asked is not None else self._cache, self._cache_key)
            if policy is not None and policy != asked:
                changes["cache"] = policy
        return ModelSettings(**changes) if changes else None

    def _response(self, req: LlmRequest, response: LlmResponse) -> LlmResponse:
        if req.output_schema is None:
            return response
        return validate_output(response, self.output_type, vendor=_name_of(self.provider))

    async def _live(
        self,
        execution: Execution,
        step_id: str,
        request: LlmRequest,
        settings: ModelSettings | None,
        media: MediaOnce,
    ) -> LlmResponse:
        capabilities = self.provider.capabilities
        guarded = guard_request(request)
        if guarded is not request:  # a fenced copy: its own walk
            media = MediaOnce(guarded)
        walked = False  # whether only loom_nb's own code ran since the guard walked ``request``
        if not media.found() and _resolver_ok(self._resolver):
            # No media part anywhere (one walk, kept for the checks below when there is one):
            # nothing for the capability check to refuse and no ref to resolve. The context's
            # tenant is still checked against the execution's, as resolving would.
            self._principal_of(execution)
            resolved, walked = guarded, True
        else:
            assert_request_supported(
                guarded,
                capabilities,
                provider=_name_of(self.provider),
                model=_model_of(self.provider),
            )
            resolved = await resolve_request_content(
                guarded, self._resolver, self._resolve_context(execution, step_id)
            )
        # The schema travels on the request; output_type is passed only when set, so a provider
        # written before structured output existed still takes the call.
        extra: dict[str, Any] = (
            {} if self.output_type is None else {"output_type": self.output_type}
        )
        if settings is not None:  # only when there is something to say (older providers)
            extra["settings"] = settings
        # Nothing fenced and nothing resolved: the provider gets the request just checked, and
        # its own guard and capability check of that object return at once (_checked); when no
        # resolver ran since the guard walked it, without a pass over the transcript.
        handed = (
            handing_over(
                resolved, MAX_INLINE_BYTES, MAX_INLINE_TOTAL_BYTES, capabilities, walked=walked
            )
            if resolved is guarded and guarded is request
            else contextlib.nullcontext()
        )
        with handed:
            if not self.stream:
                return await self.provider.complete(resolved, **extra)
            return await collect_stream(
                self.provider.stream(resolved, **extra),
                on_text=self._on_text,
                on_tool_delta=self._on_tool_delta,
                on_tool_reset=self._on_tool_reset,
                on_reasoning=self._on_reasoning,
            )

    def _resolve_context(self, execution: Execution, step_id: str) -> ResolveContext:
        """The context for this call: the caller's settings, this execution, step and principal."""
        base = self._context
        principal = self._principal_of(execution)
        if base is None:
            return ResolveContext(
                execution_id=execution.execution_id, step_id=step_id, principal=principal
            )
        return dataclasses.replace(
            base, execution_id=execution.execution_id, step_id=step_id, principal=principal
        )

    def _principal_of(self, execution: Execution) -> Principal | None:
        """Who media is read for: the context's principal, else the execution's; a context of
        another tenant than the execution's is refused (``principal_mismatch``)."""
        base = self._context
        asked = base.principal if base is not None else None
        recorded = execution.principal
        if asked is not None and recorded is not None and asked.tenant != recorded.tenant:
            # The execution reads as the principal it was started with; a caller's context
            # cannot widen that to another tenant's blobs (ADR 0120 decision 4: the resolver
            # checks that the asking execution may read the blob).
            raise ContentAccessDeniedError(
                f"execution {execution.execution_id!r} runs for tenant {recorded.tenant!r}, but the "
                f"resolve context names tenant {asked.tenant!r}. Drop the context's principal (the execution's is used) "
                "or start the execution with the principal that should read the media.",
                code="principal_mismatch",
                execution_id=execution.execution_id,
            )
        return asked or recorded


def create_llm_effect(
    provider: LlmProvider,
    *,
    resolve_content: ContentResolver | None = None,
    context: ResolveContext | None = None,
    on_text: TextCallback | None = None,
    on_tool_delta: ToolDeltaCallback | None = None,
    on_tool_reset: ResetCallback | None = None,
    stream: bool = False,
    output_type: type[BaseModel] | None = None,
    on_reasoning: TextCallback | None = None,
    budget: Budget | None = None,
    cache: CacheSetting | None = None,
    cache_key: str | None = None,
) -> LlmEffect:
    """A journaled model call on ``provider``: ``await effect(execution, step_id, request)``.

    ``resolve_content`` (e.g. ``StoreResolver(store)``) turns media refs into bytes for live
    calls; it is needed only when requests carry refs. ``context`` supplies the resolve settings
    (origin, byte budget, cancel); its execution and step are filled in per call. Media is read
    for the execution's tenant: a context principal of the same tenant (another subject) is used
    as given, one of another tenant is refused (``ContentAccessDeniedError``, code
    ``principal_mismatch``), and an execution started without a principal reads as the context's. With ``stream=True`` the call streams and the
    callbacks see its deltas (never journaled; ``on_reasoning`` gets the model's visible thinking,
    ``on_text`` only the answer). With ``output_type=Model`` every answer comes
    back with ``response.output`` a validated ``Model`` (``StructuredOutputError`` otherwise), live
    and on replay; the schema is part of the journaled request.
    """
    return LlmEffect(
        provider,
        resolve_content=resolve_content,
        context=context,
        on_text=on_text,
        on_tool_delta=on_tool_delta,
        on_tool_reset=on_tool_reset,
        stream=stream,
        output_type=output_type,
        on_reasoning=on_reasoning,
        budget=budget,
        cache=cache,
        cache_key=cache_key,
    )


def _resolver_ok(resolver: object) -> bool:
    """Whether ``resolver`` is None or has a ``resolve`` (else resolution refuses it)."""
    return resolver is None or callable(getattr(resolver, "resolve", None))


def _name_of(provider: object) -> str:
    name = getattr(provider, "name", None)
    return name if isinstance(name, str) else type(provider).__name__


def _model_of(provider: object) -> str | None:
    model = getattr(provider, "model", None)
    return model if isinstance(model, str) else None
