"""The step cap's handler: the application's final output when a run reaches ``max_steps``, with no model call.

``Agent(on_max_steps=handler)``: ``handler(ctx)`` (sync or ``async def``) returns the run's output (an
``output_type`` instance or data that validates against it; a string when the agent has no output type). The run
completes with reason ``max_steps_handled``. A handler that raises, or returns the wrong kind, fails the run
(``max_steps_handler_raised``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

from stopwise.messages import Message

__all__ = ["MaxStepsContext", "MaxStepsHandler"]


@dataclass(frozen=True, slots=True)
class MaxStepsContext:
    """What the step cap's handler sees."""

    max_steps: int
    messages: Sequence[Message]
    """The session's log (an immutable sequence) up to and including the step that reached the cap (its tool
    results too)."""
    state: Mapping[str, Any]
    """The session's custom state as of that step (read-only)."""
    output_type: type[Any] | None


MaxStepsHandler: TypeAlias = Callable[[MaxStepsContext], "Any | Awaitable[Any]"]
