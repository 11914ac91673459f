"""The cells of 03-agent-tools.ipynb: agents with tools."""

from __future__ import annotations

from cells.common import SWITCH, Cells

CELLS: Cells = [
    (
        "md",
        """# Agents with tools

`agent_loop` threads real tool calls: the model's `tool_use` parts, then one user message with a
`tool_result` per call. Every model call and tool call is a journaled step. This notebook runs
the offline demo agent: a chart tool that returns an **image by ref**, a web tool whose output is
**untrusted** (and hostile), and an email tool that needs **approval**.""",
    ),
    (
        "code",
        """import tempfile
from pathlib import Path
from loom_nb import Journal, LocalContentStore, Principal, ScriptedProvider, TranscriptView, agent_loop
from loom_nb.demo import demo_model, demo_tools, start_messages
from loom_nb.store import ResolveContext, StoreResolver

workdir = Path(tempfile.mkdtemp())
store = LocalContentStore(workdir / "store")
journal = Journal(workdir / "journal.sqlite", store=store)
me = Principal("demo")
tools = demo_tools(store, tenant="demo")
[(t.name, t.returns_media, t.untrusted, t.requires_approval) for t in tools]""",
    ),
    (
        "md",
        """The model here is scripted: it answers from what the latest tool results say. The user
attaches the memo PDF (by ref) and asks for a briefing.""",
    ),
    (
        "code",
        """provider = ScriptedProvider([demo_model] * 6)
messages = start_messages(store, tenant="demo")

async def run(approve=None):
    return await agent_loop(
        journal.execution("briefing", principal=me), provider, tools, messages,
        approve=approve, resolver=StoreResolver(store),
        context=ResolveContext(execution_id="briefing", step_id=None, principal=me),
    )

result = await run()
result.status, [call.name for call in result.tool_calls], result.pending_approvals""",
    ),
    (
        "md",
        """The run **parked**: `send_email` needs a person's decision. The transcript stops at the
assistant's call. Note the untrusted page: its forged closing tag and its instruction stay inside
the fence.""",
    ),
    ("code", """TranscriptView(result.messages, store=store, principal=me)"""),
    (
        "md",
        """Approve it. The same execution continues from the journal (completed steps are served from
the log, not run again); this would work from another process too.""",
    ),
    (
        "code",
        """calls_before = len(provider.requests)
result = await run(approve={"call_3": True})
print(result.status, "| new model calls:", len(provider.requests) - calls_before)
print(result.text)""",
    ),
    ("code", """TranscriptView(result.messages, store=store, principal=me)"""),
    (
        "md",
        """## What the model actually received

The fence the model saw around the page, from the last request the provider got:""",
    ),
    (
        "code",
        """from loom_nb import text_of
last = provider.requests[-1]
fenced = [text_of(part.content) for m in last.messages if isinstance(m.content, list)
          for part in m.content if part.type == "tool_result" and part.tool_use_id == "call_2"]
print(fenced[0])""",
    ),
    (
        "md",
        """## Declining

A declined approval becomes an error result the model can react to:""",
    ),
    (
        "code",
        """declined = await agent_loop(
    journal.execution("briefing-declined", principal=me), ScriptedProvider([demo_model] * 6),
    tools, start_messages(store, tenant="demo"), approve=lambda digest: False,
    resolver=StoreResolver(store),
    context=ResolveContext(execution_id="briefing-declined", step_id=None, principal=me),
)
declined.tool_calls[-1].status, declined.text""",
    ),
    ("md", SWITCH),
]
