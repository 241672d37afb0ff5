"""``stop_when`` conditions: predicates over a step that say why they fired.

A condition returns a reason string when it fires and ``None`` otherwise. Plain predicates returning a bool
are accepted and wrapped; conditions compose with ``|`` (any) and ``&`` (all). A predicate may be ``async def``
(or return an awaitable): the loop awaits it through ``StopCondition.evaluate``; calling such a condition
synchronously raises ``TypeError`` instead of treating the un-awaited coroutine as true.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeAlias

from stopwise._checks import check_function
from stopwise.errors import ConfigError
from stopwise.history_view import HistoryView
from stopwise.messages import TOOL_ERROR, Message, Reply, Role
from stopwise.row_copies import CopiedRows, RowCopies, own_calls, own_row
from stopwise.stop.repeats import Repeats

__all__ = [
    "StepView",
    "StopCondition",
    "as_condition",
    "has_tool_call",
    "is_looping",
    "step_count_is",
    "text_contains",
]


@dataclass(frozen=True, slots=True)
class StepView:
    """What a ``stop_when`` predicate sees of the step that just ran (after its tools)."""

    number: int
    """Steps taken against the budget in this run leg, this one included (1-based)."""
    reply: Reply
    tool_results: tuple[Message, ...]
    """The tool rows this step produced, in call order."""
    messages: Sequence[Message]
    """The session's log up to and including this step's reply and its tool rows, in log order (an immutable
    sequence that shares the run's log and hands out a copy of each row it is read for, the same copy each time
    in a run leg): the step's reply is its last assistant row, on a fresh step as on one settled after an
    approval."""
    run_start: int = 0
    """Index in ``messages`` of this run's first row (the rows before it are the session's earlier runs)."""

    @property
    def tool_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.reply.tool_calls)

    @classmethod
    def detached(
        cls,
        number: int,
        reply: Reply,
        rows: Sequence[Message],
        log: Sequence[Message],
        run_start: int = 0,
        *,
        reply_logged: bool = False,
        logged: Collection[str] = (),
        copies: RowCopies | None = None,
    ) -> StepView:
        """The view a predicate gets of a step not committed yet: ``log`` (committed rows), then what the step adds
        to it: the reply's row, then the ``rows`` in order. A step settled after a suspension has part of it in
        ``log`` already: its reply's row (``reply_logged``) and the rows of the calls in ``logged``, which are not
        added again.

        Every row a predicate reads is a copy (a call's arguments and a row's metadata are plain dicts): the step's
        own rows are copied here, a row of ``log`` when it is first read, its copy kept in ``copies`` (the run
        leg's, so a row read again on a later step is the same copy; a view of its own when None). ``log`` is
        shared, not copied, so a view costs the same however long the run. The step is written to the log from the
        originals, so a predicate that changes what it is shown cannot change what is recorded nor what the model
        is sent next."""
        if reply.tool_calls:
            reply = replace(reply, tool_calls=own_calls(reply.tool_calls))
        results = tuple(map(own_row, rows))
        tail: list[Message] = [] if reply_logged else [Message(Role.ASSISTANT, reply.text, reply.tool_calls)]
        tail.extend([m for m in results if m.tool_call_id not in logged] if logged else results)
        shared = CopiedRows(log, RowCopies() if copies is None else copies)
        return cls(number, reply, results, HistoryView.of_log(shared, tail=tail), run_start)


Verdict: TypeAlias = "str | Awaitable[str | None] | None"
"""What a condition's check returns: the reason, or an awaitable of it for an async condition."""


class StopCondition:
    """A named predicate over a ``StepView`` that returns the reason it fired, or ``None``.

    ``await condition.evaluate(step)`` works for every condition, sync or async; ``condition(step)`` works for
    sync ones and raises ``TypeError`` for an async one."""

    __slots__ = ("_check", "is_async", "label")

    def __init__(self, check: Callable[[StepView], Verdict], label: str, *, is_async: bool = False) -> None:
        self._check = check
        self.label = label
        self.is_async = is_async
        """Whether the check is declared async (an ``async def`` predicate, or a composition with one)."""

    def __call__(self, step: StepView) -> str | None:
        if self.is_async:
            raise TypeError(f"stop_when {self.label} is async: use `await condition.evaluate(step)`")
        verdict = self._check(step)
        if inspect.isawaitable(verdict):
            _discard(verdict)
            raise TypeError(f"stop_when {self.label} is async: use `await condition.evaluate(step)`")
        return verdict

    async def evaluate(self, step: StepView) -> str | None:
        """The reason this condition fired on ``step``, or None; an async predicate is awaited."""
        verdict = self._check(step)
        return await verdict if inspect.isawaitable(verdict) else verdict

    def __or__(self, other: Any) -> StopCondition:
        right = as_condition(other)

        def any_of(step: StepView) -> Verdict:
            first = self._check(step)
            if inspect.isawaitable(first):
                return _any_async(first, right, step)
            return first or right._check(step)

        return StopCondition(any_of, f"({self.label} | {right.label})", is_async=self.is_async or right.is_async)

    def __and__(self, other: Any) -> StopCondition:
        right = as_condition(other)

        def all_of(step: StepView) -> Verdict:
            first = self._check(step)
            if inspect.isawaitable(first):
                return _all_async(first, right, step)
            if first is None:
                return None
            second = right._check(step)
            if inspect.isawaitable(second):
                return _both(first, second)
            return None if second is None else f"{first} and {second}"

        return StopCondition(all_of, f"({self.label} & {right.label})", is_async=self.is_async or right.is_async)

    __ror__ = __or__
    __rand__ = __and__

    def __repr__(self) -> str:
        return f"StopCondition({self.label})"


def _discard(verdict: Awaitable[Any]) -> None:
    # Close an un-awaited coroutine so Python does not warn "coroutine was never awaited" on top of our error.
    close = getattr(verdict, "close", None)
    if close is not None:
        close()


async def _any_async(first: Awaitable[str | None], right: StopCondition, step: StepView) -> str | None:
    return await first or await right.evaluate(step)


async def _all_async(first: Awaitable[str | None], right: StopCondition, step: StepView) -> str | None:
    reason = await first
    if reason is None:
        return None
    second = await right.evaluate(step)
    return None if second is None else f"{reason} and {second}"


async def _both(first: str, second: Awaitable[str | None]) -> str | None:
    reason = await second
    return None if reason is None else f"{first} and {reason}"


def _reason(result: object, label: str) -> str | None:
    if isinstance(result, str):
        return result or None
    return f"{label} returned true" if result else None


async def _awaited_reason(result: Awaitable[object], label: str) -> str | None:
    return _reason(await result, label)


def as_condition(value: Any) -> StopCondition:
    """Normalise ``stop_when``: a condition, a bool predicate, or a list of either (any true stops)."""
    if isinstance(value, StopCondition):
        return value
    if isinstance(value, Sequence) and not isinstance(value, str):
        if not value:
            raise ConfigError("stop_when", "an empty list never stops; pass None instead")
        conditions = [as_condition(v) for v in value]
        combined = conditions[0]
        for c in conditions[1:]:
            combined = combined | c
        return combined
    if not callable(value):
        raise ConfigError("stop_when", f"expected a callable or a list of callables, got {type(value).__name__}")
    check_function("stop_when", value, "step")
    label = getattr(value, "__name__", None) or type(value).__name__
    if label == "<lambda>":
        label = "stop_when predicate"

    def predicate(step: StepView) -> Verdict:
        result = value(step)
        if inspect.isawaitable(result):
            return _awaited_reason(result, label)
        return _reason(result, label)

    # A callable object with an ``async def __call__`` is async too.
    declared_async = inspect.iscoroutinefunction(value) or inspect.iscoroutinefunction(type(value).__call__)
    return StopCondition(predicate, label, is_async=declared_async)


def step_count_is(n: int) -> StopCondition:
    """Fires once ``n`` or more steps have been taken in this run leg.

    "Or more", not "exactly": ``stop_when`` is only checked after a step that called tools, so a step ``n`` that
    was a plain answer or a forced-output call passes it by, and the next tool-calling step must still stop."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ConfigError("step_count_is", f"n must be a positive int, got {n!r}")
    return StopCondition(lambda s: f"step count reached {n}" if s.number >= n else None, f"step_count_is({n})")


def has_tool_call(*names: str, include_failed: bool = False) -> StopCondition:
    """Fires when the step called any of the named tools (any tool at all when no name is given) and the call
    succeeded. A call whose result is an error (the tool raised, bad arguments, a block) does not fire by
    default, so the model gets to fix it; ``include_failed=True`` fires on any call."""
    for name in names:
        if not isinstance(name, str) or not name:
            raise ConfigError("has_tool_call", f"tool names must be non-empty strings (use tool.name), got {name!r}")
    wanted = frozenset(names)

    def check(step: StepView) -> str | None:
        failed = {r.tool_call_id for r in step.tool_results if r.metadata.get(TOOL_ERROR)}
        for call in step.reply.tool_calls:
            if (not wanted or call.name in wanted) and (include_failed or call.id not in failed):
                return f"tool '{call.name}' was called"
        return None

    return StopCondition(check, f"has_tool_call({', '.join(map(repr, names))})")


def text_contains(s: str) -> StopCondition:
    """Fires when the step's reply text contains ``s``."""
    if not isinstance(s, str) or not s:
        raise ConfigError("text_contains", f"the text to look for must be a non-empty string, got {s!r}")
    return StopCondition(lambda step: f"text contains {s!r}" if s in step.reply.text else None, f"text_contains({s!r})")


def is_looping(n: int = 3) -> StopCondition:
    """Fires when this run made the same call (same tool, same canonical arguments) ``n`` times in a row, or made a
    cycle of two to four steps (``search``, ``open``, ``search``, ``open``...: the guardian's repeat limit counts the
    same, ``stopwise.stop.repeats``) ``n`` times in a row; the reason names the calls. Reads back from the newest
    step no further than ``n`` repetitions. A ``stop_when`` stop completes the run (``completion_reason``
    ``stop_when``, ``detail`` the reason): see docs/limits.md for making a spin a failure."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 2:
        raise ConfigError("is_looping", f"n must be an int >= 2, got {n!r}")

    def check(step: StepView) -> str | None:
        repeats = Repeats.of(step.messages, start=step.run_start, at_most=n)
        streak = repeats.streak
        if streak.key is not None and streak.count >= n:
            return f"the call {streak.key[0]} was made {streak.count} times in a row with the same arguments"
        cycle = repeats.cycles.latest
        return cycle.reason if cycle is not None and cycle.count >= n else None

    return StopCondition(check, f"is_looping({n})")
