"""The RuleEvaluator on the real set, per source: n, AUROC, ECE (with its floor), Brier, and trivial baselines.

    python evals/evaluate_real.py [--coefficients FILE] [--json OUT] [--baseline FILE [--tolerance 0.01]]

For each (condition, source) of ``evals/data/realset.jsonl``: the evaluator's probability that the condition
holds against the recorded outcome (a run's graded result, a tool's annotated risk), and for run records the
AUROC of three trivial scores a reviewer could compute without stopwise, each oriented as it would be used (a
longer reply, more confirmation words, a longer last result meaning "done"): the final reply's length, its
confirmation words, the last tool result's length; for stagnation records (a state with no final reply yet), the
step the run reached, the count of its visible calls that repeat an earlier one, the agent's latest words' length
and the last result's length; for risk records, whether the tool's name holds a destructive
verb (delete, drop, transfer, send, deploy...) and the name's length (a longer name read as riskier). An AUROC
of 0.5 is chance; a score no better than these baselines is not evidence of judgment. ``n/a`` where a source has
one class only (every Who&When run failed: there the ECE is the mean probability of success it gives failed runs).

An answer marked ``defer`` (the rules cannot tell: the base rate, the judge's to settle) is counted in
``deferred``; ``mean_p``, AUROC, ECE, its floor and Brier are over the answers the rules commit to, and the same
figures with ``_all`` over every answer, the deferred ones read as odds.

``--baseline`` is the real set's regression gate (``.ci/run``): exit 1 when a (condition, source)'s ECE rose, or
its AUROC fell, committed or over all answers, by more than the tolerance against a table written by ``--json``, or
when one went unmeasured.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from stopwise.evals.metrics import auroc, brier, ece, ece_floor
from stopwise.evals.traces import TraceRecord, read_traces
from stopwise.guardian.conditions import DEFAULT_CONDITIONS
from stopwise.guardian.evaluators.rule import RuleEvaluator, load_coefficients

HERE = Path(__file__).resolve().parent
REALSET = HERE / "data" / "realset.jsonl"
_CONFIRM = re.compile(
    r"\b(done|complete[d]?|success(?:ful(?:ly)?)?|confirm(?:ed)?|verified|resolved|fixed|submitted|ready|correct"
    r"|finished|passed)\b",
    re.I,
)


def baselines(record: TraceRecord) -> dict[str, float]:
    """The trivial scores of a state: what the final reply and the last result look like, nothing more."""
    p = record.projection
    assert p is not None
    final = p.final or ""
    last = next((c.result for s in reversed(p.steps) for c in reversed(s.calls)), "")
    return {
        "reply_length": float(len(final)),
        "confirmation_words": float(len(_CONFIRM.findall(final))),
        "result_length": float(len(last)),
    }


def stagnation_baselines(record: TraceRecord) -> dict[str, float]:
    """The trivial scores of a stuck run, read from the state: the step it reached, how many of its visible calls
    repeat an earlier visible call (the same tool and arguments), the length of the agent's latest words (a run
    about to answer has no final reply yet), the last result's length."""
    p = record.projection
    assert p is not None
    calls = [(c.tool, json.dumps(c.args, sort_keys=True, default=str)) for s in p.steps for c in s.calls]
    last = next((c.result for s in reversed(p.steps) for c in reversed(s.calls)), "")
    return {
        "steps": float(p.steps[-1].step if p.steps else 0),
        "repeated_calls": float(len(calls) - len(set(calls))),
        "reply_length": float(len(p.steps[-1].text) if p.steps else 0),
        "result_length": float(len(last)),
    }


_DESTRUCTIVE_VERB = re.compile(
    r"(?:^|[^a-z])(delete|remove|drop|destroy|purge|erase|wipe|reset|overwrite|kill|terminate|uninstall|transfer|pay"
    r"|send|deploy)(?:[^a-z]|$)",
)
"""The verbs the issue names as destructive-looking (and their near kin), as a reviewer would grep a tool's name."""


def _snake(name: str) -> str:
    return re.sub(r"([a-z])([A-Z])", r"\1_\2", name).lower()


def destructive_verb(name: str) -> bool:
    """Whether a tool's name holds a destructive-looking verb (``_DESTRUCTIVE_VERB``, camelCase read as words)."""
    return _DESTRUCTIVE_VERB.search(_snake(name)) is not None


def risk_baselines(record: TraceRecord) -> dict[str, float]:
    """The trivial scores of a pending call's risk: a destructive verb in the tool's name, the name's length."""
    p = record.projection
    assert p is not None and p.pending is not None
    return {
        "destructive_verb": float(destructive_verb(p.pending.name)),
        "name_length": float(len(_snake(p.pending.name))),
    }


def score(records: Sequence[TraceRecord], evaluator: RuleEvaluator) -> dict[str, dict[str, Any]]:
    """Per ``condition/source``: the figures of the module docstring."""
    groups: dict[str, list[TraceRecord]] = defaultdict(list)
    for r in records:
        groups[f"{r.condition} {r.source}"].append(r)
    table: dict[str, dict[str, Any]] = {}
    for key, rs in sorted(groups.items()):
        condition = DEFAULT_CONDITIONS.by_name[rs[0].condition]
        ps, ys, committed, uncertain = [], [], [], 0
        for r in rs:
            assert r.projection is not None
            answer = evaluator.answer(r.projection, condition)
            if answer.uncertain:
                uncertain += 1
                continue
            ps.append(answer.p(condition.fires_on))
            ys.append(float(r.holds(condition)))
            committed.append(not answer.defer)
        cp = [p for p, c in zip(ps, committed, strict=True) if c]
        cy = [y for y, c in zip(ys, committed, strict=True) if c]
        row: dict[str, Any] = {
            "n": len(rs),
            "positives": int(sum(float(r.holds(condition)) for r in rs)),
            "uncertain": uncertain,
            "deferred": len(ps) - len(cp),
            **_figures(cp, cy),
            **{f"{k}_all": v for k, v in _figures(ps, ys).items()},
        }
        labels = [float(r.holds(condition)) for r in rs]
        trivial = {"risk": risk_baselines, "stagnation": stagnation_baselines}.get(condition.name, baselines)
        for name in trivial(rs[0]):
            # AUROC reads only the order: squash the counts into [0, 1] without changing it.
            values = [v / (v + 1.0) for v in (trivial(r)[name] for r in rs)]
            row[f"auroc_{name}"] = auroc(values, labels) if 0 < sum(labels) < len(labels) else None
        table[key] = row
    return table


def _figures(ps: list[float], ys: list[float]) -> dict[str, Any]:
    """mean_p, AUROC (None with one class), ECE, its floor and Brier of ``ps`` against ``ys`` (None when empty)."""
    return {
        "mean_p": sum(ps) / len(ps) if ps else None,
        "auroc": auroc(ps, ys) if 0 < sum(ys) < len(ys) else None,
        "ece": ece(ps, ys),
        "ece_floor": ece_floor(ps),
        "brier": brier(ps, ys),
    }


def regressions(table: dict[str, dict[str, Any]], baseline: dict[str, dict[str, Any]], tolerance: float) -> list[str]:
    """What got worse than ``baseline``, in words (empty: nothing)."""
    found = []
    for key, before in sorted(baseline.items()):
        now = table.get(key)
        if now is None:
            found.append(f"{key}: not measured any more")
            continue
        for suffix, what in (("", ""), ("_all", " (deferred included)")):
            ece_key, auroc_key = f"ece{suffix}", f"auroc{suffix}"
            was, got = before.get(ece_key), now.get(ece_key)
            if was is not None and (got is None or got > was + tolerance):
                found.append(f"{key}: ECE{what} {was:.3f} -> {fmt(got)}")
            was, got = before.get(auroc_key), now.get(auroc_key)
            if was is not None and (got is None or got < was - tolerance):
                found.append(f"{key}: AUROC{what} {was:.3f} -> {fmt(got)}")
    return found


def fmt(v: Any) -> str:
    return "n/a" if v is None else (f"{v:.3f}" if isinstance(v, float) else str(v))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--coefficients", help="a RuleEvaluator coefficients file (default: the shipped one)")
    parser.add_argument("--traces", default=str(REALSET))
    parser.add_argument("--json", help="write the table as JSON")
    parser.add_argument("--baseline", help="exit 1 when a (condition, source) is worse than in this --json table")
    parser.add_argument("--tolerance", type=float, default=0.01)
    args = parser.parse_args(argv)
    evaluator = (
        RuleEvaluator(coefficients=load_coefficients(args.coefficients)) if args.coefficients else RuleEvaluator()
    )
    table = score(read_traces(args.traces).records, evaluator)
    cols = ["n", "positives", "uncertain", "deferred", "mean_p", "auroc", "ece", "ece_floor", "brier"]
    cols += ["auroc_all", "ece_all", "ece_floor_all", "brier_all"]
    cols += ["auroc_reply_length", "auroc_confirmation_words", "auroc_result_length"]
    cols += ["auroc_destructive_verb", "auroc_name_length", "auroc_steps", "auroc_repeated_calls"]
    print(f"{evaluator.model_version}")
    print("| condition source | " + " | ".join(cols) + " |")
    for key, row in table.items():
        print(f"| {key} | " + " | ".join(fmt(row.get(c)) for c in cols) + " |")
    if args.json:
        Path(args.json).write_text(json.dumps(table, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    if args.baseline:
        worse = regressions(table, json.loads(Path(args.baseline).read_text(encoding="utf-8")), args.tolerance)
        for line in worse:
            print(f"gate: worse: {line}", file=sys.stderr)
        if worse:
            return 1
        print(f"gate: OK: no (condition, source) worse than {args.baseline} beyond tolerance {args.tolerance:g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
