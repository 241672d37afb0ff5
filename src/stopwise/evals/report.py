"""The eval report: per condition metrics of one evaluator run, as data, as text, and the regression gate.

The JSON form (``EvalReport.to_data``) is what ``stopwise eval --json`` writes and what ``--baseline`` reads::

    {"format": "stopwise-eval", "format_version": 1, "evaluator": "rules", "model_version": "...",
     "question_set_version": "...", "split": "test", "traces": [...], "calibration": null,
     "records": {"evaluated": 753, "skipped": 0, "calls": 699},
     "conditions": {"integrity": {"n": ..., "ece": ..., "auroc": ..., "bins": [...], "threshold": {...}}, ...},
     "before_calibration": null}

Needs numpy (through ``stopwise.evals.metrics``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

from stopwise.evals._table import table as _table
from stopwise.evals.metrics import ConditionMetrics, condition_metrics
from stopwise.evals.run import Prediction, Predictions, answered, by_condition
from stopwise.guardian.conditions import QuestionSet

__all__ = ["EvalReport", "Regression", "build_report", "compare", "render_text"]

FORMAT = "stopwise-eval"
FORMAT_VERSION = 1
GATED_METRICS = ("ece", "auroc")
"""What the regression gate compares: calibration (lower is better) and discrimination (higher is better)."""


@dataclass(frozen=True, slots=True)
class EvalReport:
    """One evaluator run over labelled traces, summarised per condition."""

    evaluator: str
    model_version: str
    question_set_version: str
    split: str
    traces: tuple[str, ...]
    conditions: Mapping[str, ConditionMetrics]
    """Per condition, in the question set's order."""
    calibration: str | None = None
    """The version of the calibration the probabilities went through (applied or fitted), if any."""
    before_calibration: Mapping[str, ConditionMetrics] | None = None
    """With a calibration fitted in this run: the same records' metrics before it."""
    evaluated: int = 0
    skipped: Mapping[str, int] = field(default_factory=dict)
    """Why records were not asked, with how many."""
    calls: int = 0

    def to_data(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "evaluator": self.evaluator,
            "model_version": self.model_version,
            "question_set_version": self.question_set_version,
            "split": self.split,
            "traces": list(self.traces),
            "calibration": self.calibration,
            "records": {"evaluated": self.evaluated, "skipped": dict(self.skipped), "calls": self.calls},
            "conditions": {name: m.to_data() for name, m in self.conditions.items()},
            "before_calibration": None
            if self.before_calibration is None
            else {name: m.to_data() for name, m in self.before_calibration.items()},
        }


def _metrics(
    items: Sequence[Prediction], skipped: Counter[str], questions: QuestionSet, transform: Callable[..., float] | None
) -> dict[str, ConditionMetrics]:
    groups = by_condition(items)
    out: dict[str, ConditionMetrics] = {}
    for condition in questions.conditions:
        group = groups.get(condition.name)
        if not group and not skipped.get(condition.name):
            continue
        ps, ys = answered(group or [])
        if transform is not None:
            ps = [transform(condition.name, p) for p in ps]
        out[condition.name] = condition_metrics(
            condition.name,
            ps,
            ys,
            cost_false_stop=condition.cost_false_stop,
            cost_false_continue=condition.cost_false_continue,
            delta=condition.delta,
            uncertain=len(group or []) - len(ps),
            skipped=skipped.get(condition.name, 0),
        )
    return out


def build_report(
    predictions: Predictions,
    questions: QuestionSet,
    *,
    split: str,
    traces: Sequence[str],
    calibration: str | None = None,
    transform: Callable[[str, float], float] | None = None,
    before: bool = False,
) -> EvalReport:
    """The report of ``predictions``. ``transform(condition, p)`` maps each probability first (a calibration
    fitted in this run); with ``before=True`` the untransformed metrics are kept in ``before_calibration``."""
    per_condition_skips: Counter[str] = Counter(s.record.condition for s in predictions.skipped)
    reasons: Counter[str] = Counter(s.reason for s in predictions.skipped)
    return EvalReport(
        evaluator=predictions.evaluator,
        model_version=predictions.model_version,
        question_set_version=questions.version,
        split=split,
        traces=tuple(traces),
        conditions=_metrics(predictions.items, per_condition_skips, questions, transform),
        calibration=calibration,
        before_calibration=_metrics(predictions.items, per_condition_skips, questions, None) if before else None,
        evaluated=len(predictions.items),
        skipped=dict(reasons),
        calls=predictions.calls,
    )


# --------------------------------------------------------------------------------------------------------------
# The regression gate


@dataclass(frozen=True, slots=True)
class Regression:
    """A condition whose metric is worse than the baseline's beyond the tolerance (or that went missing)."""

    condition: str
    metric: str
    baseline: float | None
    current: float | None
    tolerance: float

    def __str__(self) -> str:
        if self.current is None:
            return f"{self.condition}: {self.metric} was {_num(self.baseline)} in the baseline, not measured now"
        direction = "up" if self.metric == "ece" else "down"
        return (
            f"{self.condition}: {self.metric} {_num(self.current)} vs baseline {_num(self.baseline)} "
            f"({direction} by {abs((self.current or 0) - (self.baseline or 0)):.4f}, tolerance {self.tolerance:g})"
        )


def compare(
    current: Mapping[str, Any], baseline: Mapping[str, Any], tolerance: float = 0.01, *, only: Sequence[str] = ()
) -> tuple[list[Regression], list[str]]:
    """Compare two reports' data (``EvalReport.to_data``, or a baseline file): the regressions, and notes.

    A regression is a condition whose ECE rose, or whose AUROC fell, by more than ``tolerance``; or a baseline
    condition with a metric that this run did not measure (left out by ``only``, the conditions asked for, is
    not a regression). A metric the baseline lacks (an AUROC on one class) is not compared; the notes say so, and
    name conditions new since the baseline and differing evaluators, model versions or splits.
    """
    if tolerance < 0:
        raise ValueError(f"tolerance must be >= 0, got {tolerance!r}")
    regressions: list[Regression] = []
    notes: list[str] = []
    for key in ("evaluator", "model_version", "split", "question_set_version"):
        if baseline.get(key) != current.get(key):
            notes.append(f"{key} differs: baseline {baseline.get(key)!r}, now {current.get(key)!r}")
    now = current.get("conditions", {})
    base = baseline.get("conditions", {})
    for name, b in base.items():
        if only and name not in only:
            continue
        c = now.get(name)
        for metric in GATED_METRICS:
            bv = b.get(metric)
            if bv is None:
                if c is not None and c.get(metric) is not None:
                    notes.append(f"{name}: no {metric} in the baseline to compare with")
                continue
            cv = None if c is None else c.get(metric)
            if cv is None:
                regressions.append(Regression(name, metric, bv, None, tolerance))
            elif (metric == "ece" and cv > bv + tolerance) or (metric == "auroc" and cv < bv - tolerance):
                regressions.append(Regression(name, metric, bv, cv, tolerance))
    for name in now:
        if name not in base:
            notes.append(f"{name}: not in the baseline")
    return regressions, notes


# --------------------------------------------------------------------------------------------------------------
# Text


def _num(v: float | None, digits: int = 3) -> str:
    return "-" if v is None else f"{v:.{digits}f}"


def render_text(report: EvalReport, out: TextIO) -> None:
    """The report as the command prints it: a table of metrics, then each condition's reliability curve."""
    head = f"{report.evaluator} ({report.model_version}) on {', '.join(report.traces)}, split {report.split}"
    if report.calibration:
        head += f", calibration {report.calibration}"
    print(head, file=out)
    skipped = sum(report.skipped.values())
    print(f"{report.evaluated} records evaluated ({report.calls} evaluator calls), {skipped} skipped", file=out)
    for reason, count in sorted(report.skipped.items()):
        print(f"  skipped {count}: {reason}", file=out)
    print(file=out)
    before = report.before_calibration
    headers = [
        "condition",
        "n",
        "pos",
        "unc",
        "ECE",
        "floor",
        "MCE",
        "Brier",
        "AUROC",
        "t*",
        "cost@t*",
        "t rec",
        "cost@rec",
    ]
    if before is not None:
        headers[4:4] = ["ECE before"]
    rows = []
    for name, m in report.conditions.items():
        rec = m.recommended
        row = [
            name,
            str(m.n),
            str(m.positives),
            str(m.uncertain),
            _num(m.ece),
            _num(m.ece_floor),
            _num(m.mce),
            _num(m.brier),
            _num(m.auroc),
            f"{m.t_star:.3f}",
            _num(m.cost_at_t_star),
            _num(None if rec is None else rec.threshold),
            _num(None if rec is None else rec.cost),
        ]
        if before is not None:
            row[4:4] = [_num(before[name].ece if name in before else None)]
        rows.append(row)
    _table(headers, rows, out)
    print(file=out)
    print("reliability (10 bins: count, mean p -> observed frequency):", file=out)
    for name, m in report.conditions.items():
        cells = [
            f"{b.lo:.1f}-{b.hi:.1f} {b.count}: {b.mean_p:.2f}->{b.observed:.2f}"
            for b in m.bins
            if b.count and b.mean_p is not None and b.observed is not None
        ]
        print(f"  {name}: " + ("; ".join(cells) if cells else "no answered records"), file=out)
