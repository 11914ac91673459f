"""``Comparison``: what ``loom_nb.compare`` returns, each variant's ``MapResult`` over the same inputs.

A read-only mapping of variant name to ``MapResult`` (``comparison["haiku"]``), in the order the
variants were given, with the grid they make (``grid()``: a row per input, a column per variant,
``loom_nb.render``), the column totals, and ``to_pandas()``: one row per input, the input, then for
each variant the columns of its ``MapResult.to_pandas()`` under the variant's name.

Shown in a notebook it is the ``CompareGrid`` widget (``import loom_nb`` registers that with
IPython, from the notebook layer); its own ``_repr_mimebundle_`` / ``_repr_html_`` are the static
table, which is also what a saved notebook keeps. An item's full transcript is read from the
journal only when it is shown (a click on its cell, or the static table's ``<details>``): what
the model was sent, guard fences and all, and what it answered.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from loom_nb.content import Message
from loom_nb.errors import ConfigurationError
from loom_nb.render._grid import MAX_GRID_ROWS, ColumnTotals, Grid, GridItem, column_totals
from loom_nb.render._grid_html import grid_html
from loom_nb.render._source import Transcript, transcript_of

if TYPE_CHECKING:
    from loom_nb.chat._chat import Chat
    from loom_nb.chat._map_result import MapResult
    from loom_nb.journal import Journal

__all__ = ["Comparison"]


class Comparison(Mapping[str, "MapResult"]):
    """Every variant's answers to the same inputs: ``comparison[name]`` is that variant's ``MapResult``.

    ``chats`` are the chats that ran (a bare provider was wrapped in one); ``inputs`` the inputs'
    texts; ``totals()`` each column's sums; ``grid()`` the grid's data; ``to_pandas()`` the table.
    """

    def __init__(self, chats: Mapping[str, Chat], results: Mapping[str, MapResult]) -> None:
        _check(chats, results)
        self.chats: dict[str, Chat] = dict(chats)
        """Variant name -> the chat whose map answered (in the order given)."""
        self._results = {name: results[name] for name in self.chats}
        first = next(iter(self._results.values()))
        self.inputs: list[str] = list(first.inputs)
        """Each input's text, in input order."""
        self.labels: list[Any] = list(first.labels)
        """Each input's label (a Series' index, else its position)."""

    # -- the mapping -----------------------------------------------------------------------------

    def __getitem__(self, name: str) -> MapResult:
        try:
            return self._results[name]
        except KeyError:
            raise KeyError(
                f"no variant {name!r} in this comparison (variants: {', '.join(self._results)})"
            ) from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._results)

    def __len__(self) -> int:
        return len(self._results)

    # -- the grid --------------------------------------------------------------------------------

    def grid(self) -> Grid:
        """The comparison as a ``loom_nb.render.Grid`` (what the widget and the table draw)."""
        names = list(self._results)
        rows = []
        for index, text in enumerate(self.inputs):
            rows.append([self._item(name, index, text) for name in names])
        return Grid(names, list(self.inputs), rows)

    def _item(self, name: str, index: int, text: str) -> GridItem:
        result = self._results[name]
        error = result.errors.get(index)
        journal = self.chats[name].journal
        return GridItem(
            result[index],
            _Logged(journal, f"{result.id}/{index}", text).transcript,
            error=None if error is None else f"{error.code}: {error.message}",
            latency_s=result.latencies[index],
            cost=result.costs[index],
        )

    def totals(self) -> dict[str, ColumnTotals]:
        """Variant name -> its column's totals (tokens, mean latency, priced cost, failures)."""
        return dict(zip(self._results, column_totals(self.grid()), strict=True))

    # -- the table -------------------------------------------------------------------------------

    def to_pandas(self) -> Any:
        """One row per input: ``input``, then per variant its ``MapResult.to_pandas()`` columns
        (``text``, any output fields, ``input_tokens``, ``output_tokens``, ``cost``,
        ``latency_s``, ``error``) under the variant's name (two-level columns).

        ``df["haiku"]`` is one variant's table; ``df.xs("cost", axis=1, level=1)`` a column per
        variant. Needs pandas (``pip install pandas``).
        """
        try:
            pd: Any = importlib.import_module("pandas")
        except ImportError as exc:
            raise ConfigurationError(
                "Comparison.to_pandas() needs pandas: pip install pandas (or read "
                "comparison[name], a MapResult, for each variant).",
                code="pandas_not_installed",
            ) from exc
        frames = {name: r.to_pandas().drop(columns=["input"]) for name, r in self._results.items()}
        table = pd.concat(frames, axis=1)
        table.insert(0, ("input", ""), list(self.inputs))
        return table

    # -- display ---------------------------------------------------------------------------------

    def _viewer(self) -> tuple[Any, Any]:
        """The store and principal an item's media is read with (the first variant's chat)."""
        chat = next(iter(self.chats.values()))
        return chat._store, chat._principal

    def to_static_html(self, *, max_rows: int = MAX_GRID_ROWS) -> str:
        """The static table (what a saved notebook shows): each cell's transcript in a ``<details>``."""
        store, principal = self._viewer()
        return grid_html(self.grid(), store=store, principal=principal, max_rows=max_rows)

    def _repr_html_(self) -> str:
        return self.to_static_html()

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        data = {"text/plain": repr(self), "text/html": self.to_static_html()}
        return {
            mime: value
            for mime, value in data.items()
            if (include is None or mime in include) and not (exclude and mime in exclude)
        }

    def __repr__(self) -> str:
        count = len(self.inputs)
        lines = [f"Comparison({count} input{'s' if count != 1 else ''} × {', '.join(self)})"]
        for name, total in self.totals().items():
            lines.append(f"  {name}: {total.text()}")
        return "\n".join(lines)


def _check(chats: Any, results: Any) -> None:
    """Refuse what ``compare`` would never build: chats and results by the same names, one
    ``MapResult`` per chat, every one over the same number of inputs."""
    from loom_nb.chat._chat import Chat
    from loom_nb.chat._map_result import MapResult

    fine = (
        isinstance(chats, Mapping)
        and isinstance(results, Mapping)
        and len(chats) > 0
        and list(chats) == list(results)
        and all(isinstance(name, str) for name in chats)
        and all(isinstance(chat, Chat) for chat in chats.values())
        and all(isinstance(result, MapResult) for result in results.values())
    )
    if not fine or len({len(r) for r in results.values()}) != 1:
        raise ConfigurationError(
            "Comparison(chats, results) takes the same variant names in both, each with its Chat "
            "and the MapResult of its map over the same inputs; `await compare(...)` builds one.",
            code="invalid_argument",
            argument="results",
        )


@dataclass(frozen=True)
class _Logged:
    """An item's execution in a journal, read as a transcript when it is shown."""

    journal: Journal
    execution_id: str
    text: str

    def transcript(self) -> Transcript:
        """What the item's journaled step sent and got; the input alone when it never ran."""
        found = transcript_of(self)
        if found.messages:
            return found
        return Transcript([Message(role="user", content=self.text)])
