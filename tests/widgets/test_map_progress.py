"""The map's progress bar: it follows a running map, its Stop button stops it, and its static
HTML (what a saved notebook keeps) is the escaped final line."""

from __future__ import annotations

import asyncio
import importlib

import loom_nb
from loom_nb import Chat, Journal
from loom_nb.chat import MapProgress
from loom_nb.widgets._map_progress import MapProgressBar, progress_html
from tests.chat.map_provider import Echo


def test_the_progress_display_is_registered_by_the_class_name() -> None:
    """``import loom_nb`` registers the bar for MapProgress, by the class's real module and name."""
    key = ("loom_nb.chat._map_progress", "MapProgress")
    assert key in loom_nb._LIVE_DISPLAYS
    cls = getattr(importlib.import_module(key[0]), key[1])
    assert cls is MapProgress


async def test_the_bar_follows_the_map_and_its_stop_button_stops_it() -> None:
    """The bar redraws as items settle; a 'stop' message from the front end stops the map."""
    provider = Echo(delay=0.05)
    chat = Chat(provider, journal=Journal(), id="barred")
    bars: list[MapProgressBar] = []

    class Attach:
        """Makes the bar on the first update, as the notebook display does."""

        def show(self, progress: MapProgress) -> None:
            if not bars:
                bar = MapProgressBar(progress)
                progress.attach(bar)
                bars.append(bar)

    task = asyncio.ensure_future(chat.map([f"q{i}" for i in range(30)], progress=Attach()))
    await provider.reached(4)
    bar = bars[0]
    assert bar.total == 30
    assert not bar.finished
    bar._on_message(bar, {"type": "stop"}, [])  # what the Stop button sends
    result = await task
    assert result.stopped
    assert bar.finished
    assert "stopped" in bar.line
    assert bar.done + bar.failed < 30


async def test_the_static_html_is_the_escaped_line() -> None:
    """The saved form escapes the map id (the user's text) and shows the final counts."""
    chat = Chat(Echo(), journal=Journal(), id="<b>mapper</b>")
    seen: list[MapProgress] = []

    class Keep:
        def show(self, progress: MapProgress) -> None:
            seen.append(progress)

    await chat.map(["a", "b"], progress=Keep())
    page = progress_html(seen[-1])
    assert "<b>mapper" not in page
    assert "&lt;b&gt;mapper" in page
    assert "2/2" in page
    assert "done" in page
