"""The cells of 02-multimodal.ipynb: images, PDFs and audio by reference through the content store."""

from __future__ import annotations

from cells.common import SWITCH, Cells

CELLS: Cells = [
    (
        "md",
        """# Images, PDFs and audio by reference

Media goes into a **content store** and messages carry its **address** (`sha256:…`), not its
bytes. The bytes are fetched at the last moment, just before the model call, and only for a
reader whose tenant stored them.""",
    ),
    (
        "code",
        """import io, math, struct, tempfile, wave
from pathlib import Path
from loom_nb import LocalContentStore, MediaUpload, Principal
from loom_nb.demo import chart_png, memo_pdf

workdir = Path(tempfile.mkdtemp())
store = LocalContentStore(workdir / "store")
upload = MediaUpload(store, tenant="me")
upload""",
    ),
    (
        "md",
        """Pick files with the upload button above: they are sent in chunks (large PDFs too) and
stored. Files already on the server go in with `add_path`. Here, a chart, a memo and a tone:""",
    ),
    (
        "code",
        """def tone(seconds=0.5, hz=440, rate=8000):
    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setnchannels(1); w.setsampwidth(2); w.setframerate(rate)
        w.writeframes(b"".join(struct.pack("<h", int(8000 * math.sin(2 * math.pi * hz * i / rate)))
                               for i in range(int(seconds * rate))))
    return out.getvalue()

(workdir / "chart.png").write_bytes(chart_png("revenue"))
(workdir / "memo.pdf").write_bytes(memo_pdf())
(workdir / "tone.wav").write_bytes(tone())
for name in ["chart.png", "memo.pdf", "tone.wav"]:
    upload.add_path(workdir / name)
[(part.type, part.media_type, part.source.ref.size) for part in upload.parts]""",
    ),
    (
        "code",
        """from loom_nb import Message, TextPart, TranscriptView

me = Principal("me")
question = Message(role="user", content=[TextPart(text="Do the chart and the memo agree?"), *upload.parts])
TranscriptView([question], store=store, principal=me)""",
    ),
    (
        "md",
        """The message itself is small: addresses, not bytes. That is what gets journaled.""",
    ),
    (
        "code",
        """stored = sum(part.source.ref.size for part in upload.parts)
print(f"message: {len(question.model_dump_json())} bytes of JSON; media in the store: {stored} bytes")""",
    ),
    (
        "md",
        """## Who may read a blob

Identical bytes are stored once, however many tenants put them; each tenant is recorded. A
viewer from another tenant sees the ref as unavailable, never someone else's bytes.""",
    ),
    (
        "code",
        """chart_ref = store.put(chart_png("revenue"), "team-b")
print(sorted(store.tenants(chart_ref.address)))
TranscriptView([question], store=store, principal=Principal("intruder"))""",
    ),
    (
        "md",
        """## A conversation about media

`create_llm_effect` turns a model call into a journaled step: guard, capability check, then the
refs are resolved through a `StoreResolver` (authorized by tenant) right before the provider
call. The journal keeps the addresses only.""",
    ),
    (
        "code",
        """from loom_nb import Journal, ScriptedProvider, create_llm_effect, LlmRequest
from loom_nb.store import StoreResolver

provider = ScriptedProvider([{"text": "Yes: the chart shows revenue rising to 4.1M in Q3, as the memo says. The tone is a 440 Hz beep."}])
journal = Journal(workdir / "journal.sqlite", store=store)
run = journal.execution("media-chat", principal=me)
ask = create_llm_effect(provider, resolve_content=StoreResolver(store))
answer = await ask(run, "ask", LlmRequest(messages=[question]))
TranscriptView([question, Message(role="assistant", content=answer.content)], store=store, principal=me)""",
    ),
    (
        "code",
        """sent = provider.requests[0].messages[0].content
[(part.type, part.source.kind) for part in sent if part.type != "text"]""",
    ),
    (
        "md",
        """The provider received the bytes inline (`data`), while the journaled step holds only the
address and size of each:""",
    ),
    (
        "code",
        """step = next(e for e in journal.events("media-chat") if e.kind == "step_completed")
step.payload["input"]["messages"][0]["content"][1]["source"]""",
    ),
    (
        "md",
        """## Capabilities per model

Audio to a model that does not take audio is refused before any I/O:""",
    ),
    (
        "code",
        """from loom_nb import AnthropicProvider, LoomError

claude = AnthropicProvider("claude-sonnet-4-5", api_key="not-used: refused before any I/O")
try:
    await claude.complete(LlmRequest(messages=[question]))
except LoomError as error:
    print(error.code, "-", error.message)""",
    ),
    ("md", SWITCH),
]
