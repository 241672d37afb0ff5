"""Seed 003, approvals and guardrails on a resume: an approval does not cost a step, the approved calls run and
settle before the resumed leg's input guardrails, and a tool-result guardrail that raises after its tool ran
still leaves the step's effect in the log; a blocked client-tool call is answered, never left pending."""

from __future__ import annotations

from typing import Any

from stopwise import Agent, Reply, Runner, ScriptedModel, Store, ToolCall, tool
from stopwise.approvals import Approve
from stopwise.guardrails import Block, Guardrails, InputContext, Rewrite, ToolCallContext, ToolResultContext

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


async def test_on_a_resume_the_approved_call_runs_and_settles_before_an_input_guardrail_can_end_the_run(
    store: Store,
) -> None:
    ran.clear()
    blocking = {"on": False}

    def tenant_check(ctx: InputContext) -> Block | None:
        return Block("tenant suspended", replacement="Sorry.") if blocking["on"] else None

    agent = paying(guardrails=Guardrails(on_input=tenant_check))
    runner = Runner(store)
    suspended = await runner.run(agent, "pay", session_id="s")
    assert suspended.status == "suspended" and ran == []
    blocking["on"] = True
    ended = await runner.resume(agent, "s", {"p1": Approve()})
    assert (ended.status, ended.completion_reason) == ("completed", "guardrail_input")
    assert ran == ["paid 5"]
    snapshot = await store.load_session("s")
    assert snapshot is not None
    rows = [m for e in snapshot.entries for m in e.messages]
    called = {c.id for m in rows for c in m.tool_calls}
    answered = {m.tool_call_id for m in rows if m.role == "tool"}
    assert called == answered == {"l1", "p1"}


async def test_a_tool_result_guardrail_that_raises_after_the_tool_ran_still_logs_the_step(store: Store) -> None:
    ran.clear()

    def broken(ctx: ToolResultContext) -> None:
        raise RuntimeError("scanner down")

    model = ScriptedModel([Reply(tool_calls=[ToolCall("charge", {"amount": 7}, id="c1")]), "done"])

    @tool
    def charge(amount: int) -> str:
        """Charge a card."""
        ran.append(f"charged {amount}")
        return "card 4111 charged"

    agent = Agent("a", "", model, tools=[charge], guardrails=Guardrails(on_tool_result=broken))
    result = await Runner(store).run(agent, "charge", session_id="s")
    assert result.status == "failed" and result.error is not None and "scanner down" in result.error.message
    assert ran == ["charged 7"]
    snapshot = await store.load_session("s")
    assert snapshot is not None
    # The reply committed as the step's intent before the tool ran; the results (withheld) committed after it.
    intent = next(e for e in snapshot.entries if e.kind == "intent")
    assert [c.id for c in intent.messages[0].tool_calls] == ["c1"]
    results = next(e for e in snapshot.entries if e.kind == "settle" and e.step == intent.step)
    tool_row = next(m for m in results.messages if m.tool_call_id == "c1")
    assert "withheld" in tool_row.content and "4111" not in tool_row.content
    receipts = [r for r in results.records if r.get("type") == "tool_receipt" and r["tool_call_id"] == "c1"]
    # Never checked, so never kept in clear (unless the guardrails opt in to clear receipts).
    assert len(receipts) == 1 and "raw" not in receipts[0]


async def test_calls_run_while_a_resume_settles_go_through_the_tool_result_guardrails(store: Store) -> None:
    ran.clear()
    seen: list[tuple[str, object]] = []

    def audit(ctx: ToolResultContext) -> Rewrite | None:
        seen.append((ctx.tool_call.name, ctx.result))
        return Rewrite(result="paid (amount hidden)") if ctx.tool_call.name == "pay" else None

    agent = paying(guardrails=Guardrails(on_tool_result=audit))
    runner = Runner(store)
    await runner.run(agent, "pay", session_id="s")
    done = await runner.resume(agent, "s", {"p1": Approve()})
    assert done.status == "completed" and ran == ["paid 5"]
    assert seen == [("look", "seen"), ("pay", "paid")]
    row = next(m for m in done.messages if m.role == "tool" and m.tool_call_id == "p1")
    assert row.content == "paid (amount hidden)"


async def test_a_blocked_client_tool_call_is_answered_in_the_same_turn_not_left_pending() -> None:
    @tool(client=True)
    def ask_user(question: str) -> str:
        """Ask the user."""
        raise AssertionError("a client tool runs on the caller's side")

    def no_questions(ctx: ToolCallContext) -> Block | None:
        return Block("no questions in batch mode") if ctx.tool_call.name == "ask_user" else None

    model = ScriptedModel([Reply(tool_calls=[ToolCall("ask_user", {"question": "city?"}, id="q1")]), "guessing"])
    agent = Agent("a", "", model, tools=[ask_user], guardrails=Guardrails(on_tool_call=no_questions))
    result = await Runner().run(agent, "plan a trip")
    assert (result.status, result.output, tuple(result.pending)) == ("completed", "guessing", ())
    row = next(m for m in result.messages if m.role == "tool")
    assert row.tool_call_id == "q1" and "Blocked by guardrail 'no_questions'" in row.content
