"""The guardian's policy reads the run's budgets (``PolicyInputs.budget_used``, a pure input the loop passes in):
when one is nearly spent, a probable goal stops the run instead of escalating and a replan escalates instead; a
budget already past is left to the stop decision, whose reason is never relabelled."""

from __future__ import annotations

import dataclasses
from decimal import Decimal
from pathlib import Path

import pytest

from stopwise import (
    Agent,
    ConfigError,
    Guardian,
    Limits,
    Reply,
    Runner,
    ScriptedModel,
    SQLiteStore,
    ToolCall,
    Usage,
    tool,
)
from stopwise.guardian.answers import Answer, yes
from stopwise.guardian.conditions import DEFAULT_CONDITIONS, GuardianOutcome
from stopwise.guardian.evaluators.scripted import ScriptedEvaluator
from stopwise.guardian.policy import PolicyInputs, ThresholdPolicy
from stopwise.guardian.records import replay
from stopwise.stop.limits import LimitKind, Spent, budget_used

GOAL = DEFAULT_CONDITIONS.by_name["goal_reached"]  # stop_success, t* = 0.8, delta = 0.05
STAGNATION = DEFAULT_CONDITIONS.by_name["stagnation"]
PROBABLE = yes(0.82)
"""Above t* but inside the band: the policy escalates it unless the budget is nearly spent."""


def budget(used: float | None, *, replans: int = 0, repeats: int = 0) -> PolicyInputs:
    return PolicyInputs({}, replans, repeats, None, used, None if used is None else "total_tokens")


def decide(answer: Answer, inputs: PolicyInputs, policy: ThresholdPolicy | None = None) -> GuardianOutcome:
    return (policy or ThresholdPolicy()).decide({"goal_reached": answer}, [GOAL], inputs).outcome


def test_a_probable_goal_stops_with_success_when_the_budget_is_nearly_spent() -> None:
    result = ThresholdPolicy().decide({"goal_reached": PROBABLE}, [GOAL], budget(0.95))
    assert result.outcome is GuardianOutcome.STOP_SUCCESS
    assert result.verdicts[0].budget and result.verdicts[0].fired
    assert "total_tokens budget 95% used" in result.reason


@pytest.mark.parametrize("used", [None, 0.5, 0.89])
def test_a_probable_goal_still_escalates_while_the_budget_is_not_nearly_spent(used: float | None) -> None:
    assert decide(PROBABLE, budget(used)) is GuardianOutcome.ESCALATE


def test_a_goal_below_its_threshold_escalates_however_little_budget_is_left() -> None:
    assert decide(yes(0.78), budget(0.99)) is GuardianOutcome.ESCALATE


def test_a_budget_already_past_is_not_read_by_the_policy() -> None:
    """Past 1.0 the stop decision ends the run with the budget's own reason; the policy decides as without it."""
    assert decide(PROBABLE, budget(1.2)) is GuardianOutcome.ESCALATE
    replan = ThresholdPolicy().decide({}, [], budget(1.2, repeats=3))
    assert replan.outcome is GuardianOutcome.REPLAN


def test_a_replan_escalates_when_the_budget_is_nearly_spent() -> None:
    result = ThresholdPolicy().decide({"stagnation": yes(0.1)}, [STAGNATION], budget(0.92, repeats=3))
    assert result.outcome is GuardianOutcome.ESCALATE
    assert "a replan is called for" in result.reason and "92% used" in result.reason
    assert ThresholdPolicy().decide({"stagnation": yes(0.1)}, [STAGNATION], budget(0.5, repeats=3)).outcome is (
        GuardianOutcome.REPLAN
    )


def test_a_replan_past_max_replans_still_stops_with_failure_near_the_budget() -> None:
    policy = ThresholdPolicy(max_replans=1)
    assert policy.decide({}, [], budget(0.95, replans=1, repeats=3)).outcome is GuardianOutcome.STOP_FAILURE


def test_budget_nearly_spent_none_turns_the_budget_rules_off() -> None:
    off = ThresholdPolicy(budget_nearly_spent=None)
    assert decide(PROBABLE, budget(0.99), off) is GuardianOutcome.ESCALATE
    assert off.decide({}, [], budget(0.99, repeats=3)).outcome is GuardianOutcome.REPLAN


def test_a_clear_answer_and_other_escalations_keep_their_precedence_near_the_budget() -> None:
    """The budget rule only settles a probable goal; an escalating condition still escalates beside it."""
    integrity = DEFAULT_CONDITIONS.by_name["integrity"]
    result = ThresholdPolicy().decide(
        {"goal_reached": PROBABLE, "integrity": yes(0.9)}, [GOAL, integrity], budget(0.95)
    )
    assert result.outcome is GuardianOutcome.ESCALATE and result.escalated == ("integrity",)


@pytest.mark.parametrize("bad", [0, 1.5, -0.1, True, "0.9"])
def test_budget_nearly_spent_must_be_a_fraction(bad: object) -> None:
    with pytest.raises(ConfigError, match="budget_nearly_spent"):
        ThresholdPolicy(budget_nearly_spent=bad)  # type: ignore[arg-type]


def test_budget_inputs_round_trip_and_are_left_out_of_records_without_budgets() -> None:
    inputs = budget(0.95)
    assert PolicyInputs.from_data(inputs.to_data()) == inputs
    assert "budget_used" not in PolicyInputs({}).to_data()


def test_budget_used_is_the_most_spent_budget_with_its_name() -> None:
    limits = Limits(tool_calls=10, total_tokens=1000, run_seconds=60)
    spent = Spent(tool_calls=3, usage=Usage(500, 300), seconds=6.0)
    assert budget_used(limits, spent) == (0.8, LimitKind.TOTAL_TOKENS)
    assert budget_used(Limits(cost=Decimal("0.5")), Spent(cost=Decimal("0.45"))) == (0.9, LimitKind.COST)
    assert budget_used(Limits(tool_calls=0), Spent()) == (1.0, LimitKind.TOOL_CALLS)
    assert budget_used(None, spent) is None and budget_used(Limits(), spent) is None


# --- in the loop -------------------------------------------------------------------------------------------


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return "found"


def step(key: str, tokens: int) -> Reply:
    return Reply(tool_calls=[ToolCall("lookup", {"key": key}, id=f"c-{key}")], usage=Usage(tokens, 0))


@pytest.fixture
def store(tmp_path: Path) -> SQLiteStore:
    return SQLiteStore(tmp_path / "log.db")


def goal_agent(limits: Limits | None) -> Agent:
    guardian = Guardian(
        evaluator=ScriptedEvaluator([{"goal_reached": 0.82}]), conditions=DEFAULT_CONDITIONS.only(["goal_reached"])
    )
    return Agent(
        "a", "", ScriptedModel([step("a", 92), "never asked"]), tools=[lookup], guardian=guardian, limits=limits
    )


async def test_in_the_loop_a_probable_goal_near_the_token_budget_completes_goal_reached(store: SQLiteStore) -> None:
    result = await Runner(store).run(goal_agent(Limits(total_tokens=100)), "go")
    assert result.ok and result.completion_reason == "goal_reached" and result.steps == 1
    (decision,) = result.decisions
    assert (decision.inputs.budget_used, decision.inputs.budget) == (0.92, "total_tokens")
    assert replay(decision).outcome is decision.outcome


async def test_in_the_loop_the_same_goal_without_budgets_waits_for_a_reviewer(store: SQLiteStore) -> None:
    result = await Runner(store).run(goal_agent(None), "go")
    assert result.status == "suspended" and result.pending[0].call_id == "guardian:1"
    assert result.decisions[0].inputs.budget_used is None


async def test_in_the_loop_a_spent_budget_keeps_its_reason_whatever_the_guardian_asks(store: SQLiteStore) -> None:
    """Step 1 goes past the budget (120%) while the guardian asks for a replan (the same call three times in a
    row): the run fails ``token_limit``; no replan, no escalation."""
    guardian = Guardian(
        evaluator=ScriptedEvaluator([{"stagnation": 0.1}]), conditions=DEFAULT_CONDITIONS.only(["stagnation"])
    )
    model = ScriptedModel(
        [Reply(tool_calls=[ToolCall("lookup", {"key": "a"}, id=f"c{i}") for i in range(3)], usage=Usage(120, 0))]
    )
    result = await Runner(store).run(
        Agent("a", "", model, tools=[lookup], guardian=guardian, limits=Limits(total_tokens=100)), "go"
    )
    assert result.completion_reason == "token_limit"
    assert result.decisions[0].outcome is GuardianOutcome.REPLAN and result.decisions[0].inputs.budget_used == 1.2


async def test_in_the_loop_a_replan_near_the_budget_waits_for_a_reviewer(store: SQLiteStore) -> None:
    """The same call three times in a row asks for a replan; with 95% of the tokens used the guardian escalates
    instead, and the run suspends for a reviewer with the budget named in the decision."""
    guardian = Guardian(
        evaluator=ScriptedEvaluator([{"stagnation": 0.1}]), conditions=DEFAULT_CONDITIONS.only(["stagnation"])
    )
    model = ScriptedModel(
        [Reply(tool_calls=[ToolCall("lookup", {"key": "a"}, id=f"c{i}") for i in range(3)], usage=Usage(95, 0))]
    )
    agent = Agent("a", "", model, tools=[lookup], guardian=guardian, limits=Limits(total_tokens=100))
    result = await Runner(store).run(agent, "go")
    assert result.status == "suspended" and result.pending[0].call_id == "guardian:1"
    assert "a replan is called for" in result.decisions[0].reason


def test_a_probable_goal_with_hysteresis_stops_only_once_it_held_on_enough_turns() -> None:
    """k-of-n hysteresis still applies near the budget: until the goal held on k turns, the answer in its band
    escalates as it would have."""
    slow = dataclasses.replace(GOAL, hysteresis=(2, 3))
    first = ThresholdPolicy().decide({"goal_reached": PROBABLE}, [slow], budget(0.95))
    assert first.outcome is GuardianOutcome.ESCALATE and not first.verdicts[0].budget
    held = PolicyInputs({"goal_reached": (True,)}, 0, 0, None, 0.95, "total_tokens")
    assert ThresholdPolicy().decide({"goal_reached": PROBABLE}, [slow], held).outcome is GuardianOutcome.STOP_SUCCESS
