"""Near misses in a trace set: how many there are, and a sampling weight that over-samples them (seed 001).

A near miss is a state that looks like the condition but is not it (work done with no answer yet, one repeat
after progress, a single error): where a wrong answer flips the outcome, so where a trace set needs the most
examples. The dev set's builders tag them in the record's ``kind`` (``"claim_without_evidence (near miss)"``); a
record from elsewhere says so with ``"near_miss": true``.

- ``is_near_miss``: whether a record is one;
- ``near_miss_shares``: per condition, how many records are near misses, of all and of the negatives;
- ``oversample_weights``: per record, the weight that makes near misses a given share of each condition's
  weighted records (never below their share as they are: a set that already over-samples is left as it is),
  for a sampler that draws a training or review set.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from stopwise.evals.traces import TraceRecord
from stopwise.guardian.conditions import DEFAULT_CONDITIONS, QuestionSet

__all__ = ["NearMissShare", "is_near_miss", "near_miss_shares", "oversample_weights"]

TAG = "near miss"


def is_near_miss(record: TraceRecord) -> bool:
    """Whether ``record`` is tagged a near miss: ``near miss`` in its ``kind``, or ``near_miss: true``."""
    return TAG in record.kind or record.extra.get("near_miss") is True


@dataclass(frozen=True, slots=True)
class NearMissShare:
    """One condition's near misses."""

    condition: str
    records: int
    negatives: int
    """Records whose condition does not hold."""
    near_misses: int

    @property
    def share(self) -> float | None:
        return self.near_misses / self.records if self.records else None

    @property
    def share_of_negatives(self) -> float | None:
        return self.near_misses / self.negatives if self.negatives else None

    def to_data(self) -> dict[str, Any]:
        return {
            "condition": self.condition,
            "records": self.records,
            "negatives": self.negatives,
            "near_misses": self.near_misses,
            "share": self.share,
            "share_of_negatives": self.share_of_negatives,
        }


def near_miss_shares(
    records: Iterable[TraceRecord], questions: QuestionSet = DEFAULT_CONDITIONS
) -> list[NearMissShare]:
    """Per condition of ``questions`` that has records (in the question set's order): the near misses among them.
    A record whose label its condition does not have is left out."""
    counts: dict[str, list[int]] = {}
    for r in records:
        condition = questions.by_name.get(r.condition)
        if condition is None or r.label_problem(condition) is not None:
            continue
        c = counts.setdefault(r.condition, [0, 0, 0])
        c[0] += 1
        c[1] += not r.holds(condition)
        c[2] += is_near_miss(r)
    return [NearMissShare(c.name, *counts[c.name]) for c in questions.conditions if c.name in counts]


def oversample_weights(records: Sequence[TraceRecord], share: float) -> list[float]:
    """A weight per record (in order): within each condition, near misses weigh enough to be ``share`` of the
    weighted total, the others 1. A condition whose near misses are already at least ``share`` of it, or that has
    none (or nothing else), keeps weight 1 throughout. Raises ``ValueError`` for ``share`` outside (0, 1)."""
    if not 0 < share < 1:
        raise ValueError(f"share must be in (0, 1), got {share!r}")
    near: dict[str, int] = {}
    other: dict[str, int] = {}
    for r in records:
        bucket = near if is_near_miss(r) else other
        bucket[r.condition] = bucket.get(r.condition, 0) + 1
    weight: dict[str, float] = {}
    for condition, k in near.items():
        rest = other.get(condition, 0)
        if rest and k / (k + rest) < share:
            # k * w / (k * w + rest) = share
            weight[condition] = share * rest / ((1 - share) * k)
    return [weight.get(r.condition, 1.0) if is_near_miss(r) else 1.0 for r in records]
