"""Benchmark: what a live ``display(chat)`` costs per turn, as the conversation grows.

A chat of N turns (N = 10, 100, 500) on a ScriptedProvider with an in-memory journal, twice in
the same run: undisplayed, and with one displayed view (``chat_bundle(chat)``, what
``display(chat)`` does). The view's comm serializes every message it sends to JSON, as the
kernel's session does before the bytes leave (the front end is not simulated, except that it
says, as JupyterLab's does, that it applies incremental "splice" messages), so the time includes
building, diffing and encoding the updates. Printed per N: milliseconds per turn for
each, the displayed/undisplayed ratio, and the JSON bytes the view sent per turn.

Target: the cost of a displayed turn does not grow with the conversation (a new turn sends what
it added, not the whole transcript): displayed ms/turn and bytes/turn at 500 turns within 2x of
10 turns. Run: ``python benchmarks/bench_chat_display.py`` (under a minute).
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

import comm
from comm.base_comm import BaseComm

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _report import Row, emit

from loom_nb import Chat, Journal, ScriptedProvider
from loom_nb.widgets._display import chat_bundle

SIZES = (10, 100, 500)
ROUNDS = 3


class JsonComm(BaseComm):
    """A comm that encodes each message as the kernel would and counts the bytes."""

    sent = 0

    def publish_msg(
        self,
        msg_type: str,
        data: Any = None,
        metadata: Any = None,
        buffers: Any = None,
        **keys: Any,
    ) -> None:
        JsonComm.sent += len(json.dumps(data, separators=(",", ":"), default=str))
        JsonComm.sent += sum(len(b) for b in buffers or ())


def _script(turns: int) -> list[dict[str, object]]:
    return [
        {"text": f"answer {i}: " + "words " * 20, "usage": {"input_tokens": 9, "output_tokens": 20}}
        for i in range(turns)
    ]


async def run(turns: int, displayed: bool) -> tuple[float, int]:
    """Seconds and comm bytes for ``turns`` turns of a chat, displayed once or not at all."""
    chat = Chat(ScriptedProvider(_script(turns)), journal=Journal(), id="display")
    view_keepalive = None
    if displayed:
        chat_bundle(chat)
        view_keepalive = list(chat._views or ())
        assert len(view_keepalive) == 1, "the chat did not keep its view"
        # What JupyterLab's front-end model says when it loads: it applies "splice" messages.
        view_keepalive[0]._handle_custom_msg({"type": "splices"}, [])
    JsonComm.sent = 0
    start = time.perf_counter()
    for i in range(turns):
        await chat(f"question {i}: " + "text " * 10)
    elapsed = time.perf_counter() - start
    if displayed:
        view = view_keepalive[0]  # type: ignore[index]
        assert len(view.messages) == 2 * turns, "the view did not follow the chat"
    return elapsed, JsonComm.sent


async def main() -> int:
    comm.create_comm = JsonComm  # type: ignore[assignment]  # what a kernel installs, minus the socket
    print(
        f"{'turns':>6} {'plain ms/turn':>14} {'displayed ms/turn':>18} {'displayed/plain':>16} "
        f"{'comm KB/turn':>13}"
    )
    per_turn: list[float] = []
    sent_per_turn: list[float] = []
    for n in SIZES:
        plain = displayed = float("inf")
        sent = 0
        for _ in range(ROUNDS):  # interleaved, best of each (the machine is shared)
            plain = min(plain, (await run(n, False))[0])
            seconds, sent = await run(n, True)
            displayed = min(displayed, seconds)
        per_turn.append(displayed / n)
        sent_per_turn.append(sent / n)
        print(
            f"{n:>6} {plain / n * 1e3:>14.3f} {displayed / n * 1e3:>18.3f} "
            f"{displayed / plain:>16.2f} {sent / n / 1024:>13.1f}"
        )
    growth = per_turn[-1] / per_turn[0]
    bytes_growth = sent_per_turn[-1] / sent_per_turn[0]
    print(
        f"displayed ms/turn {SIZES[-1]} vs {SIZES[0]} turns: {growth:.2f}x; "
        f"comm bytes/turn: {bytes_growth:.2f}x (target: both <= 2x)"
    )
    emit(
        [
            Row(f"displayed ms/turn, {SIZES[-1]} / {SIZES[0]} turns", growth, 2.0, "<="),
            Row(f"comm bytes/turn, {SIZES[-1]} / {SIZES[0]} turns", bytes_growth, 2.0, "<="),
        ]
    )
    return 0 if growth <= 2 and bytes_growth <= 2 else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
