"""Human approval of tool calls: a pending call suspends the run durably; resume settles it."""

from __future__ import annotations

import asyncio
import multiprocessing
from pathlib import Path
from typing import Any

import pytest

from stopwise import (
    Agent,
    FunctionModel,
    Reply,
    RetryNotAllowed,
    Runner,
    ScriptedModel,
    SessionBusy,
    SQLiteStore,
    Store,
    ToolCall,
    decode_tool_result,
    tool,
)
from stopwise.approvals import ApprovalError, Approve, Modify, PendingApproval, Reject, Terminate, args_hash
from stopwise.guardrails import Guardrails, Rewrite
from stopwise.models import ModelRequest

EXECUTED: list[tuple[str, Any]] = []


@tool(needs_approval=True, approval_ttl=3600)
def transfer(to: str, amount: int) -> str:
    """Move money."""
    EXECUTED.append(("transfer", (to, amount)))
    return f"sent {amount} to {to}"


@tool(needs_approval=lambda args: args["amount"] > 100)
def refund(order: str, amount: int) -> str:
    """Refund an order; large refunds need a human."""
    EXECUTED.append(("refund", (order, amount)))
    return f"refunded {amount} on {order}"


@tool
def lookup(q: str) -> str:
    """Look something up."""
    EXECUTED.append(("lookup", q))
    return f"found {q}"


def _model(request: ModelRequest) -> Reply:
    """Asks for a lookup and a transfer together, then answers from what the tools said."""
    tool_rows = [m for m in request.messages if m.role == "tool"]
    if not tool_rows:
        return Reply(
            tool_calls=[
                ToolCall("lookup", {"q": "balance"}, id="c-lookup"),
                ToolCall("transfer", {"to": "bob", "amount": 50}, id="c-transfer"),
            ]
        )
    return Reply("Done: " + "; ".join(str(decode_tool_result(m)) for m in tool_rows))


AGENT = Agent("banker", "Move money carefully.", FunctionModel(_model), tools=[lookup, transfer, refund])


@pytest.fixture(autouse=True)
def _clear() -> None:
    EXECUTED.clear()


async def test_a_pending_call_suspends_the_run_and_nothing_in_the_batch_runs(store: Store) -> None:
    result = await Runner(store, clock=lambda: 1000.0).run(AGENT, "pay bob", session_id="s")
    assert result.status == "suspended" and result.completion_reason == "awaiting_approval"
    assert EXECUTED == []
    assert result.pending == (
        PendingApproval(
            "c-transfer", "transfer", {"to": "bob", "amount": 50}, args_hash({"to": "bob", "amount": 50}), 4600.0
        ),
    )
    record = await store.get_run(result.run_id)
    assert record is not None and record.status == "suspended"
    assert record.report["pending"][0]["call_id"] == "c-transfer"


async def test_approve_runs_the_batch_and_the_run_completes(store: Store) -> None:
    runner = Runner(store)
    suspended = await runner.run(AGENT, "pay bob", session_id="s")
    done = await runner.resume(AGENT, "s", {"c-transfer": Approve(args_hash=suspended.pending[0].args_hash)})
    assert done.status == "completed" and done.run_id == suspended.run_id
    assert sorted(EXECUTED) == [("lookup", "balance"), ("transfer", ("bob", 50))]
    assert done.output == "Done: found balance; sent 50 to bob"
    assert done.steps == 2


def test_resume_sync_settles_a_suspended_run_from_a_script(tmp_path: Path) -> None:
    with Runner(SQLiteStore(tmp_path / "log.db")) as runner:
        suspended = runner.run_sync(AGENT, "pay bob", session_id="s")
        done = runner.resume_sync(AGENT, "s", {"c-transfer": Approve()})
    assert suspended.status == "suspended"
    assert done.status == "completed" and done.output == "Done: found balance; sent 50 to bob"


async def test_resume_sync_inside_a_loop_raises_a_clear_error() -> None:
    with pytest.raises(RuntimeError, match=r"await runner\.resume"):
        Runner().resume_sync(AGENT, "s", {"c-transfer": Approve()})


async def test_reject_becomes_an_error_result_the_model_reads(store: Store) -> None:
    runner = Runner(store)
    await runner.run(AGENT, "pay bob", session_id="s")
    done = await runner.resume(AGENT, "s", {"c-transfer": Reject("Not today.")})
    assert EXECUTED == [("lookup", "balance")]
    row = next(m for m in done.messages if m.tool_call_id == "c-transfer")
    assert decode_tool_result(row) == {"error": "Rejected by the reviewer: Not today."}
    assert row.metadata["denied"] is True
    assert "Rejected by the reviewer" in done.output


async def test_modify_runs_the_call_with_the_reviewers_arguments(store: Store) -> None:
    runner = Runner(store)
    await runner.run(AGENT, "pay bob", session_id="s")
    done = await runner.resume(AGENT, "s", {"c-transfer": Modify({"to": "bob", "amount": 20})})
    assert ("transfer", ("bob", 20)) in EXECUTED
    assert done.messages[1].tool_calls[1].args == {"to": "bob", "amount": 50}  # the model's own request stays


async def test_terminate_ends_the_run_cancelled_and_answers_every_call(store: Store) -> None:
    runner = Runner(store)
    await runner.run(AGENT, "pay bob", session_id="s")
    done = await runner.resume(AGENT, "s", {"c-transfer": Terminate("fraud suspected")})
    assert done.status == "cancelled" and done.completion_reason == "approval_terminated"
    assert done.error is not None and done.error.code == "approval_terminated" and "fraud" in done.error.message
    assert EXECUTED == []
    rows = [m for m in done.messages if m.role == "tool"]
    assert len(rows) == 2 and all(m.metadata["denied"] for m in rows)
    # The session stays usable: every call has an answer, so a new run can start.
    again = await runner.run(Agent("banker", "", ScriptedModel(["hello"])), "hi", session_id="s")
    assert again.status == "completed"


@pytest.mark.parametrize(
    ("decisions", "fragment"),
    [
        ({"c-transfer": Approve(), "c-nope": Approve()}, "no pending call with id c-nope"),
        ({}, "no decision given; pending: c-transfer"),
        ({"c-transfer": Approve(args_hash="0" * 32)}, "arguments changed"),
        ({"c-transfer": "yes"}, "must be Approve, Reject, Modify or Terminate"),
    ],
)
async def test_bad_decisions_are_refused_with_a_clear_error(decisions: dict[str, Any], fragment: str) -> None:
    runner = Runner()
    await runner.run(AGENT, "pay bob", session_id="s")
    with pytest.raises(ApprovalError, match=fragment):
        await runner.resume(AGENT, "s", decisions)
    assert EXECUTED == []


async def test_an_expired_approval_is_refused() -> None:
    now = [1000.0]
    runner = Runner(clock=lambda: now[0])
    await runner.run(AGENT, "pay bob", session_id="s")
    now[0] += 3601
    with pytest.raises(ApprovalError, match="expired"):
        await runner.resume(AGENT, "s", {"c-transfer": Approve()})


@pytest.mark.parametrize(
    ("decision", "status"),
    [(Reject("too late"), "completed"), (Terminate("too late"), "cancelled")],
)
async def test_an_expired_approval_still_takes_reject_and_terminate_so_the_session_is_not_stranded(
    decision: Any, status: str
) -> None:
    now = [1000.0]
    runner = Runner(clock=lambda: now[0])
    await runner.run(AGENT, "pay bob", session_id="s")
    now[0] += 3601
    result = await runner.resume(AGENT, "s", {"c-transfer": decision})
    assert result.status == status
    assert [tool for tool, _ in EXECUTED if tool == "transfer"] == [], "the expired call never ran"
    again = await runner.run(AGENT, "pay bob", session_id="s")
    assert again.run_id != result.run_id, "the session takes new runs (no SessionBusy)"


async def test_resume_of_a_run_that_is_not_suspended_is_refused() -> None:
    runner = Runner()
    await runner.run(Agent("banker", "", ScriptedModel(["hi"])), "q", session_id="s")
    with pytest.raises(ApprovalError, match="not suspended"):
        await runner.resume(AGENT, "s", {})


async def test_a_suspended_session_refuses_run_and_retry_until_resumed() -> None:
    runner = Runner()
    await runner.run(AGENT, "pay bob", session_id="s")
    with pytest.raises(SessionBusy, match="resume"):
        await runner.run(AGENT, "again", session_id="s")
    with pytest.raises(RetryNotAllowed, match="resume"):
        await runner.retry(AGENT, "s")


async def test_a_predicate_of_the_arguments_decides_which_calls_need_approval() -> None:
    def model(request: ModelRequest) -> Reply:
        if not any(m.role == "tool" for m in request.messages):
            return Reply(tool_calls=[ToolCall("refund", {"order": "A", "amount": 30}, id="small")])
        if sum(1 for m in request.messages if m.role == "tool") == 1:
            return Reply(tool_calls=[ToolCall("refund", {"order": "B", "amount": 300}, id="large")])
        return Reply("refunds done")

    a = Agent("refunder", "", FunctionModel(model), tools=[refund])
    runner = Runner()
    suspended = await runner.run(a, "refund both", session_id="s")
    assert [p.call_id for p in suspended.pending] == ["large"] and EXECUTED == [("refund", ("A", 30))]
    done = await runner.resume(a, "s", {"large": Approve()})
    assert done.status == "completed" and EXECUTED[-1] == ("refund", ("B", 300))


async def test_a_tool_call_rewrite_reaches_the_approval_request() -> None:
    g = Guardrails(
        on_tool_call=lambda ctx: (
            Rewrite(args={**ctx.tool_call.args, "amount": 10}) if ctx.tool_call.name == "transfer" else None
        )
    )  # type: ignore[dict-item]
    a = Agent("banker", "", FunctionModel(_model), tools=[lookup, transfer], guardrails=g)
    runner = Runner()
    suspended = await runner.run(a, "pay", session_id="s")
    assert suspended.pending[0].args == {"to": "bob", "amount": 10}
    await runner.resume(a, "s", {"c-transfer": Approve()})
    assert ("transfer", ("bob", 10)) in EXECUTED


async def test_decisions_are_recorded_in_the_log(store: Store) -> None:
    runner = Runner(store, clock=lambda: 1500.0)
    await runner.run(AGENT, "pay bob", session_id="s")
    await runner.resume(AGENT, "s", {"c-transfer": Reject("no")})
    snapshot = await store.load_session("s")
    assert snapshot is not None
    decisions = [r for e in snapshot.entries for r in e.records if r.get("type") == "approval_decision"]
    assert decisions == [
        {
            "type": "approval_decision",
            "call_id": "c-transfer",
            "tool": "transfer",
            "decision": "reject",
            "reason": "no",
            "decided_at": 1500.0,
        }
    ]


async def test_resume_after_a_failed_resume_attempt_still_works(store: Store) -> None:
    runner = Runner(store)
    await runner.run(AGENT, "pay bob", session_id="s")
    with pytest.raises(ApprovalError):
        await runner.resume(AGENT, "s", {"c-transfer": Approve(args_hash="bad")})
    done = await runner.resume(AGENT, "s", {"c-transfer": Approve()})
    assert done.status == "completed"


def _suspend_in_child(db: str) -> None:
    async def main() -> None:
        store = SQLiteStore(db)
        result = await Runner(store).run(AGENT, "pay bob", session_id="across")
        assert result.status == "suspended"
        await store.close()

    asyncio.run(main())


async def test_a_fresh_runner_in_another_process_resumes_a_suspended_run(tmp_path: Path) -> None:
    db = tmp_path / "approvals.db"
    child = multiprocessing.get_context("forkserver").Process(target=_suspend_in_child, args=(str(db),))
    child.start()
    await asyncio.to_thread(child.join, 30)
    assert child.exitcode == 0
    store = SQLiteStore(db)
    try:
        done = await Runner(store).resume(AGENT, "across", {"c-transfer": Approve()})
        assert done.status == "completed" and done.output == "Done: found balance; sent 50 to bob"
        assert sorted(EXECUTED) == [("lookup", "balance"), ("transfer", ("bob", 50))]
    finally:
        await store.close()


async def test_cancelling_a_resume_before_its_step_settles_leaves_the_run_suspended(store: Store) -> None:
    entered, gate = asyncio.Event(), asyncio.Event()

    @tool(needs_approval=True)
    async def slow_transfer(to: str) -> str:
        """Move money slowly."""
        entered.set()
        await gate.wait()
        return f"sent to {to}"

    model = ScriptedModel([Reply(tool_calls=[ToolCall("slow_transfer", {"to": "bob"}, id="t1")]), "done"])
    a = Agent("slow", "", model, tools=[slow_transfer])
    runner = Runner(store)
    await runner.run(a, "pay", session_id="s")
    task = asyncio.create_task(runner.resume(a, "s", {"t1": Approve()}))
    await entered.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    record = (await store.list_runs("s"))[-1]
    assert record.status == "suspended" and record.report["pending"][0]["call_id"] == "t1"
    gate.set()
    done = await runner.resume(a, "s", {"t1": Approve()})
    assert done.status == "completed"


async def test_every_decision_records_who_made_it_and_when(store: Store) -> None:
    """Issue 12 point 5: a reviewer's decision names the reviewer (free text) and the time it was settled."""
    runner = Runner(store, clock=lambda: 2000.0)
    await runner.run(AGENT, "pay bob", session_id="s")
    done = await runner.resume(AGENT, "s", {"c-transfer": Approve(reviewer="ana@example.com")})
    assert done.status == "completed"
    snapshot = await store.load_session("s")
    assert snapshot is not None
    made = [r for e in snapshot.entries for r in e.records if r.get("type") == "approval_decision"]
    assert [(r["call_id"], r["decision"], r["reviewer"], r["decided_at"]) for r in made] == [
        ("c-transfer", "approve", "ana@example.com", 2000.0)
    ]


async def test_a_decision_without_a_reviewer_records_none_and_old_records_still_read() -> None:
    from stopwise.approvals import ApprovalRecord

    old = {"type": "approval_decision", "call_id": "c1", "tool": "transfer", "decision": "reject", "reason": "no"}
    record = ApprovalRecord.from_data(old)
    assert (record.reviewer, record.decided_at) == (None, None) and record.to_data() == old
    assert record.matches(Reject("no"))
