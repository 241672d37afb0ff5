"""How the RuleEvaluator's answers score on the development set, per condition and split.

    python evals/evaluate_rules.py [--split test] [--errors]

For yes/no conditions: AUROC of p(yes) and, at the condition's threshold t*, recall and false positive rate.
For drift: AUROC of p(level 0 or 1) for "the current sub-task is off goal" (labels 0 and 1), and the mean absolute
error of the expected level. For risk: how often the most likely option is the true class, and how often a
regulated or irreversible call would be escalated (p of those options >= t*). Pure Python: no numpy needed.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from build_devset import OUT, projection_from_record  # noqa: E402

from stopwise.guardian.conditions import DEFAULT_CONDITIONS  # noqa: E402
from stopwise.guardian.evaluators.rule import RuleEvaluator  # noqa: E402


def auroc(labels: Sequence[bool], scores: Sequence[float]) -> float:
    """Probability that a random positive scores above a random negative (ties count half)."""
    pos = [s for s, y in zip(scores, labels, strict=True) if y]
    neg = [s for s, y in zip(scores, labels, strict=True) if not y]
    if not pos or not neg:
        return float("nan")
    wins = sum((p > n) + 0.5 * (p == n) for p in pos for n in neg)
    return wins / (len(pos) * len(neg))


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--split", choices=("train", "test", "all"), default="all")
    parser.add_argument("--errors", action="store_true", help="list the records decided wrongly at t*")
    args = parser.parse_args(argv)
    evaluator = RuleEvaluator()
    rows: dict[tuple[str, str], list[tuple[Any, float, dict[str, Any], str]]] = defaultdict(list)
    with OUT.open(encoding="utf-8") as f:
        for line in f:
            r = json.loads(line)
            if args.split != "all" and r["split"] != args.split:
                continue
            c = DEFAULT_CONDITIONS.by_name[r["condition"]]
            answer = evaluator.answer(projection_from_record(r), c)
            rows[(r["condition"], r["split"])].append((r["label"], answer.p(c.fires_on), dict(answer.distribution), r))
    print(f"RuleEvaluator {evaluator.model_version} on {OUT.relative_to(HERE.parent)}")
    for (name, split), items in sorted(rows.items()):
        c = DEFAULT_CONDITIONS.by_name[name]
        t = c.threshold
        if name == "drift":
            labels = [label in c.fires_on for label, *_ in items]
            expected = [sum(int(k) * v for k, v in d.items()) for _, _, d, _ in items]
            mae = sum(abs(e - int(label)) for e, (label, *_) in zip(expected, items, strict=True)) / len(items)
            extra = f"MAE(level) {mae:.2f}"
        elif name == "risk":
            labels = [label in c.fires_on for label, *_ in items]
            top = sum(max(d, key=lambda k: d[k]) == label for label, _, d, _ in items if d) / len(items)
            extra = f"top option correct {top:.2f}"
        else:
            labels = [bool(label) for label, *_ in items]
            extra = ""
        scores = [p for _, p, _, _ in items]
        fires = [p >= t for p in scores]
        pos = sum(labels)
        neg = len(labels) - pos
        tp = sum(f and y for f, y in zip(fires, labels, strict=True))
        fp = sum(f and not y for f, y in zip(fires, labels, strict=True))
        recall = tp / pos if pos else float("nan")
        fpr = fp / neg if neg else float("nan")
        print(
            f"  {name:13} {split:5} n={len(items):4} AUROC {auroc(labels, scores):.3f}  at t*={t:.2f}: "
            f"recall {recall:.2f} FPR {fpr:.2f}  {extra}"
        )
        if args.errors:
            for (label, p, _, r), f, y in zip(items, fires, labels, strict=True):
                if f != y:
                    print(f"      {'FN' if y else 'FP'} p={p:.2f} label={label} {r['kind']} {r['id']}")


if __name__ == "__main__":
    main()
