"""``loom_nb.compare``: the same inputs through every variant, side by side (issue 32).

Comparing two models or two system prompts is a map per variant over the same inputs:
``await compare({"terse": chat_a, "haiku": provider_b}, inputs)`` runs ``chat.map(inputs)`` of
each variant at once (each with up to ``concurrency`` calls in flight: variants are usually
different vendors, each with its own rate limits) and returns a ``Comparison``, shown as a grid.

A variant is a ``Chat`` (its system prompt, tools, settings and history seed every item, as in
``chat.map``) or a bare provider, which is wrapped in a ``Chat`` with the comparison's journal
and store, under the id ``compare-<name>``: the same cell run again finds the same maps in the
journal and serves what finished, so a comparison interrupted halfway pays only for the rest.
The journal of the wrapped chats is ``journal=`` when given, else that of the first ``Chat``
among the variants, else the default (``.loom/journal.sqlite``) shared by all of them.

Everything ``chat.map`` refuses (bad inputs, limits, a batch mode it does not have) is refused the
same way here: each variant's map checks its arguments before it makes any call. When one
variant's map raises, the others are cancelled (what they finished stays journaled) and the
error is raised.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from loom_nb.chat._chat import Chat
from loom_nb.chat._comparison import Comparison
from loom_nb.chat._sync import Pending, run_blocking
from loom_nb.errors import ConfigurationError
from loom_nb.journal import Journal

if TYPE_CHECKING:
    from pydantic import BaseModel

    from loom_nb.chat._map_result import MapResult
    from loom_nb.spending import Limits
    from loom_nb.store import ContentStore

__all__ = ["compare", "compare_sync", "variant_chats"]


def compare(
    variants: Mapping[str, Any],
    inputs: Any,
    *,
    concurrency: int = 8,
    output_type: type[BaseModel] | None = None,
    limits: Limits | None = None,
    retry_failed: bool = False,
    mode: str = "live",
    journal: Journal | None = None,
    store: ContentStore | None = None,
    progress: Any = None,
) -> Pending[Comparison]:
    """Run every variant (``{"name": chat_or_provider, ...}``) on every input; a ``Comparison``.

    ``inputs`` are what ``chat.map`` takes (strings, ``(text, *attachments)`` tuples, dicts, a
    pandas Series). ``concurrency``, ``output_type``, ``limits`` (per variant),
    ``retry_failed``, ``mode`` and ``progress`` go to each variant's map. ``journal`` and
    ``store`` are used by the chats wrapped around bare providers. Plain code uses
    ``compare_sync(...)``.
    """
    run = _compare(
        variants,
        inputs,
        {
            "concurrency": concurrency,
            "output_type": output_type,
            "limits": limits,
            "retry_failed": retry_failed,
            "mode": mode,
            "progress": progress,
        },
        journal,
        store,
    )
    return Pending(run, "compare(...)", "compare_sync(...)")


def compare_sync(variants: Mapping[str, Any], inputs: Any, **options: Any) -> Comparison:
    """``compare(variants, inputs, **options)`` from synchronous code (a script, a plain cell).

    An interrupt (Ctrl-C, the kernel's stop button) cancels every variant's map: what finished
    is journaled, and running the same call again serves it.
    """
    return run_blocking(compare(variants, inputs, **options))


async def _compare(
    variants: Mapping[str, Any],
    inputs: Any,
    options: dict[str, Any],
    journal: Journal | None,
    store: ContentStore | None,
) -> Comparison:
    chats = variant_chats(variants, journal=journal, store=store)
    if isinstance(inputs, Iterator):  # a generator would be used up by the first variant
        inputs = list(inputs)
    tasks = {
        name: asyncio.ensure_future(chat.map(inputs, **options)) for name, chat in chats.items()
    }
    try:
        await asyncio.gather(*tasks.values())
    except BaseException:
        for task in tasks.values():
            task.cancel()
        with contextlib.suppress(BaseException):
            await asyncio.wait(tasks.values())
        raise
    results: dict[str, MapResult] = {name: task.result() for name, task in tasks.items()}
    return Comparison(chats, results)


def variant_chats(
    variants: Mapping[str, Any],
    *,
    journal: Journal | None = None,
    store: ContentStore | None = None,
) -> dict[str, Chat]:
    """Each variant as a ``Chat``: chats as given, bare providers wrapped (see the module docstring)."""
    if not isinstance(variants, Mapping) or not variants:
        raise ConfigurationError(
            "compare() takes the variants as a dict of name -> Chat or provider, e.g. "
            '{"haiku": AnthropicProvider("claude-haiku-4-5"), "terse": Chat(provider, '
            f'system="Be terse.")}}, not {type(variants).__name__} {variants!r:.60}.',
            code="invalid_argument",
            argument="variants",
        )
    if journal is not None and not isinstance(journal, Journal):
        raise ConfigurationError(
            f"compare(): journal is a Journal or None, not {type(journal).__name__}.",
            code="invalid_argument",
            argument="journal",
        )
    seen: dict[int, str] = {}
    for name, value in variants.items():
        if not isinstance(name, str) or not name.strip():
            raise ConfigurationError(
                f"compare(): each variant is named by a non-empty string, not {name!r}.",
                code="invalid_argument",
                argument="variants",
            )
        if isinstance(value, Chat):
            if id(value) in seen:
                raise ConfigurationError(
                    f"compare(): variants {seen[id(value)]!r} and {name!r} are the same Chat; "
                    "give each variant its own (chat.fork() copies one).",
                    code="invalid_argument",
                    argument="variants",
                )
            seen[id(value)] = name
        elif not (callable(getattr(value, "complete", None)) and hasattr(value, "capabilities")):
            raise ConfigurationError(
                f"compare(): variant {name!r} is a Chat or a provider, not {type(value).__name__}.",
                code="invalid_argument",
                argument="variants",
            )
    shared: Journal | None = journal
    if shared is None:
        shared = next((v.journal for v in variants.values() if isinstance(v, Chat)), None)
    chats: dict[str, Chat] = {}
    for name, value in variants.items():
        if isinstance(value, Chat):
            chats[name] = value
            continue
        chat = Chat(value, journal=shared, store=store, id=f"compare-{name}")
        shared = chat.journal  # the default journal, opened once, for every wrapped provider
        chats[name] = chat
    return chats
