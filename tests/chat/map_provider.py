"""A provider for the map tests: answers ``echo <text>``, counts calls and calls in flight.

It can fail chosen inputs, refuse calls for their rate (a 429 storm, with a Retry-After), append
each call's input to a file (what a SIGKILLed process leaves behind), answer structured output,
and hang every call after the first ``hang_after`` until it is cancelled (calls that are surely
in flight when a test stops the map, however slowly a loaded machine runs the rest).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from loom_nb import LlmRequest, LlmResponse, ProviderError, ScriptedProvider, Usage, text_of

HANG = 120.0
"""Seconds a hanging call waits (it is cancelled long before, unless the test is broken)."""


class Echo:
    """Answers each request with ``echo <last user text>`` after ``delay`` seconds."""

    name = "echo"
    model = "echo-1"

    def __init__(
        self,
        *,
        delay: float = 0.0,
        fail: set[str] | None = None,
        storm: int = 0,
        retry_after: float = 0.01,
        log: Path | None = None,
        structured: bool = False,
        hang_after: int | None = None,
    ) -> None:
        self.capabilities = ScriptedProvider([]).capabilities
        self.delay = delay
        self.fail = set(fail or ())
        self.storm = storm
        self.retry_after = retry_after
        self.log = log
        self.structured = structured
        self.hang_after = hang_after
        self.calls: list[str] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.in_flight_seen: list[int] = []
        self._called = asyncio.Event()

    async def reached(self, calls: int) -> None:
        """Wait until ``calls`` calls were made."""
        while len(self.calls) < calls:
            self._called.clear()
            await self._called.wait()

    async def complete(self, request: LlmRequest, **_options: Any) -> LlmResponse:
        text = text_of(request.messages[-1].content)  # raw-content: the item's text
        self.calls.append(text)
        self._called.set()
        if self.log is not None:
            with self.log.open("a") as out:
                out.write(text + "\n")
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        self.in_flight_seen.append(self.in_flight)
        try:
            if self.hang_after is not None and len(self.calls) > self.hang_after:
                await asyncio.sleep(HANG)  # until the map is stopped
            if self.delay:
                await asyncio.sleep(self.delay)
            else:
                await asyncio.sleep(0)
            if self.storm > 0:
                self.storm -= 1
                raise ProviderError(
                    "the echo server answered HTTP 429 (rate_limit_error): slow down.",
                    code="rate_limited",
                    provider="echo",
                    status=429,
                    retryable=True,
                    retry_after=self.retry_after,
                )
            if text in self.fail:
                raise ProviderError(
                    f"the echo server refused {text!r}.", code="invalid_request", status=400
                )
            answer = (
                json.dumps({"word": text, "length": len(text)})
                if self.structured
                else f"echo {text}"
            )
            return LlmResponse(
                content=answer,
                stop_reason="end_turn",
                model="echo-1",
                usage=Usage(input_tokens=10, output_tokens=2),
            )
        finally:
            self.in_flight -= 1

    async def stream(self, request: LlmRequest, **_options: Any) -> Any:
        raise AssertionError("maps do not stream")
