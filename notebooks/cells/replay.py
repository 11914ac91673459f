"""The cells of 04-replay.ipynb: replaying a recorded run."""

from __future__ import annotations

from cells.common import SWITCH, Cells

CELLS: Cells = [
    (
        "md",
        """# Replaying a recorded run

`recordings/demo-run.jsonl` is a journal recording of the demo agent, committed as text. Import
it into a journal and step through it turn by turn: no API key, no model call. The media it
cites (a chart and a PDF) are committed next to it and put into a local store.""",
    ),
    (
        "code",
        """import tempfile
from pathlib import Path
from loom_nb import Journal, LocalContentStore, Principal, ReplayStepper

workdir = Path(tempfile.mkdtemp())
store = LocalContentStore(workdir / "store")
for blob in sorted(Path("recordings/media").iterdir()):
    store.put(blob.read_bytes(), "demo")
journal = Journal(workdir / "journal.sqlite", store=store)
run_id = journal.import_jsonl("recordings/demo-run.jsonl")
run_id""",
    ),
    (
        "md",
        """Use the buttons or the slider. Each turn shows the transcript as the model saw it, its
response, the tool calls and results, the stop reason and usage, and what changed since the
previous turn.""",
    ),
    (
        "code",
        """stepper = ReplayStepper(journal, run_id, store=store, principal=Principal("demo"))
stepper""",
    ),
    (
        "code",
        """[(t.index, t.response.stop_reason, [c.name for c in t.response.tool_calls]) for t in stepper.turns]""",
    ),
    (
        "md",
        """## Replay is exact

Running the same agent again on the recorded execution serves every step from the log. A
provider with an **empty script** proves it: any live model call would fail.""",
    ),
    (
        "code",
        """from loom_nb import ScriptedProvider, agent_loop
from loom_nb.demo import demo_tools, start_messages

empty = ScriptedProvider([])
replayed = await agent_loop(journal.execution(run_id), empty,
                            demo_tools(store, tenant="demo"), start_messages(store, tenant="demo"))
replayed.status, len(empty.requests), replayed.text[:60]""",
    ),
    (
        "md",
        """Record your own: run an agent on a `Journal`, then `journal.export_jsonl(execution_id,
"my-run.jsonl")` (or `loom-nb journal export ID -o my-run.jsonl`) and commit the file.""",
    ),
    ("md", SWITCH),
]
