"""The guardian's decision record: everything needed to recompute the outcome without calling any model."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from stopwise._deprecated import aliases
from stopwise.guardian.answers import Answer
from stopwise.guardian.conditions import Condition, GuardianOutcome
from stopwise.guardian.policy import PolicyInputs, PolicyResult, ThresholdPolicy
from stopwise.messages import Usage
from stopwise.stop.guard import StopGuardRecord

__all__ = ["ConditionSpec", "GuardianDecision", "GuardianLabel", "judge_usage", "replay"]

RECORD_TYPE = "guardian"


@dataclass(frozen=True, slots=True)
class ConditionSpec:
    """A condition as a decision record keeps it: what the policy needs, with the threshold it used."""

    name: str
    outcome: GuardianOutcome
    threshold: float
    delta: float
    fires_on: tuple[str, ...]
    hysteresis: tuple[int, int] | None
    version: str = "1"

    @classmethod
    def of(cls, c: Condition) -> ConditionSpec:
        return cls(c.name, c.outcome, c.threshold, c.delta, tuple(c.fires_on), c.hysteresis, c.version)

    def to_data(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "outcome": self.outcome.value,
            "threshold": self.threshold,
            "delta": self.delta,
            "fires_on": list(self.fires_on),
            "hysteresis": None if self.hysteresis is None else list(self.hysteresis),
            "version": self.version,
        }

    @classmethod
    def from_data(cls, d: Mapping[str, Any]) -> ConditionSpec:
        h = d.get("hysteresis")
        return cls(
            d["name"],
            GuardianOutcome(d["outcome"]),
            float(d["threshold"]),
            float(d["delta"]),
            tuple(d["fires_on"]),
            None if h is None else (int(h[0]), int(h[1])),
            d.get("version", "1"),
        )


@dataclass(frozen=True, slots=True)
class GuardianDecision:
    """One guardian decision, as committed in the step's transaction and listed in ``RunResult.decisions``."""

    TYPE: ClassVar[str] = RECORD_TYPE

    run_id: str
    step: int
    kind: Literal["turn", "pre_execution"]
    call_id: str | None
    """The proposed call a pre-execution decision is about."""
    state_hash: str
    question_set_version: str
    evaluator: str
    model_version: str
    answers: Mapping[str, Answer]
    conditions: tuple[ConditionSpec, ...]
    """The conditions with the thresholds used."""
    policy: Mapping[str, Any]
    inputs: PolicyInputs
    outcome: GuardianOutcome
    reason: str
    latency_ms: float
    held: Mapping[str, bool] = field(default_factory=dict)
    """Per condition, whether it held on this turn: the next turn's hysteresis reads it."""
    resolved_by: str | None = None
    """Set when an escalation was settled in the same turn (``judge``)."""
    escalated: tuple[str, ...] = ()
    """The conditions that made this decision escalate (in the band, unanswered, or firing an escalation)."""
    state: str | None = None
    """The projection's text, kept only on escalations: the review's resolution labels it for the eval harness."""
    usage: Usage = field(default_factory=Usage)
    """What this consultation's model calls spent (the evaluator's and the judge's, when they report usage): the
    run's token budgets count it, and ``RunResult.judge_usage`` adds it up."""

    @property
    def probabilities(self) -> dict[str, float | None]:
        specs = {c.name: c for c in self.conditions}
        return {
            name: (None if a.uncertain else a.p(specs[name].fires_on))
            for name, a in self.answers.items()
            if name in specs
        }

    def to_data(self) -> dict[str, Any]:
        return {
            "type": self.TYPE,
            "run_id": self.run_id,
            "step": self.step,
            "kind": self.kind,
            "call_id": self.call_id,
            "state_hash": self.state_hash,
            "question_set_version": self.question_set_version,
            "evaluator": self.evaluator,
            "model_version": self.model_version,
            "answers": {k: a.to_data() for k, a in self.answers.items()},
            "conditions": [c.to_data() for c in self.conditions],
            "policy": dict(self.policy),
            "inputs": self.inputs.to_data(),
            "outcome": self.outcome.value,
            "reason": self.reason,
            "latency_ms": self.latency_ms,
            "held": dict(self.held),
            "resolved_by": self.resolved_by,
            "escalated": list(self.escalated),
            "state": self.state,
        } | ({"usage": self.usage.to_data()} if self.usage != Usage() else {})

    @classmethod
    def from_data(cls, d: Mapping[str, Any]) -> GuardianDecision:
        return cls(
            d["run_id"],
            d["step"],
            d["kind"],
            d.get("call_id"),
            d["state_hash"],
            d["question_set_version"],
            d["evaluator"],
            d["model_version"],
            {k: Answer.from_data(a) for k, a in d["answers"].items()},
            tuple(ConditionSpec.from_data(c) for c in d["conditions"]),
            d["policy"],
            PolicyInputs.from_data(d["inputs"]),
            GuardianOutcome(d["outcome"]),
            d["reason"],
            float(d.get("latency_ms", 0.0)),
            dict(d.get("held", {})),
            d.get("resolved_by"),
            tuple(d.get("escalated", ())),
            d.get("state"),
            Usage(**d.get("usage", {})),
        )


def judge_usage(records: Iterable[object]) -> Usage:
    """What the judges of a run spent on model calls, from their records among ``records``: the guardian's
    consultations (``GuardianDecision``) and the stop guard's (``StopGuardRecord``, as the guard reported it);
    other records count nothing. How a run counts its judges' usage from the log."""
    total = Usage()
    for r in records:
        if isinstance(r, GuardianDecision | StopGuardRecord):
            total = total + r.usage
    return total


@dataclass(frozen=True, slots=True)
class GuardianLabel:
    """A labelled example for the eval harness: the projection's text, the condition, what the resolver of an
    escalation (``judge`` or ``human``) said, and what the evaluator had answered."""

    TYPE: ClassVar[str] = "guardian_label"
    condition: str
    label: bool
    """Whether the condition held, in the resolver's judgement."""
    state: str
    state_hash: str
    source: str
    """``judge`` or ``human``."""
    run_id: str
    step: int
    evaluator_p: float | None = None
    reviewer: str | None = None
    """For a human's label: who decided, when the decision said."""

    def to_data(self) -> dict[str, Any]:
        return {
            "type": self.TYPE,
            "reviewer": self.reviewer,
            "condition": self.condition,
            "label": self.label,
            "state": self.state,
            "state_hash": self.state_hash,
            "source": self.source,
            "evaluator_p": self.evaluator_p,
            "run_id": self.run_id,
            "step": self.step,
        }

    @classmethod
    def from_data(cls, d: Mapping[str, Any]) -> GuardianLabel:
        return cls(
            d["condition"],
            bool(d["label"]),
            d["state"],
            d["state_hash"],
            d["source"],
            d["run_id"],
            d["step"],
            d.get("evaluator_p"),
            d.get("reviewer"),
        )


def replay(
    decision: GuardianDecision,
    policy: ThresholdPolicy | None = None,
    conditions: tuple[ConditionSpec, ...] | None = None,
) -> PolicyResult:
    """Recompute a decision's outcome from its record (or under another policy / other thresholds)."""
    p = policy if policy is not None else ThresholdPolicy(**decision.policy)
    return p.decide(decision.answers, conditions if conditions is not None else decision.conditions, decision.inputs)


__getattr__ = aliases(__name__, {"Decision": ("GuardianDecision", GuardianDecision)})
