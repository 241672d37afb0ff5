"""What an evaluator returns: per condition, a probability that it holds (or a distribution), or uncertainty."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from stopwise.guardian.conditions import Condition, QuestionSet
from stopwise.guardian.projection import Projection
from stopwise.messages import Usage

__all__ = ["Answer", "Answers", "Evaluator", "uncertain"]


@dataclass(frozen=True, slots=True)
class Answer:
    """One condition's answer.

    ``distribution`` maps answer labels (``yes``/``no``, a Choice's options, a Score's levels ``"0"``..) to
    probabilities. ``uncertain`` is set when the evaluator could not answer (timeout, error, malformed output):
    the policy then applies the guardian's ``on_unavailable``; a malformed answer is never trusted.
    """

    distribution: Mapping[str, float] = field(default_factory=dict)
    uncertain: bool = False
    note: str = ""
    """Why it is uncertain, or what the evaluator noticed."""
    defer: bool = False
    """The evaluator cannot tell here and answers a base rate: a guardian with a judge asks the judge instead;
    without one the policy reads the probability as it is (a base rate does not stop a run nor escalate it)."""

    def p(self, labels: tuple[str, ...]) -> float:
        """The probability that the answer is one of ``labels`` (the condition holds)."""
        return min(1.0, max(0.0, sum(self.distribution.get(label, 0.0) for label in labels)))

    def to_data(self) -> dict[str, Any]:
        data = {"distribution": dict(self.distribution), "uncertain": self.uncertain, "note": self.note}
        return data | {"defer": True} if self.defer else data

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> Answer:
        return cls(
            dict(data.get("distribution", {})),
            bool(data.get("uncertain", False)),
            data.get("note", ""),
            bool(data.get("defer", False)),
        )


def uncertain(note: str) -> Answer:
    return Answer({}, True, note)


def yes(p: float) -> Answer:
    """A yes/no answer with probability ``p`` of yes."""
    return Answer({"yes": p, "no": 1.0 - p})


@dataclass(frozen=True, slots=True)
class Answers:
    """One evaluator call's answers, with who gave them."""

    evaluator: str
    model_version: str
    answers: Mapping[str, Answer]
    latency_ms: float = 0.0
    usage: Usage = field(default_factory=Usage)
    """The model usage this call spent (an LLM judge's requests and tokens); zero for an evaluator without a
    model. The run's token budgets count it and ``RunResult.judge_usage`` reports it."""

    def checked(self, conditions: tuple[Condition, ...]) -> Answers:
        """Every asked condition present and well-formed; anything else becomes uncertain, with a note.

        Well-formed: an ``Answer`` whose distribution maps only the question's labels to real numbers in [0, 1]
        (``True``, ``"0.7"``, NaN and infinities are not probabilities) summing to 1; its ``note`` is kept as text
        and its flags as booleans, so what an evaluator returns can always be recorded. Answers to conditions that
        were not asked are dropped."""
        fixed: dict[str, Answer] = {}
        for c in conditions:
            a = self.answers.get(c.name)
            if a is None:
                fixed[c.name] = uncertain(f"the evaluator gave no answer for {c.name}")
            elif not isinstance(a, Answer):
                fixed[c.name] = uncertain(f"malformed answer for {c.name}: {type(a).__name__}, not an Answer")
            else:
                fixed[c.name] = _checked(c, a)
        return Answers(self.evaluator, self.model_version, fixed, self.latency_ms, self.usage)


_NOTE_CHARS = 2000
"""The longest note kept from an evaluator: every decision records its notes."""


def _checked(c: Condition, a: Answer) -> Answer:
    note = a.note if isinstance(a.note, str) else repr(a.note)
    if len(note) > _NOTE_CHARS:
        note = note[:_NOTE_CHARS] + f"... [{len(note) - _NOTE_CHARS} more characters]"
    if a.uncertain:
        return a if note is a.note and a.uncertain is True else uncertain(note)
    dist = a.distribution
    if not isinstance(dist, Mapping):
        return uncertain(f"malformed answer for {c.name}: {dist!r}")
    labels = set(c.question.labels)
    values = list(dist.values())
    if (
        not values
        or any(k not in labels for k in dist)
        or any(isinstance(v, bool) or not isinstance(v, int | float) or not 0 <= v <= 1 for v in values)
    ):
        # NaN fails 0 <= v <= 1 too.
        return uncertain(f"malformed answer for {c.name}: {dict(dist)}")
    if abs(sum(values) - 1.0) > 0.02 and len(values) > 1:
        return uncertain(f"probabilities for {c.name} sum to {sum(values):.3f}, not 1")
    if note is a.note and type(a.defer) is bool and type(dist) is dict:
        return a
    return Answer({k: float(v) for k, v in dist.items()}, False, note, bool(a.defer))


@runtime_checkable
class Evaluator(Protocol):
    """Answers a question set about a projection. Must not raise for a model's failure: return uncertain answers
    (the guardian also treats a raise or a timeout as uncertain)."""

    name: str

    async def evaluate(self, projection: Projection, questions: QuestionSet) -> Answers: ...
