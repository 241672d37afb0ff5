"""Fit the optional defender backend's combination on the integrity set's train corpora only.

    python evals/score_defender.py     # first: the library's scores, cached (slow)
    python evals/train_defender.py     # writes src/stopwise/guardian/data/defender_integrity.json

The combination is a logistic regression on three numbers per tool result (``combined_features``): the light
scorer's logit (the shipped integrity map over the markers and the n-gram model, exactly what a
``RuleEvaluator`` computes), stackone-defender's Tier 2 probability as a logit, and whether its Tier 1 said high
risk or worse. Rows: the train sample of ``score_defender.py`` (every injected train record, a fixed sample of
clean ones, weighted back to the train split's share of clean records), trivial results left out (the backend is
never asked about them). As for the light scorer, the intercept is then moved from the train split's rate of
injected results to ``train_integrity.BASE_RATE`` (5%). The held-out corpora are never read here. Also printed:
the leave-one-corpus-out AUROC and log loss of the combination beside the light scorer and the library alone on
the same train rows. Caveat: the light logit of a train row is in-sample (the light model was fitted on these
corpora), so the combination may trust it more than it deserves on unseen text.
"""

from __future__ import annotations

import json
import math
import sys
from datetime import date
from pathlib import Path

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import log_loss, roc_auc_score

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _integrity_data import Item, load_items
from score_defender import CACHE, READ_CHARS, SECOND_CORPORA, load_cache, text_key, train_sample
from train_integrity import BASE_RATE

from stopwise.guardian.evaluators._integrity import is_trivial
from stopwise.guardian.evaluators.defender import COMBINATION_FILE, LibraryScore, combined_features
from stopwise.guardian.evaluators.rule import RuleEvaluator

OUT = Path(__file__).resolve().parents[1] / "src" / "stopwise" / "guardian" / "data" / COMBINATION_FILE
NAMES = ("light_logit", "defender_logit", "defender_high")
# Fixed before fitting (the usual default); three features need little regularisation.
C = 1.0


def rows(items: list[Item], cache: dict[str, dict[str, object]]) -> tuple[np.ndarray, np.ndarray, list[Item]]:
    rules = RuleEvaluator(cache_size=1)
    light = rules.coefficients.integrity
    xs, ys, kept = [], [], []
    for item in items:
        if is_trivial(item.text):
            continue
        row = cache.get(text_key(item.text))
        if row is None:
            sys.exit(f"no cached library score for a train record: run evals/score_defender.py first ({CACHE})")
        z = light.logit(rules.text_integrity_features(item.text))
        f = combined_features(z, LibraryScore(float(row["score"]), int(row["risk"])))  # type: ignore[arg-type]
        xs.append([f[n] for n in NAMES])
        ys.append(int(item.label))
        kept.append(item)
    return np.array(xs), np.array(ys), kept


def main() -> None:
    head, cache = load_cache()
    if head is None:
        sys.exit(f"{CACHE} is missing: run evals/score_defender.py first")
    x, y, kept = rows(train_sample(), cache)
    clean_all = sum(1 for i in load_items("train") if i.corpus not in SECOND_CORPORA and not i.label)
    clean_here = int((y == 0).sum())
    # The sample keeps every injected record and a share of clean ones: weigh clean rows back to their share.
    weight = np.where(y == 0, clean_all / max(clean_here, 1), 1.0)
    corpora = np.array([i.corpus for i in kept])
    print(f"train rows: {len(y)} ({int(y.sum())} injected), clean weight {clean_all / max(clean_here, 1):.2f}")

    print("\nleave-one-corpus-out (corpora with both classes; others pooled into every fold's test)")
    print(f"{'held-out corpus':24} {'n':>5} {'combined':>9} {'light':>7} {'library':>8}")
    for corpus in sorted(set(corpora)):
        test = corpora == corpus
        if y[test].min() == y[test].max() or y[~test].min() == y[~test].max():
            continue
        fit = LogisticRegression(C=C).fit(x[~test], y[~test], sample_weight=weight[~test])
        p = fit.predict_proba(x[test])[:, 1]
        cells = [roc_auc_score(y[test], s) for s in (p, x[test, 0], x[test, 1])]
        print(
            f"{corpus:24} {int(test.sum()):5} "
            + " ".join(f"{c:>8.3f}" for c in cells)
            + f"  log loss {log_loss(y[test], p, labels=[0, 1]):.3f}"
        )

    fit = LogisticRegression(C=C).fit(x, y, sample_weight=weight)
    # The light scorer's convention (train_integrity.BASE_RATE): the intercept is moved from the train split's rate
    # of injected results to 5%, so a result without evidence answers below the condition's uncertain band.
    train_rate = float(np.average(y, weights=weight))
    shift = math.log(BASE_RATE / (1 - BASE_RATE)) - math.log(train_rate / (1 - train_rate))
    print(f"intercept moved by {shift:+.3f} from the train split's rate {train_rate:.3f} to {BASE_RATE}")
    data = {
        "version": f"defender-combo-{date.today().isoformat()}",
        "library_version": str(head["version"]),
        "read_chars": READ_CHARS,
        "fitted_on": (
            "evals/train_defender.py: the integrity set's train split (no held-out corpus), every injected record "
            f"and {clean_here} clean ones weighted to the split's share, C={C}; intercept moved to {BASE_RATE} injected"
        ),
        "map": {
            "bias": round(float(fit.intercept_[0]) + shift, 6),
            "weights": {n: round(float(w), 6) for n, w in zip(NAMES, fit.coef_[0], strict=True)},
        },
    }
    OUT.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    print(f"\nwrote {OUT}: bias {data['map']['bias']}, weights {data['map']['weights']}")


if __name__ == "__main__":
    main()
