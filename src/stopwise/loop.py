"""One run leg as a sequence of step phases (DESIGN.md §4). The loop gathers signals and obeys the
resolver; it owns no policy of its own. Every side effect of a step lands in one ``store.commit``.

A leg: begin (input guardrails, then the leg's start is committed) -> [settle a suspended step] -> steps.
A step: model call -> tool-call guardrails -> approval gate -> tools -> tool-result guardrails -> stop guard
-> resolve -> output guardrails -> commit.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncGenerator, Iterable, Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any

from pydantic import ValidationError

from stopwise.approvals import PendingApproval, args_hash
from stopwise.errors import ErrorCategory, ErrorCode, ErrorDetail, StateNotSerializable
from stopwise.events import (
    Event,
    GuardrailEvent,
    ModelReplied,
    RunFinished,
    StepCommitted,
    StepStarted,
    StopGuardEvent,
    TextDelta,
    ToolCalled,
    ToolReturned,
)
from stopwise.guardian.conditions import Outcome
from stopwise.guardian.records import RECORD_TYPE as GUARDIAN
from stopwise.guardian.records import Decision as GuardianDecision
from stopwise.guardrails.hooks import (
    InputContext,
    OutputContext,
    run_chain,
)
from stopwise.guardrails.verdicts import GuardrailError, GuardrailRaised, GuardrailRecord, Hook
from stopwise.leg import KEPT, NEXT_PHASE, CallPlan, Leg, Settle, restore_leg, streaks
from stopwise.messages import (
    Message,
    Reply,
    Role,
    Usage,
    automated_feedback,
)
from stopwise.models._validate import model_failure, validate_reply
from stopwise.models.base import ModelRequest, stream_reply
from stopwise.result import CompletionReason, RunResult, RunStatus
from stopwise.step.calls import CallerCodeFailed, caller_failure, execute_calls, guard_results, plan_calls
from stopwise.step.guardian import consult_turn, quarantine, reanchor
from stopwise.step.stop_guard import consult_guard, guard_applies, guard_record
from stopwise.stop.conditions import StepView
from stopwise.stop.decision import (
    Action,
    Decision,
    GuardSignal,
    Phase,
    StepSignals,
    input_blocked,
    resolve,
)
from stopwise.stop.guard import (
    GUARD_SOURCE,
    GuardOutcome,
    guard_report,
)
from stopwise.store.base import EntryKind, LogEntry, RunRecord

__all__ = ["CallPlan", "Leg", "Settle", "drive", "restore_leg"]


@dataclass(slots=True)
class _Outcome:
    """A step, decided and ready to commit: what the model said, what came back, and what the resolver decided."""

    step: int
    reply: Reply
    rows: list[Message]
    decision: Decision
    output: Any
    phase: Phase
    guard: tuple[GuardOutcome, bool] | None
    records: list[Mapping[str, Any]]
    kind: EntryKind = EntryKind.STEP
    plans: list[CallPlan] | None = None
    """The suspended batch's calls, when the decision suspends for approval."""


_FORCE_OUTPUT = "Respond now with only a JSON object that matches the required output schema, and call no tools"
_WRAP_UP = (
    "You have reached the step limit. Tools are now off: give your final answer from what you have gathered "
    "so far, and say what is left undone."
)


_FENCE = re.compile(r"^\s*```(?:json)?\s*(.*?)\s*```\s*$", re.DOTALL)
_TEXT_ENDINGS = frozenset(
    {
        CompletionReason.FINAL_ANSWER,
        CompletionReason.OUTPUT,
        CompletionReason.STOP_GUARD_EXHAUSTED,
        CompletionReason.STOP_GUARD_ERROR,
        CompletionReason.MAX_STEPS_WRAPPED_UP,
    }
)
_STATUS = {Action.COMPLETE: RunStatus.COMPLETED, Action.FAIL: RunStatus.FAILED, Action.TERMINATE: RunStatus.CANCELLED}


async def drive(leg: Leg) -> AsyncGenerator[Event, None]:
    """Run the leg until the resolver ends it; yields events, the last one ``RunFinished``."""
    try:
        async for event in _begin(leg):
            yield event
            if isinstance(event, RunFinished):
                return
        while True:
            async for event in _step(leg):
                yield event
                if isinstance(event, RunFinished):
                    return
    except (asyncio.CancelledError, GeneratorExit):
        # The caller cancelled the task or abandoned the stream: record it so retry() can continue. A resume that
        # had not settled its step yet leaves the run suspended, so the same decisions can be sent again.
        if leg.run.status is not RunStatus.RUNNING or leg.settle is not None:
            raise
        error = ErrorDetail(ErrorCode.CANCELLED, "The run was cancelled", ErrorCategory.CALLER, retryable=True)
        await asyncio.shield(_end_without_step(leg, error, CompletionReason.CANCELLED, status=RunStatus.CANCELLED))
        raise


# --- begin ---------------------------------------------------------------------------------------------------


async def _begin(leg: Leg) -> AsyncGenerator[Event, None]:
    """Input guardrails (once per leg, on the restored history plus new input), then the leg's start commit."""
    run = leg.run
    history = (*leg.messages, *leg.new_input)
    guardrails = leg.agent.guardrails
    entry: LogEntry | None = None
    if leg.new_input:
        entry = LogEntry(run.session_id, leg.next_seq, run.run_id, 0, EntryKind.INPUT, leg.new_input)
    if guardrails is not None and guardrails.has(Hook.INPUT):
        try:
            chain = await run_chain(
                guardrails,
                Hook.INPUT,
                history,
                lambda msgs: InputContext(msgs, None, run.session_id, run.run_id, leg.runtime_context),
                step=None,
            )
        except (GuardrailRaised, GuardrailError) as exc:
            yield RunFinished(run.run_id, leg.steps, await _end_without_step(leg, caller_failure(exc)))
            return
        records = tuple(r.to_data() for r in chain.records)
        if chain.block is not None:
            note = LogEntry(run.session_id, leg.next_seq, run.run_id, 0, EntryKind.NOTE, (), records=records)
            decision = input_blocked(chain.block.reason)
            text = chain.block.replacement or ""
            leg.records.extend(records)
            leg.run = leg.record(
                status=RunStatus.COMPLETED,
                completion_reason=decision.reason,
                detail=decision.detail,
                text=text,
                output=text,
            )
            leg.text = text
            await leg.store.start_run(leg.run, note, leg.state)
            leg.next_seq += 1
            for record in chain.records:
                yield GuardrailEvent(run.run_id, 0, record)
            yield RunFinished(run.run_id, leg.steps, _result(leg, text))
            return
        if chain.records:
            rewritten = list(chain.value)
            entry = LogEntry(
                run.session_id, leg.next_seq, run.run_id, 0, EntryKind.REWRITE, tuple(rewritten), records=records
            )
            # The rows after the run's start keep their count; what was prepended belongs to the history.
            leg.run_start = max(0, len(rewritten) - (len(history) - leg.run_start))
            leg.records.extend(records)
            history = tuple(rewritten)
            for record in chain.records:
                yield GuardrailEvent(run.run_id, 0, record)
    if leg.write_start:
        await leg.store.start_run(leg.record(), entry, leg.state)
    elif entry is not None:
        await leg.store.commit(entry, leg.state)
    if entry is not None:
        leg.next_seq += 1
    leg.messages = list(history)


# --- one step ------------------------------------------------------------------------------------------------


async def _step(leg: Leg) -> AsyncGenerator[Event, None]:
    run_id = leg.run.run_id
    settling = leg.settle
    records: list[Mapping[str, Any]] = []
    if settling is None:
        step, phase = leg.steps + 1, leg.phase
        yield StepStarted(run_id, step, phase is not Phase.NORMAL)
        answer: Reply | ErrorDetail | None = None
        if not leg.stream_text:
            answer = await _generate(leg, step, phase)
        else:
            async for item in _stream(leg, step, phase):
                if isinstance(item, TextDelta):
                    yield item
                else:
                    answer = item
        if not isinstance(answer, Reply):
            error = answer if isinstance(answer, ErrorDetail) else model_failure(TypeError("the model gave no reply"))
            yield RunFinished(run_id, step, await _end_without_step(leg, error))
            return
        reply = answer
        yield ModelReplied(run_id, step, reply)
        plans: list[CallPlan] = []
        if reply.tool_calls:
            for call in reply.tool_calls:
                yield ToolCalled(run_id, step, call)
            try:
                plans = await plan_calls(leg, step, reply, phase, records)
            except CallerCodeFailed as exc:
                yield RunFinished(run_id, step, await _end_without_step(leg, exc.detail))
                return
        if any(p.needs_approval for p in plans):
            decision = resolve(_signals(leg, reply, phase, approvals_pending=True))
            suspended = _Outcome(step, reply, [], decision, None, phase, None, records, plans=plans)
            for event in await _finish_step(leg, suspended):
                yield event
            return
    else:
        # ``leg.settle`` stays set until the settled step commits (see ``_commit``).
        step, phase, reply, plans = settling.step, Phase.NORMAL, settling.reply, settling.plans
        records.extend(settling.records)
        if settling.escalation:
            for event in await _settle_review(leg, settling, records):
                yield event
            return

    rows = await execute_calls(leg, step, plans)
    try:
        rows = await guard_results(leg, step, plans, rows, records)
    except CallerCodeFailed as exc:
        yield RunFinished(run_id, step, await _end_without_step(leg, exc.detail))
        return
    for plan, row in zip(plans, rows, strict=True):
        yield ToolReturned(run_id, step, plan.call, row)
    counts = streaks(((p.call.name, r) for p, r in zip(plans, rows, strict=True)), leg.tool_streaks)
    runaway = next((n for n, count in counts.items() if count >= leg.agent.max_tool_errors), None)
    streak = f"Tool '{runaway}' failed {counts[runaway]} times in a row" if runaway is not None else None

    turn: GuardianDecision | None = None
    if leg.agent.guardian is not None and leg.agent.guardian.turn_conditions and phase is Phase.NORMAL:
        consultation = await consult_turn(leg, step, reply, rows)
        turn = consultation.decision
        records.extend([turn.to_data(), *consultation.labels])
        if turn.outcome is Outcome.ESCALATE and "integrity" in turn.escalated and plans:
            rows = quarantine(plans, rows, records)
    escalating = turn is not None and turn.outcome is Outcome.ESCALATE
    applies = not escalating and guard_applies(leg, reply, phase)
    guard = await consult_guard(leg, step, reply, phase) if applies else None
    terminated = settling.terminated if settling is not None else None
    verdict = None if turn is None or turn.outcome is Outcome.CONTINUE else (turn.outcome.value, turn.reason)
    decision, output = _decide(leg, reply, rows, phase, guard, streak, terminated=terminated, guardian=verdict)
    if decision.action is Action.COMPLETE and decision.reason in _TEXT_ENDINGS:
        try:
            reply, decision, output = await _guard_output(
                leg, step, reply, rows, phase, guard, decision, output, records
            )
        except CallerCodeFailed as exc:
            yield RunFinished(run_id, step, await _end_without_step(leg, exc.detail))
            return
    kind = EntryKind.SETTLE if settling is not None else EntryKind.STEP
    outcome = _Outcome(step, reply, rows, decision, output, phase, guard, records, kind)
    for event in await _finish_step(leg, outcome, streaks=counts):
        yield event


def _request(leg: Leg, step: int, phase: Phase) -> ModelRequest:
    agent = leg.agent
    return ModelRequest(
        messages=(*leg.system, *leg.messages),
        tools=agent.tool_specs if phase is Phase.NORMAL else (),
        step=step,
        output_schema=agent.output_schema,
        forced_output=phase is Phase.FORCED_OUTPUT,
    )


def _checked(leg: Leg, reply: object) -> Reply | ErrorDetail:
    """The model boundary: a malformed reply becomes a ``model_error``; call ids are made unique in the session."""
    valid = validate_reply(reply, leg.agent.reply_limits)
    if isinstance(valid, ErrorDetail) or not valid.tool_calls:
        return valid
    return leg.call_ids.unique(valid, leg.messages)


async def _generate(leg: Leg, step: int, phase: Phase) -> Reply | ErrorDetail:
    """The model's reply in one piece, or the error it ended with."""
    try:
        return _checked(leg, await leg.agent.caller.generate(_request(leg, step, phase)))
    except Exception as exc:
        return model_failure(exc)


async def _stream(leg: Leg, step: int, phase: Phase) -> AsyncGenerator[TextDelta | Reply | ErrorDetail, None]:
    """Text deltas as the model writes them, then its reply (or the error it ended with)."""
    try:
        async for item in stream_reply(leg.agent.caller, _request(leg, step, phase)):
            yield TextDelta(leg.run.run_id, step, item) if isinstance(item, str) else _checked(leg, item)
    except Exception as exc:
        yield model_failure(exc)


# --- the guardian --------------------------------------------------------------------------------------------


async def _settle_review(leg: Leg, settling: Settle, records: list[Mapping[str, Any]]) -> list[Event]:
    """Settle a step a guardian escalation suspended: the review's rows commit, and the run goes on from the
    step's own outcome (an approved final answer ends the run; a rejection re-anchors it)."""
    reply, step = settling.reply, settling.step
    rows = list(settling.rows)
    guard = None
    if settling.terminated is None and settling.rejected is None and guard_applies(leg, reply, Phase.NORMAL):
        guard = await consult_guard(leg, step, reply, Phase.NORMAL)
    decision, output = _decide(
        leg, reply, [], Phase.NORMAL, guard, None, terminated=settling.terminated, review_rejected=settling.rejected
    )
    return await _finish_step(
        leg, _Outcome(step, reply, rows, decision, output, Phase.NORMAL, guard, records, EntryKind.SETTLE)
    )


def _check_output(leg: Leg, text: str) -> tuple[Any, str | None]:
    output_type = leg.agent.output_type
    assert output_type is not None
    match = _FENCE.match(text)
    try:
        return output_type.model_validate_json(match.group(1) if match else text), None
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or '(root)'}: {e['msg']}" for e in exc.errors(include_url=False)
        )
        return None, problems


def _signals(leg: Leg, reply: Reply, phase: Phase, **signals: Any) -> StepSignals:
    agent = leg.agent
    forced = phase is Phase.FORCED_OUTPUT
    return StepSignals(
        stop_reason=reply.stop_reason,
        has_tool_calls=bool(reply.tool_calls),
        steps_used=leg.steps_used + 1,
        max_steps=agent.max_steps,
        wants_output=agent.output_type is not None,
        phase=phase,
        completion_attempts_left=agent.max_completion_retries - leg.forced_attempts - (1 if forced else 0),
        carried_reason=leg.carried_reason,
        on_max_steps=agent.on_max_steps,
        **signals,
    )


def _decide(
    leg: Leg,
    reply: Reply,
    rows: list[Message],
    phase: Phase,
    guard: tuple[GuardOutcome, bool] | None,
    streak: str | None,
    output_blocked: str | None = None,
    terminated: str | None = None,
    guardian: tuple[str, str] | None = None,
    review_rejected: str | None = None,
) -> tuple[Decision, Any]:
    """Gather this step's signals and ask the resolver. Caller predicates run here, never in the resolver."""
    agent = leg.agent
    output, output_error = None, None
    if agent.output_type is not None and (phase is Phase.FORCED_OUTPUT or not reply.tool_calls):
        if reply.tool_calls:
            output_error = "the reply called tools instead of giving the structured output"
        else:
            output, output_error = _check_output(leg, reply.text)
    stop_when, stop_when_error = None, None
    condition = agent.stop_condition
    if condition is not None and reply.tool_calls and phase is Phase.NORMAL:
        view = StepView(leg.steps_used + 1, reply, tuple(rows), (*leg.messages, *rows))
        try:
            stop_when = condition(view)
        except Exception as exc:
            stop_when_error = f"stop_when {condition.label} raised {type(exc).__name__}: {exc}"
    guard_signal = None
    if guard is not None:
        outcome, budget_left = guard
        on_error = agent.stop_guard.on_error if agent.stop_guard is not None else "stop"
        guard_signal = GuardSignal(outcome.kind, outcome.message, budget_left, on_error)
    signals = _signals(
        leg,
        reply,
        phase,
        stop_when=stop_when,
        stop_when_error=stop_when_error,
        output_error=output_error,
        guard=guard_signal,
        tool_error_streak=streak,
        output_blocked=output_blocked,
        terminated=terminated,
        guardian=guardian[0] if guardian is not None else None,
        guardian_reason=guardian[1] if guardian is not None else "",
        review_rejected=review_rejected,
    )
    return resolve(signals), output


async def _guard_output(
    leg: Leg,
    step: int,
    reply: Reply,
    rows: list[Message],
    phase: Phase,
    guard: tuple[GuardOutcome, bool] | None,
    decision: Decision,
    output: Any,
    records: list[Mapping[str, Any]],
) -> tuple[Reply, Decision, Any]:
    """Output guardrails on an accepted final answer: the last word. A rewrite is authoritative (the log and
    the run record carry it); a block replaces the text and the resolver records ``guardrail_output``."""
    guardrails = leg.agent.guardrails
    if guardrails is None or not guardrails.has(Hook.OUTPUT):
        return reply, decision, output
    run = leg.run
    history = tuple(leg.messages)
    try:
        chain = await run_chain(
            guardrails,
            Hook.OUTPUT,
            reply.text,
            lambda text: OutputContext(history, step, run.session_id, run.run_id, leg.runtime_context, text),
            step=step,
        )
    except (GuardrailRaised, GuardrailError) as exc:
        raise CallerCodeFailed(caller_failure(exc)) from exc
    records.extend(r.to_data() for r in chain.records)
    if chain.block is not None:
        blocked = replace(reply, text=chain.block.replacement or "")
        decision, _ = _decide(leg, reply, rows, phase, guard, None, output_blocked=chain.block.reason)
        return blocked, decision, None
    if chain.value != reply.text:
        reply = replace(reply, text=chain.value)
        if leg.agent.output_type is not None:
            output, problem = _check_output(leg, reply.text)
            if problem is not None:
                name = chain.records[-1].name if chain.records else "output"
                error = GuardrailError(name, Hook.OUTPUT, f"the rewritten text is not valid output: {problem}")
                raise CallerCodeFailed(caller_failure(error))
    return reply, decision, output


def _events_for(leg: Leg, step: int, records: Iterable[Mapping[str, Any]]) -> list[Event]:
    events: list[Event] = []
    guard = leg.agent.stop_guard
    for r in records:
        if r.get("type") == "guardrail":
            events.append(GuardrailEvent(leg.run.run_id, step, GuardrailRecord.from_data(r)))
        elif r.get("type") == GUARD_SOURCE:
            note = guard.progress_note if guard is not None and r["event"] == "continued" else None
            kind = f"{GUARD_SOURCE}.{r['event']}"
            events.append(StopGuardEvent(leg.run.run_id, step, kind, r["guard"], r.get("message"), note))
    return events


async def _finish_step(leg: Leg, o: _Outcome, *, streaks: dict[str, int] | None = None) -> list[Event]:
    """Commit the step and return the events that report it (the last is ``RunFinished`` if it ended)."""
    if o.guard is not None:
        o.records.append(guard_record(leg, o.step, o.guard, o.decision))
    try:
        entry, result = await _commit(leg, o)
    except StateNotSerializable as exc:
        # Nothing of the step was written; the run ends with the committed steps intact.
        error = ErrorDetail(ErrorCode.STATE_INVALID, str(exc), ErrorCategory.CALLER, retryable=False)
        return [RunFinished(leg.run.run_id, o.step, await _end_without_step(leg, error))]
    if streaks is not None:
        leg.tool_streaks = streaks
    events = _events_for(leg, o.step, o.records) if o.records else []
    events.append(StepCommitted(leg.run.run_id, o.step, entry.seq, o.decision))
    if result is not None:
        events.append(RunFinished(leg.run.run_id, o.step, result))
    return events


async def _commit(leg: Leg, o: _Outcome) -> tuple[LogEntry, RunResult | None]:
    """Commit the step (and the run record, when it ends, suspends or settles) in one transaction; then
    advance the leg."""
    step, reply, rows, decision, output, phase = o.step, o.reply, o.rows, o.decision, o.output, o.phase
    guard, records, kind, plans = o.guard, o.records, o.kind, o.plans
    run = leg.run
    new_rows = [] if kind is EntryKind.SETTLE else [Message(Role.ASSISTANT, reply.text, reply.tool_calls)]
    new_rows.extend(rows)
    state = leg.state
    if guard is not None and guard[0].state is not None:
        # The guard's writes ride this step's commit, even when its continue was refused for budget.
        state = guard[0].state
    if decision.action is Action.CONTINUE and guard is not None:
        new_rows.extend(guard[0].rows)
    elif decision.action is Action.FORCE_OUTPUT:
        why = f" ({decision.detail})" if decision.detail else ""
        new_rows.append(automated_feedback(f"{_FORCE_OUTPUT}{why}.", source="forced_completion"))
    elif decision.action is Action.WRAP_UP:
        new_rows.append(automated_feedback(_WRAP_UP, source="wrap_up"))
    elif decision.action is Action.REPLAN:
        new_rows.append(automated_feedback(reanchor(leg, decision.detail), source="guardian_replan"))
    pending: list[PendingApproval] = []
    turn = next((r for r in records if r.get("type") == GUARDIAN and r.get("kind") == "turn"), None)
    if decision.action is Action.SUSPEND and turn is not None and turn["outcome"] == Outcome.ESCALATE:
        # A guardian escalation: nothing is pending but the review itself.
        review = {"conditions": list(turn.get("escalated", ())), "reason": turn["reason"]}
        pending.append(PendingApproval(f"guardian:{step}", "guardian", review, args_hash(review), None))
        quarantined = [r["tool_call_id"] for r in records if r.get("type") == "tool_receipt" and r.get("quarantined")]
        records.append({"type": "approval_request", "calls": [], "escalation": {**review, "quarantined": quarantined}})
    elif decision.action is Action.SUSPEND and plans is not None:
        now = leg.clock()
        for p in plans:
            if p.needs_approval and p.tool is not None and p.args is not None:
                ttl = p.tool.approval_ttl
                expires = None if ttl is None else now + ttl
                pending.append(PendingApproval(p.call.id, p.call.name, dict(p.args), args_hash(p.args), expires))
        records.append({"type": "approval_request", "calls": [p.to_data() for p in plans]})
    usage = Usage() if kind is EntryKind.SETTLE else reply.usage or Usage()
    if kind is EntryKind.STEP:
        usage = Usage(usage.input_tokens, usage.output_tokens, usage.requests or 1)
    entry = LogEntry(
        run.session_id,
        leg.next_seq,
        run.run_id,
        step,
        kind,
        tuple(new_rows),
        {
            "action": decision.action.value,
            "reason": decision.reason,
            "detail": decision.detail,
            "phase": phase.value,
            "carry": decision.carry,
        },
        usage,
        phase is not Phase.NORMAL,
        tuple(records),
    )
    leg_usage = leg.usage + usage
    all_records = [*leg.records, *(r for r in records if r.get("type") in KEPT)]
    written: RunRecord | None = None
    final_output: Any = None
    report = leg.report(all_records)
    if decision.ends_run:
        if decision.action is Action.COMPLETE and decision.reason is not CompletionReason.STOP_WHEN:
            final_output = output if leg.agent.output_type is not None else reply.text
        written = replace(
            run,
            status=_STATUS[decision.action],
            completion_reason=decision.reason,
            error=decision.error,
            output=_jsonable(final_output),
            detail=decision.detail,
            steps=step,
            usage=leg_usage,
            text=reply.text,
            report=report,
        )
    elif decision.action is Action.SUSPEND:
        report = {**report, "pending": [p.to_data() for p in pending]}
        written = replace(
            run,
            status=RunStatus.SUSPENDED,
            completion_reason=decision.reason,
            steps=step,
            usage=leg_usage,
            text=reply.text,
            report=report,
        )
    elif kind is EntryKind.SETTLE:
        # The resumed run is running again once its suspended step is settled, in the same transaction.
        written = replace(
            run, status=RunStatus.RUNNING, completion_reason=None, steps=step, usage=leg_usage, report=report
        )
    await leg.store.commit(entry, state, written)
    if kind is EntryKind.SETTLE:
        leg.settle = None
    # Only now, with the step durable, does the leg move on.
    leg.steps, leg.usage, leg.state = step, leg_usage, state
    if kind is EntryKind.STEP:
        leg.text = reply.text
    leg.messages.extend(new_rows)
    leg.next_seq += 1
    leg.records = all_records
    if phase is Phase.FORCED_OUTPUT:
        leg.forced_attempts += 1
    leg.phase = NEXT_PHASE.get(decision.action, Phase.NORMAL)
    if decision.action is Action.FORCE_OUTPUT:
        leg.carried_reason = decision.carry
    if decision.action is Action.REPLAN:
        leg.replans += 1
    result = None
    if written is not None:
        leg.run = written
    if decision.ends_run or decision.action is Action.SUSPEND:
        result = _result(leg, final_output, tuple(pending))
    return entry, result


async def _end_without_step(
    leg: Leg,
    error: ErrorDetail,
    reason: CompletionReason = CompletionReason.ERROR,
    status: RunStatus = RunStatus.FAILED,
) -> RunResult:
    """End the leg when no step can be committed (the model raised, caller code failed, a cancellation)."""
    leg.run = leg.record(status=status, completion_reason=reason, error=error, detail=error.message)
    await leg.store.update_run(leg.run)
    return _result(leg, None)


def _jsonable(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)
    return dump(mode="json") if dump is not None else value


def _result(leg: Leg, output: Any, pending: tuple[PendingApproval, ...] = ()) -> RunResult:
    run = leg.run
    records = leg.records
    return RunResult(
        status=run.status,
        completion_reason=run.completion_reason,
        error=run.error,
        output=output,
        text=run.text,
        usage=run.usage,
        steps=run.steps,
        session_id=run.session_id,
        run_id=run.run_id,
        state=MappingProxyType(dict(leg.state)),
        messages=tuple(leg.messages),
        detail=run.detail,
        stop_guard=guard_report(records) if leg.agent.stop_guard is not None else None,
        guardrails=tuple(GuardrailRecord.from_data(r) for r in records if r.get("type") == "guardrail"),
        pending=pending,
        decisions=tuple(GuardianDecision.from_data(r) for r in records if r.get("type") == GUARDIAN),
    )
