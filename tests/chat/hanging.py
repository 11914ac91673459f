"""A provider whose stream sends some text and then waits until it is cancelled (stop tests)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from loom_nb import LlmRequest, LlmResponse, LlmStreamChunk
from loom_nb.providers.scripted import SCRIPTED_CAPABILITIES


class Hanging:
    """Streams ``deltas``, sets ``started``, then waits forever (until cancelled)."""

    capabilities = SCRIPTED_CAPABILITIES
    name = "hanging"

    def __init__(self, *deltas: str) -> None:
        self.deltas = deltas or ("Hel", "lo")
        self.started = asyncio.Event()

    async def complete(self, request: LlmRequest) -> LlmResponse:
        raise AssertionError("not used")

    async def stream(self, request: LlmRequest) -> AsyncIterator[LlmStreamChunk]:
        for delta in self.deltas:
            yield LlmStreamChunk(kind="text", text=delta)
        self.started.set()
        await asyncio.Event().wait()
        yield LlmStreamChunk(kind="done", response=LlmResponse(content="never"))
