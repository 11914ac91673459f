"""Where a running map takes its next item from: this process's own list.

``chat.map`` serves what finished, then its workers take the items left one at a time from an
``ItemSource``. ``LocalItems`` is the list this process computed; a rate-limited item goes back to
its end. A joined map (``join=True``) does not use a source: its items are claimed from the
journal's work queue by ``_map_join``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    pass

__all__ = ["ItemSource", "LocalItems"]


class ItemSource(Protocol):
    """The items a map's workers run: ``take`` the next (None: none left), ``again`` to put one
    back (it was rate-limited), ``settled`` once it was answered or failed for good."""

    async def take(self) -> int | None:
        """The index of the next item to run, or None when there is none left for this worker."""
        ...

    def again(self, index: int) -> None:
        """Put ``index`` back: it is to run again later."""
        ...

    def settled(self, index: int) -> None:
        """``index`` ended (answered, or failed for good)."""
        ...


class LocalItems:
    """The items this process found left to run, in order; a put-back item goes last."""

    def __init__(self, indices: Iterable[int]) -> None:
        self._queue = deque(indices)

    async def take(self) -> int | None:
        """The next index, or None when the list is empty."""
        return self._queue.popleft() if self._queue else None

    def again(self, index: int) -> None:
        """Append ``index`` to run after the others."""
        self._queue.append(index)

    def settled(self, index: int) -> None:
        """Nothing to release: the list is this process's own."""

    def __len__(self) -> int:
        return len(self._queue)
