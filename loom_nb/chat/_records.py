"""What a chat records and shares: its turns, its journal positions, and its process-wide defaults.

``ChatTurn`` is the public record of one turn. ``_Position`` is one position of the chat's
execution (what a fork replays: the step id, the exact request, the recorded response), and
``_Recorded`` the provider a fork replays it with, so the replayed step goes through the same
``create_llm_effect`` as the original and its journaled input is byte for byte the original's.
The default journal and store (``.loom/``) are shared by every Chat of a process.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel

from loom_nb.agent import AgentResult
from loom_nb.content import LlmRequest, LlmResponse, Usage
from loom_nb.errors import ConfigurationError
from loom_nb.journal import Journal
from loom_nb.settings import ModelSettings
from loom_nb.store import ContentStore, LocalContentStore
from loom_nb.taint import Untrusted

__all__ = ["DEFAULT_HOME", "ChatTurn", "TurnStatus"]

TurnStatus = Literal["completed", "stopped", "parked", "max_turns"]

DEFAULT_HOME = Path(".loom")
"""Where the default journal (``journal.sqlite``) and content store (``store/``) live."""


@dataclass(frozen=True)
class ChatTurn:
    """One turn of a chat: a ``chat(...)`` reply or a ``chat.run(...)`` agent run."""

    index: int
    """The turn's number (0 for the first)."""
    kind: Literal["chat", "run"]
    """``chat`` (one model call) or ``run`` (the agent loop with the chat's tools)."""
    start: int
    """Index in ``chat.history`` of the user message that opened the turn."""
    status: TurnStatus
    """``completed``, ``stopped`` (cancelled while streaming), ``parked`` or ``max_turns``."""
    response: LlmResponse | None
    """The (last) model response; for a stopped turn, the partial text."""
    usage: Usage
    """Tokens of the turn (summed over the model calls of a run)."""
    cost: Decimal | None
    """USD cost from genai-prices; None when the vendor or model has no known price."""
    position: int
    """Position in the chat's execution when the turn started (fork points)."""
    run_id: str | None = None
    """The execution id of a run turn's agent loop."""
    result: AgentResult | None = None
    """A run turn's agent result."""


@dataclass(frozen=True)
class Position:
    """One position of the chat's execution: what a fork copies or replays."""

    step_id: str
    request: LlmRequest
    response: LlmResponse | None  # None: the step failed or was stopped (not completed)
    output_type: type[BaseModel] | None = None


class Skipped(Exception):
    """Raised by a fork's replay of a position that did not complete in the parent."""


_STORES: dict[Path, ContentStore] = {}
_JOURNALS: dict[Path, Journal] = {}


def shared_store(path: Path) -> ContentStore:
    """The default content store at ``path``, one per process."""
    store = _STORES.get(path)
    if store is None:
        store = _STORES.setdefault(path, LocalContentStore(path))
    return store


def shared_journal(path: Path, store: ContentStore) -> Journal:
    """The default journal at ``path``, one per process (every Chat of a notebook shares it)."""
    journal = _JOURNALS.get(path)
    if journal is None:
        journal = _JOURNALS.setdefault(path, Journal(path, store=store))
    return journal


class Recorded:
    """A provider that answers with a recorded response (a fork's copy of its parent's turn)."""

    def __init__(self, provider: Any, response: LlmResponse | None) -> None:
        self._provider = provider
        self._response = response
        self.capabilities = provider.capabilities
        self.settings = getattr(provider, "settings", None)
        self.name = getattr(provider, "name", type(provider).__name__)
        self.model = getattr(provider, "model", None)

    async def complete(self, request: LlmRequest, **_kwargs: Any) -> LlmResponse:
        if self._response is None:
            raise Skipped("the parent's turn did not complete")
        return self._response

    def stream(self, request: LlmRequest, **_kwargs: Any) -> Any:
        raise Skipped("a fork copies turns without streaming")


def settings_of(settings: Any) -> ModelSettings | None:
    if settings is None or isinstance(settings, ModelSettings):
        return settings
    if isinstance(settings, Mapping):
        return ModelSettings(**dict(settings))
    raise ConfigurationError(
        f"settings is a ModelSettings (or a dict of its fields), not {type(settings).__name__}.",
        code="invalid_argument",
    )


def print_delta(delta: str) -> None:
    print(delta, end="", flush=True)  # streaming into the cell is the point


def check_arguments(
    provider: Any,
    system: Any,
    tools: Any,
    store: Any,
    journal: Any,
    id: Any,
    tenant: Any,
    on_text: Any,
) -> None:
    """Refuse wrong-typed ``Chat(...)`` arguments as ``ConfigurationError`` naming the argument."""
    if not callable(getattr(provider, "complete", None)) or not hasattr(provider, "capabilities"):
        raise ConfigurationError(
            f"Chat needs a provider with capabilities, complete() and stream(), not "
            f"{type(provider).__name__}; pass e.g. ScriptedProvider([...]) or "
            "AnthropicProvider('claude-sonnet-4-5').",
            code="invalid_provider",
        )
    if system is not None and not isinstance(system, str | Untrusted):
        raise ConfigurationError(
            f"system is a str or None, not {type(system).__name__}.", code="invalid_argument"
        )
    if isinstance(tools, str | bytes | Mapping) or not isinstance(tools, Sequence):
        raise ConfigurationError(
            f"tools is a list of ToolDefinition (or typed functions), not {type(tools).__name__}.",
            code="invalid_argument",
        )
    if store is not None and not callable(getattr(store, "put", None)):
        raise ConfigurationError(
            f"store is a content store (LocalContentStore(...)), not {type(store).__name__}.",
            code="invalid_argument",
        )
    if journal is not None and not isinstance(journal, Journal | str | Path):
        raise ConfigurationError(
            f"journal is a Journal or a path, not {type(journal).__name__}.",
            code="invalid_argument",
        )
    if id is not None and (not isinstance(id, str) or not id.strip()):
        raise ConfigurationError(f"id is a non-empty string, not {id!r}.", code="invalid_argument")
    if not isinstance(tenant, str) or not tenant.strip():
        raise ConfigurationError(
            f"tenant is a non-empty string, not {tenant!r}.", code="invalid_argument"
        )
    if on_text is not None and not callable(on_text):
        raise ConfigurationError(
            "on_text is a function of the text delta.", code="invalid_argument"
        )


def run_decisions(journal: Journal, run_id: str) -> dict[str, Any]:
    """The approval decisions an agent run journaled: call id -> the normalized decision.

    An approval step holds the approver's decision (or ``{"pending": true}``); a resume holds
    the decisions given for the calls that were pending, and wins over the pending mark.
    """
    found: dict[str, Any] = {}
    for event in journal.events(run_id):
        payload = event.payload if isinstance(event.payload, dict) else {}
        step_id = event.step_id or ""
        if event.kind == "step_completed" and ":approval:" in step_id:
            found[step_id.split(":approval:", 1)[1]] = payload.get("output")
        elif event.kind == "resumed":
            given = payload.get("payload", payload)
            decisions = given.get("decisions") if isinstance(given, dict) else None
            for call_id, decision in (decisions if isinstance(decisions, dict) else {}).items():
                found[str(call_id)] = decision
    return found
