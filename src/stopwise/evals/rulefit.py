"""Refitting the ``RuleEvaluator``'s coefficients file on labelled traces (scikit-learn: the ``eval`` extra).

    python -m stopwise.evals.rulefit evals/data/devset.jsonl --out evals/calibration/rule_coefficients.json

The rule evaluator maps each condition's signals (``RuleEvaluator.features``) to a probability through a
logistic map whose bias and weights are data (``stopwise/guardian/data/rule_coefficients.json``). Fitting those
maps on the training split *is* their calibration, with no extra layer at run time:

- ``integrity``, ``stagnation``, ``infeasible``, ``goal_reached``, ``drift``: either a Platt map on the base
  map's logit, folded into its coefficients (the hand-set weights keep their ratios: discrimination unchanged), or
  an L2-regularised logistic regression of the label on the condition's features (a feature a record lacks counts
  0, as ``LogisticMap`` reads it), whichever has the lower log-loss in cross-validation leaving sources out. The
  drift map gives p(aligned), so it is fitted on whether the condition does *not* fire (a level above 0-1):
  exactly the probability the evaluator reports for it. ``goal_reached`` states with no final answer are left out
  (the evaluator answers 0 there without reading the map);
- ``risk``: each table the evaluator reads (a declared class, or a tool-name hint when undeclared) becomes the
  posterior mean of the labels it answered, with the shipped table as a prior worth ``prior_weight`` records;
  the table for an undeclared tool with no hint in its name is kept as it is (cautious by design) unless the
  caller asks for it to be fitted too (``fit_unnamed_risk``: on real servers' tools, whose mix is the world's).

The limits, the name hints and any key this module does not know are copied from the base file, and so is the
``fitted`` note of every map it does not refit (``goal_reached_open``, ``goal_reached_evidence``,
``stagnation_unobserved``, ``drift_unobserved``: fitted or set by other commands, whose provenance a refit must not
lose; a base holding such a map without its note is refused). The result is a coefficients file that
``RuleEvaluator(coefficients=path)`` (and ``stopwise eval --rule-coefficients``) loads.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from stopwise._terminal import terminal_safe
from stopwise.errors import ConfigError
from stopwise.evals._extra import missing_extra

try:
    import numpy as np
    from sklearn.linear_model import LogisticRegression  # type: ignore[import-untyped]
    from sklearn.metrics import log_loss  # type: ignore[import-untyped]
    from sklearn.model_selection import GroupKFold  # type: ignore[import-untyped]
except ImportError as exc:  # say what to install, not just "no module named 'numpy'"
    raise missing_extra(__name__, exc) from exc

from stopwise.evals.traces import TraceRecord, read_traces
from stopwise.guardian.conditions import DEFAULT_CONDITIONS, QuestionSet
from stopwise.guardian.evaluators.rule import COEFFICIENTS_FILE, RuleEvaluator, load_coefficients

__all__ = ["fit_rule_coefficients", "main"]

_LOGISTIC = ("integrity", "stagnation", "infeasible", "goal_reached", "drift")


def _base_data(path: str | Path | None) -> dict[str, Any]:
    if path is not None:
        text = Path(path).read_text(encoding="utf-8")
    else:
        text = resources.files("stopwise.guardian").joinpath("data", COEFFICIENTS_FILE).read_text(encoding="utf-8")
    data = json.loads(text)
    if not isinstance(data, dict):
        raise ConfigError("base", "a coefficients file holds a JSON object")
    return data


def _kept_notes(data: Mapping[str, Any]) -> dict[str, Any]:
    """The base's ``fitted`` notes, after checking that each map this module does not fit has one.

    Such a map (a constant like ``stagnation_unobserved`` or one fitted by another command) is copied into the
    refit as it is, and its note is the only record of where its numbers come from: a refit that copied the
    numbers without it would ship a map nobody can trace, so a base that already lacks the note is refused.
    """
    notes = data.get("fitted", {})
    if not isinstance(notes, dict):
        raise ConfigError("fitted", "must be an object of notes, one per fitted map")
    for key, value in data.items():
        if key not in _LOGISTIC and isinstance(value, dict) and "bias" in value and key not in notes:
            raise ConfigError(
                f"fitted.{key}",
                f"the map {key!r} is not refitted here and is copied as it is, but the base file has no note saying "
                "where it comes from; add one (its fit, its records) before refitting",
            )
    return dict(notes)


@dataclass(slots=True)
class _Rows:
    """One condition's training rows: features, the base map's logit, label, weight, and the source (the CV
    group)."""

    features: list[Mapping[str, float]] = field(default_factory=list)
    z: list[float] = field(default_factory=list)
    y: list[float] = field(default_factory=list)
    w: list[float] = field(default_factory=list)
    groups: list[str] = field(default_factory=list)

    def add(self, f: Mapping[str, float], z: float, y: float, w: float, group: str) -> None:
        self.features.append(f)
        self.z.append(z)
        self.y.append(y)
        self.w.append(w)
        self.groups.append(group)


Candidate = tuple[str, float]
"""("platt", C) folds a Platt map into the base map; ("refit", C) fits every weight."""

_CANDIDATES: tuple[Candidate, ...] = (
    ("platt", 1.0),
    ("platt", 100.0),
    ("refit", 0.3),
    ("refit", 1.0),
    ("refit", 3.0),
    ("refit", 10.0),
)


def _design(rows: _Rows, idx: Sequence[int] | np.ndarray[Any, Any], kind: str, names: Sequence[str]) -> Any:
    if kind == "platt":
        return np.array([[rows.z[i]] for i in idx], dtype=np.float64)
    return np.array([[rows.features[i].get(n, 0.0) for n in names] for i in idx], dtype=np.float64)


def _fit(rows: _Rows, idx: Any, candidate: Candidate, names: Sequence[str]) -> Any:
    kind, c = candidate
    model = LogisticRegression(C=c, max_iter=2000)
    model.fit(
        _design(rows, idx, kind, names),
        np.asarray(rows.y)[idx],
        sample_weight=np.asarray(rows.w, dtype=np.float64)[idx],
    )
    return model


def _cv_loss(rows: _Rows, candidate: Candidate, names: Sequence[str]) -> tuple[float, float] | None:
    """Held-out log-loss leaving whole sources out (as the dev set's train/test split does): the mean over the
    folds and its standard error. None when there are too few sources or classes to cross-validate."""
    groups = np.asarray(rows.groups)
    n_groups = len(set(rows.groups))
    if n_groups < 2:
        return None
    y = np.asarray(rows.y)
    w = np.asarray(rows.w, dtype=np.float64)
    losses = []
    for train, test in GroupKFold(n_splits=min(5, n_groups)).split(y, y, groups):
        if len(set(y[train])) < 2:
            return None
        model = _fit(rows, train, candidate, names)
        p = model.predict_proba(_design(rows, test, candidate[0], names))[:, 1]
        losses.append(log_loss(y[test], p, sample_weight=w[test], labels=[0.0, 1.0]))
    folds = np.asarray(losses)
    return float(folds.mean()), float(folds.std(ddof=1) / np.sqrt(folds.size)) if folds.size > 1 else 0.0


def _choose(scores: Mapping[Candidate, tuple[float, float]]) -> Candidate:
    """The one-standard-error rule: the simplest candidate (in ``_CANDIDATES`` order: Platt first, then weaker
    to stronger refits) whose CV loss is within one standard error of the best. A refit that is barely better on
    the sources it saw is not worth the hand-set weights it throws away."""
    best = min(scores, key=lambda c: scores[c][0])
    limit = scores[best][0] + scores[best][1]
    return next(c for c in _CANDIDATES if c in scores and scores[c][0] <= limit)


def _map(rows: _Rows, base: Mapping[str, Any], candidate: Candidate, names: Sequence[str]) -> dict[str, Any]:
    model = _fit(rows, np.arange(len(rows.y)), candidate, names)
    kind, _ = candidate
    if kind == "platt":
        # sigmoid(a * (bias + sum w f) + b): the same logistic map with every coefficient scaled, bias shifted.
        a, b = float(model.coef_[0][0]), float(model.intercept_[0])
        return {
            "bias": round(a * float(base["bias"]) + b, 4),
            "weights": {k: round(a * float(v), 4) for k, v in base["weights"].items()},
        }
    seen = {n for f in rows.features for n, v in f.items() if v}
    weights = {}
    for n, v in zip(names, model.coef_[0], strict=True):
        # A signal that never fired in the records has no weight the data can tell: the hand-set one stands.
        weights[n] = round(float(v), 4) if n in seen else float(base["weights"].get(n, 0.0))
    return {"bias": round(float(model.intercept_[0]), 4), "weights": weights}


def fit_rule_coefficients(
    records: Sequence[TraceRecord],
    *,
    base: str | Path | None = None,
    questions: QuestionSet = DEFAULT_CONDITIONS,
    mode: Literal["cv", "platt", "refit"] = "cv",
    prior_weight: float = 10.0,
    source: str = "",
    fit_unnamed_risk: bool = False,
) -> dict[str, Any]:
    """The coefficients file refitted on ``records`` (pass the training split only), as JSON data.

    Per logistic condition (drift included) two kinds of fit are tried: ``platt`` keeps the base map's weights
    and fits a slope and an intercept on its logit (folded back into the map: discrimination unchanged; L2
    ``C`` 1 or 100), and ``refit`` fits every weight (L2, ``C`` in 0.3, 1, 3, 10). ``mode="cv"`` keeps the one
    with the lowest log-loss in cross-validation that leaves whole sources out, by the one-standard-error rule
    (the simplest candidate within one standard error of the best, Platt counting as the simplest), so a map that
    only fits the sources it saw loses to one that generalises; ``"platt"`` or ``"refit"`` (C=1) forces one.

    ``base`` is the file to start from (default: the shipped one): features are computed with it, and what is not
    refitted is copied from it (a signal that never fires in the records keeps its base weight in a refit). A
    condition with no usable records, or one class only, keeps the base's map.
    The risk table for an undeclared tool whose name gives no hint keeps the base's unless ``fit_unnamed_risk``
    (pass it only with records whose mix of unnamed tools is the world's: tools of real servers, not a dev set's).
    ``fitted`` in the result says, per map, what was done on how many records (and the CV losses); the base's
    note of every map not refitted is carried over as it is (the risk section's notes as a whole, ``risk.heldout``,
    are dropped when a risk table is refitted). Raises ``ConfigError`` naming ``fitted.<map>`` when the base holds
    a map this module does not fit (``stagnation_unobserved``, ``drift_unobserved``, ...) with no note. Records
    without a structured projection are left out.
    """
    data = _base_data(base)
    base_notes = _kept_notes(data)
    evaluator = RuleEvaluator(coefficients=load_coefficients(base))
    coefficients = evaluator.coefficients
    rows = {name: _Rows() for name in _LOGISTIC}
    risk_counts: dict[tuple[str, str], dict[str, float]] = {}
    fitted: dict[str, Any] = {}
    for r in records:
        condition = questions.by_name.get(r.condition)
        if condition is None or r.projection is None or r.label_problem(condition) is not None:
            continue
        if r.condition == "goal_reached" and r.projection.final is None:
            continue  # the evaluator answers 0 without a final answer: its map never sees such a state
        if r.condition in _LOGISTIC:
            f = evaluator.features(r.projection)[r.condition]
            z = getattr(coefficients, r.condition).logit(f)
            # The drift map gives p(aligned), the probability that the condition does not fire.
            y = float(r.holds(condition) != (r.condition == "drift"))
            rows[r.condition].add(f, z, y, 1.0, r.source)
        elif r.condition == "risk" and isinstance(r.label, str):
            which = _risk_table(evaluator, r, data)
            # The table for a tool with no declared risk and no hint in its name stays the base's: leaning towards
            # caution is a design rule (Risk.UNKNOWN), and a dev set's mix of unnamed tools is not the world's.
            if which is not None and (fit_unnamed_risk or which != ("declared", "unknown")):
                counts = risk_counts.setdefault(which, {})
                counts[r.label] = counts.get(r.label, 0.0) + 1.0
    for name, rs in rows.items():
        if len(set(rs.y)) < 2:
            # The base's map stays, and so does what its note says of it.
            fitted[name] = {"kept": "fewer than two classes in the records"} | (
                {"base": base_notes[name]} if name in base_notes else {}
            )
            continue
        names = sorted({k for f in rs.features for k in f} | set(data[name]["weights"]))
        if mode == "cv":
            losses = {cand: _cv_loss(rs, cand, names) for cand in _CANDIDATES}
            scored = {cand: loss for cand, loss in losses.items() if loss is not None}
            chosen = _choose(scored) if scored else ("refit", 1.0)
            cv = {
                f"{k}(C={c:g})": None if v is None else [round(v[0], 4), round(v[1], 4)] for (k, c), v in losses.items()
            }
        else:
            chosen, cv = (mode, 1.0), {}
        data[name] = _map(rs, data[name], chosen, names)
        fitted[name] = {"fit": f"{chosen[0]}(C={chosen[1]:g})", "records": int(sum(rs.w))} | (
            {"cv_log_loss": cv} if cv else {}
        )
    for (section, key), counts in sorted(risk_counts.items()):
        prior = data["risk"][section][key]
        total = sum(counts.values()) + prior_weight
        table = {label: round((counts.get(label, 0.0) + prior_weight * p) / total, 4) for label, p in prior.items()}
        # Rounding must not leave a table off 1 by more than the loader's tolerance: put the residue on the largest.
        top = max(table, key=table.__getitem__)
        table[top] = round(table[top] + 1.0 - sum(table.values()), 6)
        data["risk"][section][key] = table
        fitted[f"risk.{section}.{key}"] = {"fit": "smoothed counts", "records": int(sum(counts.values()))}
    if risk_counts:
        # Notes on the risk section as a whole (its held-out figures) described tables this refit replaced.
        tables = {
            f"risk.{section}.{key}" for section, part in data["risk"].items() if isinstance(part, dict) for key in part
        }
        base_notes = {k: v for k, v in base_notes.items() if not k.startswith("risk.") or k in tables}
    # A map copied from the base keeps the base's note (a kept logistic map holds it under "base", beside the
    # reason); the maps refitted just now get new notes, as their old ones no longer describe them.
    fitted = {k: v for k, v in base_notes.items() if k not in fitted and k not in _LOGISTIC} | fitted
    base_version = str(data.get("version", ""))
    maps = {k: data[k] for k in (*_LOGISTIC, "risk")}
    digest = hashlib.sha256(json.dumps(maps, sort_keys=True).encode()).hexdigest()[:8]
    data["version"] = f"fit-{digest}"
    data["about"] = (
        f"Refitted by stopwise.evals.rulefit from version {base_version} on {source or 'labelled traces'}: per "
        "condition a Platt map folded into the hand-set weights or a full logistic refit, chosen by "
        "leave-sources-out log-loss (one-standard-error rule); drift on whether it fires (levels 0-1); smoothed "
        "counts for the risk tables. See docs/evals.md."
    )
    data["fitted"] = fitted
    return data


def _risk_table(evaluator: RuleEvaluator, record: TraceRecord, data: Mapping[str, Any]) -> tuple[str, str] | None:
    """Which table of the risk section answered this record: the evaluator answers with one of them as it is."""
    assert record.projection is not None
    answer = evaluator.answer(record.projection, DEFAULT_CONDITIONS.by_name["risk"])
    if answer.uncertain:
        return None
    for section in ("declared", "hinted"):
        for key, table in data["risk"].get(section, {}).items():
            if all(abs(answer.distribution.get(label, -1.0) - p) < 1e-9 for label, p in table.items()):
                return section, key
    return None


def main(argv: Sequence[str] | None = None) -> int:
    """Fit on the train split of the traces, write the file, and compare it with the base on the test split."""
    parser = argparse.ArgumentParser(prog="python -m stopwise.evals.rulefit", description=__doc__)
    parser.add_argument("traces", nargs="+", help="JSONL trace files")
    parser.add_argument("--out", required=True, help="the coefficients file to write")
    parser.add_argument("--base", help="the coefficients file to start from (default: the shipped one)")
    parser.add_argument(
        "--mode", choices=("cv", "platt", "refit"), default="cv", help="how each map is fitted (default cv)"
    )
    args = parser.parse_args(argv)
    try:
        records = [r for path in args.traces for r in read_traces(path).records]
        train = [r for r in records if r.split == "train"]
        data = fit_rule_coefficients(
            train, base=args.base, mode=args.mode, source=", ".join(args.traces) + " (train split)"
        )
    except (ConfigError, OSError, json.JSONDecodeError) as exc:
        # A base file refused (a constant without its note, not JSON) or a file not read: the caller's input,
        # so one line naming it, exit code 2 like argparse's, and no file written.
        print(f"{parser.prog}: error: {terminal_safe(str(exc))}", file=sys.stderr)
        return 2
    Path(args.out).write_text(json.dumps(data, indent=2, sort_keys=False) + "\n", encoding="utf-8")
    print(f"wrote {args.out} (version {data['version']}); held-out (test split) comparison:")
    from stopwise.evals.report import build_report
    from stopwise.evals.run import predict_sync

    test = [r for r in records if r.split == "test"]
    for label, coefficients in (("base", args.base), ("fitted", args.out)):
        evaluator = RuleEvaluator(coefficients=coefficients)
        report = build_report(predict_sync(evaluator, test), DEFAULT_CONDITIONS, split="test", traces=[])
        cells = [f"{n} ECE {m.ece:.3f} AUROC {m.auroc or float('nan'):.3f}" for n, m in report.conditions.items()]
        print(f"  {label:6} {evaluator.model_version}: " + "; ".join(cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
