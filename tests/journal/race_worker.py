"""One of several processes racing to run the same agent execution, for the one-writer tests.

``python race_worker.py JOURNAL SENT TURNS [KILL_AT [OVERLAP]]`` runs execution "race": an agent loop of
TURNS model turns, each calling the approved tool ``send_email`` once (it appends the call id to
SENT, its side effect), then a final answer. On ``ExecutionBusyError`` it waits a moment and
tries again, from a freshly opened execution, until the run is completed. With KILL_AT, the
first process to make the model call of that turn live SIGKILLs itself in the middle of it
(a marker file next to SENT makes it the first only). With OVERLAP (``overlap``), the process
holding the lease waits in its first model call until another process was refused (each refused
process touches ``SENT.refused``; at most 30 s), so the racers do overlap however slowly the
others start on a loaded machine.

Prints one JSON line: how many times it was refused as busy and the final status.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from typing import Any

from loom_nb.agent import ToolDefinition, agent_loop
from loom_nb.capabilities import Capabilities
from loom_nb.content import LlmRequest, LlmResponse, ToolCall
from loom_nb.errors import ExecutionBusyError
from loom_nb.journal import Journal


def wait_for_file(path: str, timeout: float) -> None:
    """Return once ``path`` exists (another process made it), or after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.01)


class TurnProvider:
    """Answers by the turn the request is at, so any process can take over mid-run."""

    name = "turns"
    model = "turns-1"

    def __init__(self, turns: int, kill_at: int, marker: str, wait_for: str | None = None) -> None:
        self.capabilities = Capabilities()
        self._turns = turns
        self._kill_at = kill_at
        self._marker = marker
        self._wait_for = wait_for

    async def complete(self, request: LlmRequest, **_: Any) -> LlmResponse:
        turn = (len(request.messages) - 1) // 2
        if turn == self._kill_at:
            try:
                os.close(os.open(self._marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            except FileExistsError:
                pass
            else:
                os.kill(os.getpid(), signal.SIGKILL)
        if self._wait_for is not None and turn == 0:
            await asyncio.to_thread(wait_for_file, self._wait_for, 30)
        await asyncio.sleep(0.02)
        if turn >= self._turns:
            return LlmResponse(content="all sent", stop_reason="end_turn")
        call = ToolCall(id=f"mail-{turn}", name="send_email", input={"to": f"u{turn}@x"})
        return LlmResponse(content="", tool_calls=[call], stop_reason="tool_use")

    def stream(self, request: LlmRequest, **_: Any) -> Any:
        raise NotImplementedError("this test provider does not stream")


def email_tool(sent: str) -> ToolDefinition:
    """The approved tool whose side effect must happen once per call: a line appended to ``sent``."""

    async def send_email(value: dict[str, Any]) -> dict[str, str]:
        await asyncio.sleep(0.05)
        fd = os.open(sent, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        os.write(fd, f"{value['to']}\n".encode())
        os.close(fd)
        return {"sent": value["to"]}

    return ToolDefinition(
        "send_email",
        "Send an email",
        fn=send_email,
        input_schema={"type": "object", "properties": {"to": {"type": "string"}}},
        requires_approval=True,
    )


async def main(path: str, sent: str, turns: int, kill_at: int, overlap: bool = False) -> None:
    tool = email_tool(sent)
    refused = sent + ".refused"
    provider = TurnProvider(turns, kill_at, sent + ".killed", refused if overlap else None)
    journal = Journal(path, lease_ttl=900)
    busy = 0
    deadline = time.monotonic() + 400
    while True:
        execution = journal.execution("race")
        try:
            result = await agent_loop(
                execution,
                provider,
                [tool],
                [{"role": "user", "content": "send the emails"}],
                max_turns=turns + 2,
                approve=lambda _digest: True,
            )
        except ExecutionBusyError:
            busy += 1
            os.close(os.open(refused, os.O_CREAT | os.O_WRONLY))
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.05)
            continue
        print(json.dumps({"busy": busy, "status": result.status, "turns": result.turns}))
        return


if __name__ == "__main__":
    at = int(sys.argv[4]) if len(sys.argv) > 4 else -1
    overlap = len(sys.argv) > 5 and sys.argv[5] == "overlap"
    open(f"{sys.argv[2]}.ready.{os.getpid()}", "w").close()  # imported; now wait for the others
    while not os.path.exists(sys.argv[2] + ".go"):  # start together with the other racers
        time.sleep(0.005)
    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3]), at, overlap))
