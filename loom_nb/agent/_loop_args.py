"""``agent_loop``'s arguments checked up front: wrong types refused as ``AgentError`` naming the
argument, the messages validated into ``Message`` objects (a bad one named by its index)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from loom_nb.agent._compaction import Compaction
from loom_nb.content import Message, content_error
from loom_nb.errors import AgentError
from loom_nb.settings import ModelSettings
from loom_nb.taint import Untrusted

__all__ = ["check_arguments", "messages_of"]


def check_arguments(
    execution: object,
    tools: object,
    messages: object,
    compaction: object,
    system: object,
    settings: object = None,
) -> None:
    """Refuse wrong-typed arguments up front, as an ``AgentError`` naming the argument."""
    problem: str | None = None
    if not all(callable(getattr(execution, name, None)) for name in ("execute", "park", "rewind")):
        problem = f"execution must be an Execution (journal.execution(id)), not {execution!r}"
    elif isinstance(tools, str | bytes | Mapping) or not isinstance(tools, Sequence):
        problem = f"tools must be a list of ToolDefinition, not {type(tools).__name__}"
    elif isinstance(messages, bytes | Mapping) or not isinstance(messages, Sequence):
        problem = f"messages must be a list of messages, not {type(messages).__name__}"
    elif compaction is not None and not isinstance(compaction, Compaction):
        problem = f"compaction must be a Compaction or None, not {type(compaction).__name__}"
    elif system is not None and not isinstance(system, str | Untrusted):
        problem = f"system must be a str, an Untrusted str or None, not {type(system).__name__}"
    elif settings is not None and not isinstance(settings, ModelSettings):
        problem = (
            f"settings must be a ModelSettings (ModelSettings(temperature=0, ...)) or None, not "
            f"{type(settings).__name__}"
        )
    if problem is not None:
        raise AgentError(f"agent_loop: {problem}.", code="invalid_argument")


def messages_of(messages: Sequence[Message | dict[str, Any]]) -> list[Message]:
    """``messages`` as ``Message`` objects (dicts validated; a bad one named by its index)."""
    out: list[Message] = []
    for index, message in enumerate(messages):
        try:
            out.append(message if isinstance(message, Message) else Message.model_validate(message))
        except ValidationError as exc:
            raise content_error(exc, f"message {index} given to agent_loop") from exc
    return out
