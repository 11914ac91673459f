"""What a chat records and shares: its turns, its journal positions, and its process-wide defaults.

``ChatTurn`` is the public record of one turn. ``Position`` is one model-turn position of the
chat's execution (its step id), ``UndoMark`` an undo's,
and ``Parked`` the run a chat drives or waits on. The default journal and store (``.loom/``) are
shared by every Chat of a process.
"""

from __future__ import annotations

import inspect
from collections.abc import Coroutine, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

from pydantic import ValidationError

from loom_nb.agent import AgentResult
from loom_nb.chat._cost import Priced
from loom_nb.content import LlmRequest, LlmResponse, Message, Usage, content_error
from loom_nb.errors import (
    ConfigurationError,
    ContentValidationError,
    JournalError,
    ReplayDivergenceError,
)
from loom_nb.journal import Journal
from loom_nb.settings import ModelSettings
from loom_nb.store import ContentStore, LocalContentStore
from loom_nb.taint import Untrusted

__all__ = ["DEFAULT_HOME", "ChatTurn", "TurnStatus"]

TurnStatus = Literal["completed", "stopped", "parked", "max_turns", "halted"]

DEFAULT_HOME = Path(".loom")
"""Where the default journal (``journal.sqlite``) and content store (``store/``) live."""


@dataclass(frozen=True, init=False)
class ChatTurn:
    """One turn of a chat: a ``chat(...)`` reply or a ``chat.run(...)`` agent run.

    Built by ``Chat``; constructing one by hand checks every field and refuses wrong arguments
    with ``ContentValidationError`` (code ``invalid_chat_turn``), which is also a ``TypeError``.
    """

    index: int
    """The turn's number (0 for the first)."""
    kind: Literal["chat", "run"]
    """``chat`` (one model call) or ``run`` (the agent loop with the chat's tools)."""
    start: int
    """Index in ``chat.history`` of the user message that opened the turn."""
    status: TurnStatus
    """``completed``, ``stopped`` (cancelled while streaming), ``parked``, ``max_turns`` or
    ``halted`` (a run a spending limit stopped; ``chat.run()`` resumes it once the limit is raised)."""
    response: LlmResponse | None
    """The (last) model response; for a stopped turn, the partial text."""
    usage: Usage
    """Tokens of the turn (summed over the model calls of a run)."""
    cost: Decimal | None
    """USD cost from genai-prices; None when the vendor or model has no known price (a turn
    ``Chat`` builds looks it up when it is first read)."""
    position: int
    """Position in the chat's execution when the turn started (fork points)."""
    run_id: str | None = None
    """The execution id of a run turn's agent loop."""
    result: AgentResult | None = None
    """A run turn's agent result."""
    provider: str | None = None
    """The provider that answered (its class name, as the chat's journal records it)."""
    model: str | None = None
    """The model that answered: as the vendor reported it, else the provider's model."""

    @classmethod
    def _answered(cls, **fields: Any) -> ChatTurn:
        """A plain turn ``Chat`` built from values it made itself, its cost ``Priced``.

        Every field but ``provider`` and ``model`` is an object of the checked type by
        construction (counters, a literal, the validated ``LlmResponse`` and its ``Usage``);
        those two come from the chat's journal and are checked as in ``__init__``.
        """
        for name in ("provider", "model"):
            if not (fields[name] is None or isinstance(fields[name], str)):
                _check_turn_field(name, fields[name])  # raises, naming the field
        turn = object.__new__(cls)
        values = turn.__dict__
        values.update(_DEFAULTS)
        values.update(fields)
        priced = values.pop("cost")
        if isinstance(priced, Priced):
            values["_priced"] = priced  # the price, looked up when read
        else:
            _check_turn_field("cost", priced)
            values["cost"] = priced
        return turn

    if TYPE_CHECKING:

        def __init__(
            self,
            index: int,
            kind: Literal["chat", "run"],
            start: int,
            status: TurnStatus,
            response: LlmResponse | None,
            usage: Usage,
            cost: Decimal | Priced | None,
            position: int,
            run_id: str | None = None,
            result: AgentResult | None = None,
            provider: str | None = None,
            model: str | None = None,
        ) -> None: ...

    else:

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            if not args and _REQUIRED.issubset(kwargs) and _ALL.issuperset(kwargs):
                arguments = {**_DEFAULTS, **kwargs}  # by keyword, as Chat builds them: no bind
            else:
                try:
                    bound = _TURN_SIGNATURE.bind(*args, **kwargs)
                except TypeError as exc:
                    raise _turn_error(f"{exc}") from None
                bound.apply_defaults()
                arguments = bound.arguments
            for name, value in arguments.items():
                if name == "cost" and isinstance(value, Priced):
                    object.__setattr__(self, "_priced", value)  # the price, looked up when read
                    continue
                _check_turn_field(name, value)
                object.__setattr__(self, name, value)

        def __getattr__(self, name: str) -> Any:
            priced = self.__dict__.get("_priced") if name == "cost" else None
            if priced is None:
                raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
            value = priced.value()
            _check_turn_field("cost", value)
            object.__setattr__(self, "cost", value)
            del self.__dict__["_priced"]
            return value

        def __getstate__(self) -> dict[str, Any]:
            return {f: getattr(self, f) for f in _ALL}  # the price looked up: a plain record


_TURN_FIELDS = ("index", "kind", "start", "status", "response", "usage", "cost", "position")
_TURN_SIGNATURE = inspect.Signature(
    [
        *(inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD) for n in _TURN_FIELDS),
        *(
            inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None)
            for n in ("run_id", "result", "provider", "model")
        ),
    ]
)
_REQUIRED = frozenset(_TURN_FIELDS)
_DEFAULTS: dict[str, Any] = {"run_id": None, "result": None, "provider": None, "model": None}
_ALL = _REQUIRED | _DEFAULTS.keys()
ChatTurn.__signature__ = _TURN_SIGNATURE  # type: ignore[attr-defined]  # what inspect shows
_STATUSES = frozenset(TurnStatus.__args__)  # type: ignore[attr-defined]


def _turn_error(problem: str) -> ContentValidationError:
    return ContentValidationError(
        f"invalid ChatTurn: {problem}. A ChatTurn is built by Chat (read chat.turns); by hand it "
        "takes index, kind ('chat' or 'run'), start, status, response (LlmResponse or None), "
        "usage (Usage), cost (Decimal or None), position, and optionally run_id, result "
        "(AgentResult), provider and model.",
        code="invalid_chat_turn",
    )


def _check_turn_field(name: str, value: Any) -> None:
    """Refuse a ``ChatTurn`` field of the wrong type or range (``ContentValidationError``)."""
    if name in ("index", "start", "position"):
        ok = isinstance(value, int) and not isinstance(value, bool) and value >= 0
        expected = "an int >= 0"
    elif name == "kind":
        ok, expected = value in ("chat", "run"), "'chat' or 'run'"
    elif name == "status":
        ok = isinstance(value, str) and value in _STATUSES
        expected = "one of " + ", ".join(sorted(_STATUSES))
    elif name == "response":
        ok, expected = value is None or isinstance(value, LlmResponse), "an LlmResponse or None"
    elif name == "usage":
        ok, expected = isinstance(value, Usage), "a Usage"
    elif name == "cost":
        ok = value is None or (isinstance(value, Decimal) and value.is_finite() and value >= 0)
        expected = "a finite Decimal >= 0 or None"
    elif name in ("run_id", "provider", "model"):
        ok, expected = value is None or isinstance(value, str), "a str or None"
    else:
        ok, expected = value is None or isinstance(value, AgentResult), "an AgentResult or None"
    if not ok:
        raise _turn_error(f"{name} is {expected}, not {_describe(value)}")


def _describe(value: Any) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text[:60]}{'...' if len(text) > 60 else ''}"


@dataclass(frozen=True)
class Position:
    """One model-turn position of the chat's execution: what a fork copies or replays.

    Only the step id: the request and response are the journal's (a fork copies the log), and
    keeping each turn's request here held every turn's whole message list, so a chat's memory
    grew with the square of its length (a 2,000-turn chat held 44 MiB of such lists).
    """

    step_id: str


@dataclass(frozen=True)
class UndoMark:
    """One ``chat.undo()`` journaled at a position of the chat's execution (``#chat:<k>:undo``).

    ``entry`` is the step's input and output: which turn was dropped (its index, kind, run id,
    position and history start), so a replay that undoes another turn diverges.
    """

    step_id: str
    entry: dict[str, Any]


def undo_entry(turn: ChatTurn) -> dict[str, Any]:
    """What the undo step of ``turn`` journals."""
    return {
        "undo": turn.index,
        "kind": turn.kind,
        "run_id": turn.run_id,
        "position": turn.position,
        "start": turn.start,
    }


def undone(entry: dict[str, Any]) -> dict[str, Any]:
    """The undo step's function: the journaled output is the undo's own record."""
    return entry


def undo_divergence(exc: ReplayDivergenceError) -> ReplayDivergenceError:
    """A divergence at a recorded undo, said in the chat's terms (else ``exc`` itself)."""
    expected = exc.details.get("expected")
    if not (isinstance(expected, str) and expected.endswith(":undo")):
        return exc
    return ReplayDivergenceError(
        f"{exc.message} The chat's log has a chat.undo() at this point (step {expected!r}): "
        "call chat.undo() where the recorded run did to replay it, or give the chat a new id "
        "(or fork it before that turn) to go on differently.",
        code=exc.code,
        **exc.details,
    )


def chat_divergence(exc: ReplayDivergenceError, chat_id: str) -> ReplayDivergenceError:
    """A chat's replay that met other code than its log, with the chat's two ways on.

    Re-running a notebook replays a chat turn by turn; a turn asked differently than the log
    recorded (``input_changed``) or where the log has another step (``replay_divergence``) can
    go on from the recorded conversation (resume) or start the id over (restart).
    """
    exc = undo_divergence(exc)
    return ReplayDivergenceError(
        f"{exc.message} For this chat: `Chat.resume({chat_id!r}, provider)` goes on from the "
        "recorded conversation (its history and turns come back from the journal, and the next "
        f"message runs live), and `Chat(provider, id={chat_id!r}, restart=True)` starts this id "
        "over (the old turns stay in the journal under an archived id).",
        code=exc.code,
        **exc.details,
    )


class Parked(NamedTuple):
    """The run a chat drives (or waits on, parked): what ``chat.run`` and the approvals resume."""

    run_id: str
    messages: list[Message]
    max_turns: int
    turn: int
    """The turn's index in ``chat.turns``."""
    position: int
    """The chat position of its ``run`` step (the turn's fork point)."""
    identity: dict[str, Any] | None
    """The provider the run started on (a run resumed on another one has no single price)."""


def settled(awaitable: Coroutine[Any, Any, Any], what: str) -> Any:
    """The value of a coroutine that finishes without suspending, driven here, synchronously.

    A journaled step whose function is synchronous never waits (the journal's writes are
    synchronous), so ``chat.undo()`` can journal its step and stay a plain method. Should the
    coroutine ever suspend, it is closed (its step journaled as failed) and refused.
    """
    try:
        awaitable.send(None)
    except StopIteration as done:
        return done.value
    awaitable.close()
    raise JournalError(
        f"{what} had to wait for the journal, which a synchronous call cannot do; nothing was "
        "changed. Retry it, or report this with the journal backend you use.",
        code="journal_would_wait",
    )


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


class Unreachable:
    """A provider for replaying runs from the log (``Chat.resume``): any live call is refused."""

    def __init__(self, provider: Any) -> None:
        self.capabilities = provider.capabilities
        self.settings = getattr(provider, "settings", None)
        self.model = getattr(provider, "model", None)

    async def complete(self, request: LlmRequest, **_kwargs: Any) -> LlmResponse:
        raise JournalError(
            "resuming a chat replays its runs from the journal, and this run's log ends before "
            "its model answered; nothing was called. Resume it with the tools it ran with.",
            code="resume_needs_model",
        )

    def stream(self, request: LlmRequest, **_kwargs: Any) -> Any:
        raise JournalError("resuming a chat never streams a model call.", code="resume_needs_model")


def seed_messages(history: Any) -> list[Message]:
    """``Chat(history=...)``'s messages: ``Message``s or ``{"role", "content"}`` dicts, checked."""
    if isinstance(history, str | bytes | Mapping) or not isinstance(history, Sequence):
        raise ConfigurationError(
            f"history is a list of messages (Message, or dicts with role and content), not "
            f"{type(history).__name__}.",
            code="invalid_argument",
        )
    messages = []
    for index, item in enumerate(history):
        if isinstance(item, Message):
            messages.append(item)
            continue
        if isinstance(item, Mapping) and item.get("role") == "system":
            raise ConfigurationError(
                f"history[{index}] is a system message; pass it as Chat(system=...), and "
                "history as the user and assistant messages.",
                code="invalid_argument",
            )
        try:
            messages.append(Message.model_validate(item))
        except ValidationError as exc:
            raise content_error(exc, f"history[{index}]") from exc
    return messages


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
