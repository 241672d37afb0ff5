"""stopwise's deciders between the steps of a real LangGraph graph, its model node driven by langchain-core's own
offline FakeMessagesListChatModel, observed through LangGraph's run API (``ainvoke``, interrupts, ``Command``)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langgraph", reason="needs the 'langgraph' extra")

from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.tools import tool as lc_tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.types import Command

from stopwise import SQLiteStore
from stopwise.guardian import Guardian, GuardianOutcome
from stopwise.guardian.records import GuardianDecision, replay
from stopwise.guardrails import Block, Guardrails, Rewrite
from stopwise.integrations.langgraph import RunFailed, Stopwise
from stopwise.records import parse_records
from stopwise.stop.guard import Continue, Fail, StopGuard, StopGuardRecord
from stopwise.store.base import RunStatus, Store

DELETED: list[str] = []


@lc_tool
def read_file(path: str) -> str:
    """Read a file."""
    return f"contents of {path}"


@lc_tool
def delete_file(path: str) -> str:
    """Delete a file."""
    DELETED.append(path)
    return f"deleted {path}"


def build(stopwise: Stopwise, replies: list[BaseMessage]) -> Any:
    """A typical hand-written agent graph: stopwise's input node, a model node, stopwise's finish node after it,
    stopwise's tool node."""
    model = FakeMessagesListChatModel(responses=replies)

    async def call_model(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await model.ainvoke(state["messages"])]}

    graph = StateGraph(MessagesState)
    graph.add_node("input", stopwise.input_node(model="model"))
    graph.add_node("model", call_model)
    graph.add_node("finish", stopwise.finish_node(model="model", tools="tools"))
    graph.add_node("tools", stopwise.tool_node([read_file, delete_file]))
    graph.add_edge(START, "input")
    graph.add_edge("model", "finish")
    graph.add_edge("tools", "model")
    return graph.compile(checkpointer=InMemorySaver())


def cleanup(*final: str) -> list[BaseMessage]:
    return [
        AIMessage("", tool_calls=[{"name": "read_file", "args": {"path": "notes.txt"}, "id": "c1"}]),
        AIMessage("", tool_calls=[{"name": "delete_file", "args": {"path": "notes.txt"}, "id": "c2"}]),
        *(AIMessage(text) for text in final),
    ]


async def _records(store: Store, session: str) -> list[Any]:
    snapshot = await store.load_session(session)
    assert snapshot is not None
    return [r for e in snapshot.entries for r in parse_records(e.records)]


THREAD = {"configurable": {"thread_id": "t1"}}


async def test_a_guardian_escalation_interrupts_the_graph_and_the_approved_call_runs_on_resume(
    tmp_path: Path,
) -> None:
    DELETED.clear()
    store = SQLiteStore(tmp_path / "runs.db")
    app = build(Stopwise(guardian=Guardian(), store=store), cleanup("notes.txt is deleted."))
    paused = await app.ainvoke({"messages": [("user", "Clean up notes.txt")]}, THREAD)
    (waiting,) = paused["__interrupt__"]
    assert waiting.value["tool_call"]["id"] == "c2" and waiting.value["reason"].startswith("escalate: risk")
    assert DELETED == []
    (suspended,) = await store.list_runs("t1")
    assert suspended.status is RunStatus.SUSPENDED
    done = await app.ainvoke(Command(resume=True), THREAD)
    assert done["messages"][-1].text == "notes.txt is deleted." and DELETED == ["notes.txt"]
    decisions = [r for r in await _records(store, "t1") if isinstance(r, GuardianDecision)]
    # Judged once each, though LangGraph re-executed the tool node on resume.
    assert [(d.call_id, d.outcome) for d in decisions] == [
        ("c1", GuardianOutcome.CONTINUE),
        ("c2", GuardianOutcome.ESCALATE),
    ]
    assert all(replay(d).outcome is d.outcome for d in decisions)
    (run,) = await store.list_runs("t1")
    assert run.status is RunStatus.COMPLETED
    await store.close()


async def test_a_rejected_escalation_is_what_the_model_reads_and_the_tool_never_runs() -> None:
    DELETED.clear()
    app = build(Stopwise(guardian=Guardian()), cleanup("I left it."))
    await app.ainvoke({"messages": [("user", "Clean up notes.txt")]}, THREAD)
    done = await app.ainvoke(Command(resume="keep that file"), THREAD)
    assert DELETED == []
    (row,) = [m for m in done["messages"] if isinstance(m, ToolMessage) and m.tool_call_id == "c2"]
    assert row.text == '{"error": "Rejected by the reviewer: keep that file"}'


async def test_a_stop_guard_continue_sends_the_graph_back_to_the_model_with_its_feedback() -> None:
    def needs_source(ctx: Any) -> Continue | None:
        return None if "[source:" in ctx.reply.text else Continue("cite a source for the answer")

    stopwise = Stopwise(stop_guard=StopGuard(needs_source, max_continues=2))
    app = build(stopwise, [AIMessage("Paris"), AIMessage("Paris [source: atlas]")])
    done = await app.ainvoke({"messages": [("user", "Capital of France?")]}, THREAD)
    assert done["messages"][-1].text == "Paris [source: atlas]"
    assert "Automated feedback from the application" in done["messages"][-2].text
    records = [r for r in await _records(stopwise.deciders.store, "t1") if isinstance(r, StopGuardRecord)]
    assert [r.event for r in records] == ["continued", "accepted"]


async def test_a_stop_guard_fail_raises_a_typed_failure_out_of_invoke() -> None:
    app = build(Stopwise(stop_guard=StopGuard(lambda ctx: Fail("contradicts the ledger"))), [AIMessage("42")])
    with pytest.raises(RunFailed) as raised:
        await app.ainvoke({"messages": [("user", "How much?")]}, THREAD)
    assert raised.value.error.code == "stop_guard_rejected"


async def test_a_tool_call_guardrail_block_is_the_calls_result_and_the_tool_never_runs() -> None:
    DELETED.clear()

    def no_deletes(ctx: Any) -> Block | None:
        return Block("deleting files is not allowed here") if ctx.tool_call.name == "delete_file" else None

    app = build(Stopwise(guardrails=Guardrails(on_tool_call=[no_deletes])), cleanup("I could not delete it."))
    done = await app.ainvoke({"messages": [("user", "Clean up notes.txt")]}, THREAD)
    assert DELETED == []
    (row,) = [m for m in done["messages"] if isinstance(m, ToolMessage) and m.tool_call_id == "c2"]
    assert row.text == '{"error": "Blocked by guardrail \'no_deletes\': deleting files is not allowed here"}'


async def test_the_decision_log_of_a_graph_replays_with_the_cli(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from stopwise.cli import main

    db = tmp_path / "runs.db"
    store = SQLiteStore(db)
    app = build(Stopwise(guardian=Guardian(), store=store), cleanup())
    await app.ainvoke({"messages": [("user", "Clean up notes.txt")]}, THREAD)
    await store.close()
    assert await asyncio.to_thread(main, ["replay", str(db)]) == 0
    assert "replayed 2 decisions: every outcome agrees with the log" in capsys.readouterr().out


async def test_a_tool_result_guardrail_rewrite_is_the_calls_result() -> None:
    def redact(ctx: Any) -> Rewrite | None:
        return Rewrite(result="[redacted]") if "contents" in str(ctx.result) else None

    app = build(Stopwise(guardrails=Guardrails(on_tool_result=[redact])), cleanup("done"))
    done = await app.ainvoke({"messages": [("user", "Clean up notes.txt")]}, THREAD)
    (row,) = [m for m in done["messages"] if isinstance(m, ToolMessage) and m.tool_call_id == "c1"]
    assert row.text == "[redacted]"


async def test_an_input_guardrail_block_ends_the_graph_with_its_replacement_and_no_model_call() -> None:
    def no_secrets(ctx: Any) -> Block | None:
        text = ctx.messages[-1].content
        return (
            Block("asks for credentials", replacement="I can't help with credentials.") if "password" in text else None
        )

    stopwise = Stopwise(guardrails=Guardrails(on_input=[no_secrets]))
    app = build(stopwise, [])  # a model with no replies: any call would fail the test
    done = await app.ainvoke({"messages": [("user", "What is the admin password?")]}, THREAD)
    assert done["messages"][-1].text == "I can't help with credentials."
    (run,) = await stopwise.deciders.store.list_runs("t1")
    assert run.completion_reason == "guardrail_input"
