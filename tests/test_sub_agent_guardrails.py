"""Seed 003 for sub-agents: guardrail contexts carry the sub-agent path (003.24); a sub-agent inherits its
parent's run context and, unless the parent opts out, its tool-call and tool-result guardrails (003.26)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from stopwise import Agent, Reply, RunContext, Runner, ScriptedModel, Store, ToolCall, tool
from stopwise.errors import ConfigError
from stopwise.guardrails import Block, Guardrails, named
from stopwise.messages import Message, Role
from stopwise.store.base import EntryKind, LogEntry, RunRecord
from stopwise.store.memory import MemoryStore


@tool
def shell(command: str) -> str:
    """Run a shell command."""
    return f"ran: {command}"


def delegate(name: str, task: str = "dig") -> Reply:
    return Reply(tool_calls=[ToolCall(name, {"input": task})])


def shell_call(command: str = "ls") -> Reply:
    return Reply(tool_calls=[ToolCall("shell", {"command": command})])


async def test_guardrail_contexts_carry_the_sub_agent_path_and_it_is_empty_at_the_root(store: Store) -> None:
    paths: list[tuple[str, tuple[str, ...]]] = []

    def record(ctx: Any) -> None:
        paths.append((type(ctx).__name__, ctx.agent_path))

    own = Guardrails(on_input=record, on_output=record)
    fetcher = Agent("fetcher", "", ScriptedModel([shell_call(), "fetched"]), tools=[shell], guardrails=own)
    researcher = Agent(
        "researcher", "", ScriptedModel([delegate("fetcher"), "researched"]), tools=[fetcher.as_tool()], guardrails=own
    )
    lead = Agent(
        "lead",
        "",
        ScriptedModel([delegate("researcher"), "done"]),
        tools=[researcher.as_tool()],
        guardrails=Guardrails(on_input=record, on_tool_call=record, on_output=record),
    )
    result = await Runner(store).run(lead, "go")
    assert result.status == "completed" and result.output == "done"
    # The root's tool-call guardrail is inherited, so it reports the path of each loop that asks it.
    assert paths == [
        ("InputContext", ()),
        ("ToolCallContext", ()),
        ("InputContext", ("researcher",)),
        ("ToolCallContext", ("researcher",)),
        ("InputContext", ("researcher", "fetcher")),
        ("ToolCallContext", ("researcher", "fetcher")),
        ("OutputContext", ("researcher", "fetcher")),
        ("OutputContext", ("researcher",)),
        ("OutputContext", ()),
    ]


async def test_a_sub_agent_and_its_tools_inherit_the_run_context() -> None:
    seen: list[Any] = []
    context = object()

    @tool
    def whoami(ctx: RunContext) -> str:
        """Who is calling."""
        seen.append((ctx.runtime_context, ctx.agent_path))
        return "you"

    def check(ctx: Any) -> None:
        seen.append((ctx.runtime_context, ctx.agent_path))

    child = Agent(
        "helper",
        "",
        ScriptedModel([Reply(tool_calls=[ToolCall("whoami", {})]), "ok"]),
        tools=[whoami],
        guardrails=Guardrails(on_input=check),
    )
    lead = Agent("lead", "", ScriptedModel([delegate("helper"), "done"]), tools=[child.as_tool()])
    await Runner().run(lead, "go", runtime_context=context)
    assert seen == [(context, ("helper",)), (context, ("helper",))]


async def test_a_sub_agent_inherits_its_parents_tool_guardrails_and_a_parent_block_comes_first(store: Store) -> None:
    asked: list[str] = []

    def no_rm(ctx: Any) -> Block | None:
        asked.append("parent")
        return Block("rm is not allowed") if "rm" in ctx.tool_call.args.get("command", "") else None

    def childs_own(ctx: Any) -> None:
        asked.append("child")

    def tag_result(ctx: Any) -> None:
        asked.append(f"parent result {ctx.result}")

    child_model = ScriptedModel([shell_call("rm -rf /"), shell_call("ls"), "cleaned"])
    child = Agent(
        "cleaner", "", child_model, tools=[shell], guardrails=Guardrails(on_tool_call=named("own", childs_own))
    )
    lead = Agent(
        "lead",
        "",
        ScriptedModel([delegate("cleaner"), "done"]),
        tools=[child.as_tool()],
        guardrails=Guardrails(on_tool_call=named("no rm", no_rm), on_tool_result=tag_result),
    )
    result = await Runner(store).run(lead, "go")
    # The blocked call never ran and the child's own rule was not asked for it; the allowed one passed both.
    # The root's own call (the delegation), the child's two calls, then the child's answer at the root.
    assert asked == ["parent", "parent", "parent", "child", "parent result ran: ls", "parent result cleaned"]
    blocked = child_model.requests[1].messages[-1]
    assert json.loads(blocked.content) == {"error": "Blocked by guardrail 'no rm': rm is not allowed"}
    snapshot = await store.load_session(f"{result.session_id}/{result.messages[1].tool_calls[0].id}")
    assert snapshot is not None and snapshot.last_run is not None
    child_records = [r for e in snapshot.entries for r in e.records if r.get("type") == "guardrail"]
    assert [(r["name"], r["action"]) for r in child_records] == [("no rm", "block")]


async def test_inherit_guardrails_false_keeps_only_the_sub_agents_own() -> None:
    asked: list[tuple[str, tuple[str, ...]]] = []

    def parents(ctx: Any) -> None:
        asked.append(("parent", ctx.agent_path))

    def own(ctx: Any) -> None:
        asked.append(("own", ctx.agent_path))

    child = Agent(
        "worker", "", ScriptedModel([shell_call(), "ok"]), tools=[shell], guardrails=Guardrails(on_tool_call=own)
    )
    lead = Agent(
        "lead",
        "",
        ScriptedModel([delegate("worker"), "done"]),
        tools=[child.as_tool(inherit_guardrails=False)],
        guardrails=Guardrails(on_tool_call=parents),
    )
    await Runner().run(lead, "go")
    assert asked == [("parent", ()), ("own", ("worker",))]


async def test_the_parents_input_and_output_guardrails_are_not_run_again_in_a_sub_agent() -> None:
    seen: list[tuple[str, tuple[str, ...]]] = []

    def on_input(ctx: Any) -> None:
        seen.append(("input", ctx.agent_path))

    def on_output(ctx: Any) -> None:
        seen.append(("output", ctx.agent_path))

    child = Agent("helper", "", ScriptedModel(["child answer"]))
    lead = Agent(
        "lead",
        "",
        ScriptedModel([delegate("helper"), "done"]),
        tools=[child.as_tool()],
        guardrails=Guardrails(on_input=on_input, on_output=on_output),
    )
    result = await Runner().run(lead, "go")
    assert result.messages[2].content == "child answer"
    assert seen == [("input", ()), ("output", ())]


async def test_a_sub_agent_retried_after_a_crash_keeps_its_path_and_inherited_guardrails() -> None:
    store = MemoryStore()
    paths: list[tuple[str, ...]] = []

    def record(ctx: Any) -> None:
        paths.append(ctx.agent_path)

    child = Agent("helper", "", ScriptedModel([shell_call(), "child answer"]), tools=[shell])
    lead = Agent(
        "lead",
        "",
        ScriptedModel([delegate("helper"), "done"]),
        tools=[child.as_tool()],
        guardrails=Guardrails(on_tool_call=record),
    )
    # The child's session exists and its run reads running: the parent's re-run step resumes it.
    parent_ctx = RunContext("p", "run-p", 1, "call_1", {}, Runner(store), guardrails=lead.guardrails)
    entry = LogEntry("p/call_1", 1, "child-run", 0, EntryKind.INPUT, (Message(Role.USER, "dig"),))
    await store.start_run(RunRecord("child-run", "p/call_1", "helper"), entry, {})
    output = await Runner(store).run_child(child, "dig", parent_ctx)
    assert output == "child answer"
    assert paths == [("helper",)]


def test_inherit_guardrails_must_be_a_bool() -> None:
    with pytest.raises(ConfigError, match="inherit_guardrails"):
        Agent("x", "", ScriptedModel(["ok"])).as_tool(inherit_guardrails="yes")  # type: ignore[arg-type]
