"""A suspended run's step as its log has it (the reply, the suspension's request, what was settled since), and
its expiry.

``Runner.resume`` (all pending calls at once, or some at a time) and ``Runner.expire`` read it; both then commit
a ``settle`` entry for that step. A step is settled in pieces when calls of its batch ran before the rest were
decided: the calls that needed no approval (``Agent(run_unapproved_siblings=True)``), and the calls of an earlier
``resume`` that decided only some of them. Their tool rows are in the log already, so the next piece must not run
or repeat them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from stopwise.approvals import ApprovalRecord, ApprovalRequest, PendingApproval, expired
from stopwise.errors import UnreadableSuspension
from stopwise.messages import Message, Reply, Role, error_tool_result
from stopwise.records import LogRecord, ResumeIntent, RunLog, to_data
from stopwise.stop.decision import Phase, StepSignals, apply_decision, resolve
from stopwise.store.base import EntryKind, LogEntry, RunRecord, SessionSnapshot

__all__ = ["SuspendedStep", "expiry", "read_suspended"]


@dataclass(frozen=True, slots=True)
class SuspendedStep:
    """The step a suspended run waits on."""

    step: int
    reply: Reply
    """The model's reply whose calls wait (from the step's entry, or its write-ahead intent)."""
    request: ApprovalRequest
    """The suspension's record: the batch's planned calls, or a guardian escalation."""
    records: tuple[LogRecord, ...]
    """The records of the entry that suspended the run (the request among them)."""
    settled: Mapping[str, Message]
    """Tool rows of this step already committed since it suspended, by call id: the calls that needed no approval
    and the calls an earlier ``resume`` decided. They never run again."""
    decided: Mapping[str, ApprovalRecord]
    """The decisions committed by earlier pieces, by call id."""
    begun: Mapping[str, ApprovalRecord] = field(default_factory=dict)
    """Decisions a resume wrote ahead of running their calls (a ``note`` entry of the step) whose results never
    committed: that resume stopped (its process died) while the calls ran, so they may have had their effect. By
    call id; only calls still without a row. A later resume may only carry them out with the same decision."""


def read_suspended(snapshot: SessionSnapshot, run: RunRecord, run_log: RunLog | None = None) -> SuspendedStep:
    """The step ``run`` (suspended) waits on, read from ``snapshot``'s log (``run_log``: its entries of ``run``,
    read already). ``UnreadableSuspension`` (naming the session, the run and what is missing) when the log no
    longer holds the suspension's request, the reply whose calls it holds, or a plan for each of the reply's calls:
    a damaged or hand-edited log, nothing to settle from. A record the log holds that cannot be read at all is the
    ``UnreadableEntry`` naming its entry."""
    if run_log is None:
        run_log = RunLog.of(e for e in snapshot.entries if e.run_id == run.run_id)
    entries = run_log.entries
    at, request = 0, None
    records: tuple[LogRecord, ...] = ()
    for i in range(len(entries) - 1, -1, -1):
        e = entries[i]
        # Only the entries that may hold the request are typed: the step it waits on is the last one with one.
        if e.kind in (EntryKind.STEP, EntryKind.SETTLE) and run_log.holds(i, ApprovalRequest.TYPE):
            parsed = run_log.records(i)
            request = next((r for r in parsed if isinstance(r, ApprovalRequest)), None)
            if request is not None:
                at, records = i, parsed
                break
    if request is None:
        raise UnreadableSuspension(run.session_id, run.run_id, "its log holds no approval request")
    step = entries[at].step
    # The reply is in the step's own entry, or in its write-ahead intent when calls ran before it suspended.
    assistant = next((e for e in reversed(entries[: at + 1]) if e.kind in (EntryKind.STEP, EntryKind.INTENT)), None)
    first = assistant.messages[0] if assistant is not None and assistant.messages else None
    if first is None:
        raise UnreadableSuspension(
            run.session_id, run.run_id, f"its log holds no model reply for step {step}, whose calls wait on approval"
        )
    reply = Reply(first.content, first.tool_calls)
    if request.escalation is None:
        # A batch's request plans every call of the reply; one it lost (a damaged log) cannot be settled.
        planned = {c.call_id for c in request.calls}
        lost = [c.id for c in reply.tool_calls if c.id not in planned]
        if lost:
            raise UnreadableSuspension(
                run.session_id, run.run_id, f"its approval request for step {step} holds no plan for calls {lost}"
            )
    later = range(at, len(entries))
    since = [i for i in later if entries[i].step == step and entries[i].kind in (EntryKind.STEP, EntryKind.SETTLE)]
    settled = {m.tool_call_id: m for i in since for m in entries[i].messages if m.role is Role.TOOL and m.tool_call_id}
    decided = {r.call_id: r for i in since[1:] for r in run_log.records(i) if isinstance(r, ApprovalRecord)}
    ahead = [i for i in later[1:] if entries[i].step == step and entries[i].kind is EntryKind.NOTE]
    begun = {
        d.call_id: d
        for i in ahead
        for r in run_log.records(i)
        if isinstance(r, ResumeIntent)
        for d in r.decisions
        if d.call_id not in settled
    }
    return SuspendedStep(step, reply, request, records, settled, decided, begun)


_DONE = {"approve": "approved", "modify": "approved with modified arguments"}


def expiry(
    suspended: SuspendedStep,
    run: RunRecord,
    pending: Sequence[PendingApproval],
    now: float,
    seq: int,
) -> tuple[LogEntry, RunRecord]:
    """The settle entry and the run record that end ``run`` because approvals of its ``pending`` calls expired at
    ``now`` (``Runner.expire``): every call of the step still without a result gets one the model can read (the
    expired ones, and the others of the batch, which cannot run without them), each pending call an ``expired``
    decision record, and the run the resolver's ``approval_expired`` ending. Pure: the caller claims and commits."""
    gone = {p.call_id: p for p in expired(pending, now)}
    planned = {c.call_id: c for c in suspended.request.calls}
    rows: list[Message] = []
    for call in suspended.reply.tool_calls:
        if call.id in suspended.settled:
            continue
        answer = planned[call.id].answer if call.id in planned else None
        begun = suspended.begun.get(call.id)
        if answer is None and begun is not None:
            # Approved by a resume that died before its results committed: it may have run. Never "not run".
            why = (
                f"Outcome unknown: this call was {_DONE[begun.decision]} and started by a resume that stopped before "
                "its result was recorded; it may have run"
            )
            answer = error_tool_result(why, tool_call_id=call.id, origin="stopwise", denied=True)
        if answer is None:
            p = gone.get(call.id)
            why = (
                f"Not run: its approval expired at {p.expires_at:.0f} unanswered"
                if p is not None and p.expires_at is not None
                else "Not run: other calls of this batch waited for approvals that expired unanswered"
            )
            answer = error_tool_result(why, tool_call_id=call.id, origin="stopwise", denied=True)
        rows.append(answer)
    detail = "; ".join(
        f"the approval of call {p.call_id} ({p.tool}) expired at {p.expires_at:.0f}"
        for p in gone.values()
        if p.expires_at is not None
    )
    decision = resolve(StepSignals(has_tool_calls=True, approval_expired=detail))
    maybe = "; it may have run: a resume that approved it stopped before its result was recorded"
    records = [
        ApprovalRecord(
            p.call_id,
            p.tool,
            "expired",
            reason=detail + (maybe if p.call_id in suspended.begun else ""),
            decided_at=now,
        )
        for p in pending
    ]
    recorded = decision.log_data(Phase.NORMAL, 0)
    kind, step = EntryKind.SETTLE, suspended.step
    entry = LogEntry(run.session_id, seq, run.run_id, step, kind, tuple(rows), recorded, records=to_data(records))
    report = {k: v for k, v in run.report.items() if k != "pending"}
    return entry, apply_decision(run, decision, report=report)
