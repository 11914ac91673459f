"""Benchmark: the first Chat turn of a fresh process, against a process that only imports loom_nb.

Each figure is the wall time of a fresh ``python`` subprocess, from spawn to exit (what a user
waits for when a kernel starts and runs its first cell), median of ``ROUNDS`` runs interleaved so
that a load spike hits every kind alike:

- python: the interpreter alone (``pass``), for scale;
- import: ``import loom_nb`` and nothing else (the baseline of the ratio);
- floor: ``import loom_nb`` plus the third-party packages a turn cannot run without (pydantic,
  which the content model is made of; httpx, which every HTTP provider sends with; sqlite3, the
  journal's database; asyncio, the loop the turn runs on), imported and nothing else: no loom_nb
  code below the package facade runs;
- floor in use: the floor's packages, each then used once the way any journaled HTTP turn must
  use it, with no loom_nb code: a first pydantic model defined and one instance validated (pydantic
  builds its model machinery on the first model, not on import), an ``httpx.AsyncClient`` made
  (its TLS context) that sends one request to a ``MockTransport`` inside ``asyncio.run`` (the
  loop), and a SQLite file opened, a table made and one row committed;
- turn: ``import loom_nb``, then a ``Chat`` with every feature on (a file journal, a content
  store, a function tool whose input is validated against its JSON Schema, prompt caching, cost)
  on an ``AnthropicProvider`` whose ``httpx.MockTransport`` serves a recorded Anthropic answer,
  and ONE turn, ``await chat("...")``;
- plain turn: the same chat with no tool (the first cell of most notebooks: ``await
  chat("...")``): ``jsonschema`` is imported when the first tool is defined, so it is not here;
- tool run: the same chat, but the turn is ``chat.run(...)`` where the recorded answer calls the
  tool, so the tool's input is validated against its schema and the tool runs, then a second
  recorded answer ends the run (two model calls).

Every child reads compiled bytecode, as from an installed wheel (pip compiles it on install): the
children share a private bytecode cache (``PYTHONPYCACHEPREFIX``, a temporary folder, written by
the warm-up runs) whatever ``PYTHONDONTWRITEBYTECODE`` says, so no figure is the compiler's time
on loom_nb's source (without the cache that was most of a first turn in a source checkout).

Printed: milliseconds per kind, wall time and the child's CPU time (user + system, which a
loaded machine inflates far less than wall time: on a shared 2-core machine, judge by it), the
ratio turn / import (target at most 4x), the ratio to that target, and the floor bound
floor / import: no first turn of any implementation on top of these packages beats it on this
machine, so when it is over 4x the target is below what the dependencies cost to import. The
tighter bound floor in use / import adds what using them once costs; turn / floor in use is what
loom_nb's own first turn adds on top of it (its imports, models, checks, journal, cost). Then
where a first turn's CPU time goes: one child process times each step in order (``BREAKDOWN``),
medians of the rounds. Run: ``python benchmarks/bench_first_turn.py`` (about half a minute;
``--rounds N`` to change the count).
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml
from _report import Row, emit, quick

ROOT = Path(__file__).resolve().parents[1]
RECORDING = ROOT / "tests/fixtures/provider-traffic/anthropic/tool-roundtrip-nonstream.yaml"
ROUNDS = 3 if quick() else 9
TARGET = 4.0

_HEAD = """
import asyncio, json, os, sys
import loom_nb
from loom_nb import Chat, Journal, LocalContentStore, ToolDefinition
from loom_nb.providers import AnthropicProvider
import httpx

bodies = [b.encode() for b in json.loads(os.environ["BENCH_BODIES"])]
served = []

def answer(request):
    body = bodies[min(len(served), len(bodies) - 1)]
    served.append(request)
    return httpx.Response(200, content=body, headers={"content-type": "application/json"})

"""

_TOOL = """
weather = ToolDefinition(
    "get_weather",
    "Get the current weather for a city.",
    fn=lambda value: f"Sunny, 22C in {value['city']}",
    input_schema={
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
        "additionalProperties": False,
    },
)
tools = [weather]
"""

_MAKE = """
here = os.environ["BENCH_DIR"]
chat = Chat(
    AnthropicProvider(
        "claude-sonnet-4-5",
        api_key="sk-test",
        http_client=httpx.AsyncClient(transport=httpx.MockTransport(answer)),
    ),
    tools=tools,
    journal=Journal(os.path.join(here, "journal.sqlite")),
    store=LocalContentStore(os.path.join(here, "store")),
    id="first",
)
"""

_CHAT = _HEAD + _TOOL + _MAKE
"""The chat of a first turn: every feature on, a schema-checked tool included."""

_TURN = """
reply = asyncio.run(chat("What's the weather in Paris?"))
assert reply.content and chat.cost is not None, (reply, chat.cost)
"""

SCRIPTS = {
    "python": "pass",
    "import": "import loom_nb",
    "floor": "import loom_nb, pydantic, httpx, sqlite3, asyncio",
    "floor in use": """
import loom_nb, pydantic, httpx, sqlite3, asyncio, os

class First(pydantic.BaseModel):
    text: str

First.model_validate({"text": "hi"})

async def send():
    transport = httpx.MockTransport(lambda request: httpx.Response(200, json={"text": "hi"}))
    async with httpx.AsyncClient(transport=transport) as client:
        return (await client.post("https://example.invalid/", json={"q": 1})).json()

assert asyncio.run(send()) == {"text": "hi"}
db = sqlite3.connect(os.path.join(os.environ["BENCH_DIR"], "floor.sqlite"))
db.execute("CREATE TABLE events (seq INTEGER PRIMARY KEY, payload TEXT)")
db.execute("INSERT INTO events (payload) VALUES (?)", ('{"text": "hi"}',))
db.commit()
db.close()
""",
    "turn": _CHAT + _TURN,
    "plain turn": _HEAD + "tools = []\n" + _MAKE + _TURN,
    "tool run": _CHAT
    + """
result = asyncio.run(chat.run("What's the weather in Paris?"))
assert result.status == "completed" and len(served) == 2, (result.status, len(served))
""",
}


def _bodies(first_calls_tool: bool) -> str:
    """The recorded Anthropic answers, as JSON text: the tool call then the text, or the text."""
    interactions = yaml.safe_load(RECORDING.read_text(encoding="utf-8"))["interactions"]
    answers = [json.dumps(i["response"]["parsed_body"]) for i in interactions]
    return json.dumps(answers if first_calls_tool else answers[1:])


_BREAKDOWN_HEAD = """
import time
_steps = [["python starts", time.process_time()]]
_last = time.process_time()

def step(name):
    global _last
    now = time.process_time()
    _steps.append([name, now - _last])
    _last = now

import loom_nb
step("import loom_nb")
import asyncio, json, os, sys, sqlite3, httpx, pydantic
step("floor packages: pydantic, httpx, sqlite3, asyncio")
class _First(pydantic.BaseModel):
    x: int
_First(x=1)
step("pydantic's model machinery (a first, one-field model)")
from loom_nb.content import Message
step("loom_nb.content (the part models)")
from loom_nb.guard import guard_request
from loom_nb.capabilities import Capabilities
step("loom_nb.guard, loom_nb.capabilities")
from loom_nb.store import LocalContentStore
step("loom_nb.store (the local store)")
from loom_nb.providers import AnthropicProvider
step("loom_nb.providers (Anthropic)")
from loom_nb.journal import Journal
step("loom_nb.journal (the SQLite journal)")
from loom_nb.agent import ToolDefinition
step("loom_nb.agent: ToolDefinition (jsonschema waits for the first tool)")
from loom_nb.chat import Chat
step("loom_nb.chat: Chat (with the agent loop, the journaled effect)")
"""

BREAKDOWN = (
    _BREAKDOWN_HEAD
    + _CHAT
    + """
step("the Chat: its tool (jsonschema imported, the schema checked), journal, store")
reply = asyncio.run(chat("What's the weather in Paris?"))
step("the turn: one recorded HTTP answer, journaled")
assert reply.content and chat.cost is not None, (reply, chat.cost)
step("its cost (genai-prices imported, its price table loaded)")
import gc
gc.collect()
step("one full collection of this heap (the exit runs such collections)")
print(json.dumps(_steps))
"""
)
"""One fresh process that times (CPU) each step of a first turn in order and prints them."""


def _run(kind: str, env: dict[str, str]) -> tuple[float, float, str]:
    """(wall seconds, CPU seconds, stdout) of one fresh process running ``kind``."""
    script = BREAKDOWN if kind == "breakdown" else SCRIPTS[kind]
    with tempfile.TemporaryDirectory() as here:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-c", script],
            env={**env, "BENCH_DIR": here},
            cwd=here,
            capture_output=True,
            text=True,
            check=False,
        )
        elapsed = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{kind} failed:\n{done.stderr}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return elapsed, cpu, done.stdout


def _print_breakdown(samples: list[tuple[float, str]]) -> None:
    """The median CPU milliseconds of each step of a first turn, with the running total; the
    process's CPU time past the last step is the interpreter's exit (its final collections)."""
    runs = []
    for cpu, out in samples:
        steps = json.loads(out)
        runs.append([*steps, ["python exits", cpu - sum(ms for _, ms in steps)]])
    print(f"where a first turn's CPU goes (one process, steps in order, medians of {len(runs)}):")
    total = 0.0
    for index, (name, _) in enumerate(runs[0]):
        ms = statistics.median(run[index][1] for run in runs) * 1e3
        total += ms
        print(f"  {ms:7.1f} ms  {total:7.1f} ms  {name}")


def main() -> int:
    rounds = int(sys.argv[sys.argv.index("--rounds") + 1]) if "--rounds" in sys.argv else ROUNDS
    with tempfile.TemporaryDirectory() as bytecode:
        return _measure(rounds, bytecode)


def _measure(rounds: int, bytecode: str) -> int:
    base_env = {
        **{k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"},
        "PYTHONPATH": os.environ.get("PYTHONPATH") or str(ROOT),
        "PYTHONPYCACHEPREFIX": bytecode,  # compiled once by the warm-up runs, read by the rest
    }
    envs = dict.fromkeys(SCRIPTS, base_env)
    envs["turn"] = {**base_env, "BENCH_BODIES": _bodies(first_calls_tool=False)}
    envs["plain turn"] = envs["turn"]
    envs["tool run"] = {**base_env, "BENCH_BODIES": _bodies(first_calls_tool=True)}
    envs["breakdown"] = envs["turn"]
    walls: dict[str, list[float]] = {kind: [] for kind in SCRIPTS}
    cpus: dict[str, list[float]] = {kind: [] for kind in SCRIPTS}
    steps: list[tuple[float, str]] = []
    for kind in envs:  # one warm-up each: it compiles the bytecode and warms the page cache
        _run(kind, envs[kind])
    for _ in range(rounds):
        for kind in SCRIPTS:
            wall, cpu, _out = _run(kind, envs[kind])
            walls[kind].append(wall)
            cpus[kind].append(cpu)
        _wall, cpu, out = _run("breakdown", envs["breakdown"])
        steps.append((cpu, out))
    for kind in SCRIPTS:
        print(
            f"{kind:>12}: wall {statistics.median(walls[kind]) * 1e3:8.1f} ms, CPU "
            f"{statistics.median(cpus[kind]) * 1e3:8.1f} ms  (medians of {rounds})"
        )
    rows: list[Row] = []
    for label, samples in (("wall", walls), ("CPU", cpus)):
        median = {kind: statistics.median(times) for kind, times in samples.items()}
        base = median["import"]
        bound = median["floor"] / base
        used = median["floor in use"] / base
        print(f"{label}: floor bound floor / import = {bound:.2f}x (the dependencies, imported)")
        print(
            f"{label}: floor in use / import = {used:.2f}x (the dependencies, imported and used "
            "once as a turn must)"
        )
        rows.append(Row(f"{label}: floor bound, floor / import", bound))
        for kind in ("turn", "tool run"):
            ratio = median[kind] / base
            print(
                f"{label}: {kind} {ratio:.2f}x import, target <= {TARGET:.0f}x: ratio to target "
                f"{ratio / TARGET:.2f} ({'met' if ratio <= TARGET else 'NOT met'}); "
                f"{ratio / bound:.2f}x the floor bound, {ratio / used:.2f}x the floor in use"
            )
            rows.append(Row(f"{label}: {kind} / import", ratio, TARGET, "<=", reach=bound))
            rows.append(
                Row(f"{label}: {kind} / import, vs floor in use", ratio, used, kind="bound")
            )
        ratio = median["plain turn"] / base
        print(
            f"{label}: plain turn (the same chat with no tool: jsonschema is never imported) "
            f"{ratio:.2f}x import, {ratio / used:.2f}x the floor in use"
        )
        rows.append(
            Row(f"{label}: plain turn / import, vs floor in use", ratio, used, kind="bound")
        )
        if bound > TARGET:
            print(
                f"{label}: the {TARGET:.0f}x target is below the floor bound ({bound:.2f}x): "
                "importing the dependencies alone takes longer than that on this machine"
            )
    _print_breakdown(steps)
    emit(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
