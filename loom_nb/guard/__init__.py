"""The guard: what a request must be before any provider sees it (ADR 0120 decisions 5 and 7).

``guard_request`` is the public gate: it checks structure (roles, tool pairing, media types,
refs), provenance (untrusted text never in an instruction position, never inside a tool call) and
the inline caps in one walk, and returns the request with untrusted text fenced. The other names
here are the pieces other layers share with it:

- fences: ``fence_nonce`` (the nonce of a request, stable across replays), ``fence_text``,
  ``open_fence`` / ``close_fence``, ``neutralize_fences`` and ``fence_untrusted_media`` for the
  provider mappers that bracket media;
- where media sits: ``iter_media`` (one walk shared with the capability check and resolution),
  ``part_path`` for error messages, and the prefix helpers (``Seen``, ``PrefixFold``) that let a
  turn walk only what it added;
- ``check_tool_input`` (the agent's dispatch-time check), the base64 and media-type checks, and
  the hand-over marks (``handing_over``, ``checked_already``, ``guarded_already``,
  ``supported_already``) that let a journaled call's provider skip a second pass over the very
  request the effect just checked.

Private modules, one concern each: ``_request`` (the gate and its per-transcript cache),
``_message_walk`` (the walk over messages), ``_part_checks`` (single-field checks),
``_rewrite`` (copy-on-write fencing), ``_checks`` (refusals, JSON, base64, refs), ``_fence``
(nonces and fence text), ``_canonical`` (the fast canonical JSON the nonce hashes),
``_skeleton``, ``_skeleton_match`` and ``_skeleton_data`` (look-alike brackets: the entry, the
matcher built on first need, generated data), ``_walk`` (media
locations and prefix folding) and ``_checked`` (the hand-over marks).

This package imports only the core and ``loom_nb.content``: never httpx, ipywidgets or IPython.
"""

from __future__ import annotations

from loom_nb.guard._checked import handing_over
from loom_nb.guard._checks import (
    MAX_TOOL_INPUT_DEPTH,
    b64_decoded_size,
    inline_size,
    is_standard_base64,
    media_essence,
)
from loom_nb.guard._fence import (
    PrefixNonces,
    close_fence,
    fence_nonce,
    fence_text,
    fence_untrusted_media,
    neutralize_fences,
    open_fence,
    request_tail,
)
from loom_nb.guard._request import (
    caches_kept,
    check_tool_input,
    checked_already,
    guard_request,
    guard_with_media,
    guarded_already,
    supported_already,
)
from loom_nb.guard._walk import (
    EMPTY_JSON_SEEN,
    EMPTY_SEEN,
    MediaLocation,
    PrefixFold,
    Seen,
    iter_media,
    part_path,
    walked_once,
)
from loom_nb.limits import (
    MAX_INLINE_BYTES,
    MAX_INLINE_TOTAL_BYTES,
    MAX_RESOLVED_BYTES,
    MAX_TOOL_INPUT_NODES,
)

__all__ = [
    "EMPTY_JSON_SEEN",
    "EMPTY_SEEN",
    "MAX_INLINE_BYTES",
    "MAX_INLINE_TOTAL_BYTES",
    "MAX_RESOLVED_BYTES",
    "MAX_TOOL_INPUT_DEPTH",
    "MAX_TOOL_INPUT_NODES",
    "MediaLocation",
    "PrefixFold",
    "PrefixNonces",
    "Seen",
    "b64_decoded_size",
    "caches_kept",
    "check_tool_input",
    "checked_already",
    "close_fence",
    "fence_nonce",
    "fence_text",
    "fence_untrusted_media",
    "guard_request",
    "guard_with_media",
    "guarded_already",
    "handing_over",
    "inline_size",
    "is_standard_base64",
    "iter_media",
    "media_essence",
    "neutralize_fences",
    "open_fence",
    "part_path",
    "request_tail",
    "supported_already",
    "walked_once",
]
