"""Byte caps of ADR 0120 decision 5, in one place so every layer agrees on them."""

from __future__ import annotations

__all__ = [
    "MAX_INLINE_BYTES",
    "MAX_INLINE_TOTAL_BYTES",
    "MAX_RESOLVED_BYTES",
    "MAX_TOOL_INPUT_NODES",
]

MAX_INLINE_BYTES = 64 * 1024
"""Largest inline (base64) media part, counted in decoded bytes."""

MAX_INLINE_TOTAL_BYTES = 256 * 1024
"""Largest total of inline media in one request (or one agent transcript), decoded bytes."""

MAX_RESOLVED_BYTES = 32 * 1024 * 1024
"""Largest total of bytes fetched from the content store for one request (a running budget)."""

MAX_TOOL_INPUT_NODES = 100_000
"""A tool call input with more JSON nodes than this is refused (fail closed) rather than walked."""
