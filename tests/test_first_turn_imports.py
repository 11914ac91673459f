"""A first Chat turn imports what it runs: the packages re-export their names lazily (loom_nb._lazy).

Not a timing test (benchmarks/bench_first_turn.py times it): these pin the import structure that
keeps a fresh process's first turn small, so a module-level import that drags the renderer, other
vendors' providers, the batch machinery or the MCP client back into every turn fails here.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import subprocess
import sys

import pytest

LAZY_PACKAGES = [
    "loom_nb.agent",
    "loom_nb.chat",
    "loom_nb.journal",
    "loom_nb.providers",
    "loom_nb.render",
    "loom_nb.store",
]

ANSWER = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "claude-sonnet-4-5",
    "content": [{"type": "text", "text": "Sunny."}],
    "stop_reason": "end_turn",
    "stop_sequence": None,
    "usage": {"input_tokens": 12, "output_tokens": 3},
}

FIRST_TURN = """
import asyncio, json, os, sys
import httpx
from loom_nb import Chat, Journal, LocalContentStore, ToolDefinition
from loom_nb.providers import AnthropicProvider

body = json.dumps({answer!r}).encode()
transport = httpx.MockTransport(lambda request: httpx.Response(200, content=body))
weather = ToolDefinition(
    "get_weather", "Weather of a city.", fn=lambda value: "Sunny",
    input_schema={{"type": "object", "properties": {{"city": {{"type": "string"}}}}}},
)
chat = Chat(
    AnthropicProvider("claude-sonnet-4-5", api_key="k", http_client=httpx.AsyncClient(transport=transport)),
    tools=[weather],
    journal=Journal(os.path.join({here!r}, "j.sqlite")),
    store=LocalContentStore(os.path.join({here!r}, "store")),
)
reply = asyncio.run(chat("Weather in Paris?"))
assert reply.content == "Sunny." and chat.cost is not None, (reply, chat.cost)
print(json.dumps(sorted(sys.modules)))
"""

NOT_IN_A_FIRST_TURN = [
    "PIL",  # Pillow: the renderer's media, the export
    "arrow",  # jsonschema's duration check (isoduration), deferred to its first use
    "loom_nb.render._api",
    "loom_nb.render._view",
    "loom_nb.render._grid",
    "loom_nb.chat._comparison",
    "loom_nb.chat._export_media",
    "loom_nb.chat._map_batch",
    "loom_nb.providers._batch",
    "loom_nb.providers.openai",
    "loom_nb.providers.openai_responses",
    "loom_nb.providers.gemini",
    "loom_nb.providers.conformance",
    "loom_nb.providers.fallback",
    "loom_nb.agent._mcp",
    "httpx2",  # genai-prices' client for its price updates, which loom_nb never starts
]


def test_a_first_chat_turn_loads_no_renderer_other_vendor_batch_or_mcp(tmp_path) -> None:
    """One turn with every feature on (journal, store, a schema-checked tool, cost) leaves the
    HTML renderer, Pillow, the other vendors' providers, batches and MCP unloaded."""
    code = FIRST_TURN.format(answer=ANSWER, here=str(tmp_path))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    loaded = set(json.loads(done.stdout.splitlines()[-1]))
    assert "loom_nb.providers.anthropic" in loaded
    assert "loom_nb.agent._tools" in loaded
    assert "jsonschema" in loaded  # the tool's schema is checked, its input validated
    assert sorted(set(NOT_IN_A_FIRST_TURN) & loaded) == []


def test_jsonschema_waits_for_the_first_tool(tmp_path) -> None:
    """A first turn of a chat with no tool leaves jsonschema unloaded (about 25 ms of a fresh
    process); defining a tool imports it, and the tool's input is validated against its schema."""
    code = FIRST_TURN.format(answer=ANSWER, here=str(tmp_path)).replace(
        "tools=[weather]", "tools=[]"
    )
    defined = code.index("weather = ToolDefinition(")
    code = code[:defined] + "assert 'jsonschema' not in sys.modules\n" + code[defined:]
    code = code.replace("weather = ToolDefinition(", "weather = None and ToolDefinition(", 1)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    loaded = set(json.loads(done.stdout.splitlines()[-1]))
    assert "loom_nb.agent._tools" in loaded  # the agent loop is in; only jsonschema waits
    assert "jsonschema" not in loaded
    check = (
        "import sys\n"
        "from loom_nb import ToolDefinition\n"
        "assert 'jsonschema' not in sys.modules\n"
        "t = ToolDefinition('t', 'd', fn=str, input_schema={'type': 'object', "
        "'properties': {'city': {'type': 'string'}}})\n"
        "assert 'jsonschema' in sys.modules\n"
        "assert t.validate_input({'city': 1}) == (None, \"city: 1 is not of type 'string'\")\n"
    )
    subprocess.run([sys.executable, "-c", check], check=True)


def test_genai_prices_gets_its_http_client_on_first_use() -> None:
    """A price looked up leaves ``httpx2`` unloaded; genai-prices' update code, when used, gets
    the real client (the stand-in hands over the real module's names)."""
    code = (
        "import sys\n"
        "from loom_nb.chat._cost import _lookup\n"
        "from loom_nb.content import Usage\n"
        "price = _lookup(Usage(input_tokens=1000, output_tokens=10), 'claude-sonnet-4-5', "
        "'anthropic', None)\n"
        "assert price is not None and price > 0, price\n"
        "assert 'httpx2' not in sys.modules\n"
        "import genai_prices.update_prices as updates\n"
        "timeout = updates.UpdatePrices().request_timeout\n"
        "import httpx2\n"
        "assert isinstance(timeout, httpx2.Timeout), timeout\n"
        "assert updates.httpx2.get is httpx2.get and sys.modules['httpx2'] is httpx2\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize("package", LAZY_PACKAGES)
def test_a_lazy_package_exports_its_table(package: str) -> None:
    """``__all__`` is the export table; each name is the object its module defines; ``dir``
    lists it; a name outside the table is an AttributeError."""
    module = importlib.import_module(package)
    table: dict[str, str] = module._EXPORTS
    assert sorted(module.__all__) == sorted(table)
    assert set(table) <= set(dir(module))
    for name, where in table.items():
        if where == "loom_nb.store._s3" and importlib.util.find_spec("obstore") is None:
            continue  # the S3 store's client is an optional dependency
        assert getattr(module, name) is getattr(importlib.import_module(where), name), name
    with pytest.raises(AttributeError):
        _ = module.no_such_name


def test_star_import_of_a_lazy_package_gives_every_name() -> None:
    """``from loom_nb.providers import *`` loads and binds each exported name."""
    code = (
        "from loom_nb.providers import *\n"
        "import loom_nb.providers as p\n"
        "assert all(globals()[n] is getattr(p, n) for n in p.__all__)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_a_text_only_transcript_renders_without_pillow() -> None:
    """Pillow is imported when an image or a PDF page is shown, not to render text: the first
    display of a text-only chat does not pay for it. An image still renders (Pillow re-encodes it)."""
    code = (
        "import sys\n"
        "from loom_nb import Message, ImagePart\n"
        "from loom_nb.render import render_transcript\n"
        "html = render_transcript([Message(role='user', content='hi'), "
        "Message(role='assistant', content='**hello**')])\n"
        "assert '<strong>hello</strong>' in html, html\n"
        "assert 'PIL' not in sys.modules\n"
        "import base64, io\n"
        "png = base64.b64decode('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQ"
        "DwAEhQGAhKmMIQAAAABJRU5ErkJggg==')\n"
        "html = render_transcript([Message(role='user', content=[ImagePart.from_bytes(png)])])\n"
        "assert 'PIL' in sys.modules and 'data:image/png;base64,' in html\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
