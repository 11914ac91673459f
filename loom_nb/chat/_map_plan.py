"""A map's definition: its inputs as user messages, the chat's seed, and where it is journaled.

``chat.map(inputs)`` turns each input into the user message ``await chat(text, *attachments)``
would send (attachments sniffed, media over the inline cap stored and sent by ref), and takes the
chat's system prompt, tool menu, settings and history as it stands: every item's request is that
seed plus its message. Accepted inputs, one per item:

- a ``str``: the text;
- a ``tuple``: ``(text, *attachments)``, as ``chat(text, *attachments)`` takes them;
- a ``dict``: ``{"text": ..., "attachments": [...]}`` (both optional, nothing else);
- a ``pandas.Series`` of any of those (its index labels the result's rows).

The definition (``MapPlan``) is journaled as the first step (``#map:plan``) of the map's own
execution ``<chat id>/map-<key>``, so another process can rebuild it from the journal alone
(``load_plan``) and work the same items: the requests, the output type's import name and JSON
Schema, and the identity of the provider it was made for. ``key`` is a hash of that definition:
the same cell run again (same chat seed, inputs, output type and provider) finds the same map and
serves what it finished; anything else is a new map. Item ``i`` runs in the execution
``<chat id>/map-<key>/<i>`` (``_map_item``).
"""

from __future__ import annotations

import hashlib
import importlib
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from loom_nb.chat._attach import user_message
from loom_nb.content import LlmRequest, Message, canonical_json, text_of
from loom_nb.errors import ConfigurationError, JournalError
from loom_nb.journal import Execution, Journal
from loom_nb.providers._structured import check_output_type, output_schema_of
from loom_nb.store import ContentStore, Principal

__all__ = ["PLAN_STEP", "MapPlan", "item_messages", "load_plan", "make_plan", "map_id_of"]

PLAN_STEP = "#map:plan"
"""The step id of a map's definition, at position 0 of the map's execution."""

_VERSION = 1
_DICT_KEYS = frozenset({"text", "attachments"})


@dataclass(frozen=True)
class MapPlan:
    """What a map asks: one request per item (the chat's seed plus the item's user message)."""

    map_id: str
    """The map's execution id, ``<chat id>/map-<key>``; item ``i`` runs in ``<map_id>/<i>``."""
    chat_id: str
    """The chat the map was made from."""
    tenant: str
    """The tenant its executions run for (media is read as it)."""
    base: LlmRequest
    """The seed every item's request starts from: the chat's history, tools, system, settings."""
    items: tuple[Message, ...]
    """Each item's user message, in input order."""
    labels: tuple[Any, ...]
    """Each item's label (a Series' index, else its position)."""
    output_type: type[BaseModel] | None
    """The pydantic model every answer is validated into, or None."""
    provider: Mapping[str, Any]
    """The identity of the provider the map was made for (``identity_of``), which prices it."""

    def __len__(self) -> int:
        return len(self.items)

    def request(self, index: int) -> LlmRequest:
        """Item ``index``'s request."""
        base = self.base
        return base.model_copy(update={"messages": [*base.messages, self.items[index]]})

    def item_id(self, index: int) -> str:
        """The execution item ``index`` runs in."""
        return f"{self.map_id}/{index}"

    def text(self, index: int) -> str:
        """Item ``index``'s text (what the result's table shows as its input)."""
        return text_of(self.items[index].content)

    def to_json(self) -> dict[str, Any]:
        """The definition as journaled (``load_plan`` rebuilds it)."""
        output_type = self.output_type
        return {
            "version": _VERSION,
            "chat": self.chat_id,
            "tenant": self.tenant,
            "request": self.base.model_dump(mode="json"),
            "items": [m.model_dump(mode="json") for m in self.items],
            "labels": list(self.labels),
            "output_type": _import_name(output_type) if output_type is not None else None,
            "output_schema": output_schema_of(output_type) if output_type is not None else None,
            "provider": dict(self.provider),
        }


def map_id_of(chat_id: str, definition: Mapping[str, Any]) -> str:
    """``<chat id>/map-<key>``: the key is a hash of the definition (same cell, same map)."""
    digest = hashlib.sha256(canonical_json(dict(definition)).encode()).hexdigest()
    return f"{chat_id}/map-{digest[:16]}"


def make_plan(
    inputs: Any,
    *,
    chat_id: str,
    tenant: str,
    base: LlmRequest,
    output_type: type[BaseModel] | None,
    provider: Mapping[str, Any],
    store: Callable[[], ContentStore],
) -> MapPlan:
    """The plan of ``chat.map(inputs, ...)`` from the chat's seed ``base`` (see the module docstring)."""
    checked = check_output_type(output_type)
    labels, values = _items_of(inputs)
    messages = tuple(item_messages(values, base.messages, store, tenant))
    plan = MapPlan(
        map_id="",
        chat_id=chat_id,
        tenant=tenant,
        base=base,
        items=messages,
        labels=tuple(labels),
        output_type=checked,
        provider=dict(provider),
    )
    definition = plan.to_json()
    definition.pop("chat")
    return MapPlan(**{**plan.__dict__, "map_id": map_id_of(chat_id, definition)})


def item_messages(
    values: Iterable[Any],
    history: Sequence[Message],
    store: Callable[[], ContentStore],
    tenant: str,
) -> Iterable[Message]:
    """Each input as the user message a chat turn would send after ``history``."""
    for index, value in enumerate(values):
        text, attachments = _split(value, index)
        try:
            yield user_message(text, attachments, history, store, tenant)
        except ConfigurationError as exc:
            raise ConfigurationError(
                f"chat.map: input {index}: {exc.message}", code=exc.code, index=index
            ) from exc


def _items_of(inputs: Any) -> tuple[list[Any], list[Any]]:
    """(labels, values) of the inputs: a pandas Series' index, else positions."""
    series = getattr(sys.modules.get("pandas"), "Series", None)
    frame = getattr(sys.modules.get("pandas"), "DataFrame", None)
    if frame is not None and isinstance(inputs, frame):
        raise ConfigurationError(
            "chat.map takes one input per item: a list, or a pandas Series (a column, "
            "df['text']), not a whole DataFrame.",
            code="invalid_map_inputs",
        )
    if series is not None and isinstance(inputs, series):
        return [_label(v) for v in inputs.index], list(inputs.tolist())
    if isinstance(inputs, str | bytes | Mapping) or not isinstance(inputs, Iterable):
        raise ConfigurationError(
            "chat.map takes an iterable of inputs (strings, (text, *attachments) tuples, "
            f'{{"text", "attachments"}} dicts) or a pandas Series, not {type(inputs).__name__}.',
            code="invalid_map_inputs",
        )
    values = list(inputs)
    return list(range(len(values))), values


def _label(value: Any) -> Any:
    if isinstance(value, bool | int | str) or value is None:
        return value
    if isinstance(value, float):
        return value if value == value and abs(value) != float("inf") else str(value)
    return str(value)


def _split(value: Any, index: int) -> tuple[Any, tuple[Any, ...]]:
    if isinstance(value, tuple):
        if not value:
            raise ConfigurationError(
                f"chat.map: input {index} is an empty tuple; give (text, *attachments).",
                code="invalid_map_inputs",
                index=index,
            )
        return value[0], tuple(value[1:])
    if isinstance(value, Mapping):
        unknown = set(value) - _DICT_KEYS
        if unknown:
            raise ConfigurationError(
                f"chat.map: input {index} has the keys {sorted(map(str, unknown))}; a dict input "
                'is {"text": ..., "attachments": [...]} (format other fields into the text).',
                code="invalid_map_inputs",
                index=index,
            )
        attachments = value.get("attachments") or ()
        if isinstance(attachments, str | bytes) or not isinstance(attachments, Iterable):
            attachments = (attachments,)
        return value.get("text", ""), tuple(attachments)
    return value, ()


def _import_name(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


def _output_type(name: Any, schema: Any, map_id: str) -> type[BaseModel] | None:
    if name is None:
        return None
    module, _, qualname = str(name).partition(":")
    try:
        value: Any = importlib.import_module(module)
        for part in qualname.split("."):
            value = getattr(value, part)
    except (ImportError, AttributeError) as exc:
        raise ConfigurationError(
            f"map {map_id!r} validates its answers into {name}, which cannot be imported here "
            f"({exc}). Run it where that class is importable (its module on sys.path).",
            code="map_output_type_unavailable",
        ) from exc
    checked = check_output_type(value)
    if checked is not None and schema is not None and output_schema_of(checked) != schema:
        raise ConfigurationError(
            f"map {map_id!r}: the class {name} importable here has another JSON Schema than the "
            "one the map was made with; run the map with the code it was made with.",
            code="map_output_type_changed",
        )
    return checked


async def journal_plan(execution: Execution, plan: MapPlan) -> None:
    """Journal the plan as the map's first step (served when this map was started before)."""
    await execution.execute(PLAN_STEP, lambda _d: {"items": len(plan)}, plan.to_json())


def load_plan(journal: Journal, map_id: str) -> MapPlan:
    """Rebuild a map's plan from its journaled definition (``loom-nb map work ID`` starts here)."""
    for event in journal.events(map_id, expand_inputs=False):
        if event.kind == "step_completed" and event.step_id == PLAN_STEP:
            data = event.payload.get("input") if isinstance(event.payload, dict) else None
            if isinstance(data, dict) and data.get("version") == _VERSION:
                return MapPlan(
                    map_id=map_id,
                    chat_id=str(data["chat"]),
                    tenant=str(data["tenant"]),
                    base=LlmRequest.model_validate(data["request"]),
                    items=tuple(Message.model_validate(m) for m in data["items"]),
                    labels=tuple(data["labels"]),
                    output_type=_output_type(data["output_type"], data["output_schema"], map_id),
                    provider=dict(data["provider"]),
                )
    raise JournalError(
        f"no map {map_id!r} in {journal!r}: its execution has no journaled definition "
        f"({PLAN_STEP}). Map ids look like '<chat id>/map-<key>' (MapResult.id).",
        code="unknown_map",
    )


def principal_of(plan: MapPlan) -> Principal:
    """Who the map's executions run for."""
    return Principal(tenant=plan.tenant)
