"""One run leg as a sequence of step phases (DESIGN.md §4). The loop gathers signals and obeys the
resolver; it owns no policy of its own. Every side effect of a step lands in one ``store.commit``.

A leg: begin (input guardrails, then the leg's start is committed) -> [settle a suspended step] -> steps.
A step: model call -> tool-call guardrails -> approval gate -> tools -> tool-result guardrails -> stop guard
-> resolve -> output guardrails -> commit.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import re
import time
from collections.abc import AsyncGenerator, Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from pydantic import ValidationError

from stopwise.agent import Agent
from stopwise.approvals import PendingApproval, args_hash
from stopwise.context import RunContext
from stopwise.errors import ErrorCategory, ErrorCode, ErrorDetail, ModelError, StateNotSerializable
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
from stopwise.guardian.guardian import Consultation, consult
from stopwise.guardian.policy import PolicyInputs
from stopwise.guardian.projection import project
from stopwise.guardian.records import RECORD_TYPE as GUARDIAN
from stopwise.guardian.records import Decision as GuardianDecision
from stopwise.guardrails.hooks import (
    InputContext,
    OutputContext,
    ToolCallContext,
    ToolResultContext,
    run_chain,
)
from stopwise.guardrails.verdicts import GuardrailError, GuardrailRaised, GuardrailRecord, Hook
from stopwise.messages import (
    DENIED,
    ORIGIN,
    TOOL_ERROR,
    Message,
    Reply,
    Role,
    ToolCall,
    Usage,
    automated_feedback,
    decode_tool_result,
    encode_tool_result,
    error_tool_result,
)
from stopwise.models.base import ModelRequest, stream_reply
from stopwise.result import CompletionReason, RunResult, RunStatus
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
    InvalidVerdict,
    StopGuardContext,
    guard_report,
    report_dict,
    settle,
)
from stopwise.store.base import EntryKind, LogEntry, RunRecord, SessionSnapshot, Store
from stopwise.tools import Tool, parse_args

__all__ = ["CallPlan", "Leg", "Settle", "drive", "restore_leg"]

_NO_TOOLS_NOW = "Tools are disabled now: reply with a final answer only."
_FORCE_OUTPUT = "Respond now with only a JSON object that matches the required output schema, and call no tools"
_WRAP_UP = (
    "You have reached the step limit. Tools are now off: give your final answer from what you have gathered "
    "so far, and say what is left undone."
)


def _reanchor(leg: Leg, why: str) -> str:
    guardian = leg.agent.guardian
    criteria = guardian.criteria if guardian is not None else ()
    lines = [f"Re-anchor on the original goal: {_goal(leg)}"]
    if criteria:
        lines.append("Acceptance criteria: " + "; ".join(criteria))
    if why:
        lines.append(f"Why: {why}")
    lines.append("Plan the next step toward the goal; do not repeat what already failed or added nothing.")
    return "\n".join(lines)


_FENCE = re.compile(r"^\s*```(?:json)?\s*(.*?)\s*```\s*$", re.DOTALL)
_NEXT_PHASE = {Action.FORCE_OUTPUT: Phase.FORCED_OUTPUT, Action.WRAP_UP: Phase.WRAP_UP}
_TEXT_ENDINGS = frozenset(
    {
        CompletionReason.FINAL_ANSWER,
        CompletionReason.OUTPUT,
        CompletionReason.STOP_GUARD_EXHAUSTED,
        CompletionReason.STOP_GUARD_ERROR,
        CompletionReason.MAX_STEPS_WRAPPED_UP,
    }
)
_KEPT = (GUARD_SOURCE, "guardrail", GUARDIAN)
"""Record types a leg keeps in memory: budgets, hysteresis and reports are counted from them."""
_STATUS = {Action.COMPLETE: RunStatus.COMPLETED, Action.FAIL: RunStatus.FAILED, Action.TERMINATE: RunStatus.CANCELLED}


class _CallerCodeFailed(Exception):
    """Caller code (a guardrail, an approval predicate) failed mid-step: the run ends with this detail."""

    def __init__(self, detail: ErrorDetail) -> None:
        super().__init__(detail.message)
        self.detail = detail


@dataclass(slots=True)
class CallPlan:
    """What happens to one tool call of a step, decided before anything in the batch runs."""

    call: ToolCall
    tool: Tool | None
    args: Mapping[str, Any] | None
    """The arguments that run (after a tool-call guardrail rewrite or a reviewer's change)."""
    row: Message | None = None
    """Set when the call is answered without running (unknown tool, bad arguments, a block, a rejection)."""
    needs_approval: bool = False

    def to_data(self) -> dict[str, Any]:
        row = None if self.row is None else {"content": self.row.content, "metadata": dict(self.row.metadata)}
        return {
            "call_id": self.call.id,
            "tool": self.call.name,
            "args": None if self.args is None else dict(self.args),
            "row": row,
            "needs_approval": self.needs_approval,
        }


@dataclass(slots=True)
class Settle:
    """A suspended step to finish when the run resumes: its reply and its calls, decisions applied."""

    step: int
    reply: Reply
    plans: list[CallPlan]
    records: list[Mapping[str, Any]]
    """The reviewer's decisions, as records committed with the settled step."""
    terminated: str | None = None
    """A reviewer's ``Terminate`` reason: the step settles with every call denied and the run ends."""
    escalation: bool = False
    """The step was suspended by a guardian escalation (not a tool approval): nothing runs when it settles."""
    rows: tuple[Message, ...] = ()
    """For an escalation: rows the review adds (released quarantined outputs)."""
    rejected: str | None = None
    """For an escalation: the reviewer's rejection message."""


@dataclass(slots=True)
class Leg:
    """The mutable state of one run leg (a run, a retry or a resume of it). Built by the runner."""

    agent: Agent
    store: Store
    runner: Any
    run: RunRecord
    """The run record as of the leg's start; the counters below move on from it and are written back at
    the end, so a step costs no record copy."""
    messages: list[Message]
    """The history as committed (the model sees the agent's instructions, then these)."""
    state: dict[str, Any]
    next_seq: int
    phase: Phase = Phase.NORMAL
    forced_attempts: int = 0
    """Forced-completion calls made in this leg."""
    carried_reason: CompletionReason | None = None
    """The reason a forced phase reports if it succeeds (see ``Decision.carry``)."""
    records: list[Mapping[str, Any]] = field(default_factory=list)
    """This run's decision records from the log (stop guard, guardrails): budgets and reports count them."""
    run_start: int = 0
    """Index in ``messages`` of this run's first row."""
    new_input: tuple[Message, ...] = ()
    """Rows the caller adds at this leg's start; committed (after the input guardrails) when the leg begins."""
    write_start: bool = True
    """Whether beginning the leg writes the run record (a resume leaves it suspended until its step settles)."""
    settle: Settle | None = None
    replans: int = 0
    """Replans made in this run (from the log's recorded decisions)."""
    tool_streaks: dict[str, int] = field(default_factory=dict)
    """Consecutive failed results per tool, for the runaway-error guard."""
    runtime_context: Any = None
    clock: Callable[[], float] = time.time
    stream_text: bool = False
    """Ask the model for text deltas (``runner.stream``); a plain ``run`` takes the reply in one piece."""
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
        fields: dict[str, Any] = {"steps": self.steps, "usage": self.usage, "text": self.text, "report": self.report()}
        fields.update(changes)
        return replace(self.run, **fields)

    def report(self, records: Iterable[Mapping[str, Any]] | None = None) -> dict[str, Any]:
        if self.agent.stop_guard is None:
            return {}
        return {"stop_guard": report_dict(guard_report(self.records if records is None else records))}


def _streaks(rows: Iterable[tuple[str, Message]], start: Mapping[str, int]) -> dict[str, int]:
    """Consecutive failed results per tool: a denial is not a failure, one clean result resets the count."""
    streaks = dict(start)
    for name, row in rows:
        if row.metadata.get(DENIED):
            continue
        streaks[name] = streaks.get(name, 0) + 1 if row.metadata.get(TOOL_ERROR) else 0
    return streaks


def restore_leg(
    agent: Agent,
    store: Store,
    runner: Any,
    snapshot: SessionSnapshot,
    run: RunRecord,
    *,
    fresh_budget: bool,
    new_input: tuple[Message, ...] = (),
) -> Leg:
    """A leg that continues ``run`` from the log.

    The run record may be as old as its leg's start (a crash), so progress (steps, usage, last text), the
    phase (forced completion, wrap-up) and the tool-error streaks come from the log entries. ``fresh_budget``
    (a retry after a failure or cancellation) counts ``max_steps`` from the committed steps. Decision records
    are kept either way: a retry keeps the stop guard's count.
    """
    entries = [e for e in snapshot.entries if e.run_id == run.run_id]
    steps = [e for e in entries if e.kind in (EntryKind.STEP, EntryKind.SETTLE)]
    records = [r for e in entries for r in e.records if r.get("type") in _KEPT]
    phase, attempts, carried = Phase.NORMAL, 0, None
    if steps:
        usage = Usage()
        for e in steps:
            usage = usage + (e.usage or Usage())
        last = steps[-1]
        replies = [e for e in steps if e.kind is EntryKind.STEP]
        run = replace(run, steps=last.step, usage=usage, text=replies[-1].messages[0].content if replies else "")
        decision = last.decision or {}
        phase = _NEXT_PHASE.get(Action(decision.get("action", Action.CONTINUE)), Phase.NORMAL)
        carried = CompletionReason(decision["carry"]) if decision.get("carry") else None
        attempts = sum(
            1 for e in steps if e.step > run.budget_base and (e.decision or {}).get("phase") == Phase.FORCED_OUTPUT
        )
    if fresh_budget:
        run = replace(run, budget_base=run.steps)
        phase, attempts, carried = Phase.NORMAL, 0, None
    run = replace(run, status=RunStatus.RUNNING, completion_reason=None, error=None, detail="")
    names = {c.id: c.name for e in steps for m in e.messages for c in m.tool_calls}
    tool_rows = [(names.get(m.tool_call_id or "", ""), m) for e in steps for m in e.messages if m.role is Role.TOOL]
    first = entries[0].seq if entries else snapshot.next_seq
    return Leg(
        agent,
        store,
        runner,
        run,
        snapshot.messages(),
        dict(snapshot.state),
        snapshot.next_seq,
        phase,
        attempts,
        carried,
        records,
        run_start=snapshot.history_before(first),
        new_input=new_input,
        replans=sum(1 for e in steps if (e.decision or {}).get("action") == Action.REPLAN),
        tool_streaks=_streaks(tool_rows, {}),
    )


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
        # The caller cancelled the task or abandoned the stream: record it so retry() can continue.
        if leg.run.status is not RunStatus.RUNNING:
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
            yield RunFinished(run.run_id, leg.steps, await _end_without_step(leg, _caller_failure(exc)))
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
            error = answer if isinstance(answer, ErrorDetail) else _model_error(TypeError("the model gave no reply"))
            yield RunFinished(run_id, step, await _end_without_step(leg, error))
            return
        reply = answer
        yield ModelReplied(run_id, step, reply)
        plans: list[CallPlan] = []
        if reply.tool_calls:
            for call in reply.tool_calls:
                yield ToolCalled(run_id, step, call)
            try:
                plans = await _plan_calls(leg, step, reply, phase, records)
            except _CallerCodeFailed as exc:
                yield RunFinished(run_id, step, await _end_without_step(leg, exc.detail))
                return
        if any(p.needs_approval for p in plans):
            decision = resolve(_signals(leg, reply, phase, approvals_pending=True))
            for event in await _finish_step(leg, step, reply, [], decision, None, phase, None, records, plans=plans):
                yield event
            return
    else:
        leg.settle = None
        step, phase, reply, plans = settling.step, Phase.NORMAL, settling.reply, settling.plans
        records.extend(settling.records)
        if settling.escalation:
            for event in await _settle_review(leg, settling, records):
                yield event
            return

    rows = await _execute(leg, step, plans)
    try:
        rows = await _guard_results(leg, step, plans, rows, records)
    except _CallerCodeFailed as exc:
        yield RunFinished(run_id, step, await _end_without_step(leg, exc.detail))
        return
    for plan, row in zip(plans, rows, strict=True):
        yield ToolReturned(run_id, step, plan.call, row)
    streaks = _streaks(((p.call.name, r) for p, r in zip(plans, rows, strict=True)), leg.tool_streaks)
    runaway = next((n for n, count in streaks.items() if count >= leg.agent.max_tool_errors), None)
    streak = f"Tool '{runaway}' failed {streaks[runaway]} times in a row" if runaway is not None else None

    turn: GuardianDecision | None = None
    if leg.agent.guardian is not None and leg.agent.guardian.turn_conditions and phase is Phase.NORMAL:
        consultation = await _consult_turn(leg, step, reply, rows)
        turn = consultation.decision
        records.extend([turn.to_data(), *consultation.labels])
        if turn.outcome is Outcome.ESCALATE and "integrity" in turn.escalated and plans:
            rows = _quarantine(plans, rows, records)
    escalating = turn is not None and turn.outcome is Outcome.ESCALATE
    applies = not escalating and _guard_applies(leg, reply, phase)
    guard = await _consult_guard(leg, step, reply, phase) if applies else None
    terminated = settling.terminated if settling is not None else None
    verdict = None if turn is None or turn.outcome is Outcome.CONTINUE else (turn.outcome.value, turn.reason)
    decision, output = _decide(leg, reply, rows, phase, guard, streak, terminated=terminated, guardian=verdict)
    if decision.action is Action.COMPLETE and decision.reason in _TEXT_ENDINGS:
        try:
            reply, decision, output = await _guard_output(
                leg, step, reply, rows, phase, guard, decision, output, records
            )
        except _CallerCodeFailed as exc:
            yield RunFinished(run_id, step, await _end_without_step(leg, exc.detail))
            return
    kind = EntryKind.SETTLE if settling is not None else EntryKind.STEP
    for event in await _finish_step(
        leg, step, reply, rows, decision, output, phase, guard, records, kind=kind, streaks=streaks
    ):
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


def _model_error(exc: Exception) -> ErrorDetail:
    if isinstance(exc, ModelError):
        facts = {"provider": exc.provider, "status": exc.status, "request_id": exc.request_id}
        return ErrorDetail(ErrorCode.MODEL_ERROR, str(exc), ErrorCategory.MODEL, exc.retryable, facts)
    return ErrorDetail(ErrorCode.MODEL_ERROR, f"{type(exc).__name__}: {exc}", ErrorCategory.MODEL, retryable=True)


def _checked(reply: object) -> Reply | ErrorDetail:
    if isinstance(reply, Reply):
        return reply
    message = f"model returned {type(reply).__name__}, expected Reply"
    return ErrorDetail(ErrorCode.MODEL_ERROR, message, ErrorCategory.MODEL, retryable=False)


async def _generate(leg: Leg, step: int, phase: Phase) -> Reply | ErrorDetail:
    """The model's reply in one piece, or the error it ended with."""
    try:
        return _checked(await leg.agent.caller.generate(_request(leg, step, phase)))
    except Exception as exc:
        return _model_error(exc)


async def _stream(leg: Leg, step: int, phase: Phase) -> AsyncGenerator[TextDelta | Reply | ErrorDetail, None]:
    """Text deltas as the model writes them, then its reply (or the error it ended with)."""
    try:
        async for item in stream_reply(leg.agent.caller, _request(leg, step, phase)):
            yield TextDelta(leg.run.run_id, step, item) if isinstance(item, str) else _checked(item)
    except Exception as exc:
        yield _model_error(exc)


def _caller_failure(exc: Exception) -> ErrorDetail:
    code = ErrorCode.GUARDRAIL_INVALID if isinstance(exc, GuardrailError) else ErrorCode.GUARDRAIL_RAISED
    return ErrorDetail(code, str(exc), ErrorCategory.CALLER, retryable=False)


async def _plan_calls(
    leg: Leg, step: int, reply: Reply, phase: Phase, records: list[Mapping[str, Any]]
) -> list[CallPlan]:
    """Parse each call, run the tool-call guardrails, and ask the approval gate; nothing executes yet."""
    if phase is not Phase.NORMAL:
        return [
            CallPlan(c, None, None, error_tool_result(_NO_TOOLS_NOW, tool_call_id=c.id, origin="stopwise"))
            for c in reply.tool_calls
        ]
    tool_map = leg.agent.tool_map
    guardrails = leg.agent.guardrails
    guard_calls = guardrails is not None and guardrails.has(Hook.TOOL_CALL)
    history = (*leg.messages, Message(Role.ASSISTANT, reply.text, reply.tool_calls))
    run = leg.run
    plans = []
    for call in reply.tool_calls:
        t = tool_map.get(call.name)
        if t is None:
            names = ", ".join(tool_map) or "none"
            message = f"Unknown tool '{call.name}'. Available tools: {names}"
            plans.append(
                CallPlan(call, None, None, error_tool_result(message, tool_call_id=call.id, origin="stopwise"))
            )
            continue
        parsed = parse_args(call, t.name)
        if isinstance(parsed, Message):
            plans.append(CallPlan(call, t, None, parsed))
            continue
        args = parsed
        if guard_calls:
            assert guardrails is not None
            try:
                chain = await run_chain(
                    guardrails,
                    Hook.TOOL_CALL,
                    args,
                    lambda a, this=call: ToolCallContext(  # type: ignore[misc]
                        history, step, run.session_id, run.run_id, leg.runtime_context, replace(this, args=a)
                    ),
                    step=step,
                    tool_call_id=call.id,
                )
            except (GuardrailRaised, GuardrailError) as exc:
                raise _CallerCodeFailed(_caller_failure(exc)) from exc
            records.extend(r.to_data() for r in chain.records)
            if chain.block is not None:
                # A verdict, not a tool failure: the model reads it, it never reaches approval, and it does not
                # count toward the runaway-error guard.
                message = f"Blocked by guardrail '{chain.blocked_by}': {chain.block.reason}"
                row = error_tool_result(message, tool_call_id=call.id, origin="stopwise", denied=True)
                plans.append(CallPlan(call, t, args, row))
                continue
            args = chain.value
        escalate = False
        if leg.agent.guardian is not None and leg.agent.guardian.call_conditions:
            consultation = await _consult_call(leg, step, [history[-1]], replace(call, args=dict(args)))
            records.extend([consultation.decision.to_data(), *consultation.labels])
            # The risk gate runs before the approval gate: an escalation here is an approval request.
            escalate = consultation.decision.outcome is Outcome.ESCALATE
        try:
            needs = escalate or t.requires_approval(args)
        except Exception as exc:
            detail = f"needs_approval of tool '{t.name}' raised {type(exc).__name__}: {exc}"
            error = ErrorDetail(ErrorCode.APPROVAL_PREDICATE_RAISED, detail, ErrorCategory.CALLER, retryable=False)
            raise _CallerCodeFailed(error) from exc
        plans.append(CallPlan(call, t, args, needs_approval=needs))
    return plans


async def _execute(leg: Leg, step: int, plans: list[CallPlan]) -> list[Message]:
    """Run every call that has no answer yet, concurrently; answers keep the calls' order."""
    run = leg.run

    async def one(plan: CallPlan) -> Message:
        if plan.row is not None:
            return plan.row
        assert plan.tool is not None and plan.args is not None
        ctx = RunContext(run.session_id, run.run_id, step, plan.call.id, leg.state, leg.runner, leg.runtime_context)
        return await plan.tool.invoke(plan.call, ctx, plan.args)

    if len(plans) == 1:
        return [await one(plans[0])]
    return list(await asyncio.gather(*(one(p) for p in plans)))


async def _guard_results(
    leg: Leg, step: int, plans: list[CallPlan], rows: list[Message], records: list[Mapping[str, Any]]
) -> list[Message]:
    """Tool-result guardrails, per result in call order, once the whole batch settled. Only output a tool
    produced is judged; a rewrite or block keeps the raw result in a receipt record for audit."""
    guardrails = leg.agent.guardrails
    if guardrails is None or not guardrails.has(Hook.TOOL_RESULT):
        return rows
    run = leg.run
    history = tuple(leg.messages)
    guarded = []
    for plan, row in zip(plans, rows, strict=True):
        if plan.row is not None or row.metadata.get(ORIGIN) == "stopwise":
            guarded.append(row)
            continue
        is_error = bool(row.metadata.get(TOOL_ERROR))
        this = replace(plan.call, args=dict(plan.args or {}))
        try:
            chain = await run_chain(
                guardrails,
                Hook.TOOL_RESULT,
                decode_tool_result(row),
                lambda value, this=this, is_error=is_error: ToolResultContext(  # type: ignore[misc]
                    history, step, run.session_id, run.run_id, leg.runtime_context, this, value, is_error
                ),
                step=step,
                tool_call_id=plan.call.id,
            )
        except (GuardrailRaised, GuardrailError) as exc:
            raise _CallerCodeFailed(_caller_failure(exc)) from exc
        if not chain.records:
            guarded.append(row)
            continue
        records.extend(r.to_data() for r in chain.records)
        records.append(
            {"type": "tool_receipt", "tool_call_id": plan.call.id, "raw": row.content, "metadata": dict(row.metadata)}
        )
        if chain.block is not None:
            message = f"Blocked by guardrail '{chain.blocked_by}': {chain.block.reason}"
            guarded.append(error_tool_result(message, tool_call_id=plan.call.id, origin="stopwise"))
        else:
            new = encode_tool_result(chain.value, tool_call_id=plan.call.id)
            if is_error:
                new = replace(new, metadata={**new.metadata, TOOL_ERROR: True, ORIGIN: "tool"})
            guarded.append(new)
    return guarded


# --- the guardian --------------------------------------------------------------------------------------------


def _goal(leg: Leg) -> str:
    guardian = leg.agent.guardian
    if guardian is not None and guardian.goal:
        return guardian.goal
    first = next((m for m in leg.messages[leg.run_start :] if m.role is Role.USER), None)
    return first.content if first is not None else ""


def _projection_for(leg: Leg, rows: list[Message], *, pending: ToolCall | None = None, final: str | None = None) -> Any:
    guardian = leg.agent.guardian
    assert guardian is not None
    return project(
        [*leg.messages[leg.run_start :], *rows],
        goal=_goal(leg),
        criteria=guardian.criteria,
        last_k=guardian.history_steps,
        result_chars=guardian.result_chars,
        risks={t.name: t.risk.value for t in leg.agent.tools},
        pending=pending,
        final=final,
        max_chars=guardian.max_chars,
    )


def _repeats(messages: list[Message]) -> int:
    """How many times in a row the latest call (same tool, same arguments) was made."""
    calls = [(c.name, json.dumps(c.args, sort_keys=True, default=str)) for m in messages for c in m.tool_calls]
    if not calls:
        return 0
    count = 0
    for c in reversed(calls):
        if c != calls[-1]:
            break
        count += 1
    return count


def _policy_inputs(leg: Leg, rows: list[Message]) -> PolicyInputs:
    turns = [r for r in leg.records if r.get("type") == GUARDIAN and r.get("kind") == "turn"]
    names = [c.name for c in leg.agent.guardian.turn_conditions] if leg.agent.guardian else []
    held_before = {n: tuple(bool(r.get("held", {}).get(n, False)) for r in turns[-9:]) for n in names}
    return PolicyInputs(held_before, leg.replans, _repeats([*leg.messages[leg.run_start :], *rows]))


async def _consult_call(leg: Leg, step: int, history: list[Message], call: ToolCall) -> Consultation:
    """The pre-execution questions (risk) about one proposed call, before it runs."""
    guardian = leg.agent.guardian
    assert guardian is not None
    projection = _projection_for(leg, history, pending=call)
    return await consult(
        guardian,
        projection,
        guardian.call_conditions,
        PolicyInputs({}, leg.replans, 0),
        run_id=leg.run.run_id,
        step=step,
        kind="pre_execution",
        call_id=call.id,
    )


async def _consult_turn(leg: Leg, step: int, reply: Reply, rows: list[Message]) -> Consultation:
    """The turn's questions, after its tools ran: one evaluator call for every turn condition."""
    guardian = leg.agent.guardian
    assert guardian is not None
    step_rows = [Message(Role.ASSISTANT, reply.text, reply.tool_calls), *rows]
    final = reply.text if reply.is_natural_finish else None
    return await consult(
        guardian,
        _projection_for(leg, step_rows, final=final),
        guardian.turn_conditions,
        _policy_inputs(leg, step_rows),
        run_id=leg.run.run_id,
        step=step,
        kind="turn",
    )


_QUARANTINE = "[tool output withheld by the guardian until a reviewer releases it]"
# Worded as a plain notice: the evaluator reads the projection too, and a notice that itself addressed the agent
# would keep the integrity question firing after the output was withheld.


def _quarantine(plans: list[CallPlan], rows: list[Message], records: list[Mapping[str, Any]]) -> list[Message]:
    """Withhold this step's tool outputs from the model; the raw rows stay in receipts for the review."""
    held = []
    for plan, row in zip(plans, rows, strict=True):
        if row.metadata.get(ORIGIN) == "stopwise":
            held.append(row)
            continue
        records.append(
            {
                "type": "tool_receipt",
                "tool_call_id": plan.call.id,
                "raw": row.content,
                "metadata": dict(row.metadata),
                "quarantined": True,
            }
        )
        held.append(Message(Role.TOOL, _QUARANTINE, tool_call_id=plan.call.id, metadata={"quarantined": True}))
    return held


async def _settle_review(leg: Leg, settling: Settle, records: list[Mapping[str, Any]]) -> list[Event]:
    """Settle a step a guardian escalation suspended: the review's rows commit, and the run goes on from the
    step's own outcome (an approved final answer ends the run; a rejection re-anchors it)."""
    reply, step = settling.reply, settling.step
    rows = list(settling.rows)
    guard = None
    if settling.terminated is None and settling.rejected is None and _guard_applies(leg, reply, Phase.NORMAL):
        guard = await _consult_guard(leg, step, reply, Phase.NORMAL)
    decision, output = _decide(
        leg, reply, [], Phase.NORMAL, guard, None, terminated=settling.terminated, review_rejected=settling.rejected
    )
    return await _finish_step(
        leg, step, reply, rows, decision, output, Phase.NORMAL, guard, records, kind=EntryKind.SETTLE
    )


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
    guard_records = [r for r in leg.records if r.get("type") == GUARD_SOURCE]
    used = guard_report(guard_records).continues_used
    ctx = StopGuardContext(
        session_id=leg.run.session_id,
        run_id=leg.run.run_id,
        step=step,
        attempt=len(guard_records) + 1,
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
        raise _CallerCodeFailed(_caller_failure(exc)) from exc
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
                raise _CallerCodeFailed(_caller_failure(error))
    return reply, decision, output


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


async def _finish_step(
    leg: Leg,
    step: int,
    reply: Reply,
    rows: list[Message],
    decision: Decision,
    output: Any,
    phase: Phase,
    guard: tuple[GuardOutcome, bool] | None,
    records: list[Mapping[str, Any]],
    *,
    kind: EntryKind = EntryKind.STEP,
    plans: list[CallPlan] | None = None,
    streaks: dict[str, int] | None = None,
) -> list[Event]:
    """Commit the step and return the events that report it (the last is ``RunFinished`` if it ended)."""
    if guard is not None:
        records.append(_guard_record(leg, step, guard, decision))
    try:
        entry, result = await _commit(leg, step, reply, rows, decision, output, phase, guard, records, kind, plans)
    except StateNotSerializable as exc:
        # Nothing of the step was written; the run ends with the committed steps intact.
        error = ErrorDetail(ErrorCode.STATE_INVALID, str(exc), ErrorCategory.CALLER, retryable=False)
        return [RunFinished(leg.run.run_id, step, await _end_without_step(leg, error))]
    if streaks is not None:
        leg.tool_streaks = streaks
    events = _events_for(leg, step, records) if records else []
    events.append(StepCommitted(leg.run.run_id, step, entry.seq, decision))
    if result is not None:
        events.append(RunFinished(leg.run.run_id, step, result))
    return events


async def _commit(
    leg: Leg,
    step: int,
    reply: Reply,
    rows: list[Message],
    decision: Decision,
    output: Any,
    phase: Phase,
    guard: tuple[GuardOutcome, bool] | None,
    records: list[Mapping[str, Any]],
    kind: EntryKind,
    plans: list[CallPlan] | None,
) -> tuple[LogEntry, RunResult | None]:
    """Commit the step (and the run record, when it ends, suspends or settles) in one transaction; then
    advance the leg."""
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
        new_rows.append(automated_feedback(_reanchor(leg, decision.detail), source="guardian_replan"))
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
    all_records = [*leg.records, *(r for r in records if r.get("type") in _KEPT)]
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
    # Only now, with the step durable, does the leg move on.
    leg.steps, leg.usage, leg.state = step, leg_usage, state
    if kind is EntryKind.STEP:
        leg.text = reply.text
    leg.messages.extend(new_rows)
    leg.next_seq += 1
    leg.records = all_records
    if phase is Phase.FORCED_OUTPUT:
        leg.forced_attempts += 1
    leg.phase = _NEXT_PHASE.get(decision.action, Phase.NORMAL)
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
