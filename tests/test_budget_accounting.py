"""The guardian's model calls (an LLM judge, any evaluator that reports usage) and sub-agents' calls count toward
the run's token budgets by default and are reported apart on ``RunResult``; counted from the log, so a resumed
run and a result read back from the store see the same figures."""

from __future__ import annotations

from pathlib import Path

import pytest

from stopwise import Agent, Guardian, Limits, Reply, Runner, ScriptedModel, SQLiteStore, ToolCall, Usage, tool
from stopwise._results import result_from_log
from stopwise.approvals import Approve
from stopwise.guardian.conditions import DEFAULT_CONDITIONS, GuardianOutcome
from stopwise.guardian.evaluators.judge import JudgeEvaluator
from stopwise.guardian.evaluators.scripted import ScriptedEvaluator
from stopwise.guardian.guardian import consult
from stopwise.guardian.policy import PolicyInputs
from stopwise.guardian.projection import project
from stopwise.guardian.records import GuardianDecision
from stopwise.models import FunctionModel, ModelRequest
from stopwise.records import parse_records
from stopwise.stop.guard import Continue, StopGuard, StopGuardContext, StopGuardRecord

DRIFT = DEFAULT_CONDITIONS.only(["drift"])
JUDGED = Usage(100, 2, 1)
"""What one judge request reports."""
ACTOR = Usage(10, 5, 1)
"""What one actor call reports."""


def judge_model(text: str = "0 0.99") -> FunctionModel:
    """A judge that answers every question with ``text`` and reports ``JUDGED`` usage per request."""

    def answer(request: ModelRequest) -> Reply:
        return Reply(text=text, usage=JUDGED)

    return FunctionModel(answer, name="judge-model")


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


@tool(needs_approval=True)
def publish(key: str) -> str:
    """Publish a value (needs a reviewer)."""
    return "published"


def actor(*replies: Reply | str) -> ScriptedModel:
    return ScriptedModel([r if isinstance(r, Reply) else Reply(text=r, usage=ACTOR) for r in replies])


def call(name: str, key: str, call_id: str) -> Reply:
    return Reply(tool_calls=[ToolCall(name, {"key": key}, id=call_id)], usage=ACTOR)


def judged_agent(model: ScriptedModel, limits: Limits | None = None) -> Agent:
    """An agent whose guardian's evaluator is an LLM judge: one request (``JUDGED``) for its one turn condition."""
    guardian = Guardian(evaluator=JudgeEvaluator(judge_model()), conditions=DRIFT)
    return Agent("a", "", model, tools=[lookup, publish], guardian=guardian, limits=limits)


@pytest.fixture
def store(tmp_path: Path) -> SQLiteStore:
    return SQLiteStore(tmp_path / "log.db")


async def test_a_judges_usage_is_reported_apart_and_in_the_total(store: SQLiteStore) -> None:
    model = actor(call("lookup", "a", "c1"), "done")
    result = await Runner(store).run(judged_agent(model), "look a up", session_id="s")
    assert result.ok and result.steps == 2
    assert result.usage == Usage(20, 10, 2)  # the actor's own calls only
    assert result.judge_usage == Usage(200, 4, 2)  # one judge request per turn
    assert result.total_usage == Usage(220, 14, 4)
    assert [d.usage for d in result.decisions] == [JUDGED, JUDGED]


async def test_judge_usage_read_back_from_the_log_matches_the_live_result(store: SQLiteStore) -> None:
    agent = judged_agent(actor(call("lookup", "a", "c1"), "done"))
    result = await Runner(store).run(agent, "look a up", session_id="s")
    snapshot = await store.load_session("s")
    assert snapshot is not None and snapshot.last_run is not None
    assert result_from_log(agent, snapshot, snapshot.last_run).judge_usage == result.judge_usage == Usage(200, 4, 2)


async def test_a_judges_tokens_count_toward_the_token_budget_by_default(store: SQLiteStore) -> None:
    """The actor alone spends 15 tokens a step; the judge 102 a turn: a 150-token budget is gone after step 2."""
    model = actor(call("lookup", "a", "c1"), call("lookup", "b", "c2"), "done")
    result = await Runner(store).run(judged_agent(model, Limits(total_tokens=150)), "go")
    assert result.error is not None and result.error.code == "token_limit"
    assert result.completion_reason == "token_limit" and result.steps == 2
    assert result.error.details == {"limit": "total_tokens", "allowed": 150, "used": 234}


async def test_count_judges_false_leaves_the_judge_out_of_the_budget_but_still_reports_it(
    store: SQLiteStore,
) -> None:
    model = actor(call("lookup", "a", "c1"), call("lookup", "b", "c2"), "done")
    limits = Limits(total_tokens=150, count_judges=False)
    result = await Runner(store).run(judged_agent(model, limits), "go")
    assert result.ok and result.steps == 3
    assert result.judge_usage == Usage(300, 6, 3)


async def test_a_resumed_run_keeps_the_judge_usage_spent_before_it_suspended(tmp_path: Path) -> None:
    """Step 1 (15 actor + 102 judge tokens) then step 2 asks for approval: the judge is not asked about a call that
    never ran. After the resume, in a new runner on the same file, step 2's turn (15 + 102) goes past 200 only if
    step 1's judge usage was counted from the log."""
    db = tmp_path / "log.db"
    limits = Limits(total_tokens=200)
    first = SQLiteStore(db)
    model = actor(call("lookup", "a", "c1"), call("publish", "a", "c2"))
    suspended = await Runner(first).run(judged_agent(model, limits), "publish a", session_id="s")
    await first.close()
    assert suspended.status == "suspended"
    second = SQLiteStore(db)
    try:
        resumed = await Runner(second).resume(judged_agent(actor("never asked"), limits), "s", {"c2": Approve()})
    finally:
        await second.close()
    assert resumed.error is not None and resumed.error.code == "token_limit"
    assert resumed.judge_usage == Usage(200, 4, 2)


async def test_a_judge_asked_about_an_open_question_is_counted_even_when_it_settles_nothing() -> None:
    """The evaluator answers in the uncertain band; the judge, asked, answers in the band too: the turn escalates
    to a human, and the decision still records what the judge's request spent."""
    condition = DEFAULT_CONDITIONS.by_name["goal_reached"]
    in_band = condition.threshold
    guardian = Guardian(
        evaluator=ScriptedEvaluator([{"goal_reached": in_band}]),
        conditions=DEFAULT_CONDITIONS.only(["goal_reached"]),
        judge=JudgeEvaluator(judge_model(f"yes {in_band:.2f}")),
    )
    projection = project([], goal="g", criteria=(), last_k=6)
    consultation = await consult(
        guardian, projection, guardian.turn_conditions, PolicyInputs({}), run_id="r", step=1, kind="turn"
    )
    decision: GuardianDecision = consultation.decision
    assert decision.outcome == "escalate" and decision.resolved_by is None
    assert decision.usage == JUDGED
    assert GuardianDecision.from_data(decision.to_data()).usage == JUDGED


def test_a_decision_without_model_usage_writes_no_usage_field() -> None:
    """Records of evaluators without a model (the rule evaluator) stay as they were written before usage existed."""
    outcome = GuardianOutcome.CONTINUE
    data = GuardianDecision(
        "r", 1, "turn", None, "h", "v", "rule", "1", {}, (), {}, PolicyInputs({}), outcome, "continue", 0.0
    ).to_data()
    assert "usage" not in data and GuardianDecision.from_data(data).usage == Usage()


def test_count_judges_and_count_sub_agents_must_be_booleans() -> None:
    from stopwise import ConfigError

    with pytest.raises(ConfigError, match="count_judges"):
        Limits(count_judges="no")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="count_sub_agents"):
        Limits(count_sub_agents=None)  # type: ignore[arg-type]


def researcher(limits: Limits | None = None) -> Agent:
    """A sub-agent that answers at once (15 tokens) under a judge (one 102-token request)."""
    guardian = Guardian(evaluator=JudgeEvaluator(judge_model()), conditions=DRIFT)
    return Agent("researcher", "", actor("found it"), guardian=guardian, limits=limits)


def lead(limits: Limits | None) -> Agent:
    ask = Reply(tool_calls=[ToolCall("researcher", {"input": "look"}, id="r1")], usage=ACTOR)
    return Agent("lead", "", actor(ask, "done"), tools=[researcher().as_tool()], limits=limits)


async def test_a_sub_agents_judge_usage_counts_in_the_parents_sub_usage(store: SQLiteStore) -> None:
    result = await Runner(store).run(lead(Limits(total_tokens=100)), "go", session_id="s")
    assert result.sub_usage == Usage(110, 7, 2)  # the sub-agent's own call and its judge's
    assert result.error is not None and result.error.code == "token_limit"
    assert result.error.details["used"] == 15 + 117


async def test_count_sub_agents_false_leaves_sub_agents_out_of_the_budget_but_still_reports_them(
    store: SQLiteStore,
) -> None:
    result = await Runner(store).run(lead(Limits(total_tokens=100, count_sub_agents=False)), "go", session_id="s")
    assert result.ok and result.output == "done"
    assert result.sub_usage == Usage(110, 7, 2) and result.total_usage == Usage(130, 17, 4)


async def test_guardian_as_stop_guard_reports_its_judges_usage(store: SQLiteStore) -> None:
    """``Guardian.as_stop_guard()`` with an LLM evaluator asks ``goal_reached`` at the finish: one request, counted
    in ``judge_usage`` and on the stop guard's record."""
    guardian = Guardian(evaluator=JudgeEvaluator(judge_model("yes 0.99")), conditions=DEFAULT_CONDITIONS)
    agent = Agent("a", "", actor("the answer"), stop_guard=guardian.as_stop_guard())
    result = await Runner(store).run(agent, "answer", session_id="s")
    assert result.ok and result.judge_usage == JUDGED
    snapshot = await store.load_session("s")
    assert snapshot is not None
    records = [r for e in snapshot.entries for r in parse_records(e.records) if isinstance(r, StopGuardRecord)]
    assert [(r.event, r.usage) for r in records] == [("accepted", JUDGED)]


async def test_a_stop_guards_reported_usage_counts_toward_the_budget_on_its_own_step(store: SQLiteStore) -> None:
    """A stop guard that asks an LLM reports what it spent with ``ctx.report_usage``: the budget counts it on the
    step it judged: the continue it asked for is not granted, the run ends ``token_limit`` with no second call."""

    def llm_guard(ctx: StopGuardContext) -> Continue | None:
        ctx.report_usage(Usage(300, 10, 1))
        return Continue("check once more") if ctx.continues_used == 0 else None

    model = actor("first try", "second try")
    agent = Agent("a", "", model, stop_guard=StopGuard(llm_guard, max_continues=3), limits=Limits(total_tokens=200))
    result = await Runner(store).run(agent, "go")
    assert result.error is not None and result.error.code == "token_limit" and result.steps == 1
    assert result.judge_usage == Usage(300, 10, 1) and model.remaining == 1


async def test_a_resumed_run_keeps_a_stop_guards_reported_usage_in_the_budget(tmp_path: Path) -> None:
    """Step 1 (15 tokens) is a finish the guard sends back, reporting 170 tokens of its own; step 2 (15) asks for
    approval, at exactly the budget. After the resume, in a new runner, step 3's 15 tokens go past 200 only if the
    guard's usage was counted from its record in the log."""

    def llm_guard(ctx: StopGuardContext) -> Continue | None:
        ctx.report_usage(Usage(170, 0, 1))
        return Continue("publish it first")

    def agent(model: ScriptedModel) -> Agent:
        guard = StopGuard(llm_guard, max_continues=3)
        return Agent("a", "", model, tools=[lookup, publish], stop_guard=guard, limits=Limits(total_tokens=200))

    db = tmp_path / "log.db"
    first = SQLiteStore(db)
    suspended = await Runner(first).run(agent(actor("draft", call("publish", "a", "p1"))), "go", session_id="s")
    await first.close()
    assert suspended.status == "suspended" and suspended.judge_usage == Usage(170, 0, 1)
    second = SQLiteStore(db)
    try:
        model = actor(call("lookup", "b", "c3"), "done")
        resumed = await Runner(second).resume(agent(model), "s", {"p1": Approve()})
    finally:
        await second.close()
    assert resumed.error is not None and resumed.error.code == "token_limit" and resumed.steps == 3
    assert model.remaining == 1
