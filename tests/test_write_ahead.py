"""The write-ahead step (issue 12 point 3): a step's reply and planned tool calls commit as its intent before any
tool runs; its results commit after. A leg cut off in between is carried out from the intent, with the recorded
call ids, never by asking the model again. (The SIGKILL proof is in ``tests/test_crash.py``.)"""

from __future__ import annotations

from typing import Any

import pytest

from stopwise import (
    Agent,
    FunctionModel,
    Guardrails,
    Reply,
    RetryNotAllowed,
    Rewrite,
    RunContext,
    Runner,
    Store,
    ToolCall,
    tool,
)
from stopwise.guardrails import InputContext
from stopwise.models import ModelRequest
from stopwise.records import StepIntent, parse_records
from stopwise.store.base import EntryKind
from stopwise.tools import ToolUnavailable


def _minting_model(asked: list[ModelRequest]) -> FunctionModel:
    """Calls ``pay`` once, then answers; like a real provider it mints a new call id on every call."""

    def fn(request: ModelRequest) -> Reply:
        asked.append(request)
        if any(m.role == "tool" for m in request.messages):
            return Reply("paid")
        return Reply(tool_calls=[ToolCall("pay", {"amount": 5}, id=f"call_{len(asked)}")])

    return FunctionModel(fn)


async def test_a_step_commits_its_reply_and_planned_calls_before_any_tool_runs(store: Store) -> None:
    seen: dict[str, Any] = {}

    @tool
    async def pay(amount: int, ctx: RunContext) -> str:
        """Pay an amount."""
        snapshot = await store.load_session(ctx.session_id)
        assert snapshot is not None
        seen["last"] = snapshot.entries[-1]
        seen["history"] = [m.role for m in snapshot.messages()]
        seen["call_id"] = ctx.tool_call_id
        return f"paid {amount}"

    asked: list[ModelRequest] = []
    result = await Runner(store).run(Agent("payer", "", _minting_model(asked), tools=[pay]), "go", session_id="s")
    assert result.status == "completed" and result.steps == 2
    intent = seen["last"]
    assert intent.kind is EntryKind.INTENT and intent.step == 1
    (planned,) = next(r for r in parse_records(intent.records) if isinstance(r, StepIntent)).calls
    assert (planned.call_id, planned.tool, dict(planned.args or {})) == (seen["call_id"], "pay", {"amount": 5})
    assert intent.messages[0].tool_calls[0].id == seen["call_id"]
    # While its results are not committed, the intent's reply is not part of the history.
    assert seen["history"] == ["user"]
    snapshot = await store.load_session("s")
    assert snapshot is not None
    assert [e.kind for e in snapshot.entries] == [EntryKind.INPUT, EntryKind.INTENT, EntryKind.SETTLE, EntryKind.STEP]
    assert [m.role for m in snapshot.messages()] == ["user", "assistant", "tool", "assistant"]


async def test_a_reply_without_tool_calls_commits_no_intent(store: Store) -> None:
    result = await Runner(store).run(Agent("a", "", FunctionModel(lambda r: Reply("hi"))), "go", session_id="s")
    snapshot = await store.load_session("s")
    assert result.status == "completed" and snapshot is not None
    assert [e.kind for e in snapshot.entries] == [EntryKind.INPUT, EntryKind.STEP]


class _Ledger:
    """A payment service that dedupes on the idempotency key, down for its first call."""

    def __init__(self) -> None:
        self.attempts: list[str] = []
        self.paid: dict[str, int] = {}

    def tool(self) -> Any:
        @tool
        def pay(amount: int, ctx: RunContext) -> str:
            """Pay an amount, once per idempotency key."""
            self.attempts.append(ctx.idempotency_key)
            self.paid.setdefault(ctx.idempotency_key, amount)
            if len(self.attempts) == 1:
                raise ToolUnavailable("the payment service dropped the connection")
            return f"paid {amount}"

        return pay


async def test_retry_after_a_leg_cut_off_between_intent_and_results_runs_the_recorded_call_without_asking_again(
    store: Store,
) -> None:
    ledger, asked = _Ledger(), list[ModelRequest]()
    agent = Agent("payer", "", _minting_model(asked), tools=[ledger.tool()])
    runner = Runner(store)
    failed = await runner.run(agent, "go", session_id="s")
    assert failed.status == "failed" and failed.error is not None and failed.error.code == "tool_unavailable"
    assert len(asked) == 1

    done = await runner.retry(agent, "s")
    assert done.status == "completed" and done.output == "paid" and done.steps == 2
    assert len(asked) == 2, "the model was asked step 1 again"
    assert ledger.attempts == [f"{done.run_id}:1:call_1"] * 2 and ledger.paid == {f"{done.run_id}:1:call_1": 5}
    assert [(m.role, m.tool_call_id) for m in done.messages] == [
        ("user", None),
        ("assistant", None),
        ("tool", "call_1"),
        ("assistant", None),
    ]
    assert done.usage.requests == 2


async def test_a_new_run_after_a_failed_intent_sends_the_model_no_call_without_its_result(store: Store) -> None:
    ledger, requests = _Ledger(), list[ModelRequest]()
    agent = Agent("payer", "", _minting_model(requests), tools=[ledger.tool()])
    runner = Runner(store)
    assert (await runner.run(agent, "go", session_id="s")).status == "failed"
    await runner.run(agent, "start over", session_id="s")
    roles = [m.role for m in requests[1].messages if m.role != "system"]
    assert roles == ["user", "user"]


async def test_retry_with_a_message_while_an_intent_awaits_its_results_is_refused(store: Store) -> None:
    ledger, asked = _Ledger(), list[ModelRequest]()
    agent = Agent("payer", "", _minting_model(asked), tools=[ledger.tool()])
    runner = Runner(store)
    await runner.run(agent, "go", session_id="s")
    with pytest.raises(RetryNotAllowed, match="without a message"):
        await runner.retry(agent, "s", message="also pay 3")


async def test_an_input_rewrite_on_the_retry_leg_keeps_the_reply_right_before_its_results(store: Store) -> None:
    def keep(ctx: InputContext) -> Rewrite:
        return Rewrite(messages=list(ctx.messages))  # rewrites on every leg, the retry's included

    ledger, asked = _Ledger(), list[ModelRequest]()
    agent = Agent("payer", "", _minting_model(asked), tools=[ledger.tool()], guardrails=Guardrails(on_input=keep))
    runner = Runner(store)
    await runner.run(agent, "go", session_id="s")
    done = await runner.retry(agent, "s")
    assert done.status == "completed" and len(asked) == 2
    snapshot = await store.load_session("s")
    assert snapshot is not None
    # The retry carries out the recorded intent first (its results settle before the leg's input guardrails run),
    # so the reply and its results stay together whatever the rewrite does.
    kinds = [e.kind for e in snapshot.entries]
    assert kinds.index(EntryKind.SETTLE) == kinds.index(EntryKind.INTENT) + 1
    assert EntryKind.REWRITE in kinds[kinds.index(EntryKind.SETTLE) :]
    shape = [("user", None), ("assistant", None), ("tool", "call_1"), ("assistant", None)]
    assert [(m.role, m.tool_call_id) for m in snapshot.messages()] == shape
    assert [(m.role, m.tool_call_id) for m in asked[1].messages if m.role != "system"] == shape[:3]
    assert snapshot.messages()[1].tool_calls[0].id == "call_1"
