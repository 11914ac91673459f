"""Which journal and store a ``loom-nb`` command uses: ``--journal URL`` / ``--store URL`` or the environment.

Every command takes ``--journal`` (a SQLite file or a ``postgresql://`` URL) and ``--store`` (a
directory, ``file://`` or ``s3://bucket/prefix`` URL). Unset, they come from ``$LOOM_JOURNAL``
and ``$LOOM_STORE`` (the older ``$LOOM_NB_JOURNAL`` / ``$LOOM_NB_STORE`` are still read), else the
embedded defaults ``./.loom/journal.sqlite`` and ``./.loom/store``. A team sets the two variables
once and every command, the demo included, shares the same runs and media.
"""

from __future__ import annotations

import argparse
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from loom_nb.errors import ConfigurationError

if TYPE_CHECKING:
    from loom_nb.journal import Journal
    from loom_nb.store import ContentStore

__all__ = [
    "DEFAULT_JOURNAL",
    "DEFAULT_STORE",
    "JOURNAL_ENV",
    "STORE_ENV",
    "add_journal_option",
    "add_store_option",
    "is_url",
    "journal_target",
    "open_journal",
    "open_store_target",
    "paired_journal",
    "store_target",
]

JOURNAL_ENV = "LOOM_JOURNAL"
"""Environment variable naming the journal (file or URL) when ``--journal`` is not given."""
STORE_ENV = "LOOM_STORE"
"""Environment variable naming the content store (directory or URL) when ``--store`` is not given."""
_LEGACY = {JOURNAL_ENV: "LOOM_NB_JOURNAL", STORE_ENV: "LOOM_NB_STORE"}

DEFAULT_JOURNAL = str(Path(".loom") / "journal.sqlite")
DEFAULT_STORE = str(Path(".loom") / "store")

_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def is_url(target: str) -> bool:
    """Whether ``target`` is a URL (``scheme://...``) rather than a local path."""
    return bool(_URL.match(target))


def _env(name: str) -> str | None:
    return os.environ.get(name) or os.environ.get(_LEGACY[name]) or None


def add_journal_option(parser: argparse.ArgumentParser, *, help_suffix: str = "") -> None:
    """Add ``--journal URL`` to a command."""
    parser.add_argument(
        "--journal",
        metavar="URL",
        help="journal: a SQLite file or postgresql://user@host/db "
        f"(default: ${JOURNAL_ENV}, else {DEFAULT_JOURNAL}){help_suffix}",
    )


def add_store_option(parser: argparse.ArgumentParser, *, what: str = "content store") -> None:
    """Add ``--store URL`` to a command."""
    parser.add_argument(
        "--store",
        metavar="URL",
        help=f"{what}: a directory or s3://bucket/prefix (default: ${STORE_ENV}, else {DEFAULT_STORE})",
    )


def journal_target(args: argparse.Namespace) -> tuple[str, bool]:
    """The journal to use and whether it was named (by ``--journal`` or the environment)."""
    named = getattr(args, "journal", None) or _env(JOURNAL_ENV)
    return (named, True) if named else (DEFAULT_JOURNAL, False)


def store_target(args: argparse.Namespace) -> tuple[str, bool]:
    """The store to use and whether it was named (by ``--store`` or the environment)."""
    named = getattr(args, "store", None) or _env(STORE_ENV)
    return (named, True) if named else (DEFAULT_STORE, False)


def paired_journal(args: argparse.Namespace) -> str | None:
    """The PostgreSQL journal an S3 store of this command keeps its tenant index beside, if any.

    The first ``postgresql://`` ``--journal`` of the command, else (when the store, too, comes
    from the environment) ``$LOOM_JOURNAL`` when it is one: a store and a journal named together
    pair without ``$LOOM_STORE_INDEX`` (issue 16), and a flag is never paired with the
    environment.
    """
    named = getattr(args, "journal", None)
    candidates = list(named) if isinstance(named, list) else [named]
    if not getattr(args, "store", None):
        candidates.append(_env(JOURNAL_ENV))
    for candidate in candidates:
        if isinstance(candidate, str) and candidate.startswith(("postgresql://", "postgres://")):
            return candidate
    return None


def open_store_target(target: str, *, create: bool, journal: str | None = None) -> ContentStore:
    """Open the store at ``target``; a local one must already exist unless ``create``.

    With ``journal`` (a ``postgresql://`` URL, ``paired_journal``), an S3 store keeps its tenant
    index in that database unless it was opened with one of its own or its bucket records
    marker objects.
    """
    from loom_nb.store import open_store

    if not is_url(target) and not create and not (Path(target) / "index.sqlite3").exists():
        raise ConfigurationError(
            f"no content store at {target}; pass --store DIR|URL or set ${STORE_ENV}.",
            code="no_store",
        )
    store = open_store(target)
    follow = getattr(store, "_follow_journal", None)
    if journal is not None and follow is not None:
        follow(journal)
    return store


def open_journal(target: str, *, store: Any = None, create: bool = False) -> Journal:
    """Open the journal at ``target``; a local file must already exist unless ``create``."""
    from loom_nb.journal import Journal

    if not is_url(target) and not create and not Path(target).is_file():
        raise ConfigurationError(
            f"no journal at {target!r}. Pass --journal FILE|URL or set ${JOURNAL_ENV}.",
            code="no_journal",
        )
    if is_url(target) and not target.startswith(("postgresql://", "postgres://")):
        raise ConfigurationError(
            f"--journal {target!r}: a journal is a SQLite file or a postgresql:// URL.",
            code="unsupported_journal_url",
        )
    return Journal(target, store=store)
