"""A suspended run's step as its log has it: the reply, the suspension's request, and what was settled since.

``Runner.resume`` (all pending calls at once, or some at a time) and ``Runner.expire`` read it; both then commit
a ``settle`` entry for that step. A step is settled in pieces when calls of its batch ran before the rest were
decided: the calls that needed no approval (``Agent(run_unapproved_siblings=True)``), and the calls of an earlier
``resume`` that decided only some of them. Their tool rows are in the log already, so the next piece must not run
or repeat them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from stopwise.approvals import ApprovalRecord, ApprovalRequest
from stopwise.messages import Message, Reply, Role
from stopwise.records import LogRecord, parse_records
from stopwise.store.base import EntryKind, RunRecord, SessionSnapshot

__all__ = ["SuspendedStep", "read_suspended"]


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


def read_suspended(snapshot: SessionSnapshot, run: RunRecord) -> SuspendedStep:
    """The step ``run`` (suspended) waits on, read from ``snapshot``'s log."""
    entries = [e for e in snapshot.entries if e.run_id == run.run_id]
    at, request = 0, None
    records: tuple[LogRecord, ...] = ()
    for i in range(len(entries) - 1, -1, -1):
        e = entries[i]
        if e.kind in (EntryKind.STEP, EntryKind.SETTLE):
            parsed = tuple(parse_records(e.records))
            request = next((r for r in parsed if isinstance(r, ApprovalRequest)), None)
            if request is not None:
                at, records = i, parsed
                break
    if request is None:
        raise LookupError(f"run {run.run_id} is suspended but its log holds no approval request")
    step = entries[at].step
    # The reply is in the step's own entry, or in its write-ahead intent when calls ran before it suspended.
    assistant = next(e for e in reversed(entries[: at + 1]) if e.kind in (EntryKind.STEP, EntryKind.INTENT))
    reply = Reply(assistant.messages[0].content, assistant.messages[0].tool_calls)
    since = [e for e in entries[at:] if e.step == step and e.kind in (EntryKind.STEP, EntryKind.SETTLE)]
    settled = {m.tool_call_id: m for e in since for m in e.messages if m.role is Role.TOOL and m.tool_call_id}
    decided = {
        r.call_id: r for e in since[1:] for r in parse_records(e.records) if isinstance(r, ApprovalRecord)
    }
    return SuspendedStep(step, reply, request, records, settled, decided)
