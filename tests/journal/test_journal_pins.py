"""Pins: a step pins the stored content it reads when it starts, and unpins when it ends (issue 30).

On both backends: a model step citing a ref pins its address before its function runs (before
the store is read), a plain step whose input cites a ref too; the outcome removes the pins; a
step citing nothing writes none and keeps its one-commit journaling. A pin counts while its
execution's lease is live or since ``used_since``; a dead step's pin lapses.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from loom_nb.capabilities import Capabilities
from loom_nb.content import ContentRef, ImagePart, LlmRequest, LlmResponse, Message, RefSource
from loom_nb.errors import ConfigurationError
from loom_nb.journal import Journal, create_llm_effect
from loom_nb.store import LocalContentStore, Principal, StoreResolver

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _pinned(journal: Journal, **options: Any) -> set[str]:
    return journal.pinned_content(used_since=datetime.now(UTC) - timedelta(hours=1), **options)


def _ref(data: bytes) -> ContentRef:
    return ContentRef(address="sha256:" + hashlib.sha256(data).hexdigest(), size=len(data))


class SeeingProvider:
    """Records what the journal pins while its call is in flight."""

    name = "seeing"
    model = "seeing-1"

    def __init__(self, journal: Journal) -> None:
        self.capabilities = Capabilities(image=["image/png"])
        self.journal = journal
        self.seen: list[set[str]] = []

    async def complete(self, request: LlmRequest, **_: Any) -> LlmResponse:
        self.seen.append(_pinned(self.journal))
        return LlmResponse(content="a picture", stop_reason="end_turn")

    def stream(self, request: LlmRequest, **_: Any) -> Any:
        raise NotImplementedError


async def test_a_model_step_pins_its_refs_while_in_flight_and_unpins_after(
    open_journal: Callable[..., Journal], tmp_path: Any
) -> None:
    """During the provider call the image's address is pinned (by this step's start, before the
    store was read); after the outcome it is not, and the events keep their shape."""
    store = LocalContentStore(tmp_path / "store")
    journal = open_journal(store=store)
    ref = store.put(b"\x89PNG fake but stored", "alice")
    provider = SeeingProvider(journal)
    at_read: list[set[str]] = []

    class Resolver(StoreResolver):
        async def resolve(self, ref: ContentRef, context: Any) -> bytes:
            at_read.append(_pinned(journal))  # the store is about to be read
            return await super().resolve(ref, context)

    effect = create_llm_effect(provider, resolve_content=Resolver(store))
    execution = journal.execution("e", principal=Principal("alice"))
    image = ImagePart(media_type="image/png", source=RefSource(ref=ref))
    await effect(execution, "turn:1", LlmRequest(messages=[Message(role="user", content=[image])]))
    assert at_read == [{ref.address}]
    assert provider.seen == [{ref.address}]
    assert _pinned(journal) == set()
    started = [e for e in journal.events("e") if e.kind == "step_started"]
    assert [e.payload for e in started] == [{}]  # recordings keep their shape


async def test_a_plain_step_whose_input_cites_a_ref_pins_it_before_running(
    open_journal: Callable[..., Journal],
) -> None:
    """execute(step, fn, input) with a ref in the input: pinned while fn runs, even a sync fn."""
    journal = open_journal()
    ref = _ref(b"a tool's input image")
    seen: list[set[str]] = []

    def tool(value: Any) -> str:
        seen.append(_pinned(journal))
        seen.append(_pinned(journal, address=ref.address))
        seen.append(_pinned(journal, address="sha256:" + "0" * 64))
        return "done"

    source = {"kind": "ref", "ref": {"address": ref.address, "size": ref.size}}
    execution = journal.execution("e")
    assert await execution.execute("tool", tool, {"image": {"source": source}}) == "done"
    assert seen == [{ref.address}, {ref.address}, set()]
    assert _pinned(journal) == set()


async def test_a_step_citing_nothing_writes_no_pin_and_one_commit(
    open_journal: Callable[..., Journal],
) -> None:
    """No ref in the input: nothing is pinned, and start and outcome still share one commit."""
    journal = open_journal()
    seen: list[set[str]] = []
    execution = journal.execution("e")

    def step(value: Any) -> Any:
        seen.append(_pinned(journal))
        return value

    assert await execution.execute("s", step, {"text": "no refs here"}) == {"text": "no refs here"}
    assert seen == [set()]
    rows = [(e.kind, e.seq) for e in journal.events("e")]
    assert [kind for kind, _ in rows] == ["execution_started", "step_started", "step_completed"]


async def test_a_failed_step_unpins_too(open_journal: Callable[..., Journal]) -> None:
    """A step that raises journals step_failed and removes its pins in the same commit."""
    journal = open_journal()
    ref = _ref(b"x")

    def boom(value: Any) -> Any:
        raise ValueError("no")

    source = {"kind": "ref", "ref": {"address": ref.address}}
    with pytest.raises(ValueError):
        await journal.execution("e").execute("s", boom, {"source": source})
    assert _pinned(journal) == set()


async def test_a_dead_steps_pin_lapses_with_its_lease_and_the_cutoff(
    open_journal: Callable[..., Journal],
) -> None:
    """A pin left by a step that never finished counts while the lease is live or since
    used_since, and not once both have passed."""
    journal = open_journal(lease_ttl=0.5)
    ref = _ref(b"left pinned")
    source = {"kind": "ref", "ref": {"address": ref.address}}
    execution = journal.execution("e")

    def dies(value: Any) -> Any:
        # The process dies mid-step: from here on nothing reaches the journal.
        journal._writer.append = _refuse  # type: ignore[method-assign]
        raise ValueError("dying")

    with pytest.raises(RuntimeError, match="the process is gone"):
        await execution.execute("s", dies, {"source": source})
    now = datetime.now(UTC)
    assert journal.pinned_content(used_since=now + timedelta(days=1), now=now) == {ref.address}
    after_lease = now + timedelta(seconds=5)
    assert journal.pinned_content(used_since=EPOCH, now=after_lease) == {ref.address}
    stale = journal.pinned_content(used_since=after_lease, now=after_lease)
    assert stale == set()


def _refuse(*args: Any, **kwargs: Any) -> None:
    raise RuntimeError("the process is gone")


def test_pinned_content_refuses_naive_times_and_odd_addresses(
    open_journal: Callable[..., Journal],
) -> None:
    """Naive datetimes and a non-string address are ConfigurationErrors."""
    journal = open_journal()
    with pytest.raises(ConfigurationError) as info:
        journal.pinned_content(used_since=datetime(2026, 1, 1))
    assert info.value.code == "naive_datetime"
    with pytest.raises(ConfigurationError):
        journal.pinned_content(used_since=EPOCH, now=datetime(2026, 1, 1))
    with pytest.raises(ConfigurationError):
        journal.pinned_content(used_since=EPOCH, address=5)  # type: ignore[arg-type]


async def test_a_later_text_turn_still_pins_an_earlier_turns_image(
    open_journal: Callable[..., Journal], tmp_path: Any
) -> None:
    """A turn that adds only text to a transcript holding an image still reads that image when
    it runs live, so it pins it: the model base carries "this transcript has media" from the
    turn that added it, and the step walks its request for the refs."""
    store = LocalContentStore(tmp_path / "store")
    journal = open_journal(store=store)
    ref = store.put(b"\x89PNG fake but stored", "alice")
    provider = SeeingProvider(journal)
    effect = create_llm_effect(provider, resolve_content=StoreResolver(store))
    execution = journal.execution("e", principal=Principal("alice"))
    image = ImagePart(media_type="image/png", source=RefSource(ref=ref))
    first = Message(role="user", content=[image])
    answer = await effect(execution, "turn:1", LlmRequest(messages=[first]))
    later = [
        first,
        Message(role="assistant", content=answer.content),
        Message(role="user", content="more?"),
    ]
    await effect(execution, "turn:2", LlmRequest(messages=later))
    assert provider.seen == [{ref.address}, {ref.address}]
    assert _pinned(journal) == set()
