"""``batch_api(provider)``: the vendor batch API behind a provider, or a refusal before any I/O.

The shared shape is ``_batch.BatchApi``; the vendors' wire formats are ``anthropic_batch`` and
``openai_batch``. This module only picks one, so the vendor modules never import each other.
It imports them when asked, not with ``chat.map``: a process that never sends a batch (the first
turn of a Chat among them) loads neither the batch wire formats nor the other vendors' providers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from loom_nb.errors import ConfigurationError

if TYPE_CHECKING:
    from loom_nb.providers._batch import BatchApi

__all__ = ["batch_api"]


def batch_api(provider: object) -> BatchApi:
    """The batch API of ``provider``: Anthropic's Message Batches for ``AnthropicProvider``,
    OpenAI's Batch API for ``OpenAIProvider`` (``/v1/chat/completions``) and
    ``OpenAIResponsesProvider`` (``/v1/responses``).

    Any other provider is a ``ConfigurationError`` (code ``batch_unsupported``), raised before
    any I/O.
    """
    from loom_nb.providers.anthropic import AnthropicProvider
    from loom_nb.providers.anthropic_batch import AnthropicBatchApi
    from loom_nb.providers.openai import OpenAIProvider
    from loom_nb.providers.openai_batch import OpenAIBatchApi
    from loom_nb.providers.openai_responses import OpenAIResponsesProvider

    if isinstance(provider, AnthropicProvider):
        return AnthropicBatchApi(provider)
    if isinstance(provider, OpenAIProvider):
        return OpenAIBatchApi(provider, endpoint="/v1/chat/completions")
    if isinstance(provider, OpenAIResponsesProvider):
        return OpenAIBatchApi(provider, endpoint="/v1/responses")
    raise ConfigurationError(
        f"{type(provider).__name__} has no batch API in loom_nb: mode='batch' needs an "
        "AnthropicProvider, OpenAIProvider or OpenAIResponsesProvider. Nothing was sent. Use "
        "mode='live' (the default) with this provider, or one of those for a batch.",
        code="batch_unsupported",
        provider=type(provider).__name__,
    )
