"""One run leg as a sequence of step phases (docs/architecture.md, "One step, in order"). The loop gathers
signals and obeys the resolver; it owns no policy of its own. Every side effect of a step lands in one ``store.commit``.

A leg: begin (input guardrails, then the leg's start is committed) -> steps; on a resume: begin -> settle the
suspended step -> input guardrails -> steps.
A step: model call -> plan the calls (tool-call guardrails, risk gate, approval gate) -> tools -> tool-result
guardrails -> guardian turn -> stop guard -> resolve -> output guardrails -> commit.
Every ending, including the ones with no step to commit (a failed model call, failed caller code, a cancellation,
a blocked input), is a ``StepSignals`` the resolver decides and ``apply_decision`` writes.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncGenerator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from pydantic_core import ValidationError

from stopwise._leg import KEPT, NEXT_PHASE, CallPlan, Leg, Settle, restore_leg, streaks, usage_data
from stopwise._results import result_of
from stopwise._step.batch import ToolOutput, output_problems, plan_batch, tool_output
from stopwise._step.calls import (
    CallerCodeFailed,
    caller_failure,
    execute_calls,
    guard_results,
    list_sources,
    plan_calls,
    plans_now,
)
from stopwise._step.guardian import consult_turn, quarantine, reanchor, restate
from stopwise._step.output import run_max_steps_handler, run_validators
from stopwise._step.prepare import Prepared, plain_prepared, prepare
from stopwise._step.stop_guard import consult_guard, guard_applies, guard_record, guard_rows_kept, guard_switches
from stopwise.approvals import ApprovalRecord, ApprovalRequest, Escalation, PendingApproval, args_hash
from stopwise.errors import ErrorCategory, ErrorCode, ErrorDetail, StateNotSerializable, StepConflict
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
from stopwise.goal import Goal
from stopwise.guardian.conditions import GuardianOutcome
from stopwise.guardian.records import GuardianDecision, GuardianLabel, judge_usage
from stopwise.guardrails.hooks import ChainResult, InputContext, OutputContext, run_chain
from stopwise.guardrails.verdicts import GuardrailError, GuardrailRaised, GuardrailRecord, Hook
from stopwise.history_view import HistoryView
from stopwise.messages import Message, Reply, Role, Usage, automated_feedback, error_tool_result
from stopwise.models._validate import model_failure, validate_reply
from stopwise.models.base import ModelRequest, stream_reply
from stopwise.records import LogRecord, ResumeIntent, StepIntent, ToolReceipt, to_data
from stopwise.result import CompletionReason, RunResult, RunStatus
from stopwise.row_copies import CopiedRows, own_call, own_calls, own_row
from stopwise.stop.conditions import StepView
from stopwise.stop.decision import (
    Action,
    GuardSignal,
    Phase,
    StepSignals,
    StopDecision,
    apply_decision,
    quiet_tool_step,
    resolve,
)
from stopwise.stop.guard import StopGuardOutcome, StopGuardRecord
from stopwise.stop.limits import LimitHit, LimitKind, Spent, budget_used, cut_at_cap, exceeded, run_time_left, time_left
from stopwise.store.base import EntryKind, Fence, LogEntry, RunRecord

__all__ = ["CallPlan", "Leg", "Settle", "drive", "restore_leg"]


_NO_USAGE = Usage()
"""Nothing used: a step's sub-agent usage until its calls report some, a results entry's usage (a frozen value:
shared, not built per step)."""
_ONE_REQUEST = Usage(requests=1)
"""A reply's usage when its model reported none: one request."""


@dataclass(slots=True)
class _Step:
    """A step while it is being decided: what the model said, what came back, and what the deciders said."""

    number: int
    phase: Phase
    reply: Reply
    kind: EntryKind = EntryKind.STEP
    prepared: Prepared | None = None
    """What the model call used (``Agent.prepare_step``); None when settling a suspended step."""
    plans: list[CallPlan] = field(default_factory=list)
    rows: list[Message] = field(default_factory=list)
    """The tool rows (or, when settling an escalation, the review's rows) this step adds after the reply."""
    records: list[LogRecord] = field(default_factory=list)
    """Records this step's last commit writes."""
    written: Sequence[LogRecord] = ()
    """Records already committed with the step's write-ahead intent (they are reported with the step)."""
    intent: bool = False
    """The reply and its planned calls are committed (``_write_intent``, or a recorded intent carried out after
    a crash): the step's own commit writes only its results, as a ``SETTLE`` entry."""
    guard: tuple[StopGuardOutcome, bool] | None = None
    """The stop guard's outcome and whether a continue was still allowed, when it ran."""
    turn: GuardianDecision | None = None
    """The guardian's turn decision, when it was consulted."""
    streaks: Mapping[str, int] | None = None
    """Consecutive failures per tool after this step (None: the step ran no tools)."""
    terminated: str | None = None
    rejected: str | None = None
    stop_when: Mapping[str, str | None] = field(default_factory=dict)
    """The ``stop_when`` signals, evaluated (and awaited) before the resolver runs."""
    tool_output: ToolOutput | None = None
    """A stop-at tool's successful result (``Agent.stop_at_tools``)."""
    ran: int = 0
    """Tool calls of this step that ran (recorded in the entry: the tool-call budget counts them from the log)."""
    refused: LimitHit | None = None
    """The tool-call budget's hit, when calls of this step were refused for it."""
    batch: tuple[list[CallPlan], LimitHit | None] | None = None
    """``plan_batch``'s answer for the calls this step runs, when it was asked before the write-ahead intent."""
    output_rejected: str | None = None
    """An output validator's feedback, when it rejected this step's output."""
    sub_usage: Usage = _NO_USAGE
    """Usage of the sub-agents this step's calls ran (recorded in the entry; budgets count it)."""
    settled: Mapping[str, Message] = field(default_factory=dict)
    """Rows of this step's calls committed before (see ``Settle.settled``): in ``rows``, not in the commit."""
    waiting: list[CallPlan] = field(default_factory=list)
    """Calls that still wait for approval after this step's other calls ran: the step suspends on them."""
    kept: Mapping[str, PendingApproval] = field(default_factory=dict)
    """The waiting calls as they were pending before this resume (see ``Settle.pending``)."""
    _row: Message | None = None
    """``row()``'s last answer, kept while ``reply`` stays the same object."""

    def row(self) -> Message:
        """The reply as its history row (the assistant's text and calls), built once per reply: the plan, the
        write-ahead intent and the commit share it."""
        row = self._row
        if row is None or row.content is not self.reply.text or row.tool_calls is not self.reply.tool_calls:
            row = self._row = Message(Role.ASSISTANT, self.reply.text, self.reply.tool_calls)
        return row


@dataclass(frozen=True, slots=True)
class _Decided:
    """A step with the resolver's decision, ready to commit."""

    step: _Step
    decision: StopDecision
    output: Any = None
    """The validated structured output, when the decision accepts one."""


_FORCE_OUTPUT = "Respond now with only a JSON object that matches the required output schema, and call no tools"
_WRAP_UP = (
    "You have reached the step limit. Tools are now off: give your final answer from what you have gathered "
    "so far, and say what is left undone."
)
_REJECTED = "The application rejected that answer; fix this and answer again: "
_FENCE = re.compile(r"^\s*```(?:json)?\s*(.*?)\s*```\s*$", re.DOTALL)


async def drive(leg: Leg) -> AsyncGenerator[Event, None]:
    """Run the leg until the resolver ends it; yields events, the last one ``RunFinished``."""
    try:
        async for event in _begin(leg):
            yield event
            if isinstance(event, RunFinished):
                return
        if leg.settle is not None:
            async for event in _settle_first(leg):
                yield event
                if isinstance(event, RunFinished):
                    return
        async for event in _step(leg, once=False):
            yield event
            if isinstance(event, RunFinished):
                return
    except (asyncio.CancelledError, GeneratorExit):
        # The caller cancelled the task or abandoned the stream: record it so retry() can continue. A resume that
        # had not settled its step yet leaves the run suspended, so the same decisions can be sent again.
        if leg.run.status is not RunStatus.RUNNING or (leg.settle is not None and not leg.settle.intent):
            raise
        # A leg whose lease another worker took over records nothing (``_end``): the run is that worker's now (or
        # gone, or never started: a first leg cancelled before its start commit).
        with contextlib.suppress(StepConflict):
            await asyncio.shield(_end(leg, StepSignals(cancelled=True)))
        raise


# --- begin ---------------------------------------------------------------------------------------------------


@dataclass(slots=True)
class _InputChecked:
    """The input guardrails' verdict on a leg's history: the events to yield, the history they let through (and
    the entry that records it), or ``finished`` when they ended the run (the last event is ``RunFinished``)."""

    events: list[Event]
    history: tuple[Message, ...]
    entry: LogEntry | None
    finished: bool = False


async def _begin(leg: Leg) -> AsyncGenerator[Event, None]:
    """Input guardrails (once per leg, on the restored history plus new input), then the leg's start commit. On a
    resume the input guardrails wait until the suspended step has settled (``_settle_first``)."""
    run = leg.run
    leg.started = leg.clock()
    history = (*leg.messages, *leg.new_input)
    entry: LogEntry | None = None
    if leg.new_input:
        entry = LogEntry(run.session_id, leg.next_seq, run.run_id, 0, EntryKind.INPUT, leg.new_input)
    if leg.settle is None:
        checked = await _check_input(leg, history, entry, started=not leg.write_start)
        for event in checked.events:
            yield event
        if checked.finished:
            return
        history, entry = checked.history, checked.entry
    if leg.log_goal and leg.goal is not None:
        # The goal is the run's, not the configuration's: it commits with the run's first entry, before any step.
        entry = _with_goal(run, leg.next_seq, entry, leg.goal)
        leg.log_goal = False
    if leg.write_start:
        fence = _fence(leg) if leg.continues else None
        await leg.store.start_run(replace(leg.run, **leg.progress()), entry, leg.state, leg.lease, fence)
    elif entry is not None:
        await leg.store.commit(entry, leg.state)
    if entry is not None:
        leg.next_seq += 1
    leg.messages = list(history)
    # Listed after the start commit, so a run whose tool server is down is on record and can be retried.
    failed = await list_sources(leg)
    if failed is not None:
        yield RunFinished(run.run_id, leg.steps, await _end(leg, StepSignals(caller_failed=failed)))


def _with_goal(run: RunRecord, seq: int, entry: LogEntry | None, goal: Goal) -> LogEntry:
    if entry is None:
        return LogEntry(run.session_id, seq, run.run_id, 0, EntryKind.NOTE, (), records=to_data([goal]))
    return replace(entry, records=(*entry.records, goal.to_data()))


async def _settle_first(leg: Leg) -> AsyncGenerator[Event, None]:
    """A resume: the approved calls run and their step settles, then the leg's input guardrails (seed 003). An
    input block on the resume can end the run, never strand an approved call without its result."""
    async for event in _step(leg):
        yield event
        if isinstance(event, RunFinished):
            return
    checked = await _check_input(leg, tuple(leg.messages), None, started=True)
    for event in checked.events:
        yield event
    if checked.finished:
        return
    if checked.entry is not None:
        await leg.store.commit(checked.entry, leg.state)
        leg.next_seq += 1
    leg.messages = list(checked.history)


async def _check_input(
    leg: Leg, history: tuple[Message, ...], entry: LogEntry | None, *, started: bool
) -> _InputChecked:
    """Run the input guardrails on ``history``; a block ends the run here (its note committed with the record),
    a rewrite replaces ``entry`` with one that records the rewritten history. ``started``: the leg's start is
    committed already (else a guardrail that raises ends a run whose start, session included, commits with its
    failed record)."""
    run = leg.run
    guardrails = leg.guardrails
    if guardrails is None or not guardrails.has(Hook.INPUT):
        return _InputChecked([], history, entry)
    try:
        # The chain's messages are copies (a rewrite's rows are logged as its own entry), so a guardrail that
        # changes a row in place changes nothing of the history the run goes on with.
        chain = await run_chain(
            guardrails,
            Hook.INPUT,
            HistoryView.of_log(CopiedRows(history, leg.row_copies)),
            lambda msgs: InputContext(
                msgs, None, run.session_id, run.run_id, leg.runtime_context, agent_path=leg.agent_path
            ),
            step=None,
        )
    except (GuardrailRaised, GuardrailError) as exc:
        signals = StepSignals(caller_failed=caller_failure(exc))
        ended = RunFinished(run.run_id, leg.steps, await _end(leg, signals, start=not started))
        return _InputChecked([ended], history, entry, finished=True)
    records = [*chain.records]
    events: list[Event] = [GuardrailEvent(run.run_id, 0, record) for record in chain.records]
    if chain.block is not None:
        leg.records.extend(records)
        text = chain.block.replacement or ""
        leg.text = text
        decision = resolve(StepSignals(input_blocked=chain.block.reason))
        leg.run = apply_decision(leg.run, decision, **leg.progress(), output=text)
        note = LogEntry(run.session_id, leg.next_seq, run.run_id, 0, EntryKind.NOTE, (), records=to_data(records))
        await leg.store.start_run(leg.run, note, leg.state, leg.lease, _fence(leg) if leg.continues else None)
        leg.next_seq += 1
        return _InputChecked([*events, RunFinished(run.run_id, leg.steps, _result(leg))], history, entry, True)
    if not chain.records:
        return _InputChecked(events, history, entry)
    rewritten = tuple(chain.value)
    kind = EntryKind.REWRITE
    entry = LogEntry(run.session_id, leg.next_seq, run.run_id, 0, kind, rewritten, records=to_data(records))
    # The rows after the run's start keep their count; what was prepended belongs to the history.
    leg.run_start = max(0, len(rewritten) - (len(history) - leg.run_start))
    leg.records.extend(records)
    return _InputChecked(events, rewritten, entry)


# --- one step ------------------------------------------------------------------------------------------------


async def _step(leg: Leg, *, once: bool = True) -> AsyncGenerator[Event, None]:
    """One step, phase by phase; ends with its commit (and ``RunFinished`` when the run ended or suspended). With
    ``once=False``, the steps that follow too, until the run ends: one generator for the leg, not one a step."""
    while True:
        run_id = leg.run.run_id
        settling = leg.settle
        if settling is None:
            number, phase = leg.steps + 1, leg.phase
            if leg.progress_events:
                yield StepStarted(run_id, number, phase is not Phase.NORMAL)
            try:
                prepared = plain_prepared(leg) or await prepare(leg, number, phase)
            except CallerCodeFailed as exc:
                yield RunFinished(run_id, number, await _end(leg, StepSignals(caller_failed=exc.detail)))
                return
            answer: Reply | ErrorDetail | LimitHit | None = None
            if leg.stream_text or leg.agent.limits is not None:
                async for item in _ask_model(leg, number, phase, prepared):
                    if isinstance(item, TextDelta):
                        yield item
                    else:
                        answer = item
            else:
                answer = await _ask_once(leg, number, phase, prepared)
            if isinstance(answer, LimitHit):
                yield RunFinished(run_id, number, await _end(leg, StepSignals(timed_out=answer)))
                return
            if not isinstance(answer, Reply):
                failed = answer if answer is not None else model_failure(TypeError("the model gave no reply"))
                yield RunFinished(run_id, number, await _end(leg, StepSignals(model_failed=failed)))
                return
            step = _Step(number, phase, answer, prepared=prepared)
            if prepared.record is not None:
                step.records.append(prepared.record)
            if prepared.history is not None:
                step.records.append(prepared.history)
            if leg.progress_events:
                # What the events carry are copies: an observer changing them changes nothing of the step.
                shown = own_calls(answer.tool_calls)
                yield ModelReplied(run_id, number, replace(answer, tool_calls=shown) if shown else answer)
                for call in shown:
                    yield ToolCalled(run_id, number, call)
        else:
            # ``leg.settle`` stays set until the settled step commits (see ``_advance``).
            kind = EntryKind.STEP if settling.intent else EntryKind.SETTLE
            step = _Step(
                settling.step, settling.phase, settling.reply, kind, plans=settling.plans, intent=settling.intent
            )
            for plan in step.plans:
                # The plans were read back from the log before the leg listed its tool sources.
                if plan.tool is None and plan.row is None:
                    plan.tool = leg.tools.get(plan.call.name)
                    if plan.tool is None:  # the agent no longer has it (its code changed since the step planned)
                        plan.row = _gone(leg, plan.call.id, plan.call.name)
            step.records.extend(settling.records)
            step.terminated, step.rejected = settling.terminated, settling.rejected
            step.settled, step.kept = settling.settled, settling.pending
        try:
            decided = await _decide_step(leg, step, settling)
        except CallerCodeFailed as exc:
            yield RunFinished(run_id, step.number, await _end(leg, StepSignals(caller_failed=exc.detail)))
            return
        if leg.progress_events and (settling is None or not settling.escalation):
            for plan, row in zip(step.plans, step.rows, strict=False):
                if plan.call.id not in step.settled:
                    yield ToolReturned(run_id, step.number, own_call(plan.call), own_row(row))
        events = await _finish_step(leg, decided)
        for event in events:
            yield event
        if once or isinstance(events[-1], RunFinished):
            return


async def _decide_step(leg: Leg, step: _Step, settling: Settle | None) -> _Decided:
    """Everything between the model's reply and the commit. Raises ``CallerCodeFailed`` when caller code fails."""
    if settling is not None and settling.escalation:
        return await _accept(leg, await _settle_review(leg, step, settling))
    if settling is None and step.reply.tool_calls:
        offered = step.prepared.offered if step.prepared is not None else None
        plans = plans_now(leg, step.reply, step.phase, offered=offered)  # nothing to await: no coroutine
        if plans is None:
            plans = await plan_calls(
                leg, step.number, step.reply, step.phase, step.records, offered=offered, row=step.row()
            )
            calls = tuple(p.call for p in plans)
            if any(a is not b for a, b in zip(calls, step.reply.tool_calls, strict=True)):
                # A redacting tool-call guardrail replaced arguments: the reply is logged (and sent back) redacted.
                step.reply = replace(step.reply, tool_calls=calls)
        step.plans = plans
        waits = runs = False
        for p in step.plans:  # one loop, not two any(): this runs every tool step
            if p.needs_approval:
                waits = True
            elif p.row is None:
                runs = True  # it runs in this step: no answer yet, and no reviewer to wait for
        if waits and not (leg.agent.run_unapproved_siblings and runs):
            return _Decided(step, resolve(_signals(leg, step, approvals_pending=True)))
        if runs:
            # Refuse first, on the calls ``_run_calls`` takes (all but those waiting for a reviewer): a reply that
            # took the run past a budget runs none of them and needs no intent (a re-run after a crash asks again
            # and is refused the same way); the intent holds the plans as asked, so a re-run that carries it out
            # refuses the same calls.
            unwaited = [p for p in step.plans if not (p.needs_approval and p.row is None)]
            step.batch = plan_batch(leg, unwaited, step.reply if step.kind is EntryKind.STEP else None)
            if any(p.row is None for p in step.batch[0]):
                await _write_intent(leg, step)
    if settling is not None and settling.ahead:
        await _write_decisions_ahead(leg, step, settling.ahead)
    failed = await _run_calls(leg, step)
    if failed is not None:
        # The tools ran: the step commits (their results withheld) as the run's ending, never vanishes.
        _answer_waiting(step, "Not run: the run ended before this call was decided")
        return _Decided(step, resolve(_signals(leg, step, caller_failed=failed)))
    if step.waiting:
        # Calls of the batch still wait for a reviewer: the step is judged once they are settled too.
        return _Decided(step, resolve(_signals(leg, step, approvals_pending=True)))
    if leg.agent.stop_at_tools is not None:
        step.tool_output = tool_output(leg, step.plans, step.rows)
    fresh = []
    settled = step.settled
    for p, r in zip(step.plans, step.rows, strict=True):  # a loop, not a comprehension: this runs every tool step
        if not settled or p.call.id not in settled:
            fresh.append((p.call.name, r))
    if fresh:
        step.streaks = streaks(fresh, leg.tool_streaks)
    # The two consultations are awaited only when the agent has them: no coroutine a step for nothing.
    if leg.agent.guardian is not None:
        await _consult_guardian(leg, step)
    if leg.agent.stop_condition is not None:
        step.stop_when = await _stop_when(leg, step, step.rows)
    outcome = step.turn.outcome if step.turn is not None else GuardianOutcome.CONTINUE
    if (
        leg.agent.stop_guard is not None
        and outcome not in (GuardianOutcome.ESCALATE, GuardianOutcome.STOP_FAILURE)
        and guard_applies(leg, step.reply, step.phase)
    ):
        step.guard = await consult_guard(leg, step.number, step.reply, step.phase)
    return await _accept(leg, _decide(leg, step))


async def _accept(leg: Leg, decided: _Decided) -> _Decided:
    """The application's code on what the decision accepts (the step cap's handler, the output validators, the
    output guardrails' last word), also when a review settles a step; and the output hook's redactions on an answer
    the run ends or suspends on without that last word."""
    step, decision = decided.step, decided.decision
    if decision.reason is CompletionReason.MAX_STEPS_HANDLED:
        return replace(decided, output=await run_max_steps_handler(leg, step.rows))
    proposed = step.reply.text
    if decision.action is Action.COMPLETE and (decided.output is not None or decision.reason in _TEXT_ENDINGS):
        decided = await _validate_output(leg, decided)
    decision = decided.decision
    if decision.action is Action.COMPLETE and decision.reason in _TEXT_ENDINGS:
        await _keep_redacted(leg, step, proposed, stored=False)
        return await _guard_output(leg, decided)
    if step.kind is EntryKind.STEP and not step.reply.tool_calls:
        await _keep_redacted(leg, step, proposed, stored=decision.ends_run or decision.action is Action.SUSPEND)
    return decided


async def _run_calls(leg: Leg, step: _Step) -> ErrorDetail | None:
    """Run the step's calls that can run now, then their tool-result guardrails; ``step.plans`` and ``step.rows``
    end up in call order with the rows committed before (``step.settled``), and the calls still waiting for a
    reviewer move to ``step.waiting``. Returns a tool-result guardrail's failure (the rows are then withheld)."""
    # Plain loops rather than comprehensions here: each comprehension is a call of its own, every tool step.
    step.waiting = []
    for p in step.plans:
        if p.needs_approval and p.row is None:
            step.waiting.append(p)
    # The common step: every call is this step's to run or answer (no reviewer, no earlier piece), in order.
    whole = not step.waiting and not step.settled
    if whole:
        fresh = step.plans
    else:
        waiting = {p.call.id for p in step.waiting}
        fresh = [p for p in step.plans if p.call.id not in waiting and p.call.id not in step.settled]
    # A resume (SETTLE) runs calls a reviewer approved: the budget their reply spent ends the run after them.
    if step.batch is not None:  # asked before the intent, on these same calls
        fresh, step.refused = step.batch
    else:
        fresh, step.refused = plan_batch(leg, fresh, step.reply if step.kind is EntryKind.STEP else None)
    step.ran = 0
    for p in fresh:
        if p.row is None:
            step.ran += 1
    rows, step.sub_usage = await execute_calls(leg, step.number, fresh, step.records) if fresh else ([], _NO_USAGE)
    rows, failed = await guard_results(leg, step.number, fresh, rows, step.records)
    if whole:
        step.plans, step.rows = fresh, rows
        return failed
    done = {p.call.id: (p, row) for p, row in zip(fresh, rows, strict=True)}
    plans, step.rows = [], []
    for plan in step.plans:
        if plan.call.id in waiting:
            continue
        plan, row = done.get(plan.call.id) or (plan, step.settled[plan.call.id])
        plans.append(plan)
        step.rows.append(row)
    step.plans = plans
    return failed


def _gone(leg: Leg, call_id: str, name: str) -> Message:
    """The answer of a recorded call whose tool the agent no longer has: the call cannot run as planned."""
    message = f"Tool '{name}' is no longer a tool of agent {leg.agent.name!r}: the call was not run"
    return error_tool_result(message, tool_call_id=call_id, origin="stopwise")


def _answer_waiting(step: _Step, why: str) -> None:
    """The run ends while calls still wait: each gets a denial row, so every call of the reply has its result."""
    for plan in step.waiting:
        row = error_tool_result(why, tool_call_id=plan.call.id, origin="stopwise", denied=True)
        step.plans.append(replace(plan, row=row, needs_approval=False))
        step.rows.append(row)
    step.waiting = []


async def _write_intent(leg: Leg, step: _Step) -> None:
    """Write-ahead: commit the reply and its planned calls before any of them runs. A re-run after a crash finds
    this intent without results and carries out the same plans, with the same call ids (``restore_leg``); the
    step's own commit then holds only its results. The leg moves on (steps, usage, history) only at that commit,
    as for any step: until then the intent is not a committed step."""
    run = leg.run
    intent = StepIntent(tuple(map(CallPlan.planned, step.plans)), step.phase)
    row = step.row()
    # The intent alone (the common case) needs no pass over the records for guardian configs.
    records = to_data([*step.records, intent], leg.guardian_configs) if step.records else (intent.to_data(),)
    usage = _reply_usage(step.reply)
    forced = step.phase is not Phase.NORMAL
    entry = LogEntry(
        run.session_id,
        leg.next_seq,
        run.run_id,
        step.number,
        EntryKind.INTENT,
        (row,),
        None,
        usage,
        forced,
        records,
    )
    await leg.store.commit(entry, leg.state)
    leg.next_seq += 1
    step.written, step.records, step.intent = step.records, [], True


async def _write_decisions_ahead(leg: Leg, step: _Step, decisions: Sequence[ApprovalRecord]) -> None:
    """Write-ahead for a resume: commit the reviewer's decisions of the calls about to run, in a ``note`` entry of
    the suspended step, before any of them runs. The run stays suspended; should the resume die before its settle
    commits, the next resume reads them back (``SuspendedStep.begun``) and refuses to decide those calls
    otherwise. The settle commits the decisions again, with the results: it is what makes them settled."""
    run = leg.run
    records = (ResumeIntent(tuple(decisions)).to_data(),)
    entry = LogEntry(run.session_id, leg.next_seq, run.run_id, step.number, EntryKind.NOTE, (), records=records)
    await leg.store.commit(entry, leg.state)
    leg.next_seq += 1


async def _ask_model(
    leg: Leg, number: int, phase: Phase, prepared: Prepared
) -> AsyncGenerator[TextDelta | Reply | ErrorDetail | LimitHit, None]:
    """The model's reply (after its text deltas, when the leg streams), or the error it ended with, or the time
    budget that cut it off (``Limits.step_seconds`` / ``run_seconds``: the call is cancelled)."""
    request = _request(leg, number, phase, prepared)
    limits = leg.agent.limits
    bound = None if limits is None else time_left(limits, leg.clock() - leg.started)
    if bound is None and not leg.stream_text:
        yield await _ask_once(leg, number, phase, prepared, request)
        return
    loop = asyncio.get_running_loop()
    began = loop.time()
    deadline = None if bound is None else began + bound[0]
    if bound is not None and bound[0] <= 0:
        yield _time_hit(leg, bound[1], 0.0)  # nothing left for a call: none is made
        return
    try:
        if not leg.stream_text:
            async with asyncio.timeout_at(deadline):
                reply = await prepared.caller.generate(request)
            yield _checked(leg, reply)
            return
        items = stream_reply(prepared.caller, request)
        try:
            while True:
                # The deadline covers the model's work, not the time the caller's stream consumer holds a delta.
                async with asyncio.timeout_at(deadline):
                    item = await anext(items, None)
                if item is None:
                    return
                yield TextDelta(leg.run.run_id, number, item) if isinstance(item, str) else _checked(leg, item)
        finally:
            close = getattr(items, "aclose", None)
            if close is not None:
                await close()
    except TimeoutError as exc:
        if bound is None or deadline is None or loop.time() < deadline:
            yield model_failure(exc)  # the model's own timeout, not ours
            return
        yield _time_hit(leg, bound[1], loop.time() - began)
    except Exception as exc:
        yield model_failure(exc)


async def _ask_once(
    leg: Leg, number: int, phase: Phase, prepared: Prepared, request: ModelRequest | None = None
) -> Reply | ErrorDetail:
    """``_ask_model`` with no time budget and no stream: one call, no timeout scope and no generator (the common
    case, once a step)."""
    try:
        return _checked(leg, await prepared.caller.generate(request or _request(leg, number, phase, prepared)))
    except Exception as exc:
        return model_failure(exc)


def _time_hit(leg: Leg, kind: LimitKind, waited: float) -> LimitHit:
    limits = leg.agent.limits
    assert limits is not None
    allowed = limits.step_seconds if kind is LimitKind.STEP_TIME else limits.run_seconds
    assert allowed is not None
    used = waited if kind is LimitKind.STEP_TIME else leg.clock() - leg.started
    return LimitHit(kind, allowed, round(used, 3))


def _request(leg: Leg, step: int, phase: Phase, prepared: Prepared) -> ModelRequest:
    normal = phase is Phase.NORMAL
    return ModelRequest(
        messages=prepared.system + prepared.messages,
        tools=prepared.tools if normal else (),
        step=step,
        output_schema=leg.agent.output_schema,
        forced_output=phase is Phase.FORCED_OUTPUT,
        tool_choice=prepared.tool_choice if normal else None,
        max_output_tokens=None if (cap := leg.output_cap()) is None else cap.tokens,
    )


def _checked(leg: Leg, reply: object) -> Reply | ErrorDetail:
    """The model boundary: a malformed reply becomes a ``model_error``; call ids are made unique in the session.
    The calls are taken as copies: a model that keeps the reply it returned and changes it later in place changes
    nothing that was logged."""
    valid = validate_reply(reply, leg.agent.reply_limits)
    if isinstance(valid, ErrorDetail) or not valid.tool_calls:
        return valid
    return leg.call_ids.unique(replace(valid, tool_calls=own_calls(valid.tool_calls)), leg.messages)


# --- the guardian --------------------------------------------------------------------------------------------


async def _consult_guardian(leg: Leg, step: _Step) -> None:
    """The guardian's turn check (normal steps only); an integrity escalation quarantines the step's outputs."""
    guardian = leg.agent.guardian
    if guardian is None or not guardian.turn_conditions or step.phase is not Phase.NORMAL:
        return
    budget = budget_used(leg.agent.limits, _spent(leg, step)) if leg.agent.limits is not None else None
    consultation = await consult_turn(leg, step.number, step.reply, step.rows, budget)
    step.turn = consultation.decision
    step.records.extend([step.turn, *consultation.labels])
    if step.turn.outcome is GuardianOutcome.ESCALATE and "integrity" in step.turn.escalated and step.plans:
        step.rows = quarantine(step.plans, step.rows, step.records)


async def _settle_review(leg: Leg, step: _Step, settling: Settle) -> _Decided:
    """Settle a step a guardian escalation suspended: the review's rows commit, and the run goes on from the
    step's own outcome (an approved final answer ends the run; a rejection re-anchors it)."""
    step.rows = list(settling.rows)
    if settling.terminated is None and settling.rejected is None and guard_applies(leg, step.reply, Phase.NORMAL):
        step.guard = await consult_guard(leg, step.number, step.reply, Phase.NORMAL)
    # The review's rows are not the tools' answers: the resolver judges the reply as it was.
    step.stop_when = await _stop_when(leg, step, [])
    return _decide(leg, step)


# --- deciding ------------------------------------------------------------------------------------------------


_TEXT_ENDINGS = frozenset(
    {
        CompletionReason.FINAL_ANSWER,
        CompletionReason.OUTPUT,
        CompletionReason.STOP_GUARD_EXHAUSTED,
        CompletionReason.STOP_GUARD_ERROR,
        CompletionReason.MAX_STEPS_WRAPPED_UP,
    }
)
"""Decisions that accept the reply's text as the run's answer: the output guardrails have the last word on them."""


def _check_output(leg: Leg, text: str) -> tuple[Any, str | None]:
    output_type = leg.agent.output_type
    assert output_type is not None
    match = _FENCE.match(text)
    try:
        return output_type.model_validate_json(match.group(1) if match else text), None
    except ValidationError as exc:
        return None, output_problems(exc)


def _signals(leg: Leg, step: _Step, **signals: Any) -> StepSignals:
    agent = leg.agent
    return StepSignals(
        stop_reason=step.reply.stop_reason,
        has_tool_calls=bool(step.reply.tool_calls),
        steps_used=_steps_used(leg, step),
        max_steps=agent.max_steps,
        wants_output=agent.output_type is not None,
        phase=step.phase,
        completion_attempts_left=_attempts_left(leg, step),
        carried_reason=leg.carried_reason,
        on_max_steps="handler" if callable(agent.on_max_steps) else agent.on_max_steps,
        **signals,
    )


def _steps_used(leg: Leg, step: _Step) -> int:
    """Steps counted against ``max_steps`` once this one commits. A settle step finishes the suspended step under
    its own number, so an approval costs no step of its own (seed 003)."""
    return step.number - leg.run.budget_base


def _attempts_left(leg: Leg, step: _Step) -> int:
    """Forced-output calls (and validator retries) still allowed after this step; past the cap, at most
    ``forced_calls_at_cap`` of them in all."""
    agent = leg.agent
    forced = step.phase is Phase.FORCED_OUTPUT
    left = agent.max_completion_retries - leg.forced_attempts - leg.output_retries - (1 if forced else 0)
    used = _steps_used(leg, step)
    if agent.max_steps is not None and used >= agent.max_steps:
        left = min(left, agent.forced_calls_at_cap - (used - agent.max_steps))
    return left


async def _stop_when(leg: Leg, step: _Step, rows: list[Message]) -> dict[str, str | None]:
    """The ``stop_when`` signals: caller predicates run (and async ones are awaited) here, never in the
    resolver."""
    condition = leg.agent.stop_condition
    if condition is None or not step.reply.tool_calls or step.phase is not Phase.NORMAL:
        return {}
    # A settled step's reply (and the rows of calls that ran before it suspended) are in the log already.
    view = StepView.detached(
        leg.steps_used + 1,
        step.reply,
        rows,
        leg.messages,
        leg.run_start,
        reply_logged=step.kind is EntryKind.SETTLE,
        logged=step.settled,
        copies=leg.row_copies,
    )
    left = run_time_left(leg.agent.limits, leg.clock() - leg.started)
    loop = asyncio.get_running_loop()
    deadline = None if left is None else loop.time() + left
    try:
        async with asyncio.timeout_at(deadline):
            return {"stop_when": await condition.evaluate(view)}
    except Exception as exc:
        if isinstance(exc, TimeoutError) and deadline is not None and loop.time() >= deadline:
            return {}  # the run's time ran out while it decided: the resolver ends the run time_limit
        return {"stop_when_error": f"stop_when {condition.label} raised {type(exc).__name__}: {exc}"}


def _runaway(leg: Leg, step: _Step) -> str | None:
    if not step.streaks:
        return None
    limit = leg.agent.max_tool_errors
    for name, count in step.streaks.items():
        if count >= limit:
            return f"Tool '{name}' failed {count} times in a row"
    return None


def _decide(leg: Leg, step: _Step, *, output_blocked: str | None = None) -> _Decided:
    """Gather this step's signals and ask the resolver."""
    agent = leg.agent
    reply = step.reply
    if (
        output_blocked is None
        and step.phase is Phase.NORMAL
        and reply.tool_calls
        and step.tool_output is None
        and step.refused is None
        and agent.limits is None
        and not step.stop_when
        and step.guard is None
        and (step.turn is None or step.turn.outcome is GuardianOutcome.CONTINUE)
        and step.terminated is None
        and step.rejected is None
        and step.output_rejected is None
        and _runaway(leg, step) is None
    ):
        # Every tool step that goes on comes here: no signal but the step count, so no StepSignals to build.
        quiet = quiet_tool_step(_steps_used(leg, step), agent.max_steps)
        if quiet is not None:
            return _Decided(step, quiet)
    output, output_error = None, None
    if step.tool_output is not None:
        output, output_error = step.tool_output.value, step.tool_output.error
    elif agent.output_type is not None and (step.phase is Phase.FORCED_OUTPUT or not reply.tool_calls):
        if reply.tool_calls:
            output_error = "the reply called tools instead of giving the structured output"
        else:
            output, output_error = _check_output(leg, reply.text)
    guard_signal = None
    if step.guard is not None:
        outcome, budget_left = step.guard
        on_error = agent.stop_guard.on_error if agent.stop_guard is not None else "stop"
        guard_signal = GuardSignal(outcome.kind, outcome.message, budget_left, on_error)
    turn = step.turn
    guardian = None if turn is None or turn.outcome is GuardianOutcome.CONTINUE else turn.outcome.value
    signals = _signals(
        leg,
        step,
        **step.stop_when,
        tool_output=step.tool_output.tool if step.tool_output is not None else None,
        output_error=output_error,
        guard=guard_signal,
        tool_error_streak=None if output_blocked is not None else _runaway(leg, step),
        output_blocked=output_blocked,
        terminated=step.terminated,
        guardian=guardian,
        guardian_reason=turn.reason if turn is not None and guardian is not None else "",
        review_rejected=step.rejected,
        limit_hit=_limit_hit(leg, step),
        output_rejected=step.output_rejected,
    )
    return _Decided(step, resolve(signals), output)


def _limit_hit(leg: Leg, step: _Step) -> LimitHit | None:
    """The budget this step ran out, counting its own usage: refused tool calls first, then tokens, cost, time."""
    if step.refused is not None:
        return step.refused
    limits = leg.agent.limits
    if limits is None:
        return None
    spent = _spent(leg, step)
    hit = exceeded(limits, spent)
    if hit is None and step.kind is EntryKind.STEP:
        # A reply cut at its budget's cap used that budget up, even when it left it exactly reached.
        hit = cut_at_cap(limits, leg.output_cap(), step.reply, spent)
    return hit


def _spent(leg: Leg, step: _Step) -> Spent:
    """What the leg has used against its budgets with this step's own usage, sub-agents, judges and tool calls."""
    own = step.reply.usage if step.kind is EntryKind.STEP else None
    # The stop guard's record is written when the step commits, after this: its usage is read off its outcome.
    judged = judge_usage((*step.written, *step.records)) + (step.guard[0].usage if step.guard else Usage())
    spent = leg.spent(own, step.sub_usage, judged)
    return replace(spent, tool_calls=spent.tool_calls + step.ran)


async def _validate_output(leg: Leg, decided: _Decided) -> _Decided:
    """The application's output validators on an accepted output: a rejection is a signal the resolver decides
    again with; a replacement becomes the output (or the final text)."""
    if not leg.agent.output_validators:
        return decided
    step = decided.step
    text = leg.agent.output_type is None and decided.decision.reason is not CompletionReason.TOOL_OUTPUT
    value, rejected = await run_validators(leg, step.reply.text if text else decided.output, text=text)
    if rejected is not None:
        step.output_rejected = rejected
        return _decide(leg, step)
    if text:
        step.reply = replace(step.reply, text=value)
        return decided
    return replace(decided, output=value)


async def _output_chain(leg: Leg, step: _Step, text: str, *, only_redactions: bool = False) -> ChainResult[str]:
    """The output hook's chain on ``text`` (the agent has output guardrails). Raises ``CallerCodeFailed`` when a
    guardrail raises, times out or gives a wrong verdict."""
    guardrails, run = leg.guardrails, leg.run
    assert guardrails is not None
    history = leg.hook_history()
    try:
        return await run_chain(
            guardrails,
            Hook.OUTPUT,
            text,
            lambda t: OutputContext(
                history, step.number, run.session_id, run.run_id, leg.runtime_context, t, agent_path=leg.agent_path
            ),
            step=step.number,
            only_redactions=only_redactions,
        )
    except (GuardrailRaised, GuardrailError) as exc:
        raise CallerCodeFailed(caller_failure(exc)) from exc


async def _keep_redacted(leg: Leg, step: _Step, proposed: str, *, stored: bool) -> None:
    """What the log keeps of an answer the output hook has not had its last word on: with ``stored`` (the run ends
    or suspends on it without that word: the guardian escalated it to a reviewer or failed it, a budget ran out),
    the answer itself; and the guardian's records of the turn, which keep its projection (an escalation's state,
    a judge's labels). Both as the hook's redactions leave ``proposed`` (the reply as the guardian judged it); its
    other verdicts decide when the hook runs (after a review), or never. A redacting block leaves its replacement
    (or nothing), and its record decides once a review lets the answer through (``_guard_output``)."""
    guardrails = leg.guardrails
    if guardrails is None or not guardrails.has(Hook.OUTPUT):
        return
    keeps_text = step.turn is not None and (
        step.turn.state is not None or any(isinstance(r, GuardianLabel) for r in step.records)
    )
    if not (stored or keeps_text):
        return  # the common final answer: the output hook runs once, after this
    chain = await _output_chain(leg, step, proposed, only_redactions=True)
    if not chain.redacted:
        return
    answer = (chain.block.replacement or "") if chain.block is not None else chain.value
    if step.turn is not None:
        restate(leg, step.reply, step.rows, step.records, answer)
    if stored:
        step.records.extend(chain.records)
        step.reply = replace(step.reply, text=answer)


def _held_block(leg: Leg, step: int) -> GuardrailRecord | None:
    """The redacting output block a step was suspended with (its answer is stored as the block left it)."""
    for r in leg.records:
        if (
            isinstance(r, GuardrailRecord)
            and r.hook is Hook.OUTPUT
            and r.action == "block"
            and r.redacted
            and r.step == step
        ):
            return r
    return None


async def _guard_output(leg: Leg, decided: _Decided) -> _Decided:
    """Output guardrails on an accepted final answer: the last word. A rewrite is authoritative (the log and
    the run record carry it); a block replaces the text and the resolver records ``guardrail_output``. After a
    review, the answer is the copy the review was shown (``_keep_redacted``): a redacting block recorded on it
    decides without the hook running again."""
    step = decided.step
    held = _held_block(leg, step.number) if step.kind is EntryKind.SETTLE else None
    if held is not None:
        return replace(_decide(leg, step, output_blocked=held.reason or ""), output=None)
    guardrails = leg.guardrails
    if guardrails is None or not guardrails.has(Hook.OUTPUT):
        return decided
    chain = await _output_chain(leg, step, step.reply.text)
    step.records.extend(chain.records)
    if chain.block is not None:
        blocked = _decide(leg, step, output_blocked=chain.block.reason)
        step.reply = replace(step.reply, text=chain.block.replacement or "")
        return replace(blocked, output=None)
    if chain.value == step.reply.text:
        return decided
    step.reply = replace(step.reply, text=chain.value)
    if leg.agent.output_type is None:
        return decided
    output, problem = _check_output(leg, step.reply.text)
    if problem is not None:
        name = chain.records[-1].name if chain.records else "output"
        error = GuardrailError(name, Hook.OUTPUT, f"the rewritten text is not valid output: {problem}")
        raise CallerCodeFailed(caller_failure(error))
    return replace(decided, output=output)


# --- committing ----------------------------------------------------------------------------------------------


async def _finish_step(leg: Leg, decided: _Decided) -> list[Event]:
    """Commit the step and return the events that report it (the last is ``RunFinished`` if it ended)."""
    step, decision = decided.step, decided.decision
    if step.guard is not None:
        step.records.append(guard_record(leg, step.number, step.guard, decision))
        if guard_rows_kept(step.guard, decision):
            step.records.extend(guard_switches(step.number, step.guard))
    action = decision.action
    pending: list[PendingApproval] = []
    if action is Action.SUSPEND:
        pending, request = _suspension(leg, step)
        if request is not None:
            step.records.append(request)
    rows = _new_rows(leg, step, decision)
    entry, usage = _entry(leg, step, decision, rows)
    # A step of a running run leaves its run record as it is: no call to say so (the common step).
    settles = step.kind is EntryKind.SETTLE
    run = _run_record(leg, decided, usage, pending) if settles or action is not Action.CONTINUE else None
    state = _state_after(leg, step)
    try:
        await leg.store.commit(entry, state, run)
    except StateNotSerializable as exc:
        # Nothing of the step was written; the run ends with the committed steps intact.
        error = ErrorDetail(ErrorCode.STATE_INVALID, str(exc), ErrorCategory.CALLER, retryable=False)
        return [RunFinished(leg.run.run_id, step.number, await _end(leg, StepSignals(caller_failed=error)))]
    _advance(leg, step, decision, usage, rows, run, state)
    events = _events_for(leg, step) if step.written or step.records else []
    events.append(StepCommitted(leg.run.run_id, step.number, entry.seq, decision))
    if action is Action.SUSPEND or decision.ends_run:
        events.append(RunFinished(leg.run.run_id, step.number, _result(leg)))
    return events


def _suspension(leg: Leg, step: _Step) -> tuple[list[PendingApproval], ApprovalRequest | None]:
    """On a suspension: what waits for a reviewer, and the suspension's log record."""
    turn = step.turn
    if turn is not None and turn.outcome is GuardianOutcome.ESCALATE:
        # A guardian escalation: nothing is pending but the review itself.
        review = {"conditions": list(turn.escalated), "reason": turn.reason}
        quarantined = tuple(r.tool_call_id for r in step.records if isinstance(r, ToolReceipt) and r.quarantined)
        item = PendingApproval(f"guardian:{step.number}", "guardian", review, args_hash(review), None, **_why(turn))
        return [item], ApprovalRequest((), Escalation(turn.escalated, turn.reason, quarantined))
    now = leg.clock()
    waiting = step.waiting or [p for p in step.plans if p.needs_approval]
    pending = []
    for p in waiting:
        kept = step.kept.get(p.call.id)
        if kept is not None:  # still pending after a resume that decided other calls: its expiry stands
            pending.append(kept)
        elif step.kind is EntryKind.STEP and p.needs_approval and p.tool is not None and p.args is not None:
            ttl = p.tool.approval_ttl
            expires = None if ttl is None else now + ttl
            why = _why(p.gate) if p.gate is not None else {"source": "client"} if p.tool.client else {}
            pending.append(PendingApproval(p.call.id, p.call.name, dict(p.args), args_hash(p.args), expires, **why))
    if step.kind is EntryKind.SETTLE and step.waiting:
        return pending, None  # a piece of a resume: the suspension's own request still describes the batch
    order = {c.id: i for i, c in enumerate(step.reply.tool_calls)}
    batch = sorted([*step.plans, *step.waiting], key=lambda p: order[p.call.id])
    return pending, ApprovalRequest(tuple(p.planned() for p in batch))


def _why(decision: GuardianDecision) -> dict[str, Any]:
    """Why the guardian sent this to a reviewer: its first escalated condition, with probability and threshold."""
    name = decision.escalated[0] if decision.escalated else None
    spec = next((c for c in decision.conditions if c.name == name), None)
    return {
        "source": "guardian",
        "condition": name,
        "probability": decision.probabilities.get(name) if name is not None else None,
        "threshold": spec.threshold if spec is not None else None,
        "reason": decision.reason,
    }


def _new_rows(leg: Leg, step: _Step, decision: StopDecision) -> list[Message]:
    """The rows this step adds to the history: the reply, its tools' answers, and any feedback for the model."""
    rows = [] if step.kind is EntryKind.SETTLE else [step.row()]
    rows.extend([r for r in step.rows if r.tool_call_id not in step.settled] if step.settled else step.rows)
    if step.output_rejected is not None and decision.action in (Action.RETRY_OUTPUT, Action.FORCE_OUTPUT):
        rows.append(automated_feedback(f"{_REJECTED}{step.output_rejected}", source="output_validator"))
    if step.guard is not None and guard_rows_kept(step.guard, decision):
        rows.extend(step.guard[0].rows)
    if decision.action is Action.FORCE_OUTPUT:
        why = f" ({decision.detail})" if decision.detail else ""
        rows.append(automated_feedback(f"{_FORCE_OUTPUT}{why}.", source="forced_completion"))
    elif decision.action is Action.WRAP_UP:
        rows.append(automated_feedback(_WRAP_UP, source="wrap_up"))
    elif decision.action is Action.REPLAN:
        rows.append(automated_feedback(reanchor(leg, decision.detail), source="guardian_replan"))
    return rows


def _entry(leg: Leg, step: _Step, decision: StopDecision, rows: list[Message]) -> tuple[LogEntry, Usage]:
    """The entry the step's commit writes, and the usage the step adds to the run (its reply's, for a new step).
    After a write-ahead intent the entry holds only the results: the reply and its usage are in the intent."""
    usage = _reply_usage(step.reply) if step.kind is EntryKind.STEP else _NO_USAGE
    recorded = decision.log_data(step.phase, step.ran)
    if _used(step.sub_usage):
        recorded["sub_usage"] = usage_data(step.sub_usage)
    run = leg.run
    forced = step.phase is not Phase.NORMAL
    kind, written, logged = (
        (EntryKind.SETTLE, tuple(rows[1:]), _NO_USAGE) if step.intent else (step.kind, tuple(rows), usage)
    )
    records = to_data(step.records, leg.guardian_configs) if step.records else ()
    entry = LogEntry(
        run.session_id, leg.next_seq, run.run_id, step.number, kind, written, recorded, logged, forced, records
    )
    return entry, usage


def _used(usage: Usage) -> bool:
    """Whether ``usage`` counts anything (``!= Usage()`` without building one: this runs every step)."""
    return bool(usage.input_tokens or usage.output_tokens or usage.requests)


def _reply_usage(reply: Reply) -> Usage:
    usage = reply.usage
    if usage is None:
        return _ONE_REQUEST
    if type(usage) is Usage and usage.requests:
        return usage  # already what it would be rebuilt as (a frozen value: shared, not copied)
    return Usage(usage.input_tokens, usage.output_tokens, usage.requests or 1)


def _state_after(leg: Leg, step: _Step) -> dict[str, Any]:
    # The guard's writes ride this step's commit, even when its continue was refused for budget.
    if step.guard is not None and step.guard[0].state is not None:
        return step.guard[0].state
    return leg.state


def _run_record(leg: Leg, decided: _Decided, usage: Usage, pending: list[PendingApproval]) -> RunRecord | None:
    """The run record this step's transaction writes: when the run ends, suspends, or a settled step lets a
    resumed run go on; None when the record stays as it is (a step of a running run)."""
    step, decision = decided.step, decided.decision
    settles = step.kind is EntryKind.SETTLE
    if not (decision.ends_run or decision.action is Action.SUSPEND or settles):
        return None
    records = [*leg.records, *(r for r in (*step.written, *step.records) if isinstance(r, KEPT))]
    report = leg.report(records, leg.sub_usage + step.sub_usage)
    progress: dict[str, Any] = {"steps": step.number, "usage": leg.usage + usage, "report": report}
    if not settles or decision.ends_run or decision.action is Action.SUSPEND:
        progress["text"] = step.reply.text
    if decision.action is Action.SUSPEND:
        progress["report"] = {**progress["report"], "pending": [p.to_data() for p in pending]}
    elif decision.ends_run:
        progress["output"] = _final_output(leg, decided)
    return apply_decision(leg.run, decision, **progress)


def _final_output(leg: Leg, decided: _Decided) -> Any:
    """The run's output as JSON data: the structured output, or a stop-at tool's result, else the final text; none
    for a failure or a ``stop_when`` stop (the run stopped on a tool call, not on an answer)."""
    decision = decided.decision
    if decision.action is not Action.COMPLETE or decision.reason is CompletionReason.STOP_WHEN:
        return None
    handled = decision.reason in (CompletionReason.TOOL_OUTPUT, CompletionReason.MAX_STEPS_HANDLED)
    if leg.agent.output_type is None and not handled:
        return decided.step.reply.text
    dump = getattr(decided.output, "model_dump", None)
    return dump(mode="json") if dump is not None else decided.output


def _advance(
    leg: Leg,
    step: _Step,
    decision: StopDecision,
    usage: Usage,
    rows: list[Message],
    run: RunRecord | None,
    state: dict[str, Any],
) -> None:
    """With the step durable, and only then, the leg moves on (``state``: the state the step committed)."""
    leg.settle = None
    if step.kind is not EntryKind.SETTLE:
        leg.text = step.reply.text
    if step.streaks is not None:
        leg.tool_streaks = step.streaks
    leg.steps, leg.state = step.number, state
    if _used(usage):
        leg.usage = leg.usage + usage
        leg.budget_usage = leg.budget_usage + usage
    if _used(step.sub_usage):
        leg.budget_sub_usage = leg.budget_sub_usage + step.sub_usage
        leg.sub_usage = leg.sub_usage + step.sub_usage
    if step.written or step.records:
        written = (*step.written, *step.records)
        leg.budget_judge_usage = leg.budget_judge_usage + judge_usage(written)
        leg.records.extend(r for r in written if isinstance(r, KEPT))
    leg.budget_tool_calls += step.ran
    leg.messages.extend(rows)
    leg.next_seq += 1
    if step.phase is Phase.FORCED_OUTPUT:
        leg.forced_attempts += 1
    leg.phase = NEXT_PHASE.get(decision.action, Phase.NORMAL)
    if decision.action is Action.FORCE_OUTPUT:
        leg.carried_reason = decision.carry
    if decision.action is Action.REPLAN:
        leg.replans += 1
    if decision.action is Action.RETRY_OUTPUT:
        leg.output_retries += 1
    if run is not None:
        leg.run = run


def _events_for(leg: Leg, step: _Step) -> list[Event]:
    """The events the step's records report (guardrail verdicts, the stop guard's moves)."""
    events: list[Event] = []
    guard = leg.agent.stop_guard
    run_id = leg.run.run_id
    for r in (*step.written, *step.records):
        if isinstance(r, GuardrailRecord):
            events.append(GuardrailEvent(run_id, step.number, r))
        elif isinstance(r, StopGuardRecord):
            note = guard.progress_note if guard is not None and r.event == "continued" else None
            events.append(StopGuardEvent(run_id, step.number, f"stop_guard.{r.event}", r.guard, r.message, note))
    return events


# --- ending without a step -----------------------------------------------------------------------------------


async def _end(leg: Leg, signals: StepSignals, *, start: bool = False) -> RunResult:
    """End the leg when no step can be committed (the model failed, caller code failed, a cancellation): the
    resolver decides the ending like any other, and the run record is written on its own, fenced by the leg's lease
    and its last commit: ``StepConflict`` (nothing written) when another worker took the run over after the lease
    lapsed or committed a step since, so a leg that lost its run never writes over what the other worker wrote.
    ``start``: the leg's start was not committed; the record commits as a start (the session with it, no input)."""
    leg.run = apply_decision(leg.run, resolve(signals), **leg.progress())
    if start:
        await leg.store.start_run(leg.run, None, leg.state, leg.lease, _fence(leg) if leg.continues else None)
    else:
        await leg.store.update_run(leg.run, _fence(leg))
    return _result(leg)


def _fence(leg: Leg) -> Fence | None:
    """What the leg's writes of its run record without a step require: its lease, and the log ending at the leg's
    last commit (or where it was read, before the leg's first). None for a leg without a lease."""
    return None if leg.lease is None else Fence(leg.lease, leg.next_seq - 1)


def _result(leg: Leg) -> RunResult:
    return result_of(leg.agent, leg.run, leg.records, leg.messages, leg.state)
