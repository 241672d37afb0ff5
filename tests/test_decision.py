"""The stop decision (seed 002 §2): one pure resolver, order terminal -> stop_when -> max_steps."""

from __future__ import annotations

import pytest

from stopwise import CompletionReason, StopReason
from stopwise.runtime import StepSignals, resolve
from stopwise.stop.decision import Action, GuardSignal, Phase


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
