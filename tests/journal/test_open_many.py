"""``open_new``: many new executions started in one transaction, opened as ``journal.execution`` would."""

from __future__ import annotations

from collections.abc import Callable

from loom_nb.journal import Journal
from loom_nb.journal._open_many import open_new
from loom_nb.store import Principal


async def test_new_executions_are_started_together_and_run_like_opened_ones(
    open_journal: Callable[..., Journal],
) -> None:
    """Ids without events are started (with the principal) and returned ready to run; ids with
    events are left to ``journal.execution`` (not started twice, not in the result)."""
    journal = open_journal()
    before = journal.execution("m/0", principal=Principal(tenant="t"))
    await before.execute("s", lambda _: 1)
    ids = [f"m/{i}" for i in range(3)]
    opened = open_new(journal, ids, principal=Principal(tenant="t"))
    assert sorted(opened) == ["m/1", "m/2"]
    assert [e.kind for e in journal.events("m/0")] == [
        "execution_started",
        "step_started",
        "step_completed",
    ]
    execution = opened["m/1"]
    assert execution.principal == Principal(tenant="t")
    assert await execution.execute("s", lambda _: 41) == 41
    await execution.complete({"ok": True})
    again = journal.execution("m/1", principal=Principal(tenant="t"))
    assert again.status == "completed"
    assert await again.execute("s", lambda _: 0) == 41  # replayed, not run
    assert journal.start_of("m/2") == {"principal": journal.start_of("m/1")["principal"]}
    assert [e.kind for e in journal.events("m/2")] == ["execution_started"]
    assert open_new(journal, ids, principal=Principal(tenant="t")) == {}  # nothing new: nothing
