"""The copies of logged rows a user hook reads, so that nothing it changes in place reaches the log or the model.

A row's call arguments and metadata are plain dicts, so a hook handed the log's own rows (a ``stop_when``
predicate, ``prepare_step``, a guardrail or the stop guard through its context, a history processor) could change
what the model is sent next and what is recorded. It is handed copies instead, made only for the rows it reads, and
each logged row at most once in a run leg: ``RowCopies`` (held by the leg, the loop's state) keeps the copy of every
row read so far, and ``CopiedRows`` is the log as a hook reads it through that cache. A hook walking the whole log
every step thus copies each row once, not once per step; what it changes of its copies may still be there on its
later steps (and, for the hooks that share the leg's cache, in what the others are shown), and never anywhere else.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, overload

from stopwise.messages import Message, ToolCall

__all__ = ["CopiedRows", "RowCopies", "own_args", "own_call", "own_calls", "own_row", "own_value"]


class RowCopies:
    """The copy of each logged row read so far, by the row's identity: ``of(row)`` is the same copy every time for
    the same row object, and a new copy for any other; ``original(copy)`` is the row it was made from. The originals
    are kept with their copies, so a row's id is never reused for another while it is here."""

    __slots__ = ("_copies", "_originals")

    def __init__(self) -> None:
        self._copies: dict[int, tuple[Message, Message]] = {}
        self._originals: dict[int, Message] = {}

    def __len__(self) -> int:
        """How many rows have been copied."""
        return len(self._copies)

    def of(self, row: Message) -> Message:
        """``row``'s copy (``own_row``), made on its first read."""
        kept = self._copies.get(id(row))
        if kept is not None and kept[0] is row:
            return kept[1]
        copy = own_row(row)
        self._copies[id(row)] = (row, copy)
        self._originals[id(copy)] = row
        return copy

    def original(self, row: Message) -> Message:
        """The logged row ``row`` is this cache's copy of; ``row`` itself when it is not one of its copies."""
        return self._originals.get(id(row), row)


class CopiedRows(Sequence[Message]):
    """``log``'s rows, each read as its copy in ``copies``: a reader pays for the rows it reads the first time, not
    for the log's length. Indexed by ``int`` only, as ``HistoryView`` reads its rows."""

    __slots__ = ("_copies", "_log")

    def __init__(self, log: Sequence[Message], copies: RowCopies) -> None:
        self._log = log
        self._copies = copies

    def __len__(self) -> int:
        return len(self._log)

    @overload
    def __getitem__(self, index: int) -> Message: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[Message]: ...

    def __getitem__(self, index: int | slice) -> Message | Sequence[Message]:
        if isinstance(index, slice):
            return tuple(map(self._copies.of, self._log[index]))
        return self._copies.of(self._log[index])


def own_row(row: Message) -> Message:
    """A copy of ``row`` sharing nothing a reader can change: its calls' arguments and its metadata are copied."""
    # The constructors, not ``dataclasses.replace`` (half the cost again): this runs for every row a predicate
    # reads. A field added to Message or ToolCall is added here too (tests/test_step_view.py compares the copies).
    calls = own_calls(row.tool_calls) if row.tool_calls else ()
    return Message(row.role, row.content, calls, row.tool_call_id, own_value(dict(row.metadata)))


def own_calls(calls: Sequence[ToolCall]) -> tuple[ToolCall, ...]:
    """Copies of ``calls`` with their arguments copied."""
    return tuple(map(own_call, calls))


def own_call(call: ToolCall) -> ToolCall:
    """A copy of ``call`` with its arguments copied."""
    return ToolCall(call.name, own_value(call.args), call.id, call.wire_id)


def own_args(args: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of a call's ``args`` sharing no list or dict with them."""
    return {k: own_value(v) for k, v in args.items()}


def own_value(value: Any) -> Any:
    """A copy of a JSON value's lists and dicts (the rest of it is immutable): cheaper than ``copy.deepcopy``. Any
    other object in it (a peer's own result type) is shared, not copied."""
    kind = type(value)
    if kind is dict:
        return {k: own_value(v) for k, v in value.items()}
    if kind is list:
        return [own_value(v) for v in value]
    return value
