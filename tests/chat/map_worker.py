"""A kernel's life for the map crash test: ``python map_worker.py JOURNAL CALLS`` maps 1,000 inputs.

The provider appends each call's input to ``CALLS`` before answering (so a SIGKILL leaves the
calls it made on disk), and the process prints ``{"answered": n, "errors": m}`` at the end.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from loom_nb import Chat, Journal
from tests.chat.map_provider import Echo

ITEMS = [f"q{i}" for i in range(1000)]


def main(journal_path: str, calls: str) -> None:
    provider = Echo(delay=0.004, log=Path(calls))
    chat = Chat(provider, journal=Journal(journal_path), id="crashy", system="Echo.")
    result = chat.map_sync(ITEMS, concurrency=8, progress=False)
    answered = sum(r is not None for r in result)
    print(json.dumps({"answered": answered, "errors": len(result.errors), "served": result.served}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
