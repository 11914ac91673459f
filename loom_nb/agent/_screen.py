"""Screening a model's tool calls at dispatch (ADR 0120 decision 7).

The guard refuses any request whose assistant turn holds a tool_use with an untrusted value at any
depth of its input, or an input over ``MAX_TOOL_INPUT_NODES`` nodes (it fails closed rather than
walk it). Such a call, once in the transcript, would make the guard refuse EVERY later request of
the run. So before the assistant turn is pushed, each call is screened: an offending input is
replaced, in the transcript, the approval digest and the tool-call log alike, by the small
placeholder ``{"__oversizedInput": true}``; the call is never run and gets a static error result.
"""

from __future__ import annotations

from typing import Any

from loom_nb.agent._results import error_result
from loom_nb.content import LlmResponse, ToolCall, ToolResultPart
from loom_nb.errors import LoomError
from loom_nb.guard import check_tool_input
from loom_nb.limits import MAX_TOOL_INPUT_NODES

__all__ = ["OVERSIZED_INPUT_KEY", "screen_response", "screened_result"]

OVERSIZED_INPUT_KEY = "__oversizedInput"
"""Key of the placeholder that stands for a screened tool call's input."""


def placeholder() -> dict[str, Any]:
    """A fresh ``{"__oversizedInput": true}``."""
    return {OVERSIZED_INPUT_KEY: True}


def screen_call(call: ToolCall) -> ToolCall | None:
    """The call with its input replaced by the placeholder when the guard would refuse it; else None.

    Uses the guard's own check (``check_tool_input``: untrusted marks at any depth, the node and
    depth caps, non-JSON values), so dispatch and guard can never disagree.
    """
    try:
        check_tool_input(call.input)
    except LoomError:
        # Only the input is replaced: vendor data (a Gemini thought signature) must stay with the
        # call or the vendor refuses the next turn's history.
        return call.model_copy(update={"input": placeholder()})
    return None


def screen_response(response: LlmResponse) -> tuple[LlmResponse, frozenset[str]]:
    """The response with every offending call's input replaced, and the ids of those calls."""
    calls: list[ToolCall] = []
    screened: set[str] = set()
    for call in response.tool_calls:
        replaced = screen_call(call)
        if replaced is None:
            calls.append(call)
        else:
            calls.append(replaced)
            screened.add(call.id)
    if not screened:
        return response, frozenset()
    return response.model_copy(update={"tool_calls": calls}), frozenset(screened)


def screened_result(call_id: str, name: str) -> ToolResultPart:
    """The static error result a screened call gets (nothing of its input is echoed)."""
    return error_result(
        call_id,
        name,
        "oversized_input",
        "this call was not run: its input held untrusted content or more than "
        f"{MAX_TOOL_INPUT_NODES} JSON nodes. Call the tool again with a small input written "
        "by you, not copied from a tool's output.",
    )
