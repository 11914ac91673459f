"""Refusals as messages for people: an error's kind, code, message and what to do, never a traceback.

``refusal_view`` turns any ``LoomError`` (or, as a last resort, any exception) into a small JSON
view the PromptPad shows in place; ``refusal_html`` is its static, escaped form.
"""

from __future__ import annotations

from typing import Any

from loom_nb.errors import (
    ConfigurationError,
    ContentValidationError,
    GuardError,
    LoomError,
    OversizedInlinePartError,
    ProviderError,
    StoreError,
    UnresolvedContentError,
    UnsupportedModalityError,
)
from loom_nb.render._html import STYLE, esc

__all__ = ["refusal_html", "refusal_view"]

# Most specific first: the first class the error is an instance of gives the remedy.
_REMEDIES: list[tuple[type[LoomError], str]] = [
    (
        UnsupportedModalityError,
        "Nothing was sent. Remove that attachment, or switch to a model that declares this media "
        "type (loom_nb.default_capabilities(provider, model) lists what each accepts).",
    ),
    (
        OversizedInlinePartError,
        "Nothing was sent. Attach large files through the upload box so they travel by ref.",
    ),
    (GuardError, "Nothing was sent. Fix what the message names, then send again."),
    (
        UnresolvedContentError,
        "Nothing was sent. Upload the file again with this pad's tenant (refs are read with the "
        "pad's principal), or remove the attachment.",
    ),
    (StoreError, "Nothing was sent. Check the content store and upload the file again."),
    (
        ProviderError,
        "The model's service refused or could not be reached. Check the API key, the model name "
        "and the network, then send again.",
    ),
    (
        ConfigurationError,
        "Check the provider's settings (the API key environment variable, the model name).",
    ),
    (ContentValidationError, "Nothing was sent. Fix the message as described and send again."),
    (LoomError, "Fix what the message names, then send again."),
]


def refusal_view(exc: BaseException) -> dict[str, Any]:
    """``{"kind", "code", "message", "remedy"}`` for an error (unknown errors say so plainly)."""
    if isinstance(exc, LoomError):
        remedy = next(text for cls, text in _REMEDIES if isinstance(exc, cls))
        view: dict[str, Any] = {
            "kind": type(exc).__name__,
            "code": exc.code,
            "message": exc.message,
            "remedy": remedy,
        }
        if isinstance(exc, ProviderError) and exc.status is not None:
            view["message"] = f"{exc.message} (HTTP {exc.status})"
        return view
    return {
        "kind": type(exc).__name__,
        "code": "unexpected_error",
        "message": str(exc) or type(exc).__name__,
        "remedy": "This is a bug or an unexpected failure; the full traceback is in the kernel log.",
    }


def refusal_html(view: dict[str, Any]) -> str:
    """The refusal as a bordered, escaped block (readable with every style stripped)."""
    return (
        f'<div class="loom-refusal" style="{STYLE["tool_error"]}">'
        f'<div style="{STYLE["error_label"]}">refused · {esc(str(view.get("kind")))} · '
        f"{esc(str(view.get('code')))}</div>"
        f'<div style="{STYLE["text"]}">{esc(str(view.get("message")))}</div>'
        f'<div style="{STYLE["meta"]}">what to do: {esc(str(view.get("remedy")))}</div></div>'
    )
