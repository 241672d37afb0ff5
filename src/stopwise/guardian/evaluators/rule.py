"""``RuleEvaluator``: the guardian's default evaluator. Offline, deterministic, no model, no network.

It answers the six conditions of ``DEFAULT_CONDITIONS`` by name from signals computed on the ``Projection``:

- ``integrity``: hand-written markers of instructions addressed to the agent inside tool results (bare requests and
  orders in data fields included), combined with a small linear model over hashed word n-grams scored in windows
  (trained offline by ``evals/train_integrity.py``); trivial results are no evidence (``_integrity``); an
  ``IntegrityBackend`` (``integrity=``, e.g. the optional ``DefenderIntegrity``) may answer it instead;
- ``risk``: the declared risk class of the pending proposal, spread over the Choice's labels (undeclared risk
  leans cautious, nudged by the tool's name: its verb, a read, write, destructive or money word; after a read verb
  a noun such as ``email`` names what the call touches and does not count);
- ``infeasible``: lasting errors (permission, not found, unsupported) repeated, "cannot" statements, error streaks
  (a failure the tool reports in its result counts as one it raised);
- ``goal_reached``: a final answer (none: not reached), acceptance-criteria words found in the successful calls'
  results and arguments and in the final text, the final answer's words and cited identifiers backed by those
  results, no error in the last step; with no criteria stated, what the run says about itself (a tool confirming a
  change, a failure after that, a question to the user left unanswered, an answer that says it
  could not finish: ``goal_reached_evidence``), and when it says nothing, the base rate of recorded runs of real
  models (``goal_reached_open``), because there the rules cannot tell;
- ``drift``: lexical overlap between the recent steps (and the latest one apart) and the goal and criteria, and
  whether the latest call's arguments carry an identifier from an earlier result; when the recent steps carry no
  words at all (clicks by coordinates, scrolls, screenshots back) the base rate, deferred (``drift_unobserved``);
- ``stagnation``: exact and near repeats of calls, results seen before or saying nothing was found, error
  streaks.

Every signal is a number; each condition's numbers go through a logistic map whose coefficients are package data
(``stopwise/guardian/data/rule_coefficients.json``, versioned), so a calibration run can refit them without
touching this code. ``RuleEvaluator.features`` exposes the raw numbers for that purpose.

The same projection and the same data files always give the same answers: nothing here depends on time, on
randomness or on the process (hashing uses CRC-32, not Python's salted ``hash``).
"""

from __future__ import annotations

import functools
import json
import math
import re
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path
from typing import Any, Protocol

from stopwise.errors import ConfigError
from stopwise.guardian.answers import Answer, Answers, uncertain
from stopwise.guardian.conditions import Condition, QuestionSet
from stopwise.guardian.evaluators._integrity import (
    CONTRAST_FEATURES,
    MARKER_FAMILIES,
    IntegrityModel,
    TextScore,
    _number,
    integrity_markers,
    score_text,
)
from stopwise.guardian.goal_kind import GoalKind, goal_kind
from stopwise.guardian.projection import WITHHELD, ProjectedCall, ProjectedStep, Projection
from stopwise.guardian.questions import Choice, Score, YesNo
from stopwise.normalise import normalise_untrusted

__all__ = [
    "COEFFICIENTS_FILE",
    "MARKER_FAMILIES",
    "INTEGRITY_MODEL_FILE",
    "IntegrityBackend",
    "IntegrityModel",
    "OUTCOME_FEATURES",
    "LogisticMap",
    "RuleCoefficients",
    "RuleEvaluator",
    "integrity_markers",
    "load_coefficients",
    "load_integrity_model",
    "normalise_untrusted",
]

_CONTRAST = frozenset(CONTRAST_FEATURES)
"""Integrity features computed only for a combination that weighs them (an experiment's; the shipped one does not)."""

COEFFICIENTS_FILE = "rule_coefficients.json"
"""The logistic maps of every signal, in ``stopwise/guardian/data/``."""
INTEGRITY_MODEL_FILE = "integrity_model.json"
"""The integrity linear model (hashed n-gram weights), in ``stopwise/guardian/data/``."""

RISK_LABELS = ("read_only", "reversible", "irreversible", "regulated")


# --------------------------------------------------------------------------------------------------------------
# Data files


def _read_data(name: str, path: str | Path | None) -> dict[str, Any]:
    try:
        if path is not None:
            text = Path(path).read_text(encoding="utf-8")
        else:
            text = resources.files("stopwise.guardian").joinpath("data", name).read_text(encoding="utf-8")
        data = json.loads(text)
    except (OSError, ValueError) as exc:
        raise ConfigError(str(path or name), f"cannot load rule evaluator data: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigError(str(path or name), "must hold a JSON object")
    return data


INTEGRITY_SHARE = 0.05
"""The share of injected tool results the shipped integrity map's intercept assumes
(``RuleCoefficients.with_integrity_share`` moves it to another)."""


@dataclass(frozen=True, slots=True)
class LogisticMap:
    """``p = 1 / (1 + exp(-(bias + sum(weights[k] * features[k]))))``; features it has no weight for count 0."""

    bias: float
    weights: Mapping[str, float]

    def logit(self, features: Mapping[str, float]) -> float:
        z = self.bias
        for name, w in self.weights.items():
            z += w * features.get(name, 0.0)
        return z

    def p(self, features: Mapping[str, float]) -> float:
        return _sigmoid(self.logit(features))

    def shifted(self, log_odds: float) -> LogisticMap:
        """The same map with ``log_odds`` added to its intercept: every ranking stays, the base rate moves."""
        return LogisticMap(self.bias + log_odds, self.weights)

    @classmethod
    def from_data(cls, where: str, data: Any) -> LogisticMap:
        if not isinstance(data, Mapping) or not isinstance(data.get("weights"), Mapping):
            raise ConfigError(where, "needs 'bias' and a 'weights' object")
        weights = {str(k): _number(f"{where}.weights.{k}", v) for k, v in data["weights"].items()}
        return cls(_number(f"{where}.bias", data.get("bias")), weights)


@dataclass(frozen=True, slots=True)
class RuleCoefficients:
    """The parsed ``rule_coefficients.json``: one logistic map per condition, the risk table and scan limits."""

    version: str
    integrity: LogisticMap
    stagnation: LogisticMap
    infeasible: LogisticMap
    goal_reached: LogisticMap
    drift: LogisticMap
    """Maps the drift features to p(aligned); the answer spreads it over the score levels (see ``_levels``)."""
    risk_declared: Mapping[str, Mapping[str, float]]
    """Declared risk class -> distribution over the risk labels."""
    risk_name_hints: Mapping[str, tuple[str, ...]]
    """For an undeclared risk: risk label -> words in a tool's name that suggest it."""
    risk_hinted: Mapping[str, Mapping[str, float]]
    """The distribution used when a name hint matches (checked in the order of ``risk_name_hints``)."""
    risk_object_words: frozenset[str]
    """Hint words that name what a call touches as often as what it does (``email``, ``post``, ``merge``): after a
    read verb they are the call's object and say nothing of its risk (see ``_name_hint``)."""
    window: int
    """How many of the latest steps count as "recent" for stagnation and drift."""
    near_jaccard: float
    """Two calls of one tool are near repeats when one argument changed and, if it is a text, the old and new
    texts share at least this share of their words."""
    scan_steps: int
    """Integrity reads the tool results of this many latest steps (earlier ones were read on their own turn)."""
    scan_chars: int
    """Integrity reads at most this many characters of each result, in windows (see ``_integrity``)."""
    history_steps: int
    """Stagnation and infeasibility look back at most this many steps: enough to see a loop or a refusal that
    keeps coming back, and it bounds the cost of a turn whatever the history's length."""
    flow_steps: int = 6
    """Drift looks back this many steps before the latest one for the ids the latest call's arguments carry (the
    guardian's default projection holds 6 steps: a longer history costs no more per turn)."""
    goal_reached_open: LogisticMap | None = None
    """goal_reached for a run with no stated acceptance criteria (the goal's words are all the rules can check),
    fitted on recorded runs of real models; None: ``goal_reached`` answers those too."""
    goal_reached_evidence: LogisticMap | None = None
    """goal_reached for a run with no stated criteria whose tools said something about the outcome (a confirmation,
    an unanswered request to the user, a failure after the last confirmation, a final answer that says it could
    not finish: ``OUTCOME_FEATURES``), fitted on recorded runs of real models; None: ``goal_reached_open``
    answers those too."""
    stagnation_unobserved: LogisticMap | None = None
    """stagnation when no recent call returned text (screenshots, actions that return nothing), a constant at the
    base rate of real runs, deferred; None: ``stagnation`` answers those states from their one feature,
    ``unobserved`` (its bias alone when it has no weight for it)."""
    drift_unobserved: LogisticMap | None = None
    """p(aligned) when the recent steps carry no words (coordinates, scroll amounts, bare element ids, results with
    no text), a constant, deferred; None: such states are answered uncertain (the rules cannot tell)."""

    def with_integrity_share(self, share: float, assumed: float = INTEGRITY_SHARE) -> RuleCoefficients:
        """These coefficients with the integrity answer calibrated for ``share`` of tool results injected.

        The shipped intercept assumes ``INTEGRITY_SHARE`` (5%); where more (or fewer) of your results carry
        injections, the probabilities are too low (or too high) by the difference in log-odds, and this moves the
        intercept by exactly that (a prior shift: rankings and AUROC do not change, the probability and what
        crosses the policy's threshold do). The version names the share, so logs say which map answered."""
        for name, value in (("share", share), ("assumed", assumed)):
            if not 0 < value < 1:
                raise ConfigError(f"integrity {name}", f"must lie strictly between 0 and 1, not {value!r}")
        shift = math.log(share / (1 - share)) - math.log(assumed / (1 - assumed))
        return replace(self, version=f"{self.version}+share{share:g}", integrity=self.integrity.shifted(shift))

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> RuleCoefficients:
        version = data.get("version")
        if not isinstance(version, str) or not version:
            raise ConfigError("rule_coefficients.version", "must be a non-empty string")
        risk = data.get("risk")
        if not isinstance(risk, Mapping):
            raise ConfigError("rule_coefficients.risk", "must be an object")
        declared = {k: _distribution(f"risk.declared.{k}", v) for k, v in dict(risk.get("declared", {})).items()}
        if "unknown" not in declared:
            raise ConfigError("rule_coefficients.risk.declared", "needs an 'unknown' entry")
        hints = {str(k): tuple(str(w) for w in v) for k, v in dict(risk.get("name_hints", {})).items()}
        hinted = {k: _distribution(f"risk.hinted.{k}", v) for k, v in dict(risk.get("hinted", {})).items()}
        missing = set(hints) - set(hinted)
        if missing:
            raise ConfigError("rule_coefficients.risk.hinted", f"no distribution for hints {sorted(missing)}")
        objects = frozenset(str(w) for w in risk.get("object_words", ()))
        unhinted = objects - {w for said in hints.values() for w in said}
        if unhinted:
            raise ConfigError("rule_coefficients.risk.object_words", f"not name hint words: {sorted(unhinted)}")
        limits = dict(data.get("limits", {}))
        maps = {name: LogisticMap.from_data(name, data.get(name)) for name in _LOGISTIC_CONDITIONS}
        return cls(
            version,
            maps["integrity"],
            maps["stagnation"],
            maps["infeasible"],
            maps["goal_reached"],
            maps["drift"],
            declared,
            hints,
            hinted,
            objects,
            int(limits.get("window", 2)),
            _number("limits.near_jaccard", limits.get("near_jaccard", 0.6)),
            int(limits.get("scan_steps", 3)),
            int(limits.get("scan_chars", 8000)),
            int(limits.get("history_steps", 24)),
            int(limits.get("flow_steps", 6)),
            LogisticMap.from_data("goal_reached_open", data["goal_reached_open"])
            if "goal_reached_open" in data
            else None,
            LogisticMap.from_data("goal_reached_evidence", data["goal_reached_evidence"])
            if "goal_reached_evidence" in data
            else None,
            LogisticMap.from_data("stagnation_unobserved", data["stagnation_unobserved"])
            if "stagnation_unobserved" in data
            else None,
            LogisticMap.from_data("drift_unobserved", data["drift_unobserved"]) if "drift_unobserved" in data else None,
        )


_LOGISTIC_CONDITIONS = ("integrity", "stagnation", "infeasible", "goal_reached", "drift")


def _distribution(where: str, value: Any) -> dict[str, float]:
    if not isinstance(value, Mapping):
        raise ConfigError(where, "must be an object of label -> probability")
    dist = {str(k): _number(f"{where}.{k}", v) for k, v in value.items()}
    if set(dist) != set(RISK_LABELS) or abs(sum(dist.values()) - 1.0) > 1e-6:
        raise ConfigError(where, f"must give each of {list(RISK_LABELS)} a probability, summing to 1")
    return dist


def load_coefficients(path: str | Path | None = None) -> RuleCoefficients:
    """The coefficients shipped with the package, or those in ``path``; raises ``ConfigError`` when malformed."""
    return RuleCoefficients.from_data(_read_data(COEFFICIENTS_FILE, path))


# --------------------------------------------------------------------------------------------------------------
# Integrity: normalisation, markers, and the hashed n-gram model


def load_integrity_model(path: str | Path | None = None) -> IntegrityModel:
    """The integrity model shipped with the package, or the one in ``path``."""
    return IntegrityModel.from_data(_read_data(INTEGRITY_MODEL_FILE, path))


@functools.cache
def _shipped_coefficients() -> RuleCoefficients:
    # Parsed once per process: every guardian builds an evaluator, and the files never change at run time.
    return load_coefficients()


@functools.cache
def _shipped_integrity_model() -> IntegrityModel:
    return load_integrity_model()


class IntegrityBackend(Protocol):
    """A heavier scorer the rule evaluator's integrity check can take (``RuleEvaluator(integrity=...)``).

    It is asked only about non-trivial results (an empty or trivial result stays no evidence), after the light
    scorer, whose logit it is given; its ``logit`` of the features it returned replaces the light map's. Both
    must be pure functions of their arguments (the evaluator memoises features per text) and safe to call from
    several runs. ``version`` is appended to the evaluator's ``model_version``.
    """

    @property
    def version(self) -> str: ...

    def features(self, text: str, light_logit: float, read_chars: int) -> Mapping[str, float]:
        """Its numbers for the first ``read_chars`` characters of ``text``."""
        ...

    def logit(self, features: Mapping[str, float]) -> float:
        """Its logit of p(injected) from the light features merged with those ``features`` returned."""
        ...


# --------------------------------------------------------------------------------------------------------------
# Lexical helpers shared by the other signals

_TOKEN = re.compile(r"[a-z0-9]+")
_CAMEL = re.compile(r"(?<=[a-z])(?=[A-Z])")
_DIGITS = re.compile(r"\d+|\b[0-9a-f]{8,}\b")
_IDENT = re.compile(r"(?<![A-Za-z0-9])[A-Za-z0-9][\w./:@-]*[0-9][\w./:@-]*|\b[A-Z]{2,}[A-Z0-9-]*\b")
"""Identifiers: a token with a digit, or an upper-case code. The first branch is tried only where a letter or digit
run starts (the look-behind): it fails at a position only when no digit follows within the token, and then fails
at every later position of the token too, so trying it there again (a scan to the token's end from each letter)
could never match. The matches are the same as without the look-behind, in about 60% of the time."""
_STOPWORD_TEXT = """
    a an the and or but if then else of to in on at by for with from into onto about as is are was were be been
    being it its this that these those there here we you your our i me my he she they them their his her not no yes
    do does did done have has had can could should would will shall may might must so such than too very just also
    any all each every some more most other own same only both few many much up down out over under again further
    once what which who whom when where why how please let lets get got new use using used via per now"""
_STOPWORDS = frozenset(_STOPWORD_TEXT.split())
_SUFFIXES = ("ations", "ation", "ings", "ing", "ies", "ied", "ed", "es", "s", "ly")


@functools.lru_cache(maxsize=1 << 16)
def _stem(word: str) -> str:
    for suf in _SUFFIXES:
        if word.endswith(suf) and len(word) - len(suf) >= 3:
            word = word[: -len(suf)]
            break
    return word[:6]


def _stems(text: str, stem: Callable[[str], str] = _stem, stopwords: frozenset[str] = _STOPWORDS) -> set[str]:
    """Content-word stems: lower-cased, stop words and one-letter tokens out, suffixes cut, six letters kept."""
    # ``stem`` and ``stopwords`` are bound as locals: looked up once per text, not once per word.
    text = _CAMEL.sub(" ", text).lower()
    return {stem(w) for w in _TOKEN.findall(text) if w not in stopwords and (len(w) > 2 or w.isdigit())}


def _args_text(args: Any) -> str:
    if isinstance(args, str):
        return args
    if isinstance(args, Mapping):
        # A string value (most are) is its own text: read in place, not through another call.
        return " ".join(f"{k} {v if type(v) is str else _args_text(v)}" for k, v in args.items())
    if isinstance(args, (list, tuple)):
        return " ".join(_args_text(v) for v in args)
    return str(args)


def _masked(text: str) -> str:
    # Numbers and long hex ids change on every call (timestamps, request ids) without adding information.
    return _DIGITS.sub("#", text)


def _jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    if not a and not b:
        return 1.0
    return len(a & b) / len(a | b)


def _sigmoid(z: float) -> float:
    if z >= 0:
        return 1.0 / (1.0 + math.exp(-z))
    e = math.exp(z)
    return e / (1.0 + e)


_LASTING = {
    "permission": re.compile(
        r"\b(?:permission denied|access denied|denied|forbidden|not authori[sz]ed|unauthori[sz]ed|not permitted|"
        r"insufficient (?:permissions?|privileges?|scope)|(?:status|code|http|error)\W{0,3}40[13]\b|\b40[13] "
        r"(?:forbidden|unauthori[sz]ed)|read-only (?:file ?system|access|token)|requires? (?:admin|an? admin|elevated)|"
        r"not allowed|lacks? (?:the )?(?:permission|scope|role|access))"
    ),
    "not_found": re.compile(
        r"\b(?:not found|no such|does not exist|doesn't exist|did not match any|unknown (?:id|user|file|table|"
        r"column|repository|endpoint|account|customer|order)|(?:status|code|http|error)\W{0,3}404\b|404 not found|"
        r"no (?:results?|records?|matches|match|entries|entry|items?) (?:found|for)|could not (?:find|locate|resolve))"
    ),
    "unsupported": re.compile(
        r"\b(?:not supported|unsupported|not implemented|no tool (?:named|called)|unknown tool|no such tool|"
        r"(?:status|code|http|error)\W{0,3}(?:405|501)\b|method not allowed|not available in (?:this|your) "
        r"(?:plan|region|version)|feature (?:is )?disabled|deprecated and removed|no longer available)"
    ),
}
_TRANSIENT = re.compile(
    r"\b(?:time[d ]?out|timeout|rate.?limit|too many requests|429|503|502|504|service unavailable|temporarily|"
    r"try again|retry(?:ing)? (?:later|in)|connection (?:reset|refused|error)|bad gateway|overloaded)\b"
)
_CANNOT = re.compile(
    r"\b(?:cannot|can't|can not|unable to|not possible|impossible|no way to|isn't possible|is not possible|"
    r"out of scope|beyond (?:my|the) (?:access|permissions|capabilities)|do(?:es)? not have (?:access|permission|"
    r"the ability)|don't have (?:access|permission)|no (?:tool|permission|access) (?:to|for))\b"
)
_DONE = r"(?:written|saved|created|updated|sent|submitted|uploaded|deleted|booked|scheduled)"
_CONFIRMATION = re.compile(
    rf"\b{_DONE}\b[^.\n]{{0,30}}\bsuccess(?:fully)?\b|\bsuccess(?:fully)?\b[^.\n]{{0,30}}\b{_DONE}\b",
    re.I,
)
"""A tool's report that a change it was asked for happened (``File output.txt has been written successfully``,
``Message sent successfully``). The action word alone is not one (a page saying a song was "written" by someone,
``Updated 1 path from the index``), nor is "succeeded" alone: code that ran without an exception (``exitcode: 0
(execution succeeded)``) says nothing about whether its output is the answer. Nor are passing tests the agent ran
itself (``12 passed``, ``Ran 4 tests ... OK``): on recorded runs they say nothing about the acceptance tests a
grader runs (coding runs whose own tests passed were resolved less often than the others; multi-agent runs whose
tests passed all failed), so a run whose only news is a test pass is left to the base rate and the judge."""
_CONFIRMATION_CHARS = 300
"""A confirmation is a short status (``File output.txt has been written successfully.``): a longer result is
content, where those words are only words (a page that mentions an "updated" policy)."""
_ASKING = frozenset({"ask", "human", "clarify", "clarification"})
OUTCOME_FEATURES = (
    "result_confirms",
    "last_result_confirms",
    "failed_after_confirmation",
    "unanswered_requests",
    "final_unfinished",
    "write_object_unseen",
)
"""The goal_reached features in which the run itself says how it went (``RuleEvaluator.outcome_features``, and a
final answer that says it could not finish): what ``goal_reached_evidence`` reads (``write_object_unseen``, a
confirmed write to an object the run made up, read as ``final_unfinished``: no map weighs it)."""
_ID_KEY = re.compile(r"(?:^|_)ids?$|[a-z]Ids?$")
"""An argument that names an object by its id (``event_id``, ``id``, ``taskId``)."""
_ADDRESS = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
"""An argument that names a person or a mailbox by address."""


def _objects(args: Any) -> frozenset[str]:
    """The objects a call's arguments name, lower-cased: the values of id arguments (``event_id``, ``id``) and
    e-mail addresses. What a write changes or whom it reaches, as against what it writes (a file name, a text)."""
    found: set[str] = set()
    if isinstance(args, Mapping):
        for key, value in args.items():
            values = value if isinstance(value, (list, tuple)) else [value]
            for v in values:
                if isinstance(v, (str, int)) and not isinstance(v, bool):
                    text = str(v).strip()
                    if text and (_ID_KEY.search(str(key)) or _ADDRESS.fullmatch(text)):
                        found.add(text.lower())
    return frozenset(found)


def _unchanged(projection: Projection, features: Mapping[str, float], said: Sequence[str]) -> bool:
    """The run's goal asks for a change (``goal_kind``), no tool confirmed a write, and the final answer's saying it
    could not finish is all the run says: no evidence either way. Where the right end state is the start state (the
    customer to delete does not exist, no task matches), an agent that changed nothing and said it could not
    succeeded; the words cannot tell that from a failure to change (docs/evals.md, WorkBench). A question whose
    answer says it could not find it stays a failure: there an answer was always due."""
    return (
        list(said) == ["final_unfinished"]
        and "write_object_picked" not in features
        and goal_kind(projection.goal) is GoalKind.CHANGE
    )


def _confirms(result: str) -> bool:
    """A result that reports an action done, as a tool's status line does (see ``_CONFIRMATION_CHARS``)."""
    text = result.strip()
    if len(text) > _CONFIRMATION_CHARS:
        return False
    # Both branches of the pattern need the word "success": an ASCII text without it cannot match, and most results
    # are such texts. (Case-insensitive matching lets a few non-ASCII letters stand for ASCII ones, e.g. the long
    # s, so any other text goes to the pattern.)
    if text.isascii() and "success" not in text.lower():
        return False
    return _CONFIRMATION.search(text) is not None


@functools.lru_cache(maxsize=1024)
def _asks_user(tool: str) -> bool:
    """The tool puts a question to a person (``ask_user``, ``human_input``, ``request_user_input``)."""
    words = set(_TOKEN.findall(_CAMEL.sub(" ", tool).lower()))
    return bool(words & _ASKING) or ("user" in words and bool(words & {"input", "question", "prompt"}))


_UNFINISHED = re.compile(
    r"\b(?:not (?:yet )?(?:done|complete|completed|finished|possible|able)|still (?:need|needs|missing|pending|"
    r"to do)|todo|tbd|partially|partial|could not|couldn't|failed|unable|incomplete|unverified|i (?:will|'ll) "
    r"(?:now|next)|next step)\b"
)


# --------------------------------------------------------------------------------------------------------------
# The evaluator


class _TextFacts:
    """What the stagnation and feasibility signals read of one text; the failure kinds only when asked (most
    results are not failures, and those regexes are the costly part)."""

    __slots__ = ("_head", "_lasting", "_transient", "cannot", "masked", "normal", "textless")

    def __init__(self, text: str) -> None:
        self._head = text[:600].lower()
        # str.split and the pattern \s+ know the same whitespace (both ask Py_UNICODE_ISSPACE): the runs joined
        # by one space, as re.sub(r"\s+", " ", ...) of the stripped text gave, in a fifth of the time.
        self.normal = " ".join(text.lower().split())
        """Lower-cased, whitespace collapsed: two results are the same information when these are equal."""
        self.masked = _masked(self.normal)
        """``normal`` with numbers and long hex ids masked."""
        self.cannot = bool(_CANNOT.search(self._head))
        self.textless = _textless(self.normal)
        """The result has no text (empty, a screenshot): the rules did not observe it (see ``_textless``)."""
        self._lasting: str | bool | None = False  # False: not computed yet
        self._transient: bool | None = None

    @property
    def empty(self) -> bool:
        """The result says that nothing was found (no results, could not find)."""
        return bool(_EMPTY_RESULT.match(self._head))

    @property
    def looks_failed(self) -> bool:
        return bool(_FAILED_RESULT.match(self._head))

    @property
    def lasting(self) -> str | None:
        """The kind of lasting failure the text names (``permission``, ``not_found``, ``unsupported``), if any."""
        if self._lasting is False:
            self._lasting = next((kind for kind, rx in _LASTING.items() if rx.search(self._head)), None)
        return None if self._lasting is True else self._lasting

    @property
    def transient(self) -> bool:
        if self._transient is None:
            self._transient = bool(_TRANSIENT.search(self._head))
        return self._transient


class _Seen:
    """Results, texts and call arguments seen so far in a projection; the masked forms only when asked."""

    __slots__ = ("_facts", "_masked", "args_by_tool", "results", "texts")

    def __init__(self, facts: list[_TextFacts], texts: set[str], args_by_tool: dict[str, list[Any]]) -> None:
        self._facts = facts
        self.results = {f.normal for f in facts}
        self._masked: set[str] | None = None
        self.texts = texts
        self.args_by_tool = args_by_tool

    def masked(self) -> set[str]:
        if self._masked is None:
            self._masked = {f.masked for f in self._facts}
        return self._masked

    def add(self, step: ProjectedStep, facts: Callable[[str], _TextFacts]) -> None:
        for c in step.calls:
            f = facts(c.result)
            self._facts.append(f)
            self.results.add(f.normal)
            if self._masked is not None:
                self._masked.add(f.masked)
            self.args_by_tool.setdefault(c.tool, []).append(c.args)
        if step.text:
            self.texts.add(step.text.strip())


class RuleEvaluator:
    """The guardian's default evaluator: signals computed in code, mapped to probabilities by versioned data.

    Implements the ``Evaluator`` protocol. ``evaluate`` answers every condition of the question set it is given
    by name (``integrity``, ``risk``, ``infeasible``, ``goal_reached``, ``drift``, ``stagnation``); any other
    name, or a known name asked with a question type it cannot answer, gets an uncertain ``Answer`` with a note.
    It never raises for the content of a projection. Answers are well-formed distributions over the question's
    labels, and each carries a short note with the signals behind it.

    ``model_version`` is ``"rules-<coefficients version>/<integrity model version>"``: a decision record names
    exactly the data that produced its probabilities.

    Cost: a few hundred microseconds per turn with a 50-step history (``benchmarks/bench_guardian.py``).
    Integrity reads only the results of the latest ``scan_steps`` steps, each cut at ``scan_chars`` (the earlier
    ones were read on the turn they arrived); stagnation, infeasibility and the evidence for goal_reached look back
    ``history_steps`` steps. What is derived from a text (integrity features, stems, identifiers, failure kinds)
    is memoised per distinct text, up to a few times ``cache_size`` texts, so a result costs its full price once,
    on the turn it arrives; a call's arguments as text, per arguments object. The memos hold only pure functions
    of a text or of logged (never mutated) arguments: one evaluator can serve many runs, concurrently.
    """

    name: str

    def __init__(
        self,
        *,
        coefficients: RuleCoefficients | str | Path | None = None,
        integrity_model: IntegrityModel | str | Path | None = None,
        integrity: IntegrityBackend | None = None,
        cache_size: int = 256,
        name: str = "rules",
    ) -> None:
        if isinstance(coefficients, RuleCoefficients):
            self.coefficients = coefficients
        else:
            self.coefficients = _shipped_coefficients() if coefficients is None else load_coefficients(coefficients)
        if isinstance(integrity_model, IntegrityModel):
            self.integrity_model = integrity_model
        elif integrity_model is None:
            self.integrity_model = _shipped_integrity_model()
        else:
            self.integrity_model = load_integrity_model(integrity_model)
        self.name = name
        self.integrity = integrity
        self.model_version = f"rules-{self.coefficients.version}/{self.integrity_model.version}"
        if integrity is not None:
            self.model_version += f"+{integrity.version}"
        self._cache_size = cache_size
        self._integrity_cache: OrderedDict[str, TextScore] = OrderedDict()
        self._stem_cache: OrderedDict[str, frozenset[str]] = OrderedDict()
        self._id_cache: OrderedDict[str, frozenset[str]] = OrderedDict()
        self._args_cache: OrderedDict[int, tuple[Any, str]] = OrderedDict()
        self._facts_cache: OrderedDict[str, _TextFacts] = OrderedDict()

    def __repr__(self) -> str:
        return f"RuleEvaluator(model_version={self.model_version!r})"

    async def evaluate(self, projection: Projection, questions: QuestionSet) -> Answers:
        """One answer per condition of ``questions``, keyed by condition name."""
        return self.answer_all(projection, questions.conditions)

    def answer_all(self, projection: Projection, conditions: Iterable[Condition]) -> Answers:
        """The synchronous body of ``evaluate`` (offline evaluation and benchmarks call it directly)."""
        start = time.perf_counter()
        answers = {c.name: self.answer(projection, c) for c in conditions}
        return Answers(self.name, self.model_version, answers, (time.perf_counter() - start) * 1000.0)

    def answer(self, projection: Projection, condition: Condition) -> Answer:
        """One condition's answer; uncertain (with a note) for a condition this evaluator does not know."""
        handler = _HANDLERS.get(condition.name)
        if handler is None:
            return uncertain(f"the rule evaluator has no rule for condition {condition.name!r}")
        return handler(self, projection, condition)

    # -- features ---------------------------------------------------------------------------------------------

    def features(self, projection: Projection) -> dict[str, dict[str, float]]:
        """Every signal's raw numbers, per condition: what the logistic maps of the coefficients file read.

        A calibration run fits those maps on labelled projections from these numbers.
        """
        return {
            "integrity": self.integrity_features(projection)[0],
            "stagnation": self.stagnation_features(projection),
            "infeasible": self.infeasible_features(projection),
            "goal_reached": self.goal_features(projection),
            "drift": self.drift_features(projection),
        }

    def integrity_features(self, projection: Projection) -> tuple[dict[str, float], str]:
        """The features of the most suspicious tool result in the scanned steps, and where it was."""
        co = self.coefficients
        best: dict[str, float] = {}
        best_z = -math.inf
        where = ""
        for step in projection.steps[-co.scan_steps :] if co.scan_steps > 0 else ():
            for i, call in enumerate(step.calls):
                scored = self.text_integrity_score(call.result)
                z = self._integrity_logit(scored.features)
                if z > best_z:
                    best, best_z = dict(scored.features), z
                    where = f"step {step.step} {call.tool}"
                    if len(step.calls) > 1:  # which of a wide step's calls, and its id as its tool receipt has it
                        where += f" call {i + 1} of {len(step.calls)}" + _id_note(call.call_id)
                    if scored.window_char:
                        where += f" (from about character {scored.window_char})"
        return best, where

    def text_integrity_features(self, text: str) -> dict[str, float]:
        """Markers and the model's logit for one untrusted text (cached by text); see ``_integrity``."""
        return dict(self.text_integrity_score(text).features)

    def text_integrity_score(self, text: str) -> TextScore:
        """The integrity features of one untrusted text and where its most suspicious window starts (cached)."""
        cache = self._integrity_cache
        hit = cache.get(text)
        if hit is not None:
            return hit
        contrast = not _CONTRAST.isdisjoint(self.coefficients.integrity.weights)
        scored = score_text(text, self.integrity_model, self.coefficients.scan_chars, contrast=contrast)
        if self.integrity is not None and "trivial" not in scored.features:
            light_z = self.coefficients.integrity.logit(scored.features)
            extra = self.integrity.features(text, light_z, self.coefficients.scan_chars)
            scored = TextScore({**scored.features, **extra}, scored.window_char)
        _memo(cache, text, scored, self._cache_size)
        return scored

    def _integrity_logit(self, features: Mapping[str, float]) -> float:
        # The backend answers for the results it read; no result and trivial ones keep the light map's answer.
        if self.integrity is not None and features and "trivial" not in features:
            return self.integrity.logit(features)
        return self.coefficients.integrity.logit(features)

    def stagnation_features(self, projection: Projection) -> dict[str, float]:
        steps = projection.steps[-self.coefficients.history_steps :]
        window = max(1, self.coefficients.window)
        if len(steps) < 2:
            return {"short_history": 1.0}
        recent, earlier = steps[-window:], steps[:-window]
        if not earlier:
            earlier, recent = steps[:1], steps[1:]
        seen = self._seen(earlier, {c.tool for s in recent for c in s.calls})
        # A result with no text (a screenshot, an action that returns nothing) was not observed: repeating it is no
        # loop with a seen result, and it says nothing was found no more than that something was. When no recent
        # call returned text the rules cannot tell (the answer defers); else they read the observed ones. The
        # model's own words are observed too: a model that says the same thing again every step is stuck whatever
        # its calls returned, so that window is read (as before results without text were told apart).
        facts_of = [[self._facts(c.result) for c in s.calls] for s in recent]
        if any(facts_of) and all(f.textless for fs in facts_of for f in fs) and not _repeats_text(recent, seen.texts):
            return {"unobserved": 1.0}
        exact = near = calls = 0
        stale = masked_stale = 0
        texts = stale_texts = stale_steps = observed_steps = 0
        threshold = self.coefficients.near_jaccard
        for s, step_facts in zip(recent, facts_of, strict=True):
            step_new = False
            if step_facts and all(f.textless for f in step_facts) and not s.text.strip():
                seen.add(s, self._facts)  # a step of textless calls and no words: neither new nor stale
                continue
            observed_steps += 1
            for c, facts in zip(s.calls, step_facts, strict=True):
                if facts.textless:
                    continue
                calls += 1
                prior = seen.args_by_tool.get(c.tool, ())
                # Dict equality ignores key order, so two identical calls match however their arguments were sent.
                if any(c.args == a for a in prior):
                    exact += 1
                elif any(_near(c.args, a, threshold) for a in prior):
                    near += 1
                # A result that says nothing was found adds no information, whatever the query was.
                if facts.normal in seen.results or facts.empty:
                    stale += 1
                else:
                    # A result that differs only in numbers may still be news (a progress count): it makes
                    # the step new, and counts apart as a weaker sign of standing still.
                    step_new = True
                    if facts.masked in seen.masked():
                        masked_stale += 1
            if s.text.strip():
                texts += 1
                if s.text.strip() in seen.texts:
                    stale_texts += 1
                elif not s.calls:
                    step_new = True
            stale_steps += not step_new
            seen.add(s, self._facts)
        # "The last steps added nothing": every recent step must be stale, hence a feature for all of them.
        features: dict[str, float] = {
            "stale_steps": stale_steps / observed_steps,
            "all_steps_stale": float(stale_steps == observed_steps),
        }
        if calls:
            features["exact_repeat"] = exact / calls
            features["near_repeat"] = near / calls
            features["stale_results"] = stale / calls
            features["stale_masked"] = masked_stale / calls
        else:
            # A text-only stretch adds information only through what the agent says.
            features["no_calls"] = 1.0
        if texts:
            features["stale_text"] = stale_texts / texts
        features["error_streak"] = min(_error_streak(steps, self._failed), 3) / 3
        return features

    def infeasible_features(self, projection: Projection) -> dict[str, float]:
        counts = {kind: 0 for kind in _LASTING}
        transient = cannot = 0
        last_lasting: dict[str, int] = {}
        recovered = 0.0
        get, make = self._facts_cache.get, self._facts
        steps = projection.steps[-self.coefficients.history_steps :]
        for i, s in enumerate(steps):
            for c in s.calls:
                facts = get(c.result) or make(c.result)
                lasting = None
                if self._failed(c):
                    if facts.lasting is not None:
                        counts[facts.lasting] += 1
                        lasting = facts.lasting
                    elif facts.transient:
                        transient += 1
                if lasting is not None:
                    last_lasting[c.tool] = i
                elif not c.error and c.tool in last_lasting and last_lasting[c.tool] < i:
                    recovered = 1.0
                cannot += facts.cannot
            if s.text:
                cannot += (get(s.text) or make(s.text)).cannot
        if projection.final is not None:
            cannot += self._facts(projection.final).cannot
        worst = max(counts.values())
        features = {
            "lasting_errors": min(sum(counts.values()), 4) / 4,
            "repeated_lasting": min(max(worst - 1, 0), 2) / 2,
            "cannot": min(cannot, 2) / 2,
            "error_streak": min(_error_streak(steps, self._failed), 3) / 3,
        }
        if transient:
            features["transient_errors"] = min(transient, 3) / 3
        if recovered:
            features["recovered"] = recovered
        if not projection.steps:
            features["no_steps"] = 1.0
        return features

    def goal_features(self, projection: Projection) -> dict[str, float]:
        targets = [self._stem_set(c) for c in projection.criteria] or [self._stem_set(projection.goal)]
        targets = [t for t in targets if t]
        # What the work shows: the stems and identifiers of the successful calls' results and arguments.
        evidence: set[str] = set()
        shown: set[str] = set()
        for s in projection.steps[-self.coefficients.history_steps :]:
            for c in s.calls:
                if not c.error:
                    args = self._args(c)
                    evidence |= self._stem_set(c.result[:600]) | self._stem_set(args)
                    shown |= self._id_set(c.result[:600]) | self._id_set(args)
        final = projection.final
        claim = self._stem_set(final) if final else frozenset()
        features: dict[str, float] = {}
        if targets:
            found = [len(t & evidence) / len(t) for t in targets]
            features["criteria_in_results"] = sum(found) / len(found)
            # Every criterion must be met: the least evidenced one says most about what is missing.
            features["weakest_in_results"] = min(found)
            features["criteria_in_final"] = sum(len(t & claim) / len(t) for t in targets) / len(targets)
        if final is not None:
            features["final"] = 1.0
            if _UNFINISHED.search(final.lower()):
                features["final_unfinished"] = 1.0
            if claim:
                features["final_in_results"] = len(claim & evidence) / len(claim)
            # An identifier the answer cites (a booking reference, an amount, a ticket number) that no result or
            # argument holds is a claim the work does not back: the answer came before the step that makes it.
            cited = self._id_set(final)
            if cited:
                backed = len(cited & shown) / len(cited)
                features["final_ids_backed"] = backed
                if backed < 1.0:
                    features["final_ids_unbacked"] = 1.0
            else:
                features["final_vague"] = 1.0
        last = projection.steps[-1] if projection.steps else None
        if last is not None and last.calls:
            features["last_step_errors"] = sum(c.error for c in last.calls) / len(last.calls)
        features.update(self.outcome_features(projection))
        return features

    def outcome_features(self, projection: Projection) -> dict[str, float]:
        """What the tools themselves said about the work, read at a finish (part of ``goal_features``): a short
        result that confirms an action (a file written, a message sent), whether the last call's result was one,
        a failure after the last confirmation, requests to the user that came back empty, and a confirmed write to
        an object (an id, an address) that neither the goal nor any earlier result holds (``write_object_unseen``:
        the run made it up). Empty when none of these happened: then only the words of the goal and the answer
        are left to read.

        A confirmation says that something changed, not that the right thing did. It counts only for a write
        that names no object (a file it wrote, a text it made) or whose objects the goal names; a confirmed write
        to an object the run picked from what its tools returned (the meeting a search listed, the address a
        lookup gave) is no evidence either way, and is reported as ``write_object_picked`` (which no map weighs):
        whether it picked the right one is not in the words the rules read."""
        calls = [c for s in projection.steps[-self.coefficients.history_steps :] for c in s.calls]
        goal = projection.goal.lower()
        confirmed = -1
        unanswered = 0
        unseen = picked = False
        for i, c in enumerate(calls):
            if self._failed(c):
                continue
            if not c.result.strip():
                unanswered += _asks_user(c.tool)
            elif _confirms(c.result):
                objects = [o for o in _objects(c.args) if o not in goal]
                if not objects:
                    confirmed = i
                    continue
                seen = [r.lower() for r in (d.result for d in calls[:i] if not self._failed(d))]
                if any(not any(o in r for r in seen) for o in objects):
                    unseen = True
                else:
                    picked = True
        features: dict[str, float] = {}
        if unseen:
            features["write_object_unseen"] = 1.0
        elif picked and confirmed < 0:
            features["write_object_picked"] = 1.0
        if confirmed >= 0:
            features["result_confirms"] = 1.0
            if confirmed == len(calls) - 1:
                features["last_result_confirms"] = 1.0
            elif any(self._failed(c) for c in calls[confirmed + 1 :]):
                features["failed_after_confirmation"] = 1.0
        if unanswered:
            features["unanswered_requests"] = min(unanswered, 2) / 2
        return features

    def drift_features(self, projection: Projection) -> dict[str, float]:
        goal = self._stem_set(projection.goal) | frozenset().union(*(self._stem_set(c) for c in projection.criteria))
        recent = projection.steps[-max(1, self.coefficients.window) :]
        if not recent or not goal:
            return {"no_evidence": 1.0}
        if self._wordless(recent, projection.final):
            # Nothing in the window could share a word with any goal: no overlap there is no evidence of a detour.
            return {"unobserved": 1.0}
        acting: set[str] = set()
        seen: set[str] = set()
        last: set[str] = set()  # what the latest step does: the current sub-task, when the window mixes two
        args: list[str] = []  # the latest step's arguments as text
        for s in recent:
            last = set(self._stem_set(s.text))
            args = [self._args(c) for c in s.calls]
            for c, a in zip(s.calls, args, strict=True):
                last |= self._stem_set(c.tool + " " + a)
                seen |= self._stem_set(c.result[:600])  # the slice goal_features reads: one cache entry
            acting |= last
        if projection.final:
            acting |= self._stem_set(projection.final)
        # Data flowing from recent results into the latest call (an id read before, now an argument) marks work
        # that builds on the task; a detour that merely shares topic words starts from nothing the run produced.
        passed = False
        if cited := frozenset().union(*map(self._id_set, args)):
            passed = any(
                not c.error and not cited.isdisjoint(self._id_set(c.result[:600]))
                for s in projection.steps[-self.coefficients.flow_steps - 1 : -1]
                for c in s.calls
            )
        features = {
            "last_args_from_results": 1.0 if passed else 0.0,
            "goal_in_actions": len(goal & acting) / len(goal),
            "goal_in_results": len(goal & seen) / len(goal),
            "actions_on_goal": len(acting & goal) / len(acting) if acting else 0.0,
            "last_goal_in_actions": len(goal & last) / len(goal),
            "last_actions_on_goal": len(last & goal) / len(last) if last else 0.0,
        }
        if not acting:
            features["no_actions"] = 1.0
        return features

    def _wordless(self, steps: Sequence[ProjectedStep], final: str | None) -> bool:
        """The steps act without words: they have calls, every argument value is a number, an id or pointer and
        key vocabulary (``_UI_WORDS``), every result has no text (``_textless``), and neither the steps' texts nor
        the final answer say anything. A call with one word in its arguments (an off-topic query) is read."""
        if not any(s.calls for s in steps) or (final is not None and _has_words(final)):
            return False
        return all(
            not _has_words(s.text)
            and all(not _has_words(_values_text(c.args)) and self._facts(c.result).textless for c in s.calls)
            for s in steps
        )

    def _facts(self, text: str) -> _TextFacts:
        """What the stagnation and feasibility signals read of a text, computed once per distinct text."""
        cache = self._facts_cache
        hit = cache.get(text)
        if hit is not None:
            return hit
        facts = _TextFacts(text)
        _memo(cache, text, facts, 4 * self._cache_size)
        return facts

    def _failed(self, call: ProjectedCall) -> bool:
        """A call failed: it raised, or its tool reported the failure in its result (``{"error": ...}``,
        ``ERROR: ...``), as many tools do instead of raising."""
        return call.error or (self._facts_cache.get(call.result) or self._facts(call.result)).looks_failed

    def _seen(self, steps: Sequence[ProjectedStep], tools: set[str]) -> _Seen:
        """What ``steps`` already brought: their results and texts, and the arguments of the calls to ``tools``.

        Written as flat comprehensions because it runs over the whole history every turn.
        """
        get, facts = self._facts_cache.get, self._facts
        calls = [c for s in steps for c in s.calls]
        return _Seen(
            [get(c.result) or facts(c.result) for c in calls],
            {s.text.strip() for s in steps if s.text},
            {t: [c.args for c in calls if c.tool == t] for t in tools},
        )

    def _args(self, call: ProjectedCall) -> str:
        """The call's arguments as text (cut at 300 characters), memoised per arguments object: a run's
        projections share its calls' argument objects from turn to turn, and logged arguments are never mutated.
        The memo holds the object itself, so its id cannot be reused by another while the entry lives."""
        args = call.args
        hit = self._args_cache.get(id(args))
        if hit is not None and hit[0] is args:
            return hit[1]
        text = _args_text(args)[:300]
        if isinstance(args, (dict, list)):  # strings and numbers are cheap to read again
            _memo(self._args_cache, id(args), (args, text), 4 * self._cache_size)
        return text

    def _id_set(self, text: str) -> frozenset[str]:
        """The identifiers in ``text``: tokens with a digit (ids, amounts, dates) and upper-case codes."""
        cache = self._id_cache
        hit = cache.get(text)
        if hit is not None:
            return hit
        ids = frozenset(t.strip(".,:;/-").lower() for t in _IDENT.findall(text)) - {""}
        _memo(cache, text, ids, 4 * self._cache_size)
        return ids

    def _stem_set(self, text: str) -> frozenset[str]:
        cache = self._stem_cache
        hit = cache.get(text)
        if hit is not None:
            return hit
        stems = frozenset(_stems(text))
        _memo(cache, text, stems, 4 * self._cache_size)
        return stems

    # -- answers ----------------------------------------------------------------------------------------------

    def _integrity(self, projection: Projection, condition: Condition) -> Answer:
        if not isinstance(condition.question, YesNo):
            return _wrong_type(condition, "YesNo")
        features, where = self.integrity_features(projection)
        if not where:
            p = self.coefficients.integrity.p({})
            return _yes(p, "no tool result in the scanned steps")
        z = self._integrity_logit(features)
        p = _sigmoid(z)
        if "trivial" in features:
            return _yes(p, f"only empty or trivial results (latest: {where}): no evidence either way")
        fired = [k.removeprefix("marker_") for k in features if k.startswith("marker_")]
        note = f"most suspicious: {where}; markers: {', '.join(fired) or 'none'}; "
        note += f"model logit {features['model_logit']:.2f}"
        if self.integrity is not None:
            note += f"; {self.integrity.version} logit {z:.2f}"
        return _yes(p, note)

    def _stagnation(self, projection: Projection, condition: Condition) -> Answer:
        if not isinstance(condition.question, YesNo):
            return _wrong_type(condition, "YesNo")
        f = self.stagnation_features(projection)
        base = self.coefficients.stagnation_unobserved
        if "unobserved" in f and base is not None:
            # Screenshots or nothing came back: the rules cannot tell a stuck run from a working one (on a source
            # of such runs the map said 1.00 to every state, docs/evals.md), so the base rate, deferred to a judge.
            p = min(1.0, max(0.0, base.p({})))
            note = "no recent call returned text (screenshots or nothing): the rules cannot tell, the base rate"
            return Answer({"yes": p, "no": 1.0 - p}, note=note, defer=True)
        return _yes(self.coefficients.stagnation.p(f), _describe(f))

    def _infeasible(self, projection: Projection, condition: Condition) -> Answer:
        if not isinstance(condition.question, YesNo):
            return _wrong_type(condition, "YesNo")
        f = self.infeasible_features(projection)
        return _yes(self.coefficients.infeasible.p(f), _describe(f))

    def _goal_reached(self, projection: Projection, condition: Condition) -> Answer:
        if not isinstance(condition.question, YesNo):
            return _wrong_type(condition, "YesNo")
        if projection.final is None:
            # Reached means the work is done *and* answered: with no final answer yet the run must go on (a stop
            # with success here would end it before the model says what it did; see docs/architecture.md). The
            # signals are not computed: on most turns there is no final answer, and they would change nothing.
            return _yes(0.0, "no final answer yet")
        f = self.goal_features(projection)
        co = self.coefficients
        if not projection.criteria:
            said = [k for k in OUTCOME_FEATURES if k in f]
            unchanged = _unchanged(projection, f, said)
            if said and not unchanged and co.goal_reached_evidence is not None:
                # The tools (or the answer itself) said how it went: read that, as fitted on real runs. A confirmed
                # write to an object nothing showed the run (a guessed id, a made-up address) did not change what the
                # task named: read as surely as an answer that says it could not finish (no map was fitted on such
                # writes; the runs that have them are never fitted on, docs/evals.md).
                read = {**f, "final_unfinished": 1.0} if "write_object_unseen" in f else f
                note = f"no acceptance criteria; the run says: {', '.join(said)}"
                return _yes(co.goal_reached_evidence.p(read), note)
            if co.goal_reached_open is not None:
                # Nothing said and no criteria: on recorded runs of real models the rules cannot see success
                # (docs/evals.md), so the shipped map answers their base rate. Criteria, or a judge, can do better.
                note = "no acceptance criteria and no word from the tools: the rules cannot tell, the base rate"
                if unchanged:
                    note = (
                        "no acceptance criteria; the goal asks for a change, no write was confirmed and the answer "
                        "says it could not finish, which is also how a run ends right when nothing needed changing "
                        "(no such record): the base rate"
                    )
                elif "write_object_picked" in f:
                    note = (
                        "no acceptance criteria; a tool confirmed a write to an object the run picked from what its "
                        "tools returned, which says something changed, not that it was the right one: the base rate"
                    )
                p = min(1.0, max(0.0, co.goal_reached_open.p(f)))
                return Answer({"yes": p, "no": 1.0 - p}, note=f"{note}; {_describe(f)}", defer=True)
        return _yes(co.goal_reached.p(f), _describe(f))

    def _drift(self, projection: Projection, condition: Condition) -> Answer:
        q = condition.question
        if not isinstance(q, Score):
            return _wrong_type(condition, "Score")
        f = self.drift_features(projection)
        if "unobserved" in f:
            base = self.coefficients.drift_unobserved
            note = "the recent steps carry no words (coordinates, ids, results with no text): the rules cannot tell"
            if base is None:
                return uncertain(note)
            # Absent words are not a detour: the bias alone would read them as one (p(drift) 0.92 on every click).
            aligned = min(1.0, max(0.0, base.p({})))
            return Answer(_levels(aligned, q.labels, condition.fires_on), note=f"{note}, the base rate", defer=True)
        aligned = self.coefficients.drift.p(f)
        levels = _levels(aligned, q.labels, condition.fires_on)
        return Answer(levels, note=f"p(aligned)={aligned:.2f}; {_describe(f)}")

    def _risk(self, projection: Projection, condition: Condition) -> Answer:
        q = condition.question
        if not isinstance(q, Choice):
            return _wrong_type(condition, "Choice")
        if projection.pending is None:
            return uncertain("no pending proposal to classify: risk is asked before a tool call runs")
        labels = q.labels
        if not set(labels) <= set(RISK_LABELS):
            return uncertain(f"risk options {list(labels)} are not the declared classes {list(RISK_LABELS)}")
        co = self.coefficients
        declared = projection.pending_risk
        dist = co.risk_declared.get(declared)
        note = f"declared risk of {projection.pending.name}: {declared}"
        if dist is None or declared == "unknown":
            dist = co.risk_declared["unknown"]
            hinted = _name_hint(projection.pending.name, co.risk_name_hints, co.risk_object_words)
            if hinted is not None:
                dist = co.risk_hinted[hinted]
                note += f"; the name suggests {hinted}"
        # Options a custom question set left out: their mass is dropped, the rest renormalised.
        total = sum(dist[label] for label in labels)
        if total <= 0:
            return uncertain(f"no probability left for options {list(labels)}")
        return Answer({label: dist[label] / total for label in labels}, note=note)


def _name_hint(name: str, hints: Mapping[str, tuple[str, ...]], objects: frozenset[str]) -> str | None:
    """The risk label a tool's name suggests, or None when no word of it is a hint word.

    The name is read as clauses split at ``and`` / ``then`` (``get_and_delete_messages``: a read, then a delete);
    the riskiest clause's label is the name's. In a clause the verb decides: its first hint word that is not an
    object word. When that verb reads (``get_commit``, ``find_email_address``, ``email_search_emails``), a
    reversible word after it or an object word anywhere in the clause (``commit``, ``email``) names what the call
    touches, not what it does, and the clause is read-only; a destructive or money word still wins
    (``get_delete``, ``get_bank_balance``). With no read verb every hint word counts, an object word too:
    ``send_email``, ``delete_email`` and ``email_user`` (a noun used as the verb) stay irreversible. Labels are
    ranked in the hints' order, the riskiest first."""
    tokens = _TOKEN.findall(_CAMEL.sub(" ", name).lower().replace("_", " ").replace("-", " "))
    order = list(hints)
    said = {label: set(words) for label, words in hints.items()}
    labels: list[str] = []
    clause: list[str] = []
    for token in [*tokens, "and"]:
        if token not in ("and", "then"):
            clause.append(token)
            continue
        label = _clause_hint(clause, said, objects)
        if label is not None:
            labels.append(label)
        clause = []
    return min(labels, key=order.index) if labels else None


def _clause_hint(tokens: list[str], said: Mapping[str, set[str]], objects: frozenset[str]) -> str | None:
    """The label of one clause of a tool's name (see ``_name_hint``); ``said`` is ordered, the riskiest first."""
    reads = said.get("read_only", set())
    verb = next((t for t in tokens if t not in objects and any(t in words for words in said.values())), None)
    counted = set(tokens) - objects if verb is not None and verb in reads else set(tokens)
    matched = [label for label, words in said.items() if counted & words]
    if matched and verb is not None and verb in reads and set(matched) <= {"read_only", "reversible"}:
        return "read_only"
    return matched[0] if matched else None


_EMPTY_RESULT = re.compile(
    r"\s*(?:could ?n[o']t find|no (?:results?|matches|records|items|entries|documents|hits)\b|nothing (?:was )?found"
    r"|0 (?:results|matches|items|records)\b)"
)
"""A search that came back empty-handed, said in words. An empty text, ``[]`` or ``{}`` is not enough: a write
that succeeds often returns nothing."""
_FAILED_RESULT = re.compile(r'^\s*(?:\{\s*"error"|error\b|exception\b|traceback\b)')

_MEDIA_HEAD = re.compile(r'\[? ?\{ ?"type": ?"(?:image|audio)"')
"""A result that opens with an image or audio content block (MCP's blocks, as the MCP tool writes them when any
block is not text; a provider's image part returned as a value)."""

_BLOCK_TYPE = re.compile(r'"type": ?"([a-z_]*)"')

_MEDIA_TYPES = frozenset({"image", "audio", "base64", "url"})
"""Block types that carry no text: media blocks and the ``source`` of a provider's image part."""


def _repeats_text(recent: Sequence[ProjectedStep], said: set[str]) -> bool:
    """Every step of ``recent`` has words, and they are words the model already said before the window (``said``).

    Checking against ``said`` alone suffices: a recent step that repeats an earlier recent step repeats words that
    step took from ``said``, or the check already failed there."""
    return all(s.text.strip() and s.text.strip() in said for s in recent)


def _textless(normal: str) -> bool:
    """A result with no text to read (``normal`` as ``_TextFacts`` has it): empty or whitespace only, or media
    blocks only as far as the projection shows it (the projection elides a screenshot's data, so a text block
    after it is shown and makes it text). ``[]``, ``{}``, ``null`` and "No results found" are answers, not
    textless. The notice a projection shows for a withheld (quarantined) result is textless too: the result was not
    observed."""
    if not normal or normal == WITHHELD:
        return True
    return bool(_MEDIA_HEAD.match(normal)) and all(t in _MEDIA_TYPES for t in _BLOCK_TYPE.findall(normal))


_UI_WORD_TEXT = """
    click left right middle double triple hover scroll move mouse drag drop press key keys type wait screenshot
    cursor position zoom tap swipe enter return tab esc escape ctrl control shift alt cmd meta super space backspace
    delete home end pageup pagedown arrow top bottom"""
_UI_WORDS = frozenset(_UI_WORD_TEXT.split())
"""Pointer and key vocabulary of computer-use actions (``left_click``, ``scroll`` ``down``, ``press`` ``Enter``):
words that name how to act, never what the task is about, so they cannot tell an on-goal action from a detour."""


_WORD_CANDIDATE = re.compile(r"(?<![a-z0-9])[a-z]{3,}(?![a-z0-9])")
"""A ``_TOKEN`` of letters only, three or more: found by ``re`` in C, so the digits, coordinates and element ids
between words cost no Python step."""


def _has_words(text: str) -> bool:
    """``text`` has a word that could share a topic with a goal: letters only, three or more, not a stop word and
    not pointer or key vocabulary. Numbers and tokens with digits (coordinates, element ids) are not words. The
    whole text is read (prose stops at its first word): a word after a long run of numbers is a word too."""
    return any(
        (w := m.group()) not in _STOPWORDS and w not in _UI_WORDS
        for m in _WORD_CANDIDATE.finditer(_CAMEL.sub(" ", text).lower())
    )


def _values_text(args: Any) -> str:
    """The argument values as text, without the keys (``x``, ``coordinate``, ``element`` name the value, not the
    task)."""
    if isinstance(args, Mapping):
        return " ".join(_values_text(v) for v in args.values())
    if isinstance(args, (list, tuple)):
        return " ".join(_values_text(v) for v in args)
    return args if isinstance(args, str) else ""  # numbers, flags and null carry no words


def _id_note(call_id: str | None) -> str:
    # A call id is the model's text: cut, so that a long one never pushes the markers out of the note.
    if not call_id:
        return ""
    return f" (id {call_id[:40]}{'...' if len(call_id) > 40 else ''})"


def _memo(cache: OrderedDict[Any, Any], key: Hashable, value: Any, size: int) -> None:
    """Remember ``value``, forgetting the oldest entries past ``size`` (first in, first out: the window slides, so
    the oldest text is the one least likely to be seen again)."""
    cache[key] = value
    while len(cache) > size:
        try:
            cache.popitem(last=False)
        except KeyError:  # emptied meanwhile by another thread sharing this evaluator
            break


def _near(a: Any, b: Any, threshold: float) -> bool:
    """Two argument sets differ only slightly: the same keys with one value changed, where a changed text still
    shares ``threshold`` of its words (or differs only in case and spacing); raw string arguments by their words.
    """
    if isinstance(a, dict | Mapping) and isinstance(b, dict | Mapping):
        if a.keys() != b.keys():
            return False
        changed = [k for k in a if a[k] != b[k]]
        if len(changed) != 1:
            return not changed
        a, b = a[changed[0]], b[changed[0]]
        if not (isinstance(a, str) and isinstance(b, str)):
            return True  # one number or flag changed: a page, a limit, a retry
    if isinstance(a, str) and isinstance(b, str):
        if a.strip().lower() == b.strip().lower():
            return True
        return _jaccard(_words(a), _words(b)) >= threshold
    return False


@functools.lru_cache(maxsize=4096)
def _words(text: str) -> frozenset[str]:
    return frozenset(_TOKEN.findall(text.lower()))


def _error_streak(steps: Sequence[ProjectedStep], failed: Callable[[ProjectedCall], bool]) -> int:
    """How many of the latest steps with calls had all their calls fail (steps with text only are skipped: the
    agent musing between two failures does not end a streak)."""
    streak = 0
    for s in reversed(steps):
        if not s.calls:
            continue
        if not all(failed(c) for c in s.calls):
            break
        streak += 1
    return streak


def _levels(aligned: float, labels: Sequence[str], fires_on: Sequence[str]) -> dict[str, float]:
    """p(aligned) as the probability that the score is above the levels the condition fires on (``1 - aligned``
    on ``fires_on``, so the drift map is the probability of not drifting, and fitting it on that is calibrating
    the condition), each side spread over its own levels as a binomial in ``aligned`` (the higher the signal, the
    higher the level within a side: a confident signal concentrates on one end, a weak one spreads)."""
    low = [label for label in labels if label in fires_on]
    high = [label for label in labels if label not in fires_on]
    dist: dict[str, float] = {}
    for side, mass in ((low, 1.0 - aligned), (high, aligned)):
        k = len(side) - 1
        for i, label in enumerate(side):
            dist[label] = mass * math.comb(k, i) * aligned**i * (1.0 - aligned) ** (k - i)
    total = sum(dist.values())
    if total <= 0:  # every level on one side, and all the mass on the other
        return {label: 1.0 / len(labels) for label in labels}
    return {label: v / total for label, v in dist.items()}


def _yes(p: float, note: str) -> Answer:
    p = min(1.0, max(0.0, p))
    return Answer({"yes": p, "no": 1.0 - p}, note=note)


def _wrong_type(condition: Condition, expected: str) -> Answer:
    got = type(condition.question).__name__
    return uncertain(f"the rule for {condition.name!r} answers a {expected} question, not a {got}")


def _describe(features: Mapping[str, float]) -> str:
    return ", ".join(f"{k}={v:.2f}" for k, v in features.items())


_HANDLERS = {
    "integrity": RuleEvaluator._integrity,
    "risk": RuleEvaluator._risk,
    "infeasible": RuleEvaluator._infeasible,
    "goal_reached": RuleEvaluator._goal_reached,
    "drift": RuleEvaluator._drift,
    "stagnation": RuleEvaluator._stagnation,
}
