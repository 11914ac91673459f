"""Prompt caching on the wire: Anthropic ``cache_control`` breakpoints, OpenAI's cache key.

Vendor caches match a request's prefix byte for byte. loom_nb already keeps a transcript's prefix
stable across turns (the guard fences ``messages[i]`` with the nonce of the request cut after it,
so a fence never changes as the conversation grows); what Anthropic also needs is to be told
where to cache (issue 29). ``anthropic_cache_breakpoints`` lays up to four ``cache_control``
markers over a finished Messages body, as ``PromptCache`` says:

- the last tool definition (the tools are the first thing in the prompt);
- the system prompt (a string becomes one text block carrying the marker);
- the end of each of the last ``turns`` earlier turns: the message before each of the last user
  messages. The previous turn's end is written now and read by the next call; the one before it
  is where the previous call wrote, read here exactly, so a turn that added more blocks than
  Anthropic looks back over (about 20) still reads the cache;
- with ``last``, the request's final message.

At most four in all (Anthropic's limit): the final message and the newest turn ends come first,
so when more are asked for, the oldest turn ends are left out.

A marker goes on the message's last block that may carry one: never a thinking block, never an
empty text block. String content becomes a single text block (the same prompt to the model). The
marker is added beside the block's fields and nothing else changes, so the text of a fenced
untrusted part, a tool result, a media block is byte for byte what it was; moving the markers
as the chat grows never moves the prefix.

OpenAI caches every long prefix by itself; ``prompt_cache_key`` (``PromptCache.key``, a
``Chat``'s id under ``"auto"``) routes a conversation's calls to the same cache. Gemini caches
implicitly and reports it in ``cachedContentTokenCount``; there is nothing to send.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from loom_nb.settings import ANTHROPIC_MAX_BREAKPOINTS, CacheSetting, PromptCache, resolve_cache

__all__ = ["anthropic_cache_breakpoints", "cache_control_of", "openai_cache_fields"]

_UNMARKABLE = frozenset({"thinking", "redacted_thinking"})
"""Block types Anthropic does not let carry ``cache_control`` (thinking is cached with its turn)."""


def cache_control_of(policy: PromptCache) -> dict[str, str]:
    """The ``cache_control`` object for ``policy``'s lifetime (5 minutes is the API's default)."""
    if policy.ttl == "1h":
        return {"type": "ephemeral", "ttl": "1h"}
    return {"type": "ephemeral"}


def anthropic_cache_breakpoints(
    body: Mapping[str, Any], setting: CacheSetting | None
) -> dict[str, Any]:
    """``body`` with the breakpoints ``setting`` asks for (a new dict; ``body`` is not changed)."""
    policy = resolve_cache(setting)
    out = dict(body)
    if policy is None:
        return out
    control = cache_control_of(policy)
    tools = out.get("tools")
    if policy.tools and isinstance(tools, list) and tools:
        out["tools"] = [*tools[:-1], {**tools[-1], "cache_control": control}]
    system = out.get("system")
    if policy.system and system:
        marked = _marked_content(system, control)
        if marked is not None:
            out["system"] = marked
    messages = out.get("messages")
    if isinstance(messages, list) and messages:
        room = ANTHROPIC_MAX_BREAKPOINTS - len(_placed(out))
        targets = _message_targets(messages, policy, room)
        if targets:
            marked = list(messages)
            for index in targets:
                marked[index] = _marked_message(marked[index], control)
            out["messages"] = marked
    return out


def _placed(body: Mapping[str, Any]) -> list[Any]:
    """The tool and system blocks already carrying a marker."""
    blocks: list[Any] = []
    for key in ("tools", "system"):
        value = body.get(key)
        if isinstance(value, list):
            blocks.extend(value)
    return [b for b in blocks if isinstance(b, Mapping) and "cache_control" in b]


def _message_targets(messages: list[Any], policy: PromptCache, room: int) -> list[int]:
    """Indices of the messages to mark: the last one (``last``), then the ends of the last
    ``turns`` turns, newest first, as many as ``room`` (Anthropic's limit) allows."""
    wanted = [len(messages) - 1] if policy.last else []
    ends = 0
    index = len(messages) - 2
    while policy.turns and ends < policy.turns and index >= 0:  # from the end: what a turn added
        following = messages[index + 1]
        if isinstance(following, Mapping) and following.get("role") == "user":
            wanted.append(index)
            ends += 1
        index -= 1
    return wanted[: max(room, 0)]


def _marked_message(message: Any, control: dict[str, str]) -> Any:
    if not isinstance(message, Mapping):
        return message
    marked = _marked_content(message.get("content"), control)
    return message if marked is None else {**message, "content": marked}


def _marked_content(content: Any, control: dict[str, str]) -> list[Any] | None:
    """The content with its last markable block marked; None when nothing can carry a marker."""
    if isinstance(content, str):
        return [{"type": "text", "text": content, "cache_control": control}] if content else None
    if not isinstance(content, list):
        return None
    for index in range(len(content) - 1, -1, -1):
        block = content[index]
        if not isinstance(block, Mapping) or block.get("type") in _UNMARKABLE:
            continue
        if block.get("type") == "text" and not block.get("text"):
            continue
        return [*content[:index], {**block, "cache_control": control}, *content[index + 1 :]]
    return None


def openai_cache_fields(setting: CacheSetting | None, *, official: bool) -> dict[str, Any]:
    """``{"prompt_cache_key": key}`` on OpenAI's own endpoint when the setting names a key.

    A compatible server's parameters are unknown, so nothing is sent there (put the field in
    ``extra_body`` if the server takes it).
    """
    policy = resolve_cache(setting)
    if not official or policy is None or not policy.key:
        return {}
    return {"prompt_cache_key": policy.key}
