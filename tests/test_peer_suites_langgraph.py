"""LangGraph's own documented and tested behaviours of a tool-calling agent graph, run on LangGraph's real
runtime (its model node driven by langchain-core's offline ``FakeMessagesListChatModel``) twice: the graph as
LangGraph's docs build it (model, ``tools_condition``, ``ToolNode``), and the same agent built with stopwise's
nodes (every decider present and passing: guardrails on each hook, the guardian, an accepting stop guard). What
LangGraph shows its caller (the thread's messages, interrupts, the exception raised) must be the same; stopwise's
log records the run.

Each test names the LangGraph behaviour it checks; its docstring names the API and the test in LangGraph's own
suite (``langchain-ai/langgraph`` ``libs/prebuilt/tests/``) that pins it there."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Annotated, Any

import pytest

pytest.importorskip("langgraph", reason="needs the 'langgraph' extra")

from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool, InjectedToolCallId, tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.errors import GraphRecursionError
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import InjectedState, ToolNode, tools_condition
from langgraph.types import Command, interrupt

from _passing_deciders import accepting_guard, passing_guardrails
from stopwise import MemoryStore
from stopwise.guardian import Guardian
from stopwise.guardrails import Block, Guardrails, Rewrite
from stopwise.integrations.langgraph import Stopwise, UnsupportedToolOutput
from stopwise.store.base import RunRecord, RunStatus

RAN: list[tuple[str, Any]] = []


@tool
def lookup(city: str) -> str:
    """Look a city's weather up."""
    RAN.append(("lookup", city))
    return f"sunny in {city}"


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    RAN.append(("add", (a, b)))
    return a + b


@tool
def forecast(city: str) -> dict[str, Any]:
    """A city's forecast as data."""
    RAN.append(("forecast", city))
    return {"city": city, "sky": "überwiegend sonnig", "celsius": 4}


@tool
def unreliable(city: str) -> str:
    """A weather service that is down."""
    RAN.append(("unreliable", city))
    raise ValueError("weather service down")


@tool
def ask_human(question: str) -> str:
    """Ask the user a question and wait for the answer."""
    answer = interrupt(question)
    RAN.append(("ask_human", answer))
    return f"the user said {answer}"


@tool
def count_messages(state: Annotated[dict[str, Any], InjectedState]) -> str:
    """How long the conversation is (reads the graph's state)."""
    RAN.append(("count_messages", len(state["messages"])))
    return f"{len(state['messages'])} messages so far"


TOOLS: list[BaseTool] = [lookup, add, forecast, unreliable, ask_human, count_messages]


def calls(*pairs: tuple[str, dict[str, Any]], turn: int = 0) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": n, "args": a, "id": f"t{turn}c{i}"} for i, (n, a) in enumerate(pairs)])


def _model_node(replies: Sequence[BaseMessage]) -> Callable[..., Any]:
    model = FakeMessagesListChatModel(responses=list(replies))

    async def call_model(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await model.ainvoke(state["messages"])]}

    return call_model


def plain_graph(replies: Sequence[BaseMessage], tools: Sequence[BaseTool] | ToolNode = TOOLS) -> Any:
    """The agent graph as LangGraph's docs build it."""
    graph = StateGraph(MessagesState)
    graph.add_node("model", _model_node(replies))
    graph.add_node("tools", tools if isinstance(tools, ToolNode) else ToolNode(list(tools)))
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", tools_condition)
    graph.add_edge("tools", "model")
    return graph.compile(checkpointer=InMemorySaver())


@tool
def remember(city: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> Command[Any]:
    """Remember the user's city (updates the graph's state)."""
    return Command(update={"messages": [ToolMessage(f"noted {city}", tool_call_id=tool_call_id)]})


RISKS = {name: "read_only" for name in [*(t.name for t in TOOLS), "remember", "teleport"]}
"""Every tool (and the one the model makes up) only reads: declared so, the guardian's risk gate lets the calls
through as the bare graph does."""


def passing(store: MemoryStore) -> Stopwise:
    guardrails = passing_guardrails()
    guard = accepting_guard()
    return Stopwise(stop_guard=guard, guardrails=guardrails, guardian=Guardian(), store=store, risks=RISKS)


def stopwise_graph(
    stopwise: Stopwise, replies: Sequence[BaseMessage], tools: Sequence[BaseTool] | ToolNode = TOOLS
) -> Any:
    """The same agent with stopwise's nodes, as docs/integrations/langgraph.md builds it."""
    graph = StateGraph(MessagesState)
    graph.add_node("input", stopwise.input_node(model="model"))
    graph.add_node("model", _model_node(replies))
    graph.add_node("finish", stopwise.finish_node(model="model", tools="tools"))
    graph.add_node("tools", stopwise.tool_node(tools, model="model"))
    graph.add_edge(START, "input")
    graph.add_edge("model", "finish")
    return graph.compile(checkpointer=InMemorySaver())


def thread(name: str = "t1", **config: Any) -> dict[str, Any]:
    return {"configurable": {"thread_id": name}, **config}


def shown(messages: Sequence[BaseMessage]) -> list[Any]:
    """The messages as the caller reads them (their ids are LangGraph's own random ones)."""
    rows: list[Any] = []
    for m in messages:
        calls = [(c["name"], c["args"], c["id"]) for c in getattr(m, "tool_calls", [])]
        extra = (m.name, m.status, m.tool_call_id) if isinstance(m, ToolMessage) else ()
        rows.append((type(m).__name__, m.content, calls, *extra))
    return rows


@dataclass
class Both:
    bare: list[Any] | BaseException
    wrapped: list[Any] | BaseException
    ran: list[tuple[str, Any]]
    store: MemoryStore

    async def run(self) -> RunRecord:
        (run,) = await self.store.list_runs("t1")
        return run


async def both(
    replies: Sequence[BaseMessage],
    tools: Callable[[], Sequence[BaseTool] | ToolNode] = lambda: TOOLS,
    **config: Any,
) -> Both:
    """One input on thread ``t1`` of each graph; what each showed its caller, and what the tools did."""
    outcomes: list[list[Any] | BaseException] = []
    logs: list[list[tuple[str, Any]]] = []
    store = MemoryStore()
    for app in (plain_graph(replies, tools()), stopwise_graph(passing(store), replies, tools())):
        RAN.clear()
        try:
            out = await app.ainvoke({"messages": [HumanMessage("go")]}, thread(**config))
        except Exception as exc:  # LangGraph's own exception is part of what the caller sees
            outcomes.append(exc)
        else:
            outcomes.append(shown(out["messages"]))
        logs.append(sorted(RAN, key=repr))  # a batch's calls run concurrently
    assert logs[0] == logs[1], "the tools ran differently"
    return Both(outcomes[0], outcomes[1], logs[0], store)


async def test_parallel_tool_calls_each_get_their_tool_message_in_the_calls_order() -> None:
    """LangGraph: ``ToolNode`` runs every call of the last ``AIMessage`` (concurrently) and answers each with a
    ``ToolMessage`` in the calls' order (``test_react_agent.py::test_react_agent_parallel_tool_calls``)."""
    replies = [calls(("lookup", {"city": "Oslo"}), ("add", {"a": 2, "b": 3})), AIMessage("done")]
    pair = await both(replies)
    assert pair.bare == pair.wrapped
    assert isinstance(pair.bare, list) and [row[1] for row in pair.bare[2:4]] == ["sunny in Oslo", "5"]
    assert (await pair.run()).status is RunStatus.COMPLETED


async def test_invalid_arguments_are_an_error_tool_message_the_model_reads() -> None:
    """LangGraph: a call whose arguments fail the tool's schema is answered with an error ``ToolMessage``
    (``status="error"``, "Error invoking tool ...") and the graph goes on
    (``test_tool_node.py::test_tool_node_error_handling_default_invocation``). Before, stopwise's tool node
    raised the ``ValidationError`` out of the graph."""
    pair = await both([calls(("add", {"a": "two"})), AIMessage("sorry")])
    assert pair.bare == pair.wrapped
    assert isinstance(pair.bare, list)
    _, content, _, name, status, _ = pair.bare[2]
    assert name == "add"
    assert status == "error" and content.startswith("Error invoking tool 'add'")


async def test_an_unknown_tool_is_an_error_tool_message_naming_the_tools() -> None:
    """LangGraph: a call to a tool the node does not have is answered "Error: x is not a valid tool, try one of
    [...]" with ``status="error"`` (``test_tool_node.py::test_tool_node_incorrect_tool_name``). Before, stopwise
    answered with its own JSON and a success status."""
    pair = await both([calls(("teleport", {"to": "Oslo"})), AIMessage("sorry")])
    assert pair.bare == pair.wrapped
    assert isinstance(pair.bare, list) and pair.bare[2][1].startswith("Error: teleport is not a valid tool")


async def test_a_non_ascii_structured_result_is_the_same_json_the_model_reads() -> None:
    """LangGraph: a tool's non-string result becomes JSON content, non-ASCII kept as is
    (``test_tool_node.py::test_tool_node_ensure_utf8``). Before, stopwise escaped it (``\\u00fc``)."""
    pair = await both([calls(("forecast", {"city": "Zürich"})), AIMessage("done")])
    assert pair.bare == pair.wrapped
    assert isinstance(pair.bare, list) and "überwiegend" in pair.bare[2][1]


async def test_a_tools_exception_propagates_out_of_the_graph_by_default() -> None:
    """LangGraph: by default ``ToolNode`` lets a tool's exception raise out of ``invoke``
    (``test_tool_node.py::test_tool_node_error_handling_default_exception``)."""
    pair = await both([calls(("unreliable", {"city": "Oslo"})), AIMessage("never")])
    assert isinstance(pair.bare, ValueError) and isinstance(pair.wrapped, ValueError)
    assert str(pair.bare) == str(pair.wrapped)


async def test_a_run_the_graph_raised_out_of_is_recorded_cancelled_at_the_threads_next_input() -> None:
    """No node sees the exception ``ainvoke`` raises; the thread's next input shows the run was left behind: it
    is recorded cancelled and the input starts a run of its own. Before, the next input went on under the dead
    run's id and the log held a run ``running`` for good."""
    store = MemoryStore()
    replies = [calls(("unreliable", {"city": "Oslo"})), AIMessage("it is sunny")]
    app = stopwise_graph(passing(store), replies)
    with pytest.raises(ValueError, match="weather service down"):
        await app.ainvoke({"messages": [HumanMessage("weather?")]}, thread())
    out = await app.ainvoke({"messages": [HumanMessage("weather, again?")]}, thread())
    assert out["messages"][-1].content == "it is sunny"
    first, second = await store.list_runs("t1")
    assert first.status is RunStatus.CANCELLED and second.status is RunStatus.COMPLETED
    assert first.run_id != second.run_id


async def test_handle_tool_errors_on_your_own_tool_node_turns_exceptions_into_error_messages() -> None:
    """LangGraph: ``ToolNode(tools, handle_tool_errors=True)`` answers a tool's exception with an error
    ``ToolMessage`` (``test_tool_node.py::test_tool_node_error_handling``). stopwise's ``tool_node`` takes your
    ``ToolNode`` and runs the calls with it, its settings included."""
    pair = await both(
        [calls(("unreliable", {"city": "Oslo"})), AIMessage("the service is down")],
        tools=lambda: ToolNode(TOOLS, handle_tool_errors=True),
    )
    assert pair.bare == pair.wrapped
    assert isinstance(pair.bare, list) and pair.bare[2][4] == "error" and "weather service down" in pair.bare[2][1]


async def test_an_interrupt_inside_a_tool_pauses_the_graph_and_the_resume_value_reaches_the_tool() -> None:
    """LangGraph: a tool calling ``interrupt()`` pauses the graph (``__interrupt__``) and
    ``Command(resume=...)`` re-runs the batch with the value (``test_react_agent.py::test_tool_node_node_interrupt``).
    stopwise's risk gate does not ask again on the re-run, and the run completes on record."""
    replies = [calls(("lookup", {"city": "Oslo"}), ("ask_human", {"question": "Which day?"})), AIMessage("done")]
    store = MemoryStore()
    results = []
    for app in (plain_graph(replies), stopwise_graph(passing(store), replies)):
        RAN.clear()
        paused = await app.ainvoke({"messages": [HumanMessage("go")]}, thread())
        assert [i.value for i in paused["__interrupt__"]] == ["Which day?"]
        out = await app.ainvoke(Command(resume="Friday"), thread())
        results.append((shown(out["messages"]), sorted(RAN, key=repr)))
    assert results[0] == results[1]
    assert ("ask_human", "Friday") in results[0][1]
    (run,) = await store.list_runs("t1")
    assert run.status is RunStatus.COMPLETED


async def test_an_injected_state_argument_is_filled_from_the_graphs_state() -> None:
    """LangGraph: a tool argument annotated ``InjectedState`` is filled with the graph's state, not by the model
    (``test_tool_node.py::test_tool_node_inject_state``). Before, stopwise invoked the tool with the model's
    arguments only and the call failed validation."""
    pair = await both([calls(("count_messages", {})), AIMessage("done")])
    assert pair.bare == pair.wrapped
    assert pair.ran == [("count_messages", 2)]


async def test_threads_keep_their_own_conversations_across_inputs() -> None:
    """LangGraph: with a checkpointer each ``thread_id`` keeps its own messages from input to input
    (``test_react_agent.py::test_no_prompt`` with a checkpointer, persistence docs). With stopwise each thread is
    a session and each input a run in it."""
    replies = [AIMessage("hello A"), AIMessage("hello B"), AIMessage("again A")]
    store = MemoryStore()
    states = []
    for app in (plain_graph(replies), stopwise_graph(passing(store), replies)):
        await app.ainvoke({"messages": [HumanMessage("hi from A")]}, thread("A"))
        await app.ainvoke({"messages": [HumanMessage("hi from B")]}, thread("B"))
        await app.ainvoke({"messages": [HumanMessage("A again")]}, thread("A"))
        a, b = [(await app.aget_state(thread(t))).values["messages"] for t in "AB"]
        states.append((shown(a), shown(b)))
    assert states[0] == states[1]
    assert [len(await store.list_runs(t)) for t in "AB"] == [2, 1]


async def test_each_tool_turn_takes_three_supersteps_of_the_recursion_limit_not_two() -> None:
    """Deliberate difference: LangGraph counts ``recursion_limit`` in supersteps
    (``libs/langgraph/tests``, ``GraphRecursionError``). The docs' graph needs two per tool turn (model, tools)
    and two more; stopwise's needs three per tool turn (model, finish, tools) and four more (its input node,
    the finish node after the answer). An agent that ran within a limit may need it raised by half: give
    ``recursion_limit`` 3 per expected tool turn + 4."""
    turns = 4
    replies = [*(calls(("lookup", {"city": f"city {i}"}), turn=i) for i in range(turns)), AIMessage("done")]

    async def least_limit(build: Callable[[], Any]) -> int:
        for limit in range(1, 40):
            try:
                await build().ainvoke({"messages": [HumanMessage("go")]}, thread(recursion_limit=limit))
            except GraphRecursionError:
                continue
            return limit
        raise AssertionError("never finished")

    assert await least_limit(lambda: plain_graph(replies)) == 2 * turns + 2
    assert await least_limit(lambda: stopwise_graph(passing(MemoryStore()), replies)) == 3 * turns + 4


async def test_a_tool_returning_a_command_is_refused_by_name() -> None:
    """Deliberate difference: ``ToolNode`` applies a tool's ``Command`` (a state update or a route,
    ``test_tool_node.py::test_tool_node_command``); stopwise's tool node routes the graph itself, after the
    guardian's turn check, so it refuses one with ``UnsupportedToolOutput`` rather than drop it."""
    replies = [calls(("remember", {"city": "Oslo"})), AIMessage("done")]
    plain = await plain_graph(replies, [remember]).ainvoke({"messages": [HumanMessage("go")]}, thread())
    assert plain["messages"][2].content == "noted Oslo"
    app = stopwise_graph(passing(MemoryStore()), replies, [remember])
    with pytest.raises(UnsupportedToolOutput, match="Command"):
        await app.ainvoke({"messages": [HumanMessage("go")]}, thread())


async def test_the_tool_result_guardrails_read_tool_node_results_as_the_loop_gives_them() -> None:
    """With the calls run by ``ToolNode``, a tool-result guardrail still reads what stopwise's loop gives it: a
    structured result as data (not ``ToolNode``'s JSON text), an error message as ``is_error`` with
    ``{"error": ...}``; its rewrite is what the model reads, rendered as ``ToolNode`` renders a result."""
    seen: list[tuple[Any, bool]] = []

    def redact(ctx: Any) -> Rewrite | None:
        seen.append((ctx.result, ctx.is_error))
        return Rewrite(result={**ctx.result, "celsius": None}) if not ctx.is_error else None

    stopwise = Stopwise(guardrails=Guardrails(on_tool_result=[redact]), risks=RISKS)
    replies = [calls(("forecast", {"city": "Zürich"}), ("add", {"a": "two"})), AIMessage("done")]
    out = await stopwise_graph(stopwise, replies).ainvoke({"messages": [HumanMessage("go")]}, thread())
    results = {m.name: m for m in out["messages"] if isinstance(m, ToolMessage)}
    assert sorted(seen, key=repr) == sorted(
        [
            ({"city": "Zürich", "sky": "überwiegend sonnig", "celsius": 4}, False),
            ({"error": results["add"].content}, True),
        ],
        key=repr,
    )
    assert results["forecast"].content == '{"city": "Zürich", "sky": "überwiegend sonnig", "celsius": null}'
    assert results["add"].status == "error"


async def test_streamed_values_and_messages_are_the_same_and_updates_name_stopwises_nodes_too() -> None:
    """LangGraph: ``astream(stream_mode=...)`` gives each state (``values``), each message with its node
    (``messages``), each node's update (``updates``) (``libs/langgraph/tests/test_pregel_async.py``, stream
    modes). ``values`` and ``messages`` are the same; ``updates`` also names stopwise's ``input`` and ``finish``
    nodes, by design (they are nodes of the graph)."""
    replies = [calls(("lookup", {"city": "Oslo"})), AIMessage("done")]
    seen: dict[str, list[Any]] = {}
    for name, app in (("plain", plain_graph(replies)), ("stopwise", stopwise_graph(passing(MemoryStore()), replies))):
        for mode in ("values", "messages", "updates"):
            chunks = []
            async for chunk in app.astream({"messages": [HumanMessage("go")]}, thread(name + mode), stream_mode=mode):
                if mode == "values":
                    chunks.append(shown(chunk["messages"]))
                elif mode == "messages":
                    chunks.append((shown([chunk[0]]), chunk[1]["langgraph_node"]))
                else:
                    chunks.append(list(chunk))
            seen[f"{name} {mode}"] = chunks
    assert seen["plain values"] == seen["stopwise values"]
    assert seen["plain messages"] == seen["stopwise messages"]
    assert seen["plain updates"] == [["model"], ["tools"], ["model"]]
    assert seen["stopwise updates"] == [["input"], ["model"], ["finish"], ["tools"], ["model"], ["finish"]]


MIXED = [calls(("lookup", {"city": "Oslo"}), ("ask_human", {"question": "Which day?"})), AIMessage("done")]
"""A batch whose first call stopwise holds back and whose second calls ``interrupt()`` inside the tool."""


async def _pause_and_resume(app: Any, *answers: Any) -> tuple[list[list[Any]], list[Any]]:
    """The input, then a resume with each answer: the interrupts' values at each pause, and the final messages."""
    waits = []
    out = await app.ainvoke({"messages": [HumanMessage("go")]}, thread())
    for answer in answers:
        waits.append([i.value for i in out["__interrupt__"]])
        out = await app.ainvoke(Command(resume=answer), thread())
    assert "__interrupt__" not in out
    return waits, shown(out["messages"])


async def test_a_blocked_call_beside_a_tool_that_interrupts_pauses_resumes_and_stays_blocked() -> None:
    """LangGraph: a tool's ``interrupt()`` pauses the batch and ``Command(resume=...)`` re-runs it
    (``test_react_agent.py::test_tool_node_node_interrupt``). A guardrail's block in the same batch does not change
    that: the graph pauses on the tool's question alone, the resume value reaches the tool, the blocked call never
    runs and its ``ToolMessage`` (in the calls' order) is the block, judged once though the node ran twice."""
    RAN.clear()
    seen: list[str] = []

    def no_lookups(ctx: Any) -> Block | None:
        seen.append(ctx.tool_call.id)
        return Block("no lookups today") if ctx.tool_call.name == "lookup" else None

    store = MemoryStore()
    guardrails = Guardrails(on_tool_call=[no_lookups])
    stopwise = Stopwise(
        stop_guard=accepting_guard(), guardrails=guardrails, guardian=Guardian(), store=store, risks=RISKS
    )
    waits, messages = await _pause_and_resume(stopwise_graph(stopwise, MIXED), "Friday")
    assert waits == [["Which day?"]]
    assert RAN == [("ask_human", "Friday")]
    assert [m[1] for m in messages[2:4]] == [
        '{"error": "Blocked by guardrail \'no_lookups\': no lookups today"}',
        "the user said Friday",
    ]
    assert [m[5] for m in messages[2:4]] == ["t0c0", "t0c1"]
    assert sorted(seen) == ["t0c0", "t0c1"]
    (run,) = await store.list_runs("t1")
    assert run.status is RunStatus.COMPLETED


@pytest.mark.parametrize("review", ["not now", True])
async def test_an_escalated_call_beside_a_tool_that_interrupts_is_answered_first_then_the_tool_asks(
    review: Any,
) -> None:
    """stopwise's escalation and a tool's own ``interrupt()`` in one batch: the graph pauses on the escalation
    first (nothing in the batch runs before it is answered), then on the tool's question, each resume value
    reaching the one that asked. A rejected call never runs and its ``ToolMessage`` is the rejection; an approved
    one is asked about once and then runs as in the bare graph: LangGraph re-runs the whole batch on the tool's
    resume, so a call that ran beside the interrupt runs again, with ``ToolNode`` alone too."""
    RAN.clear()
    _, bare = await _pause_and_resume(plain_graph(MIXED), "Friday")
    bare_ran = sorted(RAN, key=repr)
    RAN.clear()
    store = MemoryStore()
    risks = {**RISKS, "lookup": "irreversible"}  # so the risk gate asks a human about it
    guardrails = passing_guardrails()
    stopwise = Stopwise(
        stop_guard=accepting_guard(), guardrails=guardrails, guardian=Guardian(), store=store, risks=risks
    )
    waits, messages = await _pause_and_resume(stopwise_graph(stopwise, MIXED), review, "Friday")
    assert len(waits) == 2 and waits[0][0]["tool_call"]["id"] == "t0c0" and waits[1] == ["Which day?"]
    if review is True:
        assert sorted(RAN, key=repr) == bare_ran == [("ask_human", "Friday"), ("lookup", "Oslo"), ("lookup", "Oslo")]
        assert messages == bare
    else:
        assert RAN == [("ask_human", "Friday")]
        assert [m[1] for m in messages[2:4]] == [
            '{"error": "Rejected by the reviewer: not now"}',
            "the user said Friday",
        ]
    (run,) = await store.list_runs("t1")
    assert run.status is RunStatus.COMPLETED


async def test_without_an_input_node_a_run_the_graph_raised_out_of_carries_on_under_the_next_input() -> None:
    """Pins what docs/integrations/langgraph.md says: only ``input_node`` sees that an input is new, so without it
    the thread's next input after ``ainvoke`` raised goes on under the run left behind: one run on record, started
    by the first input (its goal, its steps counted from there), ended by the second input's answer. LangGraph
    itself is unchanged: the second input is answered."""
    store = MemoryStore()
    stopwise = passing(store)
    graph = StateGraph(MessagesState)
    graph.add_node("model", _model_node([calls(("unreliable", {"city": "Oslo"})), AIMessage("it is sunny")]))
    graph.add_node("finish", stopwise.finish_node(model="model", tools="tools"))
    graph.add_node("tools", stopwise.tool_node(TOOLS, model="model"))
    graph.add_edge(START, "model")
    graph.add_edge("model", "finish")
    app = graph.compile(checkpointer=InMemorySaver())
    with pytest.raises(ValueError, match="weather service down"):
        await app.ainvoke({"messages": [HumanMessage("weather?")]}, thread())
    (left,) = await store.list_runs("t1")
    assert left.status is RunStatus.RUNNING
    out = await app.ainvoke({"messages": [HumanMessage("weather, again?")]}, thread())
    assert out["messages"][-1].content == "it is sunny"
    (run,) = await store.list_runs("t1")
    assert run.run_id == left.run_id and run.status is RunStatus.COMPLETED and run.output == "it is sunny"
