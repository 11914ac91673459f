"""What a provider's call has when it sets nothing: its default ``max_tokens`` and thinking budget.

A spending limit caps each call's ``max_tokens`` only when the cap is below what the call would
ask for anyway (``Budget(default_max_tokens=...)``), and refuses a call whose cap could not hold
its thinking budget (``Budget(default_thinking_budget=...)``). The budget builders and the
fallback (which answers with whichever member is up) must agree on those defaults, so they read
them here, in one place: a provider's construction ``settings`` first
(``ModelSettings(max_tokens=..., thinking_budget=...)``), then its attribute of that name
(Anthropic's ``max_tokens`` 4096; a ``FallbackProvider``'s ``max_tokens`` and
``thinking_budget``, its largest member's).
"""

from __future__ import annotations

from loom_nb.settings import ModelSettings

__all__ = ["default_max_tokens", "default_thinking_budget"]


def default_max_tokens(provider: object) -> int | None:
    """The ``max_tokens`` a provider's call has when it sets none (None: unbounded)."""
    settings = getattr(provider, "settings", None)
    if isinstance(settings, ModelSettings) and settings.max_tokens is not None:
        return settings.max_tokens
    return _whole(getattr(provider, "max_tokens", None))


def default_thinking_budget(provider: object) -> int | None:
    """The thinking budget a provider's call has when it sets none (None: it does not think)."""
    settings = getattr(provider, "settings", None)
    if isinstance(settings, ModelSettings) and settings.thinking_budget is not None:
        return settings.thinking_budget
    return _whole(getattr(provider, "thinking_budget", None))


def _whole(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
