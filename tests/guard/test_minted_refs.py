"""Untrusted media by ref: refused (ADR 0120 decision 7) unless an MCP toolset minted the ref (issue 28)."""

from __future__ import annotations

import pytest

from loom_nb import (
    ContentRef,
    GuardError,
    ImagePart,
    LlmRequest,
    Message,
    RefSource,
    ToolResultPart,
    ToolUsePart,
    guard_request,
)
from loom_nb.taint import is_minted_media_origin

REF = RefSource(ref=ContentRef(address="sha256:" + "ab" * 32, size=10))


def request_with(result: ToolResultPart | ImagePart) -> LlmRequest:
    call = Message(role="assistant", content=[ToolUsePart(id="c", name="picture", input={})])
    return LlmRequest(
        messages=[Message(role="user", content="go"), call, Message(role="user", content=[result])]
    )


def test_mcp_media_inside_a_tool_result_may_name_its_minted_ref() -> None:
    """An image marked mcp:<server>/<tool> inside a tool result passes, still marked."""
    image = ImagePart(media_type="image/png", source=REF, origin="mcp:shop/chart")
    guarded = guard_request(request_with(ToolResultPart(tool_use_id="c", content=[image])))
    assert guarded.messages[2].content[0].content[0].origin == "mcp:shop/chart"


@pytest.mark.parametrize(
    "result",
    [
        ToolResultPart(
            tool_use_id="c",
            content=[ImagePart(media_type="image/png", source=REF, origin="tool:web_fetch")],
        ),
        ToolResultPart(
            tool_use_id="c",
            content=[ImagePart(media_type="image/png", source=REF)],
            origin="tool:web_fetch",
        ),
    ],
    ids=["own origin", "result origin"],
)
def test_other_untrusted_media_still_may_not_name_a_ref(result: ToolResultPart) -> None:
    """Any other untrusted origin naming a ref is refused as before."""
    with pytest.raises(GuardError) as refused:
        guard_request(request_with(result))
    assert refused.value.code == "untrusted_media_ref"


def test_mcp_media_outside_a_tool_result_is_refused() -> None:
    """The allowance holds only inside a tool result: a free-standing mcp: image is refused."""
    image = ImagePart(media_type="image/png", source=REF, origin="mcp:shop/chart")
    request = LlmRequest(messages=[Message(role="user", content=[image])])
    with pytest.raises(GuardError) as refused:
        guard_request(request)
    assert refused.value.code == "untrusted_media_ref"


def test_the_predicate() -> None:
    """Only str origins with the mcp: prefix count."""
    assert is_minted_media_origin("mcp:shop/chart")
    assert not is_minted_media_origin("tool:mcp:shop")
    assert not is_minted_media_origin(None)
