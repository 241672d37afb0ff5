"""``stop_when`` conditions: predicates over a step that say why they fired.

A condition returns a reason string when it fires and ``None`` otherwise. Plain predicates returning a bool
are accepted and wrapped; conditions compose with ``|`` (any) and ``&`` (all).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from stopwise.errors import ConfigError
from stopwise.messages import Message, Reply

__all__ = [
    "StepView",
    "StopCondition",
    "as_condition",
    "has_tool_call",
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
    messages: tuple[Message, ...]
    """The session's log including this step's rows."""

    @property
    def tool_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.reply.tool_calls)


class StopCondition:
    """A named predicate over a ``StepView`` that returns the reason it fired, or ``None``."""

    __slots__ = ("_check", "label")

    def __init__(self, check: Callable[[StepView], str | None], label: str) -> None:
        self._check = check
        self.label = label

    def __call__(self, step: StepView) -> str | None:
        return self._check(step)

    def __or__(self, other: Any) -> StopCondition:
        right = as_condition(other)

        def any_of(step: StepView) -> str | None:
            return self(step) or right(step)

        return StopCondition(any_of, f"({self.label} | {right.label})")

    def __and__(self, other: Any) -> StopCondition:
        right = as_condition(other)

        def all_of(step: StepView) -> str | None:
            first = self(step)
            if first is None:
                return None
            second = right(step)
            return None if second is None else f"{first} and {second}"

        return StopCondition(all_of, f"({self.label} & {right.label})")

    __ror__ = __or__
    __rand__ = __and__

    def __repr__(self) -> str:
        return f"StopCondition({self.label})"


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
    label = getattr(value, "__name__", None) or type(value).__name__
    if label == "<lambda>":
        label = "stop_when predicate"

    def predicate(step: StepView) -> str | None:
        result = value(step)
        if isinstance(result, str):
            return result or None
        return f"{label} returned true" if result else None

    return StopCondition(predicate, label)


def step_count_is(n: int) -> StopCondition:
    """Fires once ``n`` steps have been taken in this run leg."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ConfigError("step_count_is", f"n must be a positive int, got {n!r}")
    return StopCondition(lambda s: f"step count reached {n}" if s.number >= n else None, f"step_count_is({n})")


def has_tool_call(*names: str) -> StopCondition:
    """Fires when the step called any of the named tools (any tool at all when no name is given)."""
    for name in names:
        if not isinstance(name, str) or not name:
            raise ConfigError("has_tool_call", f"tool names must be non-empty strings (use tool.name), got {name!r}")
    wanted = frozenset(names)

    def check(step: StepView) -> str | None:
        for call in step.reply.tool_calls:
            if not wanted or call.name in wanted:
                return f"tool '{call.name}' was called"
        return None

    return StopCondition(check, f"has_tool_call({', '.join(map(repr, names))})")


def text_contains(s: str) -> StopCondition:
    """Fires when the step's reply text contains ``s``."""
    if not isinstance(s, str) or not s:
        raise ConfigError("text_contains", f"the text to look for must be a non-empty string, got {s!r}")
    return StopCondition(lambda step: f"text contains {s!r}" if s in step.reply.text else None, f"text_contains({s!r})")
