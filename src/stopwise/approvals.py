"""Human approval of tool calls: what a pending call looks like, and the decisions that settle it.

A call to a tool declared ``needs_approval`` (or whose predicate says so for these arguments) suspends the
run durably before anything in the batch executes (or, with ``Agent(run_unapproved_siblings=True)``, before the
calls that wait for approval execute). ``Runner.resume`` settles pending calls, all at once or some at a time,
with one of ``Approve()``, ``Reject(message)``, ``Modify(args)`` or ``Terminate(reason)``; ``Runner.expire``
ends a run whose approvals expired unanswered.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from stopwise._deprecated import aliases
from stopwise.errors import StopwiseError
from stopwise.messages import Message, Role

__all__ = [
    "Approve",
    "ApprovalError",
    "ApprovalRecord",
    "ApprovalRequest",
    "Escalation",
    "PlannedCall",
    "ApprovalDecision",
    "Modify",
    "PendingApproval",
    "Reject",
    "Terminate",
    "args_hash",
    "expired",
]


def args_hash(args: Mapping[str, Any]) -> str:
    """A stable hash of a call's arguments: what a reviewer approved is what runs."""
    canonical = json.dumps(args, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:32]


@dataclass(frozen=True, slots=True)
class PendingApproval:
    """A tool call (or a guardian escalation) waiting for a human, as ``RunResult.pending`` lists it, with why."""

    call_id: str
    tool: str
    args: Mapping[str, Any]
    """The arguments that will run if approved (after any tool-call guardrail rewrite)."""
    args_hash: str
    expires_at: float | None
    """Unix time after which the approval is refused; None never expires."""
    source: Literal["needs_approval", "guardian", "client"] = "needs_approval"
    """``needs_approval``: the tool's declaration asked for a review; ``guardian``: the guardian escalated (its
    risk gate on this call, or its turn check: then ``call_id`` is ``guardian:<step>``); ``client``: a client-side
    tool (``@tool(client=True)``) the caller runs, then passes its result to ``resume(..., results=...)``."""
    condition: str | None = None
    """For a guardian escalation: the condition that escalated (the first, when several did)."""
    probability: float | None = None
    """That condition's probability (None when the evaluator could not answer)."""
    threshold: float | None = None
    """That condition's threshold t*."""
    reason: str = ""
    """The guardian decision's reason, in words."""

    def to_data(self) -> dict[str, Any]:
        return {
            "call_id": self.call_id,
            "tool": self.tool,
            "args": dict(self.args),
            "args_hash": self.args_hash,
            "expires_at": self.expires_at,
            "source": self.source,
            "condition": self.condition,
            "probability": self.probability,
            "threshold": self.threshold,
            "reason": self.reason,
        }

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> PendingApproval:
        # Runs suspended by older versions have no "why": they read as plain needs_approval (or guardian) items.
        source: Literal["needs_approval", "guardian", "client"] = "needs_approval"
        if data.get("source") == "guardian" or str(data["call_id"]).startswith("guardian:"):
            source = "guardian"
        elif data.get("source") == "client":
            source = "client"
        return cls(
            data["call_id"],
            data["tool"],
            data["args"],
            data["args_hash"],
            data.get("expires_at"),
            source,
            data.get("condition"),
            data.get("probability"),
            data.get("threshold"),
            data.get("reason") or "",
        )

    def describe(self) -> str:
        """Why this is pending, in one line (``stopwise run`` prints it)."""
        if self.source == "needs_approval":
            return f"tool {self.tool!r} needs approval"
        if self.source == "client":
            return f"client tool {self.tool!r} waits for its result"
        p = "unanswered" if self.probability is None else f"p={self.probability:.2f}"
        t = "" if self.threshold is None else f" > t*={self.threshold:.2f}"
        what = "the turn" if self.call_id.startswith("guardian:") else f"call {self.tool!r}"
        return f"guardian escalated {what}: {self.condition} {p}{t} ({self.reason})"


def expired(pending: Sequence[PendingApproval], now: float) -> tuple[PendingApproval, ...]:
    """The pending calls whose approval has expired at ``now`` (Unix seconds, the caller's clock): past their
    ``expires_at``. A run with any of them can no longer run its batch as the model asked, so ``Runner.expire``
    may end it. Pure: the time comes in as ``now``."""
    return tuple(p for p in pending if p.expires_at is not None and now > p.expires_at)


@dataclass(frozen=True, slots=True)
class Approve:
    """Run the call as it is pending. ``args_hash``, if given, must match the pending call's."""

    args_hash: str | None = None
    reviewer: str | None = None
    """Who decided (free text: a name, an email, a service), recorded with the decision in the log."""

    def __post_init__(self) -> None:
        _check_fields(self, "Approve", ())


@dataclass(frozen=True, slots=True)
class Reject:
    """Do not run the call; the model reads ``message`` as the call's error result and the run goes on."""

    message: str = "The reviewer rejected this call."
    args_hash: str | None = None
    reviewer: str | None = None
    """Who decided (free text: a name, an email, a service), recorded with the decision in the log."""

    def __post_init__(self) -> None:
        _check_fields(self, "Reject", ("message",))


@dataclass(frozen=True, slots=True)
class Modify:
    """Run the call with these arguments instead (validated like the model's own)."""

    args: Mapping[str, Any]
    args_hash: str | None = None
    reviewer: str | None = None
    """Who decided (free text: a name, an email, a service), recorded with the decision in the log."""

    def __post_init__(self) -> None:
        _check_fields(self, "Modify", ())


def args_problem(args: Mapping[str, Any], *, max_depth: int = 1000) -> str | None:
    """What keeps ``Modify`` arguments from being logged as strict JSON, or None when nothing does: every key a
    string, every value None, a bool, an int, a finite float, a string, or a list, tuple or mapping of those,
    nested at most ``max_depth`` levels (which also ends the walk of a value that contains itself)."""
    stack: list[tuple[Any, str, int]] = [(args, "args", 1)]
    while stack:
        value, where, depth = stack.pop()
        if value is None or isinstance(value, str | bool | int):
            continue
        if isinstance(value, float):
            if not math.isfinite(value):
                spelled = "NaN" if math.isnan(value) else "Infinity" if value > 0 else "-Infinity"
                return f"{where} is {spelled}, not a JSON number"
            continue
        if not isinstance(value, Mapping | list | tuple):
            return f"{where} is of type {type(value).__name__}, not a JSON value"
        if depth > max_depth:
            return f"{where} is nested deeper than {max_depth} levels"
        if isinstance(value, Mapping):
            for key, item in value.items():
                if not isinstance(key, str):
                    return f"{where} has a key that is not a string: {key!r}"
                stack.append((item, f"{where}.{key}", depth + 1))
        else:
            stack.extend((item, f"{where}[{i}]", depth + 1) for i, item in enumerate(value))
    return None


@dataclass(frozen=True, slots=True)
class Terminate:
    """End the run now: it is recorded as cancelled (code ``approval_terminated``) and nothing in the batch runs."""

    reason: str = "Terminated by the reviewer."
    args_hash: str | None = None
    reviewer: str | None = None
    """Who decided (free text: a name, an email, a service), recorded with the decision in the log."""

    def __post_init__(self) -> None:
        _check_fields(self, "Terminate", ("reason",))


ApprovalDecision = Approve | Reject | Modify | Terminate


@dataclass(frozen=True, slots=True)
class PlannedCall:
    """One call of a batch suspended for approval, as planned before anything ran."""

    call_id: str
    tool: str
    args: Mapping[str, Any] | None
    """The arguments that run if approved (None when the call cannot run: unknown tool, bad arguments)."""
    answer: Message | None = None
    """The call's tool row when it is answered without running (a block, bad arguments)."""
    needs_approval: bool = False

    def to_data(self) -> dict[str, Any]:
        row = None if self.answer is None else {"content": self.answer.content, "metadata": dict(self.answer.metadata)}
        args = None if self.args is None else dict(self.args)
        return {
            "call_id": self.call_id,
            "tool": self.tool,
            "args": args,
            "row": row,
            "needs_approval": self.needs_approval,
        }

    @classmethod
    def from_data(cls, d: Mapping[str, Any]) -> PlannedCall:
        row = d.get("row")
        answer = None
        if row is not None:
            answer = Message(Role.TOOL, row["content"], tool_call_id=d["call_id"], metadata=row.get("metadata") or {})
        return cls(d["call_id"], d["tool"], d.get("args"), answer, bool(d.get("needs_approval")))


@dataclass(frozen=True, slots=True)
class Escalation:
    """What a guardian escalation asks a reviewer to judge."""

    conditions: tuple[str, ...]
    reason: str
    quarantined: tuple[str, ...] = ()
    """The calls whose outputs are withheld until a reviewer releases them."""

    def to_data(self) -> dict[str, Any]:
        return {"conditions": list(self.conditions), "reason": self.reason, "quarantined": list(self.quarantined)}

    @classmethod
    def from_data(cls, d: Mapping[str, Any]) -> Escalation:
        return cls(tuple(d.get("conditions", ())), d.get("reason", ""), tuple(d.get("quarantined", ())))


@dataclass(frozen=True, slots=True)
class ApprovalRequest:
    """The log record of a suspension: the batch's planned calls, or the guardian's escalation."""

    TYPE: ClassVar[str] = "approval_request"
    calls: tuple[PlannedCall, ...] = ()
    escalation: Escalation | None = None

    def to_data(self) -> dict[str, Any]:
        data: dict[str, Any] = {"type": self.TYPE, "calls": [c.to_data() for c in self.calls]}
        if self.escalation is not None:
            data["escalation"] = self.escalation.to_data()
        return data

    @classmethod
    def from_data(cls, d: Mapping[str, Any]) -> ApprovalRequest:
        escalation = d.get("escalation")
        return cls(
            tuple(PlannedCall.from_data(c) for c in d.get("calls", ())),
            None if escalation is None else Escalation.from_data(escalation),
        )


@dataclass(frozen=True, slots=True)
class ApprovalRecord:
    """A reviewer's decision on one pending call (or on a guardian escalation, ``call_id`` ``guardian:<step>``)."""

    TYPE: ClassVar[str] = "approval_decision"
    call_id: str
    tool: str
    decision: str
    """``approve``, ``reject``, ``modify`` or ``terminate``; ``expired`` when ``Runner.expire`` settled the call
    unanswered (no reviewer)."""
    args: Mapping[str, Any] | None = None
    """Modify's arguments."""
    reason: str | None = None
    """Reject's message or Terminate's reason."""
    reviewer: str | None = None
    """Who decided, as the decision said (None when it did not say)."""
    decided_at: float | None = None
    """When the runner settled it (Unix seconds, by the runner's clock)."""

    @classmethod
    def of(cls, call_id: str, tool: str, decision: ApprovalDecision, decided_at: float | None = None) -> ApprovalRecord:
        args = dict(decision.args) if isinstance(decision, Modify) else None
        reason = decision.message if isinstance(decision, Reject) else None
        if isinstance(decision, Terminate):
            reason = decision.reason
        return cls(call_id, tool, type(decision).__name__.lower(), args, reason, decision.reviewer, decided_at)

    def matches(self, decision: ApprovalDecision) -> bool:
        """Whether ``decision`` is the one this record holds (a resume sent twice must say the same)."""
        return self == ApprovalRecord.of(self.call_id, self.tool, decision, self.decided_at)

    def to_data(self) -> dict[str, Any]:
        data: dict[str, Any] = {"type": self.TYPE, "call_id": self.call_id, "tool": self.tool}
        data["decision"] = self.decision
        if self.args is not None:
            data["args"] = dict(self.args)
        if self.reason is not None:
            data["reason"] = self.reason
        if self.reviewer is not None:
            data["reviewer"] = self.reviewer
        if self.decided_at is not None:
            data["decided_at"] = self.decided_at
        return data

    @classmethod
    def from_data(cls, d: Mapping[str, Any]) -> ApprovalRecord:
        return cls(
            d["call_id"],
            d["tool"],
            d["decision"],
            d.get("args"),
            d.get("reason"),
            d.get("reviewer"),
            d.get("decided_at"),
        )


class ApprovalError(StopwiseError):
    """``resume`` was given decisions that cannot settle the pending calls (unknown call, changed arguments,
    an expired approval, a missing decision, or a run that is not suspended)."""


def _check_fields(decision: object, kind: str, texts: tuple[str, ...]) -> None:
    """A decision's text fields are strings (``texts`` required, the others optional): checked when the decision is
    made, before ``resume`` claims the run, so a wrong type cannot fail it halfway."""
    for name in texts:
        if not isinstance(getattr(decision, name), str):
            raise ApprovalError(f"{kind}.{name} must be a string, got {getattr(decision, name)!r}")
    for name in ("args_hash", "reviewer"):
        value = getattr(decision, name)
        if value is not None and not isinstance(value, str):
            raise ApprovalError(f"{kind}.{name} must be a string or None, got {value!r}")


__getattr__ = aliases(__name__, {"Decision": ("ApprovalDecision", ApprovalDecision)})
