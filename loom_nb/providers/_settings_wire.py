"""``ModelSettings`` to each vendor's body fields, refusing what a vendor or model cannot take.

Pure functions, one per vendor, called while the body is built (so before any I/O). Each returns
the body fields the settings produce (nested where the vendor nests them, e.g. Gemini's
``generationConfig``); ``merge_body`` then lays them and ``extra_body`` over the base body,
refusing an ``extra_body`` key that contradicts a setting instead of letting one silently win.

What is refused, with ``ConfigurationError(code="unsupported_setting")`` naming the setting,
the vendor, the model and what to use instead:

- Anthropic: ``seed`` (the Messages API has none), ``reasoning_effort`` (use ``thinking_budget``),
  ``temperature`` above 1, ``temperature`` together with ``top_p``, and with a thinking budget
  any ``temperature`` or a ``top_p`` below 0.95; a budget under 1024 or not below ``max_tokens``.
- OpenAI on its own endpoint: ``temperature``, ``top_p`` and ``stop_sequences`` on reasoning models
  (o1/o3/o4 families, gpt-5 except the chat models), ``reasoning_effort`` on models that do not
  reason, ``thinking_budget`` everywhere (OpenAI has no token budget), more than 4 stop sequences.
  On a compatible server the model's rules are unknown, so only ``thinking_budget`` is refused
  and ``max_tokens`` goes out as ``max_tokens`` (what those servers read).
- OpenAI Responses: ``seed`` and ``stop_sequences`` (the Responses API has neither), plus the
  reasoning-model rules above.
- ``cache`` is never refused: it is advice about cost. OpenAI (its own endpoint) and Responses
  send ``prompt_cache_key``; Anthropic's breakpoints are laid over the body (``_cache_wire``);
  Gemini caches implicitly and takes nothing.
- Gemini: ``reasoning_effort`` except on Gemini 3 (``thinkingLevel``), ``thinking_budget`` on
  models before 2.5, both together, more than 5 stop sequences.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from loom_nb.errors import ConfigurationError
from loom_nb.providers._cache_wire import openai_cache_fields
from loom_nb.settings import ModelSettings

__all__ = [
    "anthropic_settings_fields",
    "gemini_settings_fields",
    "is_openai_reasoning_model",
    "merge_body",
    "openai_chat_settings_fields",
    "openai_responses_settings_fields",
    "unsupported",
]

ANTHROPIC_MIN_THINKING_BUDGET = 1024
"""The smallest ``budget_tokens`` the Messages API accepts."""

_OPENAI_REASONING = re.compile(r"^(o\d+(-.*)?|gpt-5(?!.*-chat).*|codex-.*|gpt-oss-.*)$")
_GEMINI_THINKING = re.compile(r"^gemini-(2\.5|[3-9])")
_GEMINI_3 = re.compile(r"^gemini-[3-9]")


def unsupported(setting: str, vendor: str, model: str, why: str) -> ConfigurationError:
    """The refusal of one setting on one vendor/model, with what to do instead."""
    return ConfigurationError(
        f"{vendor} model {model!r} does not take ModelSettings.{setting}: {why} Nothing was "
        "sent. Leave the setting unset for this provider, or pass the vendor field yourself in "
        "extra_body if you know the server takes it.",
        code="unsupported_setting",
        setting=setting,
        provider=vendor,
        model=model,
    )


def is_openai_reasoning_model(model: str) -> bool:
    """Whether an OpenAI model id names a reasoning model (o-series, gpt-5 except chat, gpt-oss)."""
    return bool(_OPENAI_REASONING.match(model.strip().lower()))


def anthropic_settings_fields(
    settings: ModelSettings | None, *, model: str, default_max_tokens: int
) -> dict[str, Any]:
    """The Messages API fields for ``settings`` (the body already holds the default ``max_tokens``)."""
    vendor = "Anthropic"
    if settings is None:
        return {}
    s = settings
    max_tokens = s.max_tokens if s.max_tokens is not None else default_max_tokens
    fields: dict[str, Any] = {} if s.max_tokens is None else {"max_tokens": s.max_tokens}
    if s.seed is not None:
        raise unsupported("seed", vendor, model, "the Messages API has no sampling seed.")
    if s.reasoning_effort is not None:
        raise unsupported(
            "reasoning_effort",
            vendor,
            model,
            "Claude's extended thinking is set by a token budget; use thinking_budget.",
        )
    if s.temperature is not None and s.temperature > 1:
        raise unsupported("temperature", vendor, model, "Anthropic takes 0 to 1.")
    if s.temperature is not None and s.top_p is not None:
        raise unsupported(
            "top_p", vendor, model, "current Claude models refuse temperature and top_p together."
        )
    if s.thinking_budget is not None:
        budget = s.thinking_budget
        if budget < ANTHROPIC_MIN_THINKING_BUDGET or budget >= max_tokens:
            raise unsupported(
                "thinking_budget",
                vendor,
                model,
                f"the budget must be at least {ANTHROPIC_MIN_THINKING_BUDGET} and below max_tokens "
                f"({max_tokens}); got {budget}.",
            )
        if s.temperature is not None:
            raise unsupported(
                "temperature", vendor, model, "extended thinking does not take a temperature."
            )
        if s.top_p is not None and s.top_p < 0.95:
            raise unsupported(
                "top_p", vendor, model, "with extended thinking top_p must be 0.95 to 1."
            )
        fields["thinking"] = {"type": "enabled", "budget_tokens": budget}
    if s.temperature is not None:
        fields["temperature"] = s.temperature
    if s.top_p is not None:
        fields["top_p"] = s.top_p
    if s.stop_sequences is not None:
        fields["stop_sequences"] = list(s.stop_sequences)
    return fields


def _openai_reasoning_rules(s: ModelSettings, vendor: str, model: str) -> None:
    if is_openai_reasoning_model(model):
        for name in ("temperature", "top_p"):
            if getattr(s, name) is not None:
                raise unsupported(
                    name, vendor, model, "OpenAI reasoning models sample at fixed settings."
                )
    elif s.reasoning_effort is not None:
        raise unsupported(
            "reasoning_effort", vendor, model, "the model is not an OpenAI reasoning model."
        )


def openai_chat_settings_fields(
    settings: ModelSettings | None, *, model: str, official: bool
) -> dict[str, Any]:
    """The Chat Completions fields for ``settings``; ``official`` is OpenAI's own endpoint."""
    vendor = "OpenAI" if official else "OpenAI-compatible server"
    if settings is None:
        return {}
    s = settings
    if s.thinking_budget is not None:
        raise unsupported(
            "thinking_budget",
            vendor,
            model,
            "Chat Completions has no thinking token budget; use reasoning_effort.",
        )
    if official:
        _openai_reasoning_rules(s, vendor, model)
        if s.stop_sequences is not None and is_openai_reasoning_model(model):
            raise unsupported(
                "stop_sequences", vendor, model, "OpenAI reasoning models take no stop sequences."
            )
        if s.stop_sequences is not None and len(s.stop_sequences) > 4:
            raise unsupported("stop_sequences", vendor, model, "OpenAI takes at most 4.")
    fields: dict[str, Any] = {}
    if s.max_tokens is not None:
        fields["max_completion_tokens" if official else "max_tokens"] = s.max_tokens
    if s.temperature is not None:
        fields["temperature"] = s.temperature
    if s.top_p is not None:
        fields["top_p"] = s.top_p
    if s.stop_sequences is not None:
        fields["stop"] = list(s.stop_sequences)
    if s.seed is not None:
        fields["seed"] = s.seed
    if s.reasoning_effort is not None:
        fields["reasoning_effort"] = s.reasoning_effort
    fields.update(openai_cache_fields(s.cache, official=official))
    return fields


def openai_responses_settings_fields(
    settings: ModelSettings | None, *, model: str, official: bool
) -> dict[str, Any]:
    """The Responses API fields for ``settings`` (``max_output_tokens``, ``reasoning.effort`` ...)."""
    vendor = "OpenAI Responses" if official else "Responses-compatible server"
    if settings is None:
        return {}
    s = settings
    for name, why in (
        ("seed", "the Responses API has no sampling seed."),
        ("stop_sequences", "the Responses API has no stop sequences."),
        (
            "thinking_budget",
            "the Responses API has no thinking token budget; use reasoning_effort.",
        ),
    ):
        if getattr(s, name) is not None:
            raise unsupported(name, vendor, model, why)
    if official:
        _openai_reasoning_rules(s, vendor, model)
    fields: dict[str, Any] = {}
    if s.max_tokens is not None:
        fields["max_output_tokens"] = s.max_tokens
    if s.temperature is not None:
        fields["temperature"] = s.temperature
    if s.top_p is not None:
        fields["top_p"] = s.top_p
    if s.reasoning_effort is not None:
        fields["reasoning"] = {"effort": s.reasoning_effort}
    fields.update(openai_cache_fields(s.cache, official=official))
    return fields


def gemini_settings_fields(settings: ModelSettings | None, *, model: str) -> dict[str, Any]:
    """``{"generationConfig": {...}}`` for ``settings`` (empty when nothing is set)."""
    vendor = "Gemini"
    if settings is None:
        return {}
    s = settings
    config: dict[str, Any] = {}
    if s.max_tokens is not None:
        config["maxOutputTokens"] = s.max_tokens
    if s.temperature is not None:
        config["temperature"] = s.temperature
    if s.top_p is not None:
        config["topP"] = s.top_p
    if s.stop_sequences is not None:
        if len(s.stop_sequences) > 5:
            raise unsupported("stop_sequences", vendor, model, "Gemini takes at most 5.")
        config["stopSequences"] = list(s.stop_sequences)
    if s.seed is not None:
        config["seed"] = s.seed
    thinking: dict[str, Any] = {}
    if s.thinking_budget is not None:
        if not _GEMINI_THINKING.match(model):
            raise unsupported(
                "thinking_budget", vendor, model, "only Gemini 2.5 and later models think."
            )
        thinking["thinkingBudget"] = s.thinking_budget
    if s.reasoning_effort is not None:
        if not _GEMINI_3.match(model):
            raise unsupported(
                "reasoning_effort",
                vendor,
                model,
                "only Gemini 3 models take a thinking level; use thinking_budget.",
            )
        if s.reasoning_effort not in {"minimal", "low", "medium", "high"}:
            raise unsupported(
                "reasoning_effort",
                vendor,
                model,
                f"Gemini thinking levels are minimal, low, medium and high, not "
                f"{s.reasoning_effort!r}.",
            )
        if thinking:
            raise unsupported(
                "reasoning_effort",
                vendor,
                model,
                "Gemini refuses a thinking level and a thinking budget together; set one.",
            )
        thinking["thinkingLevel"] = s.reasoning_effort
    if thinking:
        config["thinkingConfig"] = thinking
    return {"generationConfig": config} if config else {}


def merge_body(
    base: Mapping[str, Any], managed: Mapping[str, Any], extra: Mapping[str, Any]
) -> dict[str, Any]:
    """``base`` with the settings/output fields (``managed``) and then ``extra_body`` laid over it.

    Objects present in two layers are merged one level deep (``generationConfig`` from settings
    and from ``extra_body`` combine). ``extra_body`` may replace anything in ``base`` (as it always
    could), but a value it gives for a field a setting produced must equal it: a contradiction is
    ``ConfigurationError(code="setting_conflict")``, never one side silently winning.
    """
    body = dict(base)
    for key, value in managed.items():
        old = body.get(key)
        body[key] = {**old, **value} if isinstance(old, dict) and isinstance(value, dict) else value
    for key, value in extra.items():
        ours = managed.get(key)
        if ours is None:
            body[key] = value
            continue
        if isinstance(ours, dict) and isinstance(value, dict):
            clash = sorted(k for k in value if k in ours and value[k] != ours[k])
            if not clash:
                body[key] = {**body[key], **value}
                continue
            where = [f"{key}.{k}" for k in clash]
        elif value == ours:
            continue
        else:
            where = [key]
        raise ConfigurationError(
            f"extra_body sets {where} to a different value than the request's settings. Set it "
            "in one place: ModelSettings for the mapped fields, extra_body for the rest.",
            code="setting_conflict",
            fields=where,
        )
    return body
