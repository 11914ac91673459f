"""What a provider's call has when it sets nothing: its default ``max_tokens``.

A spending limit caps each call's ``max_tokens`` only when the cap is below what the call would
ask for anyway (``Budget(default_max_tokens=...)``), so the budget builders and the fallback
(which answers with whichever member is up) must agree on that default. They read it here, in
one place: a provider's construction ``settings`` first (``ModelSettings(max_tokens=...)``), then
its ``max_tokens`` attribute (Anthropic's 4096, a ``FallbackProvider``'s largest member's).
"""

from __future__ import annotations

from loom_nb.settings import ModelSettings

__all__ = ["default_max_tokens"]


def default_max_tokens(provider: object) -> int | None:
    """The ``max_tokens`` a provider's call has when it sets none (None: unbounded)."""
    settings = getattr(provider, "settings", None)
    if isinstance(settings, ModelSettings) and settings.max_tokens is not None:
        return settings.max_tokens
    return _whole(getattr(provider, "max_tokens", None))


def _whole(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
