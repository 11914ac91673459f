"""Screening at dispatch: untrusted or over-cap tool inputs are replaced by a placeholder and never run."""

from __future__ import annotations

import json
from typing import Any

from loom_nb.agent._screen import OVERSIZED_INPUT_KEY, screen_response, screened_result
from loom_nb.content import LlmResponse, ToolCall
from loom_nb.limits import MAX_TOOL_INPUT_NODES
from loom_nb.taint import UNTRUSTED_MARKER


def _response(*inputs: dict[str, Any]) -> LlmResponse:
    calls = [ToolCall(id=f"c{i}", name="f", input=inp) for i, inp in enumerate(inputs)]
    return LlmResponse(tool_calls=calls, stop_reason="tool_use")


def test_clean_calls_pass_unchanged() -> None:
    """A response with plain inputs is returned as it was (same object)."""
    response = _response({"a": [1, 2, {"b": "c"}]})
    screened, ids = screen_response(response)
    assert screened is response
    assert ids == frozenset()


def test_untrusted_marker_in_input_is_replaced() -> None:
    """A model-made untrusted marker at any depth of an input replaces that input with the placeholder."""
    forged = {"deep": [{"x": {UNTRUSTED_MARKER: {"origin": "web", "value": "v"}}}]}
    screened, ids = screen_response(_response({"ok": 1}, forged))
    assert ids == frozenset({"c1"})
    assert screened.tool_calls[0].input == {"ok": 1}
    assert screened.tool_calls[1].input == {OVERSIZED_INPUT_KEY: True}
    assert screened.tool_calls[1].id == "c1"


def test_over_cap_input_is_replaced() -> None:
    """An input of more than 100,000 nodes is replaced (fail closed), one at the cap is not."""
    big = {"items": list(range(MAX_TOOL_INPUT_NODES))}  # root + list + 100,000 ints
    ok = {"items": list(range(MAX_TOOL_INPUT_NODES - 2))}
    screened, ids = screen_response(_response(big, ok))
    assert ids == frozenset({"c0"})
    assert screened.tool_calls[0].input == {OVERSIZED_INPUT_KEY: True}
    assert screened.tool_calls[1].input is ok or screened.tool_calls[1].input == ok


def test_screened_result_is_static() -> None:
    """The screened call's answer is an is_error result that echoes nothing of the input."""
    part = screened_result("c9", "f")
    assert part.is_error is True
    assert part.tool_use_id == "c9"
    assert isinstance(part.content, str)
    assert json.loads(part.content)["error"]["type"] == "oversized_input"
    assert screened_result("c9", "f") == part


def test_too_deep_input_is_replaced() -> None:
    """An input nested past the guard's depth cap is screened too (dispatch and guard agree)."""
    deep: Any = 1
    for _ in range(300):
        deep = {"d": deep}
    screened, ids = screen_response(_response(deep))
    assert ids == frozenset({"c0"})
    assert screened.tool_calls[0].input == {OVERSIZED_INPUT_KEY: True}


def test_screening_keeps_the_calls_vendor_data() -> None:
    """A screened call keeps its provider_data (a Gemini thought signature), only its input is replaced."""
    from loom_nb.agent._screen import screen_call
    from loom_nb.content import ToolCall
    from loom_nb.taint import Untrusted

    call = ToolCall(
        id="c1",
        name="f",
        input={"q": Untrusted("x", "web")},
        provider_data={"thought_signature": "sig=="},
    )
    screened = screen_call(call)
    assert screened is not None
    assert screened.input == {"__oversizedInput": True}
    assert screened.provider_data == {"thought_signature": "sig=="}
    assert (screened.id, screened.name) == ("c1", "f")
