"""Seed 003, approvals and guardrails on a resume: an approval does not cost a step, the approved calls run and
settle before the resumed leg's input guardrails, and a tool-result guardrail that raises after its tool ran
still leaves the step's effect in the log."""

from __future__ import annotations

from typing import Any

from stopwise import Agent, Reply, Runner, ScriptedModel, Store, ToolCall, tool
from stopwise.approvals import Approve

ran: list[str] = []


@tool
def look(q: str) -> str:
    """Look something up."""
    return "seen"


@tool(needs_approval=True)
def pay(amount: int) -> str:
    """Pay someone."""
    ran.append(f"paid {amount}")
    return "paid"


def paying(**kw: Any) -> Agent:
    model = ScriptedModel(
        [
            Reply(tool_calls=[ToolCall("look", {"q": "a"}, id="l1")]),
            Reply(tool_calls=[ToolCall("pay", {"amount": 5}, id="p1")]),
            "done",
        ]
    )
    return Agent("a", "", model, tools=[look, pay], **kw)


async def test_an_approval_does_not_cost_a_step_of_max_steps(store: Store) -> None:
    agent = paying(max_steps=3)
    runner = Runner(store)
    suspended = await runner.run(agent, "pay", session_id="s")
    assert suspended.status == "suspended" and [p.call_id for p in suspended.pending] == ["p1"]
    done = await runner.resume(agent, "s", {"p1": Approve()})
    assert (done.status, done.completion_reason, done.output) == ("completed", "final_answer", "done")
    assert done.steps == 3
