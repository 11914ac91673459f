"""The main job: `loom-nb demo` runs offline, parks for approval, resumes, and writes its transcript."""

from __future__ import annotations

import io
import os
import shlex
import subprocess
import sys
import sysconfig
from pathlib import Path
from urllib.parse import urlsplit
from urllib.request import url2pathname

import pypdfium2
from PIL import Image

from loom_nb.content import ToolResultPart, text_of, to_parts
from loom_nb.demo import INJECTION, chart_png, memo_pdf, run_demo
from loom_nb.journal import Journal

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = Path(sysconfig.get_path("scripts"))


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
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert "call     chart" in out.stdout
    assert "parked   waiting for approval: send_email" in out.stdout
    assert "Briefing sent to the board." in out.stdout
    assert f"transcript: {(tmp_path / 'd' / 'demo-1.html').as_uri()}" in out.stdout
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


def _shell_env(*, activated: bool) -> dict[str, str]:
    """The environment of a shell with this interpreter's venv activated, or with it off PATH."""
    env = {k: v for k, v in os.environ.items() if k not in {"VIRTUAL_ENV", "PYTHONHOME"}}
    path = [p for p in env.get("PATH", "").split(os.pathsep) if p and Path(p) != SCRIPTS]
    if activated:
        env["VIRTUAL_ENV"] = sys.prefix
        path.insert(0, str(SCRIPTS))
    env["PATH"] = os.pathsep.join(path)
    return env


def _printed(stdout: str, label: str) -> str:
    (line,) = [line for line in stdout.splitlines() if line.strip().startswith(f"{label}: ")]
    return line.split(f"{label}: ", 1)[1]


def _demo_and_inspect(cwd: Path, *demo_args: str) -> tuple[str, list[str]]:
    """Run the demo in ``cwd``; paste its ``inspect`` line into bash, venv off and on PATH."""
    demo = subprocess.run(
        [sys.executable, "-m", "loom_nb", "demo", *demo_args],
        cwd=cwd,
        env=_shell_env(activated=False),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    command = _printed(demo.stdout, "inspect")
    shown = []
    for activated in (False, True):
        pasted = subprocess.run(
            ["bash", "-c", command],
            cwd=cwd,
            env=_shell_env(activated=activated),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert pasted.returncode == 0, (command, activated, pasted.stderr)
        shown.append(pasted.stdout)
    return demo.stdout, [command, *shown]


def test_printed_inspect_command_runs_as_pasted_with_or_without_the_venv_activated(
    tmp_path: Path,
) -> None:
    """Outside the project the demo names this venv's loom-nb by absolute path; it runs either way."""
    stdout, (command, plain, activated) = _demo_and_inspect(tmp_path)
    script = shlex.split(command)[0]
    assert Path(script).is_absolute()
    assert Path(script).parent == SCRIPTS
    assert shlex.split(command)[1:] == ["journal", "show", "demo-1"]
    assert plain == activated
    assert "completed" in plain
    assert "parked" in plain
    assert "next: the example notebooks are at https://github.com/" in stdout


def test_printed_inspect_command_from_the_project_folder_is_the_readme_form(
    tmp_path: Path,
) -> None:
    """From the checkout the command is `.venv/bin/loom-nb journal show ...`, as the README says."""
    _stdout, (command, plain, activated) = _demo_and_inspect(ROOT, "--dir", str(tmp_path / "d"))
    script = Path(shlex.split(command)[0])
    try:
        expected = str((SCRIPTS / "loom-nb").relative_to(ROOT))  # .venv/bin/loom-nb under CI
    except ValueError:
        expected = str(SCRIPTS / "loom-nb")  # a venv outside the checkout is named in full
    assert str(script) == expected
    assert shlex.split(command)[1:] == [
        "journal",
        "show",
        "demo-1",
        "--journal",
        str(tmp_path / "d" / "journal.sqlite"),
    ]
    assert plain == activated
    assert "completed" in plain


def test_printed_transcript_is_an_absolute_file_url_of_the_html_page(tmp_path: Path) -> None:
    """The transcript line is a file:// URL a browser opens from anywhere: absolute, and it exists."""
    stdout, _ = _demo_and_inspect(tmp_path)
    url = urlsplit(_printed(stdout, "transcript"))
    assert url.scheme == "file"
    page = Path(url2pathname(url.path))
    assert page.is_absolute()
    assert page == (tmp_path / ".loom" / "demo-1.html").resolve()
    assert "<html" in page.read_text(encoding="utf-8").lower()
