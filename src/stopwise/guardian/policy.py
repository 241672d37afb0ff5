"""The threshold policy: a pure function from answers to exactly one outcome, with the reason.

Per condition: the probability that it holds, ``p``, against ``t* = C_stop / (C_stop + C_cont)``. Within
``delta`` of ``t*`` the turn escalates; above it the condition holds, and fires (with k-of-n hysteresis where
set). Exact repeats (one call, or a cycle of calls, made ``repeat_limit`` times in a row) and budgets are plain
code. A risk class the tool's author declared is a floor: a condition that fires on that class holds whatever the
evaluator answered (an evaluator can raise a declaration, never lower it). Precedence: escalate > stop > replan >
continue; two contradicting stops escalate; a replan past ``max_replans`` becomes ``stop_failure``. The run's
budgets are an input too (``PolicyInputs.budget_used``): when one is nearly spent, a ``stop_success`` condition at
or above its threshold but inside its band stops instead of escalating, and a replan escalates instead (there is no
budget left to act on it). No I/O, no clock: the same inputs always give the same outcome, which is what makes a
decision log replayable.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from stopwise.errors import ConfigError
from stopwise.guardian.answers import Answer
from stopwise.guardian.conditions import GuardianOutcome
from stopwise.stop.repeats import Cycle

__all__ = ["ConditionLike", "ConditionVerdict", "PolicyInputs", "PolicyResult", "ThresholdPolicy"]

OnUnavailable = Literal["escalate", "continue", "stop"]


class ConditionLike(Protocol):
    """What the policy reads of a condition: a ``Condition``, or the ``ConditionSpec`` a decision record keeps."""

    @property
    def name(self) -> str: ...
    @property
    def outcome(self) -> GuardianOutcome: ...
    @property
    def threshold(self) -> float: ...
    @property
    def delta(self) -> float: ...
    @property
    def fires_on(self) -> tuple[str, ...]: ...
    @property
    def hysteresis(self) -> tuple[int, int] | None: ...


@dataclass(frozen=True, slots=True)
class ConditionVerdict:
    """How the policy read one condition on one turn."""

    name: str
    p: float | None
    """Probability that the condition holds; None when the answer was uncertain."""
    threshold: float
    delta: float
    held: bool
    """``p`` above the threshold (outside the band) on this turn."""
    fired: bool
    """Held on enough recent turns to act (hysteresis applied)."""
    in_band: bool
    uncertain: bool
    declared: bool = False
    """Held because the author declared a risk class the condition fires on, whatever ``p`` said."""
    budget: bool = False
    """Held, though in its band, because the run's budget is nearly spent (a ``stop_success`` condition with ``p``
    at or above its threshold): see ``ThresholdPolicy.budget_nearly_spent``."""

    def to_data(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "p": self.p,
            "threshold": self.threshold,
            "delta": self.delta,
            "held": self.held,
            "fired": self.fired,
            "in_band": self.in_band,
            "uncertain": self.uncertain,
            "declared": self.declared,
            "budget": self.budget,
        }


@dataclass(frozen=True, slots=True)
class PolicyInputs:
    """Everything besides the answers that the policy reads; recorded with each decision for replay."""

    held_before: Mapping[str, Sequence[bool]]
    """Per condition, whether it held on the previous turns (oldest first), for hysteresis."""
    replans: int = 0
    """Replans already made in this run."""
    repeats: int = 0
    """How many times in a row the latest tool call (same tool, same arguments) was made."""
    declared_risk: str | None = None
    """The risk class the tool's author declared for the proposed call (set on pre-execution decisions; None when
    undeclared). A condition whose ``fires_on`` names it holds: the declaration is a floor."""
    budget_used: float | None = None
    """The largest fraction of any of the run's ``Limits`` budgets used so far, this step's usage included (1.0 is
    all of it); None when the agent sets no budget. The loop passes it in (set on turn decisions)."""
    budget: str | None = None
    """Which budget ``budget_used`` is (``total_tokens``, ``cost``, ``tool_calls``, ``run_time``...)."""
    cycle: Cycle | None = None
    """The latest cycle of two or more different calls made again and again in the same order
    (``stopwise.stop.repeats.Cycles``), with its whole repetitions in a row; None when there is none. A decision
    recorded before cycles were an input has none, and replays as it was made."""
    newer: Mapping[str, Any] = field(default_factory=dict)
    """Inputs a record holds that this version does not know (a newer stopwise wrote them), as written: read from a
    record, never set by the guardian. ``to_data`` writes them back, so a copy of the record keeps them; ``replay``
    refuses a decision that has any, since this version's policy would decide without them."""

    def to_data(self) -> dict[str, Any]:
        data = {
            "held_before": {k: list(v) for k, v in self.held_before.items()},
            "replans": self.replans,
            "repeats": self.repeats,
            "declared_risk": self.declared_risk,
        }
        # Written only when set: a decision without budgets keeps the record it had before they were an input.
        if self.budget_used is not None:
            data |= {"budget_used": self.budget_used, "budget": self.budget}
        # Likewise a cycle: a run without one keeps the record it had before cycles were an input.
        if self.cycle is not None:
            data["cycle"] = self.cycle.to_data()
        if self.newer:
            data |= self.newer
        return data

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> PolicyInputs:
        """The inputs ``to_data`` wrote; an input this version does not know is kept in ``newer``, not dropped."""
        return cls(
            {k: tuple(v) for k, v in data.get("held_before", {}).items()},
            data.get("replans", 0),
            data.get("repeats", 0),
            data.get("declared_risk"),
            data.get("budget_used"),
            data.get("budget"),
            Cycle.from_data(data["cycle"]) if data.get("cycle") else None,
            _newer(data),
        )


_INPUTS = frozenset(f.name for f in dataclasses.fields(PolicyInputs)) - {"newer"}
"""The inputs this version's policy reads (a record's others are a newer writer's: ``PolicyInputs.newer``)."""

_RETIRED_INPUTS: Mapping[str, Any] = {"budget_exhausted": None}
"""Inputs earlier versions wrote that this one no longer reads, with the value they always held (nothing ever set
``budget_exhausted``): a record holding one at that value replays as it was decided; at another it is not ours."""


def _newer(data: Mapping[str, Any]) -> dict[str, Any]:
    """The inputs of ``data`` this version does not know, as written (``PolicyInputs.newer``)."""
    if data.keys() <= _INPUTS:
        return {}
    return {
        k: v for k, v in data.items() if k not in _INPUTS and not (k in _RETIRED_INPUTS and v == _RETIRED_INPUTS[k])
    }


@dataclass(frozen=True, slots=True)
class PolicyResult:
    outcome: GuardianOutcome
    reason: str
    verdicts: tuple[ConditionVerdict, ...]
    """Per condition, in the question set's order."""
    escalated: tuple[str, ...] = ()
    """The conditions that made the outcome an escalation."""


@dataclass(slots=True)
class _Reasons:
    """A turn's verdicts sorted by what they ask for, in words (the policy's working state, never returned)."""

    escalate: list[str] = field(default_factory=list)
    escalated: list[str] = field(default_factory=list)
    success: list[str] = field(default_factory=list)
    failure: list[str] = field(default_factory=list)
    stopping: list[str] = field(default_factory=list)
    """Conditions that fired a stop (named when contradicting stops escalate)."""
    replan: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class ThresholdPolicy:
    """Thresholds come from each condition's costs; this holds the plain-code rules around them."""

    max_replans: int = 2
    """Replans allowed in a run; the next one stops it with failure."""
    repeat_limit: int = 3
    """The same call, with the same arguments, this many times in a row counts as stagnation without asking; so
    does a cycle of two to four steps (``PolicyInputs.cycle``) made this many times in a row."""
    on_unavailable: OnUnavailable = "escalate"
    """What an uncertain answer (evaluator timeout, error, malformed output) does: ``escalate`` fails closed."""
    budget_nearly_spent: float | None = 0.9
    """From this fraction of a budget used (``PolicyInputs.budget_used``) up to all of it, the budget is nearly
    spent: a ``stop_success`` condition inside its band with ``p`` at or above its threshold stops the run instead
    of escalating (the goal is probably reached, and neither a review nor another step is worth the last of the
    budget), and a replan escalates instead (no budget is left to carry it out). Once a budget is past (over
    1.0) the policy ignores it: the stop decision ends the run with that budget's own reason. None: budgets are
    not read."""

    def __post_init__(self) -> None:
        for name, least in (("max_replans", 0), ("repeat_limit", 2)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise ConfigError(f"ThresholdPolicy.{name}", f"must be an int >= {least}, got {value!r}")
        if self.on_unavailable not in ("escalate", "continue", "stop"):
            raise ConfigError(
                "ThresholdPolicy.on_unavailable", f"must be escalate, continue or stop, got {self.on_unavailable!r}"
            )
        nearly = self.budget_nearly_spent
        if nearly is not None and (
            isinstance(nearly, bool) or not isinstance(nearly, int | float) or not 0 < nearly <= 1
        ):
            raise ConfigError("ThresholdPolicy.budget_nearly_spent", f"must be in (0, 1] or None, got {nearly!r}")

    def nearly_spent(self, inputs: PolicyInputs) -> bool:
        """Whether ``inputs`` say a budget is nearly spent but not past: from ``budget_nearly_spent`` to 1.0."""
        used, nearly = inputs.budget_used, self.budget_nearly_spent
        return used is not None and nearly is not None and nearly <= used <= 1.0

    def verdict(self, condition: ConditionLike, answer: Answer, held_before: Sequence[bool]) -> ConditionVerdict:
        t, delta = condition.threshold, condition.delta
        if answer.uncertain:
            return ConditionVerdict(condition.name, None, t, delta, False, False, False, True)
        p = answer.p(condition.fires_on)
        in_band = abs(p - t) <= delta
        held = p > t and not in_band
        fired = _fires(condition, held_before, held)
        return ConditionVerdict(condition.name, p, t, delta, held, fired, in_band, False)

    def decide(
        self, answers: Mapping[str, Answer], conditions: Sequence[ConditionLike], inputs: PolicyInputs
    ) -> PolicyResult:
        """Exactly one outcome for the turn, with the reason."""
        nearly_spent = self.nearly_spent(inputs)
        verdicts = tuple(
            _budgeted(
                _floored(
                    self.verdict(
                        c,
                        answers.get(c.name) or Answer(uncertain=True, note="no answer"),
                        inputs.held_before.get(c.name, ()),
                    ),
                    c,
                    inputs.declared_risk,
                ),
                c,
                nearly_spent,
                inputs.held_before.get(c.name, ()),
            )
            for c in conditions
        )
        return self._outcome(self._reasons(verdicts, conditions, inputs), verdicts, inputs)

    def _reasons(
        self, verdicts: tuple[ConditionVerdict, ...], conditions: Sequence[ConditionLike], inputs: PolicyInputs
    ) -> _Reasons:
        """What each verdict asks for, in words, grouped by the outcome it asks for."""
        by_name = {c.name: c for c in conditions}
        r = _Reasons()
        stops = {GuardianOutcome.STOP_SUCCESS: r.success, GuardianOutcome.STOP_FAILURE: r.failure}
        for v in verdicts:
            outcome = by_name[v.name].outcome
            if v.declared:
                where = f"{v.name}: {inputs.declared_risk}, declared by the tool's author"
                if v.p is not None:
                    where += f" (a floor: the evaluator's p={v.p:.2f} cannot lower it)"
            elif v.budget:
                assert v.p is not None
                where = (
                    f"{v.name} p={v.p:.2f} >= t*={v.threshold:.2f} (within {v.delta:g}) with the {inputs.budget} "
                    f"budget {inputs.budget_used:.0%} used"
                )
            elif v.uncertain:
                if self.on_unavailable == "escalate":
                    r.escalate.append(f"{v.name} unanswered")
                    r.escalated.append(v.name)
                elif self.on_unavailable == "stop":
                    r.failure.append(f"{v.name} unanswered")
                continue
            elif v.in_band:
                r.escalate.append(f"{v.name} p={v.p:.2f} within {v.delta:g} of t*={v.threshold:.2f}")
                r.escalated.append(v.name)
                continue
            elif v.fired:
                where = f"{v.name} p={v.p:.2f} > t*={v.threshold:.2f}"
            else:
                continue
            if outcome is GuardianOutcome.ESCALATE:
                r.escalate.append(where)
                r.escalated.append(v.name)
            elif outcome in stops:
                stops[outcome].append(where)
                if v.fired:
                    r.stopping.append(v.name)
            elif outcome is GuardianOutcome.REPLAN:
                r.replan.append(where)
        if inputs.repeats >= self.repeat_limit:
            r.replan.append(f"the same call was made {inputs.repeats} times in a row")
        if inputs.cycle is not None and inputs.cycle.count >= self.repeat_limit:
            r.replan.append(inputs.cycle.reason)
        return r

    def _outcome(self, r: _Reasons, verdicts: tuple[ConditionVerdict, ...], inputs: PolicyInputs) -> PolicyResult:
        """The precedence: escalate > contradicting stops (escalate) > stop > replan (or stop past max_replans)."""
        if r.escalate:
            return PolicyResult(
                GuardianOutcome.ESCALATE, "escalate: " + "; ".join(r.escalate), verdicts, tuple(r.escalated)
            )
        if r.success and r.failure:
            reason = f"contradicting stops: {'; '.join(r.success)} vs {'; '.join(r.failure)}"
            return PolicyResult(GuardianOutcome.ESCALATE, reason, verdicts, tuple(r.stopping))
        if r.success:
            return PolicyResult(GuardianOutcome.STOP_SUCCESS, "stop: " + "; ".join(r.success), verdicts)
        if r.failure:
            return PolicyResult(GuardianOutcome.STOP_FAILURE, "stop: " + "; ".join(r.failure), verdicts)
        if r.replan:
            if inputs.replans >= self.max_replans:
                reason = f"stop: {inputs.replans} replans already ({'; '.join(r.replan)})"
                return PolicyResult(GuardianOutcome.STOP_FAILURE, reason, verdicts)
            if self.nearly_spent(inputs):
                reason = (
                    f"escalate: a replan is called for ({'; '.join(r.replan)}) but the {inputs.budget} budget is "
                    f"{inputs.budget_used:.0%} used, too little is left to act on it"
                )
                return PolicyResult(GuardianOutcome.ESCALATE, reason, verdicts)
            return PolicyResult(GuardianOutcome.REPLAN, "replan: " + "; ".join(r.replan), verdicts)
        return PolicyResult(GuardianOutcome.CONTINUE, "continue", verdicts)

    @classmethod
    def from_data(cls, settings: Mapping[str, Any]) -> ThresholdPolicy:
        """The policy a record's settings (``to_data``) describe, each setting checked as the constructor checks
        it: one of another type (``"7"`` or ``true`` for ``max_replans``, a text for ``budget_nearly_spent``) raises
        ``ConfigError`` naming it (``ThresholdPolicy.<setting>``), never a policy that misreads it. A setting absent
        takes its default. Settings this version does not know (``unknown_settings``: a newer writer's) are not
        read here; a caller that must honour every setting (a replay) refuses them first."""
        return cls(**{k: v for k, v in settings.items() if k in _SETTINGS})

    @staticmethod
    def unknown_settings(settings: Mapping[str, Any]) -> list[str]:
        """The names in ``settings`` that are not a setting of this version's policy, sorted."""
        return sorted(set(settings) - _SETTINGS)

    def to_data(self) -> dict[str, Any]:
        return {
            "max_replans": self.max_replans,
            "repeat_limit": self.repeat_limit,
            "on_unavailable": self.on_unavailable,
            "budget_nearly_spent": self.budget_nearly_spent,
        }


_SETTINGS = frozenset(f.name for f in dataclasses.fields(ThresholdPolicy))


def _budgeted(
    verdict: ConditionVerdict, condition: ConditionLike, nearly_spent: bool, held_before: Sequence[bool]
) -> ConditionVerdict:
    """The verdict with a nearly spent budget applied: a ``stop_success`` condition inside its band with ``p`` at
    or above its threshold holds and fires, where it would have escalated; with k-of-n hysteresis only once it has
    held on enough turns (until then it escalates, as it would have)."""
    if (
        not nearly_spent
        or condition.outcome is not GuardianOutcome.STOP_SUCCESS
        or not verdict.in_band
        or verdict.declared
        or verdict.p is None
        or verdict.p < verdict.threshold
    ):
        return verdict
    if not _fires(condition, held_before, True):
        return verdict
    return dataclasses.replace(verdict, held=True, fired=True, budget=True)


def _fires(condition: ConditionLike, held_before: Sequence[bool], held: bool) -> bool:
    """Whether a condition that ``held`` on this turn fires: with k-of-n hysteresis, when it held on k of its last n
    turns, this one included."""
    if not held or condition.hysteresis is None:
        return held
    k, n = condition.hysteresis
    window = [*list(held_before)[-(n - 1) :], held] if n > 1 else [held]
    return sum(window) >= k


def _floored(verdict: ConditionVerdict, condition: ConditionLike, declared: str | None) -> ConditionVerdict:
    """The verdict with the author's declaration as a floor: a declared class the condition fires on makes it
    hold and fire, even when the evaluator answered below the threshold, in the band, or not at all."""
    if declared is None or declared not in condition.fires_on:
        return verdict
    return ConditionVerdict(
        verdict.name, verdict.p, verdict.threshold, verdict.delta, True, True, False, verdict.uncertain, True
    )
