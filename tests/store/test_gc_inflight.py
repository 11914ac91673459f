"""The content sweep during a slow model call keeps the media the call cites (issue 30, item 1).

The exact race, with real processes: a blob stored ten days ago, a model step that cites it by
ref and is waiting on its (slow) provider, and ``loom-nb store gc --ttl 7d`` run meanwhile in
another process. The sweep must keep the blob (the step pinned it when it started, before the
store was read) and still reclaim an old blob nobody cites; the next turn must resolve the image
again. On SQLite with the local store, and on PostgreSQL with S3 (its tenant index in the
journal's database, as a team runs it).
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import time
import uuid
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from loom_nb.store import open_store
from tests import services

WORKER = Path(__file__).with_name("inflight_worker.py")
ROOT = Path(__file__).resolve().parents[2]


def _png() -> bytes:
    """A valid 1x1 PNG."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    pixels = zlib.compress(b"\x00\xff\x00\x00")
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")
    )


@dataclass
class Pair:
    """A journal and a content store, as the worker and the CLI open them."""

    journal: str
    store: str
    store_options: dict[str, Any]
    env: dict[str, str] = field(default_factory=dict)
    cleanup: list[Any] = field(default_factory=list)

    def open_store(self, **options: Any) -> Any:
        store = open_store(self.store, **{**self.store_options, **options})
        self.cleanup.append(store.close)
        return store


@pytest.fixture(params=["sqlite+local", "postgres+s3"])
def pair(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Pair]:
    """SQLite and a local store, or PostgreSQL and S3 with the tenant index in the journal's database."""
    if request.param == "sqlite+local":
        yield Pair(str(tmp_path / "journal.sqlite"), str(tmp_path / "store"), {})
        return
    endpoint = request.getfixturevalue("s3_service")
    server = request.getfixturevalue("postgres_service")
    if endpoint is None or server is None:
        services.unavailable("PostgreSQL and an S3-compatible server are both needed")
    url, schema = services.fresh_schema_url(server)
    credentials = {"access_key_id": "test", "secret_access_key": "test"}
    made = Pair(
        url,
        f"s3://{services.S3_BUCKET}/{uuid.uuid4().hex[:12]}/store",
        {"endpoint": endpoint, "index": url, **credentials},
        env={
            "AWS_ENDPOINT_URL": endpoint,
            "AWS_ACCESS_KEY_ID": "test",
            "AWS_SECRET_ACCESS_KEY": "test",
        },
    )
    yield made
    for close in made.cleanup:
        close()
    services.drop_schema(server, schema)


def _env(pair: Pair) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LOOM_", "AWS_"))}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(WORKER.parent)])
    return {**env, **pair.env}


def _gc(pair: Pair, env: dict[str, str]) -> dict[str, Any]:
    done = subprocess.run(
        [
            *(sys.executable, "-m", "loom_nb", "store", "gc", "--ttl", "7d", "--json"),
            *("--store", pair.store, "--journal", pair.journal),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def test_a_sweep_during_a_slow_model_call_keeps_the_media_it_cites(
    pair: Pair, tmp_path: Path
) -> None:
    """gc --ttl 7d while a model call citing a 10-day-old image is in flight: the image is kept
    (pinned), an old uncited blob is reclaimed, and the next turn resolves the image again."""
    ten_days_ago = datetime.now(UTC) - timedelta(days=10)
    store = pair.open_store(clock=lambda: ten_days_ago)
    image = store.put(_png(), "alice")
    orphan = store.put(b"an old blob nobody cites", "alice")
    signals = tmp_path / "signals"
    signals.mkdir()
    spec = {
        "journal": pair.journal,
        "store": pair.store,
        "store_options": pair.store_options,
        "address": image.address,
        "size": image.size,
        "signals": str(signals),
    }
    env = _env(pair)
    worker = subprocess.Popen(
        [sys.executable, str(WORKER), json.dumps(spec)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 90
        while not (signals / "in-flight").exists():
            assert worker.poll() is None, worker.communicate()[1]
            assert time.monotonic() < deadline, "the model call never started"
            time.sleep(0.05)
        report = _gc(pair, env)  # the sweep, while the call waits on its provider
        assert orphan.address in report["reclaimed"]  # the sweep did run and reclaim
        assert image.address not in report["reclaimed"]
        assert image.address in report["pinned"]
        (signals / "go").write_text("go")
        out, err = worker.communicate(timeout=120)
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.communicate()
    assert worker.returncode == 0, err
    assert json.loads(out.splitlines()[-1]) == {
        "turn1": "ok",
        "turn2": "ok",
        "turn2_saw_image": True,
    }
    checker = pair.open_store()
    assert checker.has(image.address)
    assert not checker.has(orphan.address)
    # Both steps finished: their pins are gone, and what keeps the image now is the journal's
    # record of their inputs, as before.
    after = _gc(pair, env)
    assert image.address in after["pinned"]
    assert after["reclaimed"] == []
