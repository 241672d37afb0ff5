"""Human approval of tool calls: what a pending call looks like, and the decisions that settle it.

A call to a tool declared ``needs_approval`` (or whose predicate says so for these arguments) suspends the
run durably before anything in the batch executes. ``Runner.resume`` settles every pending call with one of
``Approve()``, ``Reject(message)``, ``Modify(args)`` or ``Terminate(reason)``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from stopwise._deprecated import aliases
from stopwise.errors import StopwiseError

__all__ = [
    "Approve",
    "ApprovalError",
    "ApprovalDecision",
    "Modify",
    "PendingApproval",
    "Reject",
    "Terminate",
    "args_hash",
]


def args_hash(args: Mapping[str, Any]) -> str:
    """A stable hash of a call's arguments: what a reviewer approved is what runs."""
    canonical = json.dumps(args, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:32]


@dataclass(frozen=True, slots=True)
class PendingApproval:
    """A tool call waiting for a human, as ``RunResult.pending`` lists it."""

    call_id: str
    tool: str
    args: Mapping[str, Any]
    """The arguments that will run if approved (after any tool-call guardrail rewrite)."""
    args_hash: str
    expires_at: float | None
    """Unix time after which the approval is refused; None never expires."""

    def to_data(self) -> dict[str, Any]:
        return {
            "call_id": self.call_id,
            "tool": self.tool,
            "args": dict(self.args),
            "args_hash": self.args_hash,
            "expires_at": self.expires_at,
        }

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> PendingApproval:
        return cls(data["call_id"], data["tool"], data["args"], data["args_hash"], data.get("expires_at"))


@dataclass(frozen=True, slots=True)
class Approve:
    """Run the call as it is pending. ``args_hash``, if given, must match the pending call's."""

    args_hash: str | None = None


@dataclass(frozen=True, slots=True)
class Reject:
    """Do not run the call; the model reads ``message`` as the call's error result and the run goes on."""

    message: str = "The reviewer rejected this call."
    args_hash: str | None = None


@dataclass(frozen=True, slots=True)
class Modify:
    """Run the call with these arguments instead (validated like the model's own)."""

    args: Mapping[str, Any]
    args_hash: str | None = None


@dataclass(frozen=True, slots=True)
class Terminate:
    """End the run now: it is recorded as cancelled (code ``approval_terminated``) and nothing in the batch runs."""

    reason: str = "Terminated by the reviewer."
    args_hash: str | None = None


ApprovalDecision = Approve | Reject | Modify | Terminate


class ApprovalError(StopwiseError):
    """``resume`` was given decisions that cannot settle the pending calls (unknown call, changed arguments,
    an expired approval, a missing decision, or a run that is not suspended)."""


__getattr__ = aliases(__name__, {"Decision": ("ApprovalDecision", ApprovalDecision)})
