"""The provider conformance kit: ``run_llm_provider_conformance(make_provider)`` (ADR 0120 decision 6).

Any provider, shipped or third-party, must pass the same cases, observed where it matters: at the
wire. The factory gets the ``Capabilities`` a case needs and returns the provider plus a function
that returns what reached the wire so far (the HTTP request bodies seen by an
``httpx.MockTransport``; for a provider without HTTP, whatever it hands onwards). Cases:

- ``undeclared_image_refused``: a provider that did not declare ``image/png`` (text-only, and one
  that declared only ``image/jpeg``) refuses a PNG request with ``UnsupportedModalityError`` from
  ``complete`` AND from ``stream``, before any I/O (nothing reached the wire);
- ``declared_image_on_wire``: one that declared it puts the image's bytes on the wire (declaring
  a modality and dropping it is the same silent loss);
- ``text_parts_not_coerced``: a message of text parts arrives as text, not as a Python or JSON
  rendering of the parts (the "Guard against raw reads" of the ADR);
- ``tool_round_trip_paired``: a ``tool_use`` / ``tool_result`` transcript reaches the wire with the
  call's id on both sides, its input and its result intact;
- ``settings_honoured_or_refused``: each ``ModelSettings`` field given per call either reaches the
  wire (its distinctive value is in the body) or is refused with
  ``ConfigurationError(code="unsupported_setting")`` before any I/O: never silently dropped;
- ``output_schema_on_wire``: ``complete(request, output_type=Model)`` puts the model's schema on
  the wire (a validation failure of the canned answer is fine), or refuses before any I/O.

Use it from pytest (asyncio)::

    async def test_conformance():
        await run_llm_provider_conformance(make_provider)

It raises ``AssertionError`` listing every failed case, and returns the names of the cases run.
"""

from __future__ import annotations

import base64
from collections.abc import Awaitable, Callable, Sequence
from typing import NamedTuple

from pydantic import BaseModel

from loom_nb.capabilities import Capabilities
from loom_nb.content import (
    DataSource,
    ImagePart,
    LlmRequest,
    Message,
    TextPart,
    ToolResultPart,
    ToolSpec,
    ToolUsePart,
)
from loom_nb.errors import (
    ConfigurationError,
    LoomError,
    StructuredOutputError,
    UnsupportedModalityError,
)
from loom_nb.providers._base import LlmProvider
from loom_nb.settings import ModelSettings

__all__ = [
    "CONFORMANCE_PNG",
    "ConformanceError",
    "ProviderUnderTest",
    "run_llm_provider_conformance",
]

CONFORMANCE_PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
"""A 1×1 PNG, base64: the image every image case sends."""


class ProviderUnderTest(NamedTuple):
    """What a conformance factory returns: the provider and what reached its wire so far."""

    provider: LlmProvider
    wire: Callable[[], Sequence[bytes]]
    """The payloads that left the provider so far (e.g. HTTP request bodies), oldest first."""


Factory = Callable[
    [Capabilities],
    "ProviderUnderTest | tuple[LlmProvider, Callable[[], Sequence[bytes]]] | Awaitable[ProviderUnderTest]",
]

_TOOL = ToolSpec(
    name="get_weather",
    description="Weather for a city.",
    input_schema={
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
)
_CALL_ID = "toolu_conformance_7f3a"


def _image_request() -> LlmRequest:
    image = ImagePart(media_type="image/png", source=DataSource(data=CONFORMANCE_PNG))
    return LlmRequest(
        messages=[Message(role="user", content=[image, TextPart(text="What is this?")])]
    )


def _text_parts_request() -> LlmRequest:
    parts: list[TextPart] = [TextPart(text="alpha-7 "), TextPart(text="beta-9")]
    return LlmRequest(messages=[Message(role="user", content=list(parts))])


def _tool_request() -> LlmRequest:
    return LlmRequest(
        tools=[_TOOL],
        messages=[
            Message(role="user", content="Weather in Paris?"),
            Message(
                role="assistant",
                content=[
                    TextPart(text="Checking."),
                    ToolUsePart(id=_CALL_ID, name="get_weather", input={"city": "Paris-q2"}),
                ],
            ),
            Message(
                role="user",
                content=[ToolResultPart(tool_use_id=_CALL_ID, content="sunny-k4")],
            ),
        ],
    )


async def _make(factory: Factory, capabilities: Capabilities) -> ProviderUnderTest:
    made = factory(capabilities)
    if isinstance(made, Awaitable):
        made = await made
    provider, wire = made
    return ProviderUnderTest(provider, wire)


def _wire_text(target: ProviderUnderTest) -> str:
    return "\n".join(payload.decode("utf-8", "replace") for payload in target.wire())


async def _refused(target: ProviderUnderTest, via: str) -> str | None:
    request = _image_request()
    try:
        if via == "complete":
            await target.provider.complete(request)
        else:
            async for _chunk in target.provider.stream(request):
                return f"{via}: yielded a chunk for an undeclared image instead of refusing"
    except UnsupportedModalityError:
        if target.wire():
            return f"{via}: refused, but only after something reached the wire"
        return None
    except Exception as exc:  # the kit reports any other failure as a finding
        return f"{via}: raised {type(exc).__name__} instead of UnsupportedModalityError: {exc}"
    return f"{via}: accepted an image/png request although image/png was not declared"


async def _case_undeclared(factory: Factory) -> list[str]:
    problems: list[str] = []
    for caps, label in (
        (Capabilities(), "text-only"),
        (Capabilities(image=["image/jpeg"]), "jpeg-only"),
    ):
        for via in ("complete", "stream"):
            problem = await _refused(await _make(factory, caps), via)
            if problem:
                problems.append(f"{label} {problem}")
    return problems


async def _case_declared(factory: Factory) -> list[str]:
    target = await _make(factory, Capabilities(image=["image/png"]))
    await target.provider.complete(_image_request())
    wire = _wire_text(target)
    raw = base64.b64decode(CONFORMANCE_PNG)
    forms = {CONFORMANCE_PNG, base64.urlsafe_b64encode(raw).decode(), CONFORMANCE_PNG.rstrip("=")}
    if not any(form in wire for form in forms):
        return ["declared image/png but the image's bytes never reached the wire"]
    return []


async def _case_text_parts(factory: Factory) -> list[str]:
    target = await _make(factory, Capabilities())
    await target.provider.complete(_text_parts_request())
    wire = _wire_text(target)
    problems = []
    if "alpha-7" not in wire or "beta-9" not in wire:
        problems.append("the text of a text-parts message did not reach the wire")
    for artifact in (
        "TextPart(",
        "type='text'",
        "{'type': 'text'",
        "[object Object]",
        "text='alpha",
    ):
        if artifact in wire:
            problems.append(f"a text-parts message was string-coerced (wire holds {artifact!r})")
    return problems


async def _case_tool_round_trip(factory: Factory) -> list[str]:
    target = await _make(factory, Capabilities())
    await target.provider.complete(_tool_request())
    wire = _wire_text(target)
    problems = []
    if wire.count(_CALL_ID) < 2:
        problems.append("the tool call's id did not reach the wire on both the call and its result")
    for needle, what in (("Paris-q2", "the tool call's input"), ("sunny-k4", "the tool result")):
        if needle not in wire:
            problems.append(f"{what} did not reach the wire")
    return problems


# Each setting with a value distinctive enough to be found in a wire body.
_SETTINGS_PROBES: tuple[tuple[str, ModelSettings, str], ...] = (
    ("max_tokens", ModelSettings(max_tokens=3217), "3217"),
    ("temperature", ModelSettings(temperature=0.37), "0.37"),
    ("top_p", ModelSettings(top_p=0.83), "0.83"),
    ("stop_sequences", ModelSettings(stop_sequences=["STOP-k9"]), "STOP-k9"),
    ("thinking_budget", ModelSettings(thinking_budget=2111), "2111"),
    ("reasoning_effort", ModelSettings(reasoning_effort="medium"), "medium"),
    ("seed", ModelSettings(seed=8861), "8861"),
)


async def _case_settings(factory: Factory) -> list[str]:
    problems: list[str] = []
    for name, settings, needle in _SETTINGS_PROBES:
        target = await _make(factory, Capabilities())
        try:
            await target.provider.complete(_text_parts_request(), settings=settings)
        except ConfigurationError as exc:
            if exc.code != "unsupported_setting":
                problems.append(
                    f"{name}: refused with code {exc.code!r}, not 'unsupported_setting'"
                )
            elif target.wire():
                problems.append(f"{name}: refused, but only after something reached the wire")
            continue
        if needle not in _wire_text(target):
            problems.append(f"{name}: accepted, but its value {needle} never reached the wire")
    return problems


class _KitAnswer(BaseModel):
    """The structured answer the output case asks for (a field name no prompt contains)."""

    kit_answer_q7: int


async def _case_output_schema(factory: Factory) -> list[str]:
    target = await _make(factory, Capabilities())
    try:
        response = await target.provider.complete(_text_parts_request(), output_type=_KitAnswer)
    except StructuredOutputError:
        response = None  # the canned answer is not this model's JSON: expected
    except ConfigurationError as exc:
        if exc.code in {"unsupported_output_type", "unsupported_setting"} and not target.wire():
            return []
        return [f"refused with {exc.code!r} after something reached the wire, or with a wrong code"]
    if "kit_answer_q7" not in _wire_text(target):
        return ["output_type was accepted but its schema never reached the wire"]
    if response is not None and not isinstance(response.output, _KitAnswer):
        return ["complete(output_type=) returned a response whose output is not the model"]
    return []


_CASES: dict[str, Callable[[Factory], Awaitable[list[str]]]] = {
    "undeclared_image_refused": _case_undeclared,
    "declared_image_on_wire": _case_declared,
    "text_parts_not_coerced": _case_text_parts,
    "tool_round_trip_paired": _case_tool_round_trip,
    "settings_honoured_or_refused": _case_settings,
    "output_schema_on_wire": _case_output_schema,
}


class ConformanceError(LoomError, AssertionError):
    """The provider failed conformance cases (an ``AssertionError`` too, so test runners report it)."""

    default_code = "conformance_failed"


async def run_llm_provider_conformance(make_provider: Factory) -> list[str]:
    """Run every conformance case against providers made by ``make_provider(capabilities)``.

    Each case makes fresh providers. Returns the case names; raises ``ConformanceError`` (an
    ``AssertionError`` and a ``LoomError``) listing every problem found (a case that raises is
    reported with its exception). A ``make_provider`` that is not callable is a
    ``ConfigurationError``.
    """
    if not callable(make_provider):
        raise ConfigurationError(
            "run_llm_provider_conformance() takes a factory: a function of capabilities that "
            f"returns a provider, not {type(make_provider).__name__}.",
            code="invalid_argument",
            argument="make_provider",
        )
    failures: list[str] = []
    for name, case in _CASES.items():
        try:
            problems = await case(make_provider)
        except Exception as exc:  # a crashing case is a finding, reported with the others
            problems = [f"raised {type(exc).__name__}: {exc}"]
        failures.extend(f"{name}: {problem}" for problem in problems)
    if failures:
        raise ConformanceError("provider conformance failed:\n- " + "\n- ".join(failures))
    return list(_CASES)
