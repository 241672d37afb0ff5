"""The eval harness (seed 001, "a threshold on an unmeasured probability is a guess"): labelled traces, the
metrics against hand-computed values, calibration, the exporter of the learning path, and the gate."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from collections.abc import Callable, Mapping
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from stopwise import Agent, FunctionModel, Reply, Runner, SQLiteStore, ToolCall, tool
from stopwise.approvals import Approve, Reject
from stopwise.evals import (
    CalibratedEvaluator,
    Calibration,
    CalibrationMap,
    TraceFormatError,
    TraceRecord,
    export_labels,
    load_calibration,
    parse_projection_text,
    predict,
    projection_to_data,
    read_traces,
    text_projection,
    write_traces,
)
from stopwise.evals.metrics import (
    auroc,
    brier,
    condition_metrics,
    ece,
    ece_at_prior,
    ece_floor,
    expected_cost,
    mce,
    recommend_threshold,
    reliability,
)
from stopwise.evals.report import build_report, compare
from stopwise.guardian import DEFAULT_CONDITIONS, Answer, Answers, QuestionSet, YesNo
from stopwise.guardian.guardian import Guardian
from stopwise.guardian.projection import Projection, project
from stopwise.messages import Message, Role, encode_tool_result, error_tool_result

ROOT = Path(__file__).resolve().parent.parent
DEVSET = ROOT / "evals" / "data" / "devset.jsonl"
QUIET = {"integrity": 0.0, "risk": 0.0, "infeasible": 0.0, "goal_reached": 0.0, "drift": 0.0, "stagnation": 0.0}


class Fn:
    """A test evaluator: every asked condition's probability of holding from a function of the projection."""

    def __init__(self, answer: Callable[[Projection], Mapping[str, float]], name: str = "fn") -> None:
        self.answer = answer
        self.name = name
        self.calls = 0

    async def evaluate(self, projection: Projection, questions: QuestionSet) -> Answers:
        self.calls += 1
        given = self.answer(projection)
        answers = {}
        for c in questions.conditions:
            p = given.get(c.name, 0.0)
            labels = c.question.labels
            fire = [x for x in labels if x in c.fires_on]
            rest = [x for x in labels if x not in c.fires_on]
            answers[c.name] = Answer({x: p / len(fire) for x in fire} | {x: (1 - p) / len(rest) for x in rest})
        return Answers(self.name, f"{self.name}-1", answers)


def _assistant(text: str, calls: tuple[ToolCall, ...] = ()) -> Message:
    return Message(Role.ASSISTANT, text, calls)


def state(goal: str = "Find the invoice total", steps: int = 1, final: str | None = None) -> Projection:
    rows = [Message.user(goal)]
    for i in range(steps):
        rows.append(_assistant(f"step {i}", (ToolCall("search", {"q": f"q{i}"}, id=f"c{i}"),)))
        rows.append(encode_tool_result(f"result {i}", tool_call_id=f"c{i}"))
    return project(rows, goal=goal, criteria=("the total",), final=final)


def record(condition: str, label: bool | str, p: Projection | None, rid: str, split: str = "test") -> TraceRecord:
    text = p.text if p is not None else "GOAL: only text"
    return TraceRecord(rid, condition, label, split, "unit", p, text, "MIT", "k")


# --- metrics, against values computed by hand ------------------------------------------------------------------

P = [0.05, 0.15, 0.15, 0.95, 1.0]
Y = [0, 1, 0, 1, 1]


def test_reliability_bins_hold_counts_mean_probability_and_observed_frequency() -> None:
    bins = reliability(P, Y)
    assert len(bins) == 10 and [b.count for b in bins] == [1, 2, 0, 0, 0, 0, 0, 0, 0, 2]
    assert bins[0].mean_p == pytest.approx(0.05) and bins[0].observed == 0.0
    assert bins[1].mean_p == pytest.approx(0.15) and bins[1].observed == pytest.approx(0.5)
    assert bins[2].mean_p is None and bins[2].observed is None
    assert bins[9].mean_p == pytest.approx(0.975) and bins[9].observed == 1.0
    # Edges: a bin holds its lower edge; 1.0 falls in the last bin.
    assert [b.count for b in reliability([0.1, 0.0, 1.0], [0, 0, 1])][:2] == [1, 1]


def test_ece_mce_and_brier_match_hand_computed_values() -> None:
    # ECE = 1/5*|0-.05| + 2/5*|.5-.15| + 2/5*|1-.975| = .01 + .14 + .01
    assert ece(P, Y) == pytest.approx(0.16)
    assert mce(P, Y) == pytest.approx(0.35)
    # Brier = (.0025 + .7225 + .0225 + .0025 + 0) / 5
    assert brier(P, Y) == pytest.approx(0.15)
    assert ece([], []) is None and brier([], []) is None and mce([], []) is None


@pytest.mark.slow
def test_auroc_counts_ties_as_half_and_agrees_with_scikit_learn() -> None:
    # positives .15, .95, 1.0 against negatives .05, .15: 1 + 0.5 + 2 + 2 wins of 6 pairs
    assert auroc(P, Y) == pytest.approx(5.5 / 6)
    assert auroc([0.2, 0.3], [1, 1]) is None
    from sklearn.metrics import roc_auc_score

    rng = np.random.default_rng(1)
    p = np.round(rng.random(300), 2)  # rounded: plenty of ties
    y = rng.random(300) < p
    assert auroc(p, y) == pytest.approx(roc_auc_score(y, p))


def test_the_recommended_threshold_minimises_the_stated_costs_on_the_data() -> None:
    p, y = [0.1, 0.4, 0.6, 0.9], [0, 1, 0, 1]
    # C_stop 1, C_cont 2: fire all costs 2, t in [.1,.4) costs 1 (one false stop), [.4,.6) 1+2, [.6,.9) 2 x 2 ... no:
    # [.6,.9) misses the positive at .4 (2); nothing fires above .9 (4). The cheapest is [.1, .4): its middle.
    choice = recommend_threshold(p, y, 1.0, 2.0)
    assert choice is not None
    assert (choice.threshold, choice.lo, choice.hi, choice.cost) == pytest.approx((0.25, 0.1, 0.4, 0.25))
    assert expected_cost(p, y, 0.25, 1.0, 2.0) == pytest.approx(0.25)
    # Two equally cheap intervals, [.1,.4) and [.6,.8): the one nearer t* = .5 wins.
    tie = recommend_threshold([0.1, 0.4, 0.6, 0.8], y, 1.0, 1.0)
    assert tie is not None and tie.threshold == pytest.approx(0.7)
    # Firing on everything can be cheapest: then the interval starts at 0.
    low = recommend_threshold([0.2, 0.3], [1, 1], 1.0, 9.0)
    assert low is not None and (low.lo, low.hi, low.cost) == pytest.approx((0.0, 0.2, 0.0))


def test_condition_metrics_put_the_threshold_next_to_t_star() -> None:
    m = condition_metrics("goal_reached", P, Y, cost_false_stop=4.0, cost_false_continue=1.0, delta=0.05)
    assert (m.n, m.positives, m.negatives) == (5, 3, 2)
    assert m.t_star == pytest.approx(0.8)
    # At t* = .8 only .95 and 1.0 fire: the positive at .15 is missed (cost 1).
    assert m.cost_at_t_star == pytest.approx(1 / 5)
    assert m.band_rate == 0.0
    data = m.to_data()
    assert data["threshold"]["t_star"] == pytest.approx(0.8) and len(data["bins"]) == 10


def test_the_ece_floor_is_zero_for_certain_answers_and_reproducible() -> None:
    assert ece_floor([0.0, 1.0, 1.0]) == 0.0
    p = np.linspace(0.05, 0.95, 40)
    assert ece_floor(p) == ece_floor(p) and 0 < (ece_floor(p) or 0) < 0.3


# --- the trace format --------------------------------------------------------------------------------------------


def test_records_round_trip_through_a_jsonl_file(tmp_path: Path) -> None:
    pending = project(
        [Message.user("Close the ticket")],
        goal="Close the ticket",
        pending=ToolCall("close_ticket", {"id": 7}, id="p"),
        risks={"close_ticket": "irreversible"},
    )
    records = [
        record("goal_reached", True, state(final="Total: 42"), "a"),
        record("risk", "irreversible", pending, "b", "train"),
        record("drift", "3", state(steps=3), "c"),
        record("integrity", False, None, "d"),
        TraceRecord("e", "stagnation", False, "train", "s", state(), state().text, extra={"group": "g1", "n": 3}),
    ]
    path = tmp_path / "t.jsonl"
    assert write_traces(path, records) == 5
    back = read_traces(path)
    assert back.problems == ()
    assert [r.to_data() for r in back.records] == [r.to_data() for r in records]
    rebuilt = back.records[1].projection
    assert rebuilt is not None and rebuilt.pending is not None and rebuilt.pending.name == "close_ticket"
    assert rebuilt.text == pending.text  # the evaluator sees the state it was labelled on
    assert back.records[3].projection is None and back.records[3].text == "GOAL: only text"
    assert back.records[4].extra == {"group": "g1", "n": 3}


@pytest.mark.slow
def test_the_dev_set_reads_and_rebuilds_its_projections() -> None:
    traces = read_traces(DEVSET)
    assert traces.problems == () and len(traces.records) > 1000
    first = json.loads(DEVSET.read_text(encoding="utf-8").splitlines()[0])
    r = traces.records[0]
    assert r.projection is not None and projection_to_data(r.projection) == first["projection"]
    assert r.holds(DEFAULT_CONDITIONS.by_name[r.condition]) is first["label"]


def test_a_label_is_read_through_the_conditions_fires_on() -> None:
    drift, risk = DEFAULT_CONDITIONS.by_name["drift"], DEFAULT_CONDITIONS.by_name["risk"]
    assert record("drift", "1", None, "x").holds(drift) and not record("drift", "2", None, "x").holds(drift)
    assert record("risk", "regulated", None, "x").holds(risk)
    assert record("risk", "unsafe", None, "x").label_problem(risk) is not None
    # A level written as a number reads as its label.
    assert (
        TraceRecord.from_data({"id": "i", "condition": "drift", "label": 0, "split": "test", "text": "t"}).label == "0"
    )


def test_malformed_lines_are_reported_with_their_line_numbers_and_skipped(tmp_path: Path) -> None:
    good = json.dumps(record("goal_reached", True, state(), "ok").to_data())
    lines = [
        good,
        "{not json",
        json.dumps({"id": "x", "condition": "drift", "split": "test", "text": "t"}),  # no label
        "",
        json.dumps({"id": "y", "condition": "drift", "label": "1", "split": "test", "projection": {"steps": [{}]}}),
        json.dumps({"id": "z", "condition": "drift", "label": None, "split": "test", "text": "t"}),
        good,
    ]
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    traces = read_traces(path)
    assert len(traces.records) == 2
    assert [p.line for p in traces.problems] == [2, 3, 5, 6]
    assert "missing label" in traces.problems[1].message and str(traces.problems[0]).startswith(f"{path}:2:")
    with pytest.raises(TraceFormatError) as raised:
        read_traces(path, strict=True)
    assert [p.line for p in raised.value.problems] == [2, 3, 5, 6]


def test_a_line_that_is_not_utf8_is_one_malformed_line_and_the_rest_are_read(tmp_path: Path) -> None:
    good = json.dumps(record("goal_reached", True, state(), "ok").to_data()).encode()
    path = tmp_path / "latin1.jsonl"
    path.write_bytes(good + b"\n" + '{"id": "caf\u00e9"}'.encode("latin-1") + b"\n" + good + b"\n")
    traces = read_traces(path)
    assert len(traces.records) == 2
    assert [p.line for p in traces.problems] == [2]


def _structure(p: Projection) -> dict[str, Any]:
    return {k: v for k, v in projection_to_data(p).items() if k != "max_chars"}


def test_a_rendered_projection_parses_back_to_the_same_structure() -> None:
    rows = [
        Message.user("Fix the build"),
        _assistant("Reading the log.\nTwo lines of thought.", (ToolCall("read_file", {"path": "ci.log"}, id="a"),)),
        encode_tool_result("line 1\nerror: missing dep\n  call x() is not a call", tool_call_id="a"),
        _assistant("", (ToolCall("run", {"cmd": "make"}, id="b"), ToolCall("ls", {}, id="c"))),
        error_tool_result("permission denied", tool_call_id="b"),
        encode_tool_result("Makefile", tool_call_id="c"),
    ]
    for p in (
        project(rows, goal="Fix the build", criteria=("tests pass", "no warnings"), final="Done.\nAll green."),
        project(rows, goal="", pending=ToolCall("deploy", {"env": "prod"}, id="p"), risks={"deploy": "irreversible"}),
        project([Message.user("hi")], goal="hi"),
    ):
        parsed = parse_projection_text(p.text)
        assert parsed is not None, p.text
        assert _structure(parsed) == _structure(p)
        assert parsed.text == p.text and parsed.state_hash == p.state_hash
    long = project(rows * 40, goal="g", max_chars=500)
    assert "elided" in long.text and parse_projection_text(long.text) is None
    assert parse_projection_text("not a projection") is None


def test_a_text_projection_carries_the_text_and_its_hash() -> None:
    p = state()
    t = text_projection(p.text)
    assert t.text == p.text and t.state_hash == p.state_hash and t.steps == ()


# --- running an evaluator ----------------------------------------------------------------------------------------


async def test_records_sharing_a_state_are_asked_in_one_call_and_failures_are_uncertain() -> None:
    s = state()
    records = [
        record("goal_reached", True, s, "1"),
        record("stagnation", False, s, "2"),
        record("goal_reached", False, state(steps=2), "3"),
        record("integrity", True, None, "4"),  # text-only
        record("nonsense", True, s, "5"),
        record("risk", "unsafe", s, "6"),
    ]
    ev = Fn(lambda p: {"goal_reached": 0.9 if len(p.steps) == 1 else 0.2, "stagnation": 0.1})
    out = await predict(ev, records, text_only=False)
    assert ev.calls == 2 and out.calls == 2
    assert [(x.record.id, x.p, x.holds) for x in out.items] == [
        ("1", pytest.approx(0.9), True),
        ("2", pytest.approx(0.1), False),
        ("3", pytest.approx(0.2), False),
    ]
    assert sorted(s.record.id for s in out.skipped) == ["4", "5", "6"]
    assert any("text-only" in s.reason for s in out.skipped)
    # An evaluator that reads the text answers text-only records; one that raises gives uncertain answers.
    assert len((await predict(ev, records[3:4], text_only=True)).items) == 1

    def boom(p: Projection) -> Mapping[str, float]:
        raise RuntimeError("evaluator down")

    failed = await predict(Fn(boom), records[:2])
    assert [x.p for x in failed.items] == [None, None] and "evaluator down" in failed.items[0].note
    assert failed.model_version == "unavailable"


# --- calibration ---------------------------------------------------------------------------------------------------


def _sigmoid(z: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    return np.asarray(1 / (1 + np.exp(-z)))


@pytest.mark.slow
def test_platt_recovers_a_known_miscalibration_and_isotonic_matches_scikit_learn() -> None:
    from sklearn.isotonic import IsotonicRegression

    from stopwise.evals.fit import fit_map

    rng = np.random.default_rng(0)
    raw = rng.uniform(0.01, 0.99, 4000)
    truth = _sigmoid(2.0 * np.log(raw / (1 - raw)) - 0.5)  # an under-confident evaluator
    y = rng.random(4000) < truth
    platt = fit_map(raw.tolist(), y.tolist(), ("yes",), "platt")
    assert (
        platt.method == "platt" and platt.a == pytest.approx(2.0, abs=0.2) and platt.b == pytest.approx(-0.5, abs=0.2)
    )
    assert (ece([platt(float(p)) for p in raw], y) or 1) < (ece(raw, y) or 0)
    iso = fit_map(raw.tolist(), y.tolist(), ("yes",), "isotonic")
    reference = IsotonicRegression(y_min=0, y_max=1, out_of_bounds="clip").fit(raw, y)
    grid = np.linspace(0, 1, 101)
    assert [iso(float(g)) for g in grid] == pytest.approx(reference.predict(grid).tolist())
    assert fit_map([0.2, 0.4], [True, True], ("yes",)).method == "identity"


async def test_a_calibrated_evaluator_applies_the_saved_maps(tmp_path: Path) -> None:
    cal = Calibration(
        {
            "goal_reached": CalibrationMap("platt", ("yes",), a=1.0, b=math.log(3)),  # odds x3
            "drift": CalibrationMap("isotonic", ("0", "1"), x=(0.0, 1.0), y=(0.2, 0.6)),
        },
        evaluator="fn",
        model_version="fn-1",
    )
    path = tmp_path / "cal.json"
    cal.save(path)
    loaded = load_calibration(path)
    assert loaded.version == cal.version and loaded.version.startswith("cal-")
    inner = Fn(lambda p: {"goal_reached": 0.5, "drift": 0.5, "stagnation": 0.3})
    answers = await CalibratedEvaluator(inner, path).evaluate(state(), DEFAULT_CONDITIONS)
    assert answers.model_version == f"fn-1+{cal.version}"
    assert answers.answers["goal_reached"].distribution == pytest.approx({"yes": 0.75, "no": 0.25})
    drift = answers.answers["drift"].distribution
    # p(levels 0-1) .5 -> .4, each side keeping its proportions (evenly split here).
    assert drift == pytest.approx({"0": 0.2, "1": 0.2, "2": 0.2, "3": 0.2, "4": 0.2})
    assert answers.answers["stagnation"].distribution == pytest.approx({"yes": 0.3, "no": 0.7})  # no map
    # A map fitted on another model version still applies, and says so.
    stale = await CalibratedEvaluator(Fn(lambda p: {"goal_reached": 0.5}, name="other"), cal).evaluate(
        state(), DEFAULT_CONDITIONS.only(["goal_reached"])
    )
    assert "fitted on fn-1, not other-1" in stale.answers["goal_reached"].note


def test_a_calibration_file_that_is_not_one_is_refused(tmp_path: Path) -> None:
    from stopwise import ConfigError

    path = tmp_path / "x.json"
    path.write_text(json.dumps({"format": "something else"}), encoding="utf-8")
    with pytest.raises(ConfigError, match="not a calibration file"):
        load_calibration(path)
    with pytest.raises(ConfigError, match="non-decreasing"):
        CalibrationMap("isotonic", ("yes",), x=(0.0, 1.0), y=(0.9, 0.1))


def test_the_light_modules_import_neither_numpy_nor_scikit_learn() -> None:
    code = (
        "import sys, stopwise, stopwise.cli, stopwise.evals\n"
        "from stopwise.evals import CalibratedEvaluator, Calibration, CalibrationMap\n"
        "e = CalibratedEvaluator(object(), Calibration({'x': CalibrationMap('platt', ('yes',))}))\n"
        "heavy = [m for m in ('numpy', 'sklearn', 'matplotlib', 'scipy') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr


# --- the learning path: labels from a real SQLite log -------------------------------------------------------------


@tool
def search(q: str) -> str:
    """Search."""
    return f"results for {q}"


def searching(until: int) -> FunctionModel:
    return FunctionModel(
        lambda r: Reply(tool_calls=[ToolCall("search", {"q": f"q{r.step}"})]) if r.step < until else Reply("done")
    )


async def test_escalation_resolutions_in_a_store_export_as_trace_records(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "log.db")
    try:
        runner = Runner(store)
        # A human review: goal_reached at .8 is in the band around t*=.8, so the turn escalates and suspends.
        unsure = Fn(lambda p: {**QUIET, "goal_reached": 0.8 if len(p.steps) == 1 else 0.0})
        human = Agent("h", "Do the task.", searching(3), tools=[search], guardian=Guardian(unsure))
        assert (await runner.run(human, "go", session_id="s1")).status == "suspended"
        assert (await runner.resume(human, "s1", {"guardian:1": Approve()})).status == "completed"
        rejected = Agent("r", "Do the task.", searching(3), tools=[search], guardian=Guardian(unsure))
        await runner.run(rejected, "go on", session_id="s2")
        await runner.resume(rejected, "s2", {"guardian:1": Reject("not done")})
        # A judge settles the band on its own.
        sure = Fn(lambda p: {**QUIET, "goal_reached": 0.99}, name="judge")
        judged = Agent("j", "Do the task.", searching(9), tools=[search], guardian=Guardian(unsure, judge=sure))
        assert (await runner.run(judged, "go again", session_id="s3")).status == "completed"

        records = await export_labels(store, test_fraction=0.5)
    finally:
        await store.close()
    by = {r.extra["session_id"]: r for r in records}
    assert set(by) == {"s1", "s2", "s3"}
    h, r, j = by["s1"], by["s2"], by["s3"]
    assert (h.condition, h.label, h.source, h.kind) == ("goal_reached", False, "escalation/human", "escalation")
    assert r.label is True  # a Reject confirms the concern
    assert (j.label, j.source, j.extra["evaluator_p"]) == (True, "escalation/judge", pytest.approx(0.8))
    # A human label carries no probability of its own: it is read from the step's decision record.
    assert h.extra["evaluator_p"] == pytest.approx(0.8) and h.extra["evaluator"] == "fn"
    for x in (h, r, j):
        assert x.projection is not None and x.projection.text == x.text  # parsed back from the recorded text
        assert x.projection.state_hash == x.extra["state_hash"]
        assert x.text.startswith("GOAL: go") and x.split in ("train", "test")
    # The records read back from a file and can be evaluated: the structure is there for the rule evaluator.
    path = tmp_path / "labels.jsonl"
    write_traces(path, records)
    again = read_traces(path, strict=True).records
    out = await predict(Fn(lambda p: {"goal_reached": 0.7}), again)
    assert len(out.items) == 3 and not out.skipped


# --- the report and the gate ---------------------------------------------------------------------------------------


def _report_data(
    ece_by_condition: Mapping[str, float], auroc_by_condition: Mapping[str, float | None]
) -> dict[str, Any]:
    return {
        "evaluator": "rules",
        "model_version": "v",
        "split": "test",
        "conditions": {
            name: {"ece": value, "auroc": auroc_by_condition.get(name)} for name, value in ece_by_condition.items()
        },
    }


def test_the_gate_names_each_condition_worse_than_the_baseline_beyond_the_tolerance() -> None:
    base = _report_data({"integrity": 0.05, "drift": 0.10, "risk": 0.02}, {"integrity": 0.95, "drift": 0.90})
    same = _report_data({"integrity": 0.055, "drift": 0.10, "risk": 0.02}, {"integrity": 0.945, "drift": 0.90})
    assert compare(same, base, 0.01) == ([], [])
    worse = _report_data({"integrity": 0.08, "drift": 0.10, "risk": 0.02}, {"integrity": 0.95, "drift": 0.85})
    regressions, _ = compare(worse, base, 0.01)
    assert [(r.condition, r.metric) for r in regressions] == [("integrity", "ece"), ("drift", "auroc")]
    assert "integrity: ece 0.080 vs baseline 0.050" in str(regressions[0])
    # A condition the baseline had and this run did not measure is a regression, unless it was not asked for.
    partial = _report_data({"integrity": 0.05, "drift": 0.10}, {"integrity": 0.95, "drift": 0.90})
    assert [r.condition for r in compare(partial, base, 0.01)[0]] == ["risk"]
    assert compare(partial, base, 0.01, only=["integrity", "drift"])[0] == []


def test_a_report_is_built_per_condition_from_predictions() -> None:
    from stopwise.evals.run import Prediction, Predictions

    c = DEFAULT_CONDITIONS.by_name["goal_reached"]
    r = record("goal_reached", True, state(), "1")
    items = (*tuple(Prediction(r, c, y, p) for p, y in zip(P, Y, strict=True)), Prediction(r, c, True, None))
    report = build_report(Predictions("fn", "fn-1", items), DEFAULT_CONDITIONS, split="test", traces=["t"])
    m = report.conditions["goal_reached"]
    assert (m.n, m.uncertain) == (5, 1) and m.ece == pytest.approx(0.16)
    assert report.to_data()["conditions"]["goal_reached"]["auroc"] == pytest.approx(5.5 / 6)


def test_the_html_page_is_self_contained() -> None:
    from stopwise.evals.html_report import render_html
    from stopwise.evals.run import Prediction, Predictions

    c = DEFAULT_CONDITIONS.by_name["integrity"]
    r = TraceRecord("<x>", "integrity", True, "test", "<script>alert(1)</script>", None, "t")
    items = tuple(Prediction(r, c, bool(y), p) for p, y in zip(P, Y, strict=True))
    report = build_report(
        Predictions("fn <b>", "https://not-a-link.example/v1", items), DEFAULT_CONDITIONS, split="test", traces=["t"]
    )
    page = render_html(report)
    assert page.startswith("<!DOCTYPE html>") and page.count("<svg") == 1 and "integrity" in page
    assert "<script" not in page and "fn &lt;b&gt;" in page
    # No reference to anything outside the page. (The model version above is text, and escaped: still no link.)
    assert "http://" not in page and "src=" not in page and "href=" not in page
    assert "https://" not in page.replace("https://not-a-link.example/v1", "")


async def test_a_question_set_of_ones_own_is_measured_the_same_way() -> None:
    from stopwise.guardian import Condition, GuardianOutcome

    custom = QuestionSet(
        (Condition("pii", YesNo("Does a result hold personal data?"), GuardianOutcome.ESCALATE, 1, 4),)
    )
    records = [record("pii", i % 2 == 0, state(steps=i + 1), str(i)) for i in range(6)]
    out = await predict(Fn(lambda p: {"pii": 0.9 if len(p.steps) % 2 else 0.1}), records, custom)
    report = build_report(out, custom, split="test", traces=["t"])
    assert list(report.conditions) == ["pii"] and report.conditions["pii"].auroc == 1.0
    assert report.conditions["pii"].t_star == pytest.approx(0.2)


@pytest.mark.slow
def test_the_rule_evaluators_coefficients_refit_into_a_file_it_loads(tmp_path: Path) -> None:
    from stopwise.evals.rulefit import fit_rule_coefficients
    from stopwise.guardian.evaluators.rule import RuleEvaluator

    train = [r for r in read_traces(DEVSET).records if r.split == "train"]
    data = fit_rule_coefficients(train, mode="platt", source="unit")
    assert data["version"].startswith("fit-") and data["fitted"]["integrity"]["fit"] == "platt(C=1)"
    # One row per drift record (whether it fires); goal_reached without a final answer never reaches the map.
    assert data["fitted"]["drift"]["records"] == sum(1 for r in train if r.condition == "drift")
    with_final = [r for r in train if r.condition == "goal_reached" and r.projection and r.projection.final]
    assert 0 < data["fitted"]["goal_reached"]["records"] == len(with_final)
    # An undeclared tool with no hint in its name keeps the base's cautious table, whatever the dev set's mix.
    shipped = json.loads(resources.files("stopwise.guardian").joinpath("data", "rule_coefficients.json").read_text())
    assert data["risk"]["declared"]["unknown"] == shipped["risk"]["declared"]["unknown"]
    assert data["fitted"]["risk.declared.unknown"] == shipped["fitted"]["risk.declared.unknown"]
    # The risk section's held-out figures described the tables this refit replaced.
    assert "risk.heldout" not in data["fitted"]
    path = tmp_path / "coefficients.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    evaluator = RuleEvaluator(coefficients=path)
    assert evaluator.model_version.startswith(f"rules-{data['version']}/")
    answers = evaluator.answer_all(state(final="Total: 42"), DEFAULT_CONDITIONS.turn())
    assert not any(a.uncertain for a in answers.answers.values())


_NOT_REFITTED = ("goal_reached_open", "goal_reached_evidence", "stagnation_unobserved", "drift_unobserved")


def _small_train_set() -> list[TraceRecord]:
    """A few stagnation and drift records of the dev set's train split, both classes each: enough for a refit."""
    train = [r for r in read_traces(DEVSET).records if r.split == "train" and r.condition in ("stagnation", "drift")]
    return [r for r in train if r.condition == "stagnation"][:30] + [r for r in train if r.condition == "drift"][:30]


def test_a_refit_keeps_each_map_it_does_not_fit_with_its_note(tmp_path: Path) -> None:
    from stopwise.evals.rulefit import fit_rule_coefficients

    shipped = json.loads(resources.files("stopwise.guardian").joinpath("data", "rule_coefficients.json").read_text())
    data = fit_rule_coefficients(_small_train_set(), mode="platt", source="unit")
    assert data["fitted"]["stagnation"]["fit"] == "platt(C=1)" and data["fitted"]["drift"]["fit"] == "platt(C=1)"
    # The refitted maps' old notes (the Platt fold, the held-out figures) no longer describe them.
    assert "platt_folded" not in data["fitted"]["stagnation"]
    for key in _NOT_REFITTED:
        assert data[key] == shipped[key]
        assert data["fitted"][key] == shipped["fitted"][key]
    # A refit of a refit still carries them: the notes travel with the file, not with the shipped one.
    path = tmp_path / "refit.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    again = fit_rule_coefficients(_small_train_set(), base=path, mode="platt", source="unit")
    for key in _NOT_REFITTED:
        assert again[key] == shipped[key] and again["fitted"][key] == shipped["fitted"][key]


def test_a_refit_refuses_a_base_whose_constant_has_no_note(tmp_path: Path) -> None:
    from stopwise.errors import ConfigError
    from stopwise.evals.rulefit import fit_rule_coefficients

    base = json.loads(resources.files("stopwise.guardian").joinpath("data", "rule_coefficients.json").read_text())
    del base["fitted"]["drift_unobserved"]
    path = tmp_path / "unnoted.json"
    path.write_text(json.dumps(base), encoding="utf-8")
    with pytest.raises(ConfigError) as raised:
        fit_rule_coefficients(_small_train_set(), base=path, mode="platt")
    assert raised.value.field == "fitted.drift_unobserved"


def test_the_rulefit_command_refuses_a_base_without_a_note_in_one_line_and_writes_nothing(tmp_path: Path) -> None:
    base = json.loads(resources.files("stopwise.guardian").joinpath("data", "rule_coefficients.json").read_text())
    del base["fitted"]["stagnation_unobserved"]
    path, out = tmp_path / "unnoted.json", tmp_path / "out.json"
    path.write_text(json.dumps(base), encoding="utf-8")
    command = [sys.executable, "-m", "stopwise.evals.rulefit", str(DEVSET), "--base", str(path), "--out", str(out)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert lines[0].startswith("python -m stopwise.evals.rulefit: error: fitted.stagnation_unobserved:")
    assert not out.exists()


def test_ece_at_prior_judges_a_probability_at_the_base_rate_it_assumes() -> None:
    # Every record answered 0.05 on a half-injected corpus: miscalibrated there, exact where 5% are injected.
    p, y = [0.05] * 4, [1, 1, 0, 0]
    assert ece(p, y) == pytest.approx(0.45)
    assert ece_at_prior(p, y, prior=0.05) == pytest.approx(0.0)
    assert ece_at_prior(p, y, prior=0.5) == pytest.approx(ece(p, y))


def test_ece_at_prior_reweights_each_bin_by_class() -> None:
    # Bin 0.1: one clean record (weight 0.9 / 0.5); bin 0.9: one injected and one clean (0.1 / 0.5 and 0.9 / 0.5).
    p, y = [0.1, 0.9, 0.9, 0.9], [0, 1, 1, 0]
    share = 0.5
    w_pos, w_neg = 0.1 / share, 0.9 / share
    high = abs((2 * w_pos) / (2 * w_pos + w_neg) - 0.9) * (2 * w_pos + w_neg)
    low = abs(0.0 - 0.1) * w_neg
    assert ece_at_prior(p, y, prior=0.1) == pytest.approx((high + low) / (2 * w_pos + 2 * w_neg))


def test_ece_at_prior_needs_both_classes_and_a_rate_inside_zero_one() -> None:
    assert ece_at_prior([0.2, 0.3], [1, 1], prior=0.05) is None
    with pytest.raises(ValueError, match="prior"):
        ece_at_prior([0.2], [1], prior=1.0)
