"""Where each row of a leg's log is, by the row's identity, kept up to date as the log grows.

The history processors hand back rows, not positions; what a step's call was not sent (``HistoryRecord``) is the
positions of the logged rows they left out. Looking the rows they kept up here costs the rows kept, where a map
of the whole log built every step would cost the run's length on every step of a long run.
"""

from __future__ import annotations

from collections.abc import Mapping

from stopwise.messages import Message

__all__ = ["RowPositions"]


class RowPositions:
    """``of(log)`` maps ``id(row)`` to the positions of that row object in ``log`` (more than one when the same
    row object was logged twice). The map is extended with the rows appended since the last call; a different list
    (the leg's start replaces its ``messages`` once) is mapped afresh. The log's rows are never changed in place
    and the log holds them, so an id stays that row's while it is mapped."""

    __slots__ = ("_at", "_log", "_seen")

    def __init__(self) -> None:
        self._log: list[Message] | None = None
        self._at: dict[int, list[int]] = {}
        self._seen = 0

    def of(self, log: list[Message]) -> Mapping[int, list[int]]:
        if log is not self._log:
            self._log, self._at, self._seen = log, {}, 0
        at = self._at
        for i in range(self._seen, len(log)):
            at.setdefault(id(log[i]), []).append(i)
        self._seen = len(log)
        return at
