"""Capabilities: pattern matching, the decision-6 allowlist row by row, and assert_request_supported."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from loom_nb.capabilities import (
    Capabilities,
    _accepted,
    assert_request_supported,
    default_capabilities,
)
from loom_nb.content import (
    AudioPart,
    ContentRef,
    DataSource,
    FilePart,
    ImagePart,
    LlmRequest,
    Message,
    RefSource,
    TextPart,
    ToolResultPart,
    ToolUsePart,
)
from loom_nb.errors import GuardError, UnsupportedModalityError

PNG = base64.b64encode(b"\x89PNG").decode()
REF = RefSource(ref=ContentRef(address="sha256:" + "c" * 64))

# ---- patterns -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "media_type", "accepted"),
    [
        ("image/png", "image/png", True),
        ("image/png", "IMAGE/PNG", True),
        ("image/png", "image/jpeg", False),
        ("image/*", "image/webp", True),
        ("image/*", "audio/wav", False),
        ("*", "application/x-anything", True),
        ("*/*", "audio/ogg", True),
        ("text/plain", "text/plain; charset=utf-8", True),
        ("*", "not a type", False),
    ],
)
def test_patterns_match_exact_type_wildcard_and_star(
    pattern: str, media_type: str, accepted: bool
) -> None:
    """Patterns are an exact type, 'type/*' or '*', case-insensitive, ignoring parameters; a malformed type never matches."""
    assert Capabilities(file=[pattern]).accepts("file", media_type) is accepted


class _Lying(str):
    """A str whose hash and equality say nothing about its text."""

    def __hash__(self) -> int:
        return 0

    def __eq__(self, other: object) -> bool:
        return True

    __ne__ = str.__ne__


MEDIA_TYPES = ["image/png", "IMAGE/PNG", "image/webp", "audio/wav", "text/plain; charset=utf-8"]


@given(
    st.lists(st.sampled_from(["image/png", "image/*", "*", "audio/wav", "text/plain"]), max_size=3),
    st.sampled_from(MEDIA_TYPES) | st.text(max_size=12),
)
def test_accepts_answers_as_the_patterns_say_on_every_call(
    patterns: list[str], media_type: str
) -> None:
    """``accepts`` (remembered per pattern list and type) agrees with matching the patterns anew."""
    caps = Capabilities(file=patterns)
    expected = _accepted.__wrapped__(tuple(patterns), media_type)
    assert caps.accepts("file", media_type) is expected
    assert caps.accepts("file", media_type) is expected


def test_a_str_subclass_is_matched_by_its_text_not_its_hash() -> None:
    """A media type whose hash and equality lie is judged by its text, never by a remembered answer."""
    caps = Capabilities(image=["image/png"])
    assert caps.accepts("image", "image/png")
    assert not caps.accepts("image", _Lying("audio/wav"))


@pytest.mark.parametrize("pattern", ["png", "image/", "image/png*", "", "*/png", "i mage/png"])
def test_malformed_patterns_are_refused(pattern: str) -> None:
    """A declaration that is not 'type/subtype', 'type/*' or '*' is refused when built."""
    with pytest.raises(ValidationError):
        Capabilities(image=[pattern])


def test_empty_capabilities_are_text_only() -> None:
    """Capabilities() accepts no media of any modality."""
    caps = Capabilities()
    assert not any(caps.accepts(m, "image/png") for m in ("image", "audio", "file"))


# ---- the allowlist --------------------------------------------------------------------------

IMAGES_PDF = {"image": True, "audio": False, "pdf": True}
NOTHING = {"image": False, "audio": False, "pdf": False}

ALLOWLIST: list[tuple[str, str, dict[str, bool]]] = [
    # OpenAI gpt-4o*
    ("openai", "gpt-4o", IMAGES_PDF),
    ("openai", "gpt-4o-2024-08-06", IMAGES_PDF),
    ("openai", "gpt-4o-mini", IMAGES_PDF),
    # gpt-4.1*
    ("openai", "gpt-4.1", IMAGES_PDF),
    ("openai", "gpt-4.1-mini-2025-04-14", IMAGES_PDF),
    ("openai", "gpt-4.1-nano", IMAGES_PDF),
    # gpt-5*
    ("openai", "gpt-5", IMAGES_PDF),
    ("openai", "gpt-5-mini", IMAGES_PDF),
    ("openai", "gpt-5.1", IMAGES_PDF),
    # o1 / o3 except -mini / -preview
    ("openai", "o1", IMAGES_PDF),
    ("openai", "o1-2024-12-17", IMAGES_PDF),
    ("openai", "o3", IMAGES_PDF),
    ("openai", "o3-2025-04-16", IMAGES_PDF),
    # o4*
    ("openai", "o4-mini", IMAGES_PDF),
    ("openai", "o4-mini-2025-04-16", IMAGES_PDF),
    # dated non-preview gpt-4-turbo
    ("openai", "gpt-4-turbo-2024-04-09", IMAGES_PDF),
    ("openai", "gpt-4-turbo", IMAGES_PDF),
    # audio only for audio models
    ("openai", "gpt-4o-audio-preview", {"image": True, "audio": True, "pdf": True}),
    ("openai", "gpt-4o-audio-preview-2024-12-17", {"image": True, "audio": True, "pdf": True}),
    ("openai", "gpt-4o-mini-audio-preview", {"image": True, "audio": True, "pdf": True}),
    ("openai", "gpt-audio", {"image": False, "audio": True, "pdf": False}),
    # Anthropic claude-3 and later
    ("anthropic", "claude-3-opus-20240229", IMAGES_PDF),
    ("anthropic", "claude-3-haiku-20240307", IMAGES_PDF),
    ("anthropic", "claude-3-5-sonnet-20241022", IMAGES_PDF),
    ("anthropic", "claude-3-7-sonnet-latest", IMAGES_PDF),
    ("anthropic", "claude-sonnet-4-20250514", IMAGES_PDF),
    ("anthropic", "claude-opus-4-1-20250805", IMAGES_PDF),
    ("anthropic", "claude-haiku-4-5", IMAGES_PDF),
    # Gemini 1.5+, 2.x and the -latest aliases
    ("gemini", "gemini-1.5-pro", {"image": True, "audio": True, "pdf": True}),
    ("gemini", "gemini-1.5-flash-latest", {"image": True, "audio": True, "pdf": True}),
    ("gemini", "gemini-1.5-flash-8b", {"image": True, "audio": True, "pdf": True}),
    ("gemini", "gemini-2.0-flash", {"image": True, "audio": True, "pdf": True}),
    ("gemini", "gemini-2.5-pro", {"image": True, "audio": True, "pdf": True}),
    ("gemini", "models/gemini-2.5-flash", {"image": True, "audio": True, "pdf": True}),
    ("gemini", "gemini-3-pro-preview", {"image": True, "audio": True, "pdf": True}),
    ("gemini", "gemini-flash-latest", {"image": True, "audio": True, "pdf": True}),
    ("gemini", "gemini-pro-latest", {"image": True, "audio": True, "pdf": True}),
]

EXCLUDED: list[tuple[str, str]] = [
    ("openai", "gpt-4"),
    ("openai", "gpt-4-0613"),
    ("openai", "gpt-4-0314"),
    ("openai", "gpt-4-32k"),
    ("openai", "gpt-4-turbo-preview"),
    ("openai", "gpt-4-1106-preview"),
    ("openai", "gpt-4-vision-preview"),
    ("openai", "gpt-3.5-turbo"),
    ("openai", "gpt-3.5-turbo-0125"),
    ("openai", "o1-mini"),
    ("openai", "o1-mini-2024-09-12"),
    ("openai", "o1-preview"),
    ("openai", "o1-preview-2024-09-12"),
    ("openai", "o3-mini"),
    ("openai", "o3-mini-2025-01-31"),
    ("openai", "gpt-50"),
    ("anthropic", "claude-2.1"),
    ("anthropic", "claude-2.0"),
    ("anthropic", "claude-instant-1.2"),
    ("gemini", "gemini-1.0-pro-latest"),
    ("gemini", "gemini-1.0-pro"),
    ("gemini", "gemini-pro"),
    ("gemini", "gemini-pro-vision"),
    ("openai", "llama3"),
    ("openai", "llama3.1:8b"),
    ("openai", "mistral"),
    ("anthropic", "my-local-alias"),
    ("gemini", "gemma-3-27b-it"),
    ("openai", "some-future-model-2030"),
    ("anthropic", "claude-next"),
    ("ollama", "llava"),
    ("openai", ""),
    ("openai", "GPT-4O"),
]


def declared(caps: Capabilities) -> dict[str, bool]:
    return {
        "image": caps.accepts("image", "image/png"),
        "audio": caps.accepts("audio", "audio/wav") and caps.accepts("audio", "audio/mpeg"),
        "pdf": caps.accepts("file", "application/pdf"),
    }


@pytest.mark.parametrize(("provider", "model", "expected"), ALLOWLIST)
def test_allowlist_row(provider: str, model: str, expected: dict[str, bool]) -> None:
    """Each media-capable family declares exactly the modalities decision 6 gives it."""
    assert declared(default_capabilities(provider, model)) == expected


@pytest.mark.parametrize(("provider", "model"), EXCLUDED)
def test_excluded_family_declares_nothing(provider: str, model: str) -> None:
    """Plain gpt-4, gpt-3.5, -mini/-preview reasoning models, old Gemini, local aliases and unknown ids are text-only."""
    assert default_capabilities(provider, model) == Capabilities()


def test_openai_audio_is_wav_and_mp3_only() -> None:
    """OpenAI audio models take wav and mp3, nothing else; gemini takes more audio formats."""
    caps = default_capabilities("openai", "gpt-4o-audio-preview")
    assert caps.accepts("audio", "audio/wav")
    assert caps.accepts("audio", "audio/mpeg")
    assert not caps.accepts("audio", "audio/ogg")
    assert default_capabilities("gemini", "gemini-2.5-flash").accepts("audio", "audio/ogg")


def test_gemini_takes_text_documents_and_the_others_do_not() -> None:
    """Gemini declares text documents besides PDF; Anthropic and OpenAI declare only PDF."""
    assert default_capabilities("gemini", "gemini-2.0-flash").accepts("file", "text/plain")
    assert not default_capabilities("anthropic", "claude-3-5-sonnet-latest").accepts(
        "file", "text/plain"
    )
    assert not default_capabilities("openai", "gpt-4o").accepts("file", "text/plain")


@pytest.mark.parametrize(
    ("provider", "base_url"),
    [
        ("openai", "https://api.openai.com/v1"),
        ("openai", "https://api.openai.com/v1/"),
        ("anthropic", "https://api.anthropic.com"),
        ("gemini", "https://generativelanguage.googleapis.com/v1beta"),
    ],
)
def test_vendor_base_url_keeps_the_defaults(provider: str, base_url: str) -> None:
    """Passing the vendor's own base URL changes nothing."""
    model = {"openai": "gpt-4o", "anthropic": "claude-sonnet-4-5", "gemini": "gemini-2.5-pro"}[
        provider
    ]
    assert default_capabilities(provider, model, base_url) == default_capabilities(provider, model)
    assert default_capabilities(provider, model, base_url) != Capabilities()


@pytest.mark.parametrize(
    "base_url",
    [
        "http://localhost:11434/v1",
        "https://my-proxy.example.com/v1",
        "https://api.openai.com.evil.example/v1",
        "http://api.openai.com/v1",
        "https://api.anthropic.com",
    ],
)
def test_non_default_base_url_declares_nothing(base_url: str) -> None:
    """A compatible server or proxy declares nothing even for a media-capable model id."""
    assert default_capabilities("openai", "gpt-4o", base_url) == Capabilities()


# ---- assert_request_supported ---------------------------------------------------------------


def media_request(part: Any, *, in_result: bool = False) -> LlmRequest:
    if not in_result:
        return LlmRequest(messages=[Message(role="user", content=[TextPart(text="see"), part])])
    return LlmRequest(
        messages=[
            Message(role="assistant", content=[ToolUsePart(id="call_7", name="f", input={})]),
            Message(
                role="user",
                content=[ToolResultPart(tool_use_id="call_7", content=[TextPart(text="r"), part])],
            ),
        ]
    )


IMG = ImagePart(media_type="image/png", source=REF)
WAV = AudioPart(media_type="audio/wav", source=DataSource(data=PNG))
PDF = FilePart(media_type="application/pdf", source=REF)


def test_undeclared_media_names_message_part_type_and_model() -> None:
    """The refusal names the path, the media type and provider/model, with a remedy."""
    with pytest.raises(UnsupportedModalityError) as caught:
        assert_request_supported(
            media_request(IMG), Capabilities(), provider="openai", model="gpt-4"
        )
    exc = caught.value
    assert isinstance(exc, GuardError)
    assert exc.code == "unsupported_modality"
    message = str(exc)
    for fragment in ["messages[0].content[1]", "'image/png'", "openai", "'gpt-4'", "capabilities="]:
        assert fragment in message
    assert exc.details["message_index"] == 0
    assert exc.details["part_index"] == 1
    assert exc.details["item_index"] is None


def test_media_inside_tool_results_counts() -> None:
    """Media in a tool result is checked too, and the refusal names the tool_result path and call id."""
    with pytest.raises(UnsupportedModalityError) as caught:
        assert_request_supported(
            media_request(WAV, in_result=True),
            default_capabilities("anthropic", "claude-3-5-sonnet-latest"),
            provider="anthropic",
            model="claude-3-5-sonnet-latest",
        )
    assert "messages[1].content[0].content[1]" in str(caught.value)
    assert "call_7" in str(caught.value)
    assert caught.value.details["item_index"] == 1


@pytest.mark.parametrize("part", [IMG, WAV, PDF], ids=["image", "audio", "file"])
def test_declared_media_passes_and_explicit_capabilities_win(part: Any) -> None:
    """Explicit capabilities decide: a declared type passes, the same request fails text-only."""
    request = media_request(part, in_result=True)
    assert_request_supported(request, Capabilities(image=["*"], audio=["audio/*"], file=["*"]))
    with pytest.raises(UnsupportedModalityError):
        assert_request_supported(request, Capabilities())
    with pytest.raises(UnsupportedModalityError):
        assert_request_supported(request, None)


def test_text_and_tools_need_no_declaration() -> None:
    """A request with text, tool calls and results passes with no capabilities at all."""
    request = LlmRequest(
        messages=[
            Message(role="user", content="hello"),
            Message(role="assistant", content=[ToolUsePart(id="t", name="f", input={"a": 1})]),
            Message(role="user", content=[ToolResultPart(tool_use_id="t", content="done")]),
        ]
    )
    assert_request_supported(request, Capabilities())


def test_assert_checks_before_io_and_accepts_dicts() -> None:
    """A dict request is validated and checked without resolving its refs (the address need not exist anywhere)."""
    data = media_request(IMG).model_dump(mode="json")
    assert_request_supported(data, Capabilities(image=["image/png"]))
    with pytest.raises(UnsupportedModalityError):
        assert_request_supported(data, Capabilities(image=["image/jpeg"]))


def test_guard_supported_keeps_the_capability_error_first() -> None:
    """One walk for both checks, and the capability refusal still comes before the guard's."""
    from loom_nb.capabilities import guard_supported
    from loom_nb.errors import GuardError, UnsupportedModalityError

    png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
    image = {"type": "image", "media_type": "image/png", "source": {"kind": "data", "data": png}}
    orphan = {"type": "tool_result", "tool_use_id": "nobody", "content": "x"}
    both = {"messages": [{"role": "user", "content": [image, orphan]}]}
    with pytest.raises(UnsupportedModalityError) as unsupported:
        guard_supported(both, Capabilities())
    assert unsupported.value.details["path"] == "messages[0].content[0]"
    with pytest.raises(GuardError) as refused:
        guard_supported(both, Capabilities(image=["image/*"]))
    assert refused.value.code == "orphan_tool_result"
    only_image = {"messages": [{"role": "user", "content": [image]}]}
    assert guard_supported(only_image, Capabilities(image=["image/png"])).messages[0].content
    with pytest.raises(UnsupportedModalityError):
        guard_supported(only_image, Capabilities(image=["image/jpeg"]))


def test_guard_supported_checks_a_lying_media_type_part_by_part() -> None:
    """A str subclass equal to everything cannot hide a part behind an accepted pair."""
    from loom_nb.capabilities import guard_supported
    from loom_nb.content import DataSource, ImagePart, LlmRequest, Message
    from loom_nb.errors import UnsupportedModalityError

    class Liar(str):
        def __eq__(self, other: object) -> bool:
            return True

        __hash__ = str.__hash__

    png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
    ok = ImagePart(media_type="image/png", source=DataSource(data=png))
    odd = ImagePart.model_construct(media_type=Liar("image/gif"), source=DataSource(data=png))
    request = LlmRequest(messages=[Message(role="user", content=[ok, odd])])
    with pytest.raises(UnsupportedModalityError) as refused:
        guard_supported(request, Capabilities(image=["image/png"]))
    assert refused.value.details["path"] == "messages[0].content[1]"
