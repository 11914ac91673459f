"""``loom-nb`` on team backends: every command takes --journal URL / --store URL, or LOOM_JOURNAL / LOOM_STORE."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loom_nb.cli import main
from loom_nb.errors import ConfigurationError
from tests import services
from tests.conftest import JournalBackend, StoreBackend


@pytest.fixture
def team(
    s3_service: str | None,
    postgres_service: str | None,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> tuple[str, str]:
    """A PostgreSQL journal URL and an S3 store URL, with the S3 endpoint in the AWS_* variables."""
    if s3_service is None:
        services.unavailable(
            "no S3-compatible server: install moto[server] or set LOOM_TEST_S3_ENDPOINT"
        )
    if postgres_service is None:
        services.unavailable(f"PostgreSQL at {services.postgres_url()} is not reachable")
    journals = JournalBackend("postgres", tmp_path, postgres_service)
    stores = StoreBackend("s3", tmp_path, s3_service)
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_service)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")
    monkeypatch.chdir(tmp_path)
    yield journals.url("team"), stores.spec("team")[0]
    journals.close()


def test_every_command_runs_on_the_environments_journal_and_store(
    team: tuple[str, str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """With LOOM_JOURNAL and LOOM_STORE set, demo, journal and store commands share one run and its media."""
    journal_url, store_url = team
    monkeypatch.setenv("LOOM_JOURNAL", journal_url)
    monkeypatch.setenv("LOOM_STORE", store_url)
    assert main(["demo", "--dir", "work"]) == 0
    out = capsys.readouterr().out
    assert store_url in out
    assert not Path("work/journal.sqlite").exists()  # the run went to PostgreSQL
    assert not Path("work/store").exists()

    assert main(["journal", "ls", "--json"]) == 0
    (row,) = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert (row["execution_id"], row["status"]) == ("demo-1", "completed")

    assert main(["store", "ls", "--json"]) == 0
    blobs = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(blobs) >= 2  # the memo PDF and the chart
    # Named together, the store keeps its tenant index in the journal's database on its own
    # (no LOOM_STORE_INDEX): rows there, no marker objects in the bucket.
    import obstore
    import psycopg

    from loom_nb.store import open_store

    with psycopg.connect(journal_url) as conn:
        (rows,) = conn.execute("SELECT COUNT(*) FROM loom_store_tenants").fetchone()
    assert rows == len(blobs)
    bucket = open_store(store_url)
    assert [m for batch in obstore.list(bucket._s3, "tenants/") for m in batch] == []

    assert main(["journal", "export", "demo-1", "-o", "run.jsonl"]) == 0
    assert main(["journal", "import", "run.jsonl", "--as", "copy"]) == 0
    assert capsys.readouterr().out.strip() == "copy"
    assert main(["journal", "html", "demo-1", "-o", "run.html"]) == 0
    capsys.readouterr()
    assert Path("run.html").read_text(encoding="utf-8").count("<img") >= 1

    # gc scans $LOOM_JOURNAL when no --journal is named: every blob the run cites is pinned.
    assert main(["store", "gc", "--ttl", "0s", "--dry-run", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert set(report["pinned"]) == {b["address"] for b in blobs}
    assert report["reclaimed"] == []


def test_flags_name_the_backends_and_win_over_the_environment(
    team: tuple[str, str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """--journal URL and --store URL are used when given, whatever the environment says."""
    journal_url, store_url = team
    monkeypatch.setenv("LOOM_JOURNAL", "postgresql://nobody@127.0.0.1:1/none")
    monkeypatch.setenv("LOOM_STORE", "s3://no-such-bucket/x")
    Path("a.txt").write_text("hello team", encoding="utf-8")
    assert main(["store", "put", "a.txt", "--tenant", "t1", "--store", store_url]) == 0
    ref = json.loads(capsys.readouterr().out)
    assert main(["store", "ls", "--store", store_url]) == 0
    assert ref["address"] in capsys.readouterr().out
    assert main(["demo", "--dir", "w", "--journal", journal_url, "--store", store_url]) == 0
    capsys.readouterr()
    assert main(["journal", "show", "demo-1", "--journal", journal_url, "--store", store_url]) == 0
    assert "step_completed" in capsys.readouterr().out


def test_a_journal_url_of_another_kind_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """--journal mysql://... is a clear error with a code, not a file named like a URL."""
    monkeypatch.chdir(tmp_path)
    assert main(["journal", "ls", "--journal", "mysql://db/x"]) == 1
    assert "unsupported_journal_url" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_loom_store_index_puts_the_stores_tenant_index_beside_the_journal(
    team: tuple[str, str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """LOOM_STORE_INDEX=the journal's URL: the demo's media are indexed in PostgreSQL, and gc pins them."""
    import obstore
    import psycopg

    from loom_nb.store import open_store

    journal_url, store_url = team
    monkeypatch.setenv("LOOM_JOURNAL", journal_url)
    monkeypatch.setenv("LOOM_STORE", store_url)
    monkeypatch.setenv("LOOM_STORE_INDEX", journal_url)
    assert main(["demo", "--dir", "work"]) == 0
    capsys.readouterr()
    assert main(["store", "ls", "--json"]) == 0
    blobs = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(blobs) >= 2
    with psycopg.connect(journal_url) as conn:
        (rows,) = conn.execute("SELECT COUNT(*) FROM loom_store_tenants").fetchone()
    assert rows == len(blobs)
    store = open_store(store_url)
    assert [m for batch in obstore.list(store._s3, "tenants/") for m in batch] == []
    assert main(["store", "gc", "--ttl", "0s", "--dry-run", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert set(report["pinned"]) == {b["address"] for b in blobs}
    monkeypatch.delenv("LOOM_STORE_INDEX")
    with pytest.raises(ConfigurationError) as info:
        open_store(store_url).list()  # the bucket says its index is in PostgreSQL
    assert info.value.code == "store_index_mismatch"
