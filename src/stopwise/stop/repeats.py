"""What counts as "the same call" for the repeat limit (``ThresholdPolicy.repeat_limit``): the tool's name and
its arguments in a canonical form (``canonical_args``), so a model cannot dodge the limit by re-sending one call
dressed differently.

Canonical means equal as JSON values and as a reader would see them: object keys in any order, a number written
``1`` or ``1.0``, and a text that differs only in spacing (leading, trailing, or runs of whitespace) are the same.
A ``true`` is not the number ``1``, list order matters, and a changed text or an extra field (a fresh nonce)
makes another call: those are left to the guardian's stagnation question, which reads near repeats and results
that bring nothing new.

``Streak`` counts how many times in a row a run's latest call was made, on those keys (pure: the native loop keeps
one on its leg in ``Repeats`` and extends it step by step, the peer integrations count a run's rows with it).

``Cycles`` finds the other common spin: two to ``MAX_PERIOD`` steps made again and again in the same order
(``search(q)``, ``open(url)``, ``search(q)``, ``open(url)``...), which never makes one call twice in a row. Its unit
is a step, not a call: a reply's calls, as an unordered set of keys (a model sends parallel calls in any order, and
the calls of one reply ran together), are one element of the cycle. ``Cycles.latest`` is the latest run of whole
repetitions of such a cycle (``Cycle``) when its steps hold at least two different calls; one call repeated is the
streak's, counted per call as it always was. State is a fold over the steps, ``O(MAX_PERIOD)`` per step and the last
``MAX_PERIOD`` steps kept, so the loop extends it step by step; ``Cycles.of`` reads it from a span's newest row back
only as far as the repetition goes.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from stopwise.messages import Message, ToolCall

__all__ = ["MAX_PERIOD", "Cycle", "Cycles", "Repeats", "Streak", "canonical_args"]

MAX_PERIOD = 4
"""The longest cycle, in steps, that ``Cycles`` looks for. Four covers the spins seen in practice (search/open,
search/open/read, list/open/read/close) at a cost of four comparisons a step; a longer cycle of the very same calls
with the very same arguments takes ``period x repeat_limit`` steps to see, by when the stagnation question and the
budgets have had many turns to act on it."""

Key = tuple[str, str]
"""A call as the repeat counts compare it: its tool's name and its canonical arguments (or a redacted call's key)."""

StepKeys = tuple[Key, ...]
"""One step's calls as a cycle element: their keys, sorted (the calls of one reply are unordered)."""


def canonical_args(args: Any) -> str:
    """``args`` as canonical JSON text: equal for two argument values that are the same call (see the module)."""
    return json.dumps(_canonical(args), sort_keys=True, default=str, ensure_ascii=False, separators=(",", ":"))


def _canonical(value: Any) -> Any:
    if isinstance(value, str):
        return " ".join(value.split())
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {str(k): _canonical(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_canonical(v) for v in value]
    return value


@dataclass(frozen=True, slots=True)
class Streak:
    """The latest run of one repeated call (same tool, same arguments) in a span of rows: its call's key, and how
    many times in a row it was made."""

    key: Key | None = None
    count: int = 0

    @classmethod
    def of(
        cls, rows: Sequence[Message], keys: Mapping[str, str] | None = None, start: int = 0, at_most: int | None = None
    ) -> Streak:
        """The streak at the end of ``rows[start:]`` (oldest first), read from the newest row back only as far as
        the streak goes. ``keys``: per call id, the key that stands for a call's arguments when its logged ones are
        not the model's (a redacted call's). ``at_most``: stop reading once the count reaches it (a caller that
        only asks whether a limit is reached)."""
        key, count = None, 0
        for i in range(len(rows) - 1, start - 1, -1):
            for c in reversed(rows[i].tool_calls):
                k = _key(c, keys)
                if key is None:
                    key = k
                elif k != key:
                    return cls(key, count)
                count += 1
                if at_most is not None and count >= at_most:
                    return cls(key, count)
        return cls(key, count)

    def after(self, key: Key) -> Streak:
        """This streak followed by one more call, ``key``."""
        return Streak(key, self.count + 1 if key == self.key else 1)


def _key(call: ToolCall, keys: Mapping[str, str] | None) -> Key:
    return (call.name, (keys.get(call.id) if keys else None) or canonical_args(call.args))


def _step_keys(row: Message, keys: Mapping[str, str] | None) -> StepKeys | None:
    """A row's calls as one cycle element; None for a row without calls (it leaves the cycles as they are)."""
    if not row.tool_calls:
        return None
    return tuple(sorted(_key(c, keys) for c in row.tool_calls))


@dataclass(frozen=True, slots=True)
class Cycle:
    """The latest run of a repeated cycle of steps: each step's tool names (a step's calls sorted, as compared),
    one repetition, oldest first; and how many whole repetitions were made in a row. Names only: a decision
    record keeps it, and arguments may hold what the log must not."""

    steps: tuple[tuple[str, ...], ...]
    count: int

    @property
    def reason(self) -> str:
        """In words, naming the calls: ``the calls search, open were made in the same order 3 times in a row``; a
        step of several calls is written ``a + b``, and a cycle of one such step is made ``together``."""
        calls = ", ".join(" + ".join(names) for names in self.steps)
        how = "together" if len(self.steps) == 1 else "in the same order"
        return f"the calls {calls} were made {how} {self.count} times in a row"

    def to_data(self) -> dict[str, Any]:
        return {"steps": [list(names) for names in self.steps], "count": self.count}

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> Cycle:
        return cls(tuple(tuple(names) for names in data["steps"]), data["count"])


@dataclass(frozen=True, slots=True)
class Cycles:
    """What cycle detection knows after a span of steps: the latest ``MAX_PERIOD`` steps' calls (oldest first),
    and per period ``p`` (``runs[p - 1]``) how many of the latest steps in a row each equal the step ``p`` before
    it. A cycle of period ``p`` then spans ``runs[p - 1] + p`` steps."""

    tail: tuple[StepKeys, ...] = ()
    runs: tuple[int, ...] = (0,) * MAX_PERIOD

    def then(self, rows: Sequence[Message], keys: Mapping[str, str] | None = None) -> Cycles:
        """These cycles extended by ``rows`` (oldest first; rows without calls leave them as they are). The plain
        fold, kept as the definition the two faster paths are checked against (``tests/test_cycles.py``):
        ``Cycles.of`` reads the same back from the newest row, and ``Repeats.then``, the loop's fold, keys each call
        once for the streak and the cycles together."""
        state = self
        for row in rows:
            step = _step_keys(row, keys)
            if step is not None:
                state = state._add(step)
        return state

    def _add(self, step: StepKeys) -> Cycles:
        tail, n = self.tail, len(self.tail)
        runs = tuple(self.runs[p - 1] + 1 if n >= p and tail[n - p] == step else 0 for p in range(1, MAX_PERIOD + 1))
        return Cycles((*tail, step)[-MAX_PERIOD:], runs)

    @classmethod
    def of(
        cls, rows: Sequence[Message], keys: Mapping[str, str] | None = None, start: int = 0, at_most: int | None = None
    ) -> Cycles:
        """The cycles at the end of ``rows[start:]``, equal to ``Cycles().then(rows[start:], keys)`` but read from
        the newest row back only as far as the longest repetition goes. ``at_most``: read no further once a cycle
        of any period has that many whole repetitions (a caller that only asks whether a limit is reached)."""
        newest: list[StepKeys] = []  # the steps read so far, newest first
        i = len(rows) - 1

        def step(k: int) -> StepKeys | None:
            """The k-th newest step (0: the newest), reading further back as needed; None before the span."""
            nonlocal i
            while len(newest) <= k and i >= start:
                found = _step_keys(rows[i], keys)
                i -= 1
                if found is not None:
                    newest.append(found)
            return newest[k] if k < len(newest) else None

        runs = []
        for p in range(1, MAX_PERIOD + 1):
            cap = None if at_most is None else (at_most - 1) * p
            run = 0
            while (cap is None or run < cap) and (s := step(run)) is not None and s == step(run + p):
                run += 1
            runs.append(run)
        step(MAX_PERIOD - 1)
        return cls(tuple(reversed(newest[:MAX_PERIOD])), tuple(runs))

    @property
    def latest(self) -> Cycle | None:
        """The latest run of a repeated cycle, of at least two whole repetitions and two different calls: the
        period with the most whole repetitions (the shorter on a tie), named from where its run began. None when
        there is none (one call repeated is ``Streak``'s)."""
        tail, runs = self.tail, self.runs
        best, most = 0, 1
        for p in range(1, min(MAX_PERIOD, len(tail)) + 1):
            count = (runs[p - 1] + p) // p
            if count > most and len({k for s in tail[-p:] for k in s}) > 1:
                best, most = p, count
        if not best:
            return None
        window = tail[-best:]
        turn = (best - (runs[best - 1] + best) % best) % best  # the run began at this step of the window
        return Cycle(tuple(tuple(name for name, _ in s) for s in window[turn:] + window[:turn]), most)


@dataclass(frozen=True, slots=True)
class Repeats:
    """A run's ``Streak`` and ``Cycles`` together, extended row by row with each call keyed once: the fold the native
    loop keeps on its leg (``Repeats().then(rows)`` equals ``Streak.of(rows)`` and ``Cycles().then(rows)``)."""

    streak: Streak = Streak()
    cycles: Cycles = Cycles()

    @classmethod
    def of(
        cls, rows: Sequence[Message], keys: Mapping[str, str] | None = None, start: int = 0, at_most: int | None = None
    ) -> Repeats:
        """The repeats at the end of ``rows[start:]`` (``Streak.of`` and ``Cycles.of``), equal to
        ``Repeats().then(rows[start:], keys)`` but read from the newest row back only as far as the repetitions go.
        ``at_most``: each reads no further once its count reaches it. A ``start`` past the rows reads none."""
        return cls(Streak.of(rows, keys, start, at_most), Cycles.of(rows, keys, start, at_most))

    def then(self, rows: Sequence[Message], keys: Mapping[str, str] | None = None) -> Repeats:
        """These repeats extended by ``rows`` (oldest first; rows without calls leave them as they are)."""
        streak, cycles = self.streak, self.cycles
        for row in rows:
            if not row.tool_calls:
                continue
            step = [_key(c, keys) for c in row.tool_calls]
            for key in step:
                streak = streak.after(key)
            cycles = cycles._add(tuple(sorted(step)))
        return Repeats(streak, cycles)
