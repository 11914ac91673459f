"""Capability declarations, fail closed (ADR 0120 decision 6).

A provider declares the media types it accepts per modality; absent means text and tool calls
only. ``assert_request_supported`` refuses anything undeclared before any resolution or I/O, so a
model is never handed media it would drop or 400 on.

The shipped declarations are an allowlist by model family (``_DEFAULTS`` below, one row per
family): media is on only for the vendor's known media-capable families, and OpenAI audio only for
its audio models. Every other id declares nothing: plain ``gpt-4`` and its dated snapshots,
``gpt-3.5``, ``o1-mini`` / ``o3-mini`` / ``o1-preview``, ``gemini-1.0-pro-latest``, a local alias
such as ``llama3``, an unknown future id. A provider on a non-default base URL (an
OpenAI-compatible server, a proxy) declares nothing either: the model id says nothing about what
is behind it. Explicit capabilities always win (the provider's ``capabilities=`` argument), and
``Capabilities()`` is text-only. A new family needs one row before it is trusted with media.
"""

from __future__ import annotations

import functools
import re
from typing import Any, Literal

from pydantic import ConfigDict, Field, field_validator

from loom_nb._strict import StrictModel
from loom_nb.content import LlmRequest, parse_request
from loom_nb.errors import UnsupportedModalityError
from loom_nb.guard import guard_with_media, iter_media, media_essence, supported_already
from loom_nb.limits import MAX_INLINE_BYTES, MAX_INLINE_TOTAL_BYTES

__all__ = [
    "Capabilities",
    "Modality",
    "assert_request_supported",
    "default_capabilities",
    "guard_supported",
]

Modality = Literal["image", "audio", "file"]
"""The media modalities a provider can declare."""


class Capabilities(StrictModel):
    """Media types a provider accepts, per modality, as patterns: ``image/png``, ``image/*``, ``*``.

    ``Capabilities()`` is text-only (text and tool calls). Patterns match case-insensitively and
    ignore media-type parameters (``text/plain; charset=utf-8`` is ``text/plain``).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    image: list[str] = Field(default_factory=list)
    """Image media-type patterns accepted (``image/*``)."""
    audio: list[str] = Field(default_factory=list)
    """Audio media-type patterns accepted (``audio/wav``, ``audio/mpeg``)."""
    file: list[str] = Field(default_factory=list)
    """Document media-type patterns accepted (``application/pdf``)."""

    @field_validator("image", "audio", "file")
    @classmethod
    def _check_patterns(cls, patterns: list[str]) -> list[str]:
        for pattern in patterns:
            if _pattern_kind(pattern) is None:
                raise ValueError(
                    f"{pattern!r} is not a media-type pattern; use 'type/subtype', 'type/*' or '*'"
                )
        return patterns

    def accepts(self, modality: Modality, media_type: str) -> bool:
        """Whether ``media_type`` is declared for ``modality`` (False for a malformed type)."""
        patterns: list[str] = getattr(self, modality, [])
        if type(media_type) is str and all(type(p) is str for p in patterns):
            return _accepted(tuple(patterns), media_type)
        return _accepted.__wrapped__(tuple(patterns), media_type)


@functools.lru_cache(maxsize=1024)
def _accepted(patterns: tuple[str, ...], media_type: str) -> bool:
    """Whether one of ``patterns`` takes ``media_type`` (cached for exact ``str`` keys only: a
    request repeats the same few types, and a subclass could hash and compare as it likes)."""
    essence = media_essence(media_type)
    if essence is None:
        return False
    return any(_matches(pattern, essence) for pattern in patterns)


def _pattern_kind(pattern: object) -> str | None:
    if not isinstance(pattern, str):
        return None
    p = pattern.strip().lower()
    if p in ("*", "*/*"):
        return "any"
    if p.endswith("/*") and media_essence(p[:-2] + "/x") is not None:
        return "type"
    return "exact" if media_essence(p) is not None else None


def _matches(pattern: str, essence: str) -> bool:
    kind = _pattern_kind(pattern)
    if kind == "any":
        return True
    if kind == "type":
        return essence.split("/", 1)[0] == pattern.strip().lower()[:-2]
    return kind == "exact" and media_essence(pattern) == essence


# ---- the allowlist of decision 6 -------------------------------------------------------------

_IMAGES = ("image/png", "image/jpeg", "image/gif", "image/webp")
_PDF = ("application/pdf",)
_WAV_MP3 = ("audio/wav", "audio/x-wav", "audio/wave", "audio/mpeg", "audio/mp3")
_GEMINI_IMAGES = ("image/png", "image/jpeg", "image/webp", "image/heic", "image/heif")
_GEMINI_AUDIO = (
    *_WAV_MP3,
    *("audio/aiff", "audio/aac", "audio/ogg", "audio/flac"),
)
_GEMINI_DOCS = ("application/pdf", "text/*")

_Declared = tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]  # image, audio, file
_VISION_PDF: _Declared = (_IMAGES, (), _PDF)
_VISION_PDF_WAV_MP3: _Declared = (_IMAGES, _WAV_MP3, _PDF)
_AUDIO_WAV_MP3: _Declared = ((), _WAV_MP3, ())
_GEMINI_ALL: _Declared = (_GEMINI_IMAGES, _GEMINI_AUDIO, _GEMINI_DOCS)

# One row per media-capable family: provider, model id pattern (full match), what it declares.
# The first matching row wins, so the narrower audio rows come before gpt-4o*. Version ranges are
# written into the patterns: claude major >= 3, gemini >= 1.5 (never gemini-1.0-*).
# fmt: off
_DEFAULTS: tuple[tuple[str, str, _Declared], ...] = (
    ("openai",    r"gpt-4o(?:-mini)?-audio-preview(?:-\d{4}-\d{2}-\d{2})?",       _VISION_PDF_WAV_MP3),
    ("openai",    r"gpt-audio(?:-mini)?(?:-\d{4}-\d{2}-\d{2})?",                  _AUDIO_WAV_MP3),
    ("openai",    r"gpt-4o(?:-.+)?",                                              _VISION_PDF),
    ("openai",    r"gpt-4\.1(?:-.+)?",                                            _VISION_PDF),
    ("openai",    r"gpt-5(?:[.-].+)?",                                            _VISION_PDF),
    ("openai",    r"o[13](?:-(?!mini|preview).+)?",                               _VISION_PDF),
    ("openai",    r"o4(?:-.+)?",                                                  _VISION_PDF),
    ("openai",    r"gpt-4-turbo(?:-\d{4}-\d{2}-\d{2})?",                          _VISION_PDF),
    # The Responses API takes images and PDFs (input_image, input_file), never audio input.
    ("openai-responses", r"gpt-4o(?!.*audio)(?:-.+)?",                             _VISION_PDF),
    ("openai-responses", r"gpt-4\.1(?:-.+)?",                                      _VISION_PDF),
    ("openai-responses", r"gpt-5(?:[.-].+)?",                                      _VISION_PDF),
    ("openai-responses", r"o[13](?:-(?!mini|preview).+)?",                         _VISION_PDF),
    ("openai-responses", r"o4(?:-.+)?",                                            _VISION_PDF),
    ("anthropic", r"claude-(?:(?:opus|sonnet|haiku)-)?(?:[3-9]|[1-9]\d+)(?:[-.@].+)?", _VISION_PDF),
    ("gemini",    r"gemini-(?:1\.[5-9]|[2-9](?:\.\d+)?|[1-9]\d+(?:\.\d+)?)(?:-.+)?",  _GEMINI_ALL),
    ("gemini",    r"gemini-(?:pro|flash|flash-lite)-latest",                      _GEMINI_ALL),
)
# fmt: on
_COMPILED = tuple(
    (provider, re.compile(pattern), declared) for provider, pattern, declared in _DEFAULTS
)

_DEFAULT_BASE_URLS: dict[str, frozenset[str]] = {
    "anthropic": frozenset({"https://api.anthropic.com", "https://api.anthropic.com/v1"}),
    "openai": frozenset({"https://api.openai.com", "https://api.openai.com/v1"}),
    "openai-responses": frozenset({"https://api.openai.com", "https://api.openai.com/v1"}),
    "gemini": frozenset(
        {
            "https://generativelanguage.googleapis.com",
            "https://generativelanguage.googleapis.com/v1",
            "https://generativelanguage.googleapis.com/v1beta",
        }
    ),
}


def default_capabilities(
    provider: Literal["anthropic", "openai", "openai-responses", "gemini"] | str,
    model: str,
    base_url: str | None = None,
) -> Capabilities:
    """The shipped declaration for ``model`` on ``provider`` (decision 6's allowlist).

    Returns ``Capabilities()`` (text and tools only) for any id no row names, for an unknown
    provider, and for a ``base_url`` other than the vendor's own.
    """
    name = provider.strip().lower() if isinstance(provider, str) else ""
    if base_url is not None and _normalize_url(base_url) not in _DEFAULT_BASE_URLS.get(name, ()):
        return Capabilities()
    model_id = model.strip() if isinstance(model, str) else ""
    if name == "gemini":
        model_id = model_id.removeprefix("models/")
    for row_provider, pattern, (image, audio, file) in _COMPILED:
        if row_provider == name and pattern.fullmatch(model_id):
            return Capabilities(image=list(image), audio=list(audio), file=list(file))
    return Capabilities()


def _normalize_url(url: str) -> str:
    return url.strip().rstrip("/").lower() if isinstance(url, str) else ""


def assert_request_supported(
    request: LlmRequest | dict[str, Any],
    capabilities: Capabilities | None,
    *,
    provider: str | None = None,
    model: str | None = None,
) -> None:
    """Raise ``UnsupportedModalityError`` for the first media part ``capabilities`` does not declare.

    Media inside tool results counts. Call it before any content resolution or network call;
    ``provider`` and ``model`` only make the message clearer. ``None`` capabilities mean text-only.
    """
    if supported_already(request, capabilities):
        return  # the journaled call checked this very request against these capabilities
    req = parse_request(request)
    caps = capabilities if capabilities is not None else Capabilities()
    verdicts: dict[tuple[str, str], bool] = {}  # a transcript repeats a few media types
    for location in iter_media(req):
        part = location.part
        modality: Modality = part.type
        media_type = part.media_type
        if type(media_type) is str:
            accepted = verdicts.get((modality, media_type))
            if accepted is None:
                accepted = verdicts[modality, media_type] = caps.accepts(modality, media_type)
        else:
            accepted = caps.accepts(modality, media_type)
        if accepted:
            continue
        who = _who(provider, model)
        declared: list[str] = getattr(caps, modality)
        inside = (
            f" (inside the tool_result for {location.tool_result.tool_use_id!r})"
            if location.tool_result is not None
            else ""
        )
        raise UnsupportedModalityError(
            f"{location.path}{inside}: {who} does not accept {modality} {media_type!r} "
            f"(declared {modality} types: {', '.join(declared) or 'none'}). Use a model that "
            f"takes this media, leave the part out, or, if the model does accept it, pass "
            f"capabilities=Capabilities({modality}=[{media_type!r}]) to the provider.",
            path=location.path,
            message_index=location.message_index,
            part_index=location.part_index,
            item_index=location.item_index,
            modality=modality,
            media_type=media_type,
            provider=provider,
            model=model,
        )


def guard_supported(
    request: LlmRequest | dict[str, Any],
    capabilities: Capabilities | None,
    *,
    provider: str | None = None,
    model: str | None = None,
    max_inline_bytes: int = MAX_INLINE_BYTES,
    max_inline_total_bytes: int = MAX_INLINE_TOTAL_BYTES,
) -> LlmRequest:
    """``assert_request_supported`` and then ``guard_request`` (what a provider runs on what it is
    given), with the messages walked once: the guard's walk notes every media part's modality
    and type, and the capability check reads those few pairs instead of walking the messages
    again. The same checks, and the same first error: when the guard refuses the request, the
    capability check runs on it before that refusal is raised (it came first), and when a pair
    is refused, the full check runs to name the part (its path, its tool result).
    """
    req = parse_request(request)
    try:
        guarded, kinds = guard_with_media(
            req, max_inline_bytes=max_inline_bytes, max_inline_total_bytes=max_inline_total_bytes
        )
    except Exception as exc:  # any refusal: the capability check's own error came first
        refused: Exception | None = exc
    else:
        refused = None
    if refused is not None:
        assert_request_supported(req, capabilities, provider=provider, model=model)
        raise refused
    caps = capabilities if capabilities is not None else Capabilities()
    if kinds is None or not all(caps.accepts(modality, media) for modality, media in kinds):  # type: ignore[arg-type]
        assert_request_supported(req, capabilities, provider=provider, model=model)
    return guarded


def _who(provider: str | None, model: str | None) -> str:
    if provider and model:
        return f"{provider} model {model!r}"
    if model:
        return f"model {model!r}"
    return provider or "the provider"
