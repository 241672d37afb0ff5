"""The stagnation map fitted on real runs (issue 14 point 2) keeps the hard constraints it was fitted under: a plain
loop stays confident, spins the repeat limit may not count stay above the uncertain band, and the reading lets a
run that looked something up, found nothing and is about to answer read as not stuck."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from stopwise.guardian import DEFAULT_CONDITIONS
from stopwise.guardian.evaluators.rule import RuleEvaluator
from stopwise.guardian.guardian import Guardian
from stopwise.guardian.projection import Projection, project
from stopwise.messages import Message, Role, ToolCall, encode_tool_result

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "evals" / "calibration"))
sys.path.insert(0, str(ROOT / "evals"))

import fit_real  # noqa: E402

STAGNATION = DEFAULT_CONDITIONS.by_name["stagnation"]
GOAL = "Delete the customer record of Jane Roe."


@pytest.fixture(scope="module")
def rules() -> RuleEvaluator:
    return RuleEvaluator()


def run(steps: list[tuple[str, str, dict[str, Any], str]]) -> Projection:
    """The guardian's projection of a run making ``steps`` (words, tool, arguments, result), as it logs them."""
    rows = [Message.user(GOAL)]
    for n, (text, tool, args, result) in enumerate(steps):
        call = ToolCall(tool, args, id=f"c{n}")
        rows += [Message(Role.ASSISTANT, text, (call,)), encode_tool_result(result, tool_call_id=call.id)]
    g = Guardian()
    return project(rows, goal=GOAL, last_k=g.history_steps, result_chars=g.result_chars, max_chars=g.max_chars)


def p(rules: RuleEvaluator, projection: Projection) -> float:
    return rules.coefficients.stagnation.p(rules.stagnation_features(projection))


SEARCH = ("Looking for her.", "search_customers", {"name": "Jane Roe"}, '[{"id": "C-17", "name": "Jane Roe"}]')


@pytest.mark.parametrize("times", [3, 4, 5, 6])
@pytest.mark.parametrize("words", ["", "Looking for her."])
def test_one_call_repeated_with_the_same_arguments_and_result_three_times_or_more_stays_confident(
    rules: RuleEvaluator, times: int, words: str
) -> None:
    _, tool, args, result = SEARCH
    assert p(rules, run([(words, tool, args, result)] * times)) >= 0.9


def test_a_call_repeated_once_with_the_same_result_is_above_the_uncertain_band(rules: RuleEvaluator) -> None:
    # Inside the band (0.50 +- 0.05) the policy escalates to a person; a loop is replanned instead.
    assert p(rules, run([SEARCH, SEARCH])) > STAGNATION.threshold + STAGNATION.delta


def test_the_shipped_map_meets_every_hard_constraint_it_was_fitted_under(rules: RuleEvaluator) -> None:
    for name, projection, floor in fit_real.stagnation_anchors():
        assert p(rules, projection) >= floor - 1e-3, name


def test_a_new_lookup_that_found_nothing_then_another_is_no_stuck_sign(rules: RuleEvaluator) -> None:
    # Two different searches, both empty, then the agent answers that there is no such customer.
    missed = run(
        [
            ("Looking for her.", "search_customers", {"name": "Jane Roe"}, "[]"),
            ("Trying her e-mail.", "search_customers", {"email": "jane@roe.example"}, "[]"),
        ]
    )
    assert rules.stagnation_features(missed)["stale_results"] == 0.0
    assert p(rules, missed) < STAGNATION.threshold - STAGNATION.delta


def test_the_same_empty_result_for_a_repeated_call_is_standing_still(rules: RuleEvaluator) -> None:
    empty = ("Looking for her.", "search_customers", {"name": "Jane Roe"}, "[]")
    features = rules.stagnation_features(run([empty, empty, empty]))
    assert features["stale_results"] == 1.0 and features["exact_loop"] == 1.0


def test_a_search_that_says_in_words_it_found_nothing_still_counts_as_stale(rules: RuleEvaluator) -> None:
    said = run(
        [
            ("Searching.", "search", {"q": "Jane Roe"}, "Could not find [Jane Roe]."),
            ("Searching again.", "search", {"q": "J. Roe"}, "Could not find [J. Roe]."),
        ]
    )
    assert rules.stagnation_features(said)["stale_results"] == 1.0


def test_an_exact_repeat_with_a_new_result_is_a_repeat_but_no_loop(rules: RuleEvaluator) -> None:
    poll = ("Checking.", "get_status", {"job": "7"})
    features = rules.stagnation_features(run([(*poll, "status: queued"), (*poll, "status: running")]))
    assert features["exact_repeat"] == 1.0 and features["exact_loop"] == 0.0


def test_new_words_without_a_call_are_no_sign_and_the_same_words_again_are_a_text_loop(rules: RuleEvaluator) -> None:
    rows = [Message.user(GOAL), Message(Role.ASSISTANT, "I will check the CRM."), Message(Role.ASSISTANT, "Done.")]
    g = Guardian()
    fresh = project(rows, goal=GOAL, last_k=g.history_steps, result_chars=g.result_chars, max_chars=g.max_chars)
    rows[-1] = Message(Role.ASSISTANT, "I will check the CRM.")
    again = project(rows, goal=GOAL, last_k=g.history_steps, result_chars=g.result_chars, max_chars=g.max_chars)
    assert "text_loop" not in rules.stagnation_features(fresh)
    assert rules.stagnation_features(again)["text_loop"] == 1.0
    assert p(rules, fresh) < STAGNATION.threshold - STAGNATION.delta < p(rules, again)


def test_the_step_number_is_no_stagnation_feature(rules: RuleEvaluator) -> None:
    # The step a run reached defines the real sources' proxy label (a cut-off run is at its cap): never a feature.
    short = rules.stagnation_features(run([SEARCH, SEARCH]))
    long = rules.stagnation_features(run([SEARCH] * 2 + [SEARCH] * 10))
    assert set(long) == set(short)
    assert not any("step" in name and name not in ("stale_steps", "all_steps_stale") for name in long)
