"""One run as a timeline, read from the log: its steps, tool calls and results, the deciders' records per step,
and per guardian condition its probability over the turns. Pure: built from a committed ``SessionSnapshot`` and
``RunRecord`` with no I/O, so ``stopwise show``, ``stopwise report`` and ``stopwise serve`` show the same run."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from stopwise._results import result_from_log
from stopwise.approvals import ApprovalRecord, PendingApproval
from stopwise.goal import Goal
from stopwise.guardian.records import GuardianDecision
from stopwise.guardrails.verdicts import GuardrailRecord
from stopwise.history import HistoryRecord
from stopwise.messages import DENIED, TOOL_ERROR, Role, decode_tool_result
from stopwise.records import ForkRecord, parse_log
from stopwise.step_plan import StepPlanRecord
from stopwise.stop.guard import StopGuardRecord
from stopwise.store.base import EntryKind, RunRecord, SessionSnapshot
from stopwise.tool_switches import ToolSwitchRecord

__all__ = [
    "ConditionPoint",
    "ConditionReading",
    "ConditionSeries",
    "RunView",
    "StepView",
    "ToolCallView",
    "UNCOMMITTED_WHY",
    "readings",
    "run_view",
]

_R = TypeVar("_R")

UNCOMMITTED_WHY = "the run stopped before this step's results committed; a retry carries out its planned calls"
"""What ``show`` and ``report`` say under the heading of a step that is not committed (``StepView.committed``)."""


@dataclass(frozen=True, slots=True)
class ToolCallView:
    """A tool call the model asked for and what came back (``result`` None while it has not run)."""

    call_id: str
    tool: str
    args: Any
    result: Any = None
    error: bool = False
    """The tool row is an error row (the tool failed, or the call never reached it)."""
    denied: bool = False
    """The call never ran: a guardrail blocked it or a reviewer rejected it."""

    @property
    def state(self) -> str:
        """``denied``, ``error``, ``not run`` (no tool row yet: a suspended call) or ``ok``."""
        if self.denied:
            return "denied"
        if self.error:
            return "error"
        return "not run" if self.result is None else "ok"

    def to_data(self) -> dict[str, Any]:
        return {
            "call_id": self.call_id,
            "tool": self.tool,
            "args": self.args,
            "result": self.result,
            "error": self.error,
            "denied": self.denied,
        }


@dataclass(frozen=True, slots=True)
class StepView:
    """One step (model call) of the run, with every record its entries committed. Step 0 holds what happened
    before the first model call (the input and the input guardrails)."""

    step: int
    text: str
    """The model's reply text (empty for step 0 and for a reply made only of tool calls)."""
    tool_calls: tuple[ToolCallView, ...]
    action: str | None
    """The stop decision's action (``continue``, ``complete``, ``fail``, ``suspend``...); None for step 0."""
    reason: str | None
    detail: str | None
    forced: bool
    guardrails: tuple[GuardrailRecord, ...]
    stop_guard: tuple[StopGuardRecord, ...]
    guardian: tuple[GuardianDecision, ...]
    approvals: tuple[ApprovalRecord, ...]
    plan: StepPlanRecord | None = None
    """What ``prepare_step`` chose for this step's model call (None: no plan, the agent's defaults)."""
    history: HistoryRecord | None = None
    """What of the history the agent's history processors kept from this step's model call (None: no
    processors)."""
    switches: tuple[ToolSwitchRecord, ...] = ()
    """The tool switches this step committed (a tool switching tools off, a stop guard switching them back on)."""
    fork: ForkRecord | None = None
    """Where the session was forked from, on the step a fork continues from (``Runner.fork``)."""

    @property
    def committed(self) -> bool:
        """False for the step a run stopped in after the model's reply and before the step's results committed
        (its write-ahead intent alone is in the log: ``retry`` carries out its planned calls); step 0 (the input)
        and every decided step are committed."""
        return self.step == 0 or self.action is not None

    def to_data(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "committed": self.committed,
            "text": self.text,
            "tool_calls": [c.to_data() for c in self.tool_calls],
            "decision": None
            if self.action is None
            else {"action": self.action, "reason": self.reason, "detail": self.detail},
            "forced": self.forced,
            "guardrails": [r.to_data() for r in self.guardrails],
            "stop_guard": [r.to_data() for r in self.stop_guard],
            "guardian": [_guardian_summary(d) for d in self.guardian],
            "approvals": [r.to_data() for r in self.approvals],
            "plan": None if self.plan is None else self.plan.to_data(),
            "history": None if self.history is None else self.history.to_view(),
            "switches": [r.to_data() for r in self.switches],
            "fork": None if self.fork is None else self.fork.to_data(),
        }


@dataclass(frozen=True, slots=True)
class ConditionPoint:
    """A guardian condition at one decision: its probability (None when unanswered) and the decision's outcome."""

    step: int
    kind: str
    """``turn`` or ``pre_execution``."""
    p: float | None
    outcome: str
    escalated: bool
    """This condition was among those that made the decision escalate."""


@dataclass(frozen=True, slots=True)
class ConditionSeries:
    """One guardian condition over the run: its threshold t*, the uncertain band t* ± delta, and its points."""

    name: str
    threshold: float
    delta: float
    points: tuple[ConditionPoint, ...]

    def to_data(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "threshold": self.threshold,
            "delta": self.delta,
            "points": [
                {"step": p.step, "kind": p.kind, "p": p.p, "outcome": p.outcome, "escalated": p.escalated}
                for p in self.points
            ],
        }


@dataclass(frozen=True, slots=True)
class RunView:
    """A run as a person reads it: how it ended, what it was asked, its steps and the guardian's series."""

    run: RunRecord
    inputs: tuple[str, ...]
    """The user rows the run's legs started with (the prompt, a retry's message)."""
    steps: tuple[StepView, ...]
    series: tuple[ConditionSeries, ...]
    pending: tuple[PendingApproval, ...]
    """When the run is suspended: what waits for a decision, each with why (``PendingApproval.describe``)."""
    goal: Goal | None = None
    """The run's goal and acceptance criteria as its log has them (None: not logged, the input is the goal)."""

    def to_data(self) -> dict[str, Any]:
        run = self.run
        return {
            "run_id": run.run_id,
            "session_id": run.session_id,
            "agent": run.agent,
            "status": run.status.value,
            "completion_reason": None if run.completion_reason is None else run.completion_reason.value,
            "error": None if run.error is None else {"code": str(run.error.code), "message": run.error.message},
            "detail": run.detail,
            "output": run.output,
            "steps_count": run.steps,
            "usage": {"input_tokens": run.usage.input_tokens, "output_tokens": run.usage.output_tokens},
            "inputs": list(self.inputs),
            "goal": None if self.goal is None else {"text": self.goal.text, "criteria": list(self.goal.criteria)},
            "steps": [s.to_data() for s in self.steps],
            "guardian_series": [s.to_data() for s in self.series],
            "pending": [{**p.to_data(), "why": p.describe()} for p in self.pending],
        }


def run_view(snapshot: SessionSnapshot, run: RunRecord) -> RunView:
    """The timeline of ``run`` as committed in ``snapshot`` (its session)."""
    entries = [e for e in snapshot.entries if e.run_id == run.run_id]
    results: dict[str, tuple[Any, bool, bool]] = {}
    for entry in entries:
        for m in entry.messages:
            if m.role is Role.TOOL and m.tool_call_id is not None:
                meta = m.metadata
                results[m.tool_call_id] = (decode_tool_result(m), bool(meta.get(TOOL_ERROR)), bool(meta.get(DENIED)))

    inputs: list[str] = []
    goal: Goal | None = None
    by_step: dict[int, dict[str, Any]] = {}
    for entry, records in parse_log(entries):
        if entry.kind is EntryKind.INPUT:
            inputs.extend(m.content for m in entry.messages if m.role is Role.USER)
        slot = by_step.setdefault(
            entry.step, {"text": "", "calls": [], "decision": None, "forced": False, "records": []}
        )
        if entry.kind in (EntryKind.STEP, EntryKind.SETTLE) and slot["decision"] is None:
            slot["decision"] = entry.decision  # a suspended step shows its suspension
        if entry.kind in (EntryKind.STEP, EntryKind.INTENT):
            slot["forced"] = entry.forced
            for m in entry.messages:
                if m.role is Role.ASSISTANT:
                    slot["text"] += m.content
                    for call in m.tool_calls:
                        got = results.get(call.id)
                        result, error, denied = got if got is not None else (None, False, False)
                        slot["calls"].append(
                            ToolCallView(call.id, call.name, _jsonable(call.args), result, error, denied)
                        )
        goal = next((r for r in records if isinstance(r, Goal)), goal)
        slot["records"].extend(records)

    steps = []
    for number in sorted(by_step):
        slot = by_step[number]
        records = slot["records"]
        decision: Mapping[str, Any] | None = slot["decision"]
        steps.append(
            StepView(
                step=number,
                text=slot["text"],
                tool_calls=tuple(slot["calls"]),
                action=None if decision is None else str(decision.get("action")),
                reason=None if decision is None or decision.get("reason") is None else str(decision["reason"]),
                detail=None if decision is None or not decision.get("detail") else str(decision["detail"]),
                forced=slot["forced"],
                guardrails=tuple(r for r in records if isinstance(r, GuardrailRecord)),
                stop_guard=tuple(r for r in records if isinstance(r, StopGuardRecord)),
                guardian=tuple(r for r in records if isinstance(r, GuardianDecision)),
                approvals=tuple(r for r in records if isinstance(r, ApprovalRecord)),
                plan=_last(records, StepPlanRecord),
                history=_last(records, HistoryRecord),
                switches=tuple(r for r in records if isinstance(r, ToolSwitchRecord)),
                fork=_last(records, ForkRecord),
            )
        )
    decisions = [d for s in steps for d in s.guardian]
    pending = result_from_log(None, snapshot, run).pending
    return RunView(run, tuple(inputs), tuple(steps), _series(decisions), pending, goal)


def _last(records: list[Any], kind: type[_R]) -> _R | None:
    """The last record of ``kind`` among a step's records (one model call a step: there is at most one)."""
    return next((r for r in reversed(records) if isinstance(r, kind)), None)


@dataclass(frozen=True, slots=True)
class ConditionReading:
    """One condition in one guardian decision, as a person reads it against its threshold."""

    name: str
    p: float | None
    """None when the evaluator could not answer."""
    threshold: float
    delta: float
    escalated: bool

    @property
    def over(self) -> bool:
        return self.p is not None and self.p > self.threshold

    @property
    def in_band(self) -> bool:
        """Within the uncertain band t* ± delta."""
        return self.p is not None and abs(self.p - self.threshold) <= self.delta


def readings(d: GuardianDecision) -> tuple[ConditionReading, ...]:
    """The conditions ``d`` asked about, in the order it lists them."""
    probabilities = d.probabilities
    return tuple(
        ConditionReading(spec.name, probabilities.get(spec.name), spec.threshold, spec.delta, spec.name in d.escalated)
        for spec in d.conditions
        if spec.name in d.answers
    )


def _series(decisions: list[GuardianDecision]) -> tuple[ConditionSeries, ...]:
    specs: dict[str, tuple[float, float]] = {}
    points: dict[str, list[ConditionPoint]] = {}
    for d in decisions:
        for r in readings(d):
            specs[r.name] = (r.threshold, r.delta)
            points.setdefault(r.name, []).append(ConditionPoint(d.step, d.kind, r.p, d.outcome.value, r.escalated))
    return tuple(ConditionSeries(name, *specs[name], tuple(points[name])) for name in points)


def _guardian_summary(d: GuardianDecision) -> dict[str, Any]:
    return {
        "kind": d.kind,
        "call_id": d.call_id,
        "outcome": d.outcome.value,
        "reason": d.reason,
        "evaluator": d.evaluator,
        "probabilities": d.probabilities,
        "thresholds": {c.name: c.threshold for c in d.conditions},
        "escalated": list(d.escalated),
        "resolved_by": d.resolved_by,
    }


def _jsonable(value: Any) -> Any:
    return dict(value) if isinstance(value, Mapping) else value
