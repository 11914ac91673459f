"""A kernel's life in one process, for the resume tests: plain synchronous code, no event loop.

``python resume_worker.py record JOURNAL`` talks to a chat and parks a run for approval, then
exits. ``python resume_worker.py resume JOURNAL`` is the next kernel: it resumes the chat,
prints what came back, approves the parked call and sends one more message, printing JSON
with the provider calls made. Both use the synchronous API (``sync``, ``run_sync``,
``approve_sync``) from a script, where no event loop runs.
"""

from __future__ import annotations

import asyncio
import json
import sys

from loom_nb import Chat, Journal, ScriptedProvider, tool

CHAT_ID = "kernel-chat"


@tool(requires_approval=True)
def send_email(to: str, body: str) -> str:
    """Send an email.

    Args:
        to: The address.
        body: The text.
    """
    return f"sent to {to}"


def record(journal: Journal) -> dict[str, object]:
    """The first kernel: one turn, then a run that parks on the email."""
    provider = ScriptedProvider(
        [
            {"text": "Hello from kernel one.", "usage": {"input_tokens": 11, "output_tokens": 4}},
            {
                "tool_calls": [
                    {"id": "c1", "name": "send_email", "input": {"to": "bo", "body": "hi"}}
                ],
                "usage": {"input_tokens": 20, "output_tokens": 6},
            },
        ]
    )
    chat = Chat(provider, tools=[send_email], journal=journal, id=CHAT_ID, system="Be brief.")
    chat.sync("hello")
    result = chat.run_sync("email bo")
    return {"status": result.status, "calls": len(provider.requests)}


def resume(journal: Journal) -> dict[str, object]:
    """The second kernel: resume, decide the parked call, go on live."""
    provider = ScriptedProvider(
        [
            {"text": "Sent.", "usage": {"input_tokens": 30, "output_tokens": 2}},
            {"text": "Anything else?", "usage": {"input_tokens": 40, "output_tokens": 3}},
        ]
    )
    chat = Chat.resume(CHAT_ID, provider, journal=journal, tools=[send_email])
    seen = {
        "history": [m.role for m in chat.history],
        "pending": [d["id"] for d in chat.pending_approvals],
        "usage": [chat.usage.input_tokens, chat.usage.output_tokens],
        "system": chat.system,
        "calls_after_resume": len(provider.requests),
    }
    result = chat.approve_sync(True)
    reply = chat.sync("thanks")
    seen.update(
        status=result.status,
        text=result.text,
        reply=reply.content,
        calls=len(provider.requests),
        turns=len(chat.turns),
        loop_running=_loop_running(),
    )
    return seen


def _loop_running() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


if __name__ == "__main__":
    mode, target = sys.argv[1], sys.argv[2]
    with Journal(target) as opened:
        out = record(opened) if mode == "record" else resume(opened)
    print(json.dumps(out))
