"""The guardian's decision record: everything needed to recompute the outcome without calling any model."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any, ClassVar, Literal

from stopwise._deprecated import aliases
from stopwise.errors import ConfigError
from stopwise.guardian.answers import Answer
from stopwise.guardian.conditions import Condition, GuardianOutcome
from stopwise.guardian.policy import PolicyInputs, PolicyResult, ThresholdPolicy
from stopwise.messages import Usage
from stopwise.stop.guard import StopGuardRecord

__all__ = [
    "ConditionSpec",
    "GuardianConfig",
    "GuardianDecision",
    "GuardianLabel",
    "UnresolvedConfig",
    "judge_usage",
    "replay",
]

RECORD_TYPE = "guardian"


class UnresolvedConfig(LookupError):
    """A decision read from the log names a ``GuardianConfig`` that was not read before it: the run's entries
    must be read in log order, with one ``configs`` mapping for all of them (``stopwise.records.parse_records``)."""

    def __init__(self, key: str) -> None:
        super().__init__(
            f"guardian decision names config {key!r}, which was not read before it: read the run's entries in order"
        )
        self.key = key

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickled whole: the default would call this with the message as the key.
        return (type(self), (self.key,))


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

    @property
    def config_key(self) -> str:
        """The hash of the fields this decision shares with the run's others (``GuardianConfig``)."""
        parts = (self.question_set_version, self.evaluator, self.model_version, self.conditions, _frozen(self.policy))
        try:
            return _config_key(*parts)
        except TypeError:  # a policy value that cannot be hashed: computed without the cache
            return _config_key.__wrapped__(*parts)

    def to_log_data(self, config: str) -> dict[str, Any]:
        """The decision as the log keeps it when its run's ``GuardianConfig`` ``config`` is stored apart: without
        the shared fields (the run's id among them), without the fields that hold their defaults (an outcome
        that continues, a ``reason`` equal to the outcome, policy inputs at zero, the conditions' past ``held``
        flags as strings of 0 and 1, ``held`` as the names that held), and with the evaluator's
        notes only where they explain something: every note of a decision that did not continue (or escalated,
        or was judged), and on one that continued, the notes of the conditions that held or were uncertain.
        ``to_data`` is the whole record; ``GuardianConfig.expand`` reads this form back to it, the probabilities
        bit for bit."""
        explains = self.outcome is not GuardianOutcome.CONTINUE or bool(self.escalated) or self.resolved_by is not None
        data: dict[str, Any] = {
            "type": self.TYPE,
            "step": self.step,
            "kind": self.kind,
            "state_hash": self.state_hash,
            "config": config,
            "answers": {
                k: _answer_data(a, keep_note=explains or a.uncertain or self.held.get(k, False))
                for k, a in self.answers.items()
            },
            "inputs": _inputs_data(self.inputs),
            "latency_ms": self.latency_ms,
            "held": _held_data(self.held, self.answers),
        }
        if self.outcome is not GuardianOutcome.CONTINUE:
            data["outcome"] = self.outcome.value
        if self.reason != self.outcome.value:
            data["reason"] = self.reason
        optional = (("call_id", self.call_id), ("resolved_by", self.resolved_by), ("state", self.state))
        data.update((k, v) for k, v in optional if v is not None)
        if self.escalated:
            data["escalated"] = list(self.escalated)
        if self.usage != Usage():
            data["usage"] = self.usage.to_data()
        return data

    @classmethod
    def from_data(cls, d: Mapping[str, Any], configs: Mapping[str, GuardianConfig] | None = None) -> GuardianDecision:
        """The decision from its data: the whole record (``to_data``), or the log's form (``to_log_data``), whose
        shared fields are read from ``configs``; raises ``UnresolvedConfig`` when the config it names is not there."""
        key = d.get("config")
        if key is not None:
            config = (configs or {}).get(key)
            if config is None:
                raise UnresolvedConfig(key)
            return config.decision(d)
        return cls._of(
            d,
            d["question_set_version"],
            d["evaluator"],
            d["model_version"],
            tuple(ConditionSpec.from_data(c) for c in d["conditions"]),
            _read_policy(d["policy"]),
            PolicyInputs.from_data(d["inputs"]),
        )

    @classmethod
    def _of(
        cls,
        d: Mapping[str, Any],
        question_set_version: str,
        evaluator: str,
        model_version: str,
        conditions: tuple[ConditionSpec, ...],
        policy: dict[str, Any],
        inputs: PolicyInputs,
    ) -> GuardianDecision:
        """The decision from its whole data less the fields given (read already: from the data, or its config)."""
        return cls(
            d["run_id"],
            d["step"],
            d["kind"],
            d.get("call_id"),
            d["state_hash"],
            question_set_version,
            evaluator,
            model_version,
            {k: Answer.from_data(a) for k, a in d["answers"].items()},
            conditions,
            policy,
            inputs,
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
class GuardianConfig:
    """What a run's guardian decisions share, kept once per run in the log (before the first decision that names
    it): the question set, the evaluator and its model version, the conditions with their thresholds, the policy.
    A decision in the log names it by ``key``, a hash of its content, so a change of any of them is a new config.
    Each run's log holds its own, with the run's id, which its decisions then leave out."""

    TYPE: ClassVar[str] = "guardian_config"
    key: str
    question_set_version: str
    evaluator: str
    model_version: str
    conditions: tuple[ConditionSpec, ...]
    policy: Mapping[str, Any]
    run_id: str | None = None
    """The run whose decisions name it (None in a log written before decisions left their run's id out: those
    decisions carry it)."""

    @classmethod
    def of(cls, d: GuardianDecision) -> GuardianConfig:
        return cls(
            d.config_key, d.question_set_version, d.evaluator, d.model_version, d.conditions, dict(d.policy), d.run_id
        )

    def to_data(self) -> dict[str, Any]:
        run = {} if self.run_id is None else {"run_id": self.run_id}
        return {"type": self.TYPE, "key": self.key, **run, **self._fields()}

    def _fields(self) -> dict[str, Any]:
        return {
            "question_set_version": self.question_set_version,
            "evaluator": self.evaluator,
            "model_version": self.model_version,
            "conditions": [c.to_data() for c in self.conditions],
            "policy": dict(self.policy),
        }

    @classmethod
    def from_data(cls, d: Mapping[str, Any]) -> GuardianConfig:
        return cls(
            d["key"],
            d["question_set_version"],
            d["evaluator"],
            d["model_version"],
            tuple(ConditionSpec.from_data(c) for c in d["conditions"]),
            _read_policy(d["policy"]),
            d.get("run_id"),
        )

    def expand(self, decision: Mapping[str, Any]) -> dict[str, Any]:
        """A decision's log data (``GuardianDecision.to_log_data``) as the whole record's (``to_data``)."""
        data, inputs = self._expanded(decision)
        data["inputs"] = inputs.to_data()
        return data | self._fields()

    def _expanded(self, decision: Mapping[str, Any]) -> tuple[dict[str, Any], PolicyInputs]:
        """``expand`` less the config's fields, and the inputs read (``data["inputs"]`` left as logged)."""
        data = {k: v for k, v in decision.items() if k != "config"}
        if self.run_id is not None:
            data.setdefault("run_id", self.run_id)
        data["answers"] = {k: _whole_answer(a) for k, a in data.get("answers", {}).items()}
        inputs = dict(data.get("inputs", {}))
        inputs["held_before"] = {k: _flags(v) for k, v in inputs.get("held_before", {}).items()}
        data.setdefault("outcome", GuardianOutcome.CONTINUE.value)
        data.setdefault("reason", data["outcome"])
        held = data.get("held", {})
        if isinstance(held, list):  # the names that held, of every condition answered
            data["held"] = {k: k in held for k in data["answers"]}
        read = PolicyInputs.from_data(inputs)
        if read.budget_used is None and read.budget is not None:
            # The whole record's inputs (``to_data``) keep a budget's name only with its use: read as they would be.
            read = replace(read, budget=None)
        return data, read

    def decision(self, data: Mapping[str, Any]) -> GuardianDecision:
        """The decision whose log data (naming this config) is ``data``: the same as ``GuardianDecision.from_data(
        self.expand(data))``, built from this config's typed fields (read and checked once, with the config)
        rather than from their data again for every decision: a long run's log holds one decision a step."""
        whole, inputs = self._expanded(data)
        return GuardianDecision._of(
            whole,
            self.question_set_version,
            self.evaluator,
            self.model_version,
            self.conditions,
            dict(self.policy),
            inputs,
        )


def _answer_data(answer: Answer, *, keep_note: bool) -> dict[str, Any]:
    """An answer as the log keeps it: a yes/no distribution whose ``no`` is exactly ``1 - yes`` as its ``p`` alone,
    ``uncertain`` only when set, the note only when ``keep_note`` and not empty (``_whole_answer`` reads it back
    to ``Answer.to_data``'s form, the distribution bit for bit)."""
    data = answer.to_data()
    if not data["uncertain"]:
        del data["uncertain"]
    if not (keep_note and data["note"]):
        del data["note"]
    dist = answer.distribution
    if dist.keys() == {"yes", "no"} and dist["no"] == 1.0 - dist["yes"]:
        del data["distribution"]
        data["p"] = dist["yes"]
    return data


def _whole_answer(data: Mapping[str, Any]) -> Mapping[str, Any]:
    whole = {"uncertain": False, "note": "", **data}
    if "p" in data:
        p = whole.pop("p")
        whole["distribution"] = {"yes": p, "no": 1.0 - p}
    return whole


_INPUT_DEFAULTS: dict[str, Any] = {"replans": 0, "repeats": 0, "declared_risk": None}
"""The policy inputs the log leaves out at these values (``PolicyInputs.from_data`` reads them back)."""


def _inputs_data(inputs: PolicyInputs) -> dict[str, Any]:
    """The policy inputs as the log keeps them: ``_INPUT_DEFAULTS`` left out, and each condition's past ``held``
    flags as a string of ``0`` and ``1`` (``_flags`` reads one back); a budget used, even at 0, is kept."""
    data = inputs.to_data()
    data["held_before"] = {k: "".join("1" if f else "0" for f in v) for k, v in inputs.held_before.items()}
    return {k: v for k, v in data.items() if k not in _INPUT_DEFAULTS or v != _INPUT_DEFAULTS[k]}


def _flags(value: str | list[bool]) -> list[bool]:
    return [c == "1" for c in value] if isinstance(value, str) else list(value)


def _held_data(held: Mapping[str, bool], answers: Mapping[str, Answer]) -> list[str] | dict[str, bool]:
    """``held`` as the log keeps it: the names of the conditions that held when ``held`` has a value for exactly
    the answered conditions, in their order (as every decision the guardian makes has); else as it is."""
    if list(held) == list(answers):
        return [k for k, v in held.items() if v]
    return dict(held)


def _frozen(policy: Mapping[str, Any]) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted(policy.items()))


@lru_cache(maxsize=64)
def _config_key(
    question_set_version: str,
    evaluator: str,
    model_version: str,
    conditions: tuple[ConditionSpec, ...],
    policy: tuple[tuple[str, Any], ...],
) -> str:
    # Cached: a run's decisions share a handful of configs, and the key is wanted for each decision written.
    data = [question_set_version, evaluator, model_version, [c.to_data() for c in conditions], dict(policy)]
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


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


def _read_policy(settings: Mapping[str, Any]) -> dict[str, Any]:
    """A record's policy settings as written, once ``ThresholdPolicy.from_data`` has read them: a setting of
    another type raises ``ConfigError`` naming it where the record is read, not at its replay. Settings this version
    does not know are kept (a newer writer's: ``recorded_policy`` refuses to replay them, a copy keeps them)."""
    ThresholdPolicy.from_data(settings)
    return dict(settings)


def recorded_policy(decision: GuardianDecision, changes: Mapping[str, Any] | None = None) -> ThresholdPolicy:
    """The ``ThresholdPolicy`` ``decision`` recorded, with ``changes`` over it. A setting an older record lacks
    takes ``ThresholdPolicy``'s documented default (so ``budget_nearly_spent``, which acts only on a
    ``budget_used``, changes nothing for a record older than both). A setting this version does not know (a newer
    stopwise wrote the record) raises ``ConfigError`` naming the decision and the settings: replaying without it
    could report an agreement or a flip the recorded policy would not have made, so replay that log with the
    version that wrote it."""
    unknown = ThresholdPolicy.unknown_settings(decision.policy)
    if unknown:
        raise ConfigError(
            f"guardian decision (run {decision.run_id}, step {decision.step}, {decision.kind})",
            f"its policy has settings this stopwise does not know: {unknown} (a newer stopwise wrote it); "
            "replay it with that version",
        )
    return ThresholdPolicy.from_data({**decision.policy, **(changes or {})})


def recorded_inputs(decision: GuardianDecision) -> PolicyInputs:
    """The ``PolicyInputs`` ``decision`` recorded. An input this version does not know (a newer stopwise wrote the
    record: ``PolicyInputs.newer``) raises ``ConfigError`` naming the decision and the inputs: under any policy,
    deciding without it could report an agreement or a flip the recorded inputs would not have given, so replay
    that log with the version that wrote it. Reading the record (``show``, ``report``, a copy) keeps them."""
    newer = sorted(decision.inputs.newer)
    if newer:
        raise ConfigError(
            f"guardian decision (run {decision.run_id}, step {decision.step}, {decision.kind})",
            f"its policy inputs have fields this stopwise does not know: {newer} (a newer stopwise wrote it); "
            "replay it with that version",
        )
    return decision.inputs


def replay(
    decision: GuardianDecision,
    policy: ThresholdPolicy | None = None,
    conditions: tuple[ConditionSpec, ...] | None = None,
) -> PolicyResult:
    """Recompute a decision's outcome from its record (or under another policy / other thresholds).

    Without ``policy`` the decision's recorded policy is used (see ``recorded_policy``: a record a newer stopwise
    wrote with settings this version does not know raises ``ConfigError``). A record whose policy inputs hold a
    field this version does not know raises ``ConfigError`` with any policy (``recorded_inputs``)."""
    inputs = recorded_inputs(decision)
    p = policy if policy is not None else recorded_policy(decision)
    return p.decide(decision.answers, conditions if conditions is not None else decision.conditions, inputs)


__getattr__ = aliases(__name__, {"Decision": ("GuardianDecision", GuardianDecision)})
