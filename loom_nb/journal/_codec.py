"""Step values to canonical JSON and back: the one place the journal turns values into text.

A step's input and output are stored as canonical JSON (sorted keys, compact separators,
UTF-8 kept, no NaN or infinity). Pydantic models anywhere in a value are dumped with
``model_dump(mode="json")``, so an ``Untrusted`` value keeps its ``{"__loomUntrusted": ...}``
marker and a response model becomes the dict it validates from.

Everything that can go wrong with a value is found here, before anything is written: a value
the encoder cannot represent (a set, an object, a circular reference, NaN) or one nested deeper
than the encoder allows is a ``StepOutputError`` naming the step and the remedy. A value is
also decoded once before it is journaled, so a row the journal accepted always reads back.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel

from loom_nb.errors import JournalError, StepOutputError

__all__ = [
    "check_execution_id",
    "check_step",
    "decode",
    "dumps",
    "encode_text",
    "encode_value",
    "is_storable_id",
    "text_hash",
]


def _default(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    raise TypeError(f"{type(value).__qualname__} is not JSON")


_ENCODER = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False, default=_default
)
_C_ENCODER: Any = getattr(json.encoder, "c_make_encoder", None)
_C_STRING: Callable[[str], str] | None = getattr(json.encoder, "c_encode_basestring", None)


def _canonical(value: Any) -> str:
    """``_ENCODER.encode(value)``: the same text from the same C encoder ``encode`` builds,
    without the wrapper's per-call set-up (a fresh circular-reference memo every call); a
    string, an int, a bool or None is written as the encoder writes it, with no encoder."""
    kind = type(value)
    if _C_ENCODER is None or _C_STRING is None:  # a Python without the C accelerator
        return _ENCODER.encode(value)
    if kind is str:
        return _C_STRING(value)
    if kind is int:  # an int past Python's digit limit raises, as in the encoder
        return int.__repr__(value)
    if value is None or kind is bool:
        return _LITERALS[value]
    encode = _C_ENCODER({}, _default, _C_STRING, None, ":", ",", True, False, False)
    return "".join(encode(value, 0))


_ASCII_ENCODER = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False, default=_default
)
_SCALARS = (str, int, bool, type(None))
_LITERALS = {None: "null", True: "true", False: "false"}


def _storable(text: str, value: Any) -> str:
    """``text``, or the value's ASCII-escaped JSON when ``text`` is not valid UTF-8.

    A lone surrogate (``json.loads('"\\ud83d"')``, a cut emoji) is a legal Python string that
    SQLite cannot store as UTF-8; escaped as ``\\ud83d`` it is valid JSON that reads back equal.
    """
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _ASCII_ENCODER.encode(value)
    return text


def storable_text(text: str, value: Callable[[], Any]) -> str:
    """As ``_storable`` for JSON text made elsewhere: ``value()`` is asked for only when the text
    is not valid UTF-8 (then its ASCII-escaped JSON is stored)."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _ASCII_ENCODER.encode(value())
    return text


def check_execution_id(execution_id: object) -> None:
    """Refuse (``invalid_execution_id``) what cannot be an execution id."""
    if not is_storable_id(execution_id):
        raise JournalError(
            f"an execution id is a non-empty string of valid Unicode, not {execution_id!r}.",
            code="invalid_execution_id",
        )


def check_step(step_id: object, fn: object) -> None:
    """Refuse (``invalid_step_id`` / ``invalid_step_fn``) what cannot be a step's id or function."""
    if not is_storable_id(step_id):
        raise JournalError(
            f"a step id is a non-empty string of valid Unicode, not {step_id!r}.",
            code="invalid_step_id",
        )
    if not callable(fn):
        raise JournalError(
            f"step {step_id!r}: fn must be a function (sync or async) taking the input, not "
            f"{type(fn).__name__}.",
            code="invalid_step_fn",
        )


def is_storable_id(value: object) -> bool:
    """Whether ``value`` is a non-empty string SQLite can store as UTF-8 (an execution or step id)."""
    if not isinstance(value, str) or not value:
        return False
    if value.isascii():
        return True
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def dumps(value: Any) -> str:
    """Canonical JSON text of ``value`` (may raise the encoder's own errors)."""
    return _storable(_canonical(value), value)


def encode_text(value: Any, *, step_id: str, what: str = "output") -> str:
    """Canonical JSON of a step's ``what`` (``"input"`` / ``"output"``); ``StepOutputError`` if not JSON."""
    try:
        return _storable(_canonical(value), value)
    except (RecursionError, TypeError, ValueError) as exc:
        raise _not_json(exc, step_id, what) from exc


def _not_json(exc: BaseException, step_id: str, what: str) -> StepOutputError:
    """The ``StepOutputError`` for a value the encoder refused with ``exc``, naming the remedy."""
    if isinstance(exc, RecursionError):
        return StepOutputError(
            f"step {step_id!r}: its {what} is nested deeper than the JSON encoder allows, so it "
            "cannot be journaled. Flatten the value, or journal a summary and keep the deep "
            "structure in the content store.",
            code="step_value_too_deep",
            step_id=step_id,
            what=what,
        )
    return StepOutputError(
        f"step {step_id!r}: its {what} is not JSON ({exc}), so it cannot be journaled. "
        "Return dicts, lists, strings, numbers, booleans, None or pydantic models "
        "(NaN and infinity are not JSON).",
        code=f"step_{what}_not_json",
        step_id=step_id,
        what=what,
    )


def encode_value(value: Any, *, step_id: str, what: str = "output") -> tuple[str, Any]:
    """Canonical JSON of a step's ``what`` (``"input"`` / ``"output"``) and its round trip.

    Raises ``StepOutputError`` when the value cannot be journaled.
    """
    text = encode_text(value, step_id=step_id, what=what)
    # The round trip proves the text reads back, and is what callers get. A string, an
    # int, a bool or None is its own round trip (a float is not: 1e400 -> inf).
    try:
        decoded = value if type(value) in _SCALARS else json.loads(text)
    except RecursionError as exc:
        raise StepOutputError(
            f"step {step_id!r}: its {what} is nested deeper than the JSON decoder allows, so it "
            "cannot be journaled. Flatten the value, or journal a summary and keep the deep "
            "structure in the content store.",
            code="step_value_too_deep",
            step_id=step_id,
            what=what,
        ) from exc
    return text, decoded


def text_hash(text: str) -> str:
    """``"sha256:<hex>"`` of canonical JSON text (a step's input hash)."""
    return "sha256:" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def decode(text: str, *, where: str) -> Any:
    """Parse journaled JSON; a row that does not parse is a ``JournalError`` naming ``where``."""
    try:
        return json.loads(text)
    except (RecursionError, ValueError) as exc:
        raise JournalError(
            f"{where}: the journaled JSON does not parse ({exc}). The journal file is damaged "
            "or was written by another program; restore it from a recording (import_jsonl).",
            code="journal_corrupt",
        ) from exc
