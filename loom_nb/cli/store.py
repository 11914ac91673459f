"""``loom-nb store``: put files into the local content store, list it, and collect its garbage.

``put FILE... --tenant T`` prints one ref per line as JSON (progress on stderr for large files);
``get ADDRESS --tenant T [-o FILE]`` writes a blob's bytes to FILE or stdout, streamed and
verified as they are read (``store.open``): a blob that does not hash to its address fails with
``content_corrupted`` and leaves no FILE (on stdout, the bytes written before the end are not to
be trusted: the exit status says so); ``ls`` lists blobs; ``gc --ttl 7d`` reclaims blobs that no scanned log cites and that were last
stored more than the TTL ago (``--dry-run`` only reports). The store is ``--store`` (a directory
or ``s3://bucket/prefix``), else ``$LOOM_STORE``, else ``./.loom/store``; ``gc`` scans the journals
named with ``--journal`` (files or ``postgresql://`` URLs), else ``$LOOM_JOURNAL`` when set.

A gc that reclaims with no log to scan would erase every blob older than the TTL, so it is refused
unless ``--no-logs`` says that is meant.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import sys
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

from loom_nb.cli._backends import (
    JOURNAL_ENV,
    STORE_ENV,
    add_store_option,
    is_url,
    journal_target,
    open_journal,
    open_store_target,
    paired_journal,
    store_target,
)
from loom_nb.content import canonical_json
from loom_nb.errors import ConfigurationError
from loom_nb.store import sweep_unpinned_content

__all__ = ["STORE_ENV", "default_store_dir", "parse_ttl", "register"]


_PROGRESS_FROM = 8 * 1024 * 1024
_COPY_CHUNK = 1024 * 1024
_TTL = re.compile(r"^(\d+)([smhdw])$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``loom-nb store`` and its ``put`` / ``get`` / ``ls`` / ``gc`` subcommands."""
    common = argparse.ArgumentParser(add_help=False)
    add_store_option(common)
    store = subparsers.add_parser("store", help="the content store (local or S3)")
    commands = store.add_subparsers(dest="store_command", metavar="COMMAND", required=True)

    put = commands.add_parser("put", parents=[common], help="store files; print each ref as JSON")
    put.add_argument("files", nargs="+", metavar="FILE")
    put.add_argument("--tenant", required=True, help="tenant the bytes are stored for")
    put.set_defaults(handler=_put)

    get = commands.add_parser(
        "get", parents=[common], help="write a blob's bytes to a file or stdout (verified)"
    )
    get.add_argument("address", metavar="ADDRESS", help="sha256:<hex>, as put printed it")
    get.add_argument("--tenant", required=True, help="a tenant that stored the blob")
    get.add_argument("-o", "--output", metavar="FILE", help="write here instead of stdout")
    get.set_defaults(handler=_get)

    ls = commands.add_parser("ls", aliases=["list"], parents=[common], help="list stored blobs")
    ls.add_argument("--json", action="store_true", help="one JSON object per blob")
    ls.set_defaults(handler=_ls)

    gc = commands.add_parser("gc", parents=[common], help="reclaim blobs no log cites")
    gc.add_argument(
        "--ttl", required=True, help="keep uncited blobs younger than this (30m, 12h, 7d, 2w)"
    )
    gc.add_argument("--dry-run", action="store_true", help="report what would be reclaimed")
    gc.add_argument(
        "--journal",
        action="append",
        default=[],
        metavar="URL",
        help=f"a journal to scan: a SQLite file or postgresql:// URL (default: ${JOURNAL_ENV} if set)",
    )
    gc.add_argument(
        "--jsonl",
        action="append",
        default=[],
        metavar="FILE",
        help="a JSON Lines recording to scan",
    )
    gc.add_argument(
        "--no-logs",
        action="store_true",
        help="allow reclaiming with no log to scan (nothing is pinned)",
    )
    gc.add_argument("--json", action="store_true", help="print the report as JSON")
    gc.set_defaults(handler=_gc)


def default_store_dir() -> Path:
    """``$LOOM_STORE`` (or the older ``$LOOM_NB_STORE``) as a path, else ``./.loom/store``."""
    target, _ = store_target(argparse.Namespace())
    return Path(target)


def parse_ttl(text: str) -> timedelta:
    """``"7d"`` → ``timedelta(days=7)``; units s, m, h, d, w."""
    match = _TTL.match(text.strip())
    if match is None:
        raise ConfigurationError(
            f"--ttl {text!r} is not a duration; write a whole number and a unit: 30m, 12h, 7d, 2w.",
            code="invalid_ttl",
        )
    return timedelta(**{_UNITS[match.group(2)]: int(match.group(1))})


def _store(args: argparse.Namespace, *, create: bool) -> Any:
    target, _ = store_target(args)
    return open_store_target(target, create=create, journal=paired_journal(args))


def _put(args: argparse.Namespace) -> int:
    with _store(args, create=True) as store:
        for name in args.files:
            path = Path(name)
            if not path.is_file():
                raise ConfigurationError(f"{name}: not a file.", code="not_a_file")
            with _Progress(path.name, path.stat().st_size) as progress:
                ref = store.put_file(path, args.tenant, progress=progress)
            print(canonical_json(ref), flush=True)
    return 0


def _get(args: argparse.Namespace) -> int:
    with _store(args, create=False) as store, store.open(args.address, tenant=args.tenant) as blob:
        if args.output is None:
            out = sys.stdout.buffer
            for chunk in blob:
                out.write(chunk)
            out.flush()
            return 0
        target = Path(args.output)
        partial = target.with_name(f".{target.name}.partial")
        try:
            with partial.open("wb") as out:
                shutil.copyfileobj(blob, out, _COPY_CHUNK)
            os.replace(partial, target)  # only a verified copy gets the name
        finally:
            partial.unlink(missing_ok=True)
    return 0


def _ls(args: argparse.Namespace) -> int:
    with _store(args, create=False) as store:
        for entry in store.list():
            tenants = sorted(entry.tenants)
            created = entry.created.isoformat(timespec="seconds")
            if args.json:
                row = {"address": entry.address, "size": entry.size, "created": created}
                print(canonical_json({**row, "tenants": tenants}))
            else:
                print(f"{entry.address}\t{entry.size}\t{created}\t{','.join(tenants)}")
    return 0


def _gc(args: argparse.Namespace) -> int:
    ttl = parse_ttl(args.ttl)
    if not args.journal:
        named, given = journal_target(argparse.Namespace())
        args.journal = [named] if given else []
    if not (args.journal or args.jsonl or args.dry_run or args.no_logs):
        raise ConfigurationError(
            "gc with no --journal or --jsonl to scan would reclaim every blob older than the TTL. "
            "Name the logs that cite content, use --dry-run, or pass --no-logs if that is meant.",
            code="gc_without_logs",
        )
    with _store(args, create=False) as store, contextlib.ExitStack() as stack:
        logs: list[Any] = [_open_journal(name, stack) for name in args.journal]
        logs.extend(_read_jsonl(Path(name)) for name in args.jsonl)
        report = sweep_unpinned_content(store, logs, ttl=ttl, reclaim_orphans=not args.dry_run)
    if args.json:
        print(json.dumps(report.__dict__, sort_keys=True))
        return 0
    verb = "would reclaim" if report.dry_run else "reclaimed"
    for address in report.reclaimed:
        print(f"{verb} {address}")
    print(
        f"{verb} {len(report.reclaimed)} blob(s), {report.reclaimed_bytes} bytes; kept "
        f"{len(report.kept)} ({report.kept_bytes} bytes), {len(report.pinned)} cited by the logs"
    )
    return 0


def _open_journal(name: str, stack: contextlib.ExitStack) -> Any:
    if not is_url(name) and not Path(name).is_file():
        # Opening a missing journal would create an empty one that cites nothing.
        raise ConfigurationError(f"--journal {name}: no such file.", code="no_journal")
    journal = open_journal(name)
    stack.callback(journal.close)
    return journal


def _read_jsonl(path: Path) -> Iterator[Any]:
    """The payloads of a JSON Lines file; a line that is not JSON stops the sweep (fail closed)."""
    try:
        handle = path.open(encoding="utf-8")
    except OSError as exc:
        raise ConfigurationError(f"--jsonl {path}: {exc.strerror}.", code="no_jsonl") from exc
    with handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                yield json.loads(line)
            except ValueError as exc:
                raise ConfigurationError(
                    f"--jsonl {path}, line {number}: not JSON ({exc}); nothing was reclaimed.",
                    code="invalid_jsonl",
                ) from exc


class _Progress:
    """Progress of one put on stderr, for files of 8 MiB and more (a line redrawn per percent)."""

    def __init__(self, name: str, total: int) -> None:
        self.name = name
        self.total = total
        self.shown = -1
        self.enabled = total >= _PROGRESS_FROM

    def __call__(self, done: int, total: int | None) -> None:
        if not self.enabled:
            return
        percent = done * 100 // max(total or self.total, 1)
        if percent != self.shown:
            self.shown = percent
            mib = f"{done / 2**20:.1f} of {self.total / 2**20:.1f} MiB"
            print(f"\rput {self.name}: {percent:3d}% ({mib})", end="", file=sys.stderr, flush=True)

    def __enter__(self) -> _Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.enabled and self.shown >= 0:
            print(file=sys.stderr, flush=True)
