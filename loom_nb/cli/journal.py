"""``loom-nb journal``: list, show, export and import durable runs.

``ls`` lists executions with their status; ``show EXECUTION`` prints its events, one per line;
``export EXECUTION -o run.jsonl`` writes the JSON Lines recording to commit next to a notebook;
``import run.jsonl`` loads one (``--as ID`` under another id). The journal is ``--journal`` (a
SQLite file or a ``postgresql://`` URL), else ``$LOOM_JOURNAL``, else ``./.loom/journal.sqlite``.
Claim-checked payloads are read from the content store given with ``--store`` (a directory or
``s3://`` URL; else ``$LOOM_STORE``, else ``./.loom/store`` when it exists).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from loom_nb.cli._backends import (
    JOURNAL_ENV,
    add_journal_option,
    add_store_option,
    journal_target,
    open_journal,
    open_store_target,
    store_target,
)
from loom_nb.errors import ConfigurationError
from loom_nb.journal import Journal
from loom_nb.journal._recording import recording_lines

__all__ = ["JOURNAL_ENV", "default_journal_path", "register"]

_PREVIEW = 100


def default_journal_path() -> Path:
    """``$LOOM_JOURNAL`` (or the older ``$LOOM_NB_JOURNAL``) as a path, else ``./.loom/journal.sqlite``."""
    target, _ = journal_target(argparse.Namespace())
    return Path(target)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``loom-nb journal`` and its ``ls`` / ``show`` / ``export`` / ``html`` / ``import`` subcommands."""
    common = argparse.ArgumentParser(add_help=False)
    add_journal_option(common)
    add_store_option(common, what="content store for claim-checked payloads and media")
    journal = subparsers.add_parser(
        "journal", help="durable runs: list, show, export, html, import"
    )
    commands = journal.add_subparsers(dest="journal_command", metavar="COMMAND", required=True)

    ls = commands.add_parser("ls", aliases=["list"], parents=[common], help="list executions")
    ls.add_argument("--json", action="store_true", help="one JSON object per execution")
    ls.set_defaults(handler=_ls)

    show = commands.add_parser("show", parents=[common], help="print an execution's events")
    show.add_argument("execution", metavar="EXECUTION")
    show.add_argument("--json", action="store_true", help="full events as JSON lines")
    show.set_defaults(handler=_show)

    export = commands.add_parser(
        "export", parents=[common], help="write an execution as a JSON Lines recording"
    )
    export.add_argument("execution", metavar="EXECUTION")
    export.add_argument(
        "-o", "--output", required=True, metavar="FILE", help="recording to write ('-': stdout)"
    )
    export.set_defaults(handler=_export)

    page = commands.add_parser(
        "html", parents=[common], help="write an execution's transcript as a standalone HTML page"
    )
    page.add_argument("execution", metavar="EXECUTION")
    page.add_argument("-o", "--output", required=True, metavar="FILE", help="HTML page to write")
    page.add_argument(
        "--tenant",
        metavar="T",
        help="show stored media as this tenant (default: the tenant that started the execution)",
    )
    page.set_defaults(handler=_html)

    load = commands.add_parser("import", parents=[common], help="load a JSON Lines recording")
    load.add_argument("recording", metavar="FILE")
    load.add_argument("--as", dest="as_id", metavar="ID", help="import under this execution id")
    load.set_defaults(handler=_import)


def _open(args: argparse.Namespace, *, create: bool = False) -> Journal:
    target, _ = journal_target(args)
    return open_journal(target, store=_store(args), create=create)


def _html(args: argparse.Namespace) -> int:
    from loom_nb.render import to_html
    from loom_nb.store import Principal

    with _open(args) as journal:
        summary = next((s for s in journal.executions() if s.execution_id == args.execution), None)
        if summary is None:
            raise ConfigurationError(
                f"no execution {args.execution!r} in the journal; `loom-nb journal ls` lists them.",
                code="execution_not_found",
            )
        tenant = args.tenant or summary.tenant
        viewer = Principal(tenant) if tenant else None
        path = to_html(
            journal.execution(args.execution),
            args.output,
            store=journal.store,
            principal=viewer,
            title=f"loom_nb run {args.execution}",
        )
    print(path)
    return 0


def _store(args: argparse.Namespace) -> Any:
    target, named = store_target(args)
    if not named and not Path(target).is_dir():
        return None
    return open_store_target(target, create=True)


def _ls(args: argparse.Namespace) -> int:
    with _open(args) as journal:
        summaries = journal.executions()
    for s in summaries:
        if args.json:
            row = {
                "events": s.events,
                "execution_id": s.execution_id,
                "started": s.started.isoformat(),
                "status": s.status,
                "steps": s.steps,
                "tenant": s.tenant,
                "updated": s.updated.isoformat(),
            }
            print(json.dumps(row, sort_keys=True, ensure_ascii=False))
        else:
            started = s.started.strftime("%Y-%m-%d %H:%M:%S")
            tenant = s.tenant or "-"
            print(
                f"{s.execution_id}\t{s.status}\t{s.steps} steps\t{s.events} events\t{tenant}\t{started}"
            )
    if not summaries and not args.json:
        print("(no executions)", file=sys.stderr)
    return 0


def _show(args: argparse.Namespace) -> int:
    with _open(args) as journal:
        events = journal.events(args.execution, resolve_claims=journal.store is not None)
    if not events:
        raise ConfigurationError(
            f"no execution {args.execution!r} in the journal; `loom-nb journal ls` lists them.",
            code="execution_not_found",
        )
    for event in events:
        payload = json.dumps(event.payload, sort_keys=True, ensure_ascii=False)
        if args.json:
            print(
                json.dumps(
                    {
                        "created": event.created.isoformat(),
                        "kind": event.kind,
                        "payload": event.payload,
                        "position": event.position,
                        "seq": event.seq,
                        "step_id": event.step_id,
                    },
                    sort_keys=True,
                    ensure_ascii=False,
                )
            )
            continue
        if len(payload) > _PREVIEW:
            payload = payload[: _PREVIEW - 1] + "…"
        where = "" if event.position is None else f"#{event.position}"
        step = f" {event.step_id}" if event.step_id else ""
        print(f"{event.seq:>6} {where:>5} {event.kind}{step}  {payload}")
    return 0


def _export(args: argparse.Namespace) -> int:
    with _open(args) as journal:
        lines = recording_lines(journal, args.execution)
    text = "".join(line + "\n" for line in lines)
    if args.output == "-":
        sys.stdout.write(text)
    else:
        Path(args.output).write_text(text, encoding="utf-8", newline="\n")
        print(f"wrote {len(lines)} events of {args.execution!r} to {args.output}", file=sys.stderr)
    return 0


def _import(args: argparse.Namespace) -> int:
    with _open(args, create=True) as journal:
        execution_id = journal.import_jsonl(args.recording, execution_id=args.as_id)
    print(execution_id)
    return 0
