"""goal_reached on writes to objects a run picked from a listing: a goal that asks for all of them, and writes that
left some out (``write_objects_partial``)."""

from __future__ import annotations

import json

from stopwise.guardian import DEFAULT_CONDITIONS
from stopwise.guardian.evaluators.rule import RuleEvaluator
from stopwise.guardian.projection import Projection, project
from stopwise.messages import Message, Role, ToolCall, encode_tool_result, error_tool_result

GOAL_REACHED = DEFAULT_CONDITIONS.by_name["goal_reached"]
LISTING = json.dumps(
    [
        {"event_id": "00000017", "event_name": "Risk Management Forum", "event_start": "2023-12-04 10:30:00"},
        {"event_id": "00000043", "event_name": "Risk Management Forum", "event_start": "2023-12-12 11:00:00"},
        {"event_id": "00000104", "event_name": "Risk Management Forum", "event_start": "2023-12-19 09:00:00"},
    ]
)
SEARCH = ("calendar.search_events", {"query": "risk management forum"}, LISTING, False)


def run(goal: str, *steps: tuple[str, dict[str, str], str, bool], final: str = "Done.") -> Projection:
    rows = [Message.user(goal)]
    for n, (name, args, result, failed) in enumerate(steps):
        call = ToolCall(name, args, id=f"c{n}")
        rows.append(Message(Role.ASSISTANT, f"Step {n}", (call,)))
        done = (
            error_tool_result(result, tool_call_id=call.id)
            if failed
            else encode_tool_result(result, tool_call_id=call.id)
        )
        rows.append(done)
    return project(rows, goal=goal, final=final)


def delete(event_id: str) -> tuple[str, dict[str, str], str, bool]:
    return ("calendar.delete_event", {"event_id": event_id}, "Event deleted successfully.", False)


def test_writes_that_leave_out_listed_objects_of_an_all_goal_commit_to_not_reached() -> None:
    rules = RuleEvaluator()
    state = run("Cancel all future risk management forum meetings", SEARCH, delete("00000017"), delete("00000043"))
    assert rules.outcome_features(state) == {"write_objects_partial": 1.0}
    answer = rules.answer(state, GOAL_REACHED)
    assert not answer.defer
    assert answer.p(("yes",)) < 0.05
    assert "write_objects_partial" in answer.note


def test_writes_that_reach_every_listed_object_of_an_all_goal_stay_with_the_judge() -> None:
    rules = RuleEvaluator()
    partial = run("Cancel all future risk management forum meetings", SEARCH, delete("00000017"))
    every = run(
        "Cancel all future risk management forum meetings", SEARCH, *map(delete, ("00000017", "00000043", "00000104"))
    )
    assert "write_objects_partial" in rules.outcome_features(partial)
    assert rules.outcome_features(every) == {"write_object_picked": 1.0}
    assert rules.answer(every, GOAL_REACHED).defer


def test_one_object_picked_for_a_goal_that_asks_for_one_is_not_a_partial_write() -> None:
    rules = RuleEvaluator()
    one = run("Cancel my next risk management forum meeting", SEARCH, delete("00000043"))
    every = run("Cancel every risk management forum meeting", SEARCH, delete("00000043"))
    assert rules.outcome_features(one) == {"write_object_picked": 1.0}
    assert rules.outcome_features(every) == {"write_objects_partial": 1.0}  # "every" asks for all, like "all"


def test_the_listing_is_the_latest_result_that_holds_the_object_and_a_failed_call_lists_nothing() -> None:
    rules = RuleEvaluator()
    narrowed = json.dumps([{"event_id": "00000043", "event_name": "Risk Management Forum"}])
    # A later search narrowed the list to the one written: the writes reached all it listed.
    later = run(
        "Cancel all future risk management forum meetings",
        SEARCH,
        ("calendar.search_events", {"query": "forum", "time_min": "2023-12-10"}, narrowed, False),
        delete("00000043"),
    )
    assert rules.outcome_features(later) == {"write_object_picked": 1.0}
    # The same narrowed list from a call that failed is no listing: the object came from the full one.
    failed = run(
        "Cancel all future risk management forum meetings",
        SEARCH,
        ("calendar.search_events", {"query": "forum"}, narrowed, True),
        delete("00000043"),
    )
    assert rules.outcome_features(failed) == {"write_objects_partial": 1.0}


def test_objects_that_are_not_in_a_list_of_records_are_not_a_listing() -> None:
    # A result that names the ids in prose, or one record alone, shows no set of alike objects to leave out.
    rules = RuleEvaluator()
    prose = ("calendar.search_events", {"query": "forum"}, "Found events 00000017 and 00000043.", False)
    single = ("calendar.get_event", {"event_id": "x"}, json.dumps({"event_id": "00000017", "name": "Forum"}), False)
    for shown in (prose, single):
        state = run("Cancel all future risk management forum meetings", shown, delete("00000017"))
        assert rules.outcome_features(state) == {"write_object_picked": 1.0}
