"""Calibration and decision metrics for one condition: the probability that it holds against whether it did.

Every function takes ``p`` (probabilities in [0, 1]) and ``y`` (0/1 or bools) of the same length and needs
numpy (the ``eval`` extra). Definitions, pinned by tests against hand-computed values:

- **reliability bins**: ``bins`` equal-width bins over [0, 1]; bin ``k`` holds ``k/bins <= p < (k+1)/bins``,
  the last one also ``p == 1``. Per bin: the count, the mean probability and the observed frequency.
- **ECE**: ``sum_k (n_k / n) * |observed_k - mean_p_k|`` over the non-empty bins. **MCE**: the largest
  ``|observed_k - mean_p_k|`` over the non-empty bins.
- **Brier score**: ``mean((p - y) ** 2)``.
- **ECE floor**: the mean ECE of a perfectly calibrated evaluator giving the same probabilities (labels drawn
  as ``Bernoulli(p)``, 200 draws, a fixed seed). With a few dozen records ECE is biased upwards; an ECE near its
  floor is as calibrated as the data can show.
- **AUROC**: the probability that a random positive gets a higher ``p`` than a random negative, ties counting
  one half (Mann-Whitney); None when only one class is present.
- **expected cost** of a threshold ``t``: the condition fires when ``p > t`` (as ``ThresholdPolicy`` reads it);
  ``(C_stop * false fires + C_cont * missed fires) / n``.
- **recommended threshold**: the cost-minimising threshold on the data. The cost only changes at the observed
  probabilities, so it is constant on intervals ``[u_i, u_{i+1})`` between consecutive distinct values (from 0,
  up to 1); the recommendation is the middle of the cheapest interval (ties: the one nearest ``t*``), which is as
  far as the data allows from flipping a decision it has seen.

With no data every metric is None.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from stopwise.evals._extra import missing_extra

try:
    import numpy as np
    import numpy.typing as npt
except ImportError as exc:  # say what to install, not just "no module named 'numpy'"
    raise missing_extra(__name__, exc) from exc

__all__ = [
    "Bin",
    "ConditionMetrics",
    "ThresholdChoice",
    "auroc",
    "brier",
    "condition_metrics",
    "ece",
    "ece_at_prior",
    "ece_floor",
    "expected_cost",
    "mce",
    "recommend_threshold",
    "reliability",
]

FloatArray = npt.NDArray[np.float64]
ArrayLike = npt.ArrayLike


@dataclass(frozen=True, slots=True)
class Bin:
    """One bin of a reliability curve."""

    lo: float
    hi: float
    count: int
    mean_p: float | None
    """Mean predicted probability in the bin; None when empty."""
    observed: float | None
    """Fraction of the bin's records where the condition held; None when empty."""

    def to_data(self) -> dict[str, Any]:
        return {"lo": self.lo, "hi": self.hi, "count": self.count, "mean_p": self.mean_p, "observed": self.observed}


def _arrays(p: ArrayLike, y: ArrayLike) -> tuple[FloatArray, FloatArray]:
    pa = np.asarray(p, dtype=np.float64).ravel()
    ya = np.asarray(y, dtype=np.float64).ravel()
    if pa.shape != ya.shape:
        raise ValueError(f"p and y differ in length: {pa.size} != {ya.size}")
    if pa.size and (np.isnan(pa).any() or pa.min() < 0 or pa.max() > 1):
        raise ValueError("probabilities must lie in [0, 1]")
    return pa, ya


def _binned(pa: FloatArray, ya: FloatArray, bins: int) -> tuple[npt.NDArray[np.int64], FloatArray, FloatArray]:
    index = np.minimum((pa * bins).astype(np.int64), bins - 1)
    counts = np.bincount(index, minlength=bins).astype(np.int64)
    sum_p = np.bincount(index, weights=pa, minlength=bins).astype(np.float64)
    sum_y = np.bincount(index, weights=ya, minlength=bins).astype(np.float64)
    return counts, sum_p, sum_y


def reliability(p: ArrayLike, y: ArrayLike, bins: int = 10) -> list[Bin]:
    """The reliability curve: one ``Bin`` per equal-width bin, empty ones included."""
    pa, ya = _arrays(p, y)
    counts, sum_p, sum_y = _binned(pa, ya, bins)
    out = []
    for k in range(bins):
        n = int(counts[k])
        out.append(
            Bin(
                k / bins,
                (k + 1) / bins,
                n,
                float(sum_p[k] / n) if n else None,
                float(sum_y[k] / n) if n else None,
            )
        )
    return out


def _gaps(pa: FloatArray, ya: FloatArray, bins: int) -> tuple[FloatArray, FloatArray]:
    counts, sum_p, sum_y = _binned(pa, ya, bins)
    full = counts > 0
    n = counts[full].astype(np.float64)
    return np.abs(sum_y[full] / n - sum_p[full] / n), n


def ece(p: ArrayLike, y: ArrayLike, bins: int = 10) -> float | None:
    """Expected calibration error over ``bins`` equal-width bins."""
    pa, ya = _arrays(p, y)
    if not pa.size:
        return None
    gaps, n = _gaps(pa, ya, bins)
    return float(np.sum(gaps * n) / pa.size)


def ece_at_prior(p: ArrayLike, y: ArrayLike, prior: float, bins: int = 10) -> float | None:
    """ECE with the classes reweighted so that a share ``prior`` of the records is positive.

    A probability that assumes a base rate (the integrity answer assumes 5% of tool results injected) is judged
    on a corpus assembled at another rate (half of BIPIA's results are injected) by the calibration error a user
    meets at the assumed rate. None without both classes: a corpus of one class has no rate to move."""
    if not 0 < prior < 1:
        raise ValueError(f"prior must lie strictly between 0 and 1, not {prior}")
    pa, ya = _arrays(p, y)
    share = float(ya.mean()) if pa.size else 0.0
    if share in (0.0, 1.0):
        return None
    weights = np.where(ya > 0.5, prior / share, (1 - prior) / (1 - share))
    index = np.minimum((pa * bins).astype(np.int64), bins - 1)
    mass = np.bincount(index, weights=weights, minlength=bins)
    sum_p = np.bincount(index, weights=weights * pa, minlength=bins)
    sum_y = np.bincount(index, weights=weights * ya, minlength=bins)
    full = mass > 0
    return float(np.sum(np.abs(sum_y[full] - sum_p[full])) / mass.sum())


def ece_floor(p: ArrayLike, bins: int = 10, draws: int = 200, seed: int = 0) -> float | None:
    """The mean ECE of labels drawn from ``p`` itself: what a perfectly calibrated evaluator scores on this many
    records with these probabilities."""
    pa = np.asarray(p, dtype=np.float64).ravel()
    if not pa.size:
        return None
    rng = np.random.default_rng(seed)
    index = np.minimum((pa * bins).astype(np.int64), bins - 1)
    counts = np.bincount(index, minlength=bins)
    full = counts > 0
    sum_p = np.bincount(index, weights=pa, minlength=bins)[full]
    ys = rng.random((draws, pa.size)) < pa
    # Per draw, per bin: the observed count, summed in one pass over all draws.
    offsets = (np.arange(draws) * bins)[:, None] + index[None, :]
    sum_y = np.bincount(offsets.ravel(), weights=ys.ravel().astype(np.float64), minlength=draws * bins)
    sum_y = sum_y.reshape(draws, bins)[:, full]
    return float(np.mean(np.sum(np.abs(sum_y - sum_p), axis=1) / pa.size))


def mce(p: ArrayLike, y: ArrayLike, bins: int = 10) -> float | None:
    """Maximum calibration error: the worst non-empty bin."""
    pa, ya = _arrays(p, y)
    if not pa.size:
        return None
    gaps, _ = _gaps(pa, ya, bins)
    return float(gaps.max())


def brier(p: ArrayLike, y: ArrayLike) -> float | None:
    """Mean squared difference between the probability and the outcome."""
    pa, ya = _arrays(p, y)
    if not pa.size:
        return None
    return float(np.mean((pa - ya) ** 2))


def auroc(p: ArrayLike, y: ArrayLike) -> float | None:
    """Area under the ROC curve from the ranks of ``p`` (ties averaged); None with one class only."""
    pa, ya = _arrays(p, y)
    positive = ya > 0.5
    n_pos = int(positive.sum())
    n_neg = pa.size - n_pos
    if n_pos == 0 or n_neg == 0:
        return None
    _, inverse, counts = np.unique(pa, return_inverse=True, return_counts=True)
    # 1-based rank of each distinct value, averaged over its ties.
    upper = np.cumsum(counts)
    ranks = (upper - (counts - 1) / 2.0)[inverse]
    return float((ranks[positive].sum() - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg))


def expected_cost(
    p: ArrayLike, y: ArrayLike, threshold: float, cost_false_stop: float, cost_false_continue: float
) -> float | None:
    """Mean cost per record when the condition fires above ``threshold`` (``p > threshold``)."""
    pa, ya = _arrays(p, y)
    if not pa.size:
        return None
    fire = pa > threshold
    positive = ya > 0.5
    false_stops = int(np.sum(fire & ~positive))
    false_continues = int(np.sum(~fire & positive))
    return (cost_false_stop * false_stops + cost_false_continue * false_continues) / pa.size


@dataclass(frozen=True, slots=True)
class ThresholdChoice:
    """The cost-minimising threshold on the data."""

    threshold: float
    """The middle of the cheapest interval of thresholds (fire when ``p > threshold``)."""
    cost: float
    """Mean cost per record at ``threshold``."""
    lo: float
    """Every threshold in ``[lo, hi)`` costs the same on this data."""
    hi: float


def recommend_threshold(
    p: ArrayLike, y: ArrayLike, cost_false_stop: float, cost_false_continue: float, t_star: float | None = None
) -> ThresholdChoice | None:
    """The threshold that minimises the mean cost on the data (see the module docstring); ``t_star`` (default:
    the costs' ``C_stop / (C_stop + C_cont)``) breaks ties between equally cheap intervals."""
    pa, ya = _arrays(p, y)
    if not pa.size:
        return None
    if t_star is None:
        t_star = cost_false_stop / (cost_false_stop + cost_false_continue)
    values, inverse = np.unique(pa, return_inverse=True)
    positive = ya > 0.5
    pos_at = np.bincount(inverse, weights=positive.astype(np.float64), minlength=values.size)
    neg_at = np.bincount(inverse, weights=(~positive).astype(np.float64), minlength=values.size)
    n_neg = neg_at.sum()
    # Threshold at values[i]: fires on p > values[i]; misses every positive at or below it.
    missed = np.cumsum(pos_at)
    false_fires = n_neg - np.cumsum(neg_at)
    lows = values
    highs = np.append(values[1:], 1.0)
    costs = cost_false_stop * false_fires + cost_false_continue * missed
    if values[0] > 0:
        # Thresholds below the smallest probability fire on everything.
        lows = np.insert(lows, 0, 0.0)
        highs = np.insert(highs, 0, values[0])
        costs = np.insert(costs, 0, cost_false_stop * n_neg)
    best = costs.min()
    cheapest = np.flatnonzero(np.isclose(costs, best, rtol=1e-12, atol=1e-12))
    middles = (lows[cheapest] + highs[cheapest]) / 2.0
    i = int(cheapest[int(np.argmin(np.abs(middles - t_star)))])
    return ThresholdChoice(
        float((lows[i] + highs[i]) / 2.0), float(costs[i] / pa.size), float(lows[i]), float(highs[i])
    )


@dataclass(frozen=True, slots=True)
class ConditionMetrics:
    """Everything the harness reports for one condition."""

    condition: str
    n: int
    """Records with an answer (the metrics are over these)."""
    positives: int
    negatives: int
    uncertain: int
    """Records the evaluator could not answer (timeout, error, malformed): left out of the metrics."""
    skipped: int
    """Records not asked (text-only for a structure-reading evaluator, a label the question does not have)."""
    bins: tuple[Bin, ...]
    ece: float | None
    ece_floor: float | None
    """The ECE a perfectly calibrated evaluator would score on these records (see the module docstring)."""
    mce: float | None
    brier: float | None
    auroc: float | None
    t_star: float
    """The theoretical threshold ``C_stop / (C_stop + C_cont)``."""
    cost_false_stop: float
    cost_false_continue: float
    cost_at_t_star: float | None
    """Mean cost per record on this data when firing above ``t_star``."""
    recommended: ThresholdChoice | None
    band_rate: float | None
    """Fraction of records within ``delta`` of ``t_star``: how often the policy would escalate on this data."""

    def to_data(self) -> dict[str, Any]:
        rec = self.recommended
        return {
            "condition": self.condition,
            "n": self.n,
            "positives": self.positives,
            "negatives": self.negatives,
            "uncertain": self.uncertain,
            "skipped": self.skipped,
            "ece": self.ece,
            "ece_floor": self.ece_floor,
            "mce": self.mce,
            "brier": self.brier,
            "auroc": self.auroc,
            "bins": [b.to_data() for b in self.bins],
            "threshold": {
                "t_star": self.t_star,
                "cost_false_stop": self.cost_false_stop,
                "cost_false_continue": self.cost_false_continue,
                "cost_at_t_star": self.cost_at_t_star,
                "recommended": None if rec is None else rec.threshold,
                "recommended_range": None if rec is None else [rec.lo, rec.hi],
                "cost_at_recommended": None if rec is None else rec.cost,
                "band_rate": self.band_rate,
            },
        }


def condition_metrics(
    condition: str,
    p: Sequence[float] | FloatArray,
    y: Sequence[bool] | Sequence[int] | FloatArray,
    *,
    cost_false_stop: float,
    cost_false_continue: float,
    delta: float = 0.0,
    uncertain: int = 0,
    skipped: int = 0,
    bins: int = 10,
) -> ConditionMetrics:
    """Every metric of one condition from its answered records."""
    pa, ya = _arrays(p, y)
    t_star = cost_false_stop / (cost_false_stop + cost_false_continue)
    positives = int(np.sum(ya > 0.5))
    return ConditionMetrics(
        condition=condition,
        n=int(pa.size),
        positives=positives,
        negatives=int(pa.size) - positives,
        uncertain=uncertain,
        skipped=skipped,
        bins=tuple(reliability(pa, ya, bins)),
        ece=ece(pa, ya, bins),
        ece_floor=ece_floor(pa, bins),
        mce=mce(pa, ya, bins),
        brier=brier(pa, ya),
        auroc=auroc(pa, ya),
        t_star=t_star,
        cost_false_stop=cost_false_stop,
        cost_false_continue=cost_false_continue,
        cost_at_t_star=expected_cost(pa, ya, t_star, cost_false_stop, cost_false_continue),
        recommended=recommend_threshold(pa, ya, cost_false_stop, cost_false_continue, t_star),
        band_rate=float(np.mean(np.abs(pa - t_star) <= delta)) if pa.size else None,
    )
