"""The eval harness's speed-ups change no number: each fast path checked against a slow reference path.

- ``IntegrityModel.grams`` (n-gram CRCs chained instead of joined) against the joined-text formula, bit for bit
  (the windowed logit against its per-window formula: ``tests/test_integrity_windows.py``);
- ``Projection.text`` / ``state_hash`` (rendered on first read) against a render at construction;
- the rule evaluator's lexical helpers (identifiers, stems, argument text, confirmations) against their plain
  formulations: every feature of every signal the same, on the development set and on distinct states;
- ``predict`` (projections built when answered, a ``RuleEvaluator``'s calls shared out to forked processes)
  against the RuleEvaluator asked record by record on projections rebuilt from the JSON: the same probabilities
  (``==`` on floats, not ``approx``) and notes, on the development set and on distinct states made from it.
"""

from __future__ import annotations

import asyncio
import copy
import gc
import hashlib
import itertools
import json
import pickle
import random
import re
import zlib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

import stopwise.evals.run as run_module
import stopwise.guardian.evaluators.rule as rule_module
from stopwise.evals import TraceRecord, predict, predict_sync, read_traces
from stopwise.evals.traces import projection_from_data, text_projection
from stopwise.guardian import DEFAULT_CONDITIONS, Answer, Answers, QuestionSet
from stopwise.guardian.evaluators._integrity import tokens
from stopwise.guardian.evaluators.rule import (
    IntegrityModel,
    RuleEvaluator,
    load_integrity_model,
    normalise_untrusted,
)
from stopwise.guardian.projection import Projection, _render

DEVSET = Path(__file__).resolve().parent.parent / "evals" / "data" / "devset.jsonl"


def _dev_lines() -> list[str]:
    return [line for line in DEVSET.read_text(encoding="utf-8").splitlines() if line.strip()]


def _distinct(data: dict[str, Any], case: int) -> dict[str, Any]:
    """A record with a state of its own (as ``benchmarks/bench_evals.py`` makes them)."""
    p = copy.deepcopy(data["projection"])
    tag = f" [case {case}]"
    p["goal"] += tag
    for step in p["steps"]:
        for call in step["calls"]:
            call["result"] += tag
    if p.get("final") is not None:
        p["final"] += tag
    out = dict(data, id=f"{data['id']}#{case}", projection=p)
    out["text"] = projection_from_data(p).text
    return out


def _results(lines: list[str]) -> list[str]:
    texts = []
    for line in lines:
        p = json.loads(line).get("projection") or {}
        texts += [c.get("result", "") for s in p.get("steps", []) for c in s.get("calls", [])]
    return list(dict.fromkeys(texts))


# -- the integrity model --------------------------------------------------------------------------------------


def _reference_grams(model: IntegrityModel, words: list[str]) -> list[list[int]]:
    mask = (1 << model.bits) - 1
    return [
        [zlib.crc32(" ".join(words[i : i + n]).encode()) & mask for i in range(len(words) - n + 1)]
        for n in range(1, model.ngram + 1)
        if n == 1 or len(words) > 1
    ]


@pytest.mark.slow
@pytest.mark.parametrize("ngram", [1, 2, 3])
def test_integrity_buckets_are_those_of_the_joined_ngrams(ngram: int) -> None:
    shipped = load_integrity_model()
    model = IntegrityModel(shipped.version, shipped.bits, ngram, shipped.bias, shipped.weights)
    texts = [*_results(_dev_lines()), "", "one", "two words", "ünïcödé  text, with: punctuation! 'quoted' 123"]
    for text in texts:
        words = tokens(normalise_untrusted(text)[0])
        assert model.grams(words) == _reference_grams(model, words)


# -- the rule evaluator's lexical helpers -----------------------------------------------------------------------

# The plain formulations the fast helpers replaced: the features must be the very same with either.
_PLAIN_IDENT = re.compile(r"[A-Za-z0-9][\w./:@-]*[0-9][\w./:@-]*|\b[A-Z]{2,}[A-Z0-9-]*\b")


def _plain_stems(text: str) -> set[str]:
    text = rule_module._CAMEL.sub(" ", text).lower()
    return {
        rule_module._stem(w)
        for w in rule_module._TOKEN.findall(text)
        if w not in rule_module._STOPWORDS and (len(w) > 2 or w.isdigit())
    }


def _plain_args_text(args: Any) -> str:
    if isinstance(args, str):
        return args
    if isinstance(args, Mapping):
        return " ".join(f"{k} {_plain_args_text(v)}" for k, v in args.items())
    if isinstance(args, (list, tuple)):
        return " ".join(_plain_args_text(v) for v in args)
    return str(args)


def _plain_confirms(result: str) -> bool:
    text = result.strip()
    return len(text) <= rule_module._CONFIRMATION_CHARS and rule_module._CONFIRMATION.search(text) is not None


def _all_features(records: list[dict[str, Any]]) -> list[tuple[dict[str, dict[str, float]], str]]:
    evaluator = RuleEvaluator()  # a fresh one: no cache carries a value over from the other run
    out = []
    for data in records:
        projection = projection_from_data(data["projection"])
        out.append((evaluator.features(projection), evaluator.answer_all(projection, DEFAULT_CONDITIONS.conditions)))
    return [(features, repr(answers.answers)) for features, answers in out]


@pytest.mark.slow
def test_rule_features_and_answers_are_those_of_the_plain_lexical_helpers(monkeypatch: pytest.MonkeyPatch) -> None:
    base = [json.loads(line) for line in _dev_lines()]
    records = [r for r in base if r.get("projection")]
    records += [_distinct(records[i], 1 + i % 3) for i in range(0, len(records), 7)]
    fast = _all_features(records)
    monkeypatch.setattr(rule_module, "_IDENT", _PLAIN_IDENT)
    monkeypatch.setattr(rule_module, "_stems", _plain_stems)
    monkeypatch.setattr(rule_module, "_args_text", _plain_args_text)
    monkeypatch.setattr(rule_module, "_confirms", _plain_confirms)
    assert _all_features(records) == fast  # floats compared with ==, notes and all


def _texts_from(alphabet: str, rng: random.Random, count: int) -> list[str]:
    return ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 16))) for _ in range(count)]


# Letters, digits, the identifier punctuation, spaces, and non-ASCII letters and digits that \w or case-insensitive
# matching treat specially (the long s and Kelvin sign fold to ASCII letters; Arabic-Indic digits are \w, not 0-9).
_HOSTILE = "aZz09_.-/:@ \u00e9\u00c9\u0660\u017f\u212aSUCESsuces"


@pytest.mark.parametrize("seed", [1, 2])
def test_identifiers_are_those_of_the_pattern_without_the_look_behind(seed: int) -> None:
    rng = random.Random(seed)
    texts = [*_texts_from(_HOSTILE, rng, 20_000), *_results(_dev_lines())]
    for text in texts:
        assert rule_module._IDENT.findall(text) == _PLAIN_IDENT.findall(text), text


@pytest.mark.parametrize(
    ("fast", "plain"),
    [(rule_module._confirms, _plain_confirms), (rule_module._stems, _plain_stems)],
    ids=["confirms", "stems"],
)
def test_lexical_fast_paths_agree_with_their_plain_formulations(
    fast: Callable[[str], object], plain: Callable[[str], object]
) -> None:
    rng = random.Random(3)
    made = [
        t.replace("SUCES", "success").replace("suces", "Successfully written")
        for t in _texts_from(_HOSTILE, rng, 5_000)
    ]
    for text in [
        *made,
        "File saved successfully.",
        "ſuccessfully sent",
        "Message SENT SUCCESSFULLY",
        *_results(_dev_lines()),
    ]:
        assert fast(text) == plain(text), text


def test_a_texts_normal_form_collapses_whitespace_as_the_pattern_did() -> None:
    # Every character the pattern \s matches, and no other, is one str.split splits on.
    spaces = [chr(c) for c in range(0x110000) if re.fullmatch(r"\s", chr(c))]
    assert spaces == [chr(c) for c in range(0x110000) if chr(c).isspace()]
    rng = random.Random(4)
    texts = [*_texts_from("".join(spaces) + "aB c\u0130\u212a", rng, 20_000), *_results(_dev_lines())]
    for text in texts:
        assert rule_module._TextFacts(text).normal == re.sub(r"\s+", " ", text.strip().lower()), repr(text)


# -- the projection's text ------------------------------------------------------------------------------------


def _eager_text(p: Projection) -> str:
    text = _render(p)
    if len(text) > p.max_chars:
        head = p.max_chars // 3
        text = text[:head] + "\n[... earlier steps elided ...]\n" + text[-(p.max_chars - head - 40) :]
    return text


@pytest.mark.slow
def test_projection_text_rendered_on_first_read_is_the_eager_render() -> None:
    for line in _dev_lines()[:400]:
        data = json.loads(line)
        if data.get("projection") is None:
            continue
        p = projection_from_data(data["projection"])
        expected = _eager_text(p)
        assert p.state_hash == hashlib.sha256(expected.encode()).hexdigest()[:16]  # state_hash read first
        assert p.text == expected
        q = projection_from_data(data["projection"])
        assert q == p  # equality reads the text too
        assert pickle.loads(pickle.dumps(projection_from_data(data["projection"]))) == p
    small = projection_from_data(json.loads(_dev_lines()[0])["projection"] | {"max_chars": 100})
    assert "[... earlier steps elided ...]" in small.text and len(small.text) <= 100
    given = text_projection("GOAL: a text only")
    assert given.text == "GOAL: a text only"
    with pytest.raises(AttributeError, match="no attribute 'nonsense'"):
        getattr(p, "nonsense")  # noqa: B009 - not an attribute mypy knows


# -- predict ----------------------------------------------------------------------------------------------------


def _reference(lines: list[str]) -> list[tuple[str, str, bool, float | None, str]]:
    """Record by record: the projection rebuilt from its JSON, the RuleEvaluator asked that one condition."""
    ev = RuleEvaluator()
    out = []
    for line in lines:
        data = json.loads(line)
        condition = DEFAULT_CONDITIONS.by_name[data["condition"]]
        record = TraceRecord.from_data(data)
        if record.label_problem(condition) is not None:
            continue
        projection = projection_from_data(data["projection"])
        answers = ev.answer_all(projection, (condition,)).checked((condition,))
        answer = answers.answers[condition.name]
        p = None if answer.uncertain else answer.p(condition.fires_on)
        out.append((record.id, condition.name, record.holds(condition), p, answer.note))
    return out


def _predicted(path: Path, workers: int | None) -> tuple[list[tuple[str, str, bool, float | None, str]], int]:
    records = read_traces(path, strict=True).records
    out = predict_sync(RuleEvaluator(), records, workers=workers)
    return [(x.record.id, x.condition.name, x.holds, x.p, x.note) for x in out.items], out.calls


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """The development set, then 600 distinct states made from it."""
    lines = _dev_lines()
    base = [json.loads(line) for line in lines]
    lines += [json.dumps(_distinct(base[i % len(base)], i // len(base)), ensure_ascii=False) for i in range(600)]
    path = tmp_path_factory.mktemp("traces") / "traces.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path, lines


@pytest.mark.slow
@pytest.mark.parametrize("workers", [1, 2, 3])
def test_predict_gives_the_reference_probabilities_bit_for_bit(traces: tuple[Path, list[str]], workers: int) -> None:
    path, lines = traces
    got, calls = _predicted(path, workers)
    assert got == _reference(lines)  # floats compared with ==: the very same numbers
    assert calls == len({json.loads(line)["text"] for line in lines})


@pytest.mark.slow
def test_predict_answers_the_shares_here_when_no_process_can_be_started(
    traces: tuple[Path, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    path, lines = traces

    def no_pool(*args: Any, **kwargs: Any) -> Any:
        raise OSError("no fork here")

    monkeypatch.setattr(run_module, "ProcessPoolExecutor", no_pool)
    seen: list[tuple[int, int]] = []
    records = read_traces(path).records
    out = predict_sync(RuleEvaluator(), records, workers=2, progress=lambda d, n: seen.append((d, n)))
    assert [(x.record.id, x.condition.name, x.holds, x.p, x.note) for x in out.items] == _reference(lines)
    assert seen[-1] == (out.calls, out.calls) and all(d <= n for d, n in seen)


def test_predict_by_default_uses_processes_for_a_large_rule_run_only(monkeypatch: pytest.MonkeyPatch) -> None:
    rules = RuleEvaluator()
    assert run_module._default_workers(rules, run_module.PARALLEL_MIN_CALLS - 1) == 1
    assert run_module._default_workers(rules, run_module.PARALLEL_MIN_CALLS) >= 1

    class Other:
        name = "other"

        async def evaluate(self, projection: Projection, questions: QuestionSet) -> Answers:
            return Answers("other", "v1", {c.name: Answer({"yes": 0.5, "no": 0.5}) for c in questions.conditions})

    assert run_module._default_workers(Other(), 10**6) == 1  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="workers"):
        predict_sync(Other(), [], workers=2)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="workers"):
        predict_sync(rules, [], workers=0)


def test_a_malformed_projection_given_directly_is_skipped_as_before() -> None:
    bad = TraceRecord("x", "goal_reached", True, "test", "s", {"goal": 3}, text="GOAL: 3")
    good_data = json.loads(_dev_lines()[0])
    good = TraceRecord.from_data(good_data)
    out = asyncio.run(predict(RuleEvaluator(), [bad, good]))
    assert [s.reason for s in out.skipped] == ["malformed projection: goal and pending_risk must be strings"]
    assert [x.record.id for x in out.items] == [good.id]


def _reference_check(d: Any) -> str | None:
    """``check_projection_data`` as it was: every step and call looked at one key at a time."""
    from collections.abc import Mapping

    if not isinstance(d, Mapping):
        return f"must be an object, got {type(d).__name__}"
    if not isinstance(d.get("goal", ""), str) or not isinstance(d.get("pending_risk", "unknown"), str):
        return "goal and pending_risk must be strings"
    criteria = d.get("criteria", [])
    if not isinstance(criteria, list) or not all(isinstance(c, str) for c in criteria):
        return "criteria must be a list of strings"
    final = d.get("final")
    if final is not None and not isinstance(final, str):
        return "final must be a string or null"
    max_chars = d.get("max_chars", 8000)
    if isinstance(max_chars, bool) or not isinstance(max_chars, int) or max_chars < 100:
        return "max_chars must be an integer of at least 100"
    steps = d.get("steps", [])
    if not isinstance(steps, list):
        return "steps must be a list"
    for i, s in enumerate(steps):
        if not isinstance(s, Mapping) or isinstance(s.get("step"), bool) or not isinstance(s.get("step"), int):
            return f"steps[{i}] needs an integer 'step'"
        if not isinstance(s.get("text", ""), str) or not isinstance(s.get("calls", []), list):
            return f"steps[{i}]: text must be a string and calls a list"
        for j, c in enumerate(s.get("calls", [])):
            if not isinstance(c, Mapping) or not isinstance(c.get("tool"), str):
                return f"steps[{i}].calls[{j}] needs a 'tool' name"
            if not isinstance(c.get("result", ""), str) or not isinstance(c.get("risk", "unknown"), str):
                return f"steps[{i}].calls[{j}]: result and risk must be strings"
            if not isinstance(c.get("error", False), bool):
                return f"steps[{i}].calls[{j}]: error must be true or false"
    pending = d.get("pending")
    if pending is not None and (
        not isinstance(pending, Mapping)
        or not isinstance(pending.get("name"), str)
        or not isinstance(pending.get("args", {}), (Mapping, str))
    ):
        return "pending must be null or {name, args} with args an object or a string"
    return None


def test_the_quick_projection_check_finds_what_the_thorough_one_did() -> None:
    from types import MappingProxyType

    from stopwise.evals.traces import check_projection_data

    base = next(json.loads(line)["projection"] for line in _dev_lines() if json.loads(line)["projection"]["steps"])
    call = {"tool": "t", "result": "r", "error": False, "risk": "unknown"}
    variants: list[Any] = [base, [], None, {"goal": 1}, {"criteria": "x"}, {"final": 3}, {"max_chars": 50}]
    odd_steps: list[Any] = [
        "x", {"text": "a"}, {"step": True}, {"step": 1, "text": 2}, {"step": 1, "calls": ()}, {"step": 1},
        {"step": 1, "calls": ["c"]}, {"step": 1, "calls": [{"result": "r"}]}, {"step": 1, "calls": [call]},
        {"step": 1, "calls": [call | {"result": 1}]}, {"step": 1, "calls": [call | {"risk": None}]},
        {"step": 1, "calls": [call | {"error": 0}]}, {"step": 1, "calls": [MappingProxyType(call)]},
        MappingProxyType({"step": 1, "calls": [call]}), {"step": 1, "calls": [{"tool": "t"}]},
    ]  # fmt: skip
    for step in odd_steps:
        for pending in (None, {"name": "n"}, {"name": "n", "args": 1}, "p"):
            variants.append(base | {"steps": [*base["steps"], step], "pending": pending})
            variants.append({"steps": [step, "bad"], "pending": pending})
    for v in variants:
        assert check_projection_data(v) == _reference_check(v), v


async def test_predict_sync_inside_a_running_loop_raises_a_clear_error() -> None:
    with pytest.raises(RuntimeError, match=r"await predict"):
        predict_sync(RuleEvaluator(), [])


async def test_predict_workers_is_deprecated_and_answers_in_this_process(
    small_traces: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    records = read_traces(small_traces).records
    expected = [(x.record.id, x.condition.name, x.p) for x in (await predict(RuleEvaluator(), records)).items]

    def no_pool(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("predict must not start processes inside a running event loop")

    monkeypatch.setattr(run_module, "ProcessPoolExecutor", no_pool)
    with pytest.warns(DeprecationWarning, match="predict_sync"):
        out = await predict(RuleEvaluator(), records, workers=2)
    assert [(x.record.id, x.condition.name, x.p) for x in out.items] == expected


@pytest.fixture
def small_traces(tmp_path: Path) -> Path:
    """200 records of the development set."""
    path = tmp_path / "small.jsonl"
    with DEVSET.open(encoding="utf-8") as f:
        path.write_text("".join(itertools.islice(f, 200)), encoding="utf-8")
    return path


def test_reading_and_predicting_leave_the_garbage_collector_as_they_found_it(small_traces: Path) -> None:
    states = []
    for enabled in (True, False):
        (gc.enable if enabled else gc.disable)()
        try:
            records = read_traces(small_traces).records
            states.append(gc.isenabled())
            predict_sync(RuleEvaluator(), records, workers=1)
            states.append(gc.isenabled())
            asyncio.run(predict(RuleEvaluator(), records))
            states.append(gc.isenabled())
        finally:
            gc.enable()
    assert states == [True, True, True, False, False, False]
