"""Property tests: the guard fences every untrusted string or refuses, is a fixed point, and raises only LoomError."""

from __future__ import annotations

import contextlib
import re
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loom_nb.content import (
    AudioPart,
    DataSource,
    FilePart,
    ImagePart,
    LlmRequest,
    Message,
    ReasoningPart,
    TextPart,
    ToolResultPart,
    ToolUsePart,
    canonical_json,
)
from loom_nb.errors import GuardError, LoomError
from loom_nb.guard import fence_nonce, guard_request, neutralize_fences
from loom_nb.guard._canonical import canonical_request_json
from loom_nb.taint import Untrusted
from tests.strategies import (
    FENCE_FORGERIES,
    SENTINEL,
    guard_json_values,
    guard_transcripts,
    requests,
)

PROPERTY = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
LOOKALIKE = re.compile(r"<\s*/?\s*untrusted", re.IGNORECASE)


def _value_text(text: Any) -> str:
    if isinstance(text, Untrusted):
        return text.value if isinstance(text.value, str) else canonical_json(text.value)
    return str(text)


def expected_fence_bodies(request: LlmRequest) -> list[str]:
    """What the spec says gets fenced, in order: untrusted text in user messages and tool results."""
    bodies: list[str] = []
    for message in request.messages:
        if message.role != "user" or isinstance(message.content, str):
            continue
        for part in message.content:
            if isinstance(part, TextPart) and (
                part.origin is not None or isinstance(part.text, Untrusted)
            ):
                bodies.append(_value_text(part.text))
            elif isinstance(part, ToolResultPart):
                content = part.content
                if isinstance(content, str):
                    if part.origin is not None:
                        bodies.append(content)
                elif isinstance(content, Untrusted):
                    bodies.append(_value_text(content))
                else:
                    bodies.extend(
                        _value_text(item.text)
                        for item in content
                        if isinstance(item, TextPart)
                        and (
                            item.origin is not None
                            or part.origin is not None
                            or isinstance(item.text, Untrusted)
                        )
                    )
    return [neutralize_fences(body) for body in bodies]


def message_nonce(request: LlmRequest, mi: int) -> str:
    """The nonce of messages[mi]'s fences, by definition: fence_nonce of the request cut after it."""
    return fence_nonce(request.model_copy(update={"messages": request.messages[: mi + 1]}))


def _fence_body(text: str, nonce: str, bodies: list[str]) -> None:
    """Collect the body if ``text`` is exactly one genuine fence; otherwise it must hold no untrusted string."""
    match = re.fullmatch(
        rf'<untrusted nonce="{nonce}" origin="[^"\n<>]*">\n(.*)\n</untrusted nonce="{nonce}">',
        text,
        flags=re.DOTALL,
    )
    if match is None:
        assert SENTINEL not in text
        return
    body = match.group(1)
    assert neutralize_fences(body) == body  # nothing inside can open or close a fence
    assert not LOOKALIKE.search(body)
    bodies.append(body)


def _check_media(part: ImagePart | AudioPart | FilePart) -> None:
    if part.origin is not None:
        assert isinstance(part.source, DataSource)  # untrusted media never names a stored ref
        if isinstance(part, FilePart):
            assert part.name is None
    if isinstance(part, FilePart) and part.name is not None:
        assert SENTINEL not in part.name


def assert_untrusted_only_inside_fences(original: LlmRequest, guarded: LlmRequest) -> None:
    """Every untrusted string of ``original`` appears in ``guarded`` only inside a fence, in a user message or tool result."""
    assert guarded.system is None or isinstance(guarded.system, str)
    assert SENTINEL not in (guarded.system or "")
    bodies: list[str] = []
    for mi, message in enumerate(guarded.messages):
        content = message.content
        if isinstance(content, str):
            assert SENTINEL not in content
            continue
        nonce = message_nonce(original, mi)
        for part in content:
            if message.role == "assistant":
                assert isinstance(part, TextPart | ToolUsePart | ReasoningPart)
                assert SENTINEL not in canonical_json(part)
                assert "__loomUntrusted" not in canonical_json(part)
                if isinstance(part, TextPart):
                    assert part.origin is None
                continue
            if isinstance(part, TextPart):
                assert part.origin is None
                assert isinstance(part.text, str)
                _fence_body(part.text, nonce, bodies)
            elif isinstance(part, ImagePart | AudioPart | FilePart):
                _check_media(part)
            else:
                assert isinstance(part, ToolResultPart)
                assert part.origin is None
                if isinstance(part.content, str):
                    _fence_body(part.content, nonce, bodies)
                else:
                    assert isinstance(part.content, list)
                    for item in part.content:
                        if isinstance(item, TextPart):
                            assert item.origin is None
                            assert isinstance(item.text, str)
                            _fence_body(item.text, nonce, bodies)
                        else:
                            _check_media(item)
    assert bodies == expected_fence_bodies(original)


@PROPERTY
@given(guard_transcripts(chaos=True))
def test_guard_fences_every_untrusted_string_or_refuses(request: LlmRequest) -> None:
    """On random transcripts with random marks, the guard raises a LoomError or fences every untrusted string."""
    try:
        guarded = guard_request(request)
    except LoomError:
        return
    assert_untrusted_only_inside_fences(request, guarded)


@PROPERTY
@given(guard_transcripts(chaos=False))
def test_rule_abiding_transcripts_always_pass_and_are_fenced(request: LlmRequest) -> None:
    """A transcript that breaks no rule is never refused, and its untrusted text comes back fenced."""
    guarded = guard_request(request)
    assert_untrusted_only_inside_fences(request, guarded)


PAIRING_CODES = {
    "orphan_tool_result",
    "stale_tool_result",
    "duplicate_tool_result",
    "unanswered_tool_use",
    "duplicate_tool_use_id",
}


def _ids(message: Message, kind: type[ToolUsePart] | type[ToolResultPart]) -> list[str]:
    if isinstance(message.content, str):
        return []
    found: list[str] = []
    for part in message.content:
        if kind is ToolUsePart and isinstance(part, ToolUsePart):
            found.append(part.id.value if isinstance(part.id, Untrusted) else part.id)
        elif kind is ToolResultPart and isinstance(part, ToolResultPart):
            found.append(part.tool_use_id)
    return found


def _refusal_code(request: LlmRequest) -> str | None:
    """The code of the guard's refusal, or None when it accepts the request."""
    try:
        guard_request(request)
    except GuardError as exc:
        return exc.code
    return None


def pairing_broken(request: LlmRequest) -> bool:
    """An independent statement of the pairing rules: True when the transcript breaks one."""
    calls_so_far: list[str] = []
    previous_calls: list[str] = []
    for message in request.messages:
        calls = _ids(message, ToolUsePart) if message.role == "assistant" else []
        results = _ids(message, ToolResultPart) if message.role == "user" else []
        if len(set(results)) < len(results) or not set(results) <= set(previous_calls):
            return True  # a duplicate, or a result for no call of the message just before
        if previous_calls and set(results) != set(previous_calls):
            return True  # a call of the message just before left unanswered
        calls_so_far.extend(calls)
        previous_calls = calls
    return len(set(calls_so_far)) < len(calls_so_far)  # a call id used twice


@PROPERTY
@given(guard_transcripts(chaos=False, pairing_chaos=True))
def test_pairing_is_refused_exactly_when_a_pairing_rule_is_broken(request: LlmRequest) -> None:
    """A transcript that breaks only pairing rules is refused with a pairing code exactly when it breaks one."""
    broken = pairing_broken(request)
    code = _refusal_code(request)
    assert code is None or code in PAIRING_CODES, code
    assert (code is not None) == broken, code


@PROPERTY
@given(guard_transcripts(chaos=True))
def test_a_pairing_refusal_always_means_a_broken_pairing_rule(request: LlmRequest) -> None:
    """Among all the other broken rules, a pairing code is given only to a transcript that breaks a pairing rule."""
    code = _refusal_code(request)
    assert code not in PAIRING_CODES or pairing_broken(request), code


@PROPERTY
@given(guard_transcripts(chaos=False))
def test_rule_abiding_transcripts_pair_every_call(request: LlmRequest) -> None:
    """The rule-abiding generator itself keeps the pairing rules (so the property above has both sides)."""
    assert not pairing_broken(request)


@PROPERTY
@given(guard_transcripts(chaos=False))
def test_guard_is_deterministic_and_idempotent(request: LlmRequest) -> None:
    """The same request guards to the same bytes, and guarding the output returns it unchanged."""
    first = guard_request(request)
    assert canonical_json(guard_request(request)) == canonical_json(first)
    assert guard_request(first) is first
    reread = LlmRequest.model_validate_json(canonical_json(first))
    assert canonical_json(guard_request(reread)) == canonical_json(first)


@PROPERTY
@given(requests)
def test_guard_raises_only_loom_errors_on_arbitrary_requests(request: LlmRequest) -> None:
    """Whatever the shape (orphans, misplaced parts, tainted calls), only a LoomError escapes."""
    try:
        guarded = guard_request(request)
    except LoomError:
        return
    assert guard_request(guarded) is guarded


@PROPERTY
@given(guard_json_values | st.dictionaries(st.text(max_size=5), guard_json_values, max_size=3))
def test_guard_raises_only_loom_errors_on_arbitrary_json(data: Any) -> None:
    """Arbitrary JSON handed to guard_request is refused with a LoomError, never another exception."""
    with contextlib.suppress(LoomError):
        guard_request(data)


@PROPERTY
@given(
    st.dictionaries(
        st.sampled_from(["messages", "system", "tools"]),
        st.lists(
            st.fixed_dictionaries(
                {"role": st.sampled_from(["user", "assistant", "tool"])},
                optional={"content": st.text(max_size=5) | st.lists(guard_json_values, max_size=2)},
            ),
            max_size=3,
        )
        | guard_json_values,
    )
)
def test_guard_raises_only_loom_errors_on_request_shaped_dicts(data: Any) -> None:
    """Dicts that almost look like requests are refused with a LoomError, never another exception."""
    with contextlib.suppress(LoomError):
        guard_request(data)


@PROPERTY
@given(st.lists(st.text(max_size=8) | st.sampled_from(FENCE_FORGERIES), max_size=6).map("".join))
def test_neutralize_is_idempotent_and_leaves_no_lookalike(text: str) -> None:
    """After neutralising, no ASCII fence look-alike remains and a second pass changes nothing."""
    once = neutralize_fences(text)
    assert not LOOKALIKE.search(once)
    assert neutralize_fences(once) == once


@PROPERTY
@given(requests | guard_transcripts(chaos=True))
def test_fast_canonical_json_equals_canonical_json(request: LlmRequest) -> None:
    """The nonce's fast encoder writes exactly the string content.canonical_json writes."""
    try:
        expected = canonical_json(request)
    except (ValueError, TypeError):
        return
    assert canonical_request_json(request) == expected


def test_fast_canonical_json_handles_odd_values_by_falling_back() -> None:
    """Tuples, non-string keys and nested marks in inputs still give canonical_json's exact string."""
    request = LlmRequest(
        messages=[
            Message(
                role="assistant",
                content=[
                    ToolUsePart(
                        id="t", name="f", input={"t": (1, 2), "d": {1: "x", 10: "y", 2: "z"}}
                    ),
                    ToolUsePart(id="u", name="f", input={"n": [Untrusted({"k": 1}, "w")]}),
                ],
            ),
            Message(role="user", content=[TextPart(text=Untrusted(("a", 1), "w"))]),
        ],
        system=Untrusted("s", "w"),
    )
    assert canonical_request_json(request) == canonical_json(request)


def test_the_fence_checker_catches_an_unfenced_untrusted_string() -> None:
    """The invariant check fails on a request whose untrusted text was not fenced (so the properties can fail)."""
    request = LlmRequest(
        messages=[Message(role="user", content=[TextPart(text=f"{SENTINEL}x", origin="web")])]
    )
    unfenced = LlmRequest(messages=[Message(role="user", content=[TextPart(text=f"{SENTINEL}x")])])
    for wrong in (request, unfenced):
        try:
            assert_untrusted_only_inside_fences(request, wrong)
        except AssertionError:
            continue
        raise AssertionError("the checker accepted an unfenced untrusted string")
    assert_untrusted_only_inside_fences(request, guard_request(request))
