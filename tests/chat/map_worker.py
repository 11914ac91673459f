"""A kernel's life for the map crash test: ``python map_worker.py JOURNAL CALLS [HANG_AFTER]`` maps
1,000 inputs.

The provider appends each call's input to ``CALLS`` before answering (so a SIGKILL leaves the
calls it made on disk), and the process prints ``{"answered": n, "errors": m}`` at the end. With
``HANG_AFTER`` every call after that many hangs (until the test kills the process): the map
cannot run past that point while the test, slowed by a loaded machine, gets round to the kill.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from loom_nb import Chat, Journal
from tests.chat.map_provider import Echo

ITEMS = [f"q{i}" for i in range(1000)]


def main(journal_path: str, calls: str, hang_after: int | None = None) -> None:
    provider = Echo(delay=0.004, log=Path(calls), hang_after=hang_after)
    chat = Chat(provider, journal=Journal(journal_path), id="crashy", system="Echo.")
    result = chat.map_sync(ITEMS, concurrency=8, progress=False)
    answered = sum(r is not None for r in result)
    print(json.dumps({"answered": answered, "errors": len(result.errors), "served": result.served}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else None)
