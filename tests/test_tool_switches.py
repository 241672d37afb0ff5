"""Tool switches (seed 000.19): a tool may switch tools off, a stop guard may switch them back on; the switched-off
set is counted from the log, so a retry keeps it and a fork (a rewind) keeps only the switches it kept."""

from __future__ import annotations

import json
from typing import Any

import pytest

from stopwise import (
    Agent,
    Continue,
    FunctionModel,
    Reply,
    RunContext,
    Runner,
    StopGuard,
    StopGuardContext,
    Store,
    ToolCall,
    tool,
)
from stopwise.models import ModelRequest
from stopwise.step_plan import StepContext, StepPlan
from stopwise.tool_switches import ToolSwitch, ToolSwitchRecord, switched_off


@tool
def search(q: str, ctx: RunContext) -> str:
    """Search once: the tool switches itself off after use."""
    ctx.switch_off("search")
    return f"found {q}"


@tool
def lookup(q: str) -> str:
    """Look something up."""
    return f"looked up {q}"


class Model:
    """Searches on step 1, then answers; keeps every request."""

    def __init__(self) -> None:
        self.requests: list[ModelRequest] = []

    def __call__(self, req: ModelRequest) -> Reply:
        self.requests.append(req)
        if req.step == 1:
            return Reply(tool_calls=[ToolCall("search", {"q": "a"}, id=f"s{req.step}")])
        return Reply(f"answer {req.step}")


def offered(req: ModelRequest) -> list[str]:
    return sorted(t.name for t in req.tools)


def agent(model: Model, guard: Any = None, **kw: Any) -> Agent:
    sg = None if guard is None else guard if isinstance(guard, StopGuard) else StopGuard(guard)
    return Agent("s", "", FunctionModel(model), tools=[search, lookup], stop_guard=sg, **kw)


async def test_a_guard_may_switch_back_on_a_tool_that_a_tool_switched_off(store: Store) -> None:
    def guard(ctx: StopGuardContext) -> Continue | None:
        if ctx.continues_used:
            return None
        return Continue("Search again.", context=[ToolSwitch(on=["search"])])

    model = Model()
    result = await Runner(store).run(agent(model, guard), "q", session_id="s")
    assert result.completion_reason == "final_answer"
    # Step 1 offers everything; the tool switched itself off for step 2; the guard's continue turned it back on.
    assert [offered(r) for r in model.requests] == [["lookup", "search"], ["lookup"], ["lookup", "search"]]
    snapshot = await store.load_session("s")
    assert snapshot is not None
    switches = [r for e in snapshot.entries for r in e.records if r["type"] == "tool_switch"]
    assert switches == [
        {"type": "tool_switch", "source": "tool", "step": 1, "on": [], "off": ["search"], "tool_call_id": "s1"},
        {"type": "tool_switch", "source": "stop_guard", "step": 2, "on": ["search"], "off": []},
    ]


async def test_a_call_to_a_switched_off_tool_is_answered_with_an_error_row() -> None:
    def fn(req: ModelRequest) -> Reply:
        if req.step <= 2:
            return Reply(tool_calls=[ToolCall("search", {"q": str(req.step)}, id=f"s{req.step}")])
        return Reply("done")

    result = await Runner().run(Agent("s", "", FunctionModel(fn), tools=[search, lookup]), "q")
    second = [m for m in result.messages if m.role == "tool"][1]
    assert json.loads(second.content) == {"error": "Tool 'search' is not available at this step. Available: lookup"}


async def test_prepare_step_sees_the_switched_off_tools_and_cannot_offer_them_again() -> None:
    seen: list[frozenset[str]] = []

    def prepare(ctx: StepContext) -> StepPlan:
        seen.append(ctx.tools_off)
        return StepPlan(tools=["search", "lookup"])

    model = Model()
    await Runner().run(agent(model, prepare_step=prepare), "q")
    assert seen == [frozenset(), frozenset({"search"})]
    assert [offered(r) for r in model.requests] == [["lookup", "search"], ["lookup"]]


async def test_switches_are_counted_from_the_log_across_a_retry(store: Store) -> None:
    calls = {"n": 0}

    def fn(req: ModelRequest) -> Reply:
        calls["n"] += 1
        if calls["n"] == 2:
            raise ConnectionError("flaky")
        if req.step == 1:
            return Reply(tool_calls=[ToolCall("search", {"q": "a"}, id="s1")])
        return Reply(f"offered {offered(req)}")

    a = Agent("s", "", FunctionModel(fn), tools=[search, lookup])
    runner = Runner(store)
    failed = await runner.run(a, "q", session_id="s")
    assert failed.status == "failed"
    done = await runner.retry(a, "s")
    assert done.output == "offered ['lookup']"


async def test_a_fork_before_the_switch_has_every_tool_on(store: Store) -> None:
    model = Model()
    runner = Runner(store)
    await runner.run(agent(model), "q", session_id="s")
    model.requests.clear()
    await runner.fork(agent(model), "s", at_step=0)
    assert offered(model.requests[0]) == ["lookup", "search"]
    model.requests.clear()
    await runner.fork(agent(model), "s", at_step=1)
    assert offered(model.requests[0]) == ["lookup"]


async def test_a_continue_refused_for_budget_drops_its_switches_with_its_rows(store: Store) -> None:
    def guard(ctx: StopGuardContext) -> Continue:
        return Continue(context=[ToolSwitch(on=["search"])])

    model = Model()
    result = await Runner(store).run(agent(model, StopGuard(guard, max_continues=0)), "q", session_id="s")
    assert result.completion_reason == "stop_guard_exhausted"
    snapshot = await store.load_session("s")
    assert snapshot is not None
    sources = [r["source"] for e in snapshot.entries for r in e.records if r["type"] == "tool_switch"]
    assert sources == ["tool"]


async def test_a_switch_naming_a_tool_the_agent_does_not_have_is_an_invalid_verdict() -> None:
    def guard(ctx: StopGuardContext) -> Continue:
        return Continue("again", context=[ToolSwitch(on=["rm_rf"])])

    model = Model()
    result = await Runner().run(agent(model, guard), "q")
    assert result.completion_reason == "stop_guard_error"
    assert result.stop_guard is not None and result.stop_guard.error is not None
    assert "ToolSwitch names tools the agent does not have: ['rm_rf']" in result.stop_guard.error


def test_a_tool_switch_takes_names_or_tools_and_needs_at_least_one() -> None:
    assert ToolSwitch(on=[search], off="lookup") == ToolSwitch(on=("search",), off=("lookup",))
    with pytest.raises(ValueError, match="at least one tool"):
        ToolSwitch()
    with pytest.raises(TypeError, match=r"ToolSwitch\.off"):
        ToolSwitch(off=[3])


def test_the_switched_off_set_folds_the_records_in_log_order() -> None:
    records = [
        ToolSwitchRecord("tool", 1, off=("a", "b")),
        ToolSwitchRecord("stop_guard", 2, on=("a",)),
        ToolSwitchRecord("stop_guard", 3, on=("b",), off=("a",)),
    ]
    assert switched_off(records[:1]) == {"a", "b"}
    assert switched_off(records[:2]) == {"b"}
    assert switched_off(records) == {"a"}
    # Folding on from an earlier fold gives the same set as folding the whole list (the leg folds only new records).
    assert switched_off(records[2:], switched_off(records[:2])) == switched_off(records)


def test_a_tool_may_only_switch_tools_off() -> None:
    ctx = RunContext("s", "r", 1, "c", {}, None)
    assert not hasattr(ctx, "switch_on")
    with pytest.raises(TypeError, match="switch_off takes tool names"):
        ctx.switch_off()
