"""The optional heavier integrity backend: stackone-defender's MiniLM beside the light integrity features.

``RuleEvaluator(integrity=DefenderIntegrity())`` answers the integrity condition with a small logistic combination
of the light scorer's logit (the shipped ``integrity`` map on the windowed markers and n-gram model, see
``_integrity``) and the score of stackone-defender (Apache-2.0, PyPI ``stackone-defender[onnx]``; a quantised
MiniLM classifier in its wheel, nothing downloaded at run time). The combination's weights ship in
``stopwise/guardian/data/defender_integrity.json``; they were fitted on the train corpora of the integrity set only
(``evals/train_defender.py``; figures in ``docs/evals.md``).

Install it with ``pip install 'stopwise[defender]'``. Nothing here imports the library until a
``DefenderIntegrity`` is built: ``import stopwise`` never loads it, and building one without the extra raises a
``ConfigError`` naming the extra. It costs about a hundred times the light scorer (hundreds of milliseconds per
8,000-character result on one core): the light scorer stays the default.

Reading: the backend reads the same first ``read_chars`` characters of a result as the light scorer. The library
classifies at most ``max_text_length`` (10,000) characters of a text, in sentence-packed chunks of the model's
length, and keeps the highest chunk's score; a longer span is cut into overlapping windows of that size here and
the highest window counts, so an injection anywhere in the span is read, never cut off or diluted.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any, Protocol

from stopwise.errors import ConfigError
from stopwise.guardian.evaluators.rule import LogisticMap, _read_data

__all__ = [
    "COMBINATION_FILE",
    "LIBRARY_MAX_CHARS",
    "Combination",
    "DefenderIntegrity",
    "LibraryScore",
    "combined_features",
    "library_windows",
    "load_combination",
    "model_digest",
    "score_with_library",
]

LIBRARY_MAX_CHARS = 10_000
"""The most characters of one text stackone-defender's Tier 2 classifies (its ``max_text_length``)."""

_INSTALL = "pip install 'stopwise[defender]'"
_WINDOW_OVERLAP = 1_000
# Tier 1's risk level as a number: the combination reads "high or worse" as one feature.
_RISK_RANK = {"low": 0, "medium": 1, "high": 2, "critical": 3}
# The library's probability is clipped before its logit: it answers exactly 0.0 when Tier 2 skips a text.
_EPS = 1e-4


@dataclass(frozen=True, slots=True)
class LibraryScore:
    """What stackone-defender says about one text: its Tier 2 (MiniLM) probability and its Tier 1 risk level."""

    score: float
    """The highest Tier 2 probability over the text's windows (0.0 where Tier 2 skipped every window)."""
    risk: int
    """Tier 1's highest risk level over the windows: 0 low, 1 medium, 2 high, 3 critical."""


class _Defense(Protocol):
    def defend_tool_result(self, value: Any, tool_name: str) -> Any: ...


def library_windows(text: str, read_chars: int, width: int = LIBRARY_MAX_CHARS) -> list[str]:
    """The pieces of ``text[:read_chars]`` the library is given: the whole span when it fits in ``width``
    characters, else windows of ``width`` characters overlapping by a tenth of it (so a sentence cut at one
    window's edge is whole in the next)."""
    if read_chars <= 0:
        raise ConfigError("read_chars", f"must be positive, got {read_chars}")
    if width <= 0:
        raise ConfigError("width", f"must be positive, got {width}")
    span = text[:read_chars]
    if len(span) <= width:
        return [span]
    step = max(1, width - min(_WINDOW_OVERLAP, width // 10))
    out = []
    for start in range(0, len(span), step):
        out.append(span[start : start + width])
        if start + width >= len(span):
            break
    return out


def _load_library() -> tuple[Any, str, str]:
    """stackone-defender's ``create_prompt_defense``, its version and the digest of the model files it loads
    (``model_digest``), or a ``ConfigError`` naming the extra."""
    try:
        from stackone_defender import create_prompt_defense
    except ImportError as exc:
        raise ConfigError("integrity", f"DefenderIntegrity needs the defender extra: {_INSTALL} ({exc})") from exc
    # Without onnxruntime the library would run its Tier 1 patterns only, which is not what was measured.
    if importlib.util.find_spec("onnxruntime") is None or importlib.util.find_spec("tokenizers") is None:
        raise ConfigError("integrity", f"DefenderIntegrity needs the library's onnx runtime: {_INSTALL}")
    try:
        from stackone_defender.classifiers.onnx_classifier import get_default_model_path

        digest = model_digest(get_default_model_path())
    except (ImportError, OSError):  # a layout this version does not know: the records say so
        digest = "unknown"
    return create_prompt_defense, metadata.version("stackone-defender"), digest


def model_digest(directory: str | Path) -> str:
    """The first 12 hex digits of a SHA-256 over the files of a model directory (their names and bytes, in name
    order): a model file replaced under the same library version changes it."""
    h = hashlib.sha256()
    for path in sorted(Path(directory).iterdir()):
        if path.is_file():
            h.update(path.name.encode() + b"\0")
            with path.open("rb") as f:
                for block in iter(lambda: f.read(1 << 20), b""):
                    h.update(block)
            h.update(b"\0")
    return h.hexdigest()[:12]


def score_with_library(defense: _Defense, text: str, read_chars: int) -> LibraryScore:
    """The library's score of ``text`` read as the backend reads it (see the module docstring).

    A text that fits in one window and is JSON is passed parsed, so the library reads its string fields as
    fields; otherwise each window is passed as a string.
    """
    windows = library_windows(text, read_chars)
    best, risk = 0.0, 0
    for window in windows:
        value: Any = window
        if len(windows) == 1 and len(text) <= read_chars and window[:1] in "[{":
            with contextlib.suppress(ValueError):
                value = json.loads(window)
        result = defense.defend_tool_result(value, "tool_result")
        best = max(best, float(result.tier2_score or 0.0))
        risk = max(risk, _RISK_RANK.get(str(result.risk_level), 0))
    return LibraryScore(best, risk)


COMBINATION_FILE = "defender_integrity.json"
"""The fitted combination (``evals/train_defender.py``), in ``stopwise/guardian/data/``."""


@dataclass(frozen=True, slots=True)
class Combination:
    """The parsed ``defender_integrity.json``: a logistic map over ``light_logit`` (the light scorer's logit),
    ``defender_logit`` and ``defender_high`` (see ``combined_features``), and what it was fitted with."""

    version: str
    library_version: str
    """The stackone-defender version whose scores it was fitted on."""
    read_chars: int
    map: LogisticMap
    digest: str = ""
    """The first 8 hex digits of a SHA-256 of the file's content: two fits that kept the same ``version`` string
    (a refit the same day) still differ."""


def load_combination(path: str | Path | None = None) -> Combination:
    """The combination shipped with the package, or the one in ``path``; a ``ConfigError`` names a bad field."""
    data = _read_data(COMBINATION_FILE, path)
    where = str(path or COMBINATION_FILE)
    for key in ("version", "library_version"):
        if not isinstance(data.get(key), str):
            raise ConfigError(f"{where}.{key}", "must be a string")
    read_chars = data.get("read_chars")
    if isinstance(read_chars, bool) or not isinstance(read_chars, int) or read_chars <= 0:
        raise ConfigError(f"{where}.read_chars", f"must be a positive integer, got {read_chars!r}")
    digest = hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:8]
    return Combination(
        data["version"],
        data["library_version"],
        read_chars,
        LogisticMap.from_data(f"{where}.map", data.get("map")),
        digest,
    )


def combined_features(light_logit: float, scored: LibraryScore) -> dict[str, float]:
    """The combination's inputs: the light scorer's logit, the library's probability as a logit (clipped: it
    answers exactly 0.0 where Tier 2 skipped a text) and whether its Tier 1 said high risk or worse."""
    p = min(max(scored.score, _EPS), 1.0 - _EPS)
    return {
        "light_logit": light_logit,
        "defender_logit": math.log(p / (1.0 - p)),
        "defender_high": 1.0 if scored.risk >= 2 else 0.0,
    }


class DefenderIntegrity:
    """An ``IntegrityBackend`` for ``RuleEvaluator(integrity=...)``: stackone-defender's score combined with the
    light scorer's (see the module docstring).

    Building one loads the library and its model (about a second) and raises ``ConfigError`` naming the
    ``defender`` extra when it is not installed. ``combination`` is a path to another fitted combination file.
    One instance may serve many runs: it keeps no per-run state (the evaluator memoises its features per text).
    Scoring is synchronous: a new result blocks the event loop of ``RuleEvaluator.evaluate`` for the library's
    time (hundreds of milliseconds at 8,000 characters). Sharing one across threads is as safe as the library's
    ``defend_tool_result``, which stopwise does not vouch for.
    """

    def __init__(self, *, combination: str | Path | None = None) -> None:
        create, self.library_version, self.model_digest = _load_library()
        self.combination = load_combination(combination)
        self.defense: Any = create(enable_tier2=True, require_tier2=True)
        self.defense.warmup_tier2()
        # The digests pin the exact model files and fitted weights: a record (and anything keyed by this version,
        # such as a cache of scores) never takes one model's scores for another's that kept the version strings.
        self.version = (
            f"defender-{self.library_version}+{self.model_digest}/{self.combination.version}+{self.combination.digest}"
        )

    def __repr__(self) -> str:
        return f"DefenderIntegrity(version={self.version!r})"

    def features(self, text: str, light_logit: float, read_chars: int) -> Mapping[str, float]:
        """The combination's inputs for one non-trivial untrusted text whose light logit is ``light_logit``."""
        return combined_features(light_logit, score_with_library(self.defense, text, read_chars))

    def logit(self, features: Mapping[str, float]) -> float:
        """The combination's logit of ``features`` (as ``features`` returned them; other keys count 0)."""
        return self.combination.map.logit(features)
