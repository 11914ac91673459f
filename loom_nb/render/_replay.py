"""Render-ready views and static HTML of a recorded run's turns (what the ReplayStepper shows).

``turn_view`` is one turn as JSON for the widget's front end: the transcript as the model saw it
(the same message views TranscriptView draws), the response card, each tool call with its result,
stop reason, usage and what changed since the previous turn. ``replay_html`` is the static form
(saved notebooks, GitHub): the final transcript and a table of turns, escaped, with only the
inline styles JupyterLab's sanitizer keeps (no ``<style>``, no ``id``, no script).
"""

from __future__ import annotations

from loom_nb.content import Message, assistant_message_of
from loom_nb.render._api import html_of_views, transcript_header, transcript_views
from loom_nb.render._html import STYLE, esc
from loom_nb.render._source import Transcript
from loom_nb.render._turns import TurnRecord, outcome_text
from loom_nb.render._view import RenderContext, View, message_view, part_view, text_view

__all__ = ["final_transcript", "replay_html", "replay_title", "turn_view"]

_CELL = STYLE["cell"]


def turn_view(record: TurnRecord, count: int, ctx: RenderContext) -> View:
    """One turn as a JSON view for the stepper's front end (strings are set as text there)."""
    transcript = Transcript(
        list(record.request.messages),
        record.request.system,
        [tool.name for tool in record.request.tools],
    )
    messages = transcript_views(transcript, ctx)
    response: View | None = None
    if record.response is not None:
        reply = assistant_message_of(record.response)
        ctx.learn_tools([reply])
        response = message_view(reply, len(transcript.messages), ctx)
    tools: list[View] = []
    for number, call in enumerate(record.tools):
        result: View | None = None
        if call.result is not None:
            result = part_view(call.result, ctx, key=f"r{number}")
        elif call.outcome is not None:
            result = text_view(outcome_text(call.outcome), ctx)
        tools.append(
            {
                "id": call.id,
                "name": call.name,
                "input": outcome_text(call.input),
                "status": call.status,
                "result": result,
            }
        )
    error = record.error
    return {
        "index": record.index,
        "count": count,
        "label": f"turn {record.index + 1} of {count}",
        "step_id": record.step_id,
        "header": transcript_header(transcript),
        "messages": messages,
        "response": response,
        "tools": tools,
        "stop_reason": record.stop_reason,
        "usage": _usage(record),
        "latency": latency_text(record.latency_s),
        "changes": record.changes,
        "error": None
        if error is None
        else f"{error.get('code') or error.get('type')}: {error.get('message')}",
    }


def latency_text(seconds: float | None) -> str:
    """A turn's latency as the transcript writes it (``1.2 s``, ``85 ms``); ``""`` when unknown."""
    if seconds is None:
        return ""
    return f"{seconds:.1f} s" if seconds >= 0.1 else f"{round(seconds * 1000)} ms"


def _usage(record: TurnRecord) -> str:
    tokens_in, tokens_out = record.usage
    if tokens_in == 0 and tokens_out == 0:
        return "not reported"  # offline providers report none; "0 in · 0 out" reads like a bug
    response = record.response
    cached = (
        f" ({response.usage.cache_read_tokens} cached)"
        if response is not None and response.usage.cache_read_tokens
        else ""
    )
    via = f" · via {response.provider}" if response is not None and response.provider else ""
    return f"{tokens_in} in{cached} · {tokens_out} out{via}"


def final_transcript(records: list[TurnRecord]) -> Transcript:
    """The last turn's request with its response appended (empty without turns)."""
    if not records:
        return Transcript()
    last = records[-1]
    messages: list[Message] = list(last.request.messages)
    if last.response is not None:
        messages.append(assistant_message_of(last.response))
    return Transcript(messages, last.request.system, [tool.name for tool in last.request.tools])


def replay_title(execution_id: str, records: list[TurnRecord]) -> str:
    """The stepper's one-line title: execution and turn count."""
    count = len(records)
    return f"replay · {execution_id} · {count} turn{'s' if count != 1 else ''}"


def replay_html(execution_id: str, records: list[TurnRecord], ctx: RenderContext) -> str:
    """The static fallback: a title, the final transcript, then a table of every turn."""
    final = final_transcript(records)
    transcript = html_of_views(transcript_header(final), transcript_views(final, ctx))
    head = "".join(
        f'<th style="{_CELL}">{name}</th>'
        for name in ("turn", "step", "stop reason", "tool calls", "usage", "changes")
    )
    rows = "".join(_row(record) for record in records)
    empty = (
        ""
        if records
        else f'<div style="{STYLE["meta"]}">no model calls were recorded in this execution</div>'
    )
    return (
        f'<div class="loom-replay" style="{STYLE["transcript"]}">'
        f'<div class="loom-header" style="{STYLE["role"]}">{esc(replay_title(execution_id, records))}</div>'
        f"{transcript}"
        f'<table class="loom-turns" style="border-collapse:collapse;font-size:12px;margin:6px 0">'
        f"<thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>{empty}</div>"
    )


def _row(record: TurnRecord) -> str:
    calls = ", ".join(f"{call.name} {call.id} ({call.status})" for call in record.tools) or "none"
    cells = (
        str(record.index + 1),
        record.step_id,
        record.stop_reason,
        calls,
        _usage(record),
        record.changes,
    )
    return "<tr>" + "".join(f'<td style="{_CELL}">{esc(cell)}</td>' for cell in cells) + "</tr>"
