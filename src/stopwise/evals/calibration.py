"""Per-condition calibration maps, saved as a versioned JSON file and applied in pure Python.

A map takes the probability that a condition holds, as an evaluator gave it, to a calibrated one:

- ``platt``: ``q = sigmoid(a * logit(p) + b)``, with ``p`` clipped to ``[eps, 1 - eps]`` first;
- ``isotonic``: a non-decreasing piecewise-linear map through the breakpoints ``(x, y)``, flat beyond the ends
  (the same reading as scikit-learn's ``IsotonicRegression(out_of_bounds="clip")``);
- ``identity``: left as it is (a condition with one class only in its training data cannot be fitted).

Fitting lives in ``stopwise.evals.fit`` (scikit-learn); applying a file needs nothing beyond the standard library,
so a guardian in production can use ``CalibratedEvaluator`` without the ``eval`` extra.

The file::

    {"format": "stopwise-calibration", "format_version": 1, "version": "cal-<content hash>",
     "evaluator": "rules", "model_version": "rules-h1/v3", "question_set_version": "qs-...",
     "conditions": {"integrity": {"method": "platt", "fires_on": ["yes"], "a": 1.3, "b": -0.2, "eps": 1e-06,
                                  "train": {...}, "heldout": {...}}, ...},
     "fitted_on": {...}}

``version`` is a hash of the maps alone, so refitting on the same data gives the same file and any change of a
map gives a new version, which ``CalibratedEvaluator`` adds to ``Answers.model_version`` (and so to every
decision record).
"""

from __future__ import annotations

import bisect
import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from stopwise.errors import ConfigError
from stopwise.guardian.answers import Answer, Answers, Evaluator
from stopwise.guardian.conditions import QuestionSet
from stopwise.guardian.projection import Projection

__all__ = ["CalibratedEvaluator", "Calibration", "CalibrationMap", "load_calibration"]

FORMAT = "stopwise-calibration"
FORMAT_VERSION = 1

Method = Literal["platt", "isotonic", "identity"]


@dataclass(frozen=True, slots=True)
class CalibrationMap:
    """One condition's map from the evaluator's probability to a calibrated one."""

    method: Method
    fires_on: tuple[str, ...]
    """The answer labels whose probability is mapped (the condition's ``fires_on`` when fitted)."""
    a: float = 1.0
    """Platt slope on the logit."""
    b: float = 0.0
    """Platt intercept."""
    eps: float = 1e-6
    """Platt clips ``p`` to ``[eps, 1 - eps]`` so that 0 and 1 have a logit."""
    x: tuple[float, ...] = ()
    """Isotonic breakpoints (increasing)."""
    y: tuple[float, ...] = ()
    """Isotonic values at the breakpoints (non-decreasing, in [0, 1])."""
    info: Mapping[str, Any] = field(default_factory=dict)
    """What the fit reported (counts, ECE before and after); kept in the file, not used to map."""

    def __post_init__(self) -> None:
        if self.method not in ("platt", "isotonic", "identity"):
            raise ConfigError("calibration.method", f"must be platt, isotonic or identity, got {self.method!r}")
        if self.method == "platt":
            for name in ("a", "b", "eps"):
                value = getattr(self, name)
                if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                    raise ConfigError(f"calibration.{name}", f"must be a finite number, got {value!r}")
            if not 0 < self.eps < 0.5:
                raise ConfigError("calibration.eps", f"must be in (0, 0.5), got {self.eps!r}")
        if self.method == "isotonic":
            if not self.x or len(self.x) != len(self.y):
                raise ConfigError("calibration.x", "isotonic needs as many breakpoints x as values y, at least one")
            if any(b < a for a, b in zip(self.x, self.x[1:], strict=False)):
                raise ConfigError("calibration.x", "isotonic breakpoints must be increasing")
            if any(b < a for a, b in zip(self.y, self.y[1:], strict=False)) or not all(0 <= v <= 1 for v in self.y):
                raise ConfigError("calibration.y", "isotonic values must be non-decreasing, in [0, 1]")

    def __call__(self, p: float) -> float:
        """The calibrated probability of ``p``."""
        if self.method == "platt":
            q = min(1.0 - self.eps, max(self.eps, p))
            return _sigmoid(self.a * math.log(q / (1.0 - q)) + self.b)
        if self.method == "isotonic":
            return _interpolate(self.x, self.y, p)
        return p

    def params(self) -> dict[str, Any]:
        """What the map does, without ``info``."""
        data: dict[str, Any] = {"method": self.method, "fires_on": list(self.fires_on)}
        if self.method == "platt":
            data |= {"a": self.a, "b": self.b, "eps": self.eps}
        elif self.method == "isotonic":
            data |= {"x": list(self.x), "y": list(self.y)}
        return data

    def to_data(self) -> dict[str, Any]:
        return dict(self.info) | self.params()

    @classmethod
    def from_data(cls, where: str, d: Mapping[str, Any]) -> CalibrationMap:
        if not isinstance(d, Mapping):
            raise ConfigError(where, "must be an object")
        fires_on = d.get("fires_on")
        if not isinstance(fires_on, list) or not fires_on or not all(isinstance(x, str) for x in fires_on):
            raise ConfigError(f"{where}.fires_on", "must be a non-empty list of answer labels")
        known = {"method", "fires_on", "a", "b", "eps", "x", "y"}
        try:
            return cls(
                d.get("method", ""),
                tuple(fires_on),
                float(d.get("a", 1.0)),
                float(d.get("b", 0.0)),
                float(d.get("eps", 1e-6)),
                tuple(float(v) for v in d.get("x", ())),
                tuple(float(v) for v in d.get("y", ())),
                {k: v for k, v in d.items() if k not in known},
            )
        except (TypeError, ValueError) as exc:
            raise ConfigError(where, f"malformed map: {exc}") from None


def _sigmoid(z: float) -> float:
    if z >= 0:
        return 1.0 / (1.0 + math.exp(-z))
    e = math.exp(z)
    return e / (1.0 + e)


def _interpolate(xs: Sequence[float], ys: Sequence[float], p: float) -> float:
    if p <= xs[0]:
        return ys[0]
    if p >= xs[-1]:
        return ys[-1]
    i = bisect.bisect_right(xs, p)
    x0, x1, y0, y1 = xs[i - 1], xs[i], ys[i - 1], ys[i]
    return y0 if x1 == x0 else y0 + (y1 - y0) * (p - x0) / (x1 - x0)


@dataclass(frozen=True, slots=True)
class Calibration:
    """A calibration file: per condition, a map; and what it was fitted for."""

    maps: Mapping[str, CalibrationMap]
    evaluator: str = ""
    """The evaluator name the maps were fitted on."""
    model_version: str = ""
    """The evaluator's model version when fitted: a map fitted on one version says nothing about another."""
    question_set_version: str = ""
    fitted_on: Mapping[str, Any] = field(default_factory=dict)
    """Provenance: the trace files, the split, the method asked for."""
    version: str = field(init=False)
    """``cal-`` and a hash of the maps: the identity of what this file does to probabilities."""

    def __post_init__(self) -> None:
        blob = json.dumps(
            {name: self.maps[name].params() for name in sorted(self.maps)},
            sort_keys=True,
        ).encode()
        object.__setattr__(self, "version", "cal-" + hashlib.sha256(blob).hexdigest()[:12])

    def to_data(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "version": self.version,
            "evaluator": self.evaluator,
            "model_version": self.model_version,
            "question_set_version": self.question_set_version,
            "conditions": {name: m.to_data() for name, m in sorted(self.maps.items())},
            "fitted_on": dict(self.fitted_on),
        }

    @classmethod
    def from_data(cls, d: Mapping[str, Any], where: str = "calibration") -> Calibration:
        """Parse a calibration file's JSON; raises ``ConfigError`` naming what is wrong."""
        if not isinstance(d, Mapping) or d.get("format") != FORMAT:
            raise ConfigError(where, f"not a calibration file (its 'format' is not {FORMAT!r})")
        if d.get("format_version") != FORMAT_VERSION:
            raise ConfigError(
                where, f"format_version {d.get('format_version')!r} is not {FORMAT_VERSION}: refit it with this version"
            )
        conditions = d.get("conditions")
        if not isinstance(conditions, Mapping):
            raise ConfigError(f"{where}.conditions", "must be an object of condition -> map")
        maps = {str(k): CalibrationMap.from_data(f"{where}.conditions.{k}", v) for k, v in conditions.items()}
        return cls(
            maps,
            str(d.get("evaluator", "")),
            str(d.get("model_version", "")),
            str(d.get("question_set_version", "")),
            dict(d.get("fitted_on", {})),
        )

    def save(self, path: str | Path) -> None:
        """Write the file (keys sorted, so the same fit gives the same bytes)."""
        Path(path).write_text(json.dumps(self.to_data(), indent=2, sort_keys=True) + "\n", encoding="utf-8")


def load_calibration(path: str | Path) -> Calibration:
    """Read a calibration file; raises ``ConfigError`` when it cannot be read or is malformed."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(str(path), f"cannot read the calibration file: {exc}") from None
    return Calibration.from_data(data, str(path))


def recalibrated(answer: Answer, fires_on: tuple[str, ...], q: float) -> Answer:
    """``answer`` with the mass of ``fires_on`` set to ``q``, each side keeping its own proportions (a side with
    no mass shares its new mass evenly). For yes/no this is ``{"yes": q, "no": 1 - q}``."""
    dist = dict(answer.distribution)
    labels = list(dist)
    firing = [k for k in labels if k in fires_on]
    rest = [k for k in labels if k not in fires_on]
    out: dict[str, float] = {}
    for side, mass in ((firing, q), (rest, 1.0 - q)):
        if not side:
            continue
        total = sum(dist[k] for k in side)
        for k in side:
            out[k] = mass * dist[k] / total if total > 0 else mass / len(side)
    return Answer(out, answer.uncertain, answer.note, answer.defer)


class CalibratedEvaluator:
    """An evaluator whose answers go through a calibration file's maps.

    What callers rely on: ``evaluate`` asks ``inner`` and, for each condition that has a map (with the same
    ``fires_on``), replaces the probability that it holds by the map's value, keeping the proportions within each
    side of the distribution (``recalibrated``). Uncertain answers and conditions without a map pass through
    unchanged. ``Answers.model_version`` becomes ``"<inner model version>+<calibration version>"``; when the
    inner model version is not the one the maps were fitted on, each mapped answer's note says so (the maps are
    still applied: whether to trust them is the caller's call). Pure Python: no numpy, no scikit-learn.
    """

    name: str

    def __init__(self, inner: Evaluator, calibration: Calibration | str | Path) -> None:
        self.inner = inner
        self.calibration = calibration if isinstance(calibration, Calibration) else load_calibration(calibration)
        self.name = getattr(inner, "name", type(inner).__name__)

    def __repr__(self) -> str:
        return f"CalibratedEvaluator({self.inner!r}, {self.calibration.version!r})"

    async def evaluate(self, projection: Projection, questions: QuestionSet) -> Answers:
        answers = await self.inner.evaluate(projection, questions)
        return self.apply(answers, questions)

    def apply(self, answers: Answers, questions: QuestionSet) -> Answers:
        """The calibrated form of ``answers`` to ``questions`` (what ``evaluate`` returns)."""
        cal = self.calibration
        stale = bool(cal.model_version) and answers.model_version != cal.model_version
        out: dict[str, Answer] = {}
        for name, answer in answers.answers.items():
            m = cal.maps.get(name)
            condition = questions.by_name.get(name)
            if m is None or condition is None or answer.uncertain or tuple(condition.fires_on) != m.fires_on:
                out[name] = answer
                continue
            p = answer.p(condition.fires_on)
            q = m(p)
            note = f"{answer.note}; " if answer.note else ""
            note += f"calibrated {p:.3f} -> {q:.3f} ({cal.version})"
            if stale:
                note += f"; fitted on {cal.model_version}, not {answers.model_version}"
            a = recalibrated(answer, condition.fires_on, q)
            out[name] = Answer(a.distribution, a.uncertain, note, a.defer)  # a recalibrated base rate still defers
        return Answers(answers.evaluator, f"{answers.model_version}+{cal.version}", out, answers.latency_ms)
