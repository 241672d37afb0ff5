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

import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, TypeAlias

from stopwise.errors import ConfigError
from stopwise.messages import Message, Role, automated_feedback

__all__ = ["HistoryProcessor", "HistoryRecord", "keep_last_steps", "summarise", "token_budget"]

HistoryProcessor: TypeAlias = Callable[[Sequence[Message]], "Sequence[Message] | Awaitable[Sequence[Message]]"]


@dataclass(frozen=True, slots=True)
class HistoryRecord:
    """What one model call was not sent of the history, as the step's log entry keeps it."""

    TYPE: ClassVar[str] = "history"
    step: int
    dropped: tuple[int, ...]
    """Positions (0-based, in the session's history as the step began) of the rows the model was not sent."""
    added: int = 0
    """Rows a processor added (a summary) that are not in the log."""
    sent: int = 0
    """Rows the model was sent (besides the system instructions)."""

    def to_data(self) -> dict[str, Any]:
        return {
            "type": self.TYPE,
            "step": self.step,
            "dropped": list(self.dropped),
            "added": self.added,
            "sent": self.sent,
        }

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> HistoryRecord:
        return cls(data["step"], tuple(data.get("dropped", ())), data.get("added", 0), data.get("sent", 0))

    def describe(self) -> str:
        """One line for a reader: what the model call was sent of the history, and what it was not."""
        parts = [f"{self.sent} rows sent"]
        if self.dropped:
            parts.append(f"{len(self.dropped)} not sent ({_spans(self.dropped)})")
        if self.added:
            parts.append(f"{self.added} added by a processor")
        return ", ".join(parts)


def _spans(positions: Sequence[int]) -> str:
    """``0, 1, 2, 5`` as ``rows 0-2, 5``: dropped rows come in runs (whole steps), so a long run reads short."""
    spans: list[str] = []
    start = prev = positions[0]
    for p in [*positions[1:], None]:
        if p is not None and p == prev + 1:
            prev = p
            continue
        spans.append(str(start) if start == prev else f"{start}-{prev}")
        if p is not None:
            start = prev = p
    return "rows " + ", ".join(spans)


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


def _positive(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(name, f"must be a positive int, got {value!r}")
    return value


def keep_last_steps(n: int) -> HistoryProcessor:
    """The opening input and the last ``n`` steps (each reply with its tool results and feedback)."""
    _positive("keep_last_steps", n)

    def keep(messages: Sequence[Message]) -> list[Message]:
        opening, steps = _steps(messages)
        return [*opening, *(m for step in steps[-n:] for m in step)]

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
        opening, steps = _steps(messages)
        used = sum(count(m) for m in opening)
        kept: list[list[Message]] = []
        for step in reversed(steps):
            size = sum(count(m) for m in step)
            if kept and used + size > max_tokens:
                break
            kept.append(step)
            used += size
        return [*opening, *(m for step in reversed(kept) for m in step)]

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
