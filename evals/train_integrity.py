"""Train the integrity linear model on the development set's train split and report on its test split.

    pip install numpy scipy scikit-learn            # dev tools only; the runtime model is pure Python
    python evals/build_devset.py                    # first, if evals/data/devset.jsonl is missing or stale
    python evals/train_integrity.py                 # fit, report, write src/stopwise/guardian/data/integrity_model.json
    python evals/train_integrity.py --no-write      # fit and report only
    python evals/train_integrity.py --write-coefficients   # also write the fitted combination into
                                                           # rule_coefficients.json's "integrity" block

The model is a logistic regression over the hashed word 1..n-gram features that
``stopwise.guardian.evaluators.rule.IntegrityModel.features`` computes on ``normalise_untrusted`` text (the code
that runs at evaluation time is the reference; this script calls it, so training and run time cannot disagree).
Its regularisation is chosen by cross-validation grouped by source on the train split.

The combination of markers and model is a second logistic map over the marker features and the model's logit,
fitted on out-of-fold logits of the train split (so it does not learn to trust an over-fitted logit).

Reported on the test split (sources never seen in training): AUROC, and recall at the best threshold with a false
positive rate <= 0.05, for the markers alone, the model alone and the combination; and for the combination as
shipped, recall and false positive rate at the policy's threshold t* of the integrity condition.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from scipy import sparse
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score, roc_curve
from sklearn.model_selection import StratifiedGroupKFold

from stopwise.guardian.conditions import DEFAULT_CONDITIONS
from stopwise.guardian.evaluators.rule import (
    MARKER_FAMILIES,
    IntegrityModel,
    LogisticMap,
    RuleEvaluator,
    integrity_markers,
    load_coefficients,
    normalise_untrusted,
)

HERE = Path(__file__).resolve().parent
DEVSET = HERE / "data" / "devset.jsonl"
DATA = HERE.parent / "src" / "stopwise" / "guardian" / "data"
BITS, NGRAM = 18, 2
SCAN_CHARS = 2000
COMBINED_FEATURES = (*MARKER_FAMILIES, "hidden_chars", "discussion", "model_logit")
MARKER_FEATURES = (*MARKER_FAMILIES, "hidden_chars", "discussion")


def load(split: str) -> tuple[list[str], np.ndarray, list[str], list[str]]:
    """Texts, labels, cross-validation groups and sources of one split's integrity records."""
    texts, labels, groups, sources = [], [], [], []
    with DEVSET.open(encoding="utf-8") as f:
        for line in f:
            r = json.loads(line)
            if r["condition"] == "integrity" and r["split"] == split:
                texts.append(r["tool_output"])
                labels.append(bool(r["label"]))
                groups.append(r["group"])
                sources.append(r["source"])
    return texts, np.array(labels, dtype=int), groups, sources


def matrix(texts: Sequence[str]) -> sparse.csr_matrix:
    """Binary hashed features, rows scaled to unit length: exactly what ``IntegrityModel.logit`` sums."""
    hasher = IntegrityModel("features", BITS, NGRAM, 0.0, {})
    rows, cols, vals = [], [], []
    for i, t in enumerate(texts):
        norm, _ = normalise_untrusted(t, SCAN_CHARS)
        buckets = sorted(hasher.features(norm))
        if not buckets:
            continue
        v = 1.0 / np.sqrt(len(buckets))
        rows.extend([i] * len(buckets))
        cols.extend(buckets)
        vals.extend([v] * len(buckets))
    return sparse.csr_matrix((vals, (rows, cols)), shape=(len(texts), 1 << BITS))


def marker_matrix(texts: Sequence[str], logits: np.ndarray | None, names: Sequence[str]) -> np.ndarray:
    out = np.zeros((len(texts), len(names)))
    for i, t in enumerate(texts):
        f: dict[str, float] = dict(integrity_markers(t, SCAN_CHARS))
        if logits is not None:
            f["model_logit"] = float(logits[i])
        out[i] = [f.get(n, 0.0) for n in names]
    return out


def recall_at_fpr(y: np.ndarray, score: np.ndarray, max_fpr: float = 0.05) -> tuple[float, float]:
    fpr, tpr, _ = roc_curve(y, score)
    ok = fpr <= max_fpr
    i = int(np.argmax(np.where(ok, tpr, -1.0)))
    return float(tpr[i]), float(fpr[i])


def fit_model(X: sparse.csr_matrix, y: np.ndarray, C: float) -> LogisticRegression:
    model = LogisticRegression(C=C, class_weight="balanced", max_iter=5000)
    model.fit(X, y)
    return model


def choose_c(X: sparse.csr_matrix, y: np.ndarray, groups: Sequence[str]) -> tuple[float, np.ndarray]:
    """The C with the best grouped-CV AUROC, and the out-of-fold logits at that C."""
    folds = list(StratifiedGroupKFold(n_splits=5, shuffle=True, random_state=0).split(X, y, groups))
    best: tuple[float, float, np.ndarray] = (-1.0, 0.0, np.zeros(len(y)))
    for C in (1.0, 4.0, 16.0, 64.0):
        oof = np.zeros(len(y))
        for tr, te in folds:
            oof[te] = fit_model(X[tr], y[tr], C).decision_function(X[te])
        auc = roc_auc_score(y, oof)
        print(f"  C={C:<5} grouped-CV AUROC {auc:.4f}")
        if auc > best[0]:
            best = (auc, C, oof)
    return best[1], best[2]


def model_data(model: LogisticRegression, C: float) -> dict[str, Any]:
    coef = model.coef_[0]
    weights = {int(j): round(float(coef[j]), 4) for j in np.flatnonzero(np.abs(coef) >= 5e-4)}
    weights = {k: v for k, v in weights.items() if v != 0.0}
    blob = json.dumps(sorted(weights.items())).encode()
    version = f"int-w{NGRAM}b{BITS}-{hashlib.sha256(blob).hexdigest()[:8]}"
    return {
        "version": version,
        "about": "Logistic regression over hashed word n-grams of normalised tool output (see IntegrityModel). "
        f"Trained by evals/train_integrity.py on the train split of evals/data/devset.jsonl, C={C}.",
        "bits": BITS,
        "ngram": NGRAM,
        "bias": round(float(model.intercept_[0]), 4),
        "weights": {str(k): v for k, v in sorted(weights.items())},
    }


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--no-write", action="store_true", help="do not write integrity_model.json")
    parser.add_argument("--write-coefficients", action="store_true", help="write the fitted combination too")
    args = parser.parse_args(argv)

    tr_texts, y_tr, tr_groups, tr_sources = load("train")
    te_texts, y_te, _, te_sources = load("test")
    print(f"train: {len(y_tr)} texts ({y_tr.sum()} with instructions) from {sorted(set(tr_sources))}")
    print(f"test:  {len(y_te)} texts ({y_te.sum()} with instructions) from {sorted(set(te_sources))}")
    X_tr, X_te = matrix(tr_texts), matrix(te_texts)

    print("model: choosing C by 5-fold cross-validation, texts sharing a planted part kept in one fold")
    C, oof = choose_c(X_tr, y_tr, tr_groups)
    model = fit_model(X_tr, y_tr, C)
    data = model_data(model, C)
    runtime = IntegrityModel.from_data(data)
    te_logit = np.array([runtime.logit(normalise_untrusted(t, SCAN_CHARS)[0]) for t in te_texts])
    # The pure-Python logit must agree with scikit-learn's (up to the rounding of the weights).
    drift = float(np.max(np.abs(te_logit - model.decision_function(X_te))))
    print(f"model: {len(data['weights'])} non-zero weights, {data['version']}; max |runtime - sklearn| = {drift:.4f}")

    # The markers alone and the combination, each a logistic map fitted on the train split.
    M_tr = marker_matrix(tr_texts, None, MARKER_FEATURES)
    M_te = marker_matrix(te_texts, None, MARKER_FEATURES)
    markers_only = LogisticRegression(C=1.0, class_weight="balanced", max_iter=5000).fit(M_tr, y_tr)
    K_tr = marker_matrix(tr_texts, oof, COMBINED_FEATURES)
    combiner = LogisticRegression(C=1.0, class_weight="balanced", max_iter=5000).fit(K_tr, y_tr)
    fitted = {
        "bias": round(float(combiner.intercept_[0]), 3),
        "weights": {n: round(float(w), 3) for n, w in zip(COMBINED_FEATURES, combiner.coef_[0], strict=True)},
    }
    print("combination fitted on out-of-fold logits:", json.dumps(fitted))

    if not args.no_write:
        (DATA / "integrity_model.json").write_text(json.dumps(data, indent=0) + "\n", encoding="utf-8")
        print(f"wrote {DATA / 'integrity_model.json'}")
    if args.write_coefficients:
        path = DATA / "rule_coefficients.json"
        coefficients = json.loads(path.read_text(encoding="utf-8"))
        coefficients["integrity"] = fitted
        path.write_text(json.dumps(coefficients, indent=2) + "\n", encoding="utf-8")
        print(f"wrote the integrity block of {path}; bump its version if it was already released")

    # The combination as shipped: whatever rule_coefficients.json holds now, with the model just fitted.
    shipped: LogisticMap = load_coefficients().integrity
    evaluator = RuleEvaluator(integrity_model=runtime)
    shipped_p = np.array([shipped.p(evaluator.text_integrity_features(t)) for t in te_texts])

    t_star = DEFAULT_CONDITIONS.by_name["integrity"].threshold
    # The operating point on the train split, with out-of-fold logits: where a hand-set bias is checked.
    train_p = np.array(
        [shipped.p({**integrity_markers(t, SCAN_CHARS), "model_logit": float(z)}) for t, z in zip(tr_texts, oof, strict=True)]  # noqa: E501
    )
    fires_tr = train_p >= t_star
    print(
        f"as shipped, TRAIN split (out-of-fold logits) at t*={t_star:.2f}: "
        f"recall {float(fires_tr[y_tr == 1].mean()):.3f}, FPR {float(fires_tr[y_tr == 0].mean()):.3f}"
    )
    print(f"\nTEST split ({len(y_te)} texts: {int(y_te.sum())} with instructions, {int((1 - y_te).sum())} without)")
    print(f"{'variant':32} {'AUROC':>7} {'recall@FPR<=0.05':>17} {'(FPR)':>7}")
    variants = {
        "markers alone (fitted map)": markers_only.decision_function(M_te),
        "model alone": te_logit,
        "markers + model (fitted now)": combiner.decision_function(
            marker_matrix(te_texts, te_logit, COMBINED_FEATURES)
        ),
        "markers + model (as shipped)": shipped_p,
    }
    for name, score in variants.items():
        recall, fpr = recall_at_fpr(y_te, score)
        print(f"{name:32} {roc_auc_score(y_te, score):7.4f} {recall:17.3f} {fpr:7.3f}")
    fires = shipped_p >= t_star
    tp = int((fires & (y_te == 1)).sum())
    fp = int((fires & (y_te == 0)).sum())
    print(
        f"as shipped at the policy threshold t*={t_star:.2f}: recall {tp / y_te.sum():.3f}, "
        f"FPR {fp / (1 - y_te).sum():.3f}"
    )
    print("\nper test source (as shipped, at t*):")
    for source in sorted(set(te_sources)):
        idx = np.array([g == source for g in te_sources])
        pos, neg = idx & (y_te == 1), idx & (y_te == 0)
        line = f"  {source:42} n={int(idx.sum()):4}"
        if pos.any():
            line += f"  recall {float(fires[pos].mean()):.3f} ({int(pos.sum())})"
        if neg.any():
            line += f"  FPR {float(fires[neg].mean()):.3f} ({int(neg.sum())})"
        print(line)
    misses = [(float(shipped_p[i]), te_texts[i]) for i in range(len(y_te)) if (y_te[i] == 1) != bool(fires[i])]
    if misses:
        print("\nerrors at t* (p, text):")
        for p, t in sorted(misses)[:40]:
            print(f"  {p:.3f}  {t[:150]!r}")


if __name__ == "__main__":
    sys.exit(main())
