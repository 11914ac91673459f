"""Replay's exact match: a completed step whose recorded input is byte for byte the replayed one
is served by reading only its recorded output (issue 31).

A step is journaled as ``{"input":<input>,"input_hash":"<hash>","output":<output>}``
(``payload_text``: sorted keys, compact). A replay has the input's canonical JSON at hand (a
model step assembles it from the texts its hash was made of, ``ModelInput.assembled``; another
step encodes its input once, for this and for the hash), so when the payload starts with exactly
that input and hash, the recorded hash is the one replay would compare and only the output is
decoded: a model step's recorded messages and tools are never parsed. Anything else (a
claim-checked field, another input or hash, an older layout, a payload that does not parse) is
``NOT_SERVED``, and ``Execution`` reads the fields as before (``recorded_fields``), with the same
checks and errors.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from loom_nb.journal._codec import encode_text, text_hash

__all__ = ["NOT_SERVED", "serve_exact", "served_output"]

NOT_SERVED: Any = object()
"""What ``served_output`` returns when the payload is not the exact match it looks for."""

_DECODER = json.JSONDecoder()


def served_output(payload: str | None, input_text: str, input_hash: str) -> Any:
    """The recorded output of a completed step whose input is exactly ``input_text`` (canonical
    JSON) with hash ``input_hash``, reading only the output; ``NOT_SERVED`` otherwise (the input
    is a whole JSON value, so what follows it in a match is the payload's own next key)."""
    if payload is None or not payload.startswith('{"input":'):
        return NOT_SERVED
    if '"' in input_hash or "\\" in input_hash:  # not a hash this journal writes
        return NOT_SERVED
    at = 9 + len(input_text)
    tail = ',"input_hash":"' + input_hash + '","output":'
    if not (payload.startswith(input_text, 9) and payload.startswith(tail, at)):
        return NOT_SERVED
    try:
        output, end = _DECODER.raw_decode(payload, at + len(tail))
    except (RecursionError, ValueError):
        return NOT_SERVED
    if end != len(payload) - 1 or payload[end] != "}":
        return NOT_SERVED
    return output


def serve_exact(
    payload: str | None,
    step_id: str,
    make_input: Callable[[], Any],
    input_hash: Callable[[], str] | None,
    input_text: Callable[[], str | None] | None,
) -> tuple[Any, str | None]:
    """``(output or NOT_SERVED, the replayed input's hash or None)`` for a completed step.

    A model step gives its hash and its assembled text (``input_hash``, ``input_text``); another
    step's input is encoded here, once, for the match and the hash. An input that cannot be
    encoded is ``(NOT_SERVED, None)``: the full read decides (and raises, as ever, only when the
    recorded step has a hash to compare). Only a ``BaseException`` other than ``Exception``
    propagates.
    """
    try:
        if input_hash is not None:
            text = input_text() if input_text is not None else None
            digest = input_hash()
        else:
            text = encode_text(make_input(), step_id=step_id, what="input")
            digest = text_hash(text)
    except Exception:
        return NOT_SERVED, None
    if text is None:
        return NOT_SERVED, digest
    return served_output(payload, text, digest), digest
