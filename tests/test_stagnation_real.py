"""The stagnation rule's reading of empty results and the signs of its map, as real runs taught them (WorkBench's
held-out domains: two searches returning ``[]``, then an answer, read as stuck at p 0.99 by the scripted fit)."""

from __future__ import annotations

from stopwise.guardian import DEFAULT_CONDITIONS
from stopwise.guardian.evaluators.rule import RuleEvaluator, load_coefficients
from stopwise.guardian.projection import Projection, project
from stopwise.messages import Message, Role, ToolCall, encode_tool_result

STAGNATION = DEFAULT_CONDITIONS.by_name["stagnation"]
GOAL = "Delete the customer record of Dana Whitfield."


def run(*calls: tuple[str, dict[str, str], str]) -> Projection:
    """A projection of a run making ``calls`` (tool, arguments, result), built as the guardian builds one."""
    rows = [Message.user(GOAL)]
    for n, (tool, args, result) in enumerate(calls):
        call = ToolCall(tool, args, id=f"c{n}")
        rows.append(Message(Role.ASSISTANT, "I look for the customer.", (call,)))
        rows.append(encode_tool_result(result, tool_call_id=call.id))
    return project(rows, goal=GOAL, last_k=8)


def p_stuck(projection: Projection) -> float:
    return RuleEvaluator().answer(projection, STAGNATION).p(("yes",))


def test_new_searches_that_each_return_an_empty_list_are_not_read_as_a_stuck_run() -> None:
    confirming = run(
        ("search_customers", {"name": "Dana Whitfield"}, "[]"),
        ("search_customers", {"email": "dana.whitfield@example.com"}, "[]"),
    )
    assert p_stuck(confirming) < STAGNATION.threshold


def test_an_empty_result_of_a_call_not_made_before_makes_its_step_new() -> None:
    features = RuleEvaluator().stagnation_features(
        run(
            ("search_customers", {"name": "Dana Whitfield"}, "[]"),
            ("search_customers", {"email": "dana.whitfield@example.com"}, "[]"),
            ("search_customers", {"phone": "555-0100"}, "[]"),
        )
    )
    assert features["all_steps_stale"] == 0.0 and features["stale_steps"] == 0.0
    assert features["stale_results"] == 0.0


def test_the_same_search_returning_an_empty_list_again_and_again_is_still_stuck() -> None:
    same = ("search_customers", {"name": "Dana Whitfield"}, "[]")
    looping = run(same, same, same, same)
    confirming = run(
        ("search_customers", {"name": "Dana Whitfield"}, "[]"),
        ("search_customers", {"email": "dana.whitfield@example.com"}, "[]"),
        ("search_customers", {"phone": "555-0100"}, "[]"),
        ("search_customers", {"company": "Whitfield Ltd"}, "[]"),
    )
    assert p_stuck(looping) > STAGNATION.threshold > p_stuck(confirming)


def test_a_search_that_says_in_words_it_found_nothing_still_adds_no_information() -> None:
    # HotpotQA's halted episodes search in circles on "Could not find [X]": a lookup that missed, not an answer.
    features = RuleEvaluator().stagnation_features(
        run(
            ("search", {"query": "Stapp band 1995"}, "Could not find [Stapp band 1995]. Similar: ['Creed']."),
            ("search", {"query": "Stapp band Florida"}, "Could not find [Stapp band Florida]. Similar: []."),
        )
    )
    assert features["stale_results"] == 1.0 and features["all_steps_stale"] == 1.0


def test_the_shipped_stagnation_map_never_reads_a_repeat_or_a_stale_step_as_progress() -> None:
    weights = load_coefficients().stagnation.weights
    assert weights["short_history"] <= 0.0
    assert all(w >= 0.0 for name, w in weights.items() if name != "short_history"), weights
