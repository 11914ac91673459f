"""What replay does when the code and the log disagree (ADR 0120 decision 10, issue 15).

Replay matches steps by id, position by position (decision 10): the code asking for another
step id (or a park, or a completion) than the log recorded at a position has diverged.

Input hashes (issue 15). Each journaled step records ``input_hash``, the ``sha256:`` of its
input's canonical JSON (a model call records the hash of its whole request, see
``_requests``). On top of matching ids, a completed step asked with an input whose hash differs
from the recorded one is not served: a prompt edited in a notebook and re-run under the same
execution id raises ``ReplayDivergenceError`` (code ``input_changed``) instead of silently
returning the old answer, unless the execution was opened with ``divergence="ignore_inputs"``. A
step journaled before hashes existed has none and is served by id alone, so old journals and
recordings replay.

The execution's ``divergence`` setting says which: ``"fail"`` raises, ``"ignore_inputs"`` serves
a changed input's recorded step anyway (another step id still raises), and ``"warn"`` journals a
``divergence`` event (its payload built here) and goes on live, superseding the log from there.
"""

from __future__ import annotations

from typing import Literal

from loom_nb.errors import JournalError, ReplayDivergenceError
from loom_nb.journal._codec import dumps

__all__ = [
    "Divergence",
    "changed_input",
    "changed_input_payload",
    "check_divergence",
    "diverged",
    "diverged_payload",
]

Divergence = Literal["fail", "ignore_inputs", "warn"]


def check_divergence(divergence: object) -> None:
    """Refuse a ``divergence`` setting that is not one of the three."""
    if divergence not in ("fail", "ignore_inputs", "warn"):
        raise JournalError(
            f"divergence must be 'fail', 'ignore_inputs' or 'warn', not {divergence!r}.",
            code="invalid_argument",
        )


def diverged(execution_id: str, position: int, expected: str, actual: str) -> ReplayDivergenceError:
    """The log recorded ``expected`` at ``position`` but the code asked for ``actual``."""
    return ReplayDivergenceError(
        f"replay of execution {execution_id!r} diverged at position {position}: the log "
        f"recorded {expected!r} but the code asked for {actual!r}. Step ids must come out "
        "the same on every run; if the code changed on purpose, open the execution with "
        "divergence='warn' (the log is superseded from here), fork it at the last step "
        "that still matches (execution.fork(step, new_id)), or start a new execution id.",
        expected=expected,
        actual=actual,
        position=position,
        execution_id=execution_id,
    )


def diverged_payload(expected: str, actual: str) -> str:
    """The payload of the ``divergence`` event journaled in warn mode for another step id."""
    return dumps({"actual": actual, "expected": expected})


def changed_input(
    execution_id: str, step_id: str, position: int, expected: str, actual: str
) -> ReplayDivergenceError:
    """Step ``step_id`` was recorded with input hash ``expected`` and is now asked with ``actual``."""
    return ReplayDivergenceError(
        f"replay of execution {execution_id!r}: step {step_id!r} at position {position} was "
        f"recorded with another input (hash {expected[:19]}..., now {actual[:19]}...), "
        "so its recorded output answers a different question. To run the changed step, "
        "start a new execution id, or fork this one at that step "
        f"(execution.fork({step_id!r}, new_id)); to replay the old answers anyway, open "
        "it with divergence='ignore_inputs'.",
        code="input_changed",
        expected=expected,
        actual=actual,
        step_id=step_id,
        position=position,
        execution_id=execution_id,
    )


def changed_input_payload(step_id: str, expected: str, actual: str) -> str:
    """The payload of the ``divergence`` event journaled in warn mode for a changed input."""
    return dumps(
        {"actual": step_id, "expected": step_id, "input_hash": actual, "recorded": expected}
    )
