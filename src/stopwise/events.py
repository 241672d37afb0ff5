"""Typed events a run yields as it goes; ``Runner.stream`` hands them out, the CLI only consumes them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from stopwise.messages import Message, Reply, ToolCall

if TYPE_CHECKING:
    from stopwise.guardrails.verdicts import GuardrailRecord
    from stopwise.result import RunResult

__all__ = [
    "Event",
    "GuardrailEvent",
    "ModelReplied",
    "RunFinished",
    "StepCommitted",
    "StepStarted",
    "StopGuardEvent",
    "TextDelta",
    "ToolCalled",
    "ToolReturned",
]


@dataclass(frozen=True, slots=True)
class Event:
    run_id: str
    step: int


@dataclass(frozen=True, slots=True)
class StepStarted(Event):
    """A model call is about to be made."""

    forced: bool = False


@dataclass(frozen=True, slots=True)
class TextDelta(Event):
    """A piece of the reply's text as the model produces it (``runner.stream`` with a streaming model).

    Joined, a step's deltas are its reply's text as the model wrote it; ``ModelReplied`` follows with the whole
    reply. An output guardrail may still rewrite the final answer: the committed text is authoritative.
    """

    text: str


@dataclass(frozen=True, slots=True)
class ModelReplied(Event):
    reply: Reply


@dataclass(frozen=True, slots=True)
class ToolCalled(Event):
    """A tool call is about to execute."""

    call: ToolCall


@dataclass(frozen=True, slots=True)
class ToolReturned(Event):
    """A tool call settled; ``message`` is its tool row (an error row when it failed)."""

    call: ToolCall
    message: Message


@dataclass(frozen=True, slots=True)
class StepCommitted(Event):
    """The step is durable: its rows, the state and the decision are in the store."""

    seq: int
    decision: Any
    """The ``StopDecision`` the resolver made for this step."""


@dataclass(frozen=True, slots=True)
class StopGuardEvent(Event):
    """The stop guard decided: ``kind`` is ``stop_guard.continued``, ``.exhausted``, ``.error``, ``.rejected``
    or ``.accepted``. Safe to show a user: it never carries the guard's feedback, only its progress note."""

    kind: str
    guard: str
    message: str | None = None
    """The rejection message or the guard's error; None for continued / accepted."""
    note: str | None = None
    """The guard's ``progress_note`` on a continue (e.g. "verifying before finishing")."""


@dataclass(frozen=True, slots=True)
class GuardrailEvent(Event):
    """A guardrail blocked or rewrote something (passes are silent). ``step`` is 0 on the input hook."""

    record: GuardrailRecord


@dataclass(frozen=True, slots=True)
class RunFinished(Event):
    """The last event of a run leg."""

    result: RunResult
