"""Approvals never strand a session (issue 12, point 5): expired approvals end the run (``Runner.expire`` and the
store-wide sweep), pending calls can be decided a few at a time, and calls that need no approval can run while the
others wait (``Agent(run_unapproved_siblings=True)``). On SQLite on disk unless the rule is store-independent."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from _cli_fixtures import stopwise_cmd
from stopwise import (
    Agent,
    FunctionModel,
    Reply,
    RunContext,
    Runner,
    SQLiteStore,
    Store,
    ToolCall,
    decode_tool_result,
    tool,
)
from stopwise.approvals import ApprovalError, ApprovalRecord, Approve, Reject, Terminate
from stopwise.errors import RunLeased
from stopwise.models import ModelRequest
from stopwise.records import parse_records
from stopwise.store.base import Lease

EXECUTED: list[str] = []
T0 = 1_000.0
TTL = 3600


@tool(needs_approval=True, approval_ttl=TTL)
def transfer(to: str, amount: int) -> str:
    """Move money."""
    EXECUTED.append(f"transfer {to}")
    return f"sent {amount} to {to}"


@tool
def lookup(q: str) -> str:
    """Look something up."""
    EXECUTED.append(f"lookup {q}")
    return f"found {q}"


def _model(request: ModelRequest) -> Reply:
    """One batch: a lookup and two transfers; then an answer that quotes every result it read."""
    rows = [m for m in request.messages if m.role == "tool"]
    if not rows:
        return Reply(
            tool_calls=[
                ToolCall("lookup", {"q": "balance"}, id="c-look"),
                ToolCall("transfer", {"to": "ann", "amount": 5}, id="c-ann"),
                ToolCall("transfer", {"to": "bob", "amount": 7}, id="c-bob"),
            ]
        )
    return Reply("read: " + " | ".join(str(decode_tool_result(m)) for m in rows))


def _agent(**options: Any) -> Agent:
    return Agent("banker", "", FunctionModel(_model), tools=[lookup, transfer], **options)


@pytest.fixture(autouse=True)
def _clear() -> None:
    EXECUTED.clear()


@pytest.fixture
async def disk(tmp_path: Path) -> Any:
    store = SQLiteStore(tmp_path / "log.db")
    yield store
    await store.close()


def _answers(messages: Any) -> dict[str, str]:
    """Each call's result as the model reads it, by call id."""
    return {m.tool_call_id: str(decode_tool_result(m)) for m in messages if m.role == "tool"}


async def _records(store: Store, session: str) -> list[Any]:
    snapshot = await store.load_session(session)
    assert snapshot is not None
    return [r for e in snapshot.entries for r in parse_records(e.records)]


# --- expiry ---------------------------------------------------------------------------------------------------


async def test_expire_ends_a_run_past_its_approval_ttl_with_approval_expired_and_answers_every_call(
    disk: SQLiteStore,
) -> None:
    runner = Runner(disk, clock=lambda: T0)
    agent = _agent()
    await runner.run(agent, "pay", session_id="s")
    result = await runner.expire("s", now=T0 + TTL + 1)
    assert (result.status, result.completion_reason) == ("failed", "approval_expired")
    assert result.error is not None and result.error.code == "approval_expired" and result.error.retryable
    assert "c-ann" in result.error.message and "c-bob" in result.error.message
    assert EXECUTED == [], "nothing of the batch ran"
    answers = _answers(result.messages)
    assert set(answers) == {"c-look", "c-ann", "c-bob"}, "the transcript stays whole: every call has a result"
    assert "approval expired" in answers["c-ann"] and "approval expired" in answers["c-bob"]
    expired = [r for r in await _records(disk, "s") if isinstance(r, ApprovalRecord)]
    assert [(r.call_id, r.decision, r.decided_at) for r in expired] == [
        ("c-ann", "expired", T0 + TTL + 1),
        ("c-bob", "expired", T0 + TTL + 1),
    ]
    record = (await disk.list_runs("s"))[-1]
    assert (record.status, record.completion_reason, record.report.get("pending")) == (
        "failed",
        "approval_expired",
        None,
    )
    again = await runner.run(_agent(), "pay", session_id="s")
    assert again.run_id != result.run_id and again.status == "completed", "the session takes new runs"


async def test_expire_before_any_approval_expired_is_refused_and_writes_nothing(disk: SQLiteStore) -> None:
    runner = Runner(disk, clock=lambda: T0)
    await runner.run(_agent(), "pay", session_id="s")
    before = await disk.load_session("s")
    with pytest.raises(ApprovalError, match=r"no approval of run \w+ has expired"):
        await runner.expire("s", now=T0 + TTL)  # at the expiry, not past it
    after = await disk.load_session("s")
    assert before is not None and after is not None and after.entries == before.entries
    assert (await disk.list_runs("s"))[-1].status == "suspended"


def test_expired_judges_each_pending_call_at_the_time_it_is_given_and_a_call_without_ttl_never_expires() -> None:
    from stopwise.approvals import PendingApproval, expired

    soon = PendingApproval("a", "t", {}, "h", T0 + 10)
    never = PendingApproval("b", "t", {}, "h", None)
    assert expired([soon, never], T0 + 10) == ()
    assert expired([soon, never], T0 + 10.5) == (soon,)


def test_expire_sync_serves_scripts(tmp_path: Path) -> None:
    with Runner(SQLiteStore(tmp_path / "log.db"), clock=lambda: T0) as runner:
        runner.run_sync(_agent(), "pay", session_id="s")
        assert runner.expire_sync("s", now=T0 + TTL + 1).completion_reason == "approval_expired"
        assert runner.expire_all_sync(now=T0 + TTL + 1).expired == ()


async def test_expire_of_a_run_that_is_not_suspended_is_refused(disk: SQLiteStore) -> None:
    runner = Runner(disk)
    with pytest.raises(ApprovalError, match="has no run"):
        await runner.expire("nobody")


async def test_after_expiry_a_resume_is_refused_and_retry_lets_the_model_read_the_expired_results(
    disk: SQLiteStore,
) -> None:
    runner = Runner(disk, clock=lambda: T0)
    agent = _agent()
    await runner.run(agent, "pay", session_id="s")
    await runner.expire("s", now=T0 + TTL + 1)
    with pytest.raises(ApprovalError, match="not suspended"):
        await runner.resume(agent, "s", {"c-ann": Reject()})
    retried = await runner.retry(agent, "s")
    assert retried.status == "completed" and "approval expired" in retried.text


async def test_expire_all_ends_every_expired_run_and_leaves_live_approvals_alone(store: Store) -> None:
    now = [T0]
    runner = Runner(store, clock=lambda: now[0])
    await runner.run(_agent(), "pay", session_id="old")
    now[0] = T0 + 100
    await runner.run(_agent(), "pay", session_id="young")
    sweep = await runner.expire_all(now=T0 + TTL + 50)
    assert [r.session_id for r in sweep.expired] == ["old"] and sweep.skipped == ()
    assert [r.completion_reason for r in sweep.expired] == ["approval_expired"]
    assert (await store.list_runs("young"))[-1].status == "suspended", "its approvals have not expired"
    assert [r.session_id for r in await store.suspended_runs()] == ["young"]
    assert [r.completion_reason for r in await store.list_runs("old")] == ["approval_expired"]


async def test_expire_all_skips_a_run_a_concurrent_resume_has_claimed(disk: SQLiteStore) -> None:
    runner = Runner(disk, clock=lambda: T0)
    agent = _agent()
    await runner.run(agent, "pay", session_id="s")
    snapshot = await disk.load_session("s")
    assert snapshot is not None and snapshot.last_run is not None
    # A resume in another worker claims the run (the store's claim, as Runner.resume takes it).
    await disk.claim(snapshot.last_run, snapshot.next_seq - 1, Lease(snapshot.last_run.run_id, "w2", T0 + 300), T0)
    sweep = await runner.expire_all(now=T0 + TTL + 1)
    assert sweep.expired == () and len(sweep.skipped) == 1 and "w2" in sweep.skipped[0].why
    with pytest.raises(RunLeased):
        await runner.expire("s", now=T0 + TTL + 1)
    assert (await disk.list_runs("s"))[-1].status == "suspended", "the claimed run was not touched"


async def test_expire_all_on_a_store_without_suspended_runs_does_nothing(store: Store) -> None:
    runner = Runner(store)
    await runner.run(Agent("a", "", FunctionModel(lambda r: Reply("hi"))), "q", session_id="s")
    sweep = await runner.expire_all(now=T0 + 10 * TTL)
    assert sweep.expired == () and sweep.skipped == () and await store.suspended_runs() == []


# --- deciding in pieces ----------------------------------------------------------------------------------------


async def test_resume_with_decisions_for_some_calls_runs_those_and_stays_suspended_on_the_rest(
    disk: SQLiteStore,
) -> None:
    now = [T0]
    runner = Runner(disk, clock=lambda: now[0])
    agent = _agent()
    first = await runner.run(agent, "pay", session_id="s")
    expires = {p.call_id: p.expires_at for p in first.pending}
    now[0] = T0 + 60
    piece = await runner.resume(agent, "s", {"c-ann": Approve(reviewer="alice")})
    assert piece.status == "suspended" and [p.call_id for p in piece.pending] == ["c-bob"]
    assert piece.pending[0].expires_at == expires["c-bob"], "a call left pending keeps its expiry"
    assert EXECUTED == ["transfer ann"], "the approved call ran; the lookup waits with the batch (option off)"
    done = await runner.resume(agent, "s", {"c-bob": Reject("no", reviewer="bob")})
    assert done.status == "completed"
    assert EXECUTED == ["transfer ann", "lookup balance"], "nothing ran twice"
    answers = _answers(done.messages)
    assert answers == {
        "c-ann": "sent 5 to ann",
        "c-look": "found balance",
        "c-bob": "{'error': 'Rejected by the reviewer: no'}",
    }
    assert done.text.startswith("read: ") and done.steps == 2, "the settled step costs no step of its own"
    decided = [(r.call_id, r.decision, r.reviewer) for r in await _records(disk, "s") if isinstance(r, ApprovalRecord)]
    assert decided == [("c-ann", "approve", "alice"), ("c-bob", "reject", "bob")]


async def test_all_pending_calls_decided_at_once_still_settle_the_step_in_one_resume(disk: SQLiteStore) -> None:
    runner = Runner(disk)
    agent = _agent()
    await runner.run(agent, "pay", session_id="s")
    done = await runner.resume(agent, "s", {"c-ann": Approve(), "c-bob": Approve()})
    assert done.status == "completed" and sorted(EXECUTED) == ["lookup balance", "transfer ann", "transfer bob"]


async def test_a_second_resume_for_a_call_already_decided_is_refused_before_anything_runs(disk: SQLiteStore) -> None:
    runner = Runner(disk)
    agent = _agent()
    await runner.run(agent, "pay", session_id="s")
    await runner.resume(agent, "s", {"c-ann": Approve(reviewer="alice")})
    with pytest.raises(ApprovalError, match=r"c-ann was already decided \(approve by alice\)"):
        await runner.resume(agent, "s", {"c-ann": Approve(), "c-bob": Approve()})
    assert EXECUTED == ["transfer ann"]


async def test_a_restart_between_pieces_loses_nothing(tmp_path: Path) -> None:
    """The first piece is committed; a new process (a new store on the same file) decides the rest."""
    agent = _agent()
    async with SQLiteStore(tmp_path / "log.db") as store:
        runner = Runner(store)
        await runner.run(agent, "pay", session_id="s")
        await runner.resume(agent, "s", {"c-bob": Approve()})
    async with SQLiteStore(tmp_path / "log.db") as store:
        again = Runner(store)
        snapshot = await store.load_session("s")
        assert snapshot is not None and snapshot.last_run is not None
        assert [p["call_id"] for p in snapshot.last_run.report["pending"]] == ["c-ann"]
        done = await again.resume(agent, "s", {"c-ann": Approve()})
    assert done.status == "completed"
    assert EXECUTED == ["transfer bob", "lookup balance", "transfer ann"]
    assert set(_answers(done.messages)) == {"c-look", "c-ann", "c-bob"}


async def test_a_terminate_in_a_piece_ends_the_run_and_answers_the_calls_still_pending(disk: SQLiteStore) -> None:
    runner = Runner(disk)
    agent = _agent()
    await runner.run(agent, "pay", session_id="s")
    await runner.resume(agent, "s", {"c-ann": Approve()})
    done = await runner.resume(agent, "s", {"c-bob": Terminate("stop")})
    assert (done.status, done.completion_reason) == ("cancelled", "approval_terminated")
    answers = _answers(done.messages)
    assert answers["c-ann"] == "sent 5 to ann"
    assert "Terminated" in answers["c-bob"] and "Terminated" in answers["c-look"]


async def test_expiry_after_a_piece_keeps_its_results_and_answers_only_the_calls_left(disk: SQLiteStore) -> None:
    runner = Runner(disk, clock=lambda: T0)
    agent = _agent()
    await runner.run(agent, "pay", session_id="s")
    await runner.resume(agent, "s", {"c-ann": Approve()})
    result = await runner.expire("s", now=T0 + TTL + 1)
    assert result.completion_reason == "approval_expired"
    rows = [m for m in result.messages if m.role == "tool"]
    assert [m.tool_call_id for m in rows] == ["c-ann", "c-look", "c-bob"], "one result per call, none repeated"
    assert "expired" in str(decode_tool_result(rows[2])) and "expired" in str(decode_tool_result(rows[1]))


# --- siblings that need no approval ----------------------------------------------------------------------------


async def test_run_unapproved_siblings_runs_the_calls_needing_no_approval_while_the_others_wait(
    disk: SQLiteStore,
) -> None:
    """Peer: the Vercel AI SDK's tool approval (``needsApproval``) executes a step's tools that need no approval
    and holds the others for an approval response; stopwise does the same with ``run_unapproved_siblings``."""
    runner = Runner(disk)
    agent = _agent(run_unapproved_siblings=True)
    first = await runner.run(agent, "pay", session_id="s")
    assert first.status == "suspended" and [p.call_id for p in first.pending] == ["c-ann", "c-bob"]
    assert EXECUTED == ["lookup balance"], "the call needing no approval ran in the step"
    done = await runner.resume(agent, "s", {"c-ann": Approve(), "c-bob": Reject("no")})
    assert done.status == "completed"
    assert EXECUTED == ["lookup balance", "transfer ann"], "the lookup did not run again"
    rows = [m for m in done.messages if m.role == "tool"]
    assert [m.tool_call_id for m in rows] == ["c-look", "c-ann", "c-bob"]
    assert done.text == "read: found balance | sent 5 to ann | {'error': 'Rejected by the reviewer: no'}"


async def test_without_the_option_nothing_of_the_batch_runs_until_every_call_is_decided(disk: SQLiteStore) -> None:
    runner = Runner(disk)
    agent = _agent()
    first = await runner.run(agent, "pay", session_id="s")
    assert first.status == "suspended" and EXECUTED == []


async def test_a_crash_between_the_siblings_intent_and_the_suspension_runs_them_again_with_the_same_keys(
    tmp_path: Path,
) -> None:
    """The siblings' write-ahead intent is on record when the process dies: retry runs the same calls (same
    idempotency keys) and suspends on the calls that wait, never running those unapproved."""
    keys: list[str] = []

    class Died(BaseException):
        pass

    @tool(name="lookup")
    def dying_lookup(q: str, ctx: RunContext) -> str:
        """Look something up (the first attempt dies mid-call)."""
        keys.append(ctx.idempotency_key)
        if len(keys) == 1:
            raise Died
        return f"found {q}"

    agent = Agent("banker", "", FunctionModel(_model), tools=[dying_lookup, transfer], run_unapproved_siblings=True)
    async with SQLiteStore(tmp_path / "log.db") as store:
        with pytest.raises(Died):
            await Runner(store, lease_seconds=1, clock=lambda: T0).run(agent, "pay", session_id="s")
    async with SQLiteStore(tmp_path / "log.db") as store:
        runner = Runner(store, clock=lambda: T0 + 10)
        suspended = await runner.retry(agent, "s")
        assert suspended.status == "suspended" and [p.call_id for p in suspended.pending] == ["c-ann", "c-bob"]
        assert EXECUTED == [] and len(keys) == 2 and keys[0] == keys[1]
        done = await runner.resume(agent, "s", {"c-ann": Approve(), "c-bob": Approve()})
    assert done.status == "completed" and EXECUTED == ["transfer ann", "transfer bob"] and len(keys) == 2


# --- the command line ------------------------------------------------------------------------------------------


async def _suspend_two(path: Path) -> None:
    async with SQLiteStore(path) as store:
        now = [T0]
        runner = Runner(store, clock=lambda: now[0])
        await runner.run(_agent(), "pay", session_id="early")
        now[0] = T0 + 1000
        await runner.run(_agent(), "pay", session_id="late")


async def test_stopwise_expire_ends_one_session_or_sweeps_all_and_refuses_a_live_approval(tmp_path: Path) -> None:
    db = tmp_path / "log.db"
    await _suspend_two(db)
    live = stopwise_cmd("expire", "late", "--db", str(db), "--now", str(T0 + TTL + 1), cwd=tmp_path)
    assert live.returncode == 2 and "no approval of run" in live.stderr
    one = stopwise_cmd("expire", "early", "--db", str(db), "--now", str(T0 + TTL + 1), cwd=tmp_path)
    assert one.returncode == 0 and one.stdout.startswith("expired: early") and "c-ann" in one.stdout
    swept = stopwise_cmd("expire", "--all", "--db", str(db), "--now", str(T0 + 1000 + TTL + 1), cwd=tmp_path)
    assert swept.returncode == 0 and "expired: late" in swept.stdout and "1 expired, 0 skipped" in swept.stdout
    async with SQLiteStore(db) as store:
        assert [r.completion_reason for s in ("early", "late") for r in await store.list_runs(s)] == [
            "approval_expired",
            "approval_expired",
        ]
    both = stopwise_cmd("expire", "early", "--all", "--db", str(db), cwd=tmp_path)
    assert both.returncode == 2 and "not both" in both.stderr
