"""Train the integrity model (windowed hashed n-grams) and the map that combines it with the markers.

    pip install numpy scipy scikit-learn            # dev tools only; the runtime model is pure Python
    python evals/build_devset.py                    # if evals/data/devset.jsonl is missing or stale
    python evals/build_integrity.py                 # if evals/data/integrity.jsonl is missing or stale
    python evals/train_integrity.py                 # fit on the train split, write integrity_model.json
    python evals/train_integrity.py --no-write      # fit and report only
    python evals/train_integrity.py --write-coefficients   # also write the fitted combination into
                                                           # rule_coefficients.json's "integrity" block

Only the ``train`` split is read (``evals/_integrity_data.py``: the development set's integrity records and the
integrity corpus); ``evals/eval_integrity.py`` reports on the held-out corpora.

The model (``IntegrityModel`` in ``stopwise/guardian/evaluators/_integrity.py``) scores overlapping windows of a
text and keeps the highest, so it is trained on windows: every window of a clean text is a negative (at most
``MAX_WINDOWS`` per text, evenly spaced), and of a text with a planted injection only the windows that overlap the
planted span are positives (a text that is an attack as a whole: all of its windows). The window length and the
regularisation are chosen by 5-fold cross-validation on the train split, each fold leaving whole corpora out,
scored at the text level (the highest window, as at run time) by AUROC.

The combination is a logistic map over the marker features, ``trivial`` and the model's logit, fitted on the
leave-corpora-out logits of the train split (so it does not learn to trust an over-fitted logit), its intercept
then moved to the base rate ``BASE_RATE``; the weight of ``trivial`` is set (``TRIVIAL_WEIGHT``), not fitted.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from scipy import sparse
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import GroupKFold

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _integrity_data import Item, load_items

from stopwise.guardian.evaluators._integrity import (
    MARKER_FAMILIES,
    IntegrityModel,
    _read,
    integrity_markers,
    is_trivial,
    normalise_untrusted,
)

HERE = Path(__file__).resolve().parent
DATA = HERE.parent / "src" / "stopwise" / "guardian" / "data"
BITS, NGRAM = 18, 2
READ_CHARS = 8000
MAX_WINDOWS = 24
WINDOWS = ((16, 8), (32, 16))
CS = (2.0, 16.0)
BASE_RATE = 0.05
"""The share of injected results the shipped probabilities assume. The train split holds far more (about 17%): the
fitted intercept is moved from its rate to this one (the prior correction of a logistic model), so a result with
no evidence answers about 2-3%, below the integrity condition's uncertain band (t* 0.10 +- 0.05), instead of
sitting in it."""
TRIVIAL_WEIGHT = -20.0
"""Set, not fitted: a trivial result cannot carry an instruction, whatever the train split's few examples say."""
COMBINED_FEATURES = (*MARKER_FAMILIES, "hidden_chars", "misspelt", "discussion", "trivial", "model_logit")


class Tokenised:
    """One item's tokens (normalised, respelt) and, for a planted injection, the token span it covers."""

    def __init__(self, item: Item) -> None:
        self.trivial = is_trivial(item.text)
        self.words = _read(normalise_untrusted(item.text, READ_CHARS)[0]).words
        self.span: tuple[int, int] | None = None
        if item.span is not None:
            # Token offsets of the planted part: the tokens of the text before it, and up to its end.
            lo = len(_read(normalise_untrusted(item.text[: item.span[0]], READ_CHARS)[0]).words)
            hi = len(_read(normalise_untrusted(item.text[: item.span[1]], READ_CHARS)[0]).words)
            self.span = (lo, max(hi, lo + 1))


def window_rows(
    shape: IntegrityModel, items: Sequence[Item], tok: Sequence[Tokenised]
) -> tuple[sparse.csr_matrix, np.ndarray, np.ndarray]:
    """The training windows: feature rows, labels and the index of the item each window comes from."""
    rows, cols, vals, labels, owner = [], [], [], [], []
    r = 0
    for i, (item, t) in enumerate(zip(items, tok, strict=True)):
        if t.trivial or not t.words:
            continue
        grams = shape.grams(t.words)
        spans = shape.windows(len(t.words))
        if item.label and t.span is not None:
            spans = [(s, e) for s, e in spans if s < t.span[1] and e > t.span[0]]
        elif len(spans) > MAX_WINDOWS:
            step = len(spans) / MAX_WINDOWS
            spans = [spans[int(k * step)] for k in range(MAX_WINDOWS)]
        for s, e in spans:
            buckets = shape.window_grams(grams, s, e)
            if not buckets:
                continue
            v = 1.0 / np.sqrt(len(buckets))
            rows.extend([r] * len(buckets))
            cols.extend(buckets)
            vals.extend([v] * len(buckets))
            labels.append(int(item.label))
            owner.append(i)
            r += 1
    X = sparse.csr_matrix((vals, (rows, cols)), shape=(r, 1 << BITS))  # duplicates are summed: counts
    return X, np.array(labels), np.array(owner)


def text_logits(shape: IntegrityModel, coef: np.ndarray, bias: float, tok: Sequence[Tokenised]) -> np.ndarray:
    """The run-time logit (highest window) of each item under weights ``coef``; 0 for trivial items."""
    weights = {int(j): float(coef[j]) for j in np.flatnonzero(coef)}
    model = IntegrityModel("cv", BITS, NGRAM, bias, weights, shape.window, shape.stride)
    return np.array([0.0 if t.trivial else model.logit(t.words) for t in tok])


def fit(X: sparse.csr_matrix, y: np.ndarray, C: float) -> LogisticRegression:
    return LogisticRegression(C=C, class_weight="balanced", max_iter=5000).fit(X, y)


def choose(
    items: Sequence[Item], tok: Sequence[Tokenised], grid: Sequence[tuple[int, int, float]]
) -> tuple[IntegrityModel, float, np.ndarray]:
    """The window shape and C of ``grid`` with the best grouped-CV text-level AUROC, and the out-of-fold logits."""
    y = np.array([int(i.label) for i in items])
    # Folds leave whole corpora out: the logits the combination is fitted on are those of texts from a corpus the
    # model never saw, which is how it meets a user's tool output (the held-out corpora are scored the same way).
    groups = [i.corpus for i in items]
    folds = list(GroupKFold(n_splits=5).split(np.zeros(len(items)), y, groups))
    best: tuple[float, IntegrityModel, float, np.ndarray] | None = None
    for window, stride in dict.fromkeys((w, s) for w, s, _ in grid):
        shape = IntegrityModel("shape", BITS, NGRAM, 0.0, {}, window, stride)
        X, wy, owner = window_rows(shape, items, tok)
        for C in (c for w, s, c in grid if (w, s) == (window, stride)):
            oof = np.zeros(len(items))
            for tr, te in folds:
                in_tr = np.isin(owner, tr)
                m = fit(X[in_tr], wy[in_tr], C)
                sub = [tok[k] for k in te]
                oof[te] = text_logits(shape, m.coef_[0], float(m.intercept_[0]), sub)
            auc = roc_auc_score(y, oof)
            print(f"  window {window:3}/{stride:<3} C={C:<5} grouped-CV text AUROC {auc:.4f}")
            if best is None or auc > best[0]:
                best = (auc, shape, C, oof)
    assert best is not None
    return best[1], best[2], best[3]


def model_data(shape: IntegrityModel, model: LogisticRegression, C: float) -> dict[str, Any]:
    coef = model.coef_[0]
    weights = {int(j): round(float(coef[j]), 4) for j in np.flatnonzero(np.abs(coef) >= 5e-4)}
    weights = {k: v for k, v in weights.items() if v != 0.0}
    blob = json.dumps([shape.window, shape.stride, sorted(weights.items())]).encode()
    version = f"int-w{NGRAM}b{BITS}x{shape.window}-{hashlib.sha256(blob).hexdigest()[:8]}"
    return {
        "version": version,
        "about": "Logistic regression over hashed word n-grams of normalised tool output, scored in windows (see "
        "IntegrityModel). Trained by evals/train_integrity.py on the train split of evals/data/devset.jsonl and "
        f"evals/data/integrity.jsonl, C={C}.",
        "bits": BITS,
        "ngram": NGRAM,
        "window": shape.window,
        "stride": shape.stride,
        "bias": round(float(model.intercept_[0]), 4),
        "weights": {str(k): v for k, v in sorted(weights.items())},
    }


def combined_matrix(items: Sequence[Item], logits: np.ndarray) -> np.ndarray:
    out = np.zeros((len(items), len(COMBINED_FEATURES)))
    for i, item in enumerate(items):
        f: dict[str, float] = (
            {"trivial": 1.0} if is_trivial(item.text) else {**integrity_markers(item.text, READ_CHARS)}
        )
        f["model_logit"] = float(logits[i])
        out[i] = [f.get(n, 0.0) for n in COMBINED_FEATURES]
    return out


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--no-write", action="store_true", help="do not write integrity_model.json")
    parser.add_argument("--write-coefficients", action="store_true", help="write the fitted combination too")
    parser.add_argument("--only", metavar="WINDOW/STRIDE/C", help="skip the search: fit this one (e.g. 16/8/16)")
    args = parser.parse_args(argv)
    grid = [(w, s, c) for w, s in WINDOWS for c in CS]
    if args.only:
        w, s, c = args.only.split("/")
        grid = [(int(w), int(s), float(c))]

    items = load_items("train")
    y = np.array([int(i.label) for i in items])
    corpora = sorted({i.corpus for i in items})
    print(f"train: {len(items)} texts ({int(y.sum())} with instructions) from {corpora}")
    tok = [Tokenised(i) for i in items]

    print("model: choosing the window and C by 5-fold cross-validation leaving whole corpora out")
    shape, C, oof = choose(items, tok, grid)
    X, wy, _ = window_rows(shape, items, tok)
    model = fit(X, wy, C)
    data = model_data(shape, model, C)
    print(f"model: window {shape.window}/{shape.stride}, C={C}, {len(data['weights'])} weights, {data['version']}")

    # Fitted at the train split's own base rate (no class weights): the map's output is meant as a probability.
    K = combined_matrix(items, oof)
    fit_rows = K[:, COMBINED_FEATURES.index("trivial")] == 0
    combiner = LogisticRegression(C=1.0, max_iter=5000).fit(K[fit_rows], y[fit_rows])
    weights = {n: round(float(w), 3) for n, w in zip(COMBINED_FEATURES, combiner.coef_[0], strict=True)}
    weights["trivial"] = TRIVIAL_WEIGHT
    train_rate = float(y[fit_rows].mean())
    shift = math.log(BASE_RATE / (1 - BASE_RATE)) - math.log(train_rate / (1 - train_rate))
    fitted = {"bias": round(float(combiner.intercept_[0]) + shift, 3), "weights": weights}
    print(f"combination: intercept moved by {shift:+.3f} from the train split's rate {train_rate:.3f} to {BASE_RATE}")
    print("combination fitted on out-of-fold logits:", json.dumps(fitted))
    combined = K @ np.array([weights[n] for n in COMBINED_FEATURES]) + fitted["bias"]
    alone, both = roc_auc_score(y, oof), roc_auc_score(y, combined)
    print(f"train, out-of-fold AUROC: model alone {alone:.4f}, combined {both:.4f}")

    if not args.no_write:
        (DATA / "integrity_model.json").write_text(json.dumps(data, indent=0) + "\n", encoding="utf-8")
        print(f"wrote {DATA / 'integrity_model.json'}")
    if args.write_coefficients:
        path = DATA / "rule_coefficients.json"
        coefficients = json.loads(path.read_text(encoding="utf-8"))
        coefficients["integrity"] = fitted
        path.write_text(json.dumps(coefficients, indent=1) + "\n", encoding="utf-8")
        print(f"wrote the integrity block of {path}; bump its version if it was already released")


if __name__ == "__main__":
    sys.exit(main())
