"""The `loom-nb store` command: put prints refs as JSON, ls lists, gc sweeps with logs (fail closed without)."""

from __future__ import annotations

import asyncio
import hashlib
import json
from pathlib import Path

import pytest

from loom_nb.cli import main
from loom_nb.cli.store import parse_ttl
from loom_nb.content import ImagePart, RefSource
from loom_nb.journal import Journal
from loom_nb.store import LocalContentStore


def _address(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def test_put_prints_one_ref_per_file_as_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each FILE is stored for the tenant and its ref printed as one JSON line, in order."""
    (tmp_path / "a.png").write_bytes(b"png bytes")
    (tmp_path / "b.wav").write_bytes(b"wav bytes!")
    store_dir = tmp_path / "store"
    code = main(
        [
            "store",
            "put",
            str(tmp_path / "a.png"),
            str(tmp_path / "b.wav"),
            "--tenant",
            "alice",
            "--store",
            str(store_dir),
        ]
    )
    assert code == 0
    lines = capsys.readouterr().out.splitlines()
    assert [json.loads(line) for line in lines] == [
        {"address": _address(b"png bytes"), "size": 9},
        {"address": _address(b"wav bytes!"), "size": 10},
    ]
    with LocalContentStore(store_dir) as store:
        assert store.tenants(_address(b"png bytes")) == {"alice"}


def test_put_of_a_large_file_shows_progress_on_stderr(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A put of 8 MiB or more reports its percentage on stderr, keeping stdout pure JSON."""
    big = tmp_path / "big.bin"
    big.write_bytes(b"\0" * (9 * 1024 * 1024))
    assert main(["store", "put", str(big), "--tenant", "t", "--store", str(tmp_path / "s")]) == 0
    captured = capsys.readouterr()
    assert "100%" in captured.err
    assert json.loads(captured.out)["size"] == 9 * 1024 * 1024


def test_store_dir_comes_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without --store, $LOOM_NB_STORE names the store directory."""
    monkeypatch.setenv("LOOM_NB_STORE", str(tmp_path / "env-store"))
    (tmp_path / "f").write_bytes(b"x")
    assert main(["store", "put", str(tmp_path / "f"), "--tenant", "t"]) == 0
    assert (tmp_path / "env-store" / "index.sqlite3").exists()
    assert main(["store", "ls", "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()[1:]]
    assert rows[0]["address"] == _address(b"x")
    assert rows[0]["tenants"] == ["t"]


def test_ls_of_a_missing_store_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """ls on a directory with no store exits 1 with the no_store code, creating nothing."""
    assert main(["store", "ls", "--store", str(tmp_path / "nothing")]) == 1
    assert "[no_store]" in capsys.readouterr().err
    assert not (tmp_path / "nothing").exists()


def test_gc_keeps_what_a_jsonl_recording_cites(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """gc --ttl 0s --jsonl reclaims the uncited blob and keeps the one the recording cites."""
    store_dir = tmp_path / "s"
    with LocalContentStore(store_dir) as store:
        cited = store.put(b"cited", "t")
        orphan = store.put(b"orphan", "t")
    recording = tmp_path / "run.jsonl"
    recording.write_text(
        json.dumps({"output": {"source": {"kind": "ref", "ref": {"address": cited.address}}}})
        + "\n"
    )
    assert (
        main(
            [
                "store",
                "gc",
                "--ttl",
                "0s",
                "--dry-run",
                "--jsonl",
                str(recording),
                "--store",
                str(store_dir),
            ]
        )
        == 0
    )
    assert f"would reclaim {orphan.address}" in capsys.readouterr().out
    assert (
        main(
            [
                "store",
                "gc",
                "--ttl",
                "0s",
                "--jsonl",
                str(recording),
                "--store",
                str(store_dir),
                "--json",
            ]
        )
        == 0
    )
    report = json.loads(capsys.readouterr().out)
    assert report["reclaimed"] == [orphan.address]
    assert report["pinned"] == [cited.address]
    with LocalContentStore(store_dir) as store:
        assert store.has(cited.address)
        assert not store.has(orphan.address)


def test_gc_that_would_reclaim_without_logs_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A reclaiming gc with no log to scan fails closed unless --no-logs is given."""
    store_dir = tmp_path / "s"
    with LocalContentStore(store_dir) as store:
        ref = store.put(b"keep me", "t")
    assert main(["store", "gc", "--ttl", "0s", "--store", str(store_dir)]) == 1
    assert "[gc_without_logs]" in capsys.readouterr().err
    with LocalContentStore(store_dir) as store:
        assert store.has(ref.address)
    assert main(["store", "gc", "--ttl", "0s", "--no-logs", "--store", str(store_dir)]) == 0
    with LocalContentStore(store_dir) as store:
        assert not store.has(ref.address)


def test_gc_with_a_bad_jsonl_line_reclaims_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A recording line that is not JSON stops the sweep before anything is deleted."""
    store_dir = tmp_path / "s"
    with LocalContentStore(store_dir) as store:
        ref = store.put(b"x", "t")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"ok": 1}\n{broken\n')
    assert main(["store", "gc", "--ttl", "0s", "--jsonl", str(bad), "--store", str(store_dir)]) == 1
    assert "[invalid_jsonl]" in capsys.readouterr().err
    with LocalContentStore(store_dir) as store:
        assert store.has(ref.address)


def test_gc_with_a_missing_journal_file_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--journal naming no file is an error (opening it would create an empty log citing nothing)."""
    store_dir = tmp_path / "s"
    LocalContentStore(store_dir).close()
    assert (
        main(
            [
                "store",
                "gc",
                "--ttl",
                "1d",
                "--journal",
                str(tmp_path / "nope.sqlite"),
                "--store",
                str(store_dir),
            ]
        )
        == 1
    )
    assert "[no_journal]" in capsys.readouterr().err
    assert not (tmp_path / "nope.sqlite").exists()


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("30s", 30), ("15m", 900), ("12h", 43200), ("7d", 604800), ("2w", 1209600)],
)
def test_parse_ttl_units(text: str, seconds: int) -> None:
    """--ttl accepts a whole number with one of the units s, m, h, d, w."""
    assert parse_ttl(text).total_seconds() == seconds


def test_parse_ttl_rejects_other_text(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """An unreadable --ttl exits 1 with the invalid_ttl code."""
    assert main(["store", "gc", "--ttl", "7 days", "--dry-run", "--store", str(tmp_path)]) == 1
    assert "[invalid_ttl]" in capsys.readouterr().err


def test_gc_reads_a_journal_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """gc --journal scans a real Journal: a blob a journaled step output cites as a media ref is kept."""
    store_dir = tmp_path / "s"
    with LocalContentStore(store_dir) as store:
        cited = store.put(b"cited pixels", "t")
        orphan = store.put(b"orphan pixels", "t")
    part = ImagePart(media_type="image/png", source=RefSource(ref=cited)).model_dump(mode="json")
    journal_path = tmp_path / "runs.sqlite"
    journal = Journal(journal_path)
    asyncio.run(journal.execution("run-1").execute("snap", lambda _: {"parts": [part]}))
    journal.close()
    args = [
        "store",
        "gc",
        "--ttl",
        "0s",
        "--journal",
        str(journal_path),
        "--store",
        str(store_dir),
        "--json",
    ]
    assert main(args) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["pinned"] == [cited.address]
    assert report["reclaimed"] == [orphan.address]


def test_get_writes_the_verified_bytes_and_refuses_a_damaged_blob(
    tmp_path: Path, capfdbinary: pytest.CaptureFixture[bytes]
) -> None:
    """get copies a blob to -o FILE (or stdout) through open; a damaged blob leaves no FILE and
    exits 1 with content_corrupted; another tenant is refused like an absent blob."""
    data = bytes(range(256)) * 5000
    store_dir = tmp_path / "store"
    with LocalContentStore(store_dir) as store:
        ref = store.put(data, "alice")
    out = tmp_path / "out.bin"
    common = ["--store", str(store_dir), "--tenant"]
    assert main(["store", "get", ref.address, "-o", str(out), *common, "alice"]) == 0
    assert out.read_bytes() == data
    capfdbinary.readouterr()
    assert main(["store", "get", ref.address, *common, "alice"]) == 0
    assert capfdbinary.readouterr().out == data
    assert main(["store", "get", ref.address, *common, "bob"]) == 1
    assert "[content_access_denied]" in capfdbinary.readouterr().err.decode()
    digest = ref.address.removeprefix("sha256:")
    (store_dir / "objects" / digest[:2] / digest[2:]).write_bytes(data[:-1] + b"?")
    out.unlink()
    assert main(["store", "get", ref.address, "-o", str(out), *common, "alice"]) == 1
    assert "[content_corrupted]" in capfdbinary.readouterr().err.decode()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["store"]  # no file, no partial file
