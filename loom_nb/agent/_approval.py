"""Approval decisions: the digest a person sees, asking for a decision, and digesting it (ADR 0120 decision 9).

A tool declared ``requires_approval`` runs only after a decision. ``approve`` is a callable (sync or
async) taking the call's digest, or a mapping of call id → decision. A decision is ``True`` /
``False`` or ``{"approved": bool, "reason": str}``; ``None`` (or a missing key) means "not decided
yet", and the run parks. Anything else is undigestible and answered with an error result, never
taken as a yes. A decision is journaled as its own step, normalized, so a replay sees the same one.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeAlias

from loom_nb.content import ToolCall
from loom_nb.errors import ConfigurationError

__all__ = ["Approver", "ask", "digest_of", "normalize_decision"]

Approver: TypeAlias = Callable[[dict[str, Any]], Any | Awaitable[Any]] | Mapping[str, Any] | None
"""Where decisions come from: a callable of the digest, a mapping of call id → decision, or None."""


def digest_of(turn: int, call: ToolCall) -> dict[str, Any]:
    """What an approver is shown: the turn, the call's id, the tool and its (screened) input."""
    return {"turn": turn, "id": call.id, "name": call.name, "input": call.input}


async def ask(approve: Approver, digest: dict[str, Any]) -> Any:
    """The raw decision for a digest, or None when none is available yet."""
    if approve is None:
        return None
    if isinstance(approve, Mapping):
        return approve.get(digest["id"])
    if not callable(approve):
        raise ConfigurationError(
            f"approve must be a callable taking the call digest or a mapping of call id to "
            f"decision, got {type(approve).__name__}.",
            code="invalid_approver",
        )
    decision = approve(digest)
    if inspect.isawaitable(decision):
        decision = await decision
    return decision


def normalize_decision(decision: Any) -> dict[str, Any]:
    """The journaled form: ``{"approved": bool, "reason": str | None}`` or ``{"undigestible": type}``."""
    if isinstance(decision, bool):
        return {"approved": decision, "reason": None}
    if isinstance(decision, Mapping) and isinstance(decision.get("approved"), bool):
        reason = decision.get("reason")
        if set(decision) <= {"approved", "reason"} and (reason is None or isinstance(reason, str)):
            return {"approved": decision["approved"], "reason": reason}
    return {"undigestible": type(decision).__name__}


def refusal_of(decision: Mapping[str, Any]) -> tuple[str, str] | None:
    """For a normalized decision: None when approved, else the error type and message."""
    if decision.get("approved") is True:
        return None
    if "undigestible" in decision:
        return (
            "undigestible_approval",
            f"the approval decision was a {decision['undigestible']}, not True/False or "
            '{"approved": bool}; the call was not run.',
        )
    reason = decision.get("reason")
    suffix = f": {reason}" if isinstance(reason, str) and reason else ""
    return "approval_declined", f"the call was declined by the approver{suffix}; it was not run."
