"""The one error tree of loom_nb: every refusal is a ``LoomError`` with a stable ``code``.

Each error says what happened, where, and what to do next. ``code`` is a short machine-readable
string that never changes once released (tests, notebooks and callers match on it); the message
is for people and may improve. Details that help a program react (an address, a message index)
ride in ``details``.

::

    LoomError
    ├── ConfigurationError            bad settings: a missing API key, an unknown option
    ├── ContentValidationError        a part / message / request that does not fit the model
    │                                 (also ValueError and TypeError; from model_validate also pydantic's ValidationError)
    ├── MediaError                    a file or bytes that cannot become a media part (unknown type, unreadable)
    ├── GuardError                    structure and provenance refusals (ADR 0120 decision 7)
    │   ├── OversizedInlinePartError  inline bytes over MAX_INLINE_BYTES / the request total (decision 5)
    │   └── UnsupportedModalityError  media the provider did not declare (decision 6)
    ├── StoreError                    the content store
    │   ├── ContentNotFoundError      no blob at that address
    │   ├── ContentIntegrityError     the blob on disk does not hash to its address
    │   └── ContentAccessDeniedError  the principal's tenant never stored that blob
    ├── UnresolvedContentError        a ref the application sent could not be resolved (decision 4)
    ├── ProviderError                 a vendor API answered with an error, or could not be reached
    ├── StructuredOutputError         the model's answer did not validate against the output_type
    ├── BudgetExceededError           a spending limit (Limits) refused a model call before any I/O
    ├── JournalError                  the durable log
    │   ├── ExecutionBusyError        another live writer holds the execution (issue 15)
    │   ├── ReplayDivergenceError     replay met another step id, or a step's input changed
    │   └── StepOutputError           a step produced a value the journal cannot hold
    ├── AgentError                    the agent loop was driven wrongly (e.g. resumed without a decision)
    └── MCPToolsChangedError          an MCP server offers tool definitions other than the pinned ones
"""

from __future__ import annotations

from typing import Any, ClassVar

__all__ = [
    "AgentError",
    "BudgetExceededError",
    "ConfigurationError",
    "ContentAccessDeniedError",
    "ContentIntegrityError",
    "ContentNotFoundError",
    "ContentValidationError",
    "ExecutionBusyError",
    "GuardError",
    "JournalError",
    "LoomError",
    "MCPToolsChangedError",
    "MediaError",
    "OversizedInlinePartError",
    "ProviderError",
    "ReplayDivergenceError",
    "StepOutputError",
    "StoreError",
    "StructuredOutputError",
    "UnresolvedContentError",
    "UnsupportedModalityError",
]


class LoomError(Exception):
    """Base of every error loom_nb raises on purpose.

    ``code`` is stable and machine-readable; ``details`` carries structured context
    (indices, addresses, names) so a caller can react without parsing the message.
    """

    default_code: ClassVar[str] = "loom_error"

    def __init__(self, message: str, *, code: str | None = None, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.code: str = code or self.default_code
        self.details: dict[str, Any] = details

    def __repr__(self) -> str:
        return f"{type(self).__name__}(code={self.code!r}, message={self.message!r})"


class ConfigurationError(LoomError):
    """A setting is missing or wrong (for example no API key in the environment)."""

    default_code = "configuration"


class ContentValidationError(LoomError, ValueError, TypeError):
    """A part, message or request does not fit the content model; the message names the field.

    Also a ``ValueError`` and a ``TypeError``, so callers written for plain Python or pydantic
    (``except ValueError``, ``except TypeError``) keep working; raised by ``Model.model_validate``
    it is pydantic's ``ValidationError`` too (see ``loom_nb._strict``).
    """

    default_code = "invalid_content"


class MediaError(LoomError):
    """Bytes or a file could not become a media part: unreadable, of an unknown type, or the wrong kind.

    Codes: ``unreadable_path`` (missing, a folder, no permission), ``unknown_media_type`` (the
    bytes match no supported format), ``wrong_modality`` (an image helper given audio, ...),
    ``media_type_mismatch`` (a declared type the bytes contradict), ``invalid_media``.
    """

    default_code = "media_error"


class GuardError(LoomError):
    """``guard_request`` refused a request: a structure or provenance rule was broken."""

    default_code = "guard_refused"


class OversizedInlinePartError(GuardError):
    """Inline (base64) media is over the per-part or per-request cap; store it and send a ref."""

    default_code = "oversized_inline"


class UnsupportedModalityError(GuardError):
    """The request carries media the provider has not declared it accepts."""

    default_code = "unsupported_modality"


class StoreError(LoomError):
    """The content store could not do what was asked.

    The S3 store's PostgreSQL index reports a failed connection by what happened, as the journal
    does: ``store_unavailable``, ``store_too_many_connections``, ``store_pooler_error``,
    ``store_connection_lost``.
    """

    default_code = "store_error"


class ContentNotFoundError(StoreError):
    """No blob is stored at the address."""

    default_code = "content_not_found"


class ContentIntegrityError(StoreError):
    """A stored blob does not hash to its address (corruption); wrong bytes are never returned."""

    default_code = "content_corrupted"


class ContentAccessDeniedError(StoreError):
    """The asking principal may not read the blob (its tenant never stored it), or is unknown."""

    default_code = "content_access_denied"


class UnresolvedContentError(LoomError):
    """A ref the application put in a message could not be turned into bytes for the provider."""

    default_code = "unresolved_content"


class ProviderError(LoomError):
    """A model vendor answered with an error or could not be reached.

    ``status`` is the HTTP status (None when no response arrived), ``error_type`` the vendor's
    error type (``rate_limit_error``, ``invalid_request_error`` ...), ``retryable`` whether
    trying again later could succeed.
    """

    default_code = "provider_error"

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        provider: str | None = None,
        status: int | None = None,
        error_type: str | None = None,
        retryable: bool = False,
        **details: Any,
    ) -> None:
        super().__init__(message, code=code, **details)
        self.provider = provider
        self.status = status
        self.error_type = error_type
        self.retryable = retryable


class StructuredOutputError(LoomError):
    """The model's answer is not JSON matching the requested ``output_type``.

    ``raw_text`` holds the answer exactly as the model gave it, so nothing is lost; ``details``
    names the first bad field and the stop reason (an answer cut at max tokens is often the cause).
    """

    default_code = "output_invalid"

    def __init__(
        self, message: str, *, raw_text: str, code: str | None = None, **details: Any
    ) -> None:
        super().__init__(message, code=code, **details)
        self.raw_text = raw_text


class BudgetExceededError(LoomError):
    """A spending limit (``Limits``) refused a model call before anything was sent.

    ``limit`` names the limit (``max_cost``, ``max_input_tokens``, ``max_output_tokens``,
    ``max_requests``), ``allowed`` its value and ``spent`` what had been spent under it when the
    call was refused; ``scope`` says whose limit it is (``"chat"`` or ``"run"``). Code
    ``budget_exceeded``; ``cost_unknown`` when ``max_cost`` is set but the model has no known
    price, so the limit could not be kept. Raise the limit and call again: nothing was lost.
    """

    default_code = "budget_exceeded"

    def __init__(
        self,
        message: str,
        *,
        limit: str,
        allowed: object,
        spent: object,
        scope: str = "chat",
        code: str | None = None,
        **details: Any,
    ) -> None:
        super().__init__(
            message, code=code, limit=limit, allowed=allowed, spent=spent, scope=scope, **details
        )
        self.limit = limit
        self.allowed = allowed
        self.spent = spent
        self.scope = scope


class JournalError(LoomError):
    """The durable journal could not record or replay a step.

    On PostgreSQL a failed connection says what happened (issue 33): ``journal_unavailable``
    (nothing answered, or the pool had no connection free), ``journal_too_many_connections``
    (the server, or the role, has no slot left: use a pooler such as PgBouncer, or raise
    ``max_connections``), ``journal_pooler_error`` (the pooler refused: its ``max_client_conn``,
    a server it cannot reach, a URL option it does not pass), ``journal_connection_lost`` (an
    open connection broke; a step whose write was lost runs again when the execution is
    resumed).
    """

    default_code = "journal_error"


class ExecutionBusyError(JournalError):
    """Another live writer holds the execution (its lease), or wrote it since it was opened.

    Raised before the refused step's function runs, so nothing is done twice. ``details`` names
    the holder (``pid``, ``host``, ``expires``) or ``reason="log_moved"``. Code ``claim_lost``
    (``reason="claim_lost"``, ``queue``, ``item``): the work-queue claim fencing the execution was
    taken over by another worker (issue 32), so this one may not journal the item's step.
    """

    default_code = "execution_busy"


class ReplayDivergenceError(JournalError):
    """Replay reached a step whose id differs from the log's at that position, or whose input did.

    Code ``replay_divergence`` for another step id (ADR 0120 decision 10), ``input_changed`` for
    the same step id asked with an input whose hash differs from the recorded one.
    """

    default_code = "replay_divergence"


class StepOutputError(JournalError):
    """A step returned a value the journal cannot store as JSON (the step is not recorded)."""

    default_code = "step_output_not_json"


class AgentError(LoomError):
    """The agent loop was asked to do something it cannot (e.g. resume without a decision)."""

    default_code = "agent_error"


class MCPToolsChangedError(LoomError):
    """An MCP server offers tool definitions that differ from the ones its journal pinned.

    Code ``mcp_tools_changed``. Tool names, descriptions and schemas reach the model as
    instructions, so a server that changes them after it was first trusted (a "rug pull") refuses
    the run until the change is accepted (``server.accept_changes()``). ``details`` carries
    ``server``, ``diff`` (readable text), ``added`` / ``removed`` / ``changed`` (tool names) and
    the ``pinned`` and ``offered`` hashes.
    """

    default_code = "mcp_tools_changed"
