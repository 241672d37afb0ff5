"""The typed outcome of a run."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from stopwise.errors import ErrorDetail
from stopwise.messages import Message, Usage

if TYPE_CHECKING:
    from stopwise.approvals import PendingApproval
    from stopwise.guardian.records import GuardianDecision
    from stopwise.guardrails.verdicts import GuardrailRecord
    from stopwise.stop.guard import StopGuardReport

__all__ = ["CompletionReason", "RunResult", "RunStatus"]


class CompletionReason(StrEnum):
    """Why a run ended. Every finished run has exactly one."""

    FINAL_ANSWER = "final_answer"
    """The model finished with a plain-text reply."""
    OUTPUT = "output"
    """The agent's structured output was produced and validated."""
    STOP_WHEN = "stop_when"
    """A ``stop_when`` condition fired."""
    TOOL_OUTPUT = "tool_output"
    """A stop-at tool (``Agent.stop_at_tools``) succeeded: its result is the run's output."""
    TOOL_CALL_LIMIT = "tool_call_limit"
    """The model asked for more tool calls than ``Limits.tool_calls`` allows; the calls past it never ran."""
    TOKEN_LIMIT = "token_limit"
    """The run used more input, output or total tokens than its ``Limits`` allow."""
    COST_LIMIT = "cost_limit"
    """The run cost more than ``Limits.cost``."""
    TIME_LIMIT = "time_limit"
    """A model call ran past ``Limits.step_seconds`` or the leg past ``Limits.run_seconds`` (retryable)."""
    MAX_STEPS = "max_steps"
    """The step cap was reached before the model finished (a cut-off)."""
    MAX_TOKENS = "max_tokens"
    """The final reply was cut at its token limit."""
    CONTENT_FILTER = "content_filter"
    """A provider content filter cut the final reply."""
    REFUSAL = "refusal"
    """The model refused."""
    ERROR = "error"
    """Something failed: the model adapter, caller code, or invalid structured output."""
    CANCELLED = "cancelled"
    """The caller cancelled the run."""
    STOP_GUARD_EXHAUSTED = "stop_guard_exhausted"
    """The stop guard asked to continue with its budget spent, so the run ended as it would have anyway."""
    STOP_GUARD_ERROR = "stop_guard_error"
    """The stop guard failed (raised, timed out, invalid verdict) and ``on_error="stop"`` ended the run."""
    MAX_STEPS_WRAPPED_UP = "max_steps_wrapped_up"
    """The cap was reached and ``on_max_steps="wrap_up"`` got a final answer from one tool-less call."""
    MAX_STEPS_HANDLED = "max_steps_handled"
    """The cap was reached and the ``on_max_steps`` handler gave the final output, with no model call."""
    GUARDRAIL_INPUT = "guardrail_input"
    """An input guardrail blocked the run before any model call."""
    GUARDRAIL_OUTPUT = "guardrail_output"
    """An output guardrail blocked the final answer; the text is its replacement."""
    AWAITING_APPROVAL = "awaiting_approval"
    """Not an end: the run is suspended until ``Runner.resume`` settles its pending tool calls."""
    APPROVAL_TERMINATED = "approval_terminated"
    """A reviewer ended the run with ``Terminate``."""
    GOAL_REACHED = "goal_reached"
    """The guardian judged every acceptance criterion met (``stop_success``)."""
    INFEASIBLE = "infeasible"
    """The guardian judged the goal out of reach, or the run replanned too often (``stop_failure``)."""
    APPROVAL_EXPIRED = "approval_expired"
    """A suspended run's approvals passed their ``approval_ttl`` unanswered and ``Runner.expire`` ended it (failed,
    code ``approval_expired``, retryable: the model reads each expired call's result and may ask again)."""


class RunStatus(StrEnum):
    """Where a run stands. A string enum: ``result.status == "completed"`` holds."""

    RUNNING = "running"
    """In progress, or interrupted by a crash (``retry()`` recovers it)."""
    COMPLETED = "completed"
    FAILED = "failed"
    SUSPENDED = "suspended"
    """Waiting for something outside the run (an approval) before it can go on."""
    CANCELLED = "cancelled"


@dataclass(frozen=True, slots=True)
class RunResult:
    """How a run ended. Hitting a limit never loses the transcript: ``messages`` is the session's whole log."""

    status: RunStatus
    completion_reason: CompletionReason | None
    error: ErrorDetail | None
    """Set when ``status`` is failed: a stable code, a message, a category, whether a retry may help."""
    output: Any
    """The validated structured output when the agent has an ``output_type``, else the final text (or None)."""
    text: str
    """The text of the last reply."""
    usage: Usage
    steps: int
    """Model calls made by this run, across all its legs (retries included)."""
    session_id: str
    run_id: str
    state: Mapping[str, Any]
    """The session's custom state as committed at the end of the run."""
    messages: tuple[Message, ...] = field(repr=False)
    detail: str = ""
    """Why the run ended, in words (the condition that fired, the validation error)."""
    stop_guard: StopGuardReport | None = None
    """What the agent's stop guard did in this run (None when it has none); also on the run record."""
    guardrails: tuple[GuardrailRecord, ...] = ()
    """Every non-pass guardrail verdict of this run, in order (also in the log and the stream)."""
    pending: tuple[PendingApproval, ...] = ()
    """When ``status`` is suspended: the tool calls (or the guardian escalation) waiting for a decision."""
    decisions: tuple[GuardianDecision, ...] = ()
    """The guardian's decision records of this run, in order (also in the log)."""
    sub_usage: Usage = field(default_factory=Usage)
    """Model usage of the sub-agents this run's tools ran (``Agent.as_tool``), all legs; not in ``usage``. The
    token budgets of ``Limits`` count it (unless ``Limits.count_sub_agents`` is off)."""
    judge_usage: Usage = field(default_factory=Usage)
    """Model usage of the run's judges, all legs, counted from their log records; not in ``usage``: the guardian's
    consultations (an LLM judge, any evaluator that reports usage, ``Guardian.as_stop_guard``) and a stop guard's
    calls as it reported them (``StopGuardContext.report_usage``). The token budgets of ``Limits`` count it
    (unless ``Limits.count_judges`` is off)."""
    cost: Decimal | None = None
    """US dollars for ``usage`` (all legs), when the agent prices its model (``Limits(cost=...)``); else None."""

    @property
    def total_usage(self) -> Usage:
        """Everything this run's model calls spent: its own (``usage``), the guardian's (``judge_usage``) and its
        sub-agents' (``sub_usage``)."""
        return self.usage + self.judge_usage + self.sub_usage

    @property
    def ok(self) -> bool:
        return self.status is RunStatus.COMPLETED
