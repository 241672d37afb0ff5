"""The typed records a step commits with its rows: one tagged union, and its one decoder.

Each decider owns the typed form of its records (``GuardrailRecord``, ``ToolReceipt``, ``StopGuardRecord``,
``GuardianDecision``, ``GuardianLabel``, ``ApprovalRequest``, ``ApprovalRecord``); the loop's own records, the
write-ahead ``StepIntent`` and a forked session's ``ForkRecord``, live here; a run's ``Goal`` (``run_goal``)
commits with the run's first entry. This module names the union and converts at the store's boundary: the store
keeps records as JSON data with a ``"type"`` tag (``LogEntry.records``), and everything above it reads them
through ``parse_records``. A record of a type this version does not know (a newer writer) is kept as
``UnknownRecord`` and written back unchanged.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from stopwise.approvals import ApprovalRecord, ApprovalRequest, PlannedCall
from stopwise.goal import Goal
from stopwise.guardian.records import GuardianDecision, GuardianLabel
from stopwise.guardrails.receipts import ToolReceipt
from stopwise.guardrails.verdicts import GuardrailRecord
from stopwise.history import HistoryRecord
from stopwise.step_plan import StepPlanRecord
from stopwise.stop.decision import Phase
from stopwise.stop.guard import StopGuardRecord
from stopwise.tool_switches import ToolSwitchRecord

__all__ = [
    "ForkRecord",
    "LogRecord",
    "StepIntent",
    "ToolReceipt",
    "UnknownRecord",
    "parse_record",
    "parse_records",
    "to_data",
]


@dataclass(frozen=True, slots=True)
class UnknownRecord:
    """A record whose type this version does not know: kept as it was written."""

    data: Mapping[str, Any]

    @property
    def type(self) -> str:
        return str(self.data.get("type", ""))

    def to_data(self) -> dict[str, Any]:
        return dict(self.data)


@dataclass(frozen=True, slots=True)
class StepIntent:
    """The loop's write-ahead record: a step's planned tool calls, committed with its reply before any runs.

    A re-run after a crash executes these plans (same call ids, same arguments, so the same
    ``RunContext.idempotency_key``) instead of asking the model again."""

    TYPE: ClassVar[str] = "step_intent"
    calls: tuple[PlannedCall, ...]
    phase: Phase = Phase.NORMAL

    def to_data(self) -> dict[str, Any]:
        return {"type": self.TYPE, "calls": [c.to_data() for c in self.calls], "phase": self.phase.value}

    @classmethod
    def from_data(cls, d: Mapping[str, Any]) -> StepIntent:
        return cls(tuple(PlannedCall.from_data(c) for c in d.get("calls", ())), Phase(d.get("phase", "normal")))


@dataclass(frozen=True, slots=True)
class ForkRecord:
    """Where a forked session came from (``Runner.fork``): its log up to ``source_seq`` is a copy of the source
    session's, which ends with the commit of ``at_step`` of the source run. The last entry of a fork's copy
    (a ``note``) carries it; a forked session without it was not completely written."""

    TYPE: ClassVar[str] = "fork"
    source_session_id: str
    source_run_id: str
    at_step: int
    source_seq: int

    def to_data(self) -> dict[str, Any]:
        return {
            "type": self.TYPE,
            "source_session_id": self.source_session_id,
            "source_run_id": self.source_run_id,
            "at_step": self.at_step,
            "source_seq": self.source_seq,
        }

    @classmethod
    def from_data(cls, d: Mapping[str, Any]) -> ForkRecord:
        return cls(str(d["source_session_id"]), str(d["source_run_id"]), int(d["at_step"]), int(d["source_seq"]))


LogRecord = (
    GuardrailRecord
    | StopGuardRecord
    | GuardianDecision
    | GuardianLabel
    | ApprovalRequest
    | ApprovalRecord
    | ToolReceipt
    | StepPlanRecord
    | HistoryRecord
    | StepIntent
    | ForkRecord
    | ToolSwitchRecord
    | Goal
    | UnknownRecord
)
"""Every record a step can commit."""

_TYPES: dict[str, Any] = {
    cls.TYPE: cls
    for cls in (
        GuardrailRecord,
        ToolReceipt,
        StopGuardRecord,
        GuardianDecision,
        GuardianLabel,
        ApprovalRequest,
        ApprovalRecord,
    )
}
_TYPES[StepPlanRecord.TYPE] = StepPlanRecord
_TYPES[HistoryRecord.TYPE] = HistoryRecord
_TYPES[StepIntent.TYPE] = StepIntent
_TYPES[ForkRecord.TYPE] = ForkRecord
_TYPES[ToolSwitchRecord.TYPE] = ToolSwitchRecord
_TYPES[Goal.TYPE] = Goal


def parse_record(data: Mapping[str, Any]) -> LogRecord:
    """The typed record for one record's JSON data (``UnknownRecord`` for a type this version does not know)."""
    cls = _TYPES.get(data.get("type", ""))
    if cls is None:
        return UnknownRecord(data)
    record: LogRecord = cls.from_data(data)
    return record


def parse_records(data: Iterable[Mapping[str, Any]]) -> tuple[LogRecord, ...]:
    return tuple(parse_record(d) for d in data)


def to_data(records: Iterable[LogRecord]) -> tuple[dict[str, Any], ...]:
    """The records as the store keeps them: JSON data tagged with ``"type"``."""
    return tuple(r.to_data() for r in records)
