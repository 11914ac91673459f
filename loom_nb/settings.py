"""``ModelSettings``: one typed set of generation settings that every provider maps to its vendor.

A caller says ``ModelSettings(max_tokens=512, temperature=0)`` once and gets the same meaning on
Anthropic, OpenAI (Chat Completions and Responses), Gemini and compatible servers; each provider's
wire module maps the fields to the vendor's names (``max_completion_tokens``,
``generationConfig.maxOutputTokens`` ...). A setting a vendor or model cannot honour is refused
before any I/O with ``ConfigurationError(code="unsupported_setting")``, never dropped: a silently
ignored ``seed`` or ``temperature`` would make a run look reproducible when it is not.

Settings come from three places, merged field by field (``merged``): the provider's construction
defaults, the request's own ``settings``, and the ``settings=`` of one ``complete`` / ``stream``
call, the later winning. The effective settings travel on ``LlmRequest.settings``, so the journal
records them and a replay with different settings diverges. Unset fields are left out of the
serialized form, so a request without settings hashes exactly as it did before settings existed.

Prompt caching (issue 29). ``cache`` is advice about cost, never about the answer: ``"auto"``
(what ``Chat`` uses when nothing is set) lets loom_nb place the vendor's cache markers, ``"off"``
places none, and a ``PromptCache`` says exactly where. Each vendor maps what it has: Anthropic
``cache_control`` breakpoints, OpenAI's ``prompt_cache_key``; Gemini caches implicitly and only
reports it. A choice a vendor has no field for changes nothing there, and is not an error.
"""

from __future__ import annotations

import functools
from typing import Annotated, Any, Literal, TypeAlias

from pydantic import (
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    StrictInt,
    ValidationError,
    field_validator,
    model_serializer,
)

from loom_nb._strict import StrictModel
from loom_nb.errors import ConfigurationError

__all__ = [
    "CacheSetting",
    "ModelSettings",
    "PromptCache",
    "ReasoningEffort",
    "merge_settings",
    "resolve_cache",
]

ANTHROPIC_MAX_BREAKPOINTS = 4
"""The most ``cache_control`` breakpoints one Messages API request may carry."""

ReasoningEffort: TypeAlias = Literal["none", "minimal", "low", "medium", "high", "xhigh"]
"""How hard a reasoning model thinks, in OpenAI's vocabulary (Gemini 3 maps it to a thinking level)."""

_FIELDS = (
    "max_tokens",
    "temperature",
    "top_p",
    "stop_sequences",
    "thinking_budget",
    "reasoning_effort",
    "seed",
    "cache",
)


class PromptCache(StrictModel):
    """Explicit prompt-caching choices; ``PromptCache()`` is what ``cache="auto"`` means.

    Anthropic gets a ``cache_control`` breakpoint on the last tool (``tools``), on the system
    prompt (``system``), at the end of each of the last ``turns`` earlier turns (the message before
    each of the last ``turns`` user messages that open a turn) and, with ``last``, on the request's
    final message. At most four are placed, Anthropic's limit: when more are asked for, the
    oldest turn ends are left out. ``ttl`` is Anthropic's cache lifetime.
    ``key`` is OpenAI's ``prompt_cache_key`` (a ``Chat`` fills in its id when it is None). Anthropic
    and Gemini route by prefix and take no key; OpenAI and Gemini place no breakpoints.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    tools: bool = True
    """A breakpoint after the tool definitions (they rarely change)."""
    system: bool = True
    """A breakpoint after the system prompt."""
    turns: Annotated[StrictInt, Field(ge=0, le=ANTHROPIC_MAX_BREAKPOINTS)] = 2
    """How many earlier turn ends get a breakpoint: the previous turn's end (written now, read
    next time) and the one before it (where the previous request wrote, so a turn that added
    many blocks still reads the cache)."""
    last: bool = False
    """Also mark the request's final message (worth it when the next call follows soon, as in
    an agent loop; each call then writes its whole prompt)."""
    ttl: Literal["5m", "1h"] = "5m"
    """Anthropic's cache lifetime: ``5m`` (writes cost 1.25x input) or ``1h`` (2x)."""
    key: str | None = None
    """OpenAI's ``prompt_cache_key``: requests with the same key are routed to the same cache."""

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise _settings_error(exc, "PromptCache") from exc

    @model_serializer(mode="wrap")
    def _drop_unset_key(self, handler: SerializerFunctionWrapHandler) -> Any:
        data = handler(self)
        if isinstance(data, dict) and data.get("key", 0) is None:
            del data["key"]
        return data

    def breakpoints(self) -> int:
        """How many Anthropic breakpoints these choices can place at most."""
        return int(self.tools) + int(self.system) + self.turns + int(self.last)


CacheSetting: TypeAlias = Literal["auto", "off"] | PromptCache
"""What ``ModelSettings.cache`` takes: ``"auto"``, ``"off"`` or a ``PromptCache``."""


def resolve_cache(setting: CacheSetting | None, key: str | None = None) -> PromptCache | None:
    """The ``PromptCache`` a setting means (None: no caching markers), ``key`` filled where unset."""
    if setting is None or setting == "off":
        return None
    policy = PromptCache() if setting == "auto" else setting
    if key is not None and policy.key is None:
        policy = policy.model_copy(update={"key": key})
    return policy


class ModelSettings(StrictModel):
    """Generation settings mapped to every vendor; a field left None is not sent at all.

    ``ModelSettings(max_tokens=1024, temperature=0.2, stop_sequences=["END"])``. A value out of
    range raises ``ConfigurationError(code="invalid_setting")`` naming the field; a setting the
    chosen vendor or model does not take is refused by the provider before any I/O
    (``code="unsupported_setting"``).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_tokens: Annotated[StrictInt, Field(ge=1)] | None = None
    """The most tokens the model may generate (Anthropic ``max_tokens``, OpenAI
    ``max_completion_tokens``, Gemini ``maxOutputTokens``)."""
    temperature: Annotated[float, Field(ge=0, le=2, allow_inf_nan=False)] | None = None
    """Sampling temperature (0 = most deterministic)."""
    top_p: Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)] | None = None
    """Nucleus sampling: only the tokens in the top ``top_p`` probability mass are considered."""
    stop_sequences: tuple[str, ...] | None = None
    """Strings that end generation when the model produces one (not included in the output)."""
    thinking_budget: Annotated[StrictInt, Field(ge=0)] | None = None
    """Tokens the model may spend thinking before it answers (Anthropic extended thinking
    ``budget_tokens``, Gemini ``thinkingBudget``; 0 turns Gemini 2.5 thinking off)."""
    reasoning_effort: ReasoningEffort | None = None
    """How hard a reasoning model thinks (OpenAI ``reasoning_effort`` / ``reasoning.effort``,
    Gemini 3 ``thinkingLevel``)."""
    seed: StrictInt | None = None
    """A sampling seed, where the vendor supports one (OpenAI, Gemini; not Anthropic)."""
    cache: CacheSetting | None = None
    """Prompt caching: ``"auto"``, ``"off"`` or a ``PromptCache`` (None: the provider's and the
    caller's defaults; ``Chat`` uses ``"auto"``). Advice about cost, never about the answer."""

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise _settings_error(exc) from exc

    @field_validator("temperature", "top_p", mode="before")
    @classmethod
    def _no_bools(cls, value: Any) -> Any:
        if isinstance(value, bool):
            raise ValueError("a number, not a bool")
        return value

    @field_validator("stop_sequences", mode="before")
    @classmethod
    def _check_stops(cls, value: Any) -> Any:
        if value is None:
            return None
        if isinstance(value, str) or not isinstance(value, list | tuple):
            raise ValueError("stop_sequences is a list of strings, not a single string")
        if not value or any(not isinstance(s, str) or not s for s in value):
            raise ValueError("stop_sequences is a non-empty list of non-empty strings")
        return tuple(value)

    @model_serializer(mode="wrap")
    def _drop_unset(self, handler: SerializerFunctionWrapHandler) -> Any:
        data = handler(self)
        if isinstance(data, dict):
            return {key: value for key, value in data.items() if value is not None}
        return data

    def merged(self, override: ModelSettings | None) -> ModelSettings:
        """These settings with every field ``override`` sets replacing this one's."""
        if override is None:
            return self
        changes = {name: getattr(override, name) for name in override.set_fields()}
        return self.model_copy(update=changes) if changes else self

    def set_fields(self) -> list[str]:
        """The names of the fields that are not None, in declaration order."""
        return [name for name in _FIELDS if getattr(self, name) is not None]

    def is_empty(self) -> bool:
        """Whether no field is set."""
        return not self.set_fields()


def merge_settings(*layers: ModelSettings | None) -> ModelSettings | None:
    """Merge settings field by field, later layers winning; None when nothing is set at all.

    Providers call it as ``merge_settings(construction, request.settings, call)``. Each layer
    must be a ``ModelSettings`` or None (anything else is ``ConfigurationError``).
    """
    result: ModelSettings | None = None
    for index, layer in enumerate(layers):
        if layer is None:
            continue
        if not isinstance(layer, ModelSettings):
            raise ConfigurationError(
                f"settings must be a ModelSettings (or None), not {type(layer).__name__} "
                f"(layer {index}). Build one with ModelSettings(max_tokens=..., temperature=...).",
                code="invalid_setting",
                field="settings",
            )
        result = layer if result is None else result.merged(layer)
    if result is None or result.is_empty():
        return None
    return result


def _settings_error(exc: ValidationError, what: str = "ModelSettings") -> ConfigurationError:
    errors = exc.errors(include_url=False)
    first = errors[0]
    where = ".".join(str(p) for p in first["loc"]) or "(root)"
    if what == "PromptCache":
        return ConfigurationError(
            f"invalid PromptCache: field '{where}': {first['msg']}. Fields: tools (bool), system "
            "(bool), turns (0..4), last (bool), ttl ('5m' or '1h'), key (str).",
            code="invalid_setting",
            field=where,
        )
    return ConfigurationError(
        f"invalid ModelSettings: field '{where}': {first['msg']}. Fields: max_tokens (int >= 1), "
        "temperature (0..2), top_p (0..1), stop_sequences (list of strings), thinking_budget "
        "(int >= 0), reasoning_effort (none, minimal, low, medium, high, xhigh), seed (int), "
        "cache ('auto', 'off' or a PromptCache).",
        code="invalid_setting",
        field=where,
    )


def default_call_settings(cache: CacheSetting | None, key: str | None) -> ModelSettings | None:
    """The call settings that ask for ``cache`` (keyed ``key``) and nothing else; None when that
    means no caching. Frozen, so the same object serves every call asking the same (a Chat asks
    the same on every turn): made once per ``(cache, key)`` among the most recent ones."""
    try:
        return _default_call_settings(cache, key)
    except TypeError:  # a setting that cannot be a cache key: made for this call
        return _call_settings_for(cache, key)


def _call_settings_for(cache: CacheSetting | None, key: str | None) -> ModelSettings | None:
    policy = resolve_cache(cache, key)
    return ModelSettings(cache=policy) if policy is not None else None


_default_call_settings = functools.lru_cache(maxsize=64)(_call_settings_for)
