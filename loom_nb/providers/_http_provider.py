"""``HttpProvider``: the shell the vendor providers share (ADR 0120 decisions 2, 6, 7, 8).

A vendor provider is a pure mapping (its ``*_wire`` module) behind the same HTTP shell: it owns
or borrows an ``httpx.AsyncClient``, declares its capabilities, and on every call

1. parses the request, refuses media the capabilities do not declare before any I/O
   (decision 6, for direct callers too), and guards it (decision 7: a caller who skipped
   ``guard_request`` still never gets untrusted content onto the wire unfenced; guarding a
   guarded request changes nothing);
2. merges the settings field by field (the call's ``settings=`` over the request's over the
   provider's construction defaults) and sets ``output_schema`` from ``output_type=``, so the
   effective values travel on the request;
3. maps it to the vendor's body, lays the settings and structured-output fields and then
   ``extra_body`` over it (``merge_body``: a setting the vendor or model cannot take, or an
   ``extra_body`` value contradicting one, is refused here, before any I/O), and sends it through
   ``_http.send_json`` / ``_http.stream_json`` (retries, backoff, streamed resets);
4. reads the answer: a non-JSON body is ``ProviderError(code="malformed_response")``, and so is a
   JSON value that is not an object where the vendor needs one; with an output schema the text is
   validated (``StructuredOutputError`` on a mismatch) and ``response.output`` set.

``HttpProvider`` holds that once, construction included: every vendor takes the same keywords
(``api_key`` or the vendor's environment variable, ``base_url``, ``capabilities``, ``http_client``,
``settings``, ``extra_body``, retries, timeouts, ``stream_deadline``, ``request_deadline``,
``max_response_bytes``; ``HttpOptions``) and refuses them the same way. A subclass supplies the vendor name, its key variables, the URLs, the headers,
the body mapping, the response and error parsers and the stream decoder; a vendor with keywords of
its own (Anthropic's ``max_tokens``) takes them beside ``**options: Unpack[HttpOptions]``.
"""

from __future__ import annotations

import inspect
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Mapping
from typing import Any, ClassVar, Self, TypedDict

import httpx
from pydantic import BaseModel

from loom_nb._args import check_type
from loom_nb.capabilities import Capabilities, default_capabilities, guard_supported
from loom_nb.content import LlmRequest, LlmResponse, parse_request
from loom_nb.errors import ConfigurationError, ProviderError
from loom_nb.guard import checked_already, walked_once
from loom_nb.limits import MAX_RESOLVED_BYTES
from loom_nb.providers._base import LlmStreamChunk
from loom_nb.providers._http import (
    DEFAULT_MAX_RESPONSE_BYTES,
    DEFAULT_REQUEST_DEADLINE,
    DEFAULT_STREAM_DEADLINE,
    DEFAULT_TIMEOUT,
    RetryPolicy,
    Secret,
    SseEvent,
    check_limit,
    decode_json,
    redact_error,
    resolve_api_key,
    send_json,
    speaker,
    sse_error_data,
    stream_json,
)
from loom_nb.providers._settings_wire import merge_body
from loom_nb.providers._structured import check_output_type, effective_request, validate_output
from loom_nb.settings import ModelSettings, merge_settings

__all__ = ["HttpOptions", "HttpProvider", "checked_extra_body", "error_body"]


def error_body(response: httpx.Response) -> Any:
    """The decoded JSON of an error response, or None when it is not JSON.

    A body in SSE form (``data: {"error": ...}``, from a server answering a streamed request's
    content type) gives the JSON of its first event.
    """
    body = response.content  # raw-content: httpx.Response.content is bytes
    for text in (body, sse_error_data(body)):
        if text is None:
            continue
        try:
            return decode_json(text, provider="the vendor", what="an error body")
        except ProviderError:
            continue
    return None


def checked_extra_body(
    extra_body: Mapping[str, Any] | None, reserved: frozenset[str], *, hint: str
) -> dict[str, Any]:
    """A copy of ``extra_body``; a key the provider builds from the request is refused.

    ``hint`` is the sentence saying what does belong there.
    """
    clash = sorted(reserved.intersection(extra_body or {}))
    if clash:
        raise ConfigurationError(
            f"extra_body may not set {clash}: the provider builds those from the request. {hint}",
            code="reserved_body_field",
            fields=clash,
        )
    return dict(extra_body or {})


class HttpOptions(TypedDict, total=False):
    """The keywords every HTTP provider takes (defaults and meaning: ``HttpProvider.__init__``)."""

    api_key: str | None
    base_url: str | None
    capabilities: Capabilities | None
    http_client: httpx.AsyncClient | None
    settings: ModelSettings | None
    extra_body: Mapping[str, Any] | None
    max_retries: int
    timeout: httpx.Timeout | float | None
    retry_policy: RetryPolicy | None
    stream_deadline: float | None
    request_deadline: float | None
    max_response_bytes: int | None


class HttpProvider(ABC):
    """The shared machinery of the HTTP providers; subclasses supply the vendor's hooks.

    Class attributes: ``_VENDOR`` (the name errors carry), ``_CAPABILITIES_KEY`` (the provider name
    ``default_capabilities`` knows), ``_KEY_ENV`` (the environment variables holding the key, read
    in order; a missing key names the first), ``_DEFAULT_BASE_URL`` and ``_PATH`` (the endpoint is
    ``base_url`` or the default, then the path), ``_RESERVED`` and ``_EXTRA_BODY_HINT`` (the body
    keys ``extra_body`` may not set, and what does belong there), ``_NOT_JSON_REMEDY`` (the advice
    for a non-JSON 2xx body) and ``_REQUIRES_OBJECT`` (whether ``complete`` refuses a JSON answer
    that is not an object itself, rather than leaving it to the vendor's response parser).
    """

    _VENDOR: ClassVar[str]
    _CAPABILITIES_KEY: ClassVar[str]
    _KEY_ENV: ClassVar[tuple[str, ...]]
    _DEFAULT_BASE_URL: ClassVar[str]
    _PATH: ClassVar[str] = ""
    _RESERVED: ClassVar[frozenset[str]]
    _EXTRA_BODY_HINT: ClassVar[str]
    caches_prompts: ClassVar[bool] = True
    """The provider maps ``ModelSettings.cache`` (so ``Chat``'s default ``"auto"`` reaches it)."""
    _NOT_JSON_REMEDY: ClassVar[str] = "Check base_url."
    _REQUIRES_OBJECT: ClassVar[bool] = True
    __signature__: ClassVar[inspect.Signature]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.__signature__ = _constructor_signature(cls)

    def __new__(cls, *args: Any, **kwargs: Any) -> Self:
        """Refuse wrong-typed arguments before any subclass code runs (issue 17)."""
        where = f"{cls.__name__}()"
        model = args[0] if args else kwargs.get("model")
        check_type(model, str, name="model", where=where, error=ConfigurationError)
        if not str(model).strip():
            raise ConfigurationError(
                f"{where}: model must name a model, not an empty string.", code="invalid_argument"
            )
        for name, kinds in (
            ("base_url", str),
            ("api_key", str),
            ("capabilities", Capabilities),
            ("http_client", httpx.AsyncClient),
            ("settings", ModelSettings),
            ("extra_body", dict),
            ("retry_policy", RetryPolicy),
            ("timeout", (int, float, httpx.Timeout)),
            ("max_retries", int),
        ):
            if name in kwargs:
                check_type(
                    kwargs[name],
                    kinds,
                    name=name,
                    where=where,
                    error=ConfigurationError,
                    optional=True,
                )
        return super().__new__(cls)

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        capabilities: Capabilities | None = None,
        http_client: httpx.AsyncClient | None = None,
        settings: ModelSettings | None = None,
        extra_body: Mapping[str, Any] | None = None,
        max_retries: int = 3,
        timeout: httpx.Timeout | float | None = DEFAULT_TIMEOUT,
        retry_policy: RetryPolicy | None = None,
        stream_deadline: float | None = DEFAULT_STREAM_DEADLINE,
        request_deadline: float | None = DEFAULT_REQUEST_DEADLINE,
        max_response_bytes: int | None = DEFAULT_MAX_RESPONSE_BYTES,
    ) -> None:
        """Resolve the key, check ``extra_body``, build the URLs, then own or borrow the client.

        Everything that may refuse the arguments runs before the client is created, so a refused
        construction never leaves an unclosed client behind.
        """
        model = self._model_id(model)
        check_limit("stream_deadline", stream_deadline)
        check_limit("request_deadline", request_deadline)
        check_limit("max_response_bytes", max_response_bytes, integer=True)
        self._key = self._api_key(api_key, base_url)
        extra = checked_extra_body(extra_body, self._RESERVED, hint=self._EXTRA_BODY_HINT)
        self._url, self._stream_url = self._endpoints(model, base_url)
        self._settings = merge_settings(settings)
        self.model = model
        self.base_url = base_url
        self._capabilities = (
            capabilities
            if capabilities is not None
            else default_capabilities(self._CAPABILITIES_KEY, model, base_url)
        )
        self._extra = extra
        self._owns_client = http_client is None
        self._client = http_client if http_client is not None else httpx.AsyncClient()
        self._policy = retry_policy or RetryPolicy(max_retries=max_retries)
        self._timeout = timeout
        self._stream_deadline = stream_deadline
        self._request_deadline = request_deadline
        self._max_response_bytes = max_response_bytes

    # -- construction hooks ---------------------------------------------------------------------

    @staticmethod
    def _model_id(model: str) -> str:
        """The model id as the URL or the body carries it."""
        return model

    def _api_key(self, api_key: str | None, base_url: str | None) -> Secret | None:
        """The key every call carries: ``api_key=``, else the first of ``_KEY_ENV`` that is set."""
        env_var, *fallback = self._KEY_ENV
        return resolve_api_key(api_key, env_var, self._VENDOR, fallback_env=fallback)

    def _endpoints(self, model: str, base_url: str | None) -> tuple[str, str]:
        """The URLs of a call and of a streamed call (the same unless the vendor says otherwise)."""
        url = (base_url or self._DEFAULT_BASE_URL).rstrip("/") + self._PATH
        return url, url

    def _key_header(self, name: str, prefix: str = "") -> dict[str, str]:
        """``{name: prefix + key}``, or nothing when the provider has no key (a local server)."""
        return {} if self._key is None else {name: prefix + self._key.reveal()}

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model!r}, base_url={self._url!r})"

    # -- vendor hooks ---------------------------------------------------------------------------

    @abstractmethod
    def _headers(self) -> dict[str, str]:
        """The headers of a (non-streamed) call, key included."""

    @abstractmethod
    def _body(self, request: LlmRequest, *, stream: bool) -> dict[str, Any]:
        """The vendor body for a checked, guarded request (before ``extra_body``)."""

    def _settings_fields(self, request: LlmRequest) -> dict[str, Any]:
        """The body fields ``request.settings`` produce; refuses what the vendor cannot take."""
        if request.settings is not None:
            raise ConfigurationError(
                f"{self._VENDOR} does not map ModelSettings. Nothing was sent.",
                code="unsupported_setting",
            )
        return {}

    def _output_fields(self, request: LlmRequest, schema: dict[str, Any]) -> dict[str, Any]:
        """The body fields asking for JSON matching ``schema`` in the vendor's native mode."""
        raise ConfigurationError(
            f"{self._VENDOR} has no structured-output mode in loom_nb. Nothing was sent.",
            code="unsupported_output_type",
        )

    @abstractmethod
    def _parse_response(self, data: Any) -> LlmResponse:
        """The ``LlmResponse`` for a decoded JSON answer."""

    @abstractmethod
    def _parse_error(self, response: httpx.Response) -> ProviderError:
        """The ``ProviderError`` for an error response."""

    @abstractmethod
    def _decode(self, events: AsyncIterator[SseEvent]) -> AsyncIterator[LlmStreamChunk]:
        """The chunks of one streamed attempt."""

    # -- shared machinery -----------------------------------------------------------------------

    @property
    def capabilities(self) -> Capabilities:
        """The media this provider accepts; anything else is refused before any I/O."""
        return self._capabilities

    @property
    def settings(self) -> ModelSettings | None:
        """The construction defaults, under the request's and each call's settings (None: none)."""
        return self._settings

    async def aclose(self) -> None:
        """Close the HTTP client if the provider created it (an injected one is the caller's)."""
        if self._owns_client:
            await self._client.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def wire_body(
        self,
        request: LlmRequest | Mapping[str, Any],
        *,
        stream: bool = False,
        settings: ModelSettings | None = None,
        output_type: type[BaseModel] | None = None,
    ) -> dict[str, Any]:
        """The exact JSON body ``complete`` (or ``stream``) would send, after the checks and the guard."""
        prepared = self._call_request(request, settings, output_type)
        return self._assemble(prepared, stream=stream)

    def _call_request(
        self,
        request: LlmRequest | Mapping[str, Any],
        settings: ModelSettings | None,
        output_type: type[BaseModel] | None,
    ) -> LlmRequest:
        """The checked, guarded request of one call, effective settings and schema on it."""
        checked_type = check_output_type(output_type)
        if isinstance(request, LlmRequest):
            return self._prepare(effective_request(request, self._settings, settings, checked_type))
        with walked_once():  # messages validated from dicts here: no later request holds them
            return self._prepare(effective_request(request, self._settings, settings, checked_type))

    def _assemble(self, request: LlmRequest, *, stream: bool) -> dict[str, Any]:
        managed = self._settings_fields(request)
        if request.output_schema is not None:
            managed = merge_body(managed, self._output_fields(request, request.output_schema), {})
        return merge_body(self._body(request, stream=stream), managed, self._extra)

    def _prepare(self, request: LlmRequest | Mapping[str, Any]) -> LlmRequest:
        parsed = parse_request(request)
        if checked_already(parsed, self._capabilities, MAX_RESOLVED_BYTES, MAX_RESOLVED_BYTES):
            return parsed  # the journaled call guarded and checked this very request (_checked)
        # The capability check, then structure and provenance (one walk for both), not the
        # inline caps: those bound the journaled request, while the provider sees media already
        # resolved from the store (up to the resolve budget).
        return guard_supported(
            parsed,
            self._capabilities,
            provider=self._VENDOR,
            model=self.model,
            max_inline_bytes=MAX_RESOLVED_BYTES,
            max_inline_total_bytes=MAX_RESOLVED_BYTES,
        )

    async def complete(
        self,
        request: LlmRequest | Mapping[str, Any],
        *,
        settings: ModelSettings | None = None,
        output_type: type[BaseModel] | None = None,
    ) -> LlmResponse:
        """Send the request and return the whole response.

        ``settings`` override the request's and the provider's field by field; ``output_type``
        (a pydantic model class) asks for JSON in the vendor's native structured-output mode and
        sets ``response.output`` to the validated instance (``StructuredOutputError`` otherwise).
        """
        prepared = self._call_request(request, settings, output_type)
        body = self._assemble(prepared, stream=False)
        try:
            response = await send_json(
                self._client,
                self._url,
                headers=self._headers(),
                body=body,
                provider=self._VENDOR,
                parse_error=self._parse_error,
                policy=self._policy,
                http_timeout=self._timeout,
                request_deadline=self._request_deadline,
                max_response_bytes=self._max_response_bytes,
            )
            raw = response.content  # raw-content: httpx.Response.content is bytes
            return self._finish(self._whole(raw, response.status_code), prepared, output_type)
        except ProviderError as exc:
            raise redact_error(exc, self._secrets()) from exc.__cause__

    def _whole(self, raw: bytes, status: int) -> LlmResponse:
        """The response of a whole 2xx JSON body (a ``complete`` call's, or a server's that
        answered a streamed call in one piece)."""
        who = speaker(self._VENDOR, self._url)[0]
        try:
            data = decode_json(raw, provider=who, what="a body")
        except ProviderError as exc:
            if "not JSON" not in exc.message:
                raise  # nested too deep: the message says so
            raise ProviderError(
                f"{who} answered HTTP {status} with a body that is not JSON. "
                f"{self._NOT_JSON_REMEDY}",
                code="malformed_response",
                provider=self._VENDOR,
                status=status,
            ) from None
        if self._REQUIRES_OBJECT and not isinstance(data, dict):
            raise ProviderError(
                f"{who} answered with JSON that is not an object. Check base_url.",
                code="malformed_response",
                provider=self._VENDOR,
            )
        return self._parse_response(data)

    def _secrets(self) -> tuple[Secret | str | None, ...]:
        """The credentials vendor text must never echo back to the caller (the API key)."""
        key = getattr(self, "_key", None)
        return (key,) if isinstance(key, Secret | str) else ()

    def _finish(
        self, response: LlmResponse, request: LlmRequest, output_type: type[BaseModel] | None
    ) -> LlmResponse:
        if request.output_schema is None:
            return response
        return validate_output(response, output_type, vendor=self._VENDOR)

    async def stream(
        self,
        request: LlmRequest | Mapping[str, Any],
        *,
        settings: ModelSettings | None = None,
        output_type: type[BaseModel] | None = None,
    ) -> AsyncIterator[LlmStreamChunk]:
        """Send the request as a streamed call; yield text and tool deltas, then ``done``.

        A retried attempt after partial output first yields a ``reset`` chunk. ``settings`` and
        ``output_type`` as for ``complete``; the ``done`` chunk carries the validated output.
        """
        prepared = self._call_request(request, settings, output_type)
        body = self._assemble(prepared, stream=True)
        headers = {**self._headers(), "accept": "text/event-stream"}
        try:
            async for chunk in stream_json(
                self._client,
                self._stream_url,
                headers=headers,
                body=body,
                provider=self._VENDOR,
                parse_error=self._parse_error,
                decode=self._decode,
                policy=self._policy,
                http_timeout=self._timeout,
                stream_deadline=self._stream_deadline,
                max_response_bytes=self._max_response_bytes,
                parse_whole=self._whole,
            ):
                if chunk.kind == "done" and chunk.response is not None:
                    finished = self._finish(chunk.response, prepared, output_type)
                    if finished is not chunk.response:
                        chunk = chunk.model_copy(update={"response": finished})
                yield chunk
        except ProviderError as exc:
            raise redact_error(exc, self._secrets()) from exc.__cause__


def _constructor_signature(cls: type[HttpProvider]) -> inspect.Signature:
    """The signature of ``cls(...)`` as help and tooltips should show it: every keyword, spelled out.

    A vendor that adds keywords declares them beside ``**options: Unpack[HttpOptions]``;
    ``inspect`` would show ``**options`` (and, with no ``__init__`` of the vendor's own, the
    ``*args, **kwargs`` of ``__new__``). The vendor's own keywords go before ``max_retries``, the
    place they had when every provider spelled its whole list out.
    """
    init = inspect.signature(cls.__init__)
    params = list(init.parameters.values())[1:]  # without self
    if not any(p.kind is p.VAR_KEYWORD for p in params):
        return init.replace(parameters=params)
    shared = list(inspect.signature(HttpProvider.__init__).parameters.values())[1:]
    own = [p for p in params if p.kind is p.KEYWORD_ONLY]
    at = [p.name for p in shared].index("max_retries")
    return init.replace(parameters=[*shared[:at], *own, *shared[at:]])
