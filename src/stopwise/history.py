"""Bounded context: history processors shape what the model is sent; the log keeps everything.

``Agent(history_processors=[...])`` applies each processor, in order, to the history before every model call. A
processor is ``fn(messages) -> messages`` (sync or ``async def``); the built-ins cut at step boundaries, so a tool
result never loses the call it answers:

- ``keep_last_steps(n)``: the opening input (the rows before the first reply) and the last ``n`` steps;
- ``token_budget(max_tokens)``: the opening input and as many of the latest steps as fit (the last always stays);
- ``summarise(fn, keep_last=n)``: like ``keep_last_steps(n)``, with the dropped steps replaced by one automated row
  holding ``fn(dropped_rows)`` (sync or async: a model call, typically).

What a step's call was not sent is recorded in its log entry (``HistoryRecord``): the positions of the dropped rows
in the history, and how many rows a processor added. A processor that raises, or returns anything but messages,
fails the run (``history_processor_failed``).
"""

from __future__ import annotations

import bisect
import inspect
import itertools
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, TypeAlias, overload

from stopwise.errors import ConfigError
from stopwise.messages import Message, Role, automated_feedback

__all__ = ["HistoryProcessor", "HistoryRecord", "Positions", "keep_last_steps", "summarise", "token_budget"]

HistoryProcessor: TypeAlias = Callable[[Sequence[Message]], "Sequence[Message] | Awaitable[Sequence[Message]]"]


class Positions(Sequence[int]):
    """Ascending row positions kept as runs of consecutive ones: a trimmed history drops one run (the steps before
    the kept ones) however long the session, so its record stays a few numbers, not one per row. Reads as the
    tuple of the positions (``len``, indexing, iteration, ``==`` with a tuple or list of ints)."""

    __slots__ = ("_len", "_starts", "runs")

    runs: tuple[tuple[int, int], ...]
    """The half-open ``(start, stop)`` runs, ascending, none empty or touching the next."""

    def __init__(self, runs: Iterable[tuple[int, int]] = ()) -> None:
        merged: list[tuple[int, int]] = []
        for start, stop in runs:
            if type(start) is not int or type(stop) is not int or start < 0:
                raise ValueError(f"a run is two positions (integers, from 0), got {start!r}, {stop!r}")
            if stop <= start:
                continue
            if merged and start <= merged[-1][1]:
                if start < merged[-1][0] or stop <= merged[-1][1]:
                    raise ValueError(f"runs must ascend without overlap, got {start}-{stop} after {merged[-1]}")
                merged[-1] = (merged[-1][0], stop)
            else:
                merged.append((start, stop))
        self.runs = tuple(merged)
        self._starts = tuple(itertools.accumulate((b - a for a, b in merged), initial=0))
        self._len = self._starts[-1]

    @classmethod
    def of(cls, positions: Iterable[int]) -> Positions:
        """``positions`` (ascending ints) as runs."""
        return cls((p, p + 1) for p in positions)

    @classmethod
    def missing(cls, length: int, present: Iterable[int]) -> Positions:
        """The positions of ``range(length)`` not in ``present``: a walk of ``present``, not of ``length``."""
        runs: list[tuple[int, int]] = []
        at = 0
        for p in sorted(set(present)):
            if p > at:
                runs.append((at, min(p, length)))
            at = max(at, p + 1)
        if at < length:
            runs.append((at, length))
        return cls(runs)

    def __len__(self) -> int:
        return self._len

    @overload
    def __getitem__(self, index: int) -> int: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[int, ...]: ...

    def __getitem__(self, index: int | slice) -> int | tuple[int, ...]:
        if isinstance(index, slice):
            return tuple(self)[index]
        if index < 0:
            index += self._len
        if not 0 <= index < self._len:
            raise IndexError("position index out of range")
        run = bisect.bisect_right(self._starts, index) - 1
        return self.runs[run][0] + index - self._starts[run]

    def __iter__(self) -> Iterator[int]:
        return itertools.chain.from_iterable(range(a, b) for a, b in self.runs)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Positions):
            return self.runs == other.runs
        if isinstance(other, (tuple, list)):
            return len(other) == self._len and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    def __hash__(self) -> int:
        # Equal to the tuple of its positions, so it hashes as that tuple (a set or dict key may mix the two).
        return hash(tuple(self))

    def __repr__(self) -> str:
        return f"Positions({list(self.runs)!r})"


@dataclass(frozen=True, slots=True)
class HistoryRecord:
    """What one model call was not sent of the history, as the step's log entry keeps it."""

    TYPE: ClassVar[str] = "history"
    step: int
    dropped: Positions
    """Positions (0-based, in the session's history as the step began) of the rows the model was not sent; a
    tuple or list of ints given here is kept as ``Positions``."""
    added: int = 0
    """Rows a processor added (a summary) that are not in the log."""
    sent: int = 0
    """Rows the model was sent (besides the system instructions)."""

    def __post_init__(self) -> None:
        if not isinstance(self.dropped, Positions):
            object.__setattr__(self, "dropped", Positions.of(self.dropped))

    def to_data(self) -> dict[str, Any]:
        """The log's form: the dropped positions as runs (``dropped_runs``, half-open ``[start, stop]`` pairs)."""
        return {
            "type": self.TYPE,
            "step": self.step,
            "dropped_runs": [list(run) for run in self.dropped.runs],
            "added": self.added,
            "sent": self.sent,
        }

    def to_view(self) -> dict[str, Any]:
        """A reader's form (``stopwise show --json``): every dropped position listed."""
        dropped = list(self.dropped)
        return {"type": self.TYPE, "step": self.step, "dropped": dropped, "added": self.added, "sent": self.sent}

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> HistoryRecord:
        """Reads both forms: ``dropped_runs``, and the list of positions (``dropped``) logs written before kept."""
        runs = data.get("dropped_runs")
        dropped = Positions((a, b) for a, b in runs) if runs is not None else Positions.of(data.get("dropped", ()))
        return cls(data["step"], dropped, data.get("added", 0), data.get("sent", 0))

    def describe(self) -> str:
        """One line for a reader: what the model call was sent of the history, and what it was not."""
        parts = [f"{self.sent} rows sent"]
        if self.dropped:
            parts.append(f"{len(self.dropped)} not sent ({_spans(self.dropped)})")
        if self.added:
            parts.append(f"{self.added} added by a processor")
        return ", ".join(parts)


def _spans(positions: Positions) -> str:
    """``0, 1, 2, 5`` as ``rows 0-2, 5``: dropped rows come in runs (whole steps), so a long run reads short."""
    return "rows " + ", ".join(str(a) if b == a + 1 else f"{a}-{b - 1}" for a, b in positions.runs)


def _steps(messages: Sequence[Message]) -> tuple[list[Message], list[list[Message]]]:
    """The opening input (rows before the first reply) and the steps: each reply with the rows after it."""
    opening: list[Message] = []
    steps: list[list[Message]] = []
    for m in messages:
        if m.role is Role.ASSISTANT:
            steps.append([m])
        elif steps:
            steps[-1].append(m)
        else:
            opening.append(m)
    return opening, steps


def _opening(messages: Sequence[Message]) -> int:
    """How many rows come before the first reply (all of them when there is none)."""
    for i, m in enumerate(messages):
        if m.role is Role.ASSISTANT:
            return i
    return len(messages)


def _last_steps(messages: Sequence[Message], first: int) -> Iterator[tuple[int, int]]:
    """The steps as ``(start, stop)`` positions, the latest first, walking back no further than the caller reads:
    a processor that keeps the tail of a long run reads the tail (``first``: the opening's length)."""
    stop = len(messages)
    for i in range(stop - 1, first - 1, -1):
        if messages[i].role is Role.ASSISTANT:
            yield i, stop
            stop = i


def _positive(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(name, f"must be a positive int, got {value!r}")
    return value


def keep_last_steps(n: int) -> HistoryProcessor:
    """The opening input and the last ``n`` steps (each reply with its tool results and feedback)."""
    _positive("keep_last_steps", n)

    def keep(messages: Sequence[Message]) -> list[Message]:
        first = _opening(messages)
        kept = list(itertools.islice(_last_steps(messages, first), n))
        return [*messages[:first], *messages[kept[-1][0] if kept else first :]]

    return keep


def _approx_tokens(message: Message) -> int:
    # About four characters a token for English text; calls' arguments count too.
    size = len(message.content) + sum(len(c.name) + len(str(c.args)) for c in message.tool_calls)
    return size // 4 + 4


def token_budget(max_tokens: int, count: Callable[[Message], int] = _approx_tokens) -> HistoryProcessor:
    """The opening input and as many of the latest steps as fit in ``max_tokens`` by ``count`` (default: about
    four characters a token); the latest step always stays, even if it alone is over."""
    _positive("token_budget", max_tokens)

    def fit(messages: Sequence[Message]) -> list[Message]:
        first = _opening(messages)
        opening = messages[:first]
        used = sum(count(m) for m in opening)
        kept_from = len(messages)
        for start, stop in _last_steps(messages, first):
            size = sum(count(messages[i]) for i in range(start, stop))
            if kept_from < len(messages) and used + size > max_tokens:
                break
            kept_from = start
            used += size
        return [*opening, *messages[kept_from:]]

    return fit


def summarise(fn: Callable[[Sequence[Message]], str | Awaitable[str]], *, keep_last: int = 3) -> HistoryProcessor:
    """Like ``keep_last_steps(keep_last)``, but the dropped steps are replaced by one automated row with
    ``fn(dropped_rows)``, a summary (``fn`` may be async). Nothing is dropped, and ``fn`` is not called, while the
    history has ``keep_last`` steps or fewer."""
    _positive("summarise.keep_last", keep_last)

    async def condense(messages: Sequence[Message]) -> list[Message]:
        opening, steps = _steps(messages)
        if len(steps) <= keep_last:
            return list(messages)
        dropped = [m for step in steps[:-keep_last] for m in step]
        summary = fn(dropped)
        if inspect.isawaitable(summary):
            summary = await summary
        row = automated_feedback(f"Summary of the earlier steps: {summary}", source="history_summary")
        return [*opening, row, *(m for step in steps[-keep_last:] for m in step)]

    return condense
