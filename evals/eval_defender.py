"""Score the optional defender backend on the held-out integrity corpora, measured as the light scorer is.

    python evals/score_defender.py                 # first: the library's scores, cached (slow)
    python evals/eval_defender.py                  # the report
    python evals/eval_defender.py --json out.json  # and the figures as JSON

Systems, on the ``test`` split of ``evals/_integrity_data.py`` (the held-out corpora, never used to fit either
scorer): the light scorer as shipped (computed here, one core), stopwise with ``DefenderIntegrity`` (the shipped
combination over the light logit and the cached library score: what ``RuleEvaluator(integrity=...)`` computes for
a one-result step; trivial results keep the light answer), stackone-defender alone (its Tier 2 probability), and
the trivial baselines of ``eval_integrity.py``. The report is ``eval_integrity.report`` (AUROC, recall at FPR <=
0.05, ECE with its floor, Brier, per corpus, by where the injection starts), then recall and false alarms at the
policy's threshold t* per corpus for both stopwise scorers, and the cost per result by length: the light scorer
timed here, the library's wall time from the cache (one pinned core, on a shared machine).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _integrity_data import load_items
from eval_integrity import _KEYWORDS, print_at_t_star, report, stopwise_scorer, time_evaluators, timed
from score_defender import CACHE, load_cache, text_key

from stopwise.guardian.evaluators._integrity import is_trivial
from stopwise.guardian.evaluators.defender import LibraryScore, combined_features, load_combination
from stopwise.guardian.evaluators.rule import RuleEvaluator

LENGTHS = ((0, 2000), (2000, 8000), (8000, 10**9))
HEAVY = "stopwise + defender"
ALONE = "stackone-defender"


def live_timing(texts: Sequence[str]) -> dict[str, float]:
    """CPU and wall milliseconds per result, light and with the backend, each result read once (no memo hit)."""
    from stopwise.guardian.evaluators.defender import DefenderIntegrity

    return time_evaluators(
        texts, (("light", RuleEvaluator()), ("with defender", RuleEvaluator(integrity=DefenderIntegrity())))
    )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", help="write the figures to this file")
    parser.add_argument(
        "--live",
        type=int,
        default=0,
        metavar="N",
        help="also time N held-out results of 8,000+ characters through RuleEvaluator(integrity=...)",
    )
    args = parser.parse_args(argv)
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    head, cache = load_cache()
    if head is None:
        sys.exit(f"{CACHE} is missing: run evals/score_defender.py first")
    combination = load_combination()
    if head["version"] != combination.library_version:
        print(
            f"note: cached scores are of stackone-defender {head['version']}, the combination was fitted on "
            f"{combination.library_version}"
        )
    items = load_items("test")
    texts = [i.text for i in items]
    missing = sum(text_key(t) not in cache for t in texts)
    if missing:
        sys.exit(f"{missing} held-out records have no cached library score: run evals/score_defender.py")

    rules = RuleEvaluator(cache_size=1)
    light_map = rules.coefficients.integrity
    light, light_ms = timed(stopwise_scorer(), texts)
    heavy, alone, library_ms = [], [], []
    for text in texts:
        row = cache[text_key(text)]
        scored = LibraryScore(float(row["score"]), int(row["risk"]))
        alone.append(scored.score)
        library_ms.append(float(row["ms"]))
        features = rules.text_integrity_features(text)
        if is_trivial(text):
            heavy.append(light_map.p(features))
            continue
        z = combination.map.logit(combined_features(light_map.logit(features), scored))
        heavy.append(1.0 / (1.0 + math.exp(-z)))

    systems: dict[str, tuple[np.ndarray, float, bool]] = {
        "stopwise": (light, light_ms, True),
        HEAVY: (np.array(heavy), light_ms + float(np.mean(library_ms)), True),
        ALONE: (np.array(alone), float(np.mean(library_ms)), True),
        "baseline: length": (*timed(lambda t: float(len(t)), texts), False),
        "baseline: keywords": (*timed(lambda t: float(len(_KEYWORDS.findall(t))), texts), False),
    }
    out = report(items, systems)

    print_at_t_star(items, systems, out, {"stopwise": "light", HEAVY: "with defender"})

    print("\nms per result by length (light: this process; library: the cache's wall time, one pinned core)")
    lengths = np.array([min(len(t), int(head["read_chars"])) for t in texts])
    cost: dict[str, Any] = {}
    for lo, hi in LENGTHS:
        idx = (lengths >= lo) & (lengths < hi) if hi < 10**9 else lengths >= lo
        if not idx.any():
            continue
        lib = np.array(library_ms)[idx]
        key = f"{lo}-{hi if hi < 10**9 else ''}"
        cost[key] = {
            "n": int(idx.sum()),
            "library_median": float(np.median(lib)),
            "library_p95": float(np.percentile(lib, 95)),
        }
        print(
            f"{key:12} n={int(idx.sum()):5}  library median {cost[key]['library_median']:7.1f}  p95 "
            f"{cost[key]['library_p95']:7.1f}"
        )
    out["library_ms_by_length"] = cost
    if args.live:
        out["live_8k"] = live_timing([t for t in texts if len(t) >= int(head["read_chars"])][: args.live])
    out["library"] = {"name": head["library"], "version": head["version"], "combination": combination.version}
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
