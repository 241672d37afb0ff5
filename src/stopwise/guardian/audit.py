"""Auditing a decision log: replay every recorded decision, try other thresholds, and summarise per condition.

Pure functions over ``GuardianDecision`` records: no model, judge or tool is called, so a replay shows exactly what the
policy did with what the evaluator said.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

from stopwise.errors import ConfigError
from stopwise.guardian.conditions import GuardianOutcome
from stopwise.guardian.policy import ThresholdPolicy
from stopwise.guardian.records import ConditionSpec, GuardianDecision, recorded_policy, replay

__all__ = ["ConditionStats", "Flip", "PolicyOverride", "Tally", "replay_all", "stats"]


@dataclass(frozen=True, slots=True)
class Flip:
    """A decision whose replayed outcome differs from the recorded (or the baseline) one."""

    run_id: str
    step: int
    kind: str
    call_id: str | None
    recorded: GuardianOutcome
    replayed: GuardianOutcome
    reason: str


@dataclass(frozen=True, slots=True)
class PolicyOverride:
    """Other thresholds to replay under: policy settings and, per condition, costs or delta."""

    policy: Mapping[str, Any] = field(default_factory=dict)
    conditions: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    """Condition name -> any of ``cost_false_stop``, ``cost_false_continue``, ``threshold``, ``delta``."""

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> PolicyOverride:
        unknown = set(data) - {"policy", "conditions"}
        if unknown:
            raise ConfigError("policy file", f"unknown keys {sorted(unknown)}; expected 'policy' and 'conditions'")
        bad_settings = set(data.get("policy", {})) - {f.name for f in fields(ThresholdPolicy)}
        if bad_settings:
            raise ConfigError("policy file: policy", f"unknown settings {sorted(bad_settings)}")
        for name, values in data.get("conditions", {}).items():
            bad = set(values) - {"cost_false_stop", "cost_false_continue", "threshold", "delta"}
            if bad:
                raise ConfigError(f"policy file: condition {name}", f"unknown settings {sorted(bad)}")
        return cls(dict(data.get("policy", {})), dict(data.get("conditions", {})))

    def unknown_conditions(self, decisions: Iterable[GuardianDecision]) -> list[str]:
        """The condition names this override sets that none of ``decisions`` has (a misspelling, most often)."""
        known = {c.name for d in decisions for c in d.conditions}
        return sorted(set(self.conditions) - known)

    def apply(self, d: GuardianDecision) -> tuple[ThresholdPolicy, tuple[ConditionSpec, ...]]:
        policy = recorded_policy(d, self.policy)
        specs = []
        for c in d.conditions:
            change = self.conditions.get(c.name)
            if change:
                threshold = change.get("threshold", c.threshold)
                if "cost_false_stop" in change or "cost_false_continue" in change:
                    stop = change.get("cost_false_stop", c.threshold)
                    cont = change.get("cost_false_continue", 1 - c.threshold)
                    threshold = stop / (stop + cont)
                c = replace(c, threshold=threshold, delta=change.get("delta", c.delta))
            specs.append(c)
        return policy, tuple(specs)


def replay_all(decisions: Iterable[GuardianDecision], override: PolicyOverride | None = None) -> tuple[int, list[Flip]]:
    """Recompute every decision; returns how many were replayed and the ones whose outcome differs.

    Without ``override`` any difference is a disagreement (the log is not reproducible); with one, the list is
    what the other thresholds would have flipped.
    """
    count, flips = 0, []
    for d in decisions:
        count += 1
        result = replay(d) if override is None else replay(d, *override.apply(d))
        if result.outcome is not d.outcome:
            flips.append(Flip(d.run_id, d.step, d.kind, d.call_id, d.outcome, result.outcome, result.reason))
    return count, flips


@dataclass(frozen=True, slots=True)
class ConditionStats:
    """One condition across a log: how often it was asked, a histogram of its probabilities, its escalations."""

    name: str
    asked: int
    uncertain: int
    held: int
    escalated: int
    histogram: tuple[int, ...]
    """Counts of answered probabilities in 10 bins: [0, 0.1), ..., [0.9, 1.0]."""

    @property
    def escalation_rate(self) -> float:
        return self.escalated / self.asked if self.asked else 0.0


class Tally:
    """``stats`` kept as decisions arrive: ``add`` them in any number of batches (a database read one session at a
    time), then read ``rows()`` and ``outcomes``. Holds counters only, never the decisions."""

    def __init__(self) -> None:
        self.asked: Counter[str] = Counter()
        self.uncertain: Counter[str] = Counter()
        self.held: Counter[str] = Counter()
        self.escalated: Counter[str] = Counter()
        self.bins: dict[str, list[int]] = {}
        """Condition name -> its 10 histogram bins, in the order the conditions were first seen."""
        self.outcomes: Counter[str] = Counter()

    def add(self, decisions: Iterable[GuardianDecision]) -> None:
        for d in decisions:
            self.outcomes[d.outcome.value] += 1
            for name, p in d.probabilities.items():
                bins = self.bins.setdefault(name, [0] * 10)
                self.asked[name] += 1
                if p is None:
                    self.uncertain[name] += 1
                else:
                    bins[min(9, int(p * 10))] += 1
                self.held[name] += bool(d.held.get(name))
                self.escalated[name] += name in d.escalated

    def rows(self) -> list[ConditionStats]:
        return [
            ConditionStats(n, self.asked[n], self.uncertain[n], self.held[n], self.escalated[n], tuple(b))
            for n, b in self.bins.items()
        ]


def stats(decisions: Iterable[GuardianDecision]) -> tuple[list[ConditionStats], Counter[str]]:
    """Per condition statistics and the count of each outcome."""
    tally = Tally()
    tally.add(decisions)
    return tally.rows(), tally.outcomes
