"""The state of one run leg (a run, a retry or a resume of it), and how a leg is rebuilt from the log.

A leg's counters move on only after each step's commit; everything a budget or a report counts is rebuilt from
the log's entries and records, never from memory alone, so a crash or a retry keeps it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Generic, TypeVar

from stopwise._step.row_positions import RowPositions
from stopwise.agent import Agent
from stopwise.approvals import ApprovalRecord, PendingApproval, PlannedCall
from stopwise.call_ids import SessionCallIds
from stopwise.errors import RetryNotAllowed
from stopwise.goal import Goal
from stopwise.guardian.projection import Projection
from stopwise.guardian.records import GuardianDecision, judge_usage
from stopwise.guardrails.hooks import Guardrails
from stopwise.guardrails.verdicts import GuardrailRecord
from stopwise.history_view import HistoryView
from stopwise.messages import DENIED, TOOL_ERROR, Message, Reply, Role, ToolCall, Usage
from stopwise.models.base import ToolSpec
from stopwise.records import LogRecord, RunLog, StepIntent
from stopwise.result import CompletionReason
from stopwise.row_copies import CopiedRows, RowCopies, own_row
from stopwise.stop.decision import Action, Phase, StopDecision, apply_decision
from stopwise.stop.guard import StopGuardRecord, guard_report, report_dict
from stopwise.stop.limits import OutputCap, Spent, output_cap
from stopwise.stop.repeats import Repeats
from stopwise.store.base import EntryKind, Lease, LogEntry, RunRecord, SessionSnapshot, Store
from stopwise.tool_switches import ToolSwitchRecord, switched_off
from stopwise.tools import Tool

__all__ = ["KEPT", "NEXT_PHASE", "CallPlan", "Leg", "Settle", "restore_leg", "streaks", "usage_data"]


NEXT_PHASE = {Action.FORCE_OUTPUT: Phase.FORCED_OUTPUT, Action.WRAP_UP: Phase.WRAP_UP}


KEPT = (StopGuardRecord, GuardrailRecord, GuardianDecision, ToolSwitchRecord)
"""Record types a leg keeps in memory: budgets, hysteresis and reports are counted from them."""


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
    gate: GuardianDecision | None = None
    """The guardian's risk gate decision when it escalated this call: why the approval is needed."""

    def planned(self) -> PlannedCall:
        """The plan as the suspension's log record keeps it."""
        return PlannedCall(self.call.id, self.call.name, self.args, self.row, self.needs_approval)


@dataclass(slots=True)
class Settle:
    """A step whose reply is in the log but whose results are not: a suspended step to finish when the run
    resumes (its calls with the reviewer's decisions applied), or a write-ahead intent to carry out."""

    step: int
    reply: Reply
    plans: list[CallPlan]
    records: list[LogRecord]
    """The reviewer's decisions (and, for an escalation, its labels), committed with the settled step."""
    terminated: str | None = None
    """A reviewer's ``Terminate`` reason: the step settles with every call denied and the run ends."""
    escalation: bool = False
    """The step was suspended by a guardian escalation (not a tool approval): nothing runs when it settles."""
    rows: tuple[Message, ...] = ()
    """For an escalation: rows the review adds (released quarantined outputs)."""
    rejected: str | None = None
    """For an escalation: the reviewer's rejection message."""
    phase: Phase = Phase.NORMAL
    intent: bool = False
    """The step is a write-ahead intent with no results: its recorded plans run with the same call ids, and the
    step commits as the uninterrupted one would have (its reply joins the history then); no reviewer is involved
    and the run is not suspended (unless calls of it wait for approval: ``Agent.run_unapproved_siblings``)."""
    settled: Mapping[str, Message] = field(default_factory=dict)
    """Tool rows of this step committed before (calls that needed no approval, an earlier piece of decisions), by
    call id: those calls do not run again, the deciders see their rows, the commit does not repeat them."""
    pending: Mapping[str, PendingApproval] = field(default_factory=dict)
    """The calls left undecided by this resume, as they were pending (their expiry kept): the step suspends
    again on them once the decided calls ran."""
    ahead: tuple[ApprovalRecord, ...] = ()
    """The decisions of the calls this resume runs that are not on record yet: committed in a ``note`` entry of
    the step before any of them runs (``stopwise._suspended.SuspendedStep.begun``)."""


_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class Folded(Generic[_T]):
    """A value folded over a leg's committed rows ``messages[run_start:end]``, kept on the leg so that the next fold
    reads only the rows committed since. ``rows`` is the list it read: a leg whose list was replaced (or cut below
    ``end``) folds again from the run's start."""

    rows: list[Message] | None
    end: int
    value: _T

    def since(self, leg: Leg, empty: _T) -> tuple[int, _T]:
        """Where folding ``leg.messages`` goes on from, and the value so far (``empty`` at the run's start when this
        fold no longer matches the leg's rows)."""
        kept = self.kept(leg)
        return kept if kept is not None else (leg.run_start, empty)

    def kept(self, leg: Leg) -> tuple[int, _T] | None:
        """Where folding ``leg.messages`` goes on from, and the value so far; None when this fold no longer matches
        the leg's rows (a caller that can compute the value another way than from the run's start)."""
        if self.rows is leg.messages and leg.run_start <= self.end <= len(leg.messages):
            return self.end, self.value
        return None


@dataclass(frozen=True, slots=True)
class ReplyProjection:
    """The guardian's projection of a run before one reply's calls execute, with what it was built from."""

    messages: list[Message]
    committed: int
    """How many rows ``messages`` held (the committed run)."""
    risks: Mapping[str, str]
    rows: tuple[Message, ...]
    """The step's rows, not committed yet."""
    projection: Projection

    def fits(self, messages: list[Message], risks: Mapping[str, str], rows: list[Message]) -> bool:
        """Whether it was built from these same rows (compared by identity: a row replaced at the same length is a
        new row) and risks."""
        return (
            self.messages is messages
            and self.committed == len(messages)
            and self.risks == risks
            and len(self.rows) == len(rows)
            and all(a is b for a, b in zip(self.rows, rows, strict=True))
        )


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
    """The reason a forced phase reports if it succeeds (see ``StopDecision.carry``)."""
    records: list[LogRecord] = field(default_factory=list)
    """This run's decision records from the log (``KEPT`` types): budgets, hysteresis and reports count them."""
    run_start: int = 0
    """Index in ``messages`` of this run's first row."""
    new_input: tuple[Message, ...] = ()
    """Rows the caller adds at this leg's start; committed (after the input guardrails) when the leg begins."""
    write_start: bool = True
    """Whether beginning the leg writes the run record (a resume leaves it suspended until its step settles)."""
    settle: Settle | None = None
    lease: Lease | None = None
    """The lease the runner holds on the run while it drives this leg; the run's start writes it with the record."""
    continues: bool = False
    """The leg continues a run on record (``restore_leg``): its start's write is fenced by its lease and the log's
    end as the leg read it (``store.base.Fence``), as its ending is."""
    goal: Goal | None = None
    """The run's goal as its log has it (None: a log from before goals were logged, or none stated)."""
    _switches: tuple[int, frozenset[str]] = (0, frozenset())
    """How many of ``records`` ``tools_off`` has folded, and the switched-off set they give."""
    log_goal: bool = False
    """Whether the leg's start commits ``goal`` (a new run's first leg): later legs read it from the log."""
    replans: int = 0
    """Replans made in this run (from the log's recorded decisions)."""
    guardian_configs: set[str] = field(default_factory=set)
    """The keys of the ``GuardianConfig`` records this run's log holds: a decision's config is written once."""
    tool_streaks: Mapping[str, int] = field(default_factory=dict)
    """Consecutive failed results per tool, for the runaway-error guard."""
    step_rows: Folded[int] = field(default_factory=lambda: Folded(None, 0, 0))
    """The assistant rows of this run counted so far, so the guardian numbers its projection's steps without
    walking the run every step."""
    call_projection: ReplyProjection | None = None
    """The guardian's projection for the pre-execution questions of one reply's calls (see
    ``stopwise._step.guardian.projection_for_call``): the calls of a reply share it, so a reply of 3,000 calls
    projects the run once, not once per call."""
    repeat_rows: Folded[Repeats] = field(default_factory=lambda: Folded(None, 0, Repeats()))
    """The run's latest streak of one repeated call and its cycles of calls so far, so the guardian counts repeats
    without walking back the whole spin every step (a run repeating one call 2,000 times)."""
    row_copies: RowCopies = field(default_factory=RowCopies)
    """The copies of the logged rows the hooks that only read the history (``stop_when`` predicates,
    ``prepare_step``, the guardrails, the stop guard, the step cap's handler) have read in this leg
    (``stopwise.row_copies``): a hook reading the whole log every step copies each row once, not once per
    step."""
    processor_copies: RowCopies = field(default_factory=RowCopies)
    """The copies of the logged rows the history processors have read in this leg: their own, since what they
    return is sent to the model (a row they return as handed is sent as logged: ``RowCopies.original``)."""
    row_positions: RowPositions = field(default_factory=RowPositions)
    """Where each row of ``messages`` is, for the history processors' record (``stopwise._step.row_positions``)."""
    _model_log: list[Message] = field(default_factory=list, init=False)
    """The ``messages`` list ``_model_rows`` copies (see ``model_history``)."""
    _model_rows: list[Message] = field(default_factory=list, init=False)
    """The copies of ``_model_log``'s rows the model (and its middleware) is sent, in order: its own, so that what
    it changes of a row in place reaches neither the log nor a hook's copies."""
    call_keys: dict[str, str] | None = None
    """The repeat keys of the calls whose logged arguments a redacting tool-call guardrail replaced (see
    ``stopwise._step.guardian.call_keys``); None until the guardian first counts repeats."""
    runtime_context: Any = None
    agent_path: tuple[str, ...] = ()
    """The sub-agent path of this loop (``GuardrailContext.agent_path``); empty for a root run."""
    clock: Callable[[], float] = time.time
    stream_text: bool = False
    """Ask the model for text deltas (``runner.stream``); a plain ``run`` takes the reply in one piece."""
    progress_events: bool = True
    """Yield the events that only report a step's progress (``StepStarted``, ``ModelReplied``, ``ToolCalled``,
    ``ToolReturned``). A plain ``run`` with no ``on_event`` observer turns them off: nothing would read them."""
    call_ids: SessionCallIds = field(default_factory=SessionCallIds)
    """The call ids the session has used: each reply's ids are made unique against them (``stopwise.call_ids``)."""
    budget_usage: Usage = field(default_factory=Usage)
    """The run's own model usage since its budget began (its start, or the retry that gave it a fresh one)."""
    budget_sub_usage: Usage = field(default_factory=Usage)
    """Its sub-agents' usage since the budget began: the token budgets count it, the cost budget does not (a
    sub-agent may run another model; give it ``Limits(cost=)`` of its own)."""
    sub_usage: Usage = field(default_factory=Usage)
    """Its sub-agents' usage over the whole run, all legs (``RunResult.sub_usage``)."""
    budget_judge_usage: Usage = field(default_factory=Usage)
    """The judges' model usage since the budget began (the guardian's and the stop guard's, from their records):
    the token budgets count it (unless ``Limits.count_judges`` is off), the cost budget does not (a judge may run
    another model)."""
    budget_tool_calls: int = 0
    """Tool calls that ran since this run's budget began, from the log."""
    output_retries: int = 0
    """Retries an output validator asked for since this run's budget began (``Action.RETRY_OUTPUT``), from the log."""
    system: tuple[Message, ...] = field(init=False)
    guardrails: Guardrails | None = field(init=False)
    """The guardrails this loop runs: the agent's own, or for a sub-agent its own under its parent's
    (``guardrails.hooks.for_sub_agent``; the runner sets them)."""
    tools: dict[str, Tool] = field(init=False)
    """The tools of this leg: the agent's own, then those its sources listed when the leg began."""
    tool_specs: tuple[ToolSpec, ...] = field(init=False)
    started: float = field(init=False, default=0.0)
    """The clock when the leg began (set by ``_loop``): its wall-time budget counts from here."""
    steps: int = field(init=False)
    usage: Usage = field(init=False)
    text: str = field(init=False)

    def __post_init__(self) -> None:
        self.system = (Message(Role.SYSTEM, self.agent.instructions),) if self.agent.instructions else ()
        self.guardrails = self.agent.guardrails
        self.tools = dict(self.agent.tool_map)
        self.tool_specs = self.agent.tool_specs
        self.steps = self.run.steps
        self.usage = self.run.usage
        self.text = self.run.text

    def tools_off(self) -> frozenset[str]:
        """The tools switched off in this run (``stopwise.tool_switches``), from its records. ``records`` is only
        appended to, so the fold goes on from the records read last time: a step's cost does not grow with the run."""
        seen, off = self._switches
        if seen > len(self.records):  # not appended to: fold the whole list again
            seen, off = 0, frozenset()
        if seen < len(self.records):
            off = switched_off(self.records[seen:], off)
            self._switches = (len(self.records), off)
        return off

    def history(self) -> HistoryView:
        """``messages`` as committed so far, a view that shares its rows (``stopwise.history_view``): everything a
        step hands the history to (the model request, the guardrail contexts, the step plan) gets it in constant
        time, however long the run. ``messages`` is only appended to, never changed in place, so a view stays
        what it was when it was taken."""
        return HistoryView.of_log(self.messages)

    def history_with(self, rows: Iterable[Message]) -> HistoryView:
        """``history()`` followed by ``rows`` (a step's rows not committed yet)."""
        return HistoryView.of_log(self.messages, tail=rows)

    def hook_history(self, rows: Iterable[Message] = ()) -> HistoryView:
        """``history_with(rows)`` as a user hook is handed it: each row it reads is a copy (``row_copies`` for
        the logged rows, a fresh one of each of ``rows``), so a hook that changes a row in place changes neither
        the log nor what the model is sent. Constant time, like ``history()``: rows are copied when read."""
        return HistoryView.of_log(CopiedRows(self.messages, self.row_copies), tail=map(own_row, rows))

    def model_history(self) -> HistoryView:
        """``history()`` as the model is sent it: copies of the logged rows, so that a model or a middleware that
        changes a row in place changes neither the log nor what the hooks read. Each logged row is copied once in
        the leg, when the first request after it was committed is built, and the copies are kept in a plain list:
        a model that reads the whole history on every call (every provider adapter does) reads it at a list's
        speed, and a step costs the copies of its own rows, not a walk of the run. What the model changes of its
        copies may still be in what it is sent later in this leg, never anywhere else."""
        log, rows = self.messages, self._model_rows
        if log is not self._model_log:
            # The leg's start sets ``messages`` to a new list (its input guardrails may have rewritten rows), before
            # any model call: copied whole once.
            rows = list(map(own_row, log))
            self._model_log, self._model_rows = log, rows
        elif len(rows) < len(log):
            rows.extend(map(own_row, log[len(rows) :]))
        return HistoryView.of_log(rows, len(log))

    @property
    def steps_used(self) -> int:
        return self.steps - self.run.budget_base

    def spent(
        self,
        step_usage: Usage | None = None,
        step_sub_usage: Usage | None = None,
        step_judge_usage: Usage | None = None,
    ) -> Spent:
        """What this leg has used against ``Agent.limits`` so far, plus a step not yet committed (its own usage, its
        sub-agents' and the guardian's, the last two as ``Limits.count_sub_agents`` / ``count_judges`` say)."""
        own = self.budget_usage + (step_usage or Usage())
        pricer = self.agent.pricer
        cost = pricer.price(own) if pricer is not None else None
        usage = own
        limits = self.agent.limits
        if limits is None or limits.count_sub_agents:
            usage = usage + self.budget_sub_usage + (step_sub_usage or Usage())
        if limits is None or limits.count_judges:
            usage = usage + self.budget_judge_usage + (step_judge_usage or Usage())
        return Spent(self.budget_tool_calls, usage, cost, self.clock() - self.started)

    def output_cap(self) -> OutputCap | None:
        """The next model call's output cap (``ModelRequest.max_output_tokens``) from what is left of the token
        budgets; None without an output or total token budget. Until a step commits it stays the same, so the
        cap a reply was asked with is read again when the reply is judged (after a crash too)."""
        limits = self.agent.limits
        # ``output_cap`` says None too; asked first here, a leg without those budgets builds no ``Spent`` (the usage
        # priced, the clock read) for each model call it makes.
        if limits is None or (limits.output_tokens is None and limits.total_tokens is None):
            return None
        return output_cap(limits, self.spent())

    def progress(self) -> dict[str, Any]:
        """The run record's fields that this leg moved on (for ``apply_decision``)."""
        return {"steps": self.steps, "usage": self.usage, "text": self.text, "report": self.report()}

    def report(self, records: Iterable[LogRecord] | None = None, sub_usage: Usage | None = None) -> dict[str, Any]:
        """The run record's report: the stop guard's, and the sub-agents' usage when there was any."""
        report: dict[str, Any] = {}
        if self.agent.stop_guard is not None:
            report["stop_guard"] = report_dict(guard_report(self.records if records is None else records))
        sub = self.sub_usage if sub_usage is None else sub_usage
        if sub != Usage():
            report["sub_usage"] = usage_data(sub)
        return report


def usage_data(usage: Usage) -> dict[str, int]:
    """``usage`` as JSON data (a log entry's ``sub_usage``, a run record's report)."""
    return usage.to_data()


def _sub_usage(entries: Iterable[LogEntry]) -> Usage:
    """The sub-agents' usage the entries' decisions record."""
    return _total(Usage(**sub) for e in entries if e.decision and (sub := e.decision.get("sub_usage")))


def _total(usages: Iterable[Usage | None]) -> Usage:
    """The sum of ``usages`` (None counts nothing): one ``Usage`` built, not one per term as ``+`` would (a resume
    adds up every entry of the run)."""
    inputs = outputs = requests = 0
    for u in usages:
        if u is not None:
            inputs += u.input_tokens
            outputs += u.output_tokens
            requests += u.requests
    return Usage(inputs, outputs, requests)


def streaks(rows: Iterable[tuple[str, Message]], start: Mapping[str, int]) -> Mapping[str, int]:
    """Consecutive failed results per tool: a denial is not a failure, one clean result resets the count.
    ``start`` itself when no count changes (the common step: a tool that worked and worked before); never
    changed in place."""
    changed: dict[str, int] | None = None
    for name, row in rows:
        metadata = row.metadata
        if metadata.get(DENIED):
            continue
        current = start if changed is None else changed
        count = current.get(name, 0) + 1 if metadata.get(TOOL_ERROR) else 0
        if current.get(name) != count:
            if changed is None:
                changed = dict(start)  # copied on the first change only
            changed[name] = count
    return start if changed is None else changed


def restore_leg(
    agent: Agent,
    store: Store,
    runner: Any,
    snapshot: SessionSnapshot,
    run: RunRecord,
    *,
    fresh_budget: bool,
    new_input: tuple[Message, ...] = (),
    run_log: RunLog | None = None,
) -> Leg:
    """A leg that continues ``run`` from the log (``run_log``: its entries of ``run``, read already).

    The run record may be as old as its leg's start (a crash), so progress (steps, usage, last text), the
    phase (forced completion, wrap-up) and the tool-error streaks come from the log entries. ``fresh_budget``
    (a retry after a failure or cancellation) counts ``max_steps`` from the committed steps. Decision records
    are kept either way: a retry keeps the stop guard's count.
    """
    if run_log is None:
        run_log = RunLog.of(e for e in snapshot.entries if e.run_id == run.run_id)
    entries = list(run_log.entries)
    configs = dict(run_log.configs)
    # Only the records the leg keeps (and the goal) are typed: the rest of a long run's log is not read again.
    records: list[LogRecord] = run_log.typed(*KEPT)
    goals = run_log.typed(Goal)
    open_intent = _open_intent(entries, run, new_input)
    # An intent without results counts for nothing yet: its step runs again from its recorded plans.
    counted = [e for e in entries if e.kind is not EntryKind.INPUT and e is not open_intent]
    steps = [e for e in counted if e.kind in (EntryKind.STEP, EntryKind.SETTLE)]
    replies = [e for e in counted if e.kind in (EntryKind.STEP, EntryKind.INTENT)]
    run, phase, attempts, carried = _progress(run, counted, steps, replies, fresh_budget)
    budgeted = [e for e in steps if e.step > run.budget_base]
    base = run.budget_base
    budget_usage = _total(e.usage for e in counted if e.step > base)
    run = apply_decision(run, StopDecision(Action.CONTINUE))
    names = {c.id: c.name for e in replies for m in e.messages for c in m.tool_calls}
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
        # A config from before decisions left the run's id out is written again (with it) before the next one.
        guardian_configs={k for k, c in configs.items() if c.run_id is not None},
        tool_streaks=streaks(tool_rows, {}),
        budget_usage=budget_usage,
        budget_tool_calls=sum((e.decision or {}).get("tool_calls", 0) for e in budgeted),
        output_retries=sum(1 for e in budgeted if (e.decision or {}).get("action") == Action.RETRY_OUTPUT),
        budget_sub_usage=_sub_usage(budgeted),
        sub_usage=_sub_usage(steps),
        budget_judge_usage=judge_usage(
            r for r in records if isinstance(r, GuardianDecision | StopGuardRecord) and r.step > run.budget_base
        ),
        settle=None if open_intent is None else _carry_out(agent, open_intent, _records_of(run_log, open_intent)),
        goal=goals[0] if goals else None,
        continues=True,
    )


def _progress(
    run: RunRecord, counted: list[LogEntry], steps: list[LogEntry], replies: list[LogEntry], fresh_budget: bool
) -> tuple[RunRecord, Phase, int, CompletionReason | None]:
    """The run's progress as its log has it (steps, usage, last text), and the phase it is in: forced completion
    or wrap-up, with the forced calls made and the reason carried; a fresh budget starts over in the normal phase."""
    phase, attempts, carried = Phase.NORMAL, 0, None
    if counted:
        run = replace(
            run, usage=_total(e.usage for e in counted), text=replies[-1].messages[0].content if replies else ""
        )
    if steps:
        last = steps[-1]
        run = replace(run, steps=last.step)
        decision = last.decision or {}
        phase = NEXT_PHASE.get(Action(decision.get("action", Action.CONTINUE)), Phase.NORMAL)
        carried = CompletionReason(decision["carry"]) if decision.get("carry") else None
        attempts = sum(
            1 for e in steps if e.step > run.budget_base and (e.decision or {}).get("phase") == Phase.FORCED_OUTPUT
        )
    if fresh_budget:
        run = replace(run, budget_base=run.steps)
        phase, attempts, carried = Phase.NORMAL, 0, None
    return run, phase, attempts, carried


def _open_intent(entries: list[LogEntry], run: RunRecord, new_input: tuple[Message, ...]) -> LogEntry | None:
    """The run's last entry when it is a write-ahead intent without results (a crash, or a leg that ended
    mid-step): the next step carries it out."""
    last = next((e for e in reversed(entries) if e.kind is not EntryKind.NOTE), None)
    if last is None or last.kind is not EntryKind.INTENT:
        return None
    if new_input:
        # The step's results must follow its reply in the history, before anything the caller adds.
        raise RetryNotAllowed(
            f"session {run.session_id!r}: run {run.run_id} stopped between step {last.step}'s planned tool calls "
            "and their results; call retry() without a message first to carry them out"
        )
    return last


def _records_of(run_log: RunLog, entry: LogEntry) -> tuple[LogRecord, ...]:
    """The typed records of ``entry``, one of the last of ``run_log``'s entries (searched from the end)."""
    entries = run_log.entries
    return run_log.records(next(i for i in range(len(entries) - 1, -1, -1) if entries[i] is entry))


def _carry_out(agent: Agent, entry: LogEntry, parsed: tuple[LogRecord, ...]) -> Settle:
    """A write-ahead intent (``entry``, its records ``parsed``) as the step to settle: its recorded plans, run again
    with their call ids."""
    intent = next(r for r in parsed if isinstance(r, StepIntent))
    assistant = entry.messages[0]
    # The reply's usage was logged with the intent and is counted when its step commits (budgets too).
    reply = Reply(assistant.content, assistant.tool_calls, usage=entry.usage)
    by_id = {c.call_id: c for c in intent.calls}
    plans = []
    for call in reply.tool_calls:
        planned = by_id[call.id]
        tool = agent.tool_map.get(call.name)
        plans.append(CallPlan(call, tool, planned.args, planned.answer, needs_approval=planned.needs_approval))
    return Settle(entry.step, reply, plans, [], phase=intent.phase, intent=True)
