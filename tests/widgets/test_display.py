"""The rich display of lower layers' values comes from the notebook layer, registered with IPython."""

from __future__ import annotations

import importlib
import subprocess
import sys

from IPython.core.formatters import DisplayFormatter

import loom_nb
from loom_nb import LlmResponse, Message, ScriptedProvider, agent_loop
from loom_nb.journal import Journal
from loom_nb.widgets import _display
from tests.display import displayed


def test_each_registered_name_is_the_class_where_it_is_defined() -> None:
    """The (module, class) keys name the real classes, so IPython's lookup by name finds them."""
    for (module, name), function in loom_nb._DISPLAYS.items():
        cls = getattr(importlib.import_module(module), name)
        assert (cls.__module__, cls.__name__) == (module, name)
        assert callable(getattr(_display, function))


OWN_STATIC = {("loom_nb.chat._comparison", "Comparison")}
"""Classes the public contract gives a static ``_repr_mimebundle_`` of their own (a comparison's
table, DESIGN.md "Third-wave contract"); in a shell the registered bundle still comes first."""


def test_values_carry_no_display_of_their_own() -> None:
    """The lower layers' classes have no _repr_mimebundle_ (but those the contract gives a
    static one): the notebook layer shows them."""
    for module, name in loom_nb._DISPLAYS:
        cls = getattr(importlib.import_module(module), name)
        assert hasattr(cls, "_repr_mimebundle_") == ((module, name) in OWN_STATIC)


def test_a_message_shows_as_the_widget_with_static_html_and_plain_text() -> None:
    """A message's bundle is the live view, escaped static HTML and its repr."""
    message = Message(role="user", content="<b>hi</b>")
    data = displayed(message)
    assert "application/vnd.jupyter.widget-view+json" in data
    assert "&lt;b&gt;hi&lt;/b&gt;" in data["text/html"]
    assert "message · user" in data["text/html"]
    assert data["text/plain"] == repr(message)


def test_a_response_is_headed_by_model_tokens_and_stop_reason() -> None:
    """A response shows its assistant turn; the plain text names the tool calls."""
    response = LlmResponse.model_validate(
        {
            "content": "done",
            "tool_calls": [{"id": "t1", "name": "f", "input": {}}],
            "stop_reason": "tool_use",
            "usage": {"input_tokens": 1200, "output_tokens": 3},
            "model": "m1",
        }
    )
    data = displayed(response, exclude={"application/vnd.jupyter.widget-view+json"})
    assert set(data) == {"text/html", "text/plain"}
    assert data["text/plain"] == (
        "response · m1 · 1,200 in · 3 out · stop: tool_use\ndone\ntool call f (t1)"
    )


async def test_an_agent_result_shows_its_run() -> None:
    """An AgentResult is headed by its status, turns and tool calls."""
    with Journal() as journal:
        result = await agent_loop(
            journal.execution("r"),
            ScriptedProvider([{"text": "ok"}]),
            [],
            [{"role": "user", "content": "hello"}],
        )
    data = displayed(result, include={"text/plain"})
    assert data == {"text/plain": f"AgentResult({result.header()})"}


def test_the_display_function_is_what_the_formatter_uses() -> None:
    """Registering with a formatter routes each value to its bundle function."""
    formatter = DisplayFormatter()
    message = Message(role="assistant", content="x")
    assert formatter.format(message)[0].keys() == {"text/plain"}  # unregistered: just the repr
    loom_nb._register_display(formatter.mimebundle_formatter)
    data, _ = formatter.format(message, include={"text/html", "text/plain"})
    expected, _ = _display.message_bundle(message, include={"text/html", "text/plain"})
    assert data.keys() == expected.keys() == {"text/html", "text/plain"}
    assert data["text/plain"] == expected["text/plain"]


def test_import_registers_with_a_running_shell_only() -> None:
    """`import loom_nb` registers with the running IPython shell, and imports no IPython without one."""
    code = (
        "from IPython.core.interactiveshell import InteractiveShell\n"
        "shell = InteractiveShell.instance()\n"
        "import loom_nb\n"
        "from loom_nb import Message\n"
        "data, _ = shell.display_formatter.format(Message(role='user', content='hi'))\n"
        "print(sorted(data))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert "'text/html'" in out
    assert "application/vnd.jupyter.widget-view+json" in out
