"""The guard's leaf checks: media types, inline base64, ref sizes and the deep scan of tool inputs.

Each check either returns quietly or raises a ``GuardError`` whose ``code`` is stable and whose
message says where (a path such as ``messages[2].content[0].input.items[3]``) and what to do.
The tool-input scan is iterative with a node cap and a depth cap (ADR 0120 decision 7: a
100 000-node input fails closed; no depth can raise ``RecursionError``), so a hostile input is
refused after at most ``MAX_TOOL_INPUT_NODES`` steps whatever its shape.
"""

from __future__ import annotations

import binascii
import json
import math
import re
from collections.abc import Callable
from typing import Any

from loom_nb.content import ADDRESS_PATTERN, ContentRef
from loom_nb.errors import GuardError, OversizedInlinePartError
from loom_nb.guard._walk import part_path
from loom_nb.limits import MAX_TOOL_INPUT_NODES
from loom_nb.taint import UNTRUSTED_MARKER, Untrusted

__all__ = [
    "MAX_TOOL_INPUT_DEPTH",
    "b64_decoded_size",
    "check_json_value",
    "check_json_walked",
    "check_ref",
    "flat_plain_json",
    "inline_size",
    "is_standard_base64",
    "media_essence",
    "refuse",
]

MAX_TOOL_INPUT_DEPTH = 200
"""Deepest nesting accepted in a tool input (or an untrusted JSON value); deeper is refused.

Real tool inputs nest a few levels; the cap keeps every accepted request serializable (pydantic's
serializer stops near 255 levels) and hashable for the fence nonce.
"""

_NAME = r"[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}"
_PARAM = rf'\s*;\s*{_NAME}=(?:{_NAME}|"[^"\\\r\n]*")'
_MEDIA_TYPE = re.compile(rf"(?P<type>{_NAME})/(?P<subtype>{_NAME})(?:{_PARAM})*")


Where = str | Callable[[], str] | tuple[int, int | None, int | None]
"""A location for a message: the path itself, a function building it, or the indices of a
message, a part and a tool result's item (paths cost time to format, so the walk builds them
only when it refuses)."""


def where_text(where: Where) -> str:
    """The path a ``Where`` stands for."""
    if isinstance(where, str):
        return where
    if isinstance(where, tuple):
        return part_path(*where)
    return where()


def refuse(code: str, where: Where, what: str, remedy: str, **details: Any) -> GuardError:
    """A ``GuardError`` with ``code`` whose message reads ``<where>: <what>. <remedy>``."""
    path = where_text(where)
    return GuardError(f"{path}: {what}. {remedy}", code=code, path=path, **details)


def media_essence(media_type: object) -> str | None:
    """``type/subtype`` in lowercase, parameters dropped; None when ``media_type`` is not well-formed."""
    if type(media_type) is str:
        known = _ESSENCES.get(media_type, _UNSEEN)
        if known is not _UNSEEN:  # identity: the sentinel object itself, never a cached value
            return known
        essence = _essence(media_type)
        if len(_ESSENCES) >= _ESSENCES_KEPT:
            _ESSENCES.clear()
        _ESSENCES[media_type] = essence
        return essence
    return _essence(media_type) if isinstance(media_type, str) else None


def _essence(media_type: str) -> str | None:
    match = _MEDIA_TYPE.fullmatch(media_type.strip())
    if match is None:
        return None
    return f"{match['type']}/{match['subtype']}".lower()


_ESSENCES: dict[str, str | None] = {}
"""The verdict on each exact ``str`` media type seen lately: a transcript names a few types over
and over, and the regular expression costs more than the rest of a media part's checks."""
_ESSENCES_KEPT = 256
_UNSEEN = "\x00unseen"  # no media type: a NUL is never well-formed, and never cached


def b64_decoded_size(data: str) -> int:
    """How many bytes padded standard base64 ``data`` decodes to, from its length and padding alone.

    Exact for valid base64 (``len(base64.b64decode(data))``) without decoding anything: every
    four characters carry three bytes, less one per trailing ``=``. For a malformed string the
    number is meaningless; check ``is_standard_base64`` where validity matters.
    """
    pad = 2 if data.endswith("==") else 1 if data.endswith("=") else 0
    return len(data) // 4 * 3 - pad


def is_standard_base64(data: str) -> bool:
    """Whether ``data`` is padded standard base64 (the alphabet ``A-Za-z0-9+/``, ``=`` padding only
    at the end, a length that is a multiple of 4): exactly what ``binascii.a2b_base64(...,
    strict_mode=True)`` accepts, checked without building the decoded bytes."""
    if len(data) % 4 or not data.isascii():
        return False
    # Deleting the alphabet's bytes (in C, a few instructions a character where a regular
    # expression takes tens) leaves the '=' alone: at most two, and all at the very end.
    rest = data.encode("ascii").translate(None, _ALPHABET)
    return not rest or (rest in (b"=", b"==") and data.endswith(rest.decode("ascii")))


_ALPHABET = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"


def inline_size(data: object, max_bytes: int, where: Where) -> int:
    """Decoded size of inline base64 ``data``; refuses bad base64 and anything over ``max_bytes``.

    The size comes from the length and padding (``b64_decoded_size``), so an over-long string is
    refused before its characters are even read, and a valid one is never decoded: its alphabet
    and padding are checked in one pass in C instead (``is_standard_base64``).
    """
    if not isinstance(data, str) or len(data) % 4:
        raise refuse(
            "bad_base64",
            where,
            "inline data is not padded standard base64 (its length is not a multiple of 4)",
            "Encode the bytes with base64.b64encode (standard alphabet, '=' padding, no newlines).",
        )
    size = b64_decoded_size(data)
    if size > max_bytes:
        path = where_text(where)
        raise OversizedInlinePartError(
            f"{path}: inline data is {size} bytes decoded, over the {max_bytes}-byte cap for one "
            "part. Put the bytes in the content store (store.put) and send a RefSource naming "
            "their address instead.",
            code="oversized_inline",
            path=path,
            size=size,
            limit=max_bytes,
        )
    if not is_standard_base64(data):
        raise refuse(
            "bad_base64",
            where,
            f"inline data is not valid standard base64 ({_base64_problem(data)})",
            "Encode the bytes with base64.b64encode (standard alphabet, '=' padding, no newlines).",
        )
    return size


def _base64_problem(data: str) -> str:
    """What ``binascii`` says is wrong with malformed base64 (only on the refusal path)."""
    try:
        binascii.a2b_base64(data.encode("ascii"), strict_mode=True)
    except ValueError as exc:  # binascii.Error and UnicodeEncodeError are both ValueErrors
        return str(exc)
    return "unexpected characters"


def check_ref(ref: object, where: Where) -> None:
    """Refuse a ref whose address is malformed or whose declared size is not a non-negative int."""
    if not isinstance(ref, ContentRef):
        raise refuse(
            "bad_source",
            where,
            f"a ref source must hold a ContentRef, not {type(ref).__name__}",
            "Build it as RefSource(ref=ContentRef(address=...)).",
        )
    address = ref.address
    if not isinstance(address, str) or not ADDRESS_PATTERN.fullmatch(address):
        raise refuse(
            "bad_ref_address",
            where,
            f"ref address {address!r} is not 'sha256:' followed by 64 lowercase hex digits",
            "Use the ContentRef returned by the content store's put().",
        )
    size = ref.size
    if size is not None and (type(size) is not int or size < 0):
        raise refuse(
            "bad_ref_size",
            where,
            f"ref size {size!r} ({type(size).__name__}) is not a non-negative integer",
            "Give the size in bytes as an int, or leave it out.",
        )


def check_json_value(
    value: Any,
    where: Where,
    *,
    in_tool_use: bool,
    max_nodes: int = MAX_TOOL_INPUT_NODES,
    max_depth: int = MAX_TOOL_INPUT_DEPTH,
) -> str | None:
    """Refuse ``value`` unless it is plain JSON of at most ``max_nodes`` nodes and ``max_depth`` levels.

    Returns the value's canonical JSON (sorted keys, compact) when the fast check could vouch for
    it, so the nonce encoder need not serialize it again; None when the exact walk had to decide.

    ``in_tool_use``: the value is (part of) a tool call, where an ``Untrusted`` or its JSON marker
    at any depth is a forged call (``untrusted_in_tool_use``) and the caps give
    ``tool_input_too_large`` / ``tool_input_too_deep``. Otherwise the value is the payload of an
    ``Untrusted`` text (about to be fenced as canonical JSON) and every problem is
    ``bad_untrusted_value``. Iterative; stops at the first problem or after ``max_nodes`` nodes.
    The clean path keeps no paths; a problem is located by a second, path-keeping walk.
    """
    if flat_plain_json(value, max_nodes, max_depth):
        return None
    return check_json_walked(
        value, where, in_tool_use=in_tool_use, max_nodes=max_nodes, max_depth=max_depth
    )


def check_json_walked(
    value: Any,
    where: Where,
    *,
    in_tool_use: bool,
    max_nodes: int = MAX_TOOL_INPUT_NODES,
    max_depth: int = MAX_TOOL_INPUT_DEPTH,
) -> str | None:
    """``check_json_value`` past its first test, for a caller that made ``flat_plain_json``
    itself and got False: the round trip, then the exact walk (same returns, same refusals)."""
    text = _plain_json(value, max_nodes, max_depth)
    if text is not None:
        return text
    problem = _scan(value, max_nodes, max_depth, keep_paths=False)
    if problem is None:
        return None
    if problem[0] != "too_large":
        problem = _scan(value, max_nodes, max_depth, keep_paths=True) or problem
    kind, path = problem
    where = where_text(where)
    at = where if kind in ("too_large", "too_deep") else where + path
    if not in_tool_use:
        reason = {
            "untrusted": "it holds another untrusted mark",
            "too_large": f"it has more than {max_nodes} JSON nodes",
            "too_deep": f"it nests deeper than {max_depth} levels",
        }.get(kind, "it is not plain JSON")
        raise refuse(
            "bad_untrusted_value",
            at,
            f"an untrusted value in a text position cannot be fenced: {reason}",
            "Wrap a string (or small plain JSON) as Untrusted(value, origin).",
        )
    if kind == "untrusted":
        raise refuse(
            "untrusted_in_tool_use",
            at,
            "an untrusted value sits inside a tool call; a tool call built from untrusted data is "
            "a forged model call",
            "Pass untrusted data to the model as a fenced tool result or user text, never as a "
            "tool call's id, name or input.",
        )
    if kind == "too_large":
        raise refuse(
            "tool_input_too_large",
            where,
            f"the tool input has more than {max_nodes} JSON nodes",
            "Refuse or replace the call before it enters the transcript (the agent loop swaps "
            "in a placeholder); bulk data belongs in the content store.",
            limit=max_nodes,
        )
    if kind == "too_deep":
        raise refuse(
            "tool_input_too_deep",
            at,
            f"the tool input nests deeper than {max_depth} levels",
            "Refuse or replace the call before it enters the transcript; real tool inputs nest "
            "a few levels.",
            limit=max_depth,
        )
    raise refuse(
        "tool_input_not_json",
        at,
        "the tool input is not plain JSON (objects with string keys, arrays, strings, finite "
        "numbers, booleans, null)",
        "Convert it to JSON-compatible data before building the request.",
    )


_encode_strict = json.JSONEncoder(
    allow_nan=False, ensure_ascii=False, separators=(",", ":"), sort_keys=True
).encode
_decode = json.JSONDecoder().decode


def flat_plain_json(
    value: Any, max_nodes: int = MAX_TOOL_INPUT_NODES, max_depth: int = MAX_TOOL_INPUT_DEPTH
) -> bool:
    """A Python-speed sufficient test for the common tool input: one small object whose values
    are plain scalars or lists of them, every value of an exact built-in type (so nothing of a
    caller's code runs), within both caps and without the untrusted marker as a key.

    True means the exact walk would find nothing; False leaves the verdict to the other tests.
    Cheaper than the JSON round trip for a few values (which builds an encoder, a decoder and a
    copy of the value); a larger object goes to the round trip, which is faster per node.
    """
    if type(value) is not dict or max_depth < 1 or UNTRUSTED_MARKER in value:
        return False
    nodes = 1 + len(value)
    if nodes > _FLAT_NODES:
        return False
    for key, item in value.items():
        if type(key) is not str:
            return False
        kind = type(item)
        if kind in _PLAIN_SCALARS or (kind is float and math.isfinite(item)):
            continue
        if kind is not list or max_depth < 2:
            return False
        nodes += len(item)
        if nodes > _FLAT_NODES:
            return False
        for element in item:
            kind = type(element)
            if kind not in _PLAIN_SCALARS and not (kind is float and math.isfinite(element)):
                return False
    return nodes <= max_nodes


_FLAT_NODES = 64
"""The most JSON nodes ``flat_plain_json`` walks in Python before leaving a value to the round trip."""
_PLAIN_SCALARS = frozenset({str, int, bool, type(None)})
"""Exact scalar types that are always plain JSON (``float`` is, when finite)."""


def _plain_json(value: Any, max_nodes: int, max_depth: int) -> str | None:
    """A C-speed sufficient test: ``value`` round-trips through JSON unchanged and is small and shallow.

    Returns the canonical JSON text when it passes, None when the exact walk must decide.

    Every node takes at least one character of JSON and every level one bracket, so the text's
    length and bracket count bound the node count and the depth. A round trip that changes the
    value (tuples, non-string keys), fails (an ``Untrusted``, a set, NaN, a cycle, great depth) or
    mentions the untrusted marker leaves the verdict to the exact walk.
    """
    try:
        text = _encode_strict(value)
    except (TypeError, ValueError, RecursionError):
        return None
    if len(text) > max_nodes or text.count("[") + text.count("{") > max_depth:
        return None
    if UNTRUSTED_MARKER in text:
        return None
    try:
        same = _decode(text) == value
    except RecursionError:  # pragma: no cover - depth is bounded above
        return None
    return text if same else None


def _key_step(key: str) -> str:
    """``.key`` for an identifier, else ``["key"]`` (JSON-quoted, shortened to keep messages readable)."""
    if key.isidentifier() and len(key) <= 40:
        return f".{key}"
    quoted = json.dumps(key if len(key) <= 40 else key[:40] + "…", ensure_ascii=False)
    return f"[{quoted}]"


def _scan(
    value: Any, max_nodes: int, max_depth: int, *, keep_paths: bool
) -> tuple[str, str] | None:
    stack: list[tuple[Any, int, str]] = [(value, 0, "")]
    seen = 0
    while stack:
        node, depth, path = stack.pop()
        seen += 1
        if seen > max_nodes:
            return ("too_large", "")
        if depth > max_depth:
            return ("too_deep", path)
        if isinstance(node, str | bool | int | None):
            continue
        if isinstance(node, float):
            if not math.isfinite(node):
                return ("not_json", path)
            continue
        if isinstance(node, Untrusted):
            return ("untrusted", path)
        if isinstance(node, dict):
            if UNTRUSTED_MARKER in node:
                return ("untrusted", path)
            for key, child in node.items():
                if not isinstance(key, str):
                    return ("not_json", path)
                stack.append((child, depth + 1, path + _key_step(key) if keep_paths else ""))
            continue
        if isinstance(node, list | tuple):
            for index, child in enumerate(node):
                stack.append((child, depth + 1, f"{path}[{index}]" if keep_paths else ""))
            continue
        return ("not_json", path)
    return None
