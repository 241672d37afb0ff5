"""Refit the RuleEvaluator's sections that the real set labels, and write them into both coefficients files.

    python evals/calibration/fit_real.py [--section risk --section goal_reached_open ...] [--dry-run]

``stopwise.evals.rulefit`` does the fitting; this script chooses the records and splices only the refitted
sections (and their ``fitted`` notes and the version) into ``evals/calibration/rule_coefficients.json`` and the
shipped ``src/stopwise/guardian/data/rule_coefficients.json``, leaving every other byte of them as it was (the
integrity and drift sections are fitted by their own commands: see README.md here).

- ``risk``: the train split's risk records of the scripted dev set and of the real set (tools of public MCP
  servers as their authors annotated them), from the hand-set tables of version ``h1`` (the prior, worth 10
  records) with the name words (``risk.name_hints``, ``risk.object_words``) of the shipped file: edit the words
  there, then refit. The table for a tool whose name gives no hint is fitted too (most of its train records are
  real servers' tools). Each real source's figures come from a section fitted without it (leave-one-source-out;
  the held-out servers from the train sources only) and go into the ``fitted`` notes (``risk.heldout``).
- ``goal_reached_open``: goal_reached for runs with no stated acceptance criteria (every scripted state states
  criteria; the scripted ``goal_reached`` map keeps answering those), from the real runs of the train split only,
  as two maps: ``goal_reached_evidence`` for a run that said how it went (``OUTCOME_FEATURES``: a tool confirmed a
  change, a request to the user came back empty, a failure followed the last confirmation, the answer says it
  could not finish), an L2 logistic regression on those features alone over such runs, its strength chosen by
  ``choose_c`` on the sources it is fitted on (so inside the leave-one-source-out loop too); and
  ``goal_reached_open`` for the others, a constant, the base rate of the train runs (the goal's and the answer's
  words do not carry from one source to another: leaving a source out, a full refit of the goal_reached features
  scored AUROC about 0.55). Each train source is scored by maps made without it (leave-one-source-out); each
  test-split source (held out: never read by a fit) by maps made on all the train sources. Both sets of figures,
  and those of the constant alone, go into the file's ``fitted`` notes, with the answers the rules commit to
  scored apart from those they defer to a judge (``evaluate_real.score``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from sklearn.linear_model import LogisticRegression  # type: ignore[import-untyped]

from stopwise.evals.rulefit import fit_rule_coefficients
from stopwise.evals.traces import TraceRecord, read_traces
from stopwise.guardian.evaluators.rule import OUTCOME_FEATURES, RuleEvaluator, load_coefficients

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from evaluate_real import fmt, score

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
H1 = "e22ac20"
"""The commit holding the hand-set coefficients file (version h1): the prior of every refit."""
SHIPPED = ROOT / "src" / "stopwise" / "guardian" / "data" / "rule_coefficients.json"
FILES = {
    ROOT / "evals" / "calibration" / "rule_coefficients.json": 2,
    ROOT / "src" / "stopwise" / "guardian" / "data" / "rule_coefficients.json": 1,
}
TRACES = [ROOT / "evals" / "data" / "devset.jsonl", ROOT / "evals" / "data" / "realset.jsonl"]


def replace_key(text: str, key: str, value: Any, indent: int) -> str:
    """``text`` with the value of the top-level ``key`` replaced (or added), every other byte left as it was."""
    m = re.search(r'^( *)"' + re.escape(key) + r'": ', text, flags=re.M)
    if m is None:
        # A new section goes before "fitted" (the notes stay last).
        at = re.search(r'^ *"fitted": ', text, flags=re.M)
        if at is None:
            raise KeyError("no top-level 'fitted' to insert before")
        entry = (
            " " * indent + json.dumps(key) + ": " + json.dumps(value, indent=indent).replace("\n", "\n" + " " * indent)
        )
        return text[: at.start()] + entry + ",\n" + text[at.start() :]
    if len(m.group(1)) != indent:
        raise KeyError(f"no top-level {key!r}")
    _, end = json.JSONDecoder().raw_decode(text, m.end())
    return text[: m.end()] + json.dumps(value, indent=indent).replace("\n", "\n" + " " * indent) + text[end:]


def _h1_base(path: Path) -> Path:
    h1 = json.loads(
        subprocess.run(
            ["git", "-C", str(ROOT), "show", f"{H1}:src/stopwise/guardian/data/rule_coefficients.json"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    )
    shipped = json.loads(SHIPPED.read_text(encoding="utf-8"))
    h1["risk"]["name_hints"] = shipped["risk"]["name_hints"]
    h1["risk"]["object_words"] = shipped["risk"].get("object_words", [])
    path.write_text(json.dumps(h1), encoding="utf-8")
    return path


OPEN = "goal_reached_open"
"""goal_reached for runs with no stated criteria: every real run, no scripted one (they all state criteria)."""
EVIDENCE = "goal_reached_evidence"
"""goal_reached for those of them whose run said how it went (``OUTCOME_FEATURES``)."""
EVIDENCE_CS = (1.0, 10.0, 100.0, 1000.0)
"""The L2 strengths the evidence map chooses from: the one with the least log loss when each source of the records it
is fitted on is scored by a map fitted on the others (so inside ``held_out`` the choice never sees the source being
scored). Outcome evidence nearly separates the runs that said something, and a strong penalty keeps a confirmed
write at 0.7 where such runs succeeded every time: ECE 0.13-0.21 on the AutoGPT reports at C=1."""


def _open_records(records: list[TraceRecord]) -> list[TraceRecord]:
    return [r for r in records if r.condition == "goal_reached" and r.projection and not r.projection.criteria]


def fit_risk(records: list[TraceRecord], base: Path) -> dict[str, Any]:
    """The risk section fitted on the train split's risk records of ``records``, the table for a tool whose name
    gives no hint included (its records there are mostly real servers' tools: the world's mix, not a dev set's)."""
    chosen = [r for r in records if r.condition == "risk" and r.split == "train"]
    return fit_rule_coefficients(
        chosen, base=base, source="risk records (train split, scripted and real)", fit_unnamed_risk=True
    )


def risk_held_out(records: list[TraceRecord], base: Path, scratch: Path) -> dict[str, dict[str, Any]]:
    """Each real risk source scored by a risk section fitted without it (the scripted train records always in),
    each test-split one by the section fitted on every train source."""
    risk = [r for r in records if r.condition == "risk"]
    real = [r for r in risk if r.source.startswith("mcp/")]
    scripted = [r for r in risk if not r.source.startswith("mcp/")]
    base_copy = scratch.with_suffix(".base.json")
    base_copy.write_text(base.read_text(encoding="utf-8"), encoding="utf-8")
    try:
        return held_out(lambda train: {"risk": fit_risk(scripted + train, base_copy)["risk"]}, real, SHIPPED, scratch)
    finally:
        base_copy.unlink(missing_ok=True)


def open_constant(records: list[TraceRecord]) -> dict[str, Any]:
    """The map that answers the base rate of ``records``, whatever the state: weights none."""
    rate = sum(bool(r.label) for r in records) / len(records)
    rate = min(max(rate, 0.01), 0.99)
    return {"bias": round(math.log(rate / (1 - rate)), 4), "weights": {}}


_EVALUATOR = RuleEvaluator()


def _said(record: TraceRecord) -> dict[str, float] | None:
    """The outcome features of a run that said how it went; None for one that did not."""
    assert record.projection is not None
    f = _EVALUATOR.goal_features(record.projection)
    return {k: f[k] for k in OUTCOME_FEATURES if k in f} or None


def _evidence_rows(records: list[TraceRecord]) -> list[tuple[str, dict[str, float], float]]:
    return [(r.source, f, float(bool(r.label))) for r in records if (f := _said(r)) is not None]


def _matrix(rows: list[tuple[str, dict[str, float], float]]) -> npt.NDArray[np.float64]:
    return np.array([[f.get(k, 0.0) for k in OUTCOME_FEATURES] for _, f, _ in rows], dtype=np.float64)


def choose_c(records: list[TraceRecord]) -> float:
    """The strength of ``EVIDENCE_CS`` with the least leave-one-source-out log loss over ``records``' runs that said
    how they went (the first, the strongest, when no source can be left out with two classes left to fit)."""
    rows = _evidence_rows(records)
    losses: dict[float, float] = {}
    for c in EVIDENCE_CS:
        total, n = 0.0, 0
        for source in sorted({s for s, _, _ in rows}):
            fit = [row for row in rows if row[0] != source]
            held = [row for row in rows if row[0] == source]
            if len({y for _, _, y in fit}) < 2:
                continue
            model = LogisticRegression(C=c, max_iter=5000).fit(_matrix(fit), [y for _, _, y in fit])
            p = np.clip(model.predict_proba(_matrix(held))[:, 1], 1e-6, 1 - 1e-6)
            y = np.array([y for _, _, y in held])
            total += float(-(y * np.log(p) + (1 - y) * np.log(1 - p)).sum())
            n += len(held)
        if n:
            losses[c] = total / n
    return min(losses, key=lambda c: (losses[c], c)) if losses else EVIDENCE_CS[0]


def evidence_map(records: list[TraceRecord]) -> dict[str, Any] | None:
    """The evidence map fitted on the runs of ``records`` that said how it went, at the strength ``choose_c``
    picks on them (None: too few, or one class)."""
    rows = _evidence_rows(records)
    if len({y for _, _, y in rows}) < 2:
        return None
    c = choose_c(records)
    model = LogisticRegression(C=c, max_iter=5000).fit(_matrix(rows), [y for _, _, y in rows])
    weights = {k: round(float(w), 4) for k, w in zip(OUTCOME_FEATURES, model.coef_[0], strict=True)}
    return {"bias": round(float(model.intercept_[0]), 4), "weights": weights}


Maker = Callable[[list[TraceRecord]], dict[str, Any]]
"""Records to fit on -> the sections (``OPEN``, ``EVIDENCE``) to put in the coefficients file."""


def constant_only(records: list[TraceRecord]) -> dict[str, Any]:
    return {OPEN: open_constant(records), EVIDENCE: None}


def with_evidence(records: list[TraceRecord]) -> dict[str, Any]:
    return {OPEN: open_constant(records), EVIDENCE: evidence_map(records)}


def held_out(maker: Maker, records: list[TraceRecord], base: Path, scratch: Path) -> dict[str, dict[str, Any]]:
    """Each train source scored by maps made without it (leave-one-source-out), each test-split source by maps
    made on every train source."""
    data = json.loads(base.read_text(encoding="utf-8"))
    train = [r for r in records if r.split == "train"]
    out: dict[str, dict[str, Any]] = {}
    for source in sorted({r.source for r in records}):
        for key, value in maker([r for r in train if r.source != source]).items():
            if value is None:
                data.pop(key, None)
            else:
                data[key] = value
        scratch.write_text(json.dumps(data), encoding="utf-8")
        evaluator = RuleEvaluator(coefficients=load_coefficients(scratch))
        out.update(score([r for r in records if r.source == source], evaluator))
    return out


def splice(sections: dict[str, Any], notes: dict[str, Any], tag: str) -> None:
    """Write ``sections`` (top-level keys) and their ``fitted`` notes into both files; ``+<tag><hash>`` on the
    version says which refit of this script they carry."""
    digest = hashlib.sha256(json.dumps(sections, sort_keys=True).encode()).hexdigest()[:4]
    for path, indent in FILES.items():
        text = path.read_text(encoding="utf-8")
        data = json.loads(text)
        version = re.sub(rf"\+{tag}[0-9a-f]{{4}}(?=\+|$)", "", data["version"]) + f"+{tag}{digest}"
        fitted = {k: v for k, v in data["fitted"].items() if k not in notes and k.split(".")[0] not in sections}
        for key, value in sections.items():
            text = replace_key(text, key, value, indent)
        text = replace_key(text, "fitted", fitted | notes, indent)
        text = replace_key(text, "version", version, indent)
        path.write_text(text, encoding="utf-8")
        print(f"{path.relative_to(ROOT)}: {version}")


TAGS = {"risk": "r", OPEN: "o"}


def _rounded(value: Any) -> Any:
    return round(value, 3) if isinstance(value, float) else value


_KEPT = ("n", "positives", "deferred", "mean_p", "auroc", "ece", "ece_floor", "brier")
_KEPT += ("auroc_all", "ece_all", "brier_all")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--section", action="append", choices=sorted(TAGS), help="default: both")
    parser.add_argument("--dry-run", action="store_true", help="print the held-out figures, write nothing")
    args = parser.parse_args(argv)
    records = [r for path in TRACES for r in read_traces(path).records]
    base = SHIPPED
    scratch = HERE / ".fit_scratch.json"
    try:
        for section in args.section or list(TAGS):
            if section == "risk":
                table = risk_held_out(records, _h1_base(scratch), scratch)
                for key, row in table.items():
                    print(f"held out: {key}: " + ", ".join(f"{m} {fmt(row[m])}" for m in _KEPT[:8]))
                data = fit_risk(records, _h1_base(scratch))
                value, notes = data["risk"], {k: v for k, v in data["fitted"].items() if k.startswith("risk.")}
                notes["risk.heldout"] = {k: {m: _rounded(row[m]) for m in _KEPT[:8]} for k, row in table.items()}
            else:
                real = _open_records(records)
                train = [r for r in real if r.split == "train"]
                figures = {}
                for name, maker in (("constant", constant_only), ("evidence", with_evidence)):
                    table = held_out(maker, real, base, scratch)
                    figures[name] = {k: {m: _rounded(row[m]) for m in _KEPT} for k, row in table.items()}
                    for key, row in table.items():
                        print(f"held out, {name}: {key}: " + ", ".join(f"{m} {fmt(row[m])}" for m in _KEPT))
                value = with_evidence(train)
                said = sum(_said(r) is not None for r in train)
                notes = {
                    OPEN: {
                        "fit": "constant: the base rate of the train runs (the goal's and the answer's words do not "
                        "carry from one source to another: leave-one-source-out AUROC of a full refit about 0.55)",
                        "records": len(train),
                        "heldout": figures,
                    },
                    EVIDENCE: {
                        "fit": f"logistic (L2, C={choose_c(train):g}, chosen from {list(EVIDENCE_CS)} by "
                        "leave-one-source-out log loss on the train sources) on the outcome features, over the "
                        "train runs that said how they went",
                        "records": said,
                    },
                }
            if not args.dry_run:
                splice(value if section == OPEN else {section: value}, notes, TAGS[section])
    finally:
        scratch.unlink(missing_ok=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
