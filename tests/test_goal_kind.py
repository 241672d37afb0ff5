"""The goal-kind reader: a goal that asks for a change against one that asks a question, on written examples and on
the real goals of every source of the real set."""

from __future__ import annotations

from collections import Counter, defaultdict
from pathlib import Path

import pytest

from stopwise.evals.traces import read_traces
from stopwise.guardian.evaluators.rule import load_coefficients
from stopwise.guardian.goal_kind import CHANGE_VERBS, GoalKind, goal_kind

REALSET = Path(__file__).resolve().parent.parent / "evals" / "data" / "realset.jsonl"
CHANGE, QUESTION, OTHER = GoalKind.CHANGE, GoalKind.QUESTION, GoalKind.OTHER


@pytest.mark.parametrize(
    "goal",
    [
        "Delete Jaden White from the crm",
        "Cancel my next meeting with sofia",
        "can you cancel my first meeting on December 6",
        "Can you please send an email to lena saying 'hi'",
        "I need to send an email to dmitri saying 'Hey dmitri'",
        "Read the file called file_to_read.txt and write its content to a file called output.txt",
        "Can you find the email from November 17 and schedule a 30 minute meeting",
        "I need to get rid of all my emails from nadia from the last 2 days. Can you do delete them?",
    ],
)
def test_an_imperative_change_verb_at_a_clause_start_is_a_change(goal: str) -> None:
    assert goal_kind(goal) is CHANGE


@pytest.mark.parametrize(
    "goal",
    [
        "Was total visits more than 21 at any time since November 12? If so, make a backlog task called 'Improve'",
        "can you check if chenwei has any overdue tasks? If so, book a 30 minute meeting with them",
        "Did I already schedule a meeting with leila in the next 3 days? If not, send them an email",
        "If engaged users was more than 11 at any time since October 23 make a backlog task 'Improve engaged users'",
    ],
)
def test_a_change_asked_on_a_condition_is_a_change(goal: str) -> None:
    # The right end state may be the start state (the condition did not hold): the case the deferral rule reads.
    assert goal_kind(goal) is CHANGE


@pytest.mark.parametrize(
    "goal",
    [
        "Which company developed the game Lara Croft is voiced in?",
        "Are both Duke Energy and Affiliated Managers Group based in Massachusetts?",
        # What follows a question says how to answer it, unless it is "if so, ...".
        "What was the complete title of the book? Write the numbers in plain text if there are some in the title.",
        "In the film Goldfinger, what color was the object? If there are multiple colors, put them in a list.",
        "The book with the doi 10.1353/book.24372 concerns a neurologist. What author influenced him? Give the name.",
        "If Eliud Kipchoge could maintain his record-making marathon pace, how many hours would it take him?",
        "When was Regression added to the oldest closed numpy.polynomial issue",
    ],
)
def test_a_question_and_how_to_answer_it_is_a_question(goal: str) -> None:
    assert goal_kind(goal) is QUESTION


@pytest.mark.parametrize(
    "goal",
    [
        "",
        "Consider the following PR description: Session data cannot be decoded during the transition to Django 3.1.",
        "You have been selected to play the final round of the game show.",
        # A change verb deep in a long goal is description, not the ask.
        "Background. " + "x " * 250 + "Delete the old records.",
    ],
)
def test_a_goal_whose_opening_neither_asks_nor_orders_is_other(goal: str) -> None:
    assert goal_kind(goal) is OTHER


@pytest.mark.parametrize(
    "goal",
    [
        "Can you please exchange my shoes for a bigger size?",
        "Could I cancel the transfer I made this morning?",
        "Would you be so kind as to activate my card? Thanks",
        "Is it possible to change my PIN?",
        "Am I able to cancel a transfer I just made",
        "can you help me unblock my pin",
    ],
)
def test_a_polite_request_with_a_change_verb_is_a_change_whatever_its_punctuation(goal: str) -> None:
    # Read as a QUESTION, a polite request's "could not" answer would be a confident failure.
    assert goal_kind(goal) is CHANGE


@pytest.mark.parametrize(
    "goal",
    [
        "Hello! I would like to return the headphones I bought last week.",
        "I'd like to cancel a transfer",
        "I\u2019d like to cancel a transfer",  # the typographic apostrophe phones type
        "hey i wanna book a flight from NYC to SF",
        "let's move the standup to Friday",
        "I'm looking to delete my account. I'm not happy with the service.",
        "i have an account at another bank, but i want to transfer some of the money to my account here",
    ],
)
def test_a_wish_or_greeting_before_the_change_verb_is_a_change(goal: str) -> None:
    assert goal_kind(goal) is CHANGE


@pytest.mark.parametrize(
    "goal",
    [
        "I need help changing my flight to Friday",
        "I am interested in cancelling a purchase",
        "Can you help me with canceling my order?",
        "I need immediate assistance in topping up my account",
    ],
)
def test_a_gerund_after_a_call_for_help_is_a_change(goal: str) -> None:
    assert goal_kind(goal) is CHANGE


@pytest.mark.parametrize(
    "goal",
    [
        "I want a refund for my item",
        "Can I get a refund?",
        "I need my card activated.",
        "I'd like my account to be deleted. I'm not satisfied with the service you provide.",
        "My address needs to be updated.",
        "All my emails from yuki from the last 3 days need to be deleted. Can you do that?",
    ],
)
def test_a_wish_for_a_change_named_by_its_noun_or_participle_is_a_change(goal: str) -> None:
    assert goal_kind(goal) is CHANGE


def test_every_write_destructive_or_money_verb_of_the_risk_rule_asks_for_a_change() -> None:
    # One list for both readers: a verb the risk rule reads as a write in a tool's name is a change in a request.
    hints = load_coefficients().risk_name_hints
    verbs = {"withdraw", "terminate", "uninstall", "purchase", "refund", "revoke", "wipe", "replace"}
    assert verbs <= {w for label in ("regulated", "irreversible", "reversible") for w in hints[label]}
    assert verbs <= CHANGE_VERBS
    for verb in sorted(verbs):
        assert goal_kind(f"Please {verb} it") is CHANGE, verb


@pytest.mark.parametrize(
    ("goal", "kind"),
    [
        ("How do I cancel my transfer?", QUESTION),  # asks how: the answer is due, not the change
        ("What exact character needs to be added to correct the following code?", QUESTION),
        ("Transfer was declined.", OTHER),  # a change verb the next word makes a noun
        ("Top up is not working even though I have my AMEX in apple pay.", OTHER),
        ("Payment failed twice today", OTHER),  # a money word of the risk rule that is no verb
        ("import numpy as np", OTHER),
        ("Return NotImplemented, not False, upon rich comparison with unknown type", OTHER),
        ("Order the list by the order in which the fractions appear", OTHER),
    ],
)
def test_a_change_word_that_does_not_ask_for_a_change_is_no_change(goal: str, kind: GoalKind) -> None:
    # "return", "order" open code and answer formats: only a request's lead-in makes them a change.
    assert goal_kind(goal) is kind


@pytest.mark.parametrize(
    "goal",
    ["play some jazz in the kitchen", "Call mom", "text my boss that I am late", "skip this song", "sync my phone"],
)
def test_an_assistant_action_verb_on_a_device_a_playback_or_a_person_is_a_change(goal: str) -> None:
    # Each makes something happen outside the dialogue, as a write does (CLINC150's play_music, make_call, text...).
    assert goal_kind(goal) is CHANGE


def test_asking_whether_we_may_is_a_request_as_asking_whether_i_may() -> None:
    assert goal_kind("Can we cancel the booking for tonight?") is CHANGE
    assert goal_kind("Can we talk about the booking for tonight?") is QUESTION


@pytest.mark.parametrize(
    "goal",
    [
        "delete_file fails when the path is missing",  # an identifier is one word, not the verb it starts with
        "delete() on instances of models without any dependencies does not clear PKs",  # a call's parenthesis
        "email = models.EmailField()",  # an assignment
    ],
)
def test_a_change_verb_that_is_code_is_no_change(goal: str) -> None:
    assert goal_kind(goal) is not CHANGE


def test_the_reader_assigns_these_kinds_to_the_real_goals_of_every_source() -> None:
    # Pinned so that a change to the reader shows what it moves: questions stay questions (HotpotQA every one),
    # WorkBench's workplace tasks are changes, the bug reports of the coding runs mostly neither.
    counts: defaultdict[str, Counter[str]] = defaultdict(Counter)
    for r in read_traces(REALSET, strict=True).records:
        if r.condition == "goal_reached":
            assert r.projection is not None
            counts[r.source][goal_kind(r.projection.goal).value] += 1
    assert {s: dict(c) for s, c in counts.items()} == {
        "swe/mini-swe-agent": {"change": 15, "other": 102, "question": 33},  # two code lines no longer read as verbs
        "hotpotqa/react": {"question": 93},
        "whowhen/algorithm-generated": {"change": 2, "other": 17, "question": 107},
        "autogpt/2024-04-01": {"change": 11, "question": 4},
        "autogpt/2024-03-05": {"change": 7, "question": 2},
        "autogpt/2024-03-20": {"change": 8, "question": 4},
        "autogpt/2024-03-25": {"change": 8, "other": 1, "question": 4},
        "autogpt/2024-03-10": {"change": 14, "other": 1, "question": 4},
        "autogpt/2024-04-02": {"change": 8, "other": 3, "question": 5},
        "autogpt/2024-04-10": {"change": 9, "question": 6},
        "workbench/dev": {"change": 227, "other": 2},
        "workbench/heldout": {"change": 142, "other": 9, "question": 9},
        "workbench/heldout2": {"change": 143, "other": 11, "question": 6},
        "workbench/heldout3": {"change": 143, "other": 10, "question": 7},
        "webshop/react": {"change": 18, "other": 181, "question": 1},  # "i want a ...": a wish for a thing
    }
