"""No model, and no model middleware, can change the log through the rows it is handed: a model that changes
every row of its request in place (call arguments, a nested list, metadata) leaves the log (in memory and in a
SQLite file), the run's result, what the hooks read, the guardian's projections and ``stopwise show`` as a
well-behaved model leaves them, and a later leg (a resume) is sent the rows as logged."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from stopwise import Agent, Approve, Guardian, Guardrails, MemoryStore, Pass, Risk, Runner, SQLiteStore, Store, tool
from stopwise.cli import main
from stopwise.guardian.audit import replay_all
from stopwise.guardian.records import GuardianDecision
from stopwise.messages import Message, Reply, Role, ToolCall
from stopwise.models import ModelRequest
from stopwise.records import parse_records
from stopwise.result import RunResult, RunStatus
from stopwise.stop.guard import StopGuard
from test_hook_rows import changed, mutate, mutate_calls, shown


@tool(risk=Risk.READ_ONLY)
def tagged_draft(topic: str, tags: list[str]) -> str:
    """Write a tagged draft note."""
    return f"Draft: {topic} {tags}"


@tool(risk=Risk.READ_ONLY, needs_approval=True)
def publish(topic: str, tags: list[str]) -> str:
    """Publish a tagged note."""
    return f"Published: {topic} {tags}"


def script(request: ModelRequest) -> Reply:
    """Two tagged drafts after each user row, then a publish waiting for approval, then an answer. The calls'
    ids are fixed, so two runs of it project the same states for the guardian."""
    since = 0
    for m in reversed(request.messages):
        if m.role is Role.USER:
            break
        since += m.role is Role.ASSISTANT and bool(m.tool_calls)
    if since < 2:
        return Reply(tool_calls=[ToolCall("tagged_draft", {"topic": f"take {since}", "tags": ["a"]}, id=f"d{since}")])
    if since == 2:
        return Reply(tool_calls=[ToolCall("publish", {"topic": "final", "tags": ["a", "b"]}, id="p1")])
    return Reply("done")


class Scripted:
    """A custom ``Model`` answering as ``script``; it records what it was sent, then (``meddle``) changes every row
    of the request in place."""

    def __init__(self, meddle: bool) -> None:
        self.meddle = meddle
        self.requests: list[list[str]] = []

    async def generate(self, request: ModelRequest) -> Reply:
        self.requests.append(shown(request.messages))
        if self.meddle:
            mutate(request.messages)
        return script(request)


def meddling_middleware(requests: list[list[str]]) -> Callable[[ModelRequest, Any], Awaitable[Reply]]:
    async def meddle(request: ModelRequest, call_next: Any) -> Reply:
        requests.append(shown(request.messages))
        mutate(request.messages)
        reply: Reply = await call_next(request)
        return reply

    return meddle


@asynccontextmanager
async def opened(kind: str, path: Path) -> AsyncIterator[Store]:
    if kind == "memory":
        yield MemoryStore()
        return
    async with SQLiteStore(path) as store:
        yield store


class Observed:
    """One session's run to its approval and the resumed leg after it, in a fresh ``Runner``: what the hooks read,
    the results, the log and the guardian's decisions."""

    def __init__(self) -> None:
        self.hooks: list[list[str]] = []
        self.results: list[RunResult] = []
        self.log: list[Message] = []
        self.decisions: list[GuardianDecision] = []

    def guardrail(self, ctx: Any) -> Pass:
        self.hooks.append(shown(ctx.messages))
        return Pass()


async def observe(
    store: Store,
    model: Any,
    middleware: list[Any] | None = None,
    *,
    tools: tuple[Any, ...] = (tagged_draft, publish),
    guardian: Guardian | None = None,
    runner: dict[str, Any] | None = None,
) -> Observed:
    """``tools``: a draft and a publish tool (as ``script`` calls them); ``runner``: the runners' arguments."""
    seen = Observed()
    agent = Agent(
        "a",
        "Draft, then publish.",
        model,
        tools=list(tools),
        guardian=guardian or Guardian(),
        guardrails=Guardrails(on_tool_result=seen.guardrail),
        middleware=middleware or [],
    )
    first = await Runner(store, **(runner or {})).run(agent, "go", session_id="s")
    assert first.status is RunStatus.SUSPENDED, first.error
    second = await Runner(store, **(runner or {})).resume(agent, "s", {first.pending[0].call_id: Approve()})
    assert second.status is RunStatus.COMPLETED, second.error
    seen.results = [first, second]
    snapshot = await store.load_session("s")
    assert snapshot is not None
    seen.log = list(snapshot.messages())
    configs: dict[str, Any] = {}
    records = [r for e in snapshot.entries for r in parse_records(e.records, configs)]
    seen.decisions = [r for r in records if isinstance(r, GuardianDecision)]
    return seen


def decided(seen: Observed) -> list[tuple[int, str, str, str]]:
    return [(d.step, d.kind, d.state_hash, d.outcome.value) for d in seen.decisions]


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
@pytest.mark.parametrize("via", ["model", "middleware"])
async def test_a_model_that_mutates_every_row_it_is_sent_changes_neither_the_log_nor_the_hooks_nor_the_guardian(
    tmp_path: Path, kind: str, via: str
) -> None:
    async with opened(kind, tmp_path / "clean.db") as store:
        clean = await observe(store, Scripted(meddle=False))
    requests: list[list[str]] = []
    async with opened(kind, tmp_path / "log.db") as store:
        if via == "model":
            model = Scripted(meddle=True)
            seen = await observe(store, model)
            requests = model.requests
        else:
            seen = await observe(store, Scripted(meddle=False), [meddling_middleware(requests)])
    assert len(requests) == 4 and len(seen.hooks) == 3  # every step was sent rows to change
    assert changed(t for h in seen.hooks for t in h) == []
    assert changed(t for r in seen.results for t in shown(r.messages)) == []
    assert changed(shown(seen.log)) == []
    assert seen.log == clean.log
    assert decided(seen) == decided(clean) and len(seen.decisions) >= 4
    assert replay_all(seen.decisions)[1] == []


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_a_resumed_leg_is_sent_the_rows_as_logged_not_as_the_model_changed_them(
    tmp_path: Path, kind: str
) -> None:
    async with opened(kind, tmp_path / "log.db") as store:
        model = Scripted(meddle=True)
        await observe(store, model)
    # The resume is a new leg: its first request shows the rows as the log has them.
    assert len(model.requests) == 4
    assert changed(model.requests[-1]) == []


def test_show_prints_the_rows_as_logged_after_a_model_changed_what_it_was_sent(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    async def meddled() -> Observed:
        async with SQLiteStore(tmp_path / "log.db") as store:
            return await observe(store, Scripted(meddle=True))

    seen = asyncio.run(meddled())  # show runs its own event loop
    capsys.readouterr()
    assert main(["show", seen.results[0].run_id, "--db", str(tmp_path / "log.db"), "--full"]) == 0
    out = capsys.readouterr().out
    assert "take 0" in out and "changed" not in out


async def test_a_model_that_changes_the_reply_it_returned_later_does_not_change_the_logged_reply(
    tmp_path: Path,
) -> None:
    given: list[Reply] = []

    class Reusing:
        """Returns replies it keeps, and changes each one it gave before in place on its next call."""

        async def generate(self, request: ModelRequest) -> Reply:
            for reply in given:
                mutate_calls(reply.tool_calls)
            given.append(script(request))
            return given[-1]

    async with SQLiteStore(tmp_path / "log.db") as store:
        seen = await observe(store, Reusing())
    assert len(given) == 4
    assert changed(t for r in seen.results for t in shown(r.messages)) == []
    assert changed(shown(seen.log)) == []


# --- the framework adapters: what their guardrails and stop guard are handed -----------------------------------


def meddling_hooks() -> dict[str, Any]:
    """A guardrail on every hook and a stop guard, each changing every row it is handed (and the call, where it is
    handed one) in place; they judge nothing."""

    def meddle(ctx: Any) -> None:
        mutate(ctx.messages)
        if getattr(ctx, "tool_call", None) is not None:
            mutate_calls([ctx.tool_call])

    hook = [meddle]
    guardrails = Guardrails(on_input=hook, on_tool_call=hook, on_tool_result=hook, on_output=hook)
    return {"guardrails": guardrails, "stop_guard": StopGuard(meddle), "guardian": Guardian()}


PEER_ARGS = {"topic": "x", "tags": ["a"]}


Once = Callable[[dict[str, Any]], Awaitable[tuple[str, list[str], list[Any]]]]
"""One run of a peer's agent with these deciders: the peer's history and what its model was sent (as text), the
arguments its tool ran with, and the guardian's decisions."""


async def meddled_as_clean(once: Once) -> None:
    """A run under the meddling hooks leaves the peer's history, its tool's arguments and the guardian's decisions
    as a run under the guardian alone leaves them."""
    history, drafted, decided = await once(meddling_hooks())
    _, _, clean = await once({"guardian": Guardian()})
    assert "changed" not in history and changed(drafted) == []
    assert decided == clean and decided


async def peer_records(store: Store) -> list[tuple[int, str, str | None, str, str]]:
    """The guardian's decisions of every session in ``store``: what it projected (its state hash) and decided."""
    out = []
    for session in await store.list_sessions():
        snapshot = await store.load_session(session)
        assert snapshot is not None
        configs: dict[str, Any] = {}
        records = [r for e in snapshot.entries for r in parse_records(e.records, configs)]
        out += [
            (d.step, d.kind, d.call_id, d.state_hash, d.outcome.value)
            for d in records
            if isinstance(d, GuardianDecision)
        ]
    return out


async def test_pydantic_ai_hooks_that_mutate_their_rows_change_neither_its_history_nor_the_tool_nor_the_guardian() -> (
    None
):
    pytest.importorskip("pydantic_ai", reason="needs the 'pydantic-ai' extra")
    from pydantic_ai import Agent as PeerAgent
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import AgentInfo
    from pydantic_ai.models.function import FunctionModel as PeerModel

    from stopwise.integrations.pydantic_ai import StopwiseCapability

    async def once(hooks: dict[str, Any]) -> tuple[str, list[str], list[Any]]:
        sent: list[str] = []
        drafted: list[str] = []

        def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
            sent.append(repr(messages))
            if not any(isinstance(m, ModelResponse) for m in messages):
                args = json.loads(json.dumps(PEER_ARGS))
                return ModelResponse(parts=[ToolCallPart("tagged_draft", args, tool_call_id="c1")])
            return ModelResponse(parts=[TextPart("done")])

        store = MemoryStore()
        capability = StopwiseCapability(store=store, risks={"tagged_draft": Risk.READ_ONLY}, **hooks)
        agent: PeerAgent[None, str] = PeerAgent(PeerModel(model), capabilities=[capability])

        @agent.tool_plain
        def tagged_draft(topic: str, tags: list[str]) -> str:
            """Write a tagged draft note."""
            drafted.append(f"{topic} {tags}")
            return f"Draft: {topic} {tags}"

        result = await agent.run("go")
        assert result.output == "done" and len(sent) == 2 and drafted
        return repr(result.all_messages()) + "".join(sent), drafted, await peer_records(store)

    await meddled_as_clean(once)


async def test_langgraph_hooks_that_mutate_their_rows_change_neither_its_state_nor_the_tool_nor_the_guardian() -> None:
    pytest.importorskip("langgraph", reason="needs the 'langgraph' extra")
    from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
    from langchain_core.messages import AIMessage, BaseMessage
    from langchain_core.tools import tool as lc_tool
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.graph import START, MessagesState, StateGraph

    from stopwise.integrations.langgraph import Stopwise as LangGraphStopwise

    async def once(hooks: dict[str, Any]) -> tuple[str, list[str], list[Any]]:
        sent: list[str] = []
        drafted: list[str] = []

        @lc_tool
        def tagged_draft(topic: str, tags: list[str]) -> str:
            """Write a tagged draft note."""
            drafted.append(f"{topic} {tags}")
            return f"Draft: {topic} {tags}"

        call = {"name": "tagged_draft", "args": json.loads(json.dumps(PEER_ARGS)), "id": "c1"}
        model = FakeMessagesListChatModel(responses=[AIMessage("", tool_calls=[call]), AIMessage("done")])

        async def call_model(state: MessagesState) -> dict[str, Any]:
            messages: list[BaseMessage] = state["messages"]
            sent.append(repr(messages))
            return {"messages": [await model.ainvoke(messages)]}

        store = MemoryStore()
        stopwise = LangGraphStopwise(store=store, risks={"tagged_draft": Risk.READ_ONLY}, **hooks)
        graph = StateGraph(MessagesState)
        graph.add_node("input", stopwise.input_node(model="model"))
        graph.add_node("model", call_model)
        graph.add_node("finish", stopwise.finish_node(model="model", tools="tools"))
        graph.add_node("tools", stopwise.tool_node([tagged_draft]))
        graph.add_edge(START, "input")
        graph.add_edge("model", "finish")
        app = graph.compile(checkpointer=InMemorySaver())
        thread = {"configurable": {"thread_id": "t1"}}
        done = await app.ainvoke({"messages": [("user", "go")]}, thread)
        assert done["messages"][-1].text == "done" and len(sent) == 2 and drafted
        return repr(done["messages"]) + "".join(sent), drafted, await peer_records(store)

    await meddled_as_clean(once)


async def test_openai_agents_hooks_that_mutate_their_rows_change_neither_its_history_nor_the_guardian() -> None:
    pytest.importorskip("agents", reason="needs the 'openai-agents' extra")
    from agents import Agent as PeerAgent
    from agents import function_tool, set_tracing_disabled
    from agents.testing import ScriptedModel as PeerModel
    from agents.testing import assistant_message, function_call

    from stopwise.integrations.openai_agents import Stopwise as AgentsStopwise

    set_tracing_disabled(True)

    async def once(hooks: dict[str, Any]) -> tuple[str, list[str], list[Any]]:
        drafted: list[str] = []

        @function_tool
        def tagged_draft(topic: str, tags: list[str]) -> str:
            """Write a tagged draft note."""
            drafted.append(f"{topic} {tags}")
            return f"Draft: {topic} {tags}"

        model = PeerModel([[function_call("tagged_draft", PEER_ARGS, call_id="c1")], [assistant_message("done")]])
        store = MemoryStore()
        stopwise = AgentsStopwise(store=store, risks={"tagged_draft": Risk.READ_ONLY}, **hooks)
        agent = stopwise.attach(PeerAgent("drafter", model=model, tools=[tagged_draft]))
        result = await stopwise.run(agent, "go", session_id="s")
        assert result.final_output == "done" and len(model.calls) == 2 and drafted
        sent = "".join(repr(c.input) for c in model.calls)
        return repr(result.to_input_list()) + sent, drafted, await peer_records(store)

    await meddled_as_clean(once)
