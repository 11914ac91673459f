"""``loom-nb map work ID``: one more process working a map that a kernel started (issue 32).

The map's definition comes from the journal (its first step, ``load_plan``): the requests, the
output type (imported by name; it must be importable here) and the identity of the provider it
was made for. The worker claims the map's items from the journal's work queue and answers them
with a provider of its own, until no item is left to anyone; the kernel that started the map
(``chat.map(...)`` on a PostgreSQL journal, or ``join=True``) counts them in its progress and
its ``MapResult``. A worker SIGKILLed mid-item loses nothing: its items return to the pool when
their lease (``--lease``) runs out, at once for the workers of the same host.

The provider. ``--provider MODULE:NAME`` imports NAME from MODULE: a provider object, or a
function called with no arguments that returns one (a ``ScriptedProvider`` for a test, a
configured ``FallbackProvider``). Without it the provider is built from the journaled identity:
``AnthropicProvider``, ``OpenAIProvider`` (its ``base_url`` for a compatible server),
``OpenAIResponsesProvider`` or ``GeminiProvider`` with the map's model, the API key from the
vendor's environment variable as usual. Anything else needs ``--provider``.

Prints one line when done: the items this worker completed, failed and lost.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
from collections.abc import Mapping
from typing import Any

from loom_nb.chat._map_join import DEFAULT_LEASE, work_map
from loom_nb.chat._map_plan import load_plan
from loom_nb.cli._backends import (
    add_journal_option,
    add_store_option,
    journal_target,
    open_journal,
    open_store_target,
    paired_journal,
    store_target,
)
from loom_nb.errors import ConfigurationError

__all__ = ["provider_for", "register"]

_BUILT = ("AnthropicProvider", "OpenAIProvider", "OpenAIResponsesProvider", "GeminiProvider")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``loom-nb map`` and its ``work`` subcommand."""
    parser = subparsers.add_parser("map", help="maps: work one with this process")
    commands = parser.add_subparsers(dest="map_command", metavar="COMMAND", required=True)
    work = commands.add_parser("work", help="claim and answer a map's items until none is left")
    work.add_argument("map_id", metavar="ID", help="the map's id (MapResult.id)")
    add_journal_option(work)
    add_store_option(work, what="content store (claim-checked payloads, stored media)")
    work.add_argument(
        "--provider",
        metavar="MODULE:NAME",
        help="a provider, or a function returning one (default: built from the map's provider)",
    )
    work.add_argument("--concurrency", type=int, default=8, help="calls in flight (default 8)")
    work.add_argument(
        "--lease",
        type=float,
        default=DEFAULT_LEASE,
        help=f"seconds a claim lasts without a heartbeat (default {DEFAULT_LEASE:g})",
    )
    work.add_argument("--worker", help="this worker's name in the queue (default: host:pid:random)")
    work.set_defaults(handler=_work)


def _work(args: argparse.Namespace) -> int:
    target, _ = journal_target(args)
    store_at, named = store_target(args)
    store = None
    if named:
        store = open_store_target(store_at, create=False, journal=paired_journal(args))
    with open_journal(target, store=store) as journal:
        plan = load_plan(journal, args.map_id)
        provider = provider_for(plan.provider, args.provider)
        report = asyncio.run(
            work_map(
                journal,
                args.map_id,
                provider,
                store=store,
                concurrency=args.concurrency,
                lease=args.lease,
                worker=args.worker,
            )
        )
    print(
        json.dumps(
            {
                "worker": report.worker,
                "done": len(report.done),
                "failed": len(report.failed),
                "lost": len(report.lost),
                "released": len(report.released),
            },
            sort_keys=True,
        )
    )
    return 0


def provider_for(identity: Mapping[str, Any], spec: str | None) -> Any:
    """The provider a worker answers with: ``spec`` (``MODULE:NAME``), else built from ``identity``."""
    if spec:
        module, _, name = spec.partition(":")
        try:
            found: Any = importlib.import_module(module)
            for part in name.split(".") if name else ():
                found = getattr(found, part)
        except (ImportError, AttributeError, ValueError) as exc:
            raise ConfigurationError(
                f"--provider {spec!r} cannot be imported ({exc}). Give MODULE:NAME of a provider "
                "or of a function returning one, importable here (on PYTHONPATH).",
                code="map_provider_unavailable",
            ) from exc
        if not name:
            raise ConfigurationError(
                f"--provider {spec!r}: give MODULE:NAME (a provider or a function returning one).",
                code="map_provider_unavailable",
            )
        if callable(getattr(found, "complete", None)):
            return found
        if callable(found):
            return found()
        raise ConfigurationError(
            f"--provider {spec!r} is neither a provider nor a function returning one.",
            code="map_provider_unavailable",
        )
    kind, model = identity.get("provider"), identity.get("model")
    if kind not in _BUILT or not isinstance(model, str):
        raise ConfigurationError(
            f"the map was made with a {kind or 'provider'} (model {model!r}) that a worker cannot "
            "build from its name: pass --provider MODULE:NAME (a provider, or a function "
            "returning one).",
            code="map_provider_unknown",
        )
    import loom_nb.providers as providers

    options: dict[str, Any] = {}
    if kind == "OpenAIProvider" and isinstance(identity.get("api_url"), str):
        options["base_url"] = identity["api_url"]
    return getattr(providers, str(kind))(model, **options)
