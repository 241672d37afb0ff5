"""The one stop decision: a pure function from a step's signals to what the loop does next.

Order (seed 002 §2): a caller-code failure first, then terminal (a reply that ends the run by itself), then
``stop_when``, then ``max_steps``. ``stop_when`` is checked before the cap, so a predicate that fires on the
last allowed step is a successful stop. No I/O, no clock: the same signals always give the same decision.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from stopwise.errors import ErrorCategory, ErrorCode, ErrorDetail
from stopwise.messages import StopReason
from stopwise.result import CompletionReason

__all__ = ["Action", "CompletionReason", "Decision", "StepSignals", "max_steps_exhausted", "resolve"]


class Action(StrEnum):
    """What the loop does after a step."""

    CONTINUE = "continue"
    COMPLETE = "complete"
    FAIL = "fail"
    FORCE_OUTPUT = "force_output"
    """Enter (or stay in) forced completion: tools off, ask for the structured output."""


@dataclass(frozen=True, slots=True)
class Decision:
    """The resolver's outcome for one step."""

    action: Action
    reason: CompletionReason | None = None
    """Set when the run ends (complete or fail), and on FORCE_OUTPUT to say what forced it."""
    error: ErrorDetail | None = None
    detail: str = ""
    """Why, in words: the condition that fired, the validation error, the stop reason."""

    @property
    def ends_run(self) -> bool:
        return self.action in (Action.COMPLETE, Action.FAIL)


@dataclass(frozen=True, slots=True)
class StepSignals:
    """Everything the resolver needs about one step; the loop gathers these, the resolver only reads them."""

    stop_reason: StopReason
    has_tool_calls: bool
    steps_used: int
    """Steps taken against the budget in this run leg, this one included."""
    max_steps: int | None
    stop_when: str | None = None
    """The reason a ``stop_when`` condition fired, or None."""
    stop_when_error: str | None = None
    """Set when a ``stop_when`` predicate raised: the exception, described."""
    wants_output: bool = False
    """The agent declares an output type."""
    output_error: str | None = None
    """With an output type: why this reply is not valid output (None when it is, or when not checked)."""
    forced: bool = False
    """This step was a forced-completion call."""
    completion_attempts_left: int = 0
    """Forced-completion calls still allowed after this step."""


_FAILED_STOP = {
    StopReason.MAX_TOKENS: (CompletionReason.MAX_TOKENS, ErrorCode.MAX_TOKENS, True),
    StopReason.CONTENT_FILTER: (CompletionReason.CONTENT_FILTER, ErrorCode.CONTENT_FILTER, False),
    StopReason.REFUSAL: (CompletionReason.REFUSAL, ErrorCode.REFUSAL, False),
    StopReason.ERROR: (CompletionReason.ERROR, ErrorCode.MODEL_ERROR, True),
}


def max_steps_exhausted(max_steps: int) -> ErrorDetail:
    """The typed cut-off failure."""
    return ErrorDetail(
        code=ErrorCode.MAX_STEPS_EXHAUSTED,
        message=f"Max steps ({max_steps}) reached",
        category=ErrorCategory.FRAMEWORK,
        retryable=False,
    )


def _force_or_fail(s: StepSignals, why: CompletionReason, detail: str) -> Decision:
    if s.completion_attempts_left > 0:
        return Decision(Action.FORCE_OUTPUT, why, detail=detail)
    return Decision(
        Action.FAIL,
        CompletionReason.ERROR,
        ErrorDetail(
            code=ErrorCode.OUTPUT_INVALID,
            message=f"No valid structured output: {detail}" if detail else "No valid structured output",
            category=ErrorCategory.FRAMEWORK,
            retryable=True,
        ),
        detail,
    )


def resolve(s: StepSignals) -> Decision:
    """Decide what happens after a step. Pure; see the module docstring for the order."""
    if s.stop_when_error is not None:
        return Decision(
            Action.FAIL,
            CompletionReason.ERROR,
            ErrorDetail(ErrorCode.STOP_WHEN_RAISED, s.stop_when_error, ErrorCategory.CALLER, retryable=False),
            s.stop_when_error,
        )

    if s.forced:
        if s.output_error is None:
            return Decision(Action.COMPLETE, CompletionReason.OUTPUT)
        return _force_or_fail(s, CompletionReason.OUTPUT, s.output_error)

    # 1. terminal: the reply ends the run by itself.
    if not s.has_tool_calls:
        failed = _FAILED_STOP.get(s.stop_reason)
        if failed is not None:
            reason, code, retryable = failed
            message = f"The model stopped with stop reason '{s.stop_reason.value}'"
            category = ErrorCategory.MODEL
            return Decision(Action.FAIL, reason, ErrorDetail(code, message, category, retryable), message)
        if not s.wants_output:
            return Decision(Action.COMPLETE, CompletionReason.FINAL_ANSWER)
        if s.output_error is None:
            return Decision(Action.COMPLETE, CompletionReason.OUTPUT)
        return _force_or_fail(s, CompletionReason.OUTPUT, s.output_error)

    # 2. stop_when.
    if s.stop_when is not None:
        if s.wants_output:
            return _force_or_fail(s, CompletionReason.STOP_WHEN, s.stop_when)
        return Decision(Action.COMPLETE, CompletionReason.STOP_WHEN, detail=s.stop_when)

    # 3. max_steps.
    if s.max_steps is not None and s.steps_used >= s.max_steps:
        if s.wants_output:
            return _force_or_fail(s, CompletionReason.MAX_STEPS, f"Max steps ({s.max_steps}) reached")
        error = max_steps_exhausted(s.max_steps)
        return Decision(Action.FAIL, CompletionReason.MAX_STEPS, error, error.message)

    return Decision(Action.CONTINUE)
