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


# A provider error's remedy depends on what failed and on which kind of provider failed: a
# scripted provider has no key to check, a local compatible server is not "the network".
_PROVIDER_REMEDIES: dict[str, str] = {
    "script_exhausted": "The scripted model has no answer left for this message: add a turn to "
    "its script (ScriptedProvider([...])), or switch to a real provider.",
    "missing_api_key": "Set the API key environment variable the message names (or pass "
    "api_key=...), then send again.",
    "authentication_failed": "The API key was refused: check it is the right key for this vendor "
    "and still valid, then send again.",
    "permission_denied": "The API key may not use this model or feature: check the account's "
    "access, or pick another model.",
    "not_found": "The model name (or base_url) is not known to the service: check the spelling "
    "against the vendor's model list.",
    "rate_limited": "The service is rate limiting: wait a little and send again (retries honoured "
    "retry-after already).",
    "provider_overloaded": "The service is overloaded: wait a little and send again.",
    "request_too_large": "The request is too large for the service: send fewer or smaller "
    "attachments (or start a new conversation).",
    "invalid_request": "The service refused the request as invalid; the message above says which "
    "field. Fix it and send again.",
}


def _provider_remedy(exc: ProviderError) -> str:
    """The remedy for a provider error, by its code and by the kind of provider."""
    if exc.provider == "scripted" and exc.code != "script_exhausted":
        return "The scripted model's turn could not be played; check the script's entries."
    if exc.code in _PROVIDER_REMEDIES:
        return _PROVIDER_REMEDIES[exc.code]
    if exc.code in ("provider_unreachable", "provider_timeout"):
        return (
            "The service could not be reached: check the network, or for a local server "
            "(Ollama, vLLM, llama.cpp) that it is running at the provider's base_url; send again."
        )
    return (
        "The model's service refused or could not be reached. Check the API key, the model name "
        "and the network, then send again."
    )


def refusal_view(exc: BaseException) -> dict[str, Any]:
    """``{"kind", "code", "message", "remedy"}`` for an error (unknown errors say so plainly).

    A provider error's remedy follows its code and the kind of provider: an exhausted script says
    to add a turn, never to check an API key.
    """
    if isinstance(exc, LoomError):
        remedy = (
            _provider_remedy(exc)
            if isinstance(exc, ProviderError)
            else next(text for cls, text in _REMEDIES if isinstance(exc, cls))
        )
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
