"""A hand-written LangGraph agent graph with stopwise's finish node and tool node.

langchain-core's offline ``FakeMessagesListChatModel`` plays the model, so this runs with no API key (it needs
the ``langgraph`` extra). The decisions go to a SQLite file that ``stopwise replay`` reads:

    pip install 'stopwise[langgraph]'
    python examples/langgraph_agent.py
    stopwise replay langgraph_runs.db
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.types import Command

from stopwise import SQLiteStore
from stopwise.guardian import Guardian
from stopwise.integrations.langgraph import Stopwise
from stopwise.stop.guard import Continue, StopGuard

DB = Path("langgraph_runs.db")


@tool
def read_invoice(number: str) -> str:
    """Read an invoice."""
    return f"{number}: 120 EUR to ACME"


@tool
def pay_invoice(number: str) -> str:
    """Pay an invoice."""
    return f"paid {number}"


def cites_a_source(ctx: Any) -> Continue | None:
    return None if "[source:" in ctx.reply.text else Continue("cite the tool you read the amount from")


async def main() -> int:
    model = FakeMessagesListChatModel(
        responses=[
            AIMessage("", tool_calls=[{"name": "read_invoice", "args": {"number": "INV-7"}, "id": "read"}]),
            AIMessage("", tool_calls=[{"name": "pay_invoice", "args": {"number": "INV-7"}, "id": "pay"}]),
            AIMessage("INV-7 is paid."),
            AIMessage("INV-7 (120 EUR) is paid [source: read_invoice]."),
        ]
    )

    async def call_model(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await model.ainvoke(state["messages"])]}

    store = SQLiteStore(DB)
    stopwise = Stopwise(
        stop_guard=StopGuard(cites_a_source, max_continues=2),
        guardian=Guardian(),  # pay_invoice moves money: its risk gate interrupts the graph for approval
        risks={"read_invoice": "read_only"},  # "invoice" is a money word: say that this tool only reads
        store=store,
    )
    graph = StateGraph(MessagesState)
    graph.add_node("input", stopwise.input_node(model="model"))
    graph.add_node("model", call_model)
    graph.add_node("finish", stopwise.finish_node(model="model", tools="tools"))
    graph.add_node("tools", stopwise.tool_node([read_invoice, pay_invoice], model="model"))  # routes itself
    graph.add_edge(START, "input")
    graph.add_edge("model", "finish")
    app = graph.compile(checkpointer=InMemorySaver())

    thread = {"configurable": {"thread_id": "inv-7"}}
    paused = await app.ainvoke({"messages": [("user", "Pay invoice INV-7.")]}, thread)
    for waiting in paused["__interrupt__"]:
        print(f"waiting for approval: {waiting.value['tool_call']['name']}: {waiting.value['reason']}")
    done = await app.ainvoke(Command(resume=True), thread)
    print(f"answer after approval and the stop guard's nudge: {done['messages'][-1].text}")
    await store.close()
    print(f"decisions recorded in {DB}: run `stopwise replay {DB}`")
    return 0


if __name__ == "__main__":
    DB.unlink(missing_ok=True)
    raise SystemExit(asyncio.run(main()))
