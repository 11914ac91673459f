"""Who an execution runs for, as journaled in its ``execution_started`` event.

The principal (``loom_nb.store.Principal``: a tenant, optionally a subject) is recorded when an
execution starts and read back when it is opened again, so a recorded run keeps the tenant its
content reads are authorized for; a fork copies it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from loom_nb.errors import JournalError

if TYPE_CHECKING:
    from loom_nb.store import Principal

__all__ = ["principal_from_json", "principal_to_json"]


def principal_to_json(principal: Principal | None) -> dict[str, Any] | None:
    """The JSON form of a principal journaled in ``execution_started``."""
    if principal is None:
        return None
    tenant = getattr(principal, "tenant", None)
    if not isinstance(tenant, str) or not tenant:
        raise JournalError(
            f"a principal has a non-empty string tenant; got {principal!r}. Pass "
            "Principal(tenant='...').",
            code="invalid_principal",
        )
    return {"subject": getattr(principal, "subject", None), "tenant": tenant}


def principal_from_json(data: Any) -> Principal | None:
    """The principal a journaled ``execution_started`` names (None when it names none)."""
    from loom_nb.store import Principal

    if data is None:
        return None
    if not (isinstance(data, dict) and isinstance(data.get("tenant"), str)):
        raise JournalError(
            f"the journaled principal {data!r} has no tenant; the journal is damaged.",
            code="journal_corrupt",
        )
    subject = data.get("subject")
    return Principal(tenant=data["tenant"], subject=subject if isinstance(subject, str) else None)
