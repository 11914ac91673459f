"""Strict inputs beyond the public names (issue 30): the journal's methods, Chat attachments, CLI URLs.

``test_fuzz_public`` binds random values to every public name's signature; these go further:
every method of a ``Journal`` and an ``Execution``, the attachments of ``await chat(text,
*attachments)`` (paths of every odd kind: missing, folders, pipes, devices, undecodable names;
and objects that are not attachments at all), and the URLs the CLI takes (``--journal``,
``--store``, ``$LOOM_JOURNAL``, ``$LOOM_STORE``). Only ``LoomError`` may escape, and nothing may
hang. Everything stays in a scratch directory and on 127.0.0.1: a PostgreSQL URL names port 1
(nothing listens), an S3 store's endpoint is 127.0.0.1 port 1.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import io
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import loom_nb
from loom_nb import cli
from loom_nb.errors import LoomError
from tests import strategies as ls
from tests.test_fuzz_public import FUZZ, SAFE_TEXT, VALUES, bare_exceptions

EXAMPLES = int(os.environ.get("LOOM_FUZZ_EXAMPLES", "25"))


@pytest.fixture
def scratch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A scratch working directory; no API keys, no backend URLs, S3 pointed at a closed port."""
    monkeypatch.chdir(tmp_path)
    for key in list(os.environ):
        if key.endswith("_API_KEY") or key.startswith(("LOOM_", "AWS_")):
            monkeypatch.delenv(key)
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:1")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "fuzz")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "fuzz")
    return tmp_path


# -- the journal's methods -----------------------------------------------------------------------

JOURNAL_METHODS = [
    "execution",
    "events",
    "executions",
    "events_after",
    "export_jsonl",
    "import_jsonl",
    "pinned_content",
    "resolve_claims",
    "watch",
]
EXECUTION_METHODS = ["execute", "park", "resume", "complete", "fork"]


def _journal(scratch: Path) -> loom_nb.Journal:
    journal = loom_nb.Journal(scratch / "fuzz.sqlite")
    execution = journal.execution("known")
    asyncio.run(execution.execute("s", lambda value: value, {"x": 1}))
    return journal


@pytest.mark.parametrize("method", JOURNAL_METHODS)
def test_journal_methods_raise_only_loom_errors_for_bad_input(method: str, scratch: Path) -> None:
    """Each Journal method, given random arguments, answers or refuses with a LoomError."""
    journal = _journal(scratch)
    target = getattr(journal, method)
    if method == "watch":
        target = _stopping(target)
    bare = bare_exceptions(target)
    journal.close()
    assert bare == [], f"journal.{method}: {len(bare)} bare exceptions, first: {bare[:3]}"


def _stopping(watch: Any) -> Any:
    """``journal.watch`` that stops each watch it starts (a fuzz example must not leave threads)."""

    def call(*args: Any, **kwargs: Any) -> None:
        watch(*args, **kwargs).stop()

    call.__signature__ = inspect.signature(watch)  # type: ignore[attr-defined]
    return call


@pytest.mark.parametrize("method", EXECUTION_METHODS)
def test_execution_methods_raise_only_loom_errors_for_bad_input(method: str, scratch: Path) -> None:
    """Each Execution method, given random arguments, answers or refuses with a LoomError."""
    journal = _journal(scratch)
    bare = bare_exceptions(getattr(journal.execution("fuzzed"), method))
    journal.close()
    assert bare == [], f"execution.{method}: {len(bare)} bare exceptions, first: {bare[:3]}"


def test_iter_payloads_and_a_closed_journal_refuse_with_loom_errors(scratch: Path) -> None:
    """Reading a journal's payloads works, and every method of a closed journal is a LoomError."""
    journal = _journal(scratch)
    assert len(list(journal.iter_payloads())) == 3
    journal.close()
    for call in (
        lambda: journal.execution("known"),
        lambda: journal.events("known"),
        lambda: list(journal.iter_payloads()),
        journal.executions,
    ):
        with pytest.raises(LoomError):
            call()


# -- Chat attachments ----------------------------------------------------------------------------


def _odd_paths(scratch: Path) -> list[Any]:
    """Paths that are not one readable regular file, plus a few that are."""
    (scratch / "folder").mkdir(exist_ok=True)
    (scratch / "empty.png").write_bytes(b"")
    (scratch / "noise.png").write_bytes(os.urandom(64))
    (scratch / "noise.pdf").write_bytes(b"%PDF-" + os.urandom(32))
    (scratch / "text").write_text("plain words")
    (scratch / "big.bin").write_bytes(os.urandom(70_000))  # over the inline cap: by ref
    fifo = scratch / "pipe.wav"
    if not fifo.exists() and hasattr(os, "mkfifo"):
        os.mkfifo(fifo)
    link = scratch / "dangling.png"
    if not link.is_symlink():
        link.symlink_to(scratch / "nowhere")
    paths: list[Any] = ["missing.png", "folder", "empty.png", "noise.png", "noise.pdf", "text"]
    paths += ["big.bin", "pipe.wav", "dangling.png", "/dev/zero", "/dev/null", "", " ", "~"]
    paths += ["bad\x00name.png", "lone\udcffsurrogate.png", "x" * 5000, "~nobody-here/x.png"]
    paths += [Path(p) for p in paths[:6]] + [_FsPath(b"bytes-path"), _FsPath(7), _Broken()]
    return paths


class _FsPath:
    """An os.PathLike whose __fspath__ gives what it was made with (bytes, an int...)."""

    def __init__(self, value: Any) -> None:
        self.value = value

    def __fspath__(self) -> Any:
        return self.value


class _Broken:
    """An object that fails whatever is asked of it."""

    def __getattr__(self, name: str) -> Any:
        raise RuntimeError(f"no {name}")


def _attachments(scratch: Path) -> st.SearchStrategy[list[Any]]:
    odd = st.sampled_from(_odd_paths(scratch)) | VALUES | st.binary(max_size=64) | ls.parts
    return st.lists(odd, max_size=4)


def test_chat_attachments_of_any_kind_raise_only_loom_errors(scratch: Path) -> None:
    """await chat(text, *attachments) with odd paths and odd objects: a reply or a LoomError, never
    a bare exception or a hang (a pipe or a device is refused, not read)."""
    chat = loom_nb.Chat(
        loom_nb.ScriptedProvider([{"text": "x"}] * 1000),
        journal=loom_nb.Journal(),
        store=loom_nb.LocalContentStore(scratch / "store"),
        id="attachments",
    )
    bare: list[str] = []

    @FUZZ
    @given(text=st.sampled_from(["look", ""]) | SAFE_TEXT, attachments=_attachments(scratch))
    def run(text: str, attachments: list[Any]) -> None:
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                asyncio.run(asyncio.wait_for(chat(text, *attachments), 10))
        except LoomError:
            pass
        except BaseException as exc:  # counting them is the point
            bare.append(f"{type(exc).__name__}: {exc}"[:300])

    run()
    assert bare == [], f"{len(bare)} bare exceptions, first: {bare[:3]}"


@pytest.mark.parametrize("name", ["pipe.wav", "/dev/zero", "folder", "bad\x00name.png"])
def test_a_path_that_is_not_a_readable_file_is_refused_by_name(name: str, scratch: Path) -> None:
    """A pipe, a device, a folder or a name the OS cannot take is MediaError unreadable_path,
    at once (a pipe is not opened, so nothing waits for a writer)."""
    _odd_paths(scratch)
    chat = loom_nb.Chat(loom_nb.ScriptedProvider([{"text": "x"}]), journal=loom_nb.Journal())
    with pytest.raises(loom_nb.MediaError) as info:
        asyncio.run(asyncio.wait_for(chat("look", name), 10))
    assert info.value.code == "unreadable_path"


# -- the CLI's URL arguments ---------------------------------------------------------------------


def _urls(scratch: Path) -> st.SearchStrategy[str]:
    """Journal and store URLs, well- and ill-formed, that reach nothing but 127.0.0.1 port 1."""
    odd = st.sampled_from(
        ["", "%", "%zz", "%00", "ü", "\x7f", " ", "..", "a b", "?", "#", "@", ":"]
    )
    users = st.sampled_from(["", "u@", "u:p@", ":@", "u%40x@", "ü@"]) | odd.map(lambda s: s + "@")
    pg_hosts = st.sampled_from(
        ["127.0.0.1:1", "localhost:1", "[::1]:1", "127.0.0.1:99999", "127.0.0.1:x", "[::1", "[]"]
    )
    paths = st.sampled_from(["", "/", "/db", "/d/b", "/%2F", "/ü"]) | odd.map(lambda s: "/" + s)
    queries = st.sampled_from(
        ["", "?sslmode=disable", "?connect_timeout=1", "?options=-c%20x", "?x=%", "#f", "?a&&b"]
    )
    postgres = st.builds(
        lambda scheme, user, host, path, query: f"{scheme}://{user}{host}{path}{query}",
        st.sampled_from(["postgresql", "postgres", "PostgreSQL"]),
        users,
        pg_hosts,
        paths,
        queries,
    )
    buckets = st.sampled_from(["b", "", "B_b", "a..b", "x" * 70, "b@c", "b:1", "ü"]) | odd
    s3 = st.builds(
        lambda scheme, bucket, path, query: f"{scheme}://{bucket}{path}{query}",
        st.sampled_from(["s3", "S3"]),
        buckets,
        st.sampled_from(["", "/", "/p", "/p/../q", "/./x", "//", "/p/"]) | paths,
        queries,
    )
    files = st.builds(
        lambda host, name: f"file://{host}{scratch}/{name}",
        st.sampled_from(["", "localhost", "host", "127.0.0.1"]),
        SAFE_TEXT,
    )
    others = st.builds(
        lambda scheme, rest: f"{scheme}://{rest}",
        st.sampled_from(["http", "https", "sqlite", "x-y+z", "mem", "1bad", ""]),
        SAFE_TEXT,
    )
    local = SAFE_TEXT.filter(bool)
    return postgres | s3 | files | others | local | odd


def _commands(scratch: Path) -> st.SearchStrategy[tuple[list[str], dict[str, str]]]:
    (scratch / "a.txt").write_text("stored")
    (scratch / "rec.jsonl").write_text('{"kind": "execution_started"}\n')
    url = _urls(scratch)
    store_cmds = st.sampled_from(
        [
            ["store", "ls"],
            ["store", "ls", "--json"],
            ["store", "put", "a.txt", "--tenant", "t"],
            ["store", "gc", "--ttl", "1d", "--dry-run"],
            ["store", "gc", "--ttl", "1d", "--no-logs"],
        ]
    )
    journal_cmds = st.sampled_from(
        [
            ["journal", "ls"],
            ["journal", "show", "x"],
            ["journal", "export", "x", "-o", "out.jsonl"],
            ["journal", "import", "rec.jsonl"],
            ["journal", "html", "x", "-o", "out.html"],
        ]
    )
    with_store = st.builds(lambda c, u: [*c, "--store", u], store_cmds, url)
    gc_with_journal = st.builds(
        lambda s, j: ["store", "gc", "--ttl", "1d", "--store", s, "--journal", j], url, url
    )
    with_journal = st.builds(lambda c, u: [*c, "--journal", u], journal_cmds, url)
    argv = with_store | gc_with_journal | with_journal | store_cmds | journal_cmds
    env = st.fixed_dictionaries(
        {}, optional={"LOOM_JOURNAL": url, "LOOM_STORE": url, "LOOM_STORE_INDEX": url}
    )
    return st.tuples(argv, env)


def test_cli_url_arguments_raise_nothing_bare(scratch: Path) -> None:
    """loom-nb store/journal commands with random --store/--journal URLs (and the same in the
    environment): an exit code, never a bare exception, never a connection beyond 127.0.0.1."""
    failures: list[str] = []

    @settings(
        max_examples=EXAMPLES * 4,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
        database=None,
    )
    @given(case=_commands(scratch))
    def run(case: tuple[list[str], dict[str, str]]) -> None:
        argv, env = case
        saved = {key: os.environ.get(key) for key in env}
        os.environ.update(env)
        try:
            with (
                contextlib.redirect_stdout(io.StringIO()),
                contextlib.redirect_stderr(io.StringIO()),
            ):
                code: object = cli.main(argv)
        except SystemExit as exc:  # argparse: a usage error
            code = exc.code
        except BaseException as exc:  # counting them is the point
            failures.append(f"{argv} {env}: {type(exc).__name__}: {exc}"[:400])
            return
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
        if code not in (0, 1, 2):
            failures.append(f"{argv} {env}: exit code {code!r}")

    run()
    assert failures == [], f"{len(failures)} failures, first: {failures[:3]}"


def test_the_url_strategy_reaches_every_backend_kind(scratch: Path) -> None:
    """The URLs drawn include PostgreSQL, S3, file and plain paths (so the fuzz is not all one kind)."""
    seen: set[str] = set()

    @settings(max_examples=300, database=None, deadline=None)
    @given(url=_urls(scratch))
    def draw(url: str) -> None:
        seen.add(url.split("://")[0].lower() if "://" in url else "path")

    draw()
    assert {"postgresql", "postgres", "s3", "file", "path"} <= seen


# -- what the fuzz found, pinned -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "code"),
    [
        (
            lambda j: j.events_after("known", loom_nb.Message(role="user", content="x")),
            "invalid_argument",
        ),
        (lambda j: j.events_after("known", 2**70), "invalid_argument"),
        (lambda j: j.events_after("known", 0, earlier=[1]), "invalid_argument"),
        (lambda j: j.import_jsonl(None), "invalid_argument"),
        (lambda j: j.import_jsonl(io.BytesIO(b'{"kind": "x"}\n')), "invalid_argument"),
        (lambda j: j.import_jsonl("bad\x00name.jsonl"), "recording_unavailable"),
        (lambda j: j.export_jsonl("known", io.BytesIO()), "recording_unavailable"),
    ],
    ids=[
        "events_after-seq-message",
        "events_after-huge",
        "events_after-earlier",
        "import-None",
        "import-binary",
        "import-nul",
        "export-binary",
    ],
)
def test_journal_refusals_the_fuzz_found(call: Any, code: str, scratch: Path) -> None:
    """Each input the journal fuzz first broke on is now a JournalError with a code."""
    journal = _journal(scratch)
    with pytest.raises(loom_nb.JournalError) as info:
        call(journal)
    assert info.value.code == code
    journal.close()


@pytest.mark.parametrize(
    ("url", "endpoint"),
    [
        ("s3:// /d/b", "http://127.0.0.1:1"),
        ("s3://b/p", "http:// x"),
        ("s3://b/p", "http://127.0.0.1:99999"),
        ("s3://b/p", "http://[::1"),
        ("s3://b/p", "http://ü:1"),
        ("s3://b/p", "ftp://127.0.0.1:1"),
        ("s3://b/\x7f", "http://127.0.0.1:1"),
    ],
)
def test_s3_urls_and_endpoints_the_client_would_panic_on_are_refused(
    url: str, endpoint: str
) -> None:
    """A bucket or an endpoint the S3 client cannot build a request from (it panicked, a
    BaseException) is a ConfigurationError when the store is opened."""
    with pytest.raises(loom_nb.ConfigurationError) as info:
        loom_nb.open_store(url, endpoint=endpoint, access_key_id="k", secret_access_key="s")
    assert info.value.code in ("invalid_store_url", "invalid_s3_option")
