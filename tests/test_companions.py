"""Persistent companion sub-agents (seed 002.6): a companion keeps its memory across the parent's calls; one that
was cut off ends failed, is not continued, and the next call re-spawns it fresh."""

from __future__ import annotations

import json
from typing import Any

import pytest

from stopwise import Agent, FunctionModel, Reply, RunContext, Runner, Store, ToolCall, tool
from stopwise.errors import ConfigError
from stopwise.models import ModelRequest
from stopwise.store.memory import MemoryStore
from stopwise.tools import ToolError


@tool
def think(about: str) -> str:
    """Think about something."""
    return f"thought about {about}"


class Companion:
    """Answers each task with the tasks it remembers; a task containing "hard" makes it call a tool first."""

    def __init__(self) -> None:
        self.requests: list[ModelRequest] = []

    def __call__(self, req: ModelRequest) -> Reply:
        self.requests.append(req)
        tasks = [m.content for m in req.messages if m.role == "user"]
        if "hard" in tasks[-1] and req.messages[-1].role == "user":
            return Reply(tool_calls=[ToolCall("think", {"about": tasks[-1]})])
        return Reply(" | ".join(tasks))


def parent_calling(*tasks: str) -> FunctionModel:
    """A parent that consults the companion once per task, one step each, then answers."""

    def fn(req: ModelRequest) -> Reply:
        if req.step <= len(tasks):
            return Reply(tool_calls=[ToolCall("advisor", {"input": tasks[req.step - 1]}, id=f"a{req.step}")])
        return Reply("done")

    return FunctionModel(fn)


def tool_rows(messages: Any) -> list[Any]:
    return [json.loads(m.content) if m.content.startswith("{") else m.content for m in messages if m.role == "tool"]


async def test_a_persistent_companion_remembers_earlier_rounds(store: Store) -> None:
    model = Companion()
    advisor = Agent("advisor", "", FunctionModel(model), tools=[think])
    lead = Agent("lead", "", parent_calling("first", "second"), tools=[advisor.as_tool(persistent=True)])
    result = await Runner(store).run(lead, "go", session_id="p")
    assert tool_rows(result.messages) == ["first", "first | second"]
    runs = await store.list_runs("p/companion:advisor")
    assert [r.status for r in runs] == ["completed", "completed"]


async def test_a_sub_agent_that_is_not_persistent_starts_fresh_on_every_call() -> None:
    model = Companion()
    advisor = Agent("advisor", "", FunctionModel(model), tools=[think])
    lead = Agent("lead", "", parent_calling("first", "second"), tools=[advisor.as_tool()])
    result = await Runner().run(lead, "go")
    assert tool_rows(result.messages) == ["first", "second"]


async def test_a_cut_off_companion_ends_failed_and_the_next_call_re_spawns_it_fresh(store: Store) -> None:
    model = Companion()
    advisor = Agent("advisor", "", FunctionModel(model), tools=[think], max_steps=1)
    lead = Agent("lead", "", parent_calling("first", "hard one", "third"), tools=[advisor.as_tool(persistent=True)])
    result = await Runner(store).run(lead, "go", session_id="p")
    # The cut-off is a failed tool result for the parent (002.5); the next call has lost the earlier rounds.
    assert tool_rows(result.messages) == ["first", {"error": "Max steps (1) reached"}, "third"]
    first = await store.list_runs("p/companion:advisor")
    assert [(r.status, r.completion_reason) for r in first] == [("completed", "final_answer"), ("failed", "max_steps")]
    respawned = await store.list_runs("p/companion:advisor#2")
    assert [r.status for r in respawned] == ["completed"]


async def test_a_re_run_parent_step_does_not_consult_the_companion_twice() -> None:
    store = MemoryStore()
    model = Companion()
    advisor = Agent("advisor", "", FunctionModel(model))
    runner = Runner(store)
    ctx = RunContext("p", "run-p", 1, "call_1", {}, runner)
    assert await runner.run_child(advisor, "first", ctx, companion="advisor") == "first"
    # The parent's step runs again after a crash: same call, same idempotency key, the run already finished.
    again = RunContext("p", "run-p", 1, "call_1", {}, runner)
    assert await runner.run_child(advisor, "first", again, companion="advisor") == "first"
    assert len(model.requests) == 1
    # A later call of the parent is a new round with the companion's memory.
    later = RunContext("p", "run-p", 2, "call_2", {}, runner)
    assert await runner.run_child(advisor, "second", later, companion="advisor") == "first | second"


async def test_calls_to_one_companion_in_one_batch_take_turns_in_its_session(store: Store) -> None:
    model = Companion()
    advisor = Agent("advisor", "", FunctionModel(model))

    def fn(req: ModelRequest) -> Reply:
        if req.step == 1:
            calls = [ToolCall("advisor", {"input": t}, id=f"a{i}") for i, t in enumerate(("x", "y"))]
            return Reply(tool_calls=calls)
        return Reply("done")

    lead = Agent("lead", "", FunctionModel(fn), tools=[advisor.as_tool(persistent=True)])
    result = await Runner(store).run(lead, "go", session_id="p")
    rows = tool_rows(result.messages)
    assert all(isinstance(r, str) for r in rows), rows  # neither call lost a race for the session's log
    assert sorted(rows) in (["x", "x | y"], ["y", "y | x"])
    assert len(await store.list_runs("p/companion:advisor")) == 2


async def test_a_failed_companion_call_is_a_tool_error_naming_the_cut_off() -> None:
    advisor = Agent("advisor", "", FunctionModel(Companion()), tools=[think], max_steps=1)
    ctx = RunContext("p", "run-p", 1, "call_1", {}, Runner())
    with pytest.raises(ToolError, match=r"Max steps \(1\) reached"):
        await ctx.runner.run_child(advisor, "hard", ctx, companion="advisor")


def test_persistent_must_be_a_bool() -> None:
    with pytest.raises(ConfigError, match="persistent"):
        Agent("x", "", FunctionModel(Companion())).as_tool(persistent=1)  # type: ignore[arg-type]
