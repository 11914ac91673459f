"""``MapResult``: what ``chat.map`` returns, a response per input in input order.

A ``Sequence`` of ``LlmResponse | None`` (None where the item failed, or never ran because the map
was stopped or a spending limit was reached), with the errors by index, the summed usage and
cost, the validated structured outputs, and ``to_pandas()``: one row per input (its label as the
index), the input text, the reply text, the output type's fields as columns, tokens, cost and
the error code. Its ``repr`` and ``_repr_html_`` are a short summary table; every string in the
HTML is escaped (the inputs and answers are untrusted text).
"""

from __future__ import annotations

import html
import importlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from decimal import Decimal
from typing import Any, overload

from pydantic import BaseModel

from loom_nb.chat._cost import format_cost
from loom_nb.chat._money import tokens_text
from loom_nb.content import LlmResponse, Usage, text_of
from loom_nb.errors import ConfigurationError, LoomError

__all__ = ["MapResult"]

_PREVIEW_ROWS = 10
_PREVIEW_CHARS = 80


class MapResult(Sequence[LlmResponse | None]):
    """The responses of ``chat.map(inputs)`` in input order (None where an item failed).

    ``errors`` maps an index to its error (a ``LoomError``: the live one, or one rebuilt from
    the journal with the recorded ``code`` and message); ``usage`` and ``cost`` sum the answered
    items (``cost`` None when any answer's price is unknown); ``outputs`` are the validated
    ``output_type`` instances (None where there is none); ``to_pandas()`` is the table.
    ``served`` counts the items served from the journal, ``ran`` those that ran now, ``pacing``
    says how the calls were paced. ``id`` is the map's execution id in the journal.
    """

    def __init__(
        self,
        *,
        id: str,
        responses: Sequence[LlmResponse | None],
        errors: Mapping[int, LoomError],
        inputs: Sequence[str],
        labels: Sequence[Any],
        price: Callable[[LlmResponse], Decimal | None] | None = None,
        served: int = 0,
        ran: int = 0,
        stopped: bool = False,
        pacing: Mapping[str, Any] | None = None,
    ) -> None:
        self.id = id
        """The map's execution id (``<chat id>/map-<key>``)."""
        self._responses = list(responses)
        self.errors: dict[int, LoomError] = dict(sorted(errors.items()))
        """Index -> the error of each item that has no response."""
        self.inputs = list(inputs)
        """Each input's text, in order."""
        self.labels = list(labels)
        """Each input's label (a Series' index, else its position)."""
        self._price = price
        self._costs: list[Decimal | None] | None = None  # priced on first use
        self.served = served
        """How many items were served from the journal (no model call)."""
        self.ran = ran
        """How many items made a model call now."""
        self.stopped = stopped
        """Whether the map was stopped before every item ran."""
        self.pacing: dict[str, Any] = dict(pacing or {})
        """How the calls were paced: ``max_in_flight``, ``throttled`` (calls refused for their
        rate) and ``limits`` (every in-flight limit taken, in order)."""

    # -- the sequence ----------------------------------------------------------------------

    @overload
    def __getitem__(self, index: int) -> LlmResponse | None: ...
    @overload
    def __getitem__(self, index: slice) -> list[LlmResponse | None]: ...
    def __getitem__(self, index: int | slice) -> LlmResponse | list[LlmResponse | None] | None:
        return self._responses[index]

    def __len__(self) -> int:
        return len(self._responses)

    def __iter__(self) -> Iterator[LlmResponse | None]:
        return iter(self._responses)

    # -- totals ----------------------------------------------------------------------------

    @property
    def usage(self) -> Usage:
        """Tokens of every answered item, summed."""
        total = Usage()
        for response in self._responses:
            if response is not None:
                total = total + response.usage
        return total

    @property
    def cost(self) -> Decimal | None:
        """USD cost of every answered item; None when any answer's price is unknown."""
        total = Decimal(0)
        for response, cost in zip(self._responses, self.costs, strict=True):
            if response is None:
                continue
            if cost is None:
                return None
            total += cost
        return total

    @property
    def costs(self) -> list[Decimal | None]:
        """Each item's USD cost (None where it failed or its price is unknown)."""
        if self._costs is None:
            price = self._price
            self._costs = [
                price(r) if r is not None and price is not None else None for r in self._responses
            ]
        return list(self._costs)

    @property
    def outputs(self) -> list[BaseModel | None]:
        """Each item's validated ``output_type`` instance (None where it has none)."""
        out: list[BaseModel | None] = []
        for response in self._responses:
            value = response.output if response is not None else None
            out.append(value if isinstance(value, BaseModel) else None)
        return out

    @property
    def failed(self) -> list[int]:
        """The indices of the items without a response."""
        return list(self.errors)

    # -- the table -------------------------------------------------------------------------

    def to_pandas(self) -> Any:
        """One row per input: ``input``, ``text`` (the reply), each output field, tokens, cost, error.

        Needs pandas (``pip install pandas``); the index is the inputs' labels.
        """
        try:
            pd: Any = importlib.import_module("pandas")
        except ImportError as exc:
            raise ConfigurationError(
                "MapResult.to_pandas() needs pandas: pip install pandas (or read the result as a "
                "list: its responses, .outputs and .errors).",
                code="pandas_not_installed",
            ) from exc
        rows = []
        costs = self.costs
        for index, response in enumerate(self._responses):
            row: dict[str, Any] = {"input": self.inputs[index]}
            row["text"] = text_of(response.content) if response is not None else None
            output = response.output if response is not None else None
            if isinstance(output, BaseModel):
                row.update(output.model_dump())
            elif output is not None:
                row["output"] = output
            row["input_tokens"] = response.usage.input_tokens if response is not None else None
            row["output_tokens"] = response.usage.output_tokens if response is not None else None
            row["cost"] = costs[index] if response is not None else None
            error = self.errors.get(index)
            row["error"] = error.code if error is not None else None
            rows.append(row)
        return pd.DataFrame(rows, index=pd.Index(self.labels))

    # -- display ---------------------------------------------------------------------------

    def summary(self) -> str:
        """``1,000 items · 998 answered · 2 failed · 12,345 in · 6,789 out · $0.0123``."""
        parts = [
            f"{len(self):,} items",
            f"{len(self) - len(self.errors):,} answered",
            f"{len(self.errors):,} failed",
            tokens_text(self.usage),
            format_cost(self.cost),
        ]
        if self.served:
            parts.append(f"{self.served:,} from the journal")
        if self.stopped:
            parts.append("stopped")
        return " · ".join(parts)

    def __repr__(self) -> str:
        lines = [f"MapResult({self.summary()})"]
        for index in list(self.errors)[:_PREVIEW_ROWS]:
            error = self.errors[index]
            lines.append(f"  [{index}] {error.code}: {_short(error.message)}")
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        esc = html.escape
        head = "".join(f"<th>{esc(h)}</th>" for h in ("", "input", "reply", "error"))
        body = []
        for index, response in enumerate(self._responses[:_PREVIEW_ROWS]):
            error = self.errors.get(index)
            reply = text_of(response.content) if response is not None else ""
            body.append(
                "<tr>"
                f"<td>{esc(str(self.labels[index]))}</td>"
                f"<td>{esc(_short(self.inputs[index]))}</td>"
                f"<td>{esc(_short(reply))}</td>"
                f"<td>{esc(error.code) if error is not None else ''}</td>"
                "</tr>"
            )
        more = len(self) - _PREVIEW_ROWS
        tail = f"<p>… {more:,} more (to_pandas() has them all)</p>" if more > 0 else ""
        return (
            f'<div class="loom-map-result"><b>MapResult</b> {esc(self.summary())}'
            f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"
            f"{tail}</div>"
        )


def _short(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= _PREVIEW_CHARS else flat[: _PREVIEW_CHARS - 1] + "…"
