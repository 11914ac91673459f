"""A process running two model turns that cite a stored image, the first one slow (issue 30, item 1).

``python inflight_worker.py SPEC_JSON`` where the spec holds ``journal`` (a path or URL),
``store`` and ``store_options`` (what ``open_store`` takes), ``address`` and ``size`` (the
image's ref) and ``signals`` (a directory). Turn 1's provider call writes ``signals/in-flight``
and waits for ``signals/go`` before answering, so a test can sweep the store while the call is
in flight; turn 2 then cites the same image again. Prints one JSON line: each turn's outcome
(``"ok"`` or the error's code) and whether turn 2's request carried the image's bytes.
"""

from __future__ import annotations

import asyncio
import base64
import json
import sys
from pathlib import Path
from typing import Any

from loom_nb.capabilities import Capabilities
from loom_nb.content import (
    ContentRef,
    DataSource,
    ImagePart,
    LlmRequest,
    LlmResponse,
    Message,
    RefSource,
    TextPart,
)
from loom_nb.errors import LoomError
from loom_nb.journal import Journal, create_llm_effect
from loom_nb.store import Principal, StoreResolver, open_store


class SlowProvider:
    """Answers every call; the first one only once the test says go."""

    name = "slow"
    model = "slow-1"

    def __init__(self, signals: Path) -> None:
        self.capabilities = Capabilities(image=["image/png"])
        self._signals = signals
        self.calls = 0
        self.images: list[bytes] = []

    async def complete(self, request: LlmRequest, **_: Any) -> LlmResponse:
        self.calls += 1
        for message in request.messages:
            for part in message.content if isinstance(message.content, list) else []:
                if isinstance(part, ImagePart) and isinstance(part.source, DataSource):
                    self.images.append(base64.b64decode(part.source.data))
        if self.calls == 1:
            (self._signals / "in-flight").write_text("1")
            for _tick in range(1200):  # at most a minute
                if (self._signals / "go").exists():
                    break
                await asyncio.sleep(0.05)
        return LlmResponse(content=f"answer {self.calls}", stop_reason="end_turn")

    def stream(self, request: LlmRequest, **_: Any) -> Any:
        raise NotImplementedError("this test provider does not stream")


async def main(spec: dict[str, Any]) -> dict[str, Any]:
    signals = Path(spec["signals"])
    store = open_store(spec["store"], **spec["store_options"])
    journal = Journal(spec["journal"], store=store)
    provider = SlowProvider(signals)
    effect = create_llm_effect(provider, resolve_content=StoreResolver(store))
    execution = journal.execution("inflight", principal=Principal("alice"))
    ref = ContentRef(address=spec["address"], size=spec["size"])
    image = ImagePart(media_type="image/png", source=RefSource(ref=ref))
    first = Message(role="user", content=[TextPart(text="what is in the picture?"), image])
    report: dict[str, Any] = {}
    try:
        await effect(execution, "turn:1", LlmRequest(messages=[first]))
        report["turn1"] = "ok"
    except LoomError as exc:
        report["turn1"] = exc.code
    history = [
        first,
        Message(role="assistant", content="answer 1"),
        Message(role="user", content=[TextPart(text="and now?"), image]),
    ]
    before = len(provider.images)
    try:
        await effect(execution, "turn:2", LlmRequest(messages=history))
        report["turn2"] = "ok"
    except LoomError as exc:
        report["turn2"] = exc.code
    report["turn2_saw_image"] = len(provider.images) > before
    journal.close()
    close = getattr(store, "close", None)
    if close is not None:
        close()
    return report


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(json.loads(sys.argv[1])))), flush=True)
