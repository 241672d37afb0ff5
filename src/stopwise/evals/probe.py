"""Counterfactual probing: vary one thing in a state and watch the evaluator's probability move (seed 001).

The guardian returns a probability, never a reason. What explains a decision is how the probability answers to
the evidence: drop the confirmation from the tool results, swap the final answer for another run's, add a failure
after the last success, and see whether the answer moves, and which way. An evaluator whose probability does not
move when the evidence a condition depends on is taken away ignores that evidence, however well it scores on
average.

- ``Variation``: the four changes, each a pure function of a ``Projection`` (``vary``) that returns None where it
  does not apply (no confirmation to drop, no final answer to swap, no success to follow);
- ``probe``: every record's state and its variations asked of an evaluator (through ``predict``, so in one call
  per distinct state, with its timeouts and uncertain answers); the ``Shift`` of each (before, after) and, per
  condition and variation, a ``ProbeRow``: how many states it applied to, how many moved by at least
  ``min_shift``, the mean change, and the share that moved the way the variation should move it;
- ``render_text``: the table ``stopwise eval --probe`` and ``evals/probe_real.py`` print.

No numpy: this runs with the core dependencies.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, TextIO

from stopwise.evals._table import table
from stopwise.evals.run import Predictions, predict
from stopwise.evals.traces import TraceRecord
from stopwise.guardian.answers import Evaluator
from stopwise.guardian.conditions import DEFAULT_CONDITIONS, QuestionSet
from stopwise.guardian.projection import ProjectedCall, ProjectedStep, Projection

__all__ = ["EXPECTED", "ProbeReport", "ProbeRow", "Shift", "Variation", "probe", "render_text", "vary"]


class Variation(StrEnum):
    """One change to a state."""

    DROP_CONFIRMATION = "drop_confirmation"
    """Every sentence of a successful tool result that confirms something (``booked``, ``sent``, ``success``,
    ``created``...) is removed."""
    ERROR_AFTER_SUCCESS = "error_after_success"
    """A step is added after the last one: the last successful call made again, failing."""
    SWAP_FINAL = "swap_final"
    """The final answer is replaced by another record's (one with the other label when there is one)."""
    DROP_FINAL = "drop_final"
    """The final answer is removed: the run has not answered yet."""


EXPECTED: Mapping[tuple[Variation, str], int] = {
    (Variation.DROP_CONFIRMATION, "goal_reached"): -1,
    (Variation.ERROR_AFTER_SUCCESS, "goal_reached"): -1,
    (Variation.DROP_FINAL, "goal_reached"): -1,
}
"""The way a variation should move a condition's probability (-1 down, +1 up); a pair not listed has no
expected direction (the probe reports how far it moved, not whether that was right). A swapped final answer
should move ``goal_reached`` toward the donor's label: its expectation is set per record (``Shift.expected``)."""

_CONFIRMS = re.compile(
    r"\b(success(?:ful(?:ly)?)?|succeeded|confirm(?:ed|ation)?|done|complete[d]?|created|sent|saved|booked"
    r"|submitted|approved|passed|updated|deleted|merged|paid|scheduled|published|uploaded|ok)\b",
    re.I,
)
_SENTENCE = re.compile(r"[^.!?\n]*(?:[.!?]+|\n|$)")
FAILURE = "Error: the request failed; nothing was changed."
"""The result of the failing call ``ERROR_AFTER_SUCCESS`` adds."""


def vary(projection: Projection, variation: Variation, donor_final: str | None = None) -> Projection | None:
    """``projection`` with ``variation`` applied, or None where it does not apply. ``donor_final`` is the final
    answer ``SWAP_FINAL`` puts in (it applies only when both answers exist and differ)."""
    p = projection
    if variation is Variation.DROP_FINAL:
        return None if p.final is None else dataclasses.replace(p, final=None)
    if variation is Variation.SWAP_FINAL:
        if p.final is None or donor_final is None or donor_final == p.final:
            return None
        return dataclasses.replace(p, final=donor_final)
    if variation is Variation.ERROR_AFTER_SUCCESS:
        last = next((c for s in reversed(p.steps) for c in reversed(s.calls) if not c.error and not c.denied), None)
        if last is None:
            return None
        failing = ProjectedCall(last.tool, last.args, FAILURE, True, last.risk)
        number = p.steps[-1].step + 1 if p.steps else 1
        return dataclasses.replace(p, steps=(*p.steps, ProjectedStep(number, "", (failing,))))
    steps = tuple(
        dataclasses.replace(s, calls=tuple(_unconfirmed(c) for c in s.calls)) if s.calls else s for s in p.steps
    )
    return None if steps == p.steps else dataclasses.replace(p, steps=steps)


def _unconfirmed(call: ProjectedCall) -> ProjectedCall:
    if call.error or call.denied or not _CONFIRMS.search(call.result):
        return call
    kept = "".join(s for s in _SENTENCE.findall(call.result) if not _CONFIRMS.search(s)).strip()
    return dataclasses.replace(call, result=kept or "(no content)")


@dataclass(frozen=True, slots=True)
class Shift:
    """One state and one variation of it: the probability the condition holds, before and after."""

    record: str
    """The record's id."""
    source: str
    condition: str
    variation: Variation
    before: float | None
    """None: the evaluator's answer was uncertain."""
    after: float | None
    expected: int = 0
    """The way the variation should move the probability (-1, +1; 0: no expectation)."""

    @property
    def delta(self) -> float | None:
        return None if self.before is None or self.after is None else self.after - self.before


@dataclass(frozen=True, slots=True)
class ProbeRow:
    """One condition under one variation, across the states it applied to."""

    condition: str
    variation: Variation
    applied: int
    """States the variation applied to."""
    answered: int
    """Of those, states with a probability before and after (neither uncertain)."""
    moved: int
    """Answered states whose probability moved by at least ``min_shift``, either way."""
    mean_delta: float | None
    mean_abs_delta: float | None
    expected: int
    """States with an expected direction among the answered ones."""
    as_expected: int
    """Of those, the states that moved by at least ``min_shift`` the expected way."""

    @property
    def insensitive(self) -> bool:
        """No answered state moved: the evaluator does not read what this variation changes."""
        return self.answered > 0 and self.moved == 0

    def to_data(self) -> dict[str, Any]:
        return {
            "condition": self.condition,
            "variation": self.variation.value,
            "applied": self.applied,
            "answered": self.answered,
            "moved": self.moved,
            "mean_delta": self.mean_delta,
            "mean_abs_delta": self.mean_abs_delta,
            "expected": self.expected,
            "as_expected": self.as_expected,
            "insensitive": self.insensitive,
        }


@dataclass(frozen=True, slots=True)
class ProbeReport:
    """A probe of one evaluator: every shift, and the table per condition and variation."""

    evaluator: str
    model_version: str
    min_shift: float
    records: int
    """States probed (records with a structured projection whose condition the question set has)."""
    shifts: tuple[Shift, ...]
    rows: tuple[ProbeRow, ...]

    def to_data(self) -> dict[str, Any]:
        return {
            "evaluator": self.evaluator,
            "model_version": self.model_version,
            "min_shift": self.min_shift,
            "records": self.records,
            "rows": [r.to_data() for r in self.rows],
        }


async def probe(
    evaluator: Evaluator,
    records: Iterable[TraceRecord],
    questions: QuestionSet = DEFAULT_CONDITIONS,
    *,
    variations: Sequence[Variation] = tuple(Variation),
    min_shift: float = 0.05,
    concurrency: int = 8,
    call_timeout: float | None = None,
) -> ProbeReport:
    """Ask ``evaluator`` about each record's state and about each variation of it; report how the probability
    that the record's condition holds moved. Text-only records (no structure to vary) and records whose condition
    is not in ``questions`` are left out. Raises ``ValueError`` for a ``min_shift`` outside (0, 1]."""
    if not 0 < min_shift <= 1:
        raise ValueError(f"min_shift must be in (0, 1], got {min_shift!r}")
    base = [r for r in records if not r.text_only and r.condition in questions.by_name]
    varied: list[TraceRecord] = []
    made: list[tuple[TraceRecord, Variation, int]] = []
    donors = _donors(base) if Variation.SWAP_FINAL in variations else {}
    for r in base:
        projection = r.projection
        assert projection is not None
        for variation in variations:
            donor = donors.get(r.id)
            changed = vary(projection, variation, donor.projection.final if donor and donor.projection else None)
            if changed is None:
                continue
            expected = EXPECTED.get((variation, r.condition), 0)
            if variation is Variation.SWAP_FINAL and donor is not None and r.condition == "goal_reached":
                # Toward the donor's label, when it differs: its answer is for a run that did (or did not) succeed.
                condition = questions.by_name[r.condition]
                if donor.holds(condition) != r.holds(condition):
                    expected = 1 if donor.holds(condition) else -1
            copy = TraceRecord(
                f"{r.id}~{variation.value}", r.condition, r.label, r.split, r.source, changed, kind=r.kind
            )
            varied.append(copy)
            made.append((r, variation, expected))
    answers = await predict(
        evaluator, [*base, *varied], questions, text_only=False, concurrency=concurrency, call_timeout=call_timeout
    )
    p_of = _probabilities(answers)
    shifts = tuple(
        Shift(r.id, r.source, r.condition, v, p_of.get(r.id), p_of.get(f"{r.id}~{v.value}"), expected)
        for r, v, expected in made
    )
    return ProbeReport(
        answers.evaluator, answers.model_version, min_shift, len(base), shifts, _rows(shifts, variations, min_shift)
    )


def _donors(records: Sequence[TraceRecord]) -> dict[str, TraceRecord]:
    """For each record with a final answer, the next record of its condition with a different final answer,
    preferring one with the other label: whose answer ``SWAP_FINAL`` puts in. Deterministic (file order)."""
    by_condition: dict[str, list[tuple[TraceRecord, str]]] = {}
    for r in records:
        p = r.projection
        if p is not None and p.final is not None:
            by_condition.setdefault(r.condition, []).append((r, p.final))
    out: dict[str, TraceRecord] = {}
    for group in by_condition.values():
        n = len(group)
        for i, (r, final) in enumerate(group):
            differ = [o for o, other in (group[(i + k) % n] for k in range(1, n)) if other != final]
            pick = next((o for o in differ if o.label != r.label), differ[0] if differ else None)
            if pick is not None:
                out[r.id] = pick
    return out


def _probabilities(answers: Predictions) -> dict[str, float | None]:
    return {item.record.id: item.p for item in answers.items}


def _rows(shifts: Sequence[Shift], variations: Sequence[Variation], min_shift: float) -> tuple[ProbeRow, ...]:
    groups: dict[tuple[str, Variation], list[Shift]] = {}
    for s in shifts:
        groups.setdefault((s.condition, s.variation), []).append(s)
    rows = []
    order = {v: i for i, v in enumerate(variations)}
    for (condition, variation), group in sorted(groups.items(), key=lambda kv: (kv[0][0], order[kv[0][1]])):
        deltas = [s.delta for s in group if s.delta is not None]
        with_expectation = [s for s in group if s.delta is not None and s.expected]
        rows.append(
            ProbeRow(
                condition,
                variation,
                applied=len(group),
                answered=len(deltas),
                moved=sum(1 for d in deltas if abs(d) >= min_shift),
                mean_delta=sum(deltas) / len(deltas) if deltas else None,
                mean_abs_delta=sum(abs(d) for d in deltas) / len(deltas) if deltas else None,
                expected=len(with_expectation),
                as_expected=sum(1 for s in with_expectation if (s.delta or 0) * s.expected >= min_shift),
            )
        )
    return tuple(rows)


def render_text(report: ProbeReport, out: TextIO) -> None:
    """The probe as a table: per condition and variation, how far and which way the probability moved."""
    out.write(
        f"counterfactual probe: {report.evaluator} {report.model_version}, {report.records} states, "
        f"a move is |dp| >= {report.min_shift:g}\n"
    )
    headers = ["condition", "variation", "applied", "answered", "moved", "mean dp", "mean |dp|", "as expected", ""]
    rows = [
        [
            r.condition,
            r.variation.value,
            str(r.applied),
            str(r.answered),
            str(r.moved),
            _num(r.mean_delta, signed=True),
            _num(r.mean_abs_delta),
            f"{r.as_expected}/{r.expected}" if r.expected else "-",
            "insensitive" if r.insensitive else "",
        ]
        for r in report.rows
    ]
    table(headers, rows, out)


def _num(v: float | None, *, signed: bool = False) -> str:
    if v is None:
        return "n/a"
    return f"{v:+.3f}" if signed else f"{v:.3f}"
