"""An OpenAI Agents SDK agent with stopwise's stop guard, guardrails and guardian attached.

The SDK's own offline ``ScriptedModel`` plays the model, so this runs with no API key (it needs the
``openai-agents`` extra). The decisions go to a SQLite file that ``stopwise replay`` reads:

    pip install 'stopwise[openai-agents]'
    python examples/openai_agents_agent.py
    stopwise replay openai_agents_runs.db
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from agents import Agent, function_tool, set_tracing_disabled
from agents.testing import ScriptedModel, assistant_message, function_call

from stopwise import SQLiteStore
from stopwise.guardian import Guardian
from stopwise.integrations.openai_agents import Stopwise
from stopwise.stop.guard import Continue, StopGuard

DB = Path("openai_agents_runs.db")


@function_tool
def read_invoice(number: str) -> str:
    """Read an invoice."""
    return f"{number}: 120 EUR to ACME"


@function_tool
def pay_invoice(number: str) -> str:
    """Pay an invoice."""
    return f"paid {number}"


def cites_a_source(ctx: Any) -> Continue | None:
    return None if "[source:" in ctx.reply.text else Continue("cite the tool you read the amount from")


async def main() -> int:
    set_tracing_disabled(True)
    model = ScriptedModel(
        [
            [function_call("read_invoice", {"number": "INV-7"}, call_id="read")],
            [function_call("pay_invoice", {"number": "INV-7"}, call_id="pay")],
            [assistant_message("INV-7 is paid.")],
            [assistant_message("INV-7 (120 EUR) is paid [source: read_invoice].")],
        ]
    )
    store = SQLiteStore(DB)
    stopwise = Stopwise(
        stop_guard=StopGuard(cites_a_source, max_continues=2),
        guardian=Guardian(),  # pay_invoice moves money: its risk gate asks for approval
        risks={"read_invoice": "read_only"},  # "invoice" is a money word: say that this tool only reads
        store=store,
    )
    # A typical SDK agent, attached; then run through stopwise instead of Runner.run.
    agent = stopwise.attach(Agent("payables", model=model, tools=[read_invoice, pay_invoice]))
    result = await stopwise.run(agent, "Pay invoice INV-7.", session_id="inv-7")
    state = result.to_state()
    for item in result.interruptions:
        print(f"waiting for approval: {item.tool_name}({item.raw_item.arguments})")  # type: ignore[union-attr]
        state.approve(item)
    done = await stopwise.run(agent, state, session_id="inv-7")
    print(f"answer after approval and the stop guard's nudge: {done.final_output}")
    await store.close()
    print(f"decisions recorded in {DB}: run `stopwise replay {DB}`")
    return 0


if __name__ == "__main__":
    DB.unlink(missing_ok=True)
    raise SystemExit(asyncio.run(main()))
