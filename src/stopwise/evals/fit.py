"""Fitting calibration maps on labelled predictions (scikit-learn and numpy: the ``eval`` extra).

``fit_map`` fits one condition; ``fit_calibration`` fits every condition of a set of predictions (the training
split) into a ``Calibration`` that ``CalibratedEvaluator`` applies without scikit-learn.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from stopwise.evals._extra import missing_extra

try:
    import numpy as np
    from sklearn.isotonic import IsotonicRegression  # type: ignore[import-untyped]
    from sklearn.linear_model import LogisticRegression  # type: ignore[import-untyped]
    from sklearn.model_selection import StratifiedKFold  # type: ignore[import-untyped]
except ImportError as exc:  # say what to install, not just "no module named 'numpy'"
    raise missing_extra(__name__, exc) from exc

from stopwise.evals.calibration import Calibration, CalibrationMap
from stopwise.evals.run import Prediction, answered, by_condition

__all__ = ["FitMethod", "fit_calibration", "fit_map"]

FitMethod = Literal["platt", "isotonic", "auto"]

_EPS = 1e-6
# Below this many records of the rarer class, isotonic regression follows the noise: auto keeps Platt's two
# parameters.
_MIN_MINORITY_FOR_ISOTONIC = 15


def _platt(p: np.ndarray[Any, Any], y: np.ndarray[Any, Any], fires_on: tuple[str, ...]) -> CalibrationMap:
    q = np.clip(p, _EPS, 1 - _EPS)
    z = np.log(q / (1 - q)).reshape(-1, 1)
    # A mild L2 penalty: it barely moves two parameters fitted on a hundred records, but it keeps the slope finite
    # on separable data, where an unpenalised fit would map every probability to 0 or 1.
    model = LogisticRegression(C=1.0)
    model.fit(z, y)
    return CalibrationMap("platt", fires_on, a=float(model.coef_[0][0]), b=float(model.intercept_[0]), eps=_EPS)


def _isotonic(p: np.ndarray[Any, Any], y: np.ndarray[Any, Any], fires_on: tuple[str, ...]) -> CalibrationMap:
    model = IsotonicRegression(y_min=0.0, y_max=1.0, increasing=True, out_of_bounds="clip")
    model.fit(p, y)
    xs = [float(v) for v in model.X_thresholds_]
    ys = [min(1.0, max(0.0, float(v))) for v in model.y_thresholds_]
    return CalibrationMap("isotonic", fires_on, x=tuple(xs), y=tuple(ys))


def _brier_cv(method: str, p: np.ndarray[Any, Any], y: np.ndarray[Any, Any], fires_on: tuple[str, ...]) -> float:
    folds = StratifiedKFold(n_splits=5, shuffle=True, random_state=0)
    errors = []
    for train, test in folds.split(p.reshape(-1, 1), y):
        m = _platt(p[train], y[train], fires_on) if method == "platt" else _isotonic(p[train], y[train], fires_on)
        q = np.array([m(float(v)) for v in p[test]])
        errors.append(np.mean((q - y[test]) ** 2))
    return float(np.mean(errors))


def fit_map(
    p: Sequence[float], y: Sequence[bool], fires_on: tuple[str, ...], method: FitMethod = "platt"
) -> CalibrationMap:
    """One condition's map fitted on probabilities ``p`` and labels ``y``.

    ``auto`` picks, by 5-fold cross-validated Brier score on the same data, between Platt and isotonic; it keeps
    Platt when the rarer class has fewer than 15 records. One class only (or no data) gives an ``identity`` map,
    its ``info`` saying why. ``info`` holds the counts and, for ``auto``, the cross-validated scores.
    """
    pa = np.asarray(p, dtype=np.float64)
    ya = np.asarray(y, dtype=np.int64)
    positives = int(ya.sum())
    info: dict[str, Any] = {"train": {"n": int(pa.size), "positives": positives}}
    minority = min(positives, int(pa.size) - positives)
    if minority == 0:
        info["note"] = "not fitted: the training data has one class only"
        return CalibrationMap("identity", fires_on, info=info)
    chosen: str = method
    if method == "auto":
        if minority < _MIN_MINORITY_FOR_ISOTONIC:
            chosen = "platt"
            info["auto"] = f"platt: only {minority} records of the rarer class"
        else:
            scores = {m: _brier_cv(m, pa, ya, fires_on) for m in ("platt", "isotonic")}
            chosen = min(scores, key=lambda m: (scores[m], m != "platt"))
            info["auto"] = {f"cv_brier_{m}": round(s, 6) for m, s in scores.items()}
    fitted = _platt(pa, ya, fires_on) if chosen == "platt" else _isotonic(pa, ya, fires_on)
    return CalibrationMap(fitted.method, fires_on, fitted.a, fitted.b, fitted.eps, fitted.x, fitted.y, info)


def fit_calibration(
    items: Sequence[Prediction],
    *,
    method: FitMethod = "platt",
    evaluator: str = "",
    model_version: str = "",
    question_set_version: str = "",
    fitted_on: Mapping[str, Any] | None = None,
) -> Calibration:
    """A map per condition of ``items`` (answered predictions only), fitted with ``method``."""
    maps: dict[str, CalibrationMap] = {}
    for name, group in by_condition(items).items():
        ps, ys = answered(group)
        maps[name] = fit_map(ps, ys, tuple(group[0].condition.fires_on), method)
    return Calibration(maps, evaluator, model_version, question_set_version, dict(fitted_on or {}) | {"method": method})
