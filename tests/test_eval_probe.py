"""Seed 001's residual risks, measured: counterfactual probing (001.32: vary the state, watch the probability
move), correlated errors of the guardian and the actor (001.33), and near misses in the trace set (001.34)."""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from stopwise.evals.correlated import ErrorOverlap, actor_verdict, error_overlap
from stopwise.evals.correlated import render_text as render_overlap
from stopwise.evals.near_miss import is_near_miss, near_miss_shares, oversample_weights
from stopwise.evals.probe import FAILURE, Variation, probe, render_text, vary
from stopwise.evals.run import Prediction
from stopwise.evals.traces import TraceRecord, read_traces
from stopwise.guardian import DEFAULT_CONDITIONS, Answer, Answers, QuestionSet
from stopwise.guardian.evaluators.rule import RuleEvaluator
from stopwise.guardian.projection import ProjectedCall, ProjectedStep, Projection

DATA = Path(__file__).resolve().parent.parent / "evals" / "data"
GOAL_REACHED = DEFAULT_CONDITIONS.by_name["goal_reached"]


def state(final: str | None = "Booked TP433, 189 EUR.", *, failed_last: bool = False) -> Projection:
    calls = [
        ProjectedStep(1, "searching", (ProjectedCall("search_flights", {"to": "LIS"}, "3 flights found", False),)),
        ProjectedStep(
            2,
            "booking",
            (ProjectedCall("book", {"flight": "TP433"}, "Booking confirmed. PNR X7K2LQ. Seat 12A.", failed_last),),
        ),
    ]
    return Projection("Book a flight to Lisbon", ("booked",), tuple(calls), final=final)


def record(i: int, label: bool, p: Projection, source: str = "s") -> TraceRecord:
    return TraceRecord(f"r{i}", "goal_reached", label, "test", source, p)


class Reading:
    """A test evaluator: ``goal_reached`` from a function of the state; every other question quiet."""

    name = "reading"
    model_version = "reading-1"

    def __init__(self, fn: Callable[[Projection], float]) -> None:
        self.fn = fn

    async def evaluate(self, projection: Projection, questions: QuestionSet) -> Answers:
        out = {}
        for c in questions.conditions:
            p = self.fn(projection) if c.name == "goal_reached" else 0.0
            out[c.name] = Answer({"yes": p, "no": 1 - p})
        return Answers(self.name, self.model_version, out)


def final_only(p: Projection) -> float:
    """Ignores every tool result: only whether there is a final answer."""
    return 0.9 if p.final else 0.1


def evidence(p: Projection) -> float:
    """Reads the results: an answer after a confirmation, with no failure after it."""
    calls = [c for s in p.steps for c in s.calls]
    confirmed = any("confirmed" in c.result.lower() for c in calls)
    return 0.9 if p.final and confirmed and calls and not calls[-1].error else 0.1


# --- the variations --------------------------------------------------------------------------------------------


def test_drop_confirmation_removes_only_the_confirming_sentences_of_successful_results() -> None:
    varied = vary(state(), Variation.DROP_CONFIRMATION)
    assert varied is not None
    assert varied.steps[1].calls[0].result == "PNR X7K2LQ. Seat 12A."
    assert varied.steps[0] == state().steps[0] and varied.final == state().final and varied.goal == state().goal
    assert vary(state(failed_last=True), Variation.DROP_CONFIRMATION) is None  # a failure confirms nothing


def test_error_after_success_appends_the_last_successful_call_failing() -> None:
    varied = vary(state(), Variation.ERROR_AFTER_SUCCESS)
    assert varied is not None and varied.steps[:2] == state().steps
    added = varied.steps[2]
    assert added.step == 3 and added.calls == (ProjectedCall("book", {"flight": "TP433"}, FAILURE, True),)
    assert varied.final == state().final


def test_final_answer_variations_apply_only_where_there_is_an_answer() -> None:
    assert vary(state(), Variation.DROP_FINAL) == state(final=None)
    assert vary(state(final=None), Variation.DROP_FINAL) is None
    assert vary(state(), Variation.SWAP_FINAL, "I could not book it.") == state(final="I could not book it.")
    assert vary(state(), Variation.SWAP_FINAL, state().final) is None
    assert vary(state(final=None), Variation.SWAP_FINAL, "anything") is None


# --- the probe -------------------------------------------------------------------------------------------------


def probe_set() -> list[TraceRecord]:
    return [
        record(0, True, state()),
        record(1, False, state(final="I could not book it.", failed_last=True)),
        record(2, True, state(final="Done: TP433 booked.")),
    ]


async def test_the_probe_flags_an_evaluator_that_ignores_the_varied_evidence() -> None:
    report = await probe(Reading(final_only), probe_set())
    rows = {r.variation: r for r in report.rows}
    assert rows[Variation.DROP_CONFIRMATION].insensitive and rows[Variation.ERROR_AFTER_SUCCESS].insensitive
    # r1's booking failed (nothing to unconfirm), but its search succeeded (a success to follow with a failure).
    assert rows[Variation.DROP_CONFIRMATION].applied == 2 and rows[Variation.ERROR_AFTER_SUCCESS].applied == 3
    assert not rows[Variation.DROP_FINAL].insensitive
    assert rows[Variation.DROP_FINAL].moved == 3 and rows[Variation.DROP_FINAL].as_expected == 3
    out = io.StringIO()
    render_text(report, out)
    # It ignores what the final answer says, too: swapping it for another run's moves nothing.
    assert rows[Variation.SWAP_FINAL].insensitive
    assert out.getvalue().count("insensitive") == 3


async def test_the_probe_shows_an_evaluator_that_reads_the_evidence_moving_the_expected_way() -> None:
    report = await probe(Reading(evidence), probe_set())
    rows = {r.variation: r for r in report.rows}
    row = rows[Variation.DROP_CONFIRMATION]
    assert not row.insensitive and row.expected == row.as_expected == row.moved == row.applied == 2
    assert row.mean_delta == pytest.approx(-0.8)
    # r1 answers 0.1 already: neither a failure after its search nor dropping its answer can move it lower.
    for variation in (Variation.ERROR_AFTER_SUCCESS, Variation.DROP_FINAL):
        row = rows[variation]
        assert (row.applied, row.moved, row.as_expected) == (3, 2, 2) and not row.insensitive
    shifts = [s for s in report.shifts if s.variation is Variation.DROP_CONFIRMATION]
    assert [(s.record, s.before, s.after) for s in shifts] == [
        ("r0", pytest.approx(0.9), pytest.approx(0.1)),
        ("r2", pytest.approx(0.9), pytest.approx(0.1)),
    ]


async def test_a_swapped_final_answer_comes_from_a_record_with_the_other_label_and_is_expected_to_move_toward_it() -> (
    None
):
    report = await probe(Reading(evidence), probe_set(), variations=[Variation.SWAP_FINAL])
    by_record = {s.record: s for s in report.shifts}
    # r0 (reached) takes r1's answer (not reached): expected down; r1 takes r2's (reached): expected up.
    assert by_record["r0"].expected == -1 and by_record["r1"].expected == 1
    assert by_record["r0"].delta == pytest.approx(0.0)  # this evaluator reads confirmations, not the answer's words


async def test_uncertain_answers_are_counted_apart_from_the_moves() -> None:
    class Failing(Reading):
        async def evaluate(self, projection: Projection, questions: QuestionSet) -> Answers:
            if projection.final is None:
                raise RuntimeError("down")
            return await super().evaluate(projection, questions)

    report = await probe(Failing(final_only), probe_set(), variations=[Variation.DROP_FINAL])
    (row,) = report.rows
    assert row.applied == 3 and row.answered == 0 and row.moved == 0 and not row.insensitive


def test_the_rule_evaluator_on_the_real_set_answers_to_the_final_answer_and_the_confirmations() -> None:
    import asyncio

    rules = RuleEvaluator()
    goal_reached = DEFAULT_CONDITIONS.by_name["goal_reached"]
    # A state already answered "not reached" (a made-up write target, an answer that says it failed) cannot fall
    # further when its final answer goes: the probe reads the others.
    records = [
        r
        for r in read_traces(DATA / "realset.jsonl").records
        if r.condition == "goal_reached"
        and r.projection is not None
        and rules.answer(r.projection, goal_reached).p(("yes",)) >= 0.05
    ]
    report = asyncio.run(probe(rules, records))
    rows = {r.variation: r for r in report.rows}
    assert rows[Variation.DROP_FINAL].as_expected >= 0.9 * rows[Variation.DROP_FINAL].applied
    assert rows[Variation.DROP_CONFIRMATION].moved > 0


# --- correlated errors -----------------------------------------------------------------------------------------


def prediction(i: int, holds: bool, p: float | None, final: str | None, source: str = "s") -> Prediction:
    return Prediction(record(i, holds, state(final=final), source), GOAL_REACHED, holds, p)


def test_error_overlap_counts_each_error_and_both_against_hand_computed_figures() -> None:
    items = [
        prediction(0, False, 0.9, "done"),  # actor wrong (claimed), guardian wrong (0.9 >= 0.8): both
        prediction(1, False, 0.1, "done"),  # actor wrong, guardian right
        prediction(2, True, 0.2, "done"),  # actor right, guardian wrong
        prediction(3, True, 0.95, "done"),  # both right
        prediction(4, False, 0.1, None),  # no answer: actor right (claimed nothing), guardian right
        prediction(5, True, None, "done"),  # guardian uncertain: counted apart
    ]
    (row,) = [r for r in error_overlap(items) if r.source == "all"]
    assert (row.n, row.uncertain, row.actor_wrong, row.guardian_wrong, row.both_wrong) == (5, 1, 2, 2, 1)
    assert row.p_guardian_wrong_given_actor_wrong == pytest.approx(0.5)
    assert row.p_guardian_wrong_given_actor_right == pytest.approx(1 / 3)
    assert row.lift == pytest.approx(0.5 / 0.4) and row.max_lift == pytest.approx(2.5)


def test_a_guardian_that_copies_the_actor_reaches_the_maximum_lift_and_an_independent_one_a_lift_of_one() -> None:
    copying = [prediction(i, i % 4 == 0, 0.9, "done") for i in range(8)]  # claims reached, so does the guardian
    (row,) = [r for r in error_overlap(copying) if r.source == "all"]
    assert row.lift == pytest.approx(row.max_lift) and row.max_lift == pytest.approx(8 / 6)
    # Actor wrong on half, guardian wrong on half of each half: independent.
    independent = [
        prediction(0, False, 0.9, "done"),
        prediction(1, False, 0.1, "done"),
        prediction(2, True, 0.1, "done"),
        prediction(3, True, 0.9, "done"),
    ]
    (row,) = [r for r in error_overlap(independent) if r.source == "all"]
    assert row.lift == pytest.approx(1.0)


def test_error_overlap_reports_each_source_beside_all_and_skips_states_without_an_actor_verdict() -> None:
    items = [prediction(0, False, 0.9, "done", "a"), prediction(1, True, 0.9, "done", "b")]
    risk = DEFAULT_CONDITIONS.by_name["risk"]
    items.append(Prediction(TraceRecord("x", "risk", "read_only", "test", "a", state()), risk, False, 0.0))
    rows = error_overlap(items)
    assert [(r.condition, r.source, r.n) for r in rows] == [
        ("goal_reached", "all", 2),
        ("goal_reached", "a", 1),
        ("goal_reached", "b", 1),
    ]
    out = io.StringIO()
    render_overlap(rows, out)
    assert "P(G wrong|A wrong)" in out.getvalue()


def test_the_actor_s_verdict_is_its_final_answer_for_goal_reached_and_going_on_for_stagnation() -> None:
    assert actor_verdict(record(0, True, state())) is True
    assert actor_verdict(record(0, True, state(final=None))) is False
    assert actor_verdict(TraceRecord("s", "stagnation", True, "test", "s", state())) is False
    assert actor_verdict(TraceRecord("i", "integrity", True, "test", "s", state())) is None


def test_an_empty_overlap_has_no_rates() -> None:
    row = ErrorOverlap("goal_reached", "all", 0, 0, 0, 0, 0)
    assert row.lift is None and row.p_actor_wrong is None and row.p_guardian_wrong_given_actor_right is None


# --- near misses -----------------------------------------------------------------------------------------------


def tagged(i: int, kind: str, label: bool = False, condition: str = "goal_reached") -> TraceRecord:
    return TraceRecord(f"n{i}", condition, label, "test", "s", state(), kind=kind)


def test_near_miss_shares_count_the_tagged_records_of_each_condition() -> None:
    records = [
        tagged(0, "claim_without_evidence (near miss)"),
        tagged(1, "early_answer"),
        tagged(2, "complete", True),
        TraceRecord("n3", "stagnation", False, "test", "s", state(), kind="x", extra={"near_miss": True}),
    ]
    assert is_near_miss(records[0]) and not is_near_miss(records[1]) and is_near_miss(records[3])
    shares = {s.condition: s for s in near_miss_shares(records)}
    assert (shares["goal_reached"].records, shares["goal_reached"].negatives, shares["goal_reached"].near_misses) == (
        3,
        2,
        1,
    )
    assert shares["goal_reached"].share_of_negatives == pytest.approx(0.5)
    assert shares["stagnation"].share == pytest.approx(1.0)


def test_oversample_weights_make_near_misses_the_asked_share_and_never_lower_it() -> None:
    records = [tagged(0, "a (near miss)"), *(tagged(i, "plain") for i in range(1, 5))]
    weights = oversample_weights(records, 0.5)
    assert weights[0] == pytest.approx(4.0) and weights[1:] == [1.0] * 4
    assert oversample_weights(records, 0.1) == [1.0] * 5  # already 20%: left as it is
    with pytest.raises(ValueError, match="share"):
        oversample_weights(records, 1.0)


def test_the_dev_set_over_samples_near_misses_for_every_condition_a_near_miss_can_flip() -> None:
    shares = {s.condition: s for s in near_miss_shares(read_traces(DATA / "devset.jsonl").records)}
    for name in ("goal_reached", "infeasible", "stagnation"):
        share = shares[name].share_of_negatives
        assert share is not None and share >= 0.5, name
    assert (shares["drift"].share or 0) >= 0.3


# --- the command line ------------------------------------------------------------------------------------------


def test_stopwise_eval_prints_and_writes_the_probe_the_error_overlap_and_the_near_misses(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from stopwise.cli import main
    from stopwise.evals.traces import write_traces

    traces = tmp_path / "t.jsonl"
    records = [*probe_set(), tagged(9, "claim_without_evidence (near miss)")]
    write_traces(traces, records)
    out_json = tmp_path / "r.json"
    code = main(["eval", str(traces), "--probe", "--errors", "--near-misses", "--json", str(out_json)])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "counterfactual probe" in out and "drop_confirmation" in out
    assert "correlated errors" in out and "P(G wrong|A wrong)" in out
    assert "goal_reached: 1 of 4 records, 50% of the negatives" in out
    data = json.loads(out_json.read_text(encoding="utf-8"))
    assert {r["variation"] for r in data["probe"]["rows"]} == {v.value for v in Variation}
    assert data["correlated_errors"][0]["source"] == "all" and data["correlated_errors"][0]["n"] == 4
    assert data["near_misses"] == [
        {
            "condition": "goal_reached",
            "records": 4,
            "negatives": 2,
            "near_misses": 1,
            "share": 0.25,
            "share_of_negatives": 0.5,
        }
    ]
    # Without the flags, the report is what it was: none of the three.
    assert main(["eval", str(traces), "--json", str(out_json)]) == 0
    assert not {"probe", "correlated_errors", "near_misses"} & set(json.loads(out_json.read_text(encoding="utf-8")))
