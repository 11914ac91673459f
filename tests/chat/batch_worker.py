"""A kernel running a batch map, for the resume test: ``python batch_worker.py MODE JOURNAL``.

``first`` submits the map's batch to a fake Anthropic (``tests/providers/batch_fake.py``), polls it
once and, waiting for the second poll, SIGKILLs its own process (a kernel dying mid-poll).
``resume`` is the next process: the same map on the same journal, against a vendor that already
holds that batch (it knows the items' custom ids, and answers "ended" at the first poll); it
prints JSON with what it sent (submits, polls) and the answers.
"""

from __future__ import annotations

import json
import os
import signal
import sys

from loom_nb import AnthropicProvider, Chat, Journal
from loom_nb.chat import _map_batch
from loom_nb.providers._http import RetryPolicy
from tests.providers.batch_fake import AnthropicBatches

WORDS = ["alpha", "beta", "gamma", "delta"]


_SLEPT: list[float] = []


async def _die(seconds: float) -> None:
    """The poll interval: the first passes, the kernel dies in the second."""
    _SLEPT.append(seconds)
    if len(_SLEPT) > 1:
        os.kill(os.getpid(), signal.SIGKILL)


async def _no_wait(seconds: float) -> None:
    return None


def main(mode: str, journal_url: str) -> None:
    fake = AnthropicBatches(polls_until_end=99 if mode == "first" else 1)
    if mode == "resume":
        fake.custom_ids = [f"item-{i}" for i in range(len(WORDS))]  # the vendor holds the batch
    _map_batch.BatchOptions.sleep = staticmethod(_die if mode == "first" else _no_wait)  # type: ignore[assignment]
    policy = RetryPolicy(max_retries=0)
    provider = AnthropicProvider(
        "claude-sonnet-4-5",
        api_key="sk-ant-test-key-123",
        http_client=fake.client(),
        retry_policy=policy,
    )
    chat = Chat(provider, journal=Journal(journal_url), id="batch-kernel")
    result = chat.map_sync(WORDS, mode="batch", progress=False)
    print(
        json.dumps(
            {
                "submits": len(fake.submits),
                "polls": fake.polls,
                "fetches": fake.fetches,
                "texts": [r.content if r is not None else None for r in result],
                "errors": sorted(result.errors),
            }
        )
    )


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
