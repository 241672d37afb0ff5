"""Correlated errors: how often the guardian is wrong on the same states as the actor it judges (seed 001).

Independence is the guardian's reason to exist: a guardian that fails where the actor fails adds less than its
own error rate suggests. Given labelled states, the actor's own verdict on each (did it claim the condition
held?) and the guardian's probability, this counts the errors of both and their overlap, per condition and per
source:

- the actor is wrong where its verdict differs from the label; the guardian where its call (``p >= t*``, the
  condition's threshold) does;
- ``P(guardian wrong | actor wrong)`` beside ``P(guardian wrong)``: their ratio, the *lift*, is 1 for a guardian
  whose errors are independent of the actor's; above 1 they fail together; ``1 / P(actor wrong)`` is the most
  it can be (a guardian wrong exactly where the actor is), the trivial baseline a copy of the actor scores.

What the actor claimed is read from the record by ``actor_verdict`` unless the caller gives another: a run that
ended with a final answer claimed its goal reached (``goal_reached``: the actor finished; that is its verdict), a
run that went on calling tools claimed progress (``stagnation``: False). Conditions the actor has no verdict on
(``risk``, ``integrity``: it never says) are left out. States whose guardian answer was uncertain are counted
apart.

No numpy: this runs with the core dependencies.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

from stopwise.evals._table import table
from stopwise.evals.run import Prediction
from stopwise.evals.traces import TraceRecord

__all__ = ["ActorVerdict", "ErrorOverlap", "actor_verdict", "error_overlap", "render_text"]

ActorVerdict = Callable[[TraceRecord], bool | None]
"""Whether the actor claimed the record's condition held in that state; None: it said nothing about it."""


def actor_verdict(record: TraceRecord) -> bool | None:
    """The actor's own verdict, read from the state: for ``goal_reached``, whether it gave a final answer; for
    ``stagnation``, False (it went on: it judged its last steps useful). None for any other condition."""
    projection = record.projection
    if projection is None:
        return None
    if record.condition == "goal_reached":
        return projection.final is not None
    if record.condition == "stagnation":
        return False
    return None


@dataclass(frozen=True, slots=True)
class ErrorOverlap:
    """The errors of the actor and the guardian on one condition (and one source, or ``all``)."""

    condition: str
    source: str
    n: int
    """States with an actor verdict and an answered guardian probability."""
    uncertain: int
    """States left out because the guardian's answer was uncertain."""
    actor_wrong: int
    guardian_wrong: int
    both_wrong: int

    @property
    def p_actor_wrong(self) -> float | None:
        return self.actor_wrong / self.n if self.n else None

    @property
    def p_guardian_wrong(self) -> float | None:
        return self.guardian_wrong / self.n if self.n else None

    @property
    def p_guardian_wrong_given_actor_wrong(self) -> float | None:
        return self.both_wrong / self.actor_wrong if self.actor_wrong else None

    @property
    def p_guardian_wrong_given_actor_right(self) -> float | None:
        right = self.n - self.actor_wrong
        return (self.guardian_wrong - self.both_wrong) / right if right else None

    @property
    def lift(self) -> float | None:
        """``P(guardian wrong | actor wrong) / P(guardian wrong)``: 1 when independent, above 1 when they fail
        together."""
        given, overall = self.p_guardian_wrong_given_actor_wrong, self.p_guardian_wrong
        return given / overall if given is not None and overall else None

    @property
    def max_lift(self) -> float | None:
        """The lift of a guardian wrong exactly where the actor is (a copy of its verdict): ``1 / P(actor
        wrong)``."""
        p = self.p_actor_wrong
        return 1 / p if p else None

    def to_data(self) -> dict[str, Any]:
        return {
            "condition": self.condition,
            "source": self.source,
            "n": self.n,
            "uncertain": self.uncertain,
            "actor_wrong": self.actor_wrong,
            "guardian_wrong": self.guardian_wrong,
            "both_wrong": self.both_wrong,
            "p_actor_wrong": self.p_actor_wrong,
            "p_guardian_wrong": self.p_guardian_wrong,
            "p_guardian_wrong_given_actor_wrong": self.p_guardian_wrong_given_actor_wrong,
            "p_guardian_wrong_given_actor_right": self.p_guardian_wrong_given_actor_right,
            "lift": self.lift,
            "max_lift": self.max_lift,
        }


def error_overlap(predictions: Sequence[Prediction], verdict: ActorVerdict = actor_verdict) -> list[ErrorOverlap]:
    """Per condition, across all sources first, then per source (sorted): the actor's errors, the guardian's,
    and both. A condition with no actor verdict on any state is left out."""
    groups: dict[tuple[str, str], list[tuple[Prediction, bool]]] = {}
    for item in predictions:
        claimed = verdict(item.record)
        if claimed is None:
            continue
        for source in ("all", item.record.source):
            groups.setdefault((item.condition.name, source), []).append((item, claimed))
    out = []
    for (condition, source), group in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1] != "all", kv[0][1])):
        n = uncertain = actor_wrong = guardian_wrong = both = 0
        for item, claimed in group:
            if item.p is None:
                uncertain += 1
                continue
            n += 1
            a = claimed != item.holds
            g = (item.p >= item.condition.threshold) != item.holds
            actor_wrong += a
            guardian_wrong += g
            both += a and g
        out.append(ErrorOverlap(condition, source, n, uncertain, actor_wrong, guardian_wrong, both))
    return out


def render_text(rows: Sequence[ErrorOverlap], out: TextIO) -> None:
    """The overlap as a table; ``lift`` 1.00 is independence, ``max lift`` a copy of the actor."""
    out.write("correlated errors: the guardian's call is p >= t*; the actor's verdict is read from the state\n")
    headers = ["condition", "source", "n", "A wrong", "G wrong", "both", "P(A wrong)", "P(G wrong)"]
    headers += ["P(G wrong|A wrong)", "P(G wrong|A right)", "lift", "max lift", "uncertain"]
    rows_text = [
        [
            r.condition,
            r.source,
            str(r.n),
            str(r.actor_wrong),
            str(r.guardian_wrong),
            str(r.both_wrong),
            _num(r.p_actor_wrong),
            _num(r.p_guardian_wrong),
            _num(r.p_guardian_wrong_given_actor_wrong),
            _num(r.p_guardian_wrong_given_actor_right),
            _num(r.lift, 2),
            _num(r.max_lift, 2),
            str(r.uncertain),
        ]
        for r in rows
    ]
    table(headers, rows_text, out)


def _num(v: float | None, digits: int = 3) -> str:
    return "n/a" if v is None else f"{v:.{digits}f}"
