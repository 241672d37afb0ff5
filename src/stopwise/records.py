"""The typed records a step commits with its rows: one tagged union, and its one decoder.

Each decider owns the typed form of its records (``GuardrailRecord``, ``StopGuardRecord``, ``GuardianDecision``,
``GuardianLabel``, ``ApprovalRequest``, ``ApprovalRecord``); this module names the union, adds the loop's own
``ToolReceipt``, and converts at the store's boundary: the store keeps records as JSON data with a ``"type"`` tag
(``LogEntry.records``), and everything above it reads them through ``parse_records``. A record of a type this
version does not know (a newer writer) is kept as ``UnknownRecord`` and written back unchanged.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from stopwise.approvals import ApprovalRecord, ApprovalRequest
from stopwise.guardian.records import GuardianDecision, GuardianLabel
from stopwise.guardrails.verdicts import GuardrailRecord
from stopwise.stop.guard import StopGuardRecord

__all__ = [
    "LogRecord",
    "ToolReceipt",
    "UnknownRecord",
    "parse_record",
    "parse_records",
    "to_data",
]


@dataclass(frozen=True, slots=True)
class ToolReceipt:
    """A tool's result as it came back, kept for audit when the model was shown something else (a guardrail
    rewrote or blocked it, or the guardian quarantined it)."""

    TYPE: ClassVar[str] = "tool_receipt"
    tool_call_id: str
    raw: str
    """The result's stored content, as the tool returned it."""
    metadata: Mapping[str, Any] = field(default_factory=dict)
    quarantined: bool = False
    """Withheld by the guardian until a reviewer releases it."""

    def to_data(self) -> dict[str, Any]:
        data: dict[str, Any] = {"type": self.TYPE, "tool_call_id": self.tool_call_id, "raw": self.raw}
        data["metadata"] = dict(self.metadata)
        if self.quarantined:
            data["quarantined"] = True
        return data

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> ToolReceipt:
        return cls(data["tool_call_id"], data["raw"], data.get("metadata") or {}, bool(data.get("quarantined")))


@dataclass(frozen=True, slots=True)
class UnknownRecord:
    """A record whose type this version does not know: kept as it was written."""

    data: Mapping[str, Any]

    @property
    def type(self) -> str:
        return str(self.data.get("type", ""))

    def to_data(self) -> dict[str, Any]:
        return dict(self.data)


LogRecord = (
    GuardrailRecord
    | StopGuardRecord
    | GuardianDecision
    | GuardianLabel
    | ApprovalRequest
    | ApprovalRecord
    | ToolReceipt
    | UnknownRecord
)
"""Every record a step can commit."""

_TYPES: dict[str, Any] = {
    cls.TYPE: cls
    for cls in (GuardrailRecord, StopGuardRecord, GuardianDecision, GuardianLabel, ApprovalRequest, ApprovalRecord)
}
_TYPES[ToolReceipt.TYPE] = ToolReceipt


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
