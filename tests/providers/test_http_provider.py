"""The construction every HTTP provider shares (``_http_provider``): one signature, one refusal path."""

from __future__ import annotations

import inspect

import pytest

from loom_nb.errors import ConfigurationError
from loom_nb.providers._http import (
    DEFAULT_MAX_RESPONSE_BYTES,
    DEFAULT_REQUEST_DEADLINE,
    DEFAULT_STREAM_DEADLINE,
    DEFAULT_TIMEOUT,
)
from loom_nb.providers._http_provider import HttpOptions, HttpProvider
from loom_nb.providers.anthropic import AnthropicProvider
from loom_nb.providers.gemini import GeminiProvider
from loom_nb.providers.openai import OpenAIProvider, is_openai_endpoint
from loom_nb.providers.openai_responses import OpenAIResponsesProvider

SHARED = {
    "api_key": None,
    "base_url": None,
    "capabilities": None,
    "http_client": None,
    "settings": None,
    "extra_body": None,
    "max_retries": 3,
    "timeout": DEFAULT_TIMEOUT,
    "retry_policy": None,
    "stream_deadline": DEFAULT_STREAM_DEADLINE,
    "request_deadline": DEFAULT_REQUEST_DEADLINE,
    "max_response_bytes": DEFAULT_MAX_RESPONSE_BYTES,
}
OWN: dict[type[HttpProvider], dict[str, object]] = {
    AnthropicProvider: {"max_tokens": 4096},
    OpenAIProvider: {"organization": None, "project": None},
    OpenAIResponsesProvider: {},
    GeminiProvider: {},
}
KEY_ENV = {
    AnthropicProvider: "ANTHROPIC_API_KEY",
    OpenAIProvider: "OPENAI_API_KEY",
    OpenAIResponsesProvider: "OPENAI_API_KEY",
    GeminiProvider: "GEMINI_API_KEY",
}


@pytest.mark.parametrize("cls", list(OWN), ids=lambda c: c.__name__)
def test_signature_spells_out_every_keyword_with_its_default(cls: type[HttpProvider]) -> None:
    """help() and tooltips see model, then every shared and vendor keyword, never ``**options``."""
    params = inspect.signature(cls).parameters
    assert next(iter(params)) == "model"
    assert params["model"].default is inspect.Parameter.empty
    keywords = {
        name: p.default for name, p in params.items() if p.kind is inspect.Parameter.KEYWORD_ONLY
    }
    assert keywords == {**SHARED, **OWN[cls]}
    assert len(params) == 1 + len(keywords)


@pytest.mark.parametrize("cls", [AnthropicProvider, OpenAIProvider], ids=lambda c: c.__name__)
def test_vendor_keywords_sit_before_the_transport_ones(cls: type[HttpProvider]) -> None:
    """A vendor's own keywords come after extra_body and before max_retries, as they always did."""
    names = list(inspect.signature(cls).parameters)
    own = list(OWN[cls])
    at = names.index(own[0])
    assert names[at - 1] == "extra_body"
    assert names[at : at + len(own)] == own
    assert names[at + len(own)] == "max_retries"


def test_http_options_names_exactly_the_shared_keywords() -> None:
    """The TypedDict a vendor's ``**options`` is typed with matches the base constructor."""
    base = inspect.signature(HttpProvider.__init__).parameters
    shared = [n for n, p in base.items() if p.kind is inspect.Parameter.KEYWORD_ONLY]
    assert list(HttpOptions.__annotations__) == shared == list(SHARED)


@pytest.mark.parametrize("cls", list(KEY_ENV), ids=lambda c: c.__name__)
def test_missing_key_is_a_configuration_error_naming_the_variable(
    cls: type[HttpProvider], monkeypatch: pytest.MonkeyPatch
) -> None:
    """With no key anywhere, every provider refuses with the variable to set, before any client."""
    for name in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(ConfigurationError, match=KEY_ENV[cls]) as info:
        cls("some-model")
    assert info.value.code == "missing_api_key"
    assert info.value.details["env_var"] == KEY_ENV[cls]


@pytest.mark.parametrize("cls", list(KEY_ENV), ids=lambda c: c.__name__)
def test_key_header_carries_the_key_and_nothing_else_shows_it(cls: type[HttpProvider]) -> None:
    """The key reaches exactly one request header; the repr never shows it."""
    provider = cls("some-model", api_key="sk-secret")
    carrying = [v for v in provider._headers().values() if "sk-secret" in v]
    assert len(carrying) == 1
    assert "sk-secret" not in repr(provider)


@pytest.mark.parametrize("cls", [OpenAIProvider, OpenAIResponsesProvider], ids=lambda c: c.__name__)
def test_openai_key_never_leaves_for_a_compatible_server(
    cls: type[HttpProvider], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Off OpenAI's endpoint OPENAI_API_KEY is not read, and no Authorization header is sent."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai")
    provider = cls("llama3.2", base_url="http://localhost:11434/v1")
    assert "authorization" not in provider._headers()
    assert cls("gpt-4o")._headers()["authorization"] == "Bearer sk-openai"


def test_openai_endpoint_is_recognised_with_or_without_v1_and_slash() -> None:
    """api.openai.com with or without /v1, a trailing slash or capitals is OpenAI's own endpoint."""
    assert is_openai_endpoint(None)
    assert is_openai_endpoint(" https://API.openai.com/v1/ ")
    assert is_openai_endpoint("https://api.openai.com")
    assert not is_openai_endpoint("https://api.openai.com.example/v1")
    assert not is_openai_endpoint("http://localhost:11434/v1")
