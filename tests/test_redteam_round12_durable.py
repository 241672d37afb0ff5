"""Round 12 red team: exactly-once effects under crashes and races, attacked with real processes on SQLite.

Every crash is a real child process killed with SIGKILL from inside a tool, right after the tool's effect: the
state a production worker leaves when it dies between an effect and its commit. The effects go to a ledger file
that dedupes on ``ctx.idempotency_key`` (the tool author's half of the contract, ``docs/durability.md``), and
records every attempt, so a test reads what ran, with which key and which arguments.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import shutil
import signal
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from _pgcluster import HOW_TO_ENABLE
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
from stopwise.approvals import ApprovalError, Approve, Modify, Reject, Terminate
from stopwise.errors import ForkNotAllowed, RunLeased, StepConflict
from stopwise.models import ModelRequest
from stopwise.result import RunStatus
from stopwise.store.base import EntryKind, Lease

SESSION = "r12"
FIXTURES = {v: Path(__file__).parent / "fixtures" / f"log_v{v}.db" for v in (3, 5)}
LEASE = 60.0
_WAIT = 60.0
_ledger: dict[str, Any] = {"path": "", "die": False}


@pytest.fixture(autouse=True)
def _no_ledger() -> None:
    """Each test names its own ledger (a tool run without one fails on the empty path)."""
    _ledger.update(path="", die=False)


def _after_lease() -> float:
    return time.time() + 2 * LEASE


def _effect(ctx: RunContext, what: str) -> None:
    """The effect outside the log: every attempt is noted, the effect itself once per key; then the process
    dies when the test asked for it (after the effect, before anything of the step commits)."""
    path = Path(_ledger["path"])
    key = ctx.idempotency_key
    with path.open("a") as f:
        f.write(f"attempt {key} {what}\n")
    if not any(line.startswith(f"done {key} ") for line in path.read_text().splitlines()):
        with path.open("a") as f:
            f.write(f"done {key} {what}\n")
    if _ledger["die"]:
        os.kill(os.getpid(), signal.SIGKILL)


def _ledger_lines(path: Path, kind: str) -> list[str]:
    return [line.split(" ", 1)[1] for line in path.read_text().splitlines() if line.startswith(kind + " ")]


@tool(needs_approval=True)
def pay(amount: int, ctx: RunContext) -> str:
    """Pay an amount, once a person approved it."""
    _effect(ctx, f"pay {amount}")
    return f"paid {amount}"


def _paying(tool_name: str) -> FunctionModel:
    """Asks for one payment of 10 (call ``c1``), then answers with what the tool said."""

    def reply(request: ModelRequest) -> Reply:
        rows = [m for m in request.messages if m.role == "tool"]
        if rows:
            return Reply("answered: " + " | ".join(str(m.content) for m in rows))
        return Reply(tool_calls=[ToolCall(tool_name, {"amount": 10}, id="c1")])

    return FunctionModel(reply)


PAYER = Agent("payer", "Pay.", _paying("pay"), tools=[pay])


@tool(needs_approval=True, approval_ttl=600)
def pay_soon(amount: int, ctx: RunContext) -> str:
    """Pay an amount, once a person approved it within ten minutes."""
    _effect(ctx, f"pay {amount}")
    return f"paid {amount}"


TTL_PAYER = Agent("ttl-payer", "Pay soon.", _paying("pay_soon"), tools=[pay_soon])


@tool(needs_approval=True)
def transfer(to: str, amount: int, ctx: RunContext) -> str:
    """Move money (the tool of the agent that wrote the old logs in ``tests/fixtures``)."""
    _effect(ctx, f"transfer {amount} to {to}")
    return f"sent {amount} to {to}"


def _banker_reply(request: ModelRequest) -> Reply:
    rows = [str(decode_tool_result(m)) for m in request.messages if m.role == "tool"]
    if not rows:
        return Reply(tool_calls=[ToolCall("transfer", {"to": "bob", "amount": 50}, id="c-transfer")])
    return Reply("Done: " + "; ".join(rows))


BANKER = Agent("banker", "Move money carefully.", FunctionModel(_banker_reply), tools=[transfer])
AGENTS = {"payer": PAYER, "ttl-payer": TTL_PAYER, "banker": BANKER}


def _open(where: str) -> Store:
    """A store on a SQLite file (a path), or in a PostgreSQL schema (``"dsn schema"``)."""
    if " " not in where:
        return SQLiteStore(where)
    from stopwise.store.postgres import PostgresStore

    dsn, schema = where.rsplit(" ", 1)
    return PostgresStore(dsn, schema=schema, max_size=2)


def _die_resuming(where: str, ledger: str, decision: str, agent: str = "payer", session: str = SESSION) -> None:
    """A worker that resumes the suspended run with ``decision`` and dies inside the approved call, after its
    effect."""
    _ledger.update(path=ledger, die=True)
    decisions = {"approve": Approve(), "modify": Modify({"amount": 20})}
    call = {"payer": "c1", "ttl-payer": "c1", "banker": "c-transfer"}[agent]
    runner = Runner(_open(where), lease_seconds=LEASE)
    asyncio.run(runner.resume(AGENTS[agent], session, {call: decisions[decision]}))


def _in_child(target: Any, *args: Any) -> None:
    child = multiprocessing.get_context("forkserver").Process(target=target, args=args)
    child.start()
    child.join(_WAIT)
    assert child.exitcode == -signal.SIGKILL, f"the worker exited {child.exitcode}, not killed"


async def _suspend(where: str, agent: Agent = PAYER) -> None:
    store = _open(where)
    try:
        result = await Runner(store).run(agent, "pay", session_id=SESSION)
        assert result.status is RunStatus.SUSPENDED
    finally:
        await store.close()


@pytest.fixture(params=["sqlite", "postgres"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Where the workers' store is: a SQLite file on disk, or a fresh PostgreSQL schema."""
    if request.param == "sqlite":
        return str(tmp_path / "log.db")
    dsn = request.getfixturevalue("pg_dsn")
    if dsn is None:
        pytest.skip(HOW_TO_ENABLE)
    return f"{dsn} r12_{uuid.uuid4().hex[:12]}"


@pytest.mark.parametrize("first", ["approve", "modify"])
@pytest.mark.parametrize("then", ["reject", "terminate", "modify-other"])
async def test_a_call_approved_by_a_resume_that_died_after_its_effect_cannot_be_decided_otherwise_later(
    tmp_path: Path, where: str, first: str, then: str
) -> None:
    ledger = tmp_path / "ledger"
    ledger.touch()
    _ledger.update(path=str(ledger), die=False)
    await _suspend(where)
    _in_child(_die_resuming, where, str(ledger), first)
    assert len(_ledger_lines(ledger, "done")) == 1, "the approved call did its effect before the worker died"

    store = _open(where)
    runner = Runner(store, clock=_after_lease)
    other = {"reject": Reject("no"), "terminate": Terminate("stop"), "modify-other": Modify({"amount": 99})}[then]
    try:
        # The effect may have happened: a later decision that says it did not (or that runs other arguments
        # under the same key) would make the log lie about money that moved.
        with pytest.raises(ApprovalError, match="c1"):
            await runner.resume(PAYER, SESSION, {"c1": other})
        # Sending the same decision again carries the call out, with the same key and arguments: one effect.
        again = Approve() if first == "approve" else Modify({"amount": 20})
        result = await runner.resume(PAYER, SESSION, {"c1": again})
        assert result.status is RunStatus.COMPLETED
        amount = 10 if first == "approve" else 20
        attempts = _ledger_lines(ledger, "attempt")
        assert len(attempts) == 2 and len(set(attempts)) == 1, attempts
        assert attempts[0].endswith(f"pay {amount}")
        assert len(_ledger_lines(ledger, "done")) == 1
        assert result.output == f"answered: paid {amount}"
    finally:
        await store.close()


# --- idempotency keys and sub-agent sessions when a provider numbers its call ids from 0 in every reply ------------

_seen_keys: list[str] = []


@tool
def note_key(ctx: RunContext) -> str:
    """Record the key this call sees."""
    _seen_keys.append(ctx.idempotency_key)
    return "noted"


def _numbering_from_zero(request: ModelRequest) -> Reply:
    """Like servers that number the calls of each reply from 0: every reply's call id is ``call_0``. Two tool
    steps per user message, then an answer."""
    last_input = max(i for i, m in enumerate(request.messages) if m.role == "user")
    done = sum(1 for m in request.messages[last_input:] if m.role == "tool")
    if done >= 2:
        return Reply(f"noted {done}")
    return Reply(tool_calls=[ToolCall("note_key", {}, id="call_0")])


async def test_the_keys_a_tool_sees_are_distinct_across_steps_runs_retry_legs_and_forks(tmp_path: Path) -> None:
    _seen_keys.clear()
    agent = Agent("keys", "Note keys.", FunctionModel(_numbering_from_zero), tools=[note_key], max_steps=1)
    store = SQLiteStore(tmp_path / "log.db")
    runner = Runner(store)
    try:
        cut = await runner.run(agent, "go", session_id=SESSION)
        assert cut.status is RunStatus.FAILED  # max_steps=1: cut after its first tool step
        retried = await runner.retry(agent, SESSION)  # a fresh budget: the leg's steps count from 1 again
        assert retried.status is RunStatus.FAILED
        again = await runner.retry(agent, SESSION)
        assert again.status is RunStatus.COMPLETED
        await runner.run(agent, "more", session_id=SESSION)
        await runner.fork(agent, SESSION, at_step=1, new_session_id="forked")
        assert len(_seen_keys) == 4  # a step of the first leg, one of its retry, one of the next run, one of its fork
        assert len(set(_seen_keys)) == len(_seen_keys), _seen_keys
    finally:
        await store.close()


_child_effects: list[str] = []


@tool
def book(ctx: RunContext) -> str:
    """Book a room: an effect of the sub-agent."""
    _child_effects.append(ctx.session_id)
    return f"booking {len(_child_effects)}"


def _booker_reply(request: ModelRequest) -> Reply:
    rows = [m for m in request.messages if m.role == "tool"]
    return Reply(f"booked: {rows[-1].content}") if rows else Reply(tool_calls=[ToolCall("book", {}, id="call_0")])


def _parent_reply(request: ModelRequest) -> Reply:
    rows = [m for m in request.messages if m.role == "tool"]
    if rows and rows[-1].tool_call_id == request.messages[-1].tool_call_id and request.messages[-1].role == "tool":
        return Reply(f"parent: {rows[-1].content}")
    return Reply(tool_calls=[ToolCall("booker", {"input": "book a room"}, id="call_0")])


async def test_a_session_deleted_and_started_again_under_its_id_runs_its_sub_agent_afresh(store: Store) -> None:
    """A user's session id is reused after a deletion (a privacy request): the new session's sub-agent call, whose
    provider id repeats the deleted session's, must run the sub-agent, not hand back the deleted run's output."""
    _child_effects.clear()
    booker = Agent("booker", "Book.", FunctionModel(_booker_reply), tools=[book])
    parent = Agent("parent", "Delegate.", FunctionModel(_parent_reply), tools=[booker.as_tool()])
    runner = Runner(store)
    first = await runner.run(parent, "book", session_id="user-7")
    assert first.status is RunStatus.COMPLETED and "booking 1" in str(first.output)
    assert await store.load_session("user-7/call_0") is not None
    assert await store.delete_session("user-7")
    assert await store.load_session("user-7/call_0") is None, "the sub-agent's transcript outlived the deletion"
    second = await runner.run(parent, "book", session_id="user-7")
    assert second.status is RunStatus.COMPLETED
    assert len(_child_effects) == 2, "the sub-agent did not run for the new session"
    assert "booking 2" in str(second.output)


async def test_deleting_a_session_keeps_sessions_whose_ids_only_share_its_first_characters(store: Store) -> None:
    agent = Agent("plain", "Answer.", FunctionModel(lambda request: Reply("ok")))
    runner = Runner(store)
    for sid in ("user-7", "user-7/call_0", "user-7/call_0/call_1", "user-70", "user-7.x", "user-"):
        await runner.run(agent, "hi", session_id=sid)
    assert await store.delete_session("user-7")
    for gone in ("user-7", "user-7/call_0", "user-7/call_0/call_1"):
        assert await store.load_session(gone) is None
    for kept in ("user-70", "user-7.x", "user-"):
        assert await store.load_session(kept) is not None, kept


async def test_a_session_whose_sub_agent_run_holds_a_live_lease_is_not_deleted(store: Store) -> None:
    agent = Agent("plain", "Answer.", FunctionModel(lambda request: Reply("ok")))
    runner = Runner(store)
    await runner.run(agent, "hi", session_id="user-7")
    child = await runner.run(agent, "hi", session_id="user-7/call_0")
    record = await store.get_run(child.run_id)
    assert record is not None
    snapshot = await store.load_session("user-7/call_0")
    assert snapshot is not None
    # Another worker drives the sub-agent's run (a parent step's call in flight elsewhere).
    await store.claim(record, snapshot.next_seq - 1, Lease(child.run_id, "worker-b", time.time() + 600), time.time())
    with pytest.raises(RunLeased):
        await store.delete_session("user-7")
    assert await store.load_session("user-7") is not None
    assert await store.load_session("user-7/call_0") is not None


async def test_expiring_a_call_a_crashed_resume_approved_says_it_may_have_run_never_that_it_did_not(
    tmp_path: Path,
) -> None:
    db, ledger = str(tmp_path / "log.db"), tmp_path / "ledger"
    ledger.touch()
    _ledger.update(path=str(ledger), die=False)
    await _suspend(db, TTL_PAYER)
    _in_child(_die_resuming, db, str(ledger), "approve", "ttl-payer")
    assert len(_ledger_lines(ledger, "done")) == 1

    store = SQLiteStore(db)
    try:
        runner = Runner(store, clock=_after_lease)
        ended = await runner.expire(SESSION, now=time.time() + 3600)
        assert ended.status is RunStatus.FAILED and ended.completion_reason == "approval_expired"
        (row,) = [m for m in ended.messages if m.role == "tool"]
        assert "may have run" in str(row.content) and "Not run" not in str(row.content)
        snapshot = await store.load_session(SESSION)
        assert snapshot is not None
        expired = [r for e in snapshot.entries for r in e.records if r.get("decision") == "expired"]
        assert len(expired) == 1 and "may have run" in expired[0]["reason"]
    finally:
        await store.close()


@pytest.mark.parametrize("version", sorted(FIXTURES))
async def test_an_old_logs_suspended_call_approved_by_a_resume_that_died_is_carried_out_once(
    tmp_path: Path, version: int
) -> None:
    """A log an earlier version wrote (``tests/fixtures``) is opened and migrated by a worker that resumes its
    suspended transfer and dies after the effect; the next resume may not reject it, and approving it again
    completes the run with the transfer made once."""
    db, ledger = tmp_path / "old.db", tmp_path / "ledger"
    shutil.copyfile(FIXTURES[version], db)
    ledger.touch()
    _ledger.update(path=str(ledger), die=False)
    _in_child(_die_resuming, str(db), str(ledger), "approve", "banker", "suspended")
    store = SQLiteStore(db)
    try:
        runner = Runner(store, clock=_after_lease)
        with pytest.raises(ApprovalError, match="c-transfer"):
            await runner.resume(BANKER, "suspended", {"c-transfer": Reject("changed my mind")})
        result = await runner.resume(BANKER, "suspended", {"c-transfer": Approve()})
        assert result.status is RunStatus.COMPLETED and result.output == "Done: sent 50 to bob"
        attempts = _ledger_lines(ledger, "attempt")
        assert len(attempts) == 2 and len(set(attempts)) == 1
        assert len(_ledger_lines(ledger, "done")) == 1
    finally:
        await store.close()


async def test_a_reject_from_a_worker_that_took_over_a_resume_whose_approved_call_outlasted_its_lease_is_refused(
    store: Store,
) -> None:
    """Worker A resumes with an approval; its call outlasts A's lease. Worker B, seeing the lease lapsed, sends a
    Reject: refused (the call is running or ran); B's approval carries it out with the same key, and A's late
    results conflict. The step settles once, approved, and the effect happens once."""
    started, release = asyncio.Event(), asyncio.Event()
    keys: list[str] = []

    @tool(needs_approval=True)
    async def slow_pay(amount: int, ctx: RunContext) -> str:
        """Pay, slowly the first time."""
        if ctx.idempotency_key not in keys:
            keys.append(ctx.idempotency_key)  # the effect, once per key
        if not started.is_set():
            started.set()
            await release.wait()
        return f"paid {amount}"

    def reply(request: ModelRequest) -> Reply:
        rows = [m for m in request.messages if m.role == "tool"]
        return (
            Reply(f"answered: {rows[0].content}")
            if rows
            else Reply(tool_calls=[ToolCall("slow_pay", {"amount": 5}, id="c1")])
        )

    agent = Agent("slow", "Pay.", FunctionModel(reply), tools=[slow_pay])
    a = Runner(store, owner="worker-a", lease_seconds=LEASE)
    b = Runner(store, owner="worker-b", lease_seconds=LEASE, clock=_after_lease)
    assert (await a.run(agent, "go", session_id=SESSION)).status is RunStatus.SUSPENDED
    first = asyncio.create_task(a.resume(agent, SESSION, {"c1": Approve()}))
    await started.wait()
    with pytest.raises(ApprovalError, match="may have run"):
        await b.resume(agent, SESSION, {"c1": Reject("too late")})
    done = await b.resume(agent, SESSION, {"c1": Approve()})
    assert done.status is RunStatus.COMPLETED and done.output == "answered: paid 5"
    release.set()
    with pytest.raises(StepConflict):
        await first
    assert len(keys) == 1
    snapshot = await store.load_session(SESSION)
    assert snapshot is not None
    assert len([e for e in snapshot.entries if e.kind is EntryKind.SETTLE]) == 1


# --- SIGKILL at every SQL statement of a fork ------------------------------------------------------------------


@tool
def charge(amount: int, ctx: RunContext) -> str:
    """Charge an amount: an effect outside the log, once per key."""
    _effect(ctx, f"charge {amount}")
    return f"charged {amount}"


def _charge_reply(request: ModelRequest) -> Reply:
    asked = sum(1 for m in request.messages if m.role == "assistant")
    if asked >= 2:
        return Reply(f"charged {asked} times")
    return Reply(tool_calls=[ToolCall("charge", {"amount": 10 * (asked + 1)}, id=f"charge-{uuid.uuid4().hex[:8]}")])


CHARGER = Agent("charger", "Charge.", FunctionModel(_charge_reply), tools=[charge])
_statements = {"n": 0, "kill_at": 0}


def _count_statement(sql: str) -> None:
    _statements["n"] += 1
    if _statements["n"] == _statements["kill_at"]:
        os.kill(os.getpid(), signal.SIGKILL)


async def _fork_counting(db: str, kill_at: int) -> None:
    _statements.update(n=0, kill_at=kill_at)
    store = SQLiteStore(db)
    store._conn.set_trace_callback(_count_statement)
    try:
        forked = await Runner(store, lease_seconds=LEASE).fork(CHARGER, SESSION, at_step=1, new_session_id="f")
        assert forked.status is RunStatus.COMPLETED
    finally:
        store._conn.set_trace_callback(None)
        await store.close()


def _die_forking(db: str, ledger: str, kill_at: int) -> None:
    _ledger.update(path=ledger)
    asyncio.run(_fork_counting(db, kill_at))


async def _charged_source(db: Path) -> list[tuple[str, int, int]]:
    store = SQLiteStore(db)
    try:
        result = await Runner(store).run(CHARGER, "go", session_id=SESSION)
        assert result.status is RunStatus.COMPLETED
        snapshot = await store.load_session(SESSION)
        assert snapshot is not None
        return [(e.kind.value, e.seq, len(e.messages)) for e in snapshot.entries]
    finally:
        await store.close()


@pytest.mark.slow
def test_sigkill_at_every_statement_of_a_fork_leaves_the_source_whole_and_the_forks_effects_once_per_key(
    tmp_path: Path,
) -> None:
    ledger = tmp_path / "ledger"
    ledger.touch()
    _ledger.update(path=str(ledger))
    counted = tmp_path / "count.db"
    asyncio.run(_charged_source(counted))
    asyncio.run(_fork_counting(str(counted), 0))
    total = _statements["n"]
    assert total >= 10, f"only {total} statements"
    for kill_at in range(1, total + 1):
        db = tmp_path / f"kill-{kill_at}.db"
        ledger.write_text("")
        source = asyncio.run(_charged_source(db))
        _in_child(_die_forking, str(db), str(ledger), kill_at)
        asyncio.run(_recover_fork(db, source, kill_at))
        done = _ledger_lines(ledger, "done")
        keys = [line.split(" ", 1)[0] for line in done]
        assert len(keys) == len(set(keys)), f"kill point {kill_at}: a key's effect happened twice: {done}"
        # Two charges of the source run, and the fork's re-run of step 2 (under the fork's run, another key).
        assert len(done) == 3, f"kill point {kill_at}: {done}"


async def _recover_fork(db: Path, source: list[tuple[str, int, int]], kill_at: int) -> None:
    store = SQLiteStore(db)
    runner = Runner(store, clock=_after_lease)
    try:
        snapshot = await store.load_session(SESSION)
        assert snapshot is not None
        assert [(e.kind.value, e.seq, len(e.messages)) for e in snapshot.entries] == source, (
            f"kill point {kill_at}: the source session changed"
        )
        forked = await store.load_session("f")
        if forked is None or not any(r.get("type") == "fork" for e in forked.entries for r in e.records):
            if forked is not None:
                with pytest.raises(ForkNotAllowed, match="not completely written"):
                    await runner.retry(CHARGER, "f")
            result = await runner.fork(CHARGER, SESSION, at_step=1, new_session_id="f2")
        elif forked.last_run is not None and forked.last_run.status is RunStatus.COMPLETED:
            return  # killed after the fork's last commit (dropping its lease): nothing left to do
        else:
            result = await runner.retry(CHARGER, "f")
        assert result.status is RunStatus.COMPLETED, f"kill point {kill_at}: {result.error}"
    finally:
        await store.close()


async def test_a_call_a_crashed_resume_approved_in_time_is_carried_out_after_its_approval_ttl(tmp_path: Path) -> None:
    """The approval was given before the call's ``approval_ttl`` ran out and is on record: sending it again later
    finishes the call (once, same key); rejecting it is still refused."""
    db, ledger = str(tmp_path / "log.db"), tmp_path / "ledger"
    ledger.touch()
    _ledger.update(path=str(ledger), die=False)
    await _suspend(db, TTL_PAYER)
    _in_child(_die_resuming, db, str(ledger), "approve", "ttl-payer")
    store = SQLiteStore(db)
    try:
        runner = Runner(store, clock=lambda: time.time() + 3600)
        with pytest.raises(ApprovalError, match="may have run"):
            await runner.resume(TTL_PAYER, SESSION, {"c1": Reject("expired anyway")})
        result = await runner.resume(TTL_PAYER, SESSION, {"c1": Approve()})
        assert result.status is RunStatus.COMPLETED and result.output == "answered: paid 10"
        assert len(_ledger_lines(ledger, "done")) == 1 and len(set(_ledger_lines(ledger, "attempt"))) == 1
    finally:
        await store.close()
