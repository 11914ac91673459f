"""loom_nb: a Jupyter-first toolkit for multimodal LLM work.

Every public name is importable from here. Names load lazily, on first use, so
``import loom_nb`` is cheap and the core never pulls in ipywidgets, IPython or httpx until a
name from the notebook or provider layer is asked for.

Rich display. A ``Message``, ``LlmResponse``, ``AgentResult`` or ``Chat`` last in a cell shows as
a transcript view, yet those classes live on layers below the notebook layer and carry no
``_repr_mimebundle_`` (DESIGN.md "Layers"). So ``import loom_nb`` (which runs before any of them
can be imported) registers the notebook layer's bundles with IPython's mimebundle formatter when
an IPython shell is running, by module and class name: nothing is imported until a value is shown.
A ``Chat`` is also registered with IPython's display hook for objects that display themselves:
it is shown under a display id, so its saved output can follow its later turns.
"""

from __future__ import annotations

import importlib
import sys
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# name -> module that defines it. A test checks this table against __all__ and that each name
# resolves; adding a public name means one line here.
_EXPORTS: dict[str, str] = {
    # errors
    "AgentError": "loom_nb.errors",
    "BudgetExceededError": "loom_nb.errors",
    "ConfigurationError": "loom_nb.errors",
    "ContentAccessDeniedError": "loom_nb.errors",
    "ContentIntegrityError": "loom_nb.errors",
    "ContentNotFoundError": "loom_nb.errors",
    "ContentValidationError": "loom_nb.errors",
    "ExecutionBusyError": "loom_nb.errors",
    "GuardError": "loom_nb.errors",
    "JournalError": "loom_nb.errors",
    "LoomError": "loom_nb.errors",
    "MCPToolsChangedError": "loom_nb.errors",
    "MediaError": "loom_nb.errors",
    "OversizedInlinePartError": "loom_nb.errors",
    "ProviderError": "loom_nb.errors",
    "ReplayDivergenceError": "loom_nb.errors",
    "StepOutputError": "loom_nb.errors",
    "StoreError": "loom_nb.errors",
    "StructuredOutputError": "loom_nb.errors",
    "UnresolvedContentError": "loom_nb.errors",
    "UnsupportedModalityError": "loom_nb.errors",
    # settings and spending limits
    "Limits": "loom_nb.spending",
    "ModelSettings": "loom_nb.settings",
    "PromptCache": "loom_nb.settings",
    # taint
    "Untrusted": "loom_nb.taint",
    # limits
    "MAX_INLINE_BYTES": "loom_nb.limits",
    "MAX_INLINE_TOTAL_BYTES": "loom_nb.limits",
    "MAX_RESOLVED_BYTES": "loom_nb.limits",
    # content
    "AudioPart": "loom_nb.content",
    "ContentRef": "loom_nb.content",
    "DataSource": "loom_nb.content",
    "FilePart": "loom_nb.content",
    "ImagePart": "loom_nb.content",
    "LlmRequest": "loom_nb.content",
    "LlmResponse": "loom_nb.content",
    "Message": "loom_nb.content",
    "Part": "loom_nb.content",
    "ReasoningPart": "loom_nb.content",
    "RefSource": "loom_nb.content",
    "TextPart": "loom_nb.content",
    "ToolCall": "loom_nb.content",
    "ToolResultPart": "loom_nb.content",
    "ToolSpec": "loom_nb.content",
    "ToolUsePart": "loom_nb.content",
    "Usage": "loom_nb.content",
    "assistant_message_of": "loom_nb.content",
    "has_structured_parts": "loom_nb.content",
    "parse_request": "loom_nb.content",
    "text_of": "loom_nb.content",
    "to_parts": "loom_nb.content",
    # guard and capabilities
    "Capabilities": "loom_nb.capabilities",
    "assert_request_supported": "loom_nb.capabilities",
    "default_capabilities": "loom_nb.capabilities",
    "fence_untrusted_media": "loom_nb.guard",
    "guard_request": "loom_nb.guard",
    # content store
    "LocalContentStore": "loom_nb.store",
    "Principal": "loom_nb.store",
    "ResolveContext": "loom_nb.store",
    "S3ContentStore": "loom_nb.store",
    "StoreResolver": "loom_nb.store",
    "open_store": "loom_nb.store",
    "resolve_request_content": "loom_nb.store",
    "sweep_unpinned_content": "loom_nb.store",
    # providers
    "AnthropicProvider": "loom_nb.providers",
    "FallbackProvider": "loom_nb.providers",
    "GeminiProvider": "loom_nb.providers",
    "LlmProvider": "loom_nb.providers",
    "LlmStreamChunk": "loom_nb.providers",
    "OpenAIProvider": "loom_nb.providers",
    "OpenAIResponsesProvider": "loom_nb.providers",
    "ScriptedProvider": "loom_nb.providers",
    "collect_stream": "loom_nb.providers",
    "run_llm_provider_conformance": "loom_nb.providers",
    # durable runs
    "Execution": "loom_nb.journal",
    "Journal": "loom_nb.journal",
    "JournalWatch": "loom_nb.journal",
    "create_llm_effect": "loom_nb.journal",
    "hash_request": "loom_nb.journal",
    # agent
    "AgentResult": "loom_nb.agent",
    "Compaction": "loom_nb.agent",
    "MCPToolset": "loom_nb.agent",
    "ToolDefinition": "loom_nb.agent",
    "agent_loop": "loom_nb.agent",
    "media_result": "loom_nb.agent",
    "tool": "loom_nb.agent",
    # conversation
    "Chat": "loom_nb.chat",
    "ChatSummary": "loom_nb.chat",
    "ChatTurn": "loom_nb.chat",
    "MapResult": "loom_nb.chat",
    "chats": "loom_nb.chat",
    # rendering (pure HTML, no widgets)
    "render_message": "loom_nb.render",
    "render_part": "loom_nb.render",
    "render_transcript": "loom_nb.render",
    "to_html": "loom_nb.render",
    # notebook layer (imports ipywidgets / anywidget on first use)
    "MCPServerView": "loom_nb.widgets",
    "MediaUpload": "loom_nb.widgets",
    "PromptPad": "loom_nb.widgets",
    "ReplayStepper": "loom_nb.widgets",
    "TranscriptView": "loom_nb.widgets",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'loom_nb' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # cache: later lookups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


# (module, class) -> the function of loom_nb.widgets._display that shows it. A test checks that
# each entry names the class where it is defined.
_DISPLAYS: dict[tuple[str, str], str] = {
    ("loom_nb.content._messages", "Message"): "message_bundle",
    ("loom_nb.content._messages", "LlmResponse"): "response_bundle",
    ("loom_nb.agent._loop", "AgentResult"): "agent_result_bundle",
    ("loom_nb.chat._chat", "Chat"): "chat_bundle",
}


def _bundle_function(name: str) -> Any:
    def show(value: Any) -> Any:
        display = importlib.import_module("loom_nb.widgets._display")
        return getattr(display, name)(value)

    show.__name__ = show.__qualname__ = name
    return show


# (module, class) -> the function of loom_nb.widgets._display that displays it itself, under a
# display id (IPython's ipython_display_formatter): values whose display is updated later.
_LIVE_DISPLAYS: dict[tuple[str, str], str] = {
    ("loom_nb.chat._chat", "Chat"): "display_chat",
    ("loom_nb.chat._map_progress", "MapProgress"): "display_map_progress",
}


def _register_display(formatter: Any = None, live: Any = None) -> None:
    """Register the transcript display with ``formatter`` (default: the running IPython shell's
    mimebundle formatter; with no shell running there is nothing to register with), and the
    displays under a display id with ``live`` (default: that shell's ipython_display_formatter;
    none when a ``formatter`` is given without it)."""
    if formatter is None:
        ipython = sys.modules.get("IPython")  # loaded in any running shell; never imported here
        shell = getattr(ipython, "get_ipython", lambda: None)()
        if shell is None:
            return
        formatter = shell.display_formatter.mimebundle_formatter
        live = shell.display_formatter.ipython_display_formatter
    for (module, cls), name in _DISPLAYS.items():
        formatter.for_type_by_name(module, cls, _bundle_function(name))
    for (module, cls), name in _LIVE_DISPLAYS.items():
        if live is not None:
            live.for_type_by_name(module, cls, _bundle_function(name))


_register_display()


if TYPE_CHECKING:  # let type checkers and IDEs see the real definitions
    from loom_nb.content import (
        AudioPart,
        ContentRef,
        DataSource,
        FilePart,
        ImagePart,
        LlmRequest,
        LlmResponse,
        Message,
        Part,
        ReasoningPart,
        RefSource,
        TextPart,
        ToolCall,
        ToolResultPart,
        ToolSpec,
        ToolUsePart,
        Usage,
        assistant_message_of,
        has_structured_parts,
        parse_request,
        text_of,
        to_parts,
    )
    from loom_nb.errors import (
        AgentError,
        BudgetExceededError,
        ConfigurationError,
        ContentAccessDeniedError,
        ContentIntegrityError,
        ContentNotFoundError,
        ContentValidationError,
        ExecutionBusyError,
        GuardError,
        JournalError,
        LoomError,
        MCPToolsChangedError,
        MediaError,
        OversizedInlinePartError,
        ProviderError,
        ReplayDivergenceError,
        StepOutputError,
        StoreError,
        StructuredOutputError,
        UnresolvedContentError,
        UnsupportedModalityError,
    )
    from loom_nb.limits import MAX_INLINE_BYTES, MAX_INLINE_TOTAL_BYTES, MAX_RESOLVED_BYTES
    from loom_nb.settings import ModelSettings, PromptCache
    from loom_nb.spending import Limits
    from loom_nb.taint import Untrusted
