"""A pydantic-ai agent with stopwise's stop guard, guardrails and guardian attached as one capability.

pydantic-ai's own offline ``FunctionModel`` plays the model, so this runs with no API key (it needs the
``pydantic-ai`` extra). The decisions go to a SQLite file that ``stopwise replay`` reads:

    pip install 'stopwise[pydantic-ai]'
    python examples/pydantic_ai_agent.py
    stopwise replay pydantic_ai_runs.db
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from pydantic_ai import Agent, DeferredToolRequests, DeferredToolResults
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from stopwise import SQLiteStore
from stopwise.guardian import Guardian
from stopwise.guardrails import Block, Guardrails
from stopwise.integrations.pydantic_ai import StopwiseCapability
from stopwise.stop.guard import Continue, StopGuard

DB = Path("pydantic_ai_runs.db")


def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Reads the invoice, wants to pay it, answers; cites its source once the stop guard asks."""
    said = " ".join(str(getattr(p, "content", "")) for m in messages if isinstance(m, ModelRequest) for p in m.parts)
    turns = sum(1 for m in messages if isinstance(m, ModelResponse))
    if turns == 0:
        return ModelResponse(parts=[ToolCallPart("read_invoice", {"number": "INV-7"}, tool_call_id="read")])
    if turns == 1:
        return ModelResponse(parts=[ToolCallPart("pay_invoice", {"number": "INV-7"}, tool_call_id="pay")])
    if "cite" in said:
        return ModelResponse(parts=[TextPart("INV-7 (120 EUR) is paid [source: read_invoice].")])
    return ModelResponse(parts=[TextPart("INV-7 is paid.")])


def cites_a_source(ctx: Any) -> Continue | None:
    return None if "[source:" in ctx.reply.text else Continue("cite the tool you read the amount from")


def no_wire_transfers(ctx: Any) -> Block | None:
    return Block("wire transfers go through the treasury") if ctx.tool_call.name == "wire_money" else None


async def main() -> int:
    store = SQLiteStore(DB)
    stopwise = StopwiseCapability(
        stop_guard=StopGuard(cites_a_source, max_continues=2),
        guardrails=Guardrails(on_tool_call=[no_wire_transfers]),
        guardian=Guardian(),  # pay_invoice moves money: its risk gate escalates for approval
        risks={"read_invoice": "read_only"},  # "invoice" is a money word: say that this tool only reads
        store=store,
    )
    # A typical pydantic-ai agent; the only stopwise lines are the capability and DeferredToolRequests.
    agent: Agent[None, Any] = Agent(
        FunctionModel(model), output_type=[str, DeferredToolRequests], capabilities=[stopwise], retries=3
    )

    @agent.tool_plain
    def read_invoice(number: str) -> str:
        """Read an invoice."""
        return f"{number}: 120 EUR to ACME"

    @agent.tool_plain
    def pay_invoice(number: str) -> str:
        """Pay an invoice."""
        return f"paid {number}"

    result = await agent.run("Pay invoice INV-7.")
    assert isinstance(result.output, DeferredToolRequests)
    for call in result.output.approvals:
        print(f"waiting for approval: {call.tool_name}({call.args}): {result.output.metadata[call.tool_call_id]}")
    approved = DeferredToolResults(approvals={c.tool_call_id: True for c in result.output.approvals})
    done = await agent.run(message_history=result.all_messages(), deferred_tool_results=approved)
    print(f"answer after approval and the stop guard's nudge: {done.output}")
    await store.close()
    print(f"decisions recorded in {DB}: run `stopwise replay {DB}`")
    return 0


if __name__ == "__main__":
    DB.unlink(missing_ok=True)
    raise SystemExit(asyncio.run(main()))
