"""The main job: `loom-nb demo` runs offline, parks for approval, resumes, and writes its transcript."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pypdfium2
from PIL import Image

from loom_nb.content import ToolResultPart, text_of, to_parts
from loom_nb.demo import INJECTION, chart_png, memo_pdf, run_demo
from loom_nb.journal import Journal


async def test_demo_parks_resumes_and_completes(tmp_path: Path) -> None:
    """The demo run parks on send_email, resumes the same execution with approval, and completes."""
    lines: list[str] = []
    run = await run_demo(tmp_path, out=lines.append)
    assert run.parked_first
    assert run.result.status == "completed"
    assert [c.name for c in run.result.tool_calls] == ["chart", "web_fetch", "send_email"]
    assert all(c.status == "ok" for c in run.result.tool_calls)
    assert "Briefing sent" in run.result.text
    assert any("parked" in line and "send_email" in line for line in lines)
    assert str(run.html_path) in "\n".join(lines)


async def test_demo_transcript_fences_the_untrusted_page_and_embeds_media(tmp_path: Path) -> None:
    """The HTML page shows the chart and PDF as images and the hostile page inside a fence."""
    run = await run_demo(tmp_path, out=lambda _line: None)
    html = run.html_path.read_text(encoding="utf-8")
    assert "untrusted · tool:web_fetch" in html
    assert html.count("data:image/png;base64,") >= 2  # chart thumbnail + PDF page
    assert "<script" not in html.lower()
    results = [
        p for m in run.result.messages for p in to_parts(m.content) if isinstance(p, ToolResultPart)
    ]
    fetched = next(p for p in results if p.tool_use_id == "call_2")
    assert INJECTION in text_of(fetched.content)
    assert fetched.origin == "tool:web_fetch" or not isinstance(fetched.content, str)


async def test_demo_is_journaled_and_a_second_run_is_a_new_execution(tmp_path: Path) -> None:
    """Every run is journaled under its own execution id; steps are recorded once each."""
    first = await run_demo(tmp_path, out=lambda _line: None)
    second = await run_demo(tmp_path, out=lambda _line: None)
    assert (first.execution_id, second.execution_id) == ("demo-1", "demo-2")
    journal = Journal(first.journal_path)
    try:
        steps = [e.step_id for e in journal.events("demo-1") if e.kind == "step_completed"]
        assert len(steps) == len(set(steps)) == 8
        kinds = [e.kind for e in journal.events("demo-1")]
        assert "parked" in kinds
        assert "resumed" in kinds
        assert kinds[-1] == "completed"
    finally:
        journal.close()


async def test_declining_the_email_is_an_error_result_the_model_answers(tmp_path: Path) -> None:
    """Declining the approval gives send_email an is_error result and the model says so."""
    run = await run_demo(tmp_path, approve=False, out=lambda _line: None)
    assert run.result.status == "completed"
    assert run.result.tool_calls[-1].status == "declined"
    assert "not sent" in run.result.text


def test_demo_media_are_real_files() -> None:
    """The memo is a one-page PDF pdfium opens and the chart a PNG Pillow decodes."""
    pdf = pypdfium2.PdfDocument(memo_pdf())
    assert len(pdf) == 1
    image = Image.open(io.BytesIO(chart_png("revenue", {"a": 1.0, "b": 2.0})))
    assert image.format == "PNG"
    assert image.size == (360, 220)


def test_cli_demo_prints_progress_and_the_html_path(tmp_path: Path) -> None:
    """`loom-nb demo` streams the model's text, reports the park and prints the transcript path."""
    out = subprocess.run(
        [sys.executable, "-m", "loom_nb", "demo", "--dir", str(tmp_path / "d")],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert "call     chart" in out.stdout
    assert "parked   waiting for approval: send_email" in out.stdout
    assert "Briefing sent to the board." in out.stdout
    assert f"transcript: {tmp_path / 'd' / 'demo-1.html'}" in out.stdout
    assert (
        f"loom-nb journal show demo-1 --journal {tmp_path / 'd' / 'journal.sqlite'}" in out.stdout
    )
    assert "jupyter lab notebooks/" in out.stdout
    assert (tmp_path / "d" / "demo-1.html").exists()


def test_cli_demo_defaults_to_where_the_store_and_journal_commands_look(tmp_path: Path) -> None:
    """With no --dir the demo writes .loom/, so `loom-nb journal ls` finds the run with no flags."""
    run = [sys.executable, "-m", "loom_nb"]
    subprocess.run([*run, "demo"], cwd=tmp_path, capture_output=True, timeout=120, check=True)
    listed = subprocess.run(
        [*run, "journal", "ls"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert listed.stdout.startswith("demo-1\tcompleted")
    stored = subprocess.run(
        [*run, "store", "ls"], cwd=tmp_path, capture_output=True, text=True, timeout=60, check=True
    )
    assert len(stored.stdout.splitlines()) == 2  # the memo PDF and the chart
    assert (tmp_path / ".loom" / "demo-1.html").exists()


def test_journal_html_renders_a_recorded_run_with_its_media(tmp_path: Path) -> None:
    """`loom-nb journal html` writes the run's transcript, media shown to the run's own tenant only."""
    run = [sys.executable, "-m", "loom_nb"]
    subprocess.run([*run, "demo"], cwd=tmp_path, capture_output=True, timeout=120, check=True)
    page = tmp_path / "run.html"
    subprocess.run(
        [*run, "journal", "html", "demo-1", "-o", str(page)],
        cwd=tmp_path,
        capture_output=True,
        timeout=60,
        check=True,
    )
    html = page.read_text(encoding="utf-8")
    assert "untrusted · tool:web_fetch" in html
    assert "data:image/png;base64," in html
    assert "unavailable" not in html
    stranger = tmp_path / "stranger.html"
    subprocess.run(
        [*run, "journal", "html", "demo-1", "-o", str(stranger), "--tenant", "someone-else"],
        cwd=tmp_path,
        capture_output=True,
        timeout=60,
        check=True,
    )
    other = stranger.read_text(encoding="utf-8")
    assert "unavailable" in other
    assert "data:image/png;base64," not in other
