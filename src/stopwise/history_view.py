"""``HistoryView``: an immutable sequence of messages that shares the run's history instead of copying it.

A run's history only grows: a step appends its rows, nothing is changed or removed in place. So a view of its
first ``n`` rows stays the same for as long as anybody holds it, and every reader of a step (the model request,
the guardrail contexts, the stop guard's, ``prepare_step``'s) can be handed one in constant time, where a tuple
would copy the whole history for each of them, a cost that grows with the run.

A ``HistoryView`` behaves as a tuple of messages does for a reader: ``len``, indexing, slicing (a slice is a
``HistoryView`` too, made without copying), iteration both ways, ``in``, ``index``, ``count``, ``==`` with a tuple
or another view (element by element), ``hash`` (a tuple's of the same rows), ``+`` with a tuple or a
view on either side. It cannot be changed. ``isinstance(t, tuple)`` is false: a caller who needs a tuple
makes one with ``tuple(t)``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from itertools import chain
from typing import Any, overload

from stopwise.messages import Message

__all__ = ["HistoryView"]


class HistoryView(Sequence[Message]):
    """An immutable sequence of messages; see the module's docstring. ``HistoryView(rows)`` copies ``rows`` once;
    the loop makes its views with ``HistoryView.of_log``, which copies nothing."""

    __slots__ = ("_head", "_rows", "_start", "_stop", "_tail")

    _head: tuple[Message, ...]
    _rows: Sequence[Message]
    _start: int
    _stop: int
    _tail: tuple[Message, ...]

    def __init__(self, rows: Iterable[Message] = ()) -> None:
        self._set((), (), 0, 0, tuple(rows))

    def _set(
        self, head: tuple[Message, ...], rows: Sequence[Message], start: int, stop: int, tail: tuple[Message, ...]
    ) -> None:
        self._head, self._rows, self._start, self._stop, self._tail = head, rows, start, stop, tail

    @classmethod
    def _make(
        cls, head: tuple[Message, ...], rows: Sequence[Message], start: int, stop: int, tail: tuple[Message, ...]
    ) -> HistoryView:
        t = cls.__new__(cls)
        t._set(head, rows, start, max(start, stop), tail)
        return t

    @classmethod
    def of_log(cls, log: Sequence[Message], length: int | None = None, tail: Iterable[Message] = ()) -> HistoryView:
        """The first ``length`` rows of ``log`` (all of them by default), then ``tail``, sharing ``log``'s rows.

        The caller promises that those rows of ``log`` never change: ``log`` is only ever appended to."""
        stop = len(log) if length is None else length
        if not 0 <= stop <= len(log):
            raise ValueError(f"length {stop} is outside the log's {len(log)} rows")
        return cls._make((), log, 0, stop, tuple(tail))

    def __len__(self) -> int:
        return len(self._head) + (self._stop - self._start) + len(self._tail)

    def __iter__(self) -> Iterator[Message]:
        # By index, not islice: islice would walk the log from its first row to a view's start.
        middle = map(self._rows.__getitem__, range(self._start, self._stop))
        return chain(self._head, middle, self._tail)

    def __reversed__(self) -> Iterator[Message]:
        middle = map(self._rows.__getitem__, range(self._stop - 1, self._start - 1, -1))
        return chain(reversed(self._tail), middle, reversed(self._head))

    @overload
    def __getitem__(self, index: int) -> Message: ...

    @overload
    def __getitem__(self, index: slice) -> HistoryView: ...

    def __getitem__(self, index: int | slice) -> Message | HistoryView:
        if isinstance(index, slice):
            return self._slice(index)
        n = len(self)
        i = index.__index__()
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError("HistoryView index out of range")
        if i < len(self._head):
            return self._head[i]
        i -= len(self._head)
        middle = self._stop - self._start
        if i < middle:
            return self._rows[self._start + i]
        return self._tail[i - middle]

    def _slice(self, index: slice) -> HistoryView:
        start, stop, step = index.indices(len(self))
        if step != 1:
            return HistoryView(tuple(self)[index])
        if stop <= start:
            return HistoryView()
        h, middle = len(self._head), self._stop - self._start
        head = self._head[start:stop]
        lo, hi = min(max(start - h, 0), middle), min(max(stop - h, 0), middle)
        tail = self._tail[max(start - h - middle, 0) : max(stop - h - middle, 0)]
        return HistoryView._make(head, self._rows, self._start + lo, self._start + hi, tail)

    def __contains__(self, value: object) -> bool:
        return any(m is value or m == value for m in self)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, (HistoryView, tuple)):
            return NotImplemented
        return len(self) == len(other) and all(a is b or a == b for a, b in zip(self, other, strict=True))

    def __ne__(self, other: object) -> bool:
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __add__(self, other: Any) -> HistoryView:
        if isinstance(other, HistoryView):
            if not self._tail and not other._head and other._rows is self._rows and other._start == self._stop:
                return HistoryView._make(self._head, self._rows, self._start, other._stop, other._tail)
            other = tuple(other)
        if not isinstance(other, tuple):
            return NotImplemented
        return HistoryView._make(self._head, self._rows, self._start, self._stop, self._tail + other)

    def __radd__(self, other: Any) -> HistoryView:
        if not isinstance(other, tuple):
            return NotImplemented
        return HistoryView._make(other + self._head, self._rows, self._start, self._stop, self._tail)

    def __repr__(self) -> str:
        return f"HistoryView({tuple(self)!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickled (and deep-copied) as the rows it shows, not the whole log it shares.
        return (HistoryView, (tuple(self),))
