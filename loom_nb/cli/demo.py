"""``loom-nb demo``: the offline agent run of ``loom_nb.demo``, printed as it happens."""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

__all__ = ["register"]


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``demo`` command."""
    parser = subparsers.add_parser(
        "demo",
        help="run the offline demo agent (no API key) and write its transcript as HTML",
        description=(
            "Run an offline agent: a scripted model reads an attached PDF, draws a chart (an "
            "image by ref), reads an untrusted web page (fenced) and asks approval to send an "
            "email. The run is journaled in SQLite and its transcript written as an HTML page."
        ),
    )
    parser.add_argument(
        "--dir",
        default=".loom",
        help="where the store, journal and HTML go (default: ./.loom, where the store and "
        "journal commands look)",
    )
    parser.add_argument(
        "--decline", action="store_true", help="decline the email instead of approving it"
    )
    parser.add_argument(
        "--journal",
        metavar="URL",
        help="journal for the run: a SQLite file or postgresql:// URL (default: $LOOM_JOURNAL, "
        "else DIR/journal.sqlite)",
    )
    parser.add_argument(
        "--store",
        metavar="URL",
        help="content store for the run: a directory or s3://bucket/prefix (default: "
        "$LOOM_STORE, else DIR/store)",
    )
    parser.set_defaults(handler=_demo)


def _demo(args: Any) -> int:
    from loom_nb.demo import run_demo

    # Streamed model text has no newline of its own: end that line before anything else prints.
    mid_line = False

    def out(line: str) -> None:
        nonlocal mid_line
        if mid_line:
            sys.stdout.write("\n")
        mid_line = False
        print(line, flush=True)

    def streamed(text: str) -> None:
        nonlocal mid_line
        if not mid_line:
            sys.stdout.write("  model    ")
        mid_line = True
        sys.stdout.write(text.replace("\n", " "))
        sys.stdout.flush()

    def call(name: str) -> None:
        nonlocal mid_line
        sys.stdout.write(f"\n  call     {name}\n")
        mid_line = False

    from loom_nb.cli._backends import journal_target, store_target

    journal, named_journal = journal_target(args)
    store, named_store = store_target(args)
    asyncio.run(
        run_demo(
            args.dir,
            approve=not args.decline,
            out=out,
            stream=streamed,
            on_call=call,
            journal_url=journal if named_journal else None,
            store_url=store if named_store else None,
        )
    )
    return 0
