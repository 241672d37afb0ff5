"""One run leg as a sequence of step phases (DESIGN.md §4). The loop gathers signals and obeys the
resolver; it owns no policy of its own. Every side effect of a step lands in one ``store.commit``.
"""

from __future__ import annotations

import asyncio
import inspect
import re
from collections.abc import AsyncGenerator, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from pydantic import ValidationError

from stopwise.agent import Agent
from stopwise.context import RunContext
from stopwise.errors import ErrorCategory, ErrorCode, ErrorDetail, ModelError, StateNotSerializable
from stopwise.events import (
    Event,
    ModelReplied,
    RunFinished,
    StepCommitted,
    StepStarted,
    StopGuardEvent,
    ToolCalled,
    ToolReturned,
)
from stopwise.messages import Message, Reply, Role, Usage, automated_feedback, error_tool_result
from stopwise.models.base import ModelRequest
from stopwise.result import CompletionReason, RunResult, RunStatus
from stopwise.stop.conditions import StepView
from stopwise.stop.decision import Action, Decision, GuardSignal, Phase, StepSignals, resolve
from stopwise.stop.guard import (
    GUARD_SOURCE,
    GuardOutcome,
    InvalidVerdict,
    StopGuardContext,
    guard_report,
    report_dict,
    settle,
)
from stopwise.store.base import EntryKind, LogEntry, RunRecord, SessionSnapshot, Store

__all__ = ["Leg", "drive", "restore_leg"]

_NO_TOOLS_NOW = "Tools are disabled now: reply with a final answer only."
_FORCE_OUTPUT = "Respond now with only a JSON object that matches the required output schema, and call no tools"
_WRAP_UP = (
    "You have reached the step limit. Tools are now off: give your final answer from what you have gathered "
    "so far, and say what is left undone."
)
_FENCE = re.compile(r"^\s*```(?:json)?\s*(.*?)\s*```\s*$", re.DOTALL)
_NEXT_PHASE = {Action.FORCE_OUTPUT: Phase.FORCED_OUTPUT, Action.WRAP_UP: Phase.WRAP_UP}


@dataclass(slots=True)
class Leg:
    """The mutable state of one run leg (a run, or a retry of it). Built by the runner from the store."""

    agent: Agent
    store: Store
    runner: Any
    run: RunRecord
    """The run record as of the leg's start; the counters below move on from it and are written back at
    the end, so a step costs no record copy."""
    messages: list[Message]
    """The session's log as committed."""
    state: dict[str, Any]
    next_seq: int
    phase: Phase = Phase.NORMAL
    forced_attempts: int = 0
    """Forced-completion calls made in this leg."""
    carried_reason: CompletionReason | None = None
    """The reason a forced phase reports if it succeeds (see ``Decision.carry``)."""
    guard_records: list[Mapping[str, Any]] = field(default_factory=list)
    """This run's stop-guard records, from the log: the budget and the report are counted from them."""
    run_start: int = 0
    """Index in ``messages`` of this run's first row."""
    system: tuple[Message, ...] = field(init=False)
    steps: int = field(init=False)
    usage: Usage = field(init=False)
    text: str = field(init=False)

    def __post_init__(self) -> None:
        self.system = (Message(Role.SYSTEM, self.agent.instructions),) if self.agent.instructions else ()
        self.steps = self.run.steps
        self.usage = self.run.usage
        self.text = self.run.text

    @property
    def steps_used(self) -> int:
        return self.steps - self.run.budget_base

    def record(self, **changes: Any) -> RunRecord:
        """The run record with this leg's progress, its reports, and the given changes."""
        return replace(self.run, steps=self.steps, usage=self.usage, text=self.text, report=self.report(), **changes)

    def report(self) -> dict[str, Any]:
        if self.agent.stop_guard is None:
            return {}
        return {"stop_guard": report_dict(guard_report(self.guard_records))}


def restore_leg(
    agent: Agent,
    store: Store,
    runner: Any,
    snapshot: SessionSnapshot,
    run: RunRecord,
    *,
    crashed: bool,
    messages: list[Message],
    next_seq: int,
) -> Leg:
    """A leg that continues ``run`` from the log.

    After a crash the run record is as old as its leg's start, so progress (steps, usage, last text) and the
    phase (forced completion, wrap-up) come from the log entries. After a failure or cancellation the budget
    starts afresh from the committed steps. Stop-guard records are kept either way: a retry keeps the count.
    """
    entries = [e for e in snapshot.entries if e.run_id == run.run_id and e.kind is EntryKind.STEP]
    guard_records = [r for e in entries for r in e.records if r.get("type") == GUARD_SOURCE]
    phase, attempts, carried = Phase.NORMAL, 0, None
    if crashed and entries:
        usage = Usage()
        for e in entries:
            usage = usage + (e.usage or Usage())
        last = entries[-1]
        run = replace(run, steps=last.step, usage=usage, text=last.messages[0].content)
        decision = last.decision or {}
        phase = _NEXT_PHASE.get(Action(decision.get("action", Action.CONTINUE)), Phase.NORMAL)
        carried = CompletionReason(decision["carry"]) if decision.get("carry") else None
        attempts = sum(
            1 for e in entries if e.step > run.budget_base and (e.decision or {}).get("phase") == Phase.FORCED_OUTPUT
        )
    if not crashed:
        run = replace(run, budget_base=run.steps)
    run = replace(run, status=RunStatus.RUNNING, completion_reason=None, error=None, detail="")
    state = dict(snapshot.state)
    first = next(e.seq for e in snapshot.entries if e.run_id == run.run_id)
    run_start = sum(len(e.messages) for e in snapshot.entries if e.seq < first)
    return Leg(agent, store, runner, run, messages, state, next_seq, phase, attempts, carried, guard_records, run_start)


async def drive(leg: Leg) -> AsyncGenerator[Event, None]:
    """Run steps until the resolver ends the leg; yields events, the last one ``RunFinished``."""
    run_id = leg.run.run_id
    try:
        while True:
            step = leg.steps + 1
            phase = leg.phase
            yield StepStarted(run_id, step, phase is not Phase.NORMAL)
            reply = await _call_model(leg, step, phase)
            if isinstance(reply, ErrorDetail):
                yield RunFinished(run_id, step, await _end_without_step(leg, reply, CompletionReason.ERROR))
                return
            yield ModelReplied(run_id, step, reply)
            rows: list[Message] = []
            if reply.tool_calls:
                for call in reply.tool_calls:
                    yield ToolCalled(run_id, step, call)
                rows = await _run_tools(leg, step, reply, phase)
                for call, row in zip(reply.tool_calls, rows, strict=True):
                    yield ToolReturned(run_id, step, call, row)
            guard = await _consult_guard(leg, step, reply, phase) if _guard_applies(leg, reply, phase) else None
            decision, output = _decide(leg, reply, rows, phase, guard)
            record = _guard_record(leg, step, guard, decision) if guard is not None else None
            try:
                entry, result = await _commit(leg, step, reply, rows, decision, output, phase, guard, record)
            except StateNotSerializable as exc:
                # Nothing of the step was written; the run ends with the committed steps intact.
                error = ErrorDetail(ErrorCode.STATE_INVALID, str(exc), ErrorCategory.CALLER, retryable=False)
                yield RunFinished(run_id, step, await _end_without_step(leg, error, CompletionReason.ERROR))
                return
            if record is not None:
                yield _guard_event(leg, step, record)
            yield StepCommitted(run_id, step, entry.seq, decision)
            if result is not None:
                yield RunFinished(run_id, step, result)
                return
    except (asyncio.CancelledError, GeneratorExit):
        # The caller cancelled the task or abandoned the stream: record it so retry() can continue.
        if leg.run.status is not RunStatus.RUNNING:
            raise
        await asyncio.shield(
            _end_without_step(
                leg,
                ErrorDetail(ErrorCode.CANCELLED, "The run was cancelled", ErrorCategory.CALLER, retryable=True),
                CompletionReason.CANCELLED,
                status=RunStatus.CANCELLED,
            )
        )
        raise


async def _call_model(leg: Leg, step: int, phase: Phase) -> Reply | ErrorDetail:
    agent = leg.agent
    request = ModelRequest(
        messages=(*leg.system, *leg.messages),
        tools=agent.tool_specs if phase is Phase.NORMAL else (),
        step=step,
        output_schema=agent.output_schema,
        forced_output=phase is Phase.FORCED_OUTPUT,
    )
    try:
        reply = await agent.model.generate(request)
    except ModelError as exc:
        facts = {"provider": exc.provider, "status": exc.status, "request_id": exc.request_id}
        return ErrorDetail(ErrorCode.MODEL_ERROR, str(exc), ErrorCategory.MODEL, exc.retryable, facts)
    except Exception as exc:
        return ErrorDetail(ErrorCode.MODEL_ERROR, f"{type(exc).__name__}: {exc}", ErrorCategory.MODEL, retryable=True)
    if not isinstance(reply, Reply):
        message = f"model returned {type(reply).__name__}, expected Reply"
        return ErrorDetail(ErrorCode.MODEL_ERROR, message, ErrorCategory.MODEL, retryable=False)
    return reply


async def _run_tools(leg: Leg, step: int, reply: Reply, phase: Phase) -> list[Message]:
    if phase is not Phase.NORMAL:
        return [error_tool_result(_NO_TOOLS_NOW, tool_call_id=c.id) for c in reply.tool_calls]
    tool_map = leg.agent.tool_map
    run = leg.run

    async def one(call: Any) -> Message:
        t = tool_map.get(call.name)
        if t is None:
            names = ", ".join(tool_map) or "none"
            return error_tool_result(f"Unknown tool '{call.name}'. Available tools: {names}", tool_call_id=call.id)
        ctx = RunContext(run.session_id, run.run_id, step, call.id, leg.state, leg.runner)
        return await t.invoke(call, ctx)

    if len(reply.tool_calls) == 1:
        return [await one(reply.tool_calls[0])]
    return list(await asyncio.gather(*(one(c) for c in reply.tool_calls)))


def _guard_applies(leg: Leg, reply: Reply, phase: Phase) -> bool:
    """The stop guard runs only on a natural finish that the run chose, never on a cut-off or forced call."""
    agent = leg.agent
    if agent.stop_guard is None or not reply.is_natural_finish or phase is Phase.FORCED_OUTPUT:
        return False
    if phase is Phase.WRAP_UP:
        return True
    # On the step that reaches the cap, continuing would turn a completion into a max-steps failure.
    return agent.max_steps is None or leg.steps_used + 1 < agent.max_steps


async def _consult_guard(leg: Leg, step: int, reply: Reply, phase: Phase) -> tuple[GuardOutcome, bool]:
    """Call the guard under its time limit; returns its outcome and whether a continue was still allowed."""
    guard = leg.agent.stop_guard
    assert guard is not None
    used = guard_report(leg.guard_records).continues_used
    ctx = StopGuardContext(
        session_id=leg.run.session_id,
        run_id=leg.run.run_id,
        step=step,
        attempt=len(leg.guard_records) + 1,
        reply=reply,
        messages=(*leg.messages, Message(Role.ASSISTANT, reply.text)),
        run_start=leg.run_start,
        state=leg.state,
        continues_used=used,
        max_continues=guard.max_continues,
    )
    budget_left = used < guard.max_continues and phase is Phase.NORMAL
    try:
        async with asyncio.timeout(guard.timeout) as scope:
            verdict: Any = guard.check(ctx) if guard.is_async else await asyncio.to_thread(guard.check, ctx)
            if inspect.isawaitable(verdict):
                verdict = await verdict
        return settle(verdict, ctx), budget_left
    except InvalidVerdict as exc:
        return GuardOutcome("error", f"invalid verdict: {exc}"), budget_left
    except TimeoutError as exc:
        if scope.expired():
            return GuardOutcome("error", f"timed out after {guard.timeout:g}s"), budget_left
        return GuardOutcome("error", f"raised TimeoutError: {exc}"), budget_left
    except Exception as exc:
        return GuardOutcome("error", f"raised {type(exc).__name__}: {exc}"), budget_left


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


def _decide(
    leg: Leg, reply: Reply, rows: list[Message], phase: Phase, guard: tuple[GuardOutcome, bool] | None
) -> tuple[Decision, Any]:
    """Gather this step's signals and ask the resolver. Caller predicates run here, never in the resolver."""
    agent = leg.agent
    forced = phase is Phase.FORCED_OUTPUT
    output, output_error = None, None
    if agent.output_type is not None and (forced or not reply.tool_calls):
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
    signals = StepSignals(
        stop_reason=reply.stop_reason,
        has_tool_calls=bool(reply.tool_calls),
        steps_used=leg.steps_used + 1,
        max_steps=agent.max_steps,
        stop_when=stop_when,
        stop_when_error=stop_when_error,
        wants_output=agent.output_type is not None,
        output_error=output_error,
        phase=phase,
        completion_attempts_left=agent.max_completion_retries - leg.forced_attempts - (1 if forced else 0),
        guard=guard_signal,
        carried_reason=leg.carried_reason,
        on_max_steps=agent.on_max_steps,
    )
    return resolve(signals), output


def _guard_record(leg: Leg, step: int, guard: tuple[GuardOutcome, bool], decision: Decision) -> dict[str, Any]:
    outcome, _ = guard
    event = {"stop": "accepted", "fail": "rejected", "error": "error", "continue": "continued"}[outcome.kind]
    if outcome.kind == "continue" and decision.action is not Action.CONTINUE:
        event = "exhausted"
    name = leg.agent.stop_guard.name if leg.agent.stop_guard is not None else GUARD_SOURCE
    record: dict[str, Any] = {"type": GUARD_SOURCE, "event": event, "guard": name, "step": step}
    if outcome.message:
        record["message"] = outcome.message
    return record


def _guard_event(leg: Leg, step: int, record: Mapping[str, Any]) -> StopGuardEvent:
    guard = leg.agent.stop_guard
    note = guard.progress_note if guard is not None and record["event"] == "continued" else None
    return StopGuardEvent(
        leg.run.run_id, step, f"{GUARD_SOURCE}.{record['event']}", record["guard"], record.get("message"), note
    )


async def _commit(
    leg: Leg,
    step: int,
    reply: Reply,
    rows: list[Message],
    decision: Decision,
    output: Any,
    phase: Phase,
    guard: tuple[GuardOutcome, bool] | None,
    guard_record: Mapping[str, Any] | None,
) -> tuple[LogEntry, RunResult | None]:
    """Commit the step (and, if it ends the run, the run record) in one transaction; then advance the leg."""
    run = leg.run
    new_rows = [Message(Role.ASSISTANT, reply.text, reply.tool_calls), *rows]
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
    usage = reply.usage or Usage()
    usage = Usage(usage.input_tokens, usage.output_tokens, usage.requests or 1)
    records = (guard_record,) if guard_record is not None else ()
    entry = LogEntry(
        run.session_id,
        leg.next_seq,
        run.run_id,
        step,
        EntryKind.STEP,
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
        records,
    )
    leg_usage = leg.usage + usage
    guard_records = [*leg.guard_records, *records]
    ended: RunRecord | None = None
    final_output: Any = None
    if decision.ends_run:
        if decision.action is Action.COMPLETE and decision.reason is not CompletionReason.STOP_WHEN:
            final_output = output if leg.agent.output_type is not None else reply.text
        report = {"stop_guard": report_dict(guard_report(guard_records))} if leg.agent.stop_guard else {}
        ended = replace(
            run,
            status=RunStatus.COMPLETED if decision.action is Action.COMPLETE else RunStatus.FAILED,
            completion_reason=decision.reason,
            error=decision.error,
            output=_jsonable(final_output),
            detail=decision.detail,
            steps=step,
            usage=leg_usage,
            text=reply.text,
            report=report,
        )
    await leg.store.commit(entry, state, ended)
    # Only now, with the step durable, does the leg move on.
    leg.steps, leg.usage, leg.text, leg.state = step, leg_usage, reply.text, state
    leg.messages.extend(new_rows)
    leg.next_seq += 1
    leg.guard_records = guard_records
    if phase is Phase.FORCED_OUTPUT:
        leg.forced_attempts += 1
    leg.phase = _NEXT_PHASE.get(decision.action, Phase.NORMAL)
    if decision.action is Action.FORCE_OUTPUT:
        leg.carried_reason = decision.carry
    result = None
    if ended is not None:
        leg.run = ended
        result = _result(leg, final_output)
    return entry, result


async def _end_without_step(
    leg: Leg,
    error: ErrorDetail,
    reason: CompletionReason,
    status: RunStatus = RunStatus.FAILED,
) -> RunResult:
    """End the leg when no step can be committed (the model raised, the run was cancelled)."""
    leg.run = leg.record(status=status, completion_reason=reason, error=error, detail=error.message)
    await leg.store.update_run(leg.run)
    return _result(leg, None)


def _jsonable(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)
    return dump(mode="json") if dump is not None else value


def _result(leg: Leg, output: Any) -> RunResult:
    run = leg.run
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
        state=_frozen_copy(leg.state),
        messages=tuple(leg.messages),
        detail=run.detail,
        stop_guard=guard_report(leg.guard_records) if leg.agent.stop_guard is not None else None,
    )


def _frozen_copy(state: Mapping[str, Any]) -> Mapping[str, Any]:
    return MappingProxyType(dict(state))
