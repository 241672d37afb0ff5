"""Seed 001.26: the goal and acceptance criteria belong to the run, committed in its log, not to the guardian's
configuration. One guardian serves runs with different goals; a resumed run, and an audit of it, read the goal
the run started with whatever the configuration says later."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from stopwise import Agent, ConfigError, FunctionModel, Goal, Reply, Runner, SQLiteStore, ToolCall, tool
from stopwise._loop import drive
from stopwise.approvals import Approve
from stopwise.guardian import Answer, Answers, Guardian, GuardianDecision, GuardianOutcome, QuestionSet, YesNo
from stopwise.guardian.audit import replay_all
from stopwise.guardian.projection import Projection
from stopwise.messages import Role
from stopwise.models import ModelRequest
from stopwise.records import parse_log
from stopwise.store.base import Store

QUIET = {"integrity": 0.0, "risk": 0.0, "infeasible": 0.0, "goal_reached": 0.0, "drift": 0.0, "stagnation": 0.0}


class Seeing:
    """A test evaluator: quiet unless told otherwise, recording every projection it was shown."""

    name = "seeing"

    def __init__(self, goal_reached: Any = None) -> None:
        self.goal_reached = goal_reached
        self.seen: list[Projection] = []

    async def evaluate(self, projection: Projection, questions: QuestionSet) -> Answers:
        self.seen.append(projection)
        answers = {}
        for c in questions.conditions:
            p = QUIET[c.name]
            if c.name == "goal_reached" and self.goal_reached is not None:
                p = self.goal_reached(projection)
            if isinstance(c.question, YesNo):
                answers[c.name] = Answer({"yes": p, "no": 1 - p})
            else:
                fire = [x for x in c.question.labels if x in c.fires_on]
                rest = [x for x in c.question.labels if x not in c.fires_on]
                answers[c.name] = Answer({x: p / len(fire) for x in fire} | {x: (1 - p) / len(rest) for x in rest})
        return Answers("seeing", "seeing-1", answers)

    def turns(self) -> list[Projection]:
        return [p for p in self.seen if p.pending is None]


@tool
def search(q: str) -> str:
    """Search."""
    return f"results for {q}"


def _input(request: ModelRequest) -> str:
    return next(m.content for m in request.messages if m.role is Role.USER)


def searching(steps: int) -> FunctionModel:
    """Searches for its input ``steps - 1`` times, then answers."""

    def reply(r: ModelRequest) -> Reply:
        if r.step < steps:
            return Reply(tool_calls=[ToolCall("search", {"q": f"{_input(r)} {r.step}"})])
        return Reply(f"done with {_input(r)}")

    return FunctionModel(reply)


def agent(model: Any, guardian: Guardian) -> Agent:
    return Agent("g", "Do the task.", model, tools=[search], guardian=guardian)


async def _goal_records(store: Store, session_id: str) -> list[Mapping[str, Any]]:
    snapshot = await store.load_session(session_id)
    assert snapshot is not None
    return [r for e in snapshot.entries for r in e.records if r.get("type") == "run_goal"]


async def test_one_guardian_serves_two_concurrent_runs_with_different_goals(tmp_path: Path) -> None:
    both_started = asyncio.Barrier(2)

    async def reply(r: ModelRequest) -> Reply:
        if r.step == 1:
            await both_started.wait()  # the two runs are in flight at once
        if r.step < 3:
            return Reply(tool_calls=[ToolCall("search", {"q": f"{_input(r)} {r.step}"})])
        return Reply(f"done with {_input(r)}")

    seeing = Seeing()
    shared = agent(FunctionModel(reply), Guardian(seeing, goal="the configured default"))
    async with Runner(SQLiteStore(tmp_path / "runs.db")) as runner:
        a, b = await asyncio.gather(
            runner.run(shared, "alpha", session_id="a", goal=Goal("Find alpha", criteria=["alpha listed"])),
            runner.run(shared, "beta", session_id="b", goal=Goal("Find beta", criteria=["beta listed", "sourced"])),
        )
        assert a.status == b.status == "completed"
        assert await _goal_records(runner.store, "a") == [
            {"type": "run_goal", "text": "Find alpha", "criteria": ["alpha listed"]}
        ]
        assert await _goal_records(runner.store, "b") == [
            {"type": "run_goal", "text": "Find beta", "criteria": ["beta listed", "sourced"]}
        ]
    by_run = {"alpha": set(), "beta": set()}
    for p in seeing.turns():
        run = "alpha" if any("alpha" in str(c.args) for s in p.steps for c in s.calls) else "beta"
        by_run[run].add((p.goal, p.criteria))
    assert by_run == {
        "alpha": {("Find alpha", ("alpha listed",))},
        "beta": {("Find beta", ("beta listed", "sourced"))},
    }


async def test_a_guardian_s_configured_goal_is_a_default_logged_at_the_run_s_start() -> None:
    seeing = Seeing()
    g = Guardian(seeing, goal="Book a flight", criteria=("direct",))
    runner = Runner()
    await runner.run(agent(searching(2), g), "hello", session_id="configured")
    await runner.run(agent(searching(2), Guardian(seeing)), "find the cheapest flight", session_id="input")
    assert await _goal_records(runner.store, "configured") == [
        {"type": "run_goal", "text": "Book a flight", "criteria": ["direct"]}
    ]
    # No goal anywhere: the input is the goal, and that too is logged, so no later configuration can change it.
    assert await _goal_records(runner.store, "input") == [{"type": "run_goal", "text": None, "criteria": []}]
    assert [(p.goal, p.criteria) for p in seeing.turns()] == [
        ("Book a flight", ("direct",)),
        ("Book a flight", ("direct",)),
        ("find the cheapest flight", ()),
        ("find the cheapest flight", ()),
    ]


async def test_a_goal_is_logged_with_the_run_s_first_entry_before_any_step() -> None:
    runner = Runner()
    await runner.run(agent(searching(2), Guardian(Seeing())), "go", session_id="s", goal="Ship the report")
    snapshot = await runner.store.load_session("s")
    assert snapshot is not None
    first = snapshot.entries[0]
    assert first.step == 0 and first.kind == "input"
    assert [r["type"] for r in first.records] == ["run_goal"]
    assert all(r.get("type") != "run_goal" for e in snapshot.entries[1:] for r in e.records)


def _in_band_at_step_1(p: Projection) -> float:
    return 0.8 if len(p.steps) == 1 else 0.0


async def test_a_resumed_run_is_judged_against_its_logged_goal_after_the_config_changed(tmp_path: Path) -> None:
    goal = Goal("Book a flight", criteria=["direct", "under 300 EUR"])
    # The run suspends on an escalation (goal_reached in the uncertain band at step 1) ...
    before = Seeing(_in_band_at_step_1)
    path = tmp_path / "runs.db"
    async with Runner(SQLiteStore(path)) as runner:
        suspended = await runner.run(agent(searching(3), Guardian(before)), "go", session_id="s", goal=goal)
    assert suspended.status == "suspended"
    # ... and is resumed by another process whose guardian is configured with another goal.
    after = Seeing(_in_band_at_step_1)
    changed = Guardian(after, goal="Cancel every booking", criteria=("nothing left",))
    async with Runner(SQLiteStore(path)) as runner:
        done = await runner.resume(agent(searching(3), changed), "s", {"guardian:1": Approve()})
        snapshot = await runner.store.load_session("s")
    assert done.status == "completed"
    assert {(p.goal, p.criteria) for p in after.seen} == {("Book a flight", ("direct", "under 300 EUR"))}
    # The same run, never interrupted, with the goal given: the same states, the same decisions.
    control = Seeing(_in_band_at_step_1)
    runner = Runner()
    first = await runner.run(agent(searching(3), Guardian(control)), "go", session_id="c", goal=goal)
    whole = await runner.resume(agent(searching(3), Guardian(control)), "c", {"guardian:1": Approve()})

    def trace(decisions: Any) -> list[tuple[int, str, str, GuardianOutcome]]:
        return [(d.step, d.kind, d.state_hash, d.outcome) for d in decisions]

    assert trace(suspended.decisions) + trace(done.decisions[len(suspended.decisions) :]) == trace(
        first.decisions
    ) + trace(whole.decisions[len(first.decisions) :])
    # An audit reads the log alone: every logged decision replays to the outcome the log holds.
    assert snapshot is not None
    logged = [r for _, rs in parse_log(snapshot.entries) for r in rs if isinstance(r, GuardianDecision)]
    assert len(logged) == len(done.decisions) and replay_all(logged) == (len(logged), [])


async def test_a_replan_re_anchors_on_the_run_s_goal_not_the_configured_one() -> None:
    class Stagnating(Seeing):
        async def evaluate(self, projection: Projection, questions: QuestionSet) -> Answers:
            answers = await super().evaluate(projection, questions)
            if "stagnation" in answers.answers:
                answers.answers["stagnation"] = Answer({"yes": 0.9, "no": 0.1})
            return answers

    g = Guardian(Stagnating(), goal="the configured goal")
    result = await Runner().run(
        agent(searching(4), g), "go", goal=Goal("Find the invoice", criteria=["the invoice number"])
    )
    rows = [m.content for m in result.messages if m.metadata.get("source") == "guardian_replan"]
    assert rows and "Find the invoice" in rows[0] and "the invoice number" in rows[0]
    assert "configured" not in rows[0]


async def test_the_guardian_s_stop_guard_asks_for_the_run_s_criteria() -> None:
    g = Guardian(Seeing(lambda p: 0.0), goal="the configured goal", criteria=("configured criterion",))
    model = searching(1)
    a = Agent("g", "Do the task.", model, stop_guard=g.as_stop_guard(max_continues=1))
    result = await Runner().run(a, "go", goal=Goal("Ship it", criteria=["tests pass"]))
    feedback = [m.content for m in result.messages if m.metadata.get("source") == "stop_guard"]
    assert feedback and "tests pass" in feedback[0] and "configured criterion" not in feedback[0]


async def test_a_log_from_before_goals_were_logged_still_resumes_on_the_input_or_the_configured_goal(
    store: Store,
) -> None:
    seeing = Seeing(_in_band_at_step_1)
    runner = Runner(store)
    leg = await runner.open_leg(agent(searching(3), Guardian(seeing)), "run", session_id="old", input="find x")
    leg.log_goal = False  # what a writer from before goals were logged did
    async for _ in drive(leg):
        pass
    assert await _goal_records(store, "old") == []
    later = Seeing(_in_band_at_step_1)
    done = await runner.resume(agent(searching(3), Guardian(later)), "old", {"guardian:1": Approve()})
    assert done.status == "completed"
    assert {(p.goal, p.criteria) for p in later.seen} == {("find x", ())}
    configured = Seeing(lambda p: 0.0)
    await runner.run(agent(searching(2), Guardian(configured)), "again", session_id="old")
    assert {p.goal for p in configured.seen} == {"again"}


@pytest.mark.parametrize(("goal", "field"), [("", "goal.text"), (42, "goal")])
async def test_a_malformed_goal_is_a_config_error_before_anything_is_written(goal: Any, field: str) -> None:
    runner = Runner()
    with pytest.raises(ConfigError) as info:
        await runner.run(agent(searching(1), Guardian(Seeing())), "go", session_id="s", goal=goal)
    assert info.value.field == field
    assert await runner.store.load_session("s") is None


def test_goal_criteria_must_be_statements() -> None:
    with pytest.raises(ConfigError, match=r"goal\.criteria"):
        Goal("x", criteria="one string")
    with pytest.raises(ConfigError, match=r"goal\.criteria"):
        Goal("x", criteria=["ok", ""])
    assert Goal.from_data(Goal("x", ["a", "b"]).to_data()) == Goal("x", ("a", "b"))


def test_show_reads_the_goal_from_the_log(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from stopwise.cli import main

    db = tmp_path / "runs.db"
    goal = Goal("Book a flight", criteria=["direct", "under 300 EUR"])
    with Runner(SQLiteStore(db)) as runner:
        runner.run_sync(agent(searching(2), Guardian(Seeing())), "go", session_id="s", goal=goal)
    assert main(["show", "s", "--db", str(db), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["goal"] == {"text": "Book a flight", "criteria": ["direct", "under 300 EUR"]}
    assert main(["show", "s", "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert "goal: Book a flight" in out and "criterion: under 300 EUR" in out
