"""The stop decision: one pure resolver. The tests named `test_<n>_...` pin line n of the precedence list in
`stopwise.stop.decision`'s docstring, each against the signals it must outrank."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stopwise import CompletionReason, StopReason
from stopwise.errors import ErrorCategory, ErrorCode, ErrorDetail
from stopwise.runtime import StepSignals, resolve
from stopwise.stop.decision import Action, GuardSignal, Phase, StopDecision, quiet_tool_step
from stopwise.stop.limits import LimitHit, LimitKind


def signals(**kw: object) -> StepSignals:
    base: dict[str, object] = dict(stop_reason=StopReason.TOOL_USE, has_tool_calls=True, steps_used=1, max_steps=5)
    base.update(kw)
    return StepSignals(**base)  # type: ignore[arg-type]


def test_tool_step_under_the_cap_continues() -> None:
    assert resolve(signals()).action is Action.CONTINUE


def test_final_answer_completes() -> None:
    d = resolve(signals(stop_reason=StopReason.END_TURN, has_tool_calls=False))
    assert (d.action, d.reason) == (Action.COMPLETE, CompletionReason.FINAL_ANSWER)


def test_final_answer_on_the_last_allowed_step_completes() -> None:
    d = resolve(signals(stop_reason=StopReason.END_TURN, has_tool_calls=False, steps_used=5, max_steps=5))
    assert d.reason is CompletionReason.FINAL_ANSWER


def test_tool_call_on_the_last_allowed_step_is_a_typed_cut_off() -> None:
    d = resolve(signals(steps_used=5, max_steps=5))
    assert d.action is Action.FAIL
    assert d.reason is CompletionReason.MAX_STEPS
    assert d.error is not None
    assert (d.error.code, d.error.message, d.error.category, d.error.retryable) == (
        "max_steps_exhausted",
        "Max steps (5) reached",
        "framework",
        False,
    )


def test_stop_when_is_checked_before_max_steps_on_the_cap_step() -> None:
    d = resolve(signals(steps_used=5, max_steps=5, stop_when="tool 'done' was called"))
    assert (d.action, d.reason) == (Action.COMPLETE, CompletionReason.STOP_WHEN)
    assert d.detail == "tool 'done' was called"


def test_terminal_wins_over_stop_when() -> None:
    d = resolve(signals(stop_reason=StopReason.END_TURN, has_tool_calls=False, stop_when="x"))
    assert d.reason is CompletionReason.FINAL_ANSWER


def test_no_cap_when_max_steps_is_none() -> None:
    assert resolve(signals(steps_used=10_000, max_steps=None)).action is Action.CONTINUE


def test_raising_stop_when_fails_with_stop_when_raised_not_retryable() -> None:
    d = resolve(signals(steps_used=5, max_steps=5, stop_when_error="boom"))
    assert d.action is Action.FAIL
    assert d.error is not None and d.error.code == "stop_when_raised" and d.error.retryable is False
    assert d.error.category == "caller"


@pytest.mark.parametrize(
    ("stop_reason", "reason"),
    [
        (StopReason.MAX_TOKENS, CompletionReason.MAX_TOKENS),
        (StopReason.CONTENT_FILTER, CompletionReason.CONTENT_FILTER),
        (StopReason.REFUSAL, CompletionReason.REFUSAL),
        (StopReason.ERROR, CompletionReason.ERROR),
    ],
)
def test_error_stop_reason_without_tool_calls_fails_with_that_reason(
    stop_reason: StopReason, reason: CompletionReason
) -> None:
    d = resolve(signals(stop_reason=stop_reason, has_tool_calls=False))
    assert d.action is Action.FAIL and d.reason is reason
    assert d.error is not None and d.error.category == "model"


def test_output_agent_at_the_cap_enters_forced_completion() -> None:
    d = resolve(signals(steps_used=5, max_steps=5, wants_output=True, completion_attempts_left=2))
    assert (d.action, d.reason) == (Action.FORCE_OUTPUT, CompletionReason.MAX_STEPS)


def test_output_agent_stop_when_before_output_enters_forced_completion() -> None:
    d = resolve(signals(stop_when="fired", wants_output=True, completion_attempts_left=2))
    assert (d.action, d.reason) == (Action.FORCE_OUTPUT, CompletionReason.STOP_WHEN)


def test_valid_output_completes_with_reason_output() -> None:
    d = resolve(signals(stop_reason=StopReason.END_TURN, has_tool_calls=False, wants_output=True))
    assert (d.action, d.reason) == (Action.COMPLETE, CompletionReason.OUTPUT)


def test_forced_completion_spent_fails_output_invalid() -> None:
    d = resolve(
        signals(
            stop_reason=StopReason.END_TURN,
            has_tool_calls=False,
            wants_output=True,
            phase=Phase.FORCED_OUTPUT,
            output_error="x: field required",
            completion_attempts_left=0,
        )
    )
    assert d.action is Action.FAIL
    assert d.error is not None and d.error.code == "output_invalid"
    assert "x: field required" in d.error.message


def test_forced_completion_with_attempts_left_tries_again() -> None:
    d = resolve(
        signals(
            has_tool_calls=False,
            wants_output=True,
            phase=Phase.FORCED_OUTPUT,
            output_error="bad",
            completion_attempts_left=1,
        )
    )
    assert d.action is Action.FORCE_OUTPUT


def test_resolver_is_deterministic() -> None:
    s = signals(steps_used=5, max_steps=5)
    assert resolve(s) == resolve(s)


def natural(**kw: object) -> StepSignals:
    return signals(stop_reason=StopReason.END_TURN, has_tool_calls=False, **kw)


def test_guard_continue_with_budget_continues() -> None:
    assert resolve(natural(guard=GuardSignal("continue"))).action is Action.CONTINUE


def test_guard_continue_without_budget_completes_exhausted() -> None:
    d = resolve(natural(guard=GuardSignal("continue", budget_left=False)))
    assert (d.action, d.reason) == (Action.COMPLETE, CompletionReason.STOP_GUARD_EXHAUSTED)


def test_guard_fail_is_a_non_retryable_rejection() -> None:
    d = resolve(natural(guard=GuardSignal("fail", "not confirmed")))
    assert d.action is Action.FAIL and d.error is not None
    assert (d.error.code, d.error.message, d.error.retryable) == ("stop_guard_rejected", "not confirmed", False)


def test_guard_error_stops_or_fails_by_on_error() -> None:
    stop = resolve(natural(guard=GuardSignal("error", "boom")))
    assert (stop.action, stop.reason) == (Action.COMPLETE, CompletionReason.STOP_GUARD_ERROR)
    fail = resolve(natural(guard=GuardSignal("error", "boom", on_error="fail")))
    assert fail.error is not None and fail.error.code == "stop_guard_failed"


def test_guard_stop_is_the_plain_outcome() -> None:
    assert resolve(natural(guard=GuardSignal("stop"))).reason is CompletionReason.FINAL_ANSWER


def test_exhausted_guard_on_invalid_output_forces_and_carries_its_reason() -> None:
    d = resolve(
        natural(
            guard=GuardSignal("continue", budget_left=False),
            wants_output=True,
            output_error="bad",
            completion_attempts_left=1,
        )
    )
    assert d.action is Action.FORCE_OUTPUT and d.carry is CompletionReason.STOP_GUARD_EXHAUSTED
    done = resolve(natural(wants_output=True, phase=Phase.FORCED_OUTPUT, carried_reason=d.carry))
    assert done.reason is CompletionReason.STOP_GUARD_EXHAUSTED


def test_cap_with_wrap_up_policy_wraps_up_and_its_answer_completes() -> None:
    d = resolve(signals(steps_used=5, max_steps=5, on_max_steps="wrap_up"))
    assert (d.action, d.reason) == (Action.WRAP_UP, CompletionReason.MAX_STEPS)
    done = resolve(natural(steps_used=6, max_steps=5, phase=Phase.WRAP_UP))
    assert done.reason is CompletionReason.MAX_STEPS_WRAPPED_UP


def test_wrap_up_reply_with_tool_calls_is_a_cut_off() -> None:
    d = resolve(signals(steps_used=6, max_steps=5, phase=Phase.WRAP_UP))
    assert d.error is not None and d.error.code == "max_steps_exhausted"


def test_pending_approval_suspends_before_anything_but_a_caller_failure() -> None:
    d = resolve(signals(approvals_pending=True, steps_used=5, max_steps=5))
    assert (d.action, d.reason) == (Action.SUSPEND, CompletionReason.AWAITING_APPROVAL)
    assert resolve(signals(approvals_pending=True, stop_when_error="x")).action is Action.FAIL


def test_a_reviewers_terminate_ends_the_run_as_cancelled() -> None:
    d = resolve(signals(terminated="fraud"))
    assert d.action is Action.TERMINATE and d.reason is CompletionReason.APPROVAL_TERMINATED
    assert d.error is not None and d.error.code == "approval_terminated"


def test_a_runaway_tool_fails_even_on_a_stop_when_step() -> None:
    d = resolve(signals(tool_error_streak="Tool 'x' failed 3 times in a row", stop_when="fired"))
    assert d.action is Action.FAIL and d.error is not None and d.error.code == "tool_error_streak"


def test_an_output_block_completes_with_guardrail_output() -> None:
    d = resolve(natural(output_blocked="leak"))
    assert (d.action, d.reason, d.detail) == (Action.COMPLETE, CompletionReason.GUARDRAIL_OUTPUT, "leak")


def test_an_input_block_completes_with_guardrail_input() -> None:
    d = resolve(StepSignals(input_blocked="pii"))
    assert (d.action, d.reason, d.detail) == (Action.COMPLETE, CompletionReason.GUARDRAIL_INPUT, "pii")


# --- the precedence list in the resolver's docstring, line by line ------------------------------------------

MODEL_DOWN = ErrorDetail(ErrorCode.MODEL_ERROR, "upstream 503", ErrorCategory.MODEL, retryable=True)
GUARDRAIL_BUG = ErrorDetail(ErrorCode.GUARDRAIL_RAISED, "guardrail raised", ErrorCategory.CALLER)


def test_1_cancelled_beats_every_other_signal() -> None:
    d = resolve(
        signals(
            cancelled=True,
            caller_failed=GUARDRAIL_BUG,
            model_failed=MODEL_DOWN,
            input_blocked="pii",
            terminated="fraud",
            approvals_pending=True,
            steps_used=5,
        )
    )
    assert (d.action, d.reason) == (Action.TERMINATE, CompletionReason.CANCELLED)
    assert d.error is not None and d.error.code == "cancelled" and d.error.retryable is True


def test_2_caller_failure_beats_a_model_failure_and_keeps_its_own_error() -> None:
    d = resolve(signals(caller_failed=GUARDRAIL_BUG, model_failed=MODEL_DOWN, input_blocked="pii"))
    assert (d.action, d.reason, d.error) == (Action.FAIL, CompletionReason.ERROR, GUARDRAIL_BUG)


def test_2_a_raising_stop_when_is_caller_code_and_beats_a_model_failure_and_an_input_block() -> None:
    d = resolve(signals(stop_when_error="boom", model_failed=MODEL_DOWN, input_blocked="pii"))
    assert d.action is Action.FAIL and d.error is not None and d.error.code == "stop_when_raised"


def test_3_model_failure_fails_with_the_models_error_before_an_input_block() -> None:
    d = resolve(signals(model_failed=MODEL_DOWN, input_blocked="pii", terminated="fraud"))
    assert (d.action, d.reason, d.error, d.detail) == (Action.FAIL, CompletionReason.ERROR, MODEL_DOWN, "upstream 503")


def test_4_input_block_beats_a_reviewer_and_a_pending_approval() -> None:
    d = resolve(signals(input_blocked="pii", terminated="fraud", approvals_pending=True))
    assert (d.action, d.reason) == (Action.COMPLETE, CompletionReason.GUARDRAIL_INPUT)


def test_5_a_reviewers_terminate_beats_a_suspend_and_a_runaway_tool() -> None:
    d = resolve(signals(terminated="fraud", approvals_pending=True, guardian="escalate", tool_error_streak="x"))
    assert (d.action, d.reason, d.detail) == (Action.TERMINATE, CompletionReason.APPROVAL_TERMINATED, "fraud")


def test_5_expired_approvals_fail_the_run_retryable_rather_than_suspending_again() -> None:
    d = resolve(signals(approval_expired="call c1 expired", approvals_pending=True, tool_error_streak="x"))
    assert (d.action, d.reason, d.detail) == (Action.FAIL, CompletionReason.APPROVAL_EXPIRED, "call c1 expired")
    assert d.error is not None and d.error.code == "approval_expired" and d.error.retryable is True


def test_5_a_reviewers_terminate_beats_expired_approvals_and_a_cancel_beats_both() -> None:
    assert resolve(signals(terminated="fraud", approval_expired="late")).reason is CompletionReason.APPROVAL_TERMINATED
    assert resolve(signals(cancelled=True, approval_expired="late")).reason is CompletionReason.CANCELLED


def test_5_a_rejected_escalation_re_anchors_rather_than_suspending_again() -> None:
    d = resolve(signals(review_rejected="stay on the goal", guardian="escalate", approvals_pending=True))
    assert (d.action, d.detail) == (Action.REPLAN, "stay on the goal")


def test_5_a_rejected_escalation_at_the_cap_is_the_typed_cut_off() -> None:
    d = resolve(signals(review_rejected="stay on the goal", steps_used=5, max_steps=5))
    assert (d.action, d.reason) == (Action.FAIL, CompletionReason.MAX_STEPS)
    assert d.error is not None and d.error.code == "max_steps_exhausted"


def test_6_a_guardian_escalation_suspends_with_its_reason_before_a_runaway_tool() -> None:
    d = resolve(signals(guardian="escalate", guardian_reason="risk unanswered", tool_error_streak="x"))
    assert (d.action, d.reason, d.detail) == (Action.SUSPEND, CompletionReason.AWAITING_APPROVAL, "risk unanswered")
    pending = resolve(signals(approvals_pending=True, tool_error_streak="x"))
    assert pending.action is Action.SUSPEND


def test_7_a_runaway_tool_fails_before_forced_output_and_the_guardians_stops() -> None:
    forced = resolve(natural(tool_error_streak="x", phase=Phase.FORCED_OUTPUT, wants_output=True))
    assert forced.action is Action.FAIL and forced.error is not None and forced.error.code == "tool_error_streak"
    goal = resolve(signals(tool_error_streak="x", guardian="stop_success"))
    assert goal.action is Action.FAIL and goal.error is not None and goal.error.code == "tool_error_streak"


def test_8_forced_output_completes_with_the_carried_reason_even_past_the_cap_and_under_a_stop_failure() -> None:
    d = resolve(
        natural(
            wants_output=True,
            phase=Phase.FORCED_OUTPUT,
            carried_reason=CompletionReason.MAX_STEPS,
            steps_used=6,
            max_steps=5,
            guardian="stop_failure",
        )
    )
    assert (d.action, d.reason) == (Action.COMPLETE, CompletionReason.MAX_STEPS)


def test_8_an_output_block_in_forced_output_completes_with_guardrail_output() -> None:
    d = resolve(natural(wants_output=True, phase=Phase.FORCED_OUTPUT, output_blocked="leak", output_error="bad"))
    assert (d.action, d.reason) == (Action.COMPLETE, CompletionReason.GUARDRAIL_OUTPUT)


def test_9_the_guardians_stop_failure_beats_a_natural_finish() -> None:
    d = resolve(natural(guardian="stop_failure", guardian_reason="infeasible 0.99 >= 0.9", guard=GuardSignal("stop")))
    assert (d.action, d.reason) == (Action.FAIL, CompletionReason.INFEASIBLE)
    assert d.error is not None and (d.error.code, d.error.message) == ("infeasible", "infeasible 0.99 >= 0.9")


def test_9_a_failed_stop_reason_beats_the_guardians_stop_failure() -> None:
    d = resolve(signals(stop_reason=StopReason.REFUSAL, has_tool_calls=False, guardian="stop_failure"))
    assert (d.action, d.reason) == (Action.FAIL, CompletionReason.REFUSAL)


def test_9_the_guardians_stop_success_on_a_final_answer_is_a_natural_finish() -> None:
    assert resolve(natural(guardian="stop_success")).reason is CompletionReason.FINAL_ANSWER
    d = resolve(natural(guardian="stop_success", guard=GuardSignal("fail", "not confirmed")))
    assert d.error is not None and d.error.code == "stop_guard_rejected"


def test_9_a_final_answer_beats_stop_when_and_the_cap() -> None:
    d = resolve(natural(stop_when="fired", steps_used=5, max_steps=5))
    assert (d.action, d.reason) == (Action.COMPLETE, CompletionReason.FINAL_ANSWER)


def test_10_stop_when_beats_the_guardians_stops() -> None:
    d = resolve(signals(stop_when="fired", guardian="stop_failure"))
    assert (d.action, d.reason) == (Action.COMPLETE, CompletionReason.STOP_WHEN)


def test_10_a_stop_at_tools_output_beats_stop_when_the_guardians_stops_and_the_cap() -> None:
    d = resolve(signals(tool_output="submit", stop_when="fired", guardian="stop_failure", steps_used=5, max_steps=5))
    assert (d.action, d.reason) == (Action.COMPLETE, CompletionReason.TOOL_OUTPUT)
    assert "submit" in d.detail


def test_10_a_stop_at_tools_invalid_output_forces_the_output_or_fails() -> None:
    forced = resolve(
        signals(tool_output="submit", wants_output=True, output_error="total: missing", completion_attempts_left=1)
    )
    assert forced.action is Action.FORCE_OUTPUT and forced.detail == "total: missing"
    spent = resolve(
        signals(tool_output="submit", wants_output=True, output_error="total: missing", completion_attempts_left=0)
    )
    assert spent.action is Action.FAIL and spent.error is not None and spent.error.code == ErrorCode.OUTPUT_INVALID


def test_11_the_guardians_stops_beat_the_cap() -> None:
    goal = resolve(signals(guardian="stop_success", guardian_reason="criteria met", steps_used=5, max_steps=5))
    assert (goal.action, goal.reason, goal.detail) == (Action.COMPLETE, CompletionReason.GOAL_REACHED, "criteria met")
    failure = resolve(signals(guardian="stop_failure", steps_used=5, max_steps=5))
    assert (failure.action, failure.reason) == (Action.FAIL, CompletionReason.INFEASIBLE)


def test_11_the_guardians_stop_success_on_an_output_agent_forces_the_output_and_carries_goal_reached() -> None:
    d = resolve(signals(guardian="stop_success", wants_output=True, completion_attempts_left=1))
    assert (d.action, d.carry) == (Action.FORCE_OUTPUT, CompletionReason.GOAL_REACHED)


TOKENS = LimitHit(LimitKind.TOTAL_TOKENS, 100, 150)


def test_3_a_model_call_cut_by_a_time_budget_fails_retryable_before_an_input_block() -> None:
    hit = LimitHit(LimitKind.STEP_TIME, 1.0, 1.0)
    d = resolve(StepSignals(timed_out=hit, input_blocked="no"))
    assert (d.action, d.reason) == (Action.FAIL, CompletionReason.TIME_LIMIT)
    assert d.error is not None and d.error.code == ErrorCode.TIME_LIMIT and d.error.retryable


def test_12_a_spent_budget_fails_with_its_reason_before_the_cap_and_without_a_forced_call() -> None:
    d = resolve(signals(limit_hit=TOKENS, steps_used=5, max_steps=5, wants_output=True, completion_attempts_left=2))
    assert (d.action, d.reason) == (Action.FAIL, CompletionReason.TOKEN_LIMIT)
    assert d.error is not None and d.error.code == ErrorCode.TOKEN_LIMIT and not d.error.retryable


def test_12_a_spent_budget_yields_to_stop_when_and_a_final_answer() -> None:
    assert resolve(signals(limit_hit=TOKENS, stop_when="fired")).reason is CompletionReason.STOP_WHEN
    assert resolve(natural(limit_hit=TOKENS)).reason is CompletionReason.FINAL_ANSWER


def test_9_a_stop_guard_continue_with_a_budget_spent_fails_with_the_budget() -> None:
    d = resolve(natural(limit_hit=TOKENS, guard=GuardSignal("continue", "more", budget_left=True)))
    assert (d.action, d.reason) == (Action.FAIL, CompletionReason.TOKEN_LIMIT)


def test_9_an_output_validators_rejection_retries_with_tools_on_then_fails_output_rejected() -> None:
    retry = resolve(natural(output_rejected="cite a source", completion_attempts_left=1))
    assert (retry.action, retry.detail) == (Action.RETRY_OUTPUT, "cite a source")
    spent = resolve(natural(output_rejected="cite a source", completion_attempts_left=0))
    assert spent.action is Action.FAIL and spent.error is not None
    assert spent.error.code == ErrorCode.OUTPUT_REJECTED and "cite a source" in spent.error.message
    wrap = resolve(natural(output_rejected="no", completion_attempts_left=2, phase=Phase.WRAP_UP, max_steps=3))
    assert wrap.action is Action.FAIL


def test_8_a_rejection_in_forced_completion_forces_again_keeping_the_carried_reason() -> None:
    d = resolve(
        natural(
            phase=Phase.FORCED_OUTPUT,
            wants_output=True,
            output_rejected="cite a source",
            completion_attempts_left=1,
            carried_reason=CompletionReason.MAX_STEPS,
        )
    )
    assert (d.action, d.carry) == (Action.FORCE_OUTPUT, CompletionReason.MAX_STEPS)


def test_12_a_max_steps_handler_completes_at_the_cap_before_forced_completion() -> None:
    d = resolve(
        signals(steps_used=5, max_steps=5, wants_output=True, completion_attempts_left=2, on_max_steps="handler")
    )
    assert (d.action, d.reason) == (Action.COMPLETE, CompletionReason.MAX_STEPS_HANDLED)


def test_12_the_cap_beats_a_replan() -> None:
    d = resolve(signals(guardian="replan", steps_used=5, max_steps=5))
    assert (d.action, d.reason) == (Action.FAIL, CompletionReason.MAX_STEPS)


def test_13_a_replan_under_the_cap_re_anchors_with_the_guardians_reason() -> None:
    d = resolve(signals(guardian="replan", guardian_reason="drift"))
    assert (d.action, d.detail) == (Action.REPLAN, "drift")


def test_14_nothing_fired_continues_and_ends_nothing() -> None:
    d = resolve(signals())
    assert d == StopDecision(Action.CONTINUE) and not d.ends_run


def test_12_a_spent_budget_outranks_the_guardians_replan_and_keeps_its_own_reason() -> None:
    """The guardian's policy reads budgets only while they are not past: a spent one ends the run with its reason,
    never relabelled as a replan (or anything the guardian asked for below a stop)."""
    d = resolve(signals(limit_hit=TOKENS, guardian="replan", guardian_reason="replan: drift"))
    assert (d.action, d.reason) == (Action.FAIL, CompletionReason.TOKEN_LIMIT)
    assert d.error is not None and d.error.code == ErrorCode.TOKEN_LIMIT


def test_line_6_a_step_that_needs_approval_suspends_even_when_it_spent_a_budget() -> None:
    """Line 6 before line 12: the reviewer sees the run as it stands (docs/limits.md); the spent budget ends the run
    at the next decision, unless the reviewer rejects or terminates first."""
    for pending in ({"approvals_pending": True}, {"guardian": "escalate", "guardian_reason": "risk"}):
        d = resolve(signals(limit_hit=TOKENS, **pending))
        assert (d.action, d.reason) == (Action.SUSPEND, CompletionReason.AWAITING_APPROVAL)
    d = resolve(signals(limit_hit=TOKENS))
    assert d.reason is TOKENS.reason


# --- the quiet tool step's shortcut ---------------------------------------------------------------------------

_quiet_signals = st.builds(
    StepSignals,
    stop_reason=st.sampled_from(list(StopReason)),
    has_tool_calls=st.just(True),
    steps_used=st.integers(0, 12),
    max_steps=st.none() | st.integers(1, 10),
    wants_output=st.booleans(),
    phase=st.just(Phase.NORMAL),
    completion_attempts_left=st.integers(-2, 3),
    carried_reason=st.none() | st.sampled_from(list(CompletionReason)),
    on_max_steps=st.sampled_from(["fail", "wrap_up", "handler"]),
)


@settings(max_examples=400, deadline=None)
@given(_quiet_signals)
def test_quiet_tool_step_decides_as_the_full_precedence_does(s: StepSignals) -> None:
    quick = quiet_tool_step(s.steps_used, s.max_steps)
    below_cap = s.max_steps is None or s.steps_used < s.max_steps
    assert (quick is not None) == below_cap  # at the cap the full precedence decides
    if quick is not None:
        assert quick == resolve(s)
