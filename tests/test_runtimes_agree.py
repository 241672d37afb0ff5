"""The local ``Runner`` and the DBOS runtime give the same ``RunResult`` for the same run, field by field.

Both build their result with one builder from what was committed; these scenarios cover every field a runtime
could lose (the stop guard's report, guardrail records, guardian decisions, pending approvals, structured output,
usage, state). Each runtime has its own SQLite log; DBOS runs in this process on a SQLite system database. The
agents are module-level and their models answer from the request alone, so the same agent gives the same run
twice (DBOS finds an agent by its name).
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Mapping
from typing import Any

import pytest
import pytest_asyncio
from pydantic import BaseModel

from stopwise import (
    Agent,
    FunctionModel,
    Goal,
    Guardian,
    Guardrails,
    Reply,
    RunContext,
    Runner,
    RunResult,
    SQLiteStore,
    Stop,
    StopGuard,
    StopGuardContext,
    ToolCall,
    Usage,
    tool,
)
from stopwise.approvals import Approve
from stopwise.guardian.answers import Answer, Answers
from stopwise.guardian.conditions import QuestionSet
from stopwise.guardian.projection import Projection
from stopwise.guardrails import OutputContext, Rewrite
from stopwise.models import ModelRequest
from stopwise.stop import Continue
from stopwise.tools import ToolError

pytest.importorskip("dbos")

from stopwise.runtime.dbos import DBOSRuntime  # after the skip: dbos is an extra

pytestmark = pytest.mark.asyncio(loop_scope="module")

USAGE = Usage(input_tokens=11, output_tokens=7, requests=1)


@tool
def lookup(q: str, ctx: RunContext) -> str:
    """Look something up (counts lookups in the session's state)."""
    ctx.state["lookups"] = ctx.state.get("lookups", 0) + 1
    return f"found {q}"


@tool(needs_approval=True)
def pay(to: str, amount: int) -> str:
    """Pay someone (a human approves every payment)."""
    return f"paid {amount} to {to}"


def _tool_results(request: ModelRequest) -> list[str]:
    return [m.content for m in request.messages if m.role == "tool"]


def _lookup_then_answer(request: ModelRequest) -> Reply:
    results = _tool_results(request)
    if not results:
        return Reply(tool_calls=[ToolCall("lookup", {"q": "x"}, id="c1")], usage=USAGE)
    return Reply(f"answer from {len(results)} lookups", usage=USAGE)


def _always_lookup(request: ModelRequest) -> Reply:
    return Reply(tool_calls=[ToolCall("lookup", {"q": f"q{request.step}"}, id=f"c{request.step}")], usage=USAGE)


class Total(BaseModel):
    total: int
    note: str = ""


def _lookup_then_output(request: ModelRequest) -> Reply:
    if not _tool_results(request):
        return Reply(tool_calls=[ToolCall("lookup", {"q": "sum"}, id="c1")], usage=USAGE)
    return Reply('{"total": 3, "note": "summed"}', usage=USAGE)


def _draft_then_final(request: ModelRequest) -> Reply:
    answered = sum(1 for m in request.messages if m.role == "assistant")
    return Reply("draft" if answered == 0 else "final [checked]", usage=USAGE)


def _insist_once(ctx: StopGuardContext) -> Continue | Stop:
    return Stop() if "[checked]" in ctx.reply.text else Continue("check it first")


def _pay_bob(request: ModelRequest) -> Reply:
    if not _tool_results(request):
        return Reply(tool_calls=[ToolCall("pay", {"to": "bob", "amount": 50}, id="p1")], usage=USAGE)
    return Reply("settled: " + _tool_results(request)[0], usage=USAGE)


@tool(client=True)
def ask_user(question: str) -> str:
    """Ask the user (the application answers; the body never runs)."""
    raise AssertionError("a client tool's body never runs")


def _ask_then_answer(request: ModelRequest) -> Reply:
    if not _tool_results(request):
        return Reply(tool_calls=[ToolCall("ask_user", {"question": "where to?"}, id="q1")], usage=USAGE)
    return Reply("going to " + _tool_results(request)[0], usage=USAGE)


class Quiet:
    """A guardian evaluator that answers every question with "nothing fired", from the question alone."""

    name = "quiet"
    model_version = "quiet-1"

    async def evaluate(self, projection: Projection, questions: QuestionSet) -> Answers:
        answers = {}
        for c in questions.conditions:
            labels = c.question.labels
            calm = next(label for label in labels if label not in c.fires_on)
            answers[c.name] = Answer({label: 1.0 if label == calm else 0.0 for label in labels})
        return Answers(self.name, self.model_version, answers)


def _shout(ctx: OutputContext) -> Rewrite:
    return Rewrite(text=ctx.text.upper())


ANSWERER = Agent("answerer", "Answer.", FunctionModel(_lookup_then_answer), tools=[lookup])
CUT_OFF = Agent("cut-off", "Look.", FunctionModel(_always_lookup), tools=[lookup], max_steps=2)
STRUCTURED = Agent("structured", "Sum.", FunctionModel(_lookup_then_output), tools=[lookup], output_type=Total)
GUARDED = Agent("guarded", "Answer.", FunctionModel(_draft_then_final), stop_guard=StopGuard(_insist_once))
REWRITTEN = Agent(
    "rewritten", "Answer.", FunctionModel(_lookup_then_answer), tools=[lookup], guardrails=Guardrails(on_output=_shout)
)
WATCHED = Agent("watched", "Answer.", FunctionModel(_lookup_then_answer), tools=[lookup], guardian=Guardian(Quiet()))
PAYER = Agent("payer", "Pay.", FunctionModel(_pay_bob), tools=[pay])
ASKER = Agent("asker", "Plan.", FunctionModel(_ask_then_answer), tools=[ask_user])
AGENTS = [ANSWERER, CUT_OFF, STRUCTURED, GUARDED, REWRITTEN, WATCHED, PAYER, ASKER]

_TIMING = {"latency_ms", "expires_at"}


def _plain(value: Any, run_id: str) -> Any:
    """``value`` as comparable data: dataclasses and models as dicts, timing fields dropped, the run's id (which
    each runtime names its own way) replaced by a placeholder."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
        return {k: _plain(v, run_id) for k, v in fields.items() if k not in _TIMING}
    if isinstance(value, BaseModel):
        return _plain(value.model_dump(), run_id)
    if isinstance(value, Mapping):
        return {k: _plain(v, run_id) for k, v in value.items() if k not in _TIMING}
    if isinstance(value, (list, tuple)):
        return [_plain(v, run_id) for v in value]
    if isinstance(value, str):
        return value.replace(run_id, "<run>") if run_id else value
    return value


FIELDS = [f.name for f in dataclasses.fields(RunResult) if f.name not in ("run_id",)]


def _assert_agree(local: RunResult, durable: RunResult) -> None:
    assert type(local.output) is type(durable.output)
    for name in FIELDS:
        assert _plain(getattr(local, name), local.run_id) == _plain(getattr(durable, name), durable.run_id), name


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def runtimes(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[tuple[Runner, DBOSRuntime]]:
    """A local runner and a DBOS runtime in this process, each on its own SQLite log; one pair for the module
    (DBOS's launch and teardown cost seconds), so each test uses session ids of its own."""
    from dbos import DBOS

    folder = tmp_path_factory.mktemp("agree")
    DBOS(
        config={
            "name": "stopwise-agree",
            "system_database_url": f"sqlite:///{folder / 'dbos.sqlite'}",
            "executor_id": "agree",
            "application_version": "agree-1",
            "log_level": "WARNING",
        }
    )
    local_store, durable_store = SQLiteStore(folder / "local.db"), SQLiteStore(folder / "durable.db")
    runtime = DBOSRuntime(durable_store, AGENTS, polling_interval=0.02)
    try:
        await runtime.launch()
        yield Runner(local_store), runtime
    finally:
        DBOS.destroy()
        await local_store.close()
        await durable_store.close()


@pytest.mark.parametrize(
    ("agent", "expected"),
    [
        (ANSWERER, ("completed", "final_answer")),
        (CUT_OFF, ("failed", "max_steps")),
        (STRUCTURED, ("completed", "output")),
        (GUARDED, ("completed", "final_answer")),
        (REWRITTEN, ("completed", "final_answer")),
        (WATCHED, ("completed", "final_answer")),
    ],
    ids=["final_answer_with_tools", "cut_off_at_max_steps", "structured_output", "stop_guard", "rewrite", "guardian"],
)
async def test_a_run_gives_the_same_result_on_the_local_runner_and_on_dbos(
    runtimes: tuple[Runner, DBOSRuntime], agent: Agent, expected: tuple[str, str]
) -> None:
    runner, runtime = runtimes
    local = await runner.run(agent, "go", session_id=agent.name, state={"seed": 1})
    durable = await runtime.run(agent, "go", session_id=agent.name, state={"seed": 1})
    assert (local.status, local.completion_reason) == expected
    _assert_agree(local, durable)


async def test_the_scenarios_exercise_the_fields_a_runtime_could_lose(runtimes: tuple[Runner, DBOSRuntime]) -> None:
    _, runtime = runtimes
    structured = await runtime.run(STRUCTURED, "go", session_id="fields-a")
    guarded = await runtime.run(GUARDED, "go", session_id="fields-b")
    rewritten = await runtime.run(REWRITTEN, "go", session_id="fields-c")
    watched = await runtime.run(WATCHED, "go", session_id="fields-d")
    assert structured.output == Total(total=3, note="summed") and structured.state == {"lookups": 1}
    assert structured.usage == Usage(input_tokens=22, output_tokens=14, requests=2)
    assert guarded.stop_guard is not None and guarded.stop_guard.continues_used == 1
    assert [(g.hook, g.action) for g in rewritten.guardrails] == [("output", "rewrite")]
    assert rewritten.text == "ANSWER FROM 1 LOOKUPS"
    assert [d.kind for d in watched.decisions] == ["pre_execution", "turn", "turn"]


async def test_a_suspended_run_and_its_resume_give_the_same_results_on_both_runtimes(
    runtimes: tuple[Runner, DBOSRuntime],
) -> None:
    runner, runtime = runtimes
    local = await runner.run(PAYER, "pay bob", session_id="approval")
    durable = await runtime.run(PAYER, "pay bob", session_id="approval")
    assert (local.status, [p.call_id for p in local.pending]) == ("suspended", ["p1"])
    _assert_agree(local, durable)

    local_done = await runner.resume(PAYER, "approval", {"p1": Approve()})
    durable_done = await runtime.resume(PAYER, "approval", {"p1": Approve()})
    assert (local_done.status, local_done.text) == ("completed", "settled: paid 50 to bob")
    _assert_agree(local_done, durable_done)


@pytest.mark.parametrize(
    ("result", "text"),
    [
        ({"city": "Oslo"}, 'going to {"city":"Oslo"}'),
        (ToolError("the user left"), 'going to {"error": "the user left"}'),
    ],
    ids=["value", "tool_error"],
)
async def test_a_client_tools_result_resumes_the_same_on_both_runtimes(
    runtimes: tuple[Runner, DBOSRuntime], result: object, text: str
) -> None:
    """``resume(..., results={call_id: value})`` on the DBOS runtime: the result travels in the workflow's input
    and settles the client call as the local runner does (a ``ToolError`` as a failed call the model reads)."""
    runner, runtime = runtimes
    session = f"client-{type(result).__name__}"
    local = await runner.run(ASKER, "plan a trip", session_id=session)
    durable = await runtime.run(ASKER, "plan a trip", session_id=session)
    assert [(p.call_id, p.source) for p in local.pending] == [("q1", "client")]
    _assert_agree(local, durable)

    local_done = await runner.resume(ASKER, session, results={"q1": result})
    durable_done = await runtime.resume(ASKER, session, results={"q1": result})
    assert (local_done.status, local_done.text) == ("completed", text)
    _assert_agree(local_done, durable_done)


async def test_a_run_s_goal_reaches_the_log_and_the_guardian_on_both_runtimes(
    runtimes: tuple[Runner, DBOSRuntime],
) -> None:
    runner, runtime = runtimes
    goal = Goal("Find x", criteria=["x found", "from lookup"])
    local = await runner.run(WATCHED, "go", session_id="goal", goal=goal)
    durable = await runtime.run(WATCHED, "go", session_id="goal", goal=goal)
    _assert_agree(local, durable)
    default = await runner.run(WATCHED, "go", session_id="no-goal")
    # The goal is in what the guardian read: the states differ from a run without one.
    assert [d.state_hash for d in local.decisions] != [d.state_hash for d in default.decisions]
    for store in (runner.store, runtime.store):
        snapshot = await store.load_session("goal")
        assert snapshot is not None
        assert [r for r in snapshot.entries[0].records if r["type"] == "run_goal"] == [goal.to_data()]
