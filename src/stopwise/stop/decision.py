"""The one stop decision: a pure function from a step's signals to what the loop does next.

Every way a run ends, pauses or changes course is a signal in ``StepSignals``; ``resolve`` returns one
``StopDecision`` and ``apply_decision`` is the only code that writes a run's status and reason from it. The order,
first match wins (each line is a named test in ``tests/test_decision.py``):

1. the caller cancelled (``cancelled``);
2. caller code failed (``caller_failed``: a guardrail, an approval predicate, unserialisable state;
   ``stop_when_error``);
3. the model call failed (``model_failed``), or ran past a time budget and was cancelled (``timed_out``);
4. an input guardrail blocked the leg (``input_blocked``);
5. a reviewer terminated the run; the pending approvals expired unanswered (``approval_expired``, failed:
   ``Runner.expire``); a reviewer rejected a guardian escalation (re-anchor, or the cut-off at the cap);
6. suspend: a call needs approval, or the guardian escalates;
7. a runaway tool (``tool_error_streak``) fails the run;
8. a forced-output call: its output, or another forced call, or the failure (a budget of ``Limits`` spent fails
   it with the budget's reason rather than force another call);
9. terminal: a reply without tool calls ends the run by itself: a failed stop reason fails it (a reply cut at
   ``max_tokens`` on the step that spent a budget fails with the budget's reason: the cap was the budget's); the
   guardian's ``stop_failure`` fails it (the guardian's verdict is never silently contradicted by the actor's say-so);
   otherwise a natural finish, judged by the stop guard (a continue with a budget of ``Limits`` spent fails with
   it), the output validators (a rejection retries while completion attempts are left), the output guardrails and
   the output type;
10. a stop-at tool's result (``tool_output``), then ``stop_when``; 11. the guardian's ``stop_success`` /
``stop_failure``; 12. a budget of ``Limits`` spent (``limit_hit``), then ``max_steps`` (the handler's output,
forced completion, the wrap-up, or the cut-off); 13. replan; 14. continue.

``stop_when`` is checked before the cap, so a predicate that fires on the last allowed step is a successful stop,
and so is a final answer on the last step. No I/O, no clock: the same signals always give the same decision.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any, Literal

from stopwise._deprecated import aliases
from stopwise.errors import ErrorCategory, ErrorCode, ErrorDetail
from stopwise.messages import StopReason
from stopwise.result import CompletionReason, RunStatus
from stopwise.stop.limits import LimitHit
from stopwise.store.base import RunRecord

__all__ = [
    "Action",
    "CompletionReason",
    "StopDecision",
    "GuardSignal",
    "Phase",
    "StepSignals",
    "apply_decision",
    "approval_expired",
    "max_steps_exhausted",
    "quiet_tool_step",
    "resolve",
    "terminated",
]


class Action(StrEnum):
    """What the loop does after a step."""

    CONTINUE = "continue"
    COMPLETE = "complete"
    FAIL = "fail"
    FORCE_OUTPUT = "force_output"
    """Enter (or stay in) forced completion: tools off, ask for the structured output."""
    WRAP_UP = "wrap_up"
    """The cap was reached with ``on_max_steps="wrap_up"``: one tool-less call asking for a final answer."""
    SUSPEND = "suspend"
    """A tool call waits for a human: the run suspends durably until ``Runner.resume``."""
    TERMINATE = "terminate"
    """A reviewer ended the run (``Terminate``): it is recorded as cancelled."""
    REPLAN = "replan"
    """The guardian asks to re-anchor the actor on the goal: one more step, with a labelled row."""
    RETRY_OUTPUT = "retry_output"
    """An output validator rejected the output: one more step, tools on, with the application's feedback."""


class Phase(StrEnum):
    """Which kind of call a step is."""

    NORMAL = "normal"
    FORCED_OUTPUT = "forced_output"
    """A forced-completion call: tools off, the reply must be the structured output."""
    WRAP_UP = "wrap_up"
    """The one tool-less call after the cap that asks for a final answer."""


@dataclass(frozen=True, slots=True)
class GuardSignal:
    """The stop guard's consultation on a natural finish, as the resolver needs it."""

    kind: Literal["stop", "continue", "fail", "error"]
    message: str = ""
    """Fail's message, or what went wrong for ``error``."""
    budget_left: bool = True
    """Whether a continue was still allowed when the guard answered."""
    on_error: Literal["stop", "fail"] = "stop"


@dataclass(frozen=True, slots=True)
class StopDecision:
    """The resolver's outcome for one step."""

    action: Action
    reason: CompletionReason | None = None
    """Set when the run ends (complete or fail), and on FORCE_OUTPUT / WRAP_UP to say what forced it."""
    error: ErrorDetail | None = None
    detail: str = ""
    """Why, in words: the condition that fired, the validation error, the stop reason."""
    carry: CompletionReason | None = None
    """On FORCE_OUTPUT: the reason the run reports if the forced phase then succeeds (a spent or failed stop
    guard keeps its reason through forced completion)."""

    @property
    def ends_run(self) -> bool:
        return self.action in (Action.COMPLETE, Action.FAIL, Action.TERMINATE)

    def log_data(self, phase: Phase, tool_calls: int) -> dict[str, Any]:
        """The decision as a step entry records it (``LogEntry.decision``), with the step's phase and the number
        of tool calls it ran: ``action`` and ``tool_calls`` always, ``reason``, ``detail``, ``phase`` and ``carry``
        only when they differ from their defaults (``None``, ``""``, ``normal``, ``None``): a reader uses
        ``.get`` with those defaults, as it does for entries written before they were left out."""
        data: dict[str, Any] = {"action": self.action.value, "tool_calls": tool_calls}
        if self.reason is not None:
            data["reason"] = self.reason
        if self.detail:
            data["detail"] = self.detail
        if phase is not Phase.NORMAL:
            data["phase"] = phase.value
        if self.carry is not None:
            data["carry"] = self.carry
        return data


@dataclass(frozen=True, slots=True)
class StepSignals:
    """Everything the resolver needs about one step; the loop gathers these, the resolver only reads them."""

    stop_reason: StopReason = StopReason.END_TURN
    has_tool_calls: bool = False
    steps_used: int = 0
    """Steps taken against the budget in this run leg, this one included."""
    max_steps: int | None = None
    cancelled: bool = False
    """The caller cancelled the run (or abandoned its stream) before the step could commit."""
    caller_failed: ErrorDetail | None = None
    """Caller code failed mid-step (a guardrail raised or gave an invalid verdict, an approval predicate raised,
    the state is not serialisable): nothing of the step commits."""
    model_failed: ErrorDetail | None = None
    """The model call failed or gave no reply: there is no step to decide."""
    timed_out: LimitHit | None = None
    """The model call ran past a time budget (``Limits.step_seconds`` / ``run_seconds``) and was cancelled."""
    input_blocked: str | None = None
    """An input guardrail blocked the leg before any model call: its reason."""
    stop_when: str | None = None
    """The reason a ``stop_when`` condition fired, or None."""
    stop_when_error: str | None = None
    """Set when a ``stop_when`` predicate raised: the exception, described."""
    wants_output: bool = False
    """The agent declares an output type."""
    output_error: str | None = None
    """With an output type: why this reply is not valid output (None when it is, or when not checked)."""
    phase: Phase = Phase.NORMAL
    completion_attempts_left: int = 0
    """Forced-completion calls still allowed after this step."""
    guard: GuardSignal | None = None
    """The stop guard's verdict, when one ran on this step."""
    carried_reason: CompletionReason | None = None
    """In forced completion: the reason carried from the step that entered it."""
    on_max_steps: Literal["fail", "wrap_up", "handler"] = "fail"
    """``"handler"``: the agent's ``on_max_steps`` is a function that gives the output at the cap."""
    approvals_pending: bool = False
    """A tool call of this step needs a human's approval before anything in the batch runs."""
    tool_error_streak: str | None = None
    """Set when a tool failed ``max_tool_errors`` times in a row: which, in words."""
    output_blocked: str | None = None
    """Set when an output guardrail blocked the final answer: its reason."""
    terminated: str | None = None
    """Set when a reviewer settled this step with ``Terminate``: their reason."""
    approval_expired: str | None = None
    """Set when the step's pending approvals passed their ``approval_ttl`` unanswered and ``Runner.expire`` settles
    it: which, in words. The time is the caller's (``expire(now=...)``); the resolver reads no clock."""
    guardian: Literal["escalate", "stop_success", "stop_failure", "replan"] | None = None
    """The guardian's outcome for this turn, when it did not say continue."""
    guardian_reason: str = ""
    review_rejected: str | None = None
    """Set when a reviewer rejected a guardian escalation: their message (the run re-anchors and goes on)."""
    limit_hit: LimitHit | None = None
    """A budget of ``Agent.limits`` this step ran out (tool calls refused, tokens, cost, run time)."""
    output_rejected: str | None = None
    """An output validator rejected the accepted output (``RetryOutput``): the application's feedback."""
    tool_output: str | None = None
    """A stop-at tool (``Agent.stop_at_tools``) succeeded on this step: its name. Its result is the output;
    ``output_error`` says why it is not valid ``output_type``."""


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


def _fail(reason: CompletionReason, error: ErrorDetail) -> StopDecision:
    return StopDecision(Action.FAIL, reason, error, error.message)


def _force_or_fail(
    s: StepSignals, why: CompletionReason, detail: str, carry: CompletionReason | None = None
) -> StopDecision:
    if s.completion_attempts_left > 0:
        return StopDecision(Action.FORCE_OUTPUT, why, detail=detail, carry=carry)
    message = f"No valid structured output: {detail}" if detail else "No valid structured output"
    return _fail(CompletionReason.ERROR, ErrorDetail(ErrorCode.OUTPUT_INVALID, message, ErrorCategory.FRAMEWORK, True))


def _retry_output(s: StepSignals, rejected: str) -> StopDecision:
    """An output validator's rejection: another try while completion attempts are left (in forced completion a
    forced call again, else a step with tools on), then the failure."""
    if s.completion_attempts_left > 0 and s.phase is Phase.FORCED_OUTPUT:
        return StopDecision(Action.FORCE_OUTPUT, CompletionReason.OUTPUT, detail=rejected, carry=s.carried_reason)
    if s.completion_attempts_left > 0 and s.phase is Phase.NORMAL:
        return StopDecision(Action.RETRY_OUTPUT, detail=rejected)
    error = ErrorDetail(ErrorCode.OUTPUT_REJECTED, f"Output rejected: {rejected}", ErrorCategory.CALLER, True)
    return _fail(CompletionReason.ERROR, error)


def _cut_off(s: StepSignals) -> StopDecision:
    assert s.max_steps is not None  # only called at the cap
    return _fail(CompletionReason.MAX_STEPS, max_steps_exhausted(s.max_steps))


def _infeasible(s: StepSignals) -> StopDecision:
    error = ErrorDetail(ErrorCode.INFEASIBLE, s.guardian_reason, ErrorCategory.FRAMEWORK, retryable=False)
    return _fail(CompletionReason.INFEASIBLE, error)


def _natural_finish(s: StepSignals) -> StopDecision:
    """A text reply with no tool calls that ended normally: the stop guard's verdict, then the output."""
    override: CompletionReason | None = None
    g = s.guard
    if g is not None:
        if g.kind == "fail":
            error = ErrorDetail(ErrorCode.STOP_GUARD_REJECTED, g.message, ErrorCategory.CALLER, retryable=False)
            return _fail(CompletionReason.ERROR, error)
        if g.kind == "error":
            if g.on_error == "fail":
                message = f"Stop guard failed: {g.message}"
                error = ErrorDetail(ErrorCode.STOP_GUARD_FAILED, message, ErrorCategory.CALLER, retryable=False)
                return _fail(CompletionReason.ERROR, error)
            override = CompletionReason.STOP_GUARD_ERROR
        elif g.kind == "continue":
            if g.budget_left and s.limit_hit is not None:  # no budget to go on with
                return _fail(s.limit_hit.reason, s.limit_hit.error())
            if g.budget_left:
                return StopDecision(Action.CONTINUE, detail="stop guard asked to continue")
            override = CompletionReason.STOP_GUARD_EXHAUSTED
    if s.output_rejected is not None:
        return _retry_output(s, s.output_rejected)
    if s.output_blocked is not None:
        return StopDecision(Action.COMPLETE, CompletionReason.GUARDRAIL_OUTPUT, detail=s.output_blocked)
    if s.phase is Phase.WRAP_UP:
        return StopDecision(Action.COMPLETE, CompletionReason.MAX_STEPS_WRAPPED_UP, detail=f"Max steps ({s.max_steps})")
    if not s.wants_output:
        return StopDecision(Action.COMPLETE, override or CompletionReason.FINAL_ANSWER)
    if s.output_error is None:
        return StopDecision(Action.COMPLETE, override or CompletionReason.OUTPUT)
    return _force_or_fail(s, CompletionReason.OUTPUT, s.output_error, carry=override)


def approval_expired(detail: str) -> StopDecision:
    """The pending approvals expired unanswered: the run fails, retryable (the model reads each expired call's
    result, so a retry asks it again; a reviewer may be there then)."""
    error = ErrorDetail(ErrorCode.APPROVAL_EXPIRED, detail, ErrorCategory.CALLER, retryable=True)
    return _fail(CompletionReason.APPROVAL_EXPIRED, error)


def terminated(reason: str) -> StopDecision:
    """A reviewer ended a suspended run with ``Terminate``."""
    error = ErrorDetail(ErrorCode.APPROVAL_TERMINATED, reason, ErrorCategory.CALLER, retryable=False)
    return StopDecision(Action.TERMINATE, CompletionReason.APPROVAL_TERMINATED, error, reason)


def resolve(s: StepSignals) -> StopDecision:
    """Decide what happens after a step. Pure; see the module docstring for the order."""
    return _interrupted(s) or _reviewed_or_waiting(s) or _forced(s) or _step_outcome(s)


_GO_ON = StopDecision(Action.CONTINUE)
"""Line 14's decision: one shared value (it is frozen), not one built per step."""


def quiet_tool_step(steps_used: int, max_steps: int | None) -> StopDecision | None:
    """``resolve``'s decision for the most common step, without building its ``StepSignals``: a normal-phase step
    whose reply called tools, with every other signal at its default (nothing cancelled, failed, blocked, waiting,
    reviewed or spent; no runaway tool, stop-at output, ``stop_when``, stop guard, guardian verdict or output
    rejection), whatever its ``stop_reason``, ``wants_output``, ``completion_attempts_left``,
    ``carried_reason`` and ``on_max_steps``. Such a step continues below the cap (line 14); at the cap it
    returns None and the caller asks ``resolve`` (line 12 decides). ``tests/test_decision.py`` checks the two
    agree on every such step."""
    if max_steps is not None and steps_used >= max_steps:
        return None
    return _GO_ON


def _interrupted(s: StepSignals) -> StopDecision | None:
    """Lines 1-4: the leg ends with no step of its own to judge (or, for ``stop_when``, caller code failed)."""
    if s.cancelled:
        error = ErrorDetail(ErrorCode.CANCELLED, "The run was cancelled", ErrorCategory.CALLER, retryable=True)
        return StopDecision(Action.TERMINATE, CompletionReason.CANCELLED, error, error.message)
    if s.caller_failed is not None:
        return _fail(CompletionReason.ERROR, s.caller_failed)
    if s.stop_when_error is not None:
        error = ErrorDetail(ErrorCode.STOP_WHEN_RAISED, s.stop_when_error, ErrorCategory.CALLER, retryable=False)
        return _fail(CompletionReason.ERROR, error)
    if s.model_failed is not None:
        return _fail(CompletionReason.ERROR, s.model_failed)
    if s.timed_out is not None:
        return _fail(s.timed_out.reason, s.timed_out.error())
    if s.input_blocked is not None:
        return StopDecision(Action.COMPLETE, CompletionReason.GUARDRAIL_INPUT, detail=s.input_blocked)
    return None


def _reviewed_or_waiting(s: StepSignals) -> StopDecision | None:
    """Lines 5-7: a reviewer's word, a suspension, a runaway tool."""
    if s.terminated is not None:
        return terminated(s.terminated)
    if s.approval_expired is not None:
        return approval_expired(s.approval_expired)
    if s.review_rejected is not None:
        if s.max_steps is not None and s.steps_used >= s.max_steps:
            return _cut_off(s)
        return StopDecision(Action.REPLAN, detail=s.review_rejected)
    if s.approvals_pending or s.guardian == "escalate":
        detail = s.guardian_reason if s.guardian == "escalate" else ""
        return StopDecision(Action.SUSPEND, CompletionReason.AWAITING_APPROVAL, detail=detail)
    if s.tool_error_streak is not None:
        error = ErrorDetail(ErrorCode.TOOL_ERROR_STREAK, s.tool_error_streak, ErrorCategory.FRAMEWORK, retryable=True)
        return _fail(CompletionReason.ERROR, error)
    return None


def _forced(s: StepSignals) -> StopDecision | None:
    """Line 8: a forced-output call gives the output, is forced again, or fails."""
    if s.phase is not Phase.FORCED_OUTPUT:
        return None
    if s.output_blocked is not None:
        return StopDecision(Action.COMPLETE, CompletionReason.GUARDRAIL_OUTPUT, detail=s.output_blocked)
    if s.output_rejected is not None:
        return _retry_output(s, s.output_rejected)
    if s.output_error is None:
        return StopDecision(Action.COMPLETE, s.carried_reason or CompletionReason.OUTPUT)
    if s.limit_hit is not None:  # another forced call would spend more of what is gone
        return _fail(s.limit_hit.reason, s.limit_hit.error())
    return _force_or_fail(s, CompletionReason.OUTPUT, s.output_error, carry=s.carried_reason)


def _step_outcome(s: StepSignals) -> StopDecision:
    """Lines 9-14: a terminal reply, then a stop-at tool's output and stop_when, the guardian's stops, the cap, a
    replan, continue."""
    if not s.has_tool_calls:
        failed = _FAILED_STOP.get(s.stop_reason)
        if s.stop_reason is StopReason.MAX_TOKENS and s.limit_hit is not None:
            return _fail(s.limit_hit.reason, s.limit_hit.error())  # cut short by the budget's cap, or past it
        if failed is not None:
            reason, code, retryable = failed
            message = f"The model stopped with stop reason '{s.stop_reason.value}'"
            return _fail(reason, ErrorDetail(code, message, ErrorCategory.MODEL, retryable))
        if s.guardian == "stop_failure":
            return _infeasible(s)
        return _natural_finish(s)
    if s.phase is Phase.WRAP_UP:  # tools were off; a reply that still calls them did not wrap up
        return _cut_off(s)
    if s.tool_output is not None:
        detail = f"tool '{s.tool_output}' returned the output"
        if s.output_error is not None:
            return _force_or_fail(s, CompletionReason.TOOL_OUTPUT, s.output_error)
        if s.output_rejected is not None:
            return _retry_output(s, s.output_rejected)
        return StopDecision(Action.COMPLETE, CompletionReason.TOOL_OUTPUT, detail=detail)
    if s.stop_when is not None:
        if s.wants_output:
            return _force_or_fail(s, CompletionReason.STOP_WHEN, s.stop_when)
        return StopDecision(Action.COMPLETE, CompletionReason.STOP_WHEN, detail=s.stop_when)
    if s.guardian == "stop_success":
        if s.wants_output:
            carry = CompletionReason.GOAL_REACHED
            return _force_or_fail(s, CompletionReason.GOAL_REACHED, s.guardian_reason, carry=carry)
        return StopDecision(Action.COMPLETE, CompletionReason.GOAL_REACHED, detail=s.guardian_reason)
    if s.guardian == "stop_failure":
        return _infeasible(s)
    if s.limit_hit is not None:
        return _fail(s.limit_hit.reason, s.limit_hit.error())
    if s.max_steps is not None and s.steps_used >= s.max_steps:
        cap = f"Max steps ({s.max_steps}) reached"
        if s.on_max_steps == "handler":
            return StopDecision(Action.COMPLETE, CompletionReason.MAX_STEPS_HANDLED, detail=cap)
        if s.wants_output:
            return _force_or_fail(s, CompletionReason.MAX_STEPS, cap)
        if s.on_max_steps == "wrap_up":
            return StopDecision(Action.WRAP_UP, CompletionReason.MAX_STEPS, detail=cap)
        return _cut_off(s)
    if s.guardian == "replan":
        return StopDecision(Action.REPLAN, detail=s.guardian_reason)
    return StopDecision(Action.CONTINUE)


_STATUS = {
    Action.COMPLETE: RunStatus.COMPLETED,
    Action.FAIL: RunStatus.FAILED,
    Action.TERMINATE: RunStatus.CANCELLED,
    Action.SUSPEND: RunStatus.SUSPENDED,
}


def apply_decision(run: RunRecord, decision: StopDecision, **progress: Any) -> RunRecord:
    """The run record after ``decision``: the one place a run's status, completion reason, error and detail are
    written. A decision that ends the run sets all four; a suspension records why it waits; anything else (the
    run goes on, or starts again on a retry or a resume) clears them. ``progress`` carries the other fields that
    move with the step (steps, usage, text, output, report)."""
    status = _STATUS.get(decision.action, RunStatus.RUNNING)
    if status is RunStatus.RUNNING:
        return replace(run, status=status, completion_reason=None, error=None, detail="", **progress)
    return replace(
        run,
        status=status,
        completion_reason=decision.reason,
        error=decision.error,
        detail=decision.detail,
        **progress,
    )


__getattr__ = aliases(__name__, {"Decision": ("StopDecision", StopDecision)})
