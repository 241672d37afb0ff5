"""Attacks on exactly-once effects, leases, crash recovery and stored logs (round 8's red team).

Each test is an attack someone could make on a real deployment: two workers on one run, a lease that lapses
mid-step, a log written by someone else. Real components: SQLite on disk, PostgreSQL when the test server is
there (the ``store`` fixture), real processes where a crash is the point. Interleavings are forced with events
and clocks passed to the runners, never by sleeping.
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import os
import shutil
import signal
import sqlite3
import threading
import time
import uuid
from collections.abc import Coroutine
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from _pgcluster import HOW_TO_ENABLE
from stopwise import (
    Agent,
    ApprovalError,
    Approve,
    FunctionModel,
    Reject,
    Reply,
    RetryNotAllowed,
    RunContext,
    Runner,
    SessionBusy,
    SQLiteStore,
    Store,
    ToolCall,
    tool,
)
from stopwise.errors import (
    ConfigError,
    RunLeased,
    StepConflict,
    StoreError,
    StoreUnavailable,
    UnreadableEntry,
    UnreadableRun,
    UnreadableSuspension,
)
from stopwise.guardrails import Guardrails
from stopwise.messages import Message
from stopwise.models import ModelRequest
from stopwise.result import RunStatus
from stopwise.store._schema import LATEST
from stopwise.store.base import EntryKind, Fence, Lease, LogEntry, RunRecord
from stopwise.store.walk import every_session
from stopwise.tools import ToolUnavailable

LEASE = 60.0


def _pay_once_model(request: ModelRequest) -> Reply:
    if any(m.role == "tool" for m in request.messages):
        return Reply("done")
    return Reply(tool_calls=[ToolCall("pay", {"to": "ana"}, id="call-1")])


def _payer(paid: list[str]) -> Agent:
    @tool(needs_approval=True)
    def pay(to: str, ctx: RunContext) -> str:
        """Pay someone, once a human approved it."""
        paid.append(ctx.idempotency_key)
        return f"paid {to}"

    return Agent("payer", "Pay ana.", FunctionModel(_pay_once_model), tools=[pay])


class _Clock:
    """A runner's clock, moved by the test."""

    def __init__(self, now: float = 1_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


async def _b_may_take_over(
    store: Store, agent: Agent, a_busy: asyncio.Event, **run: Any
) -> tuple[asyncio.Task[Any], Runner]:
    """Worker A starts a run of ``agent`` (session "s") and is busy once ``a_busy`` is set; worker B, whose clock is
    past A's lease, may then take the run over: A's run (a task) and B's runner."""
    a = Runner(store, clock=_Clock(), lease_seconds=LEASE, owner="a")
    clock_b = _Clock()
    b = Runner(store, clock=clock_b, lease_seconds=LEASE, owner="b")
    first = asyncio.create_task(a.run(agent, "go", session_id="s", **run))
    await asyncio.wait_for(a_busy.wait(), 30)
    clock_b.now += LEASE + 1  # A's lease has lapsed by B's clock
    return first, b


async def test_a_worker_whose_lease_was_taken_over_cannot_overwrite_the_new_holders_finished_run(
    store: Store,
) -> None:
    # Worker A's model call outlasts its lease; worker B takes the run over and completes it. When A's call
    # then fails, A's leg ends: its "failed" run record must not replace B's "completed" one (a completed run
    # read back as failed invites a retry of work that is done).
    a_asked, a_may_fail = asyncio.Event(), asyncio.Event()

    async def model(request: ModelRequest) -> Reply:
        if not a_asked.is_set():
            a_asked.set()
            await a_may_fail.wait()
            raise ConnectionError("the provider dropped A's call")
        return Reply("done by B")

    agent = Agent("slow", "Answer.", FunctionModel(model))
    first, b = await _b_may_take_over(store, agent, a_asked)
    taken = await b.retry(agent, "s")
    assert (taken.status, taken.output) == ("completed", "done by B")
    a_may_fail.set()
    with pytest.raises(StepConflict, match="moved on without"):
        await first
    record = await store.get_run(taken.run_id)
    assert record is not None
    assert (record.status, record.output) == (RunStatus.COMPLETED, "done by B")


async def test_a_worker_cancelled_after_its_run_was_taken_over_leaves_the_new_holders_record_alone(
    store: Store,
) -> None:
    a_asked, never = asyncio.Event(), asyncio.Event()

    async def model(request: ModelRequest) -> Reply:
        if not a_asked.is_set():
            a_asked.set()
            await never.wait()
        return Reply("done by B")

    agent = Agent("slow", "Answer.", FunctionModel(model))
    first, b = await _b_may_take_over(store, agent, a_asked)
    taken = await b.retry(agent, "s")
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first  # the cancellation reaches its caller as one, not as the refused write
    record = await store.get_run(taken.run_id)
    assert record is not None and record.status is RunStatus.COMPLETED


async def test_a_worker_whose_lease_lapsed_but_was_not_taken_over_still_records_how_its_leg_ended(
    store: Store,
) -> None:
    # The fence is on the owner, not on the expiry: a slow leg nobody took over is still the run's driver.
    def model(request: ModelRequest) -> Reply:
        clock.now += 10 * LEASE  # the call outlasts the lease
        raise ConnectionError("the provider failed")

    clock = _Clock()
    result = await Runner(store, clock=clock, lease_seconds=LEASE).run(
        Agent("slow", "Answer.", FunctionModel(model)), "go", session_id="s"
    )
    record = await store.get_run(result.run_id)
    assert result.status == "failed"
    assert record is not None and record.status is RunStatus.FAILED


async def test_a_taken_over_run_that_its_old_worker_finished_first_is_not_failed_by_the_new_one(store: Store) -> None:
    # The other order: B claims the run, A (whose lease lapsed) commits the run's last step before B commits
    # anything, then B's model call fails. B's leg ending must not turn A's committed completion into a failure.
    a_asked, a_may_answer = asyncio.Event(), asyncio.Event()
    b_asked, b_may_fail = asyncio.Event(), asyncio.Event()

    async def model(request: ModelRequest) -> Reply:
        if not a_asked.is_set():
            a_asked.set()
            await a_may_answer.wait()
            return Reply("done by A")
        b_asked.set()
        await b_may_fail.wait()
        raise ConnectionError("the provider dropped B's call")

    agent = Agent("slow", "Answer.", FunctionModel(model))
    first, b = await _b_may_take_over(store, agent, a_asked)
    second = asyncio.create_task(b.retry(agent, "s"))
    await b_asked.wait()
    a_may_answer.set()
    done = await first
    assert (done.status, done.output) == ("completed", "done by A")
    b_may_fail.set()
    with pytest.raises(StepConflict):
        await second
    record = await store.get_run(done.run_id)
    assert record is not None
    assert (record.status, record.output) == (RunStatus.COMPLETED, "done by A")


@pytest.mark.parametrize("bad", ["user\x00", "user\ud800"])
async def test_a_session_id_no_store_keeps_as_it_is_is_refused_before_anything_is_written(
    store: Store, bad: str
) -> None:
    # Stored under "user\ufffd", such a run could not be loaded by its own id, and would share its log with the
    # session of that name.
    agent = Agent("echo", "Answer.", FunctionModel(lambda r: Reply(f"{len(r.messages)} rows")))
    runner = Runner(store)
    neighbour = await runner.run(agent, "hi", session_id="user\ufffd")
    for call in (
        lambda: runner.run(agent, "hi", session_id=bad),
        lambda: runner.retry(agent, bad),
        lambda: runner.resume(agent, bad, {}),
        lambda: runner.expire(bad),
        lambda: runner.fork(agent, "user\ufffd", 1, new_session_id=bad),
    ):
        with pytest.raises(ConfigError, match="NUL or a lone surrogate"):
            await call()
    assert await store.list_sessions() == ["user\ufffd"]
    again = await runner.run(agent, "hi", session_id="user\ufffd")
    first = int(neighbour.output.split()[0])
    assert again.output == f"{first + 2} rows", "the neighbour's log holds its own run and nothing else"


@pytest.mark.parametrize("runners", ["one runner", "two runners"])
async def test_an_approve_and_a_reject_racing_for_one_call_settle_it_once_and_the_other_is_refused(
    store: Store, runners: str
) -> None:
    paid: list[str] = []
    agent = _payer(paid)
    first = Runner(store, owner="web-1")
    second = first if runners == "one runner" else Runner(store, owner="web-2")
    suspended = await first.run(agent, "go", session_id="s")
    assert suspended.status == "suspended"
    outcomes = await asyncio.gather(
        first.resume(agent, "s", {"call-1": Approve()}),
        second.resume(agent, "s", {"call-1": Reject("no")}),
        return_exceptions=True,
    )
    won = [o for o in outcomes if not isinstance(o, BaseException)]
    lost = [o for o in outcomes if isinstance(o, BaseException)]
    assert len(won) == 1 and len(lost) == 1, outcomes
    assert isinstance(lost[0], RunLeased | StepConflict | ApprovalError), repr(lost[0])
    approved = outcomes[0] is won[0]
    assert paid == ([f"{suspended.run_id}:1:call-1"] if approved else [])
    snapshot = await store.load_session("s")
    assert snapshot is not None and snapshot.last_run is not None
    settles = [e for e in snapshot.entries if e.kind is EntryKind.SETTLE and e.step == 1]
    assert len(settles) == 1, "the suspended step settles once"
    assert snapshot.last_run.status is RunStatus.COMPLETED
    tool_rows = [m for m in snapshot.messages() if m.role == "tool"]
    assert len(tool_rows) == 1
    assert tool_rows[0].content == "paid ana" if approved else "Rejected by the reviewer: no" in tool_rows[0].content


async def test_a_first_run_whose_input_guardrail_raises_is_on_record_as_failed_in_every_store(store: Store) -> None:
    # Its record used to be written alone for a session that did not exist yet: SQLite refused it (foreign key),
    # the caller got a StoreRefused instead of the failed result, and the memory store kept an orphan record.
    def broken(ctx: Any) -> None:
        raise RuntimeError("guardrail bug")

    agent = Agent("guarded", "Answer.", FunctionModel(lambda r: Reply("hi")), guardrails=Guardrails(on_input=broken))
    result = await Runner(store).run(agent, "go", session_id="s")
    assert result.status == "failed" and result.error is not None
    assert result.error.code == "guardrail_raised"
    snapshot = await store.load_session("s")
    assert snapshot is not None and snapshot.last_run is not None
    assert (snapshot.last_run.run_id, snapshot.last_run.status) == (result.run_id, RunStatus.FAILED)
    assert [r.run_id for r in await store.list_runs("s")] == [result.run_id]
    assert snapshot.entries == (), "the input the guardrail never passed is not logged"


async def test_a_run_deleted_by_retention_while_its_worker_waits_on_the_model_is_not_written_back(
    store: Store,
) -> None:
    # Retention took the session once the run's lease lapsed (by the sweep's clock); the worker, still alive,
    # then fails its step. Its ending must not re-create the run (an orphan record, or a foreign-key error).
    asked, may_fail = asyncio.Event(), asyncio.Event()

    async def model(request: ModelRequest) -> Reply:
        asked.set()
        await may_fail.wait()
        raise ConnectionError("the provider failed")

    agent = Agent("slow", "Answer.", FunctionModel(model))
    live = asyncio.create_task(Runner(store, lease_seconds=LEASE).run(agent, "go", session_id="s"))
    await asyncio.wait_for(asked.wait(), 30)
    gone = await store.expire_sessions(datetime.now(UTC) + timedelta(days=1), now=time.time() + 10 * LEASE)
    assert gone.sessions == 1
    may_fail.set()
    with pytest.raises(StepConflict):
        await live
    assert await store.list_sessions() == []
    assert await store.load_session("s") is None
    assert await store.list_runs("s") == []


async def test_a_first_run_cancelled_before_its_start_committed_raises_the_cancellation_and_writes_nothing(
    store: Store,
) -> None:
    checking = asyncio.Event()

    async def slow_check(ctx: Any) -> None:
        checking.set()
        await asyncio.Event().wait()  # until cancelled

    agent = Agent(
        "guarded", "Answer.", FunctionModel(lambda r: Reply("hi")), guardrails=Guardrails(on_input=slow_check)
    )
    task = asyncio.create_task(Runner(store).run(agent, "go", session_id="s"))
    await asyncio.wait_for(checking.wait(), 30)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await store.load_session("s") is None
    assert await store.list_sessions() == []


async def test_a_tool_call_outlasting_its_lease_is_carried_out_by_the_new_holder_with_the_same_key(
    store: Store,
) -> None:
    # A's step committed its intent, then its tool call outlasted the lease. B takes the run over and carries
    # the intent out: the same call, the same idempotency key, no new model call for that step. A's results then
    # conflict; the step settles once, with B's results.
    keys: list[str] = []
    a_in_tool, a_may_return = asyncio.Event(), asyncio.Event()
    asked: list[int] = []

    @tool
    async def pay(to: str, ctx: RunContext) -> str:
        """Pay someone."""
        keys.append(ctx.idempotency_key)
        if len(keys) == 1:
            a_in_tool.set()
            await a_may_return.wait()
        return f"paid {to}"

    def model(request: ModelRequest) -> Reply:
        asked.append(len(request.messages))
        return _pay_once_model(request)

    agent = Agent("payer", "Pay ana.", FunctionModel(model), tools=[pay])
    first, b = await _b_may_take_over(store, agent, a_in_tool)
    taken = await b.retry(agent, "s")
    assert (taken.status, taken.output) == ("completed", "done")
    a_may_return.set()
    with pytest.raises(StepConflict):
        await first
    assert keys == [f"{taken.run_id}:1:call-1"] * 2, "at least once, every time with the one key"
    assert len(asked) == 2, "the step's model call is not made again; the second call is the answer's"
    snapshot = await store.load_session("s")
    assert snapshot is not None and snapshot.last_run is not None
    assert [e.kind for e in snapshot.entries if e.step == 1] == [EntryKind.INTENT, EntryKind.SETTLE]
    assert [m.content for m in snapshot.messages() if m.role == "tool"] == ["paid ana"]
    assert snapshot.last_run.status is RunStatus.COMPLETED


def _flaky_model(fail: list[bool]) -> FunctionModel:
    """Pays once, then answers; fails the answer while ``fail[0]`` holds."""

    def model(request: ModelRequest) -> Reply:
        if any(m.role == "tool" for m in request.messages) and fail[0]:
            raise ConnectionError("the provider failed")
        return _pay_once_model(request)

    return FunctionModel(model)


@tool(name="pay")
def pay_now(to: str) -> str:
    """Pay someone."""
    return f"paid {to}"


async def test_a_log_holding_records_of_a_future_version_loads_and_its_run_continues(tmp_path: Path) -> None:
    fail = [True]
    agent = Agent("payer", "Pay ana.", _flaky_model(fail), tools=[pay_now])
    path = tmp_path / "log.db"
    async with SQLiteStore(path) as store:
        failed = await Runner(store).run(agent, "go", session_id="s")
    assert failed.status == "failed"
    with sqlite3.connect(path) as db:  # a newer stopwise wrote a record type this one does not know
        (seq, records) = db.execute("SELECT seq, records FROM log WHERE kind = 'settle'").fetchone()
        future = [*json.loads(records or "[]"), {"type": "from_the_future", "weight": 3}]
        db.execute("UPDATE log SET records = ? WHERE seq = ?", (json.dumps(future), seq))
    fail[0] = False
    async with SQLiteStore(path) as store:
        done = await Runner(store).retry(agent, "s")
        snapshot = await store.load_session("s")
    assert (done.status, done.output) == ("completed", "done")
    assert snapshot is not None
    kept = [r for e in snapshot.entries if e.seq == seq for r in e.records]
    assert {"type": "from_the_future", "weight": 3} in kept, "a record this version cannot read is kept as it was"


@pytest.mark.parametrize(
    ("column", "value"),
    [("kind", "from_the_future"), ("messages", '[{"role": "assistant", "content": "torn')],
    ids=["unknown kind", "torn entry"],
)
async def test_retry_of_a_session_whose_last_entry_this_version_cannot_read_is_refused_and_writes_nothing(
    tmp_path: Path, column: str, value: object
) -> None:
    fail = [True]
    agent = Agent("payer", "Pay ana.", _flaky_model(fail), tools=[pay_now])
    path = tmp_path / "log.db"
    async with SQLiteStore(path) as store:
        await Runner(store).run(agent, "go", session_id="s")
        await Runner(store).run(agent, "go", session_id="neighbour")
    with sqlite3.connect(path) as db:
        last = db.execute("SELECT MAX(seq) FROM log WHERE session_id = 's'").fetchone()[0]
        db.execute(f"UPDATE log SET {column} = ? WHERE session_id = 's' AND seq = ?", (value, last))
        before = db.execute("SELECT COUNT(*) FROM log").fetchone()[0]
    fail[0] = False
    async with SQLiteStore(path) as store:
        with pytest.raises(StoreError) as refused:
            await Runner(store).retry(agent, "s")
        assert refused.value.session_id == "s"
        assert (await Runner(store).retry(agent, "neighbour")).status == "completed"
    with sqlite3.connect(path) as db:
        after = db.execute("SELECT COUNT(*) FROM log WHERE session_id = 's'").fetchone()[0]
        assert db.execute("SELECT COUNT(*) FROM log").fetchone()[0] - before == 1  # the neighbour's answer
    assert after == last


@pytest.mark.parametrize("start", ["a new file", "a version 3 log"])
def test_processes_opening_one_database_at_once_migrate_it_once_and_all_open_it(tmp_path: Path, start: str) -> None:
    # Workers started together on one file each read its version, then migrate: each migration must run once
    # (before, every opener but the first failed with "table sessions already exists" or "duplicate column").
    # Threads stand for the processes: each opens its own connection, and SQLite runs them in parallel.
    path = tmp_path / "log.db"
    if start == "a version 3 log":
        shutil.copy(Path(__file__).parent / "fixtures" / "log_v3.db", path)
    openers = 8
    barrier = threading.Barrier(openers)
    failures: list[BaseException] = []
    versions: list[int] = []

    def open_it() -> None:
        barrier.wait(30)
        try:
            with SQLiteStore(path) as store:
                versions.append(store.schema_version)
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=open_it) for _ in range(openers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert failures == []
    assert versions == [LATEST] * openers


async def test_a_worker_whose_session_was_deleted_and_started_again_cannot_append_to_the_new_sessions_log(
    store: Store,
) -> None:
    # Retention deleted the session of A's run (its lease lapsed by the sweep's clock) and a new run B started in
    # a session of the same id. A's step then lands at the position B's log is at: it must not go into B's log.
    asked: dict[str, asyncio.Event] = {"a": asyncio.Event(), "b": asyncio.Event()}
    may_answer: dict[str, asyncio.Event] = {"a": asyncio.Event(), "b": asyncio.Event()}

    async def model(request: ModelRequest) -> Reply:
        who = str(request.messages[-1].content)
        asked[who].set()
        await may_answer[who].wait()
        return Reply(f"answer of {who}")

    agent = Agent("slow", "Answer.", FunctionModel(model))
    a = asyncio.create_task(Runner(store, lease_seconds=LEASE, owner="a").run(agent, "a", session_id="s"))
    await asyncio.wait_for(asked["a"].wait(), 30)
    gone = await store.expire_sessions(datetime.now(UTC) + timedelta(days=1), now=time.time() + 10 * LEASE)
    assert gone.sessions == 1
    b = asyncio.create_task(Runner(store, lease_seconds=LEASE, owner="b").run(agent, "b", session_id="s"))
    await asyncio.wait_for(asked["b"].wait(), 30)
    may_answer["a"].set()
    with pytest.raises(StepConflict):
        await a
    may_answer["b"].set()
    done = await b
    assert (done.status, done.output) == ("completed", "answer of b")
    snapshot = await store.load_session("s")
    assert snapshot is not None and snapshot.last_run is not None
    assert {e.run_id for e in snapshot.entries} == {done.run_id}
    assert [r.run_id for r in await store.list_runs("s")] == [done.run_id]


# --- a sub-agent's run outlives its crashed parent's lease ------------------------------------------------------

_held: dict[str, Any] = {}
"""Set in the process that is killed: where its child's model reports in and waits to be killed."""


def _sub_model(request: ModelRequest) -> Reply:
    if any(m.role == "tool" for m in request.messages):
        return Reply("paid")
    if _held:  # the doomed process: report, then wait inside the child's model call until SIGKILL
        _held["queue"].put("child asked")
        os.close(os.open(_held["fifo"], os.O_RDONLY))
    return Reply(tool_calls=[ToolCall("pay", {"to": "ana"}, id="pay-1")])


def _parent_model(request: ModelRequest) -> Reply:
    if any(m.role == "tool" for m in request.messages):
        return Reply("the helper is done")
    if _held:
        _held["clock"][0] += 30.0  # the parent's model call takes 30 s by the doomed process's clock
    return Reply(tool_calls=[ToolCall("helper", {"input": "pay ana"}, id="call-1")])


def _sub_agents(effects: str) -> Agent:
    @tool
    def pay(to: str, ctx: RunContext) -> str:
        """Pay someone."""
        with open(effects, "a") as f:
            f.write(f"{ctx.idempotency_key}\n")
        return f"paid {to}"

    helper = Agent("helper", "Pay.", FunctionModel(_sub_model), tools=[pay])
    return Agent("parent", "Delegate.", FunctionModel(_parent_model), tools=[helper.as_tool("helper")])


def _doomed_parent(path: str, effects: str, fifo: str, queue: Any) -> None:
    clock = [0.0]
    _held.update(fifo=fifo, queue=queue, clock=clock)

    async def go() -> None:
        async with SQLiteStore(path) as store:
            runner = Runner(store, clock=lambda: time.time() + clock[0], lease_seconds=LEASE, owner="doomed")
            await runner.run(_sub_agents(effects), "go", session_id="p")

    asyncio.run(go())


@pytest.mark.slow
def test_a_parent_retried_while_its_crashed_sub_agents_lease_is_live_fails_retryably_without_settling_the_call(
    tmp_path: Path,
) -> None:
    # The parent's lease lapsed (its model call took 30 s before the sub-agent started), the sub-agent's has not.
    # A retry in between must not commit the sub-agent call as failed: the model would ask again under a new call
    # id, and a new sub-agent run would repeat the first one's effects. It fails retryably, the call still open;
    # once the sub-agent's lease lapsed too, a retry continues that same sub-agent run.
    path, effects, fifo = str(tmp_path / "log.db"), str(tmp_path / "effects"), str(tmp_path / "gate")
    Path(effects).touch()
    os.mkfifo(fifo)
    ctx = multiprocessing.get_context("forkserver")
    queue = ctx.Queue()
    doomed = ctx.Process(target=_doomed_parent, args=(path, effects, fifo, queue))
    doomed.start()
    try:
        assert queue.get(timeout=60) == "child asked"
    finally:
        os.kill(doomed.pid, signal.SIGKILL)
        doomed.join(60)
    agent = _sub_agents(effects)

    async def retry(after: float) -> tuple[Any, Store]:
        store = SQLiteStore(path)
        result = await Runner(store, clock=lambda: time.time() + after, lease_seconds=LEASE).retry(agent, "p")
        return result, store

    async def go() -> None:
        early, store = await retry(LEASE + 1)  # the parent's lease lapsed, the sub-agent's is live
        assert early.status == "failed" and early.error is not None
        assert (early.error.code, early.error.retryable) == ("tool_unavailable", True)
        snapshot = await store.load_session("p")
        assert snapshot is not None and snapshot.entries[-1].kind is EntryKind.INTENT, "the call is still open"
        await store.close()
        done, store = await retry(LEASE + 60)
        assert (done.status, done.output) == ("completed", "the helper is done")
        child = await store.load_session("p/call-1")
        assert child is not None and len(await store.list_runs("p/call-1")) == 1, "the same sub-agent run"
        await store.close()

    asyncio.run(go())
    assert len(Path(effects).read_text().splitlines()) == 1


async def test_two_runs_started_at_once_on_one_session_log_one_and_the_other_conflicts(store: Store) -> None:
    paid: list[str] = []

    @tool
    def pay(to: str, ctx: RunContext) -> str:
        """Pay someone."""
        paid.append(ctx.run_id)
        return f"paid {to}"

    agent = Agent("payer", "Pay ana.", FunctionModel(_pay_once_model), tools=[pay])
    outcomes = await asyncio.gather(
        Runner(store, owner="web-1").run(agent, "go", session_id="s"),
        Runner(store, owner="web-2").run(agent, "go", session_id="s"),
        return_exceptions=True,
    )
    won = [o for o in outcomes if not isinstance(o, BaseException)]
    assert len(won) == 1 and any(isinstance(o, StepConflict | SessionBusy) for o in outcomes), outcomes
    assert paid == [won[0].run_id]
    snapshot = await store.load_session("s")
    assert snapshot is not None
    assert {e.run_id for e in snapshot.entries} == {won[0].run_id}
    assert [r.run_id for r in await store.list_runs("s")] == [won[0].run_id]


@pytest.mark.parametrize("size", [4_000_000])
async def test_a_very_large_tool_result_commits_and_reads_back_verbatim(store: Store, size: int) -> None:
    big = ("ünïcødé 🧾 line\n" * (size // 16))[:size]

    @tool
    def dump() -> str:
        """Return a large document."""
        return big

    def model(request: ModelRequest) -> Reply:
        if any(m.role == "tool" for m in request.messages):
            return Reply("read it")
        return Reply(tool_calls=[ToolCall("dump", {}, id="call-1")])

    result = await Runner(store).run(Agent("reader", "Read.", FunctionModel(model), tools=[dump]), "go", session_id="s")
    assert result.status == "completed"
    snapshot = await store.load_session("s")
    assert snapshot is not None
    assert [m.content for m in snapshot.messages() if m.role == "tool"] == [big]


async def test_a_store_closed_under_a_running_tool_fails_the_commit_typed_and_retry_finishes_with_the_same_key(
    tmp_path: Path,
) -> None:
    keys: list[str] = []
    store = SQLiteStore(tmp_path / "log.db")

    @tool
    async def pay(to: str, ctx: RunContext) -> str:
        """Pay someone."""
        keys.append(ctx.idempotency_key)
        if len(keys) == 1:
            await store.close()  # the application shuts its store down while the call is out
        return f"paid {to}"

    agent = Agent("payer", "Pay ana.", FunctionModel(_pay_once_model), tools=[pay])
    with pytest.raises(StoreUnavailable) as closed:
        await Runner(store, lease_seconds=LEASE).run(agent, "go", session_id="s")
    assert closed.value.operation == "commit"
    async with SQLiteStore(tmp_path / "log.db") as again:
        done = await Runner(again, clock=lambda: time.time() + LEASE + 1, lease_seconds=LEASE).retry(agent, "s")
    assert (done.status, done.output) == ("completed", "done")
    assert keys == [f"{done.run_id}:1:call-1"] * 2


@pytest.mark.parametrize("owner", ["w\x00", "w\ud800", "", 7])
def test_a_lease_owner_no_store_keeps_as_it_is_is_refused_when_the_runner_is_made(owner: Any) -> None:
    # Before, PostgreSQL refused the first run's start (NUL), raised a raw UnicodeEncodeError (a lone surrogate),
    # or, for a number, started the run and then failed to drop its lease.
    with pytest.raises(ConfigError, match="owner"):
        Runner(owner=owner)


@pytest.mark.parametrize("open_step", ["an intent cut off", "a suspended approval"])
async def test_a_recorded_call_whose_tool_the_agent_no_longer_has_is_answered_not_run(
    store: Store, open_step: str
) -> None:
    # The agent's code changed between the crash (or the suspension) and the retry (or the resume): the recorded
    # call cannot run as planned. Before, the loop stopped on a bare AssertionError.
    @tool(needs_approval=open_step == "a suspended approval")
    def pay(to: str) -> str:
        """Pay someone."""
        raise ToolUnavailable("the payment service is down")

    runner = Runner(store)
    first = await runner.run(
        Agent("payer", "Pay ana.", FunctionModel(_pay_once_model), tools=[pay]), "go", session_id="s"
    )
    changed = Agent("payer", "Pay ana.", FunctionModel(_pay_once_model))
    if open_step == "an intent cut off":
        assert first.status == "failed"
        done = await runner.retry(changed, "s")
    else:
        assert first.status == "suspended"
        done = await runner.resume(changed, "s", {"call-1": Approve()})
    assert (done.status, done.output) == ("completed", "done")
    snapshot = await store.load_session("s")
    assert snapshot is not None
    rows = [m.content for m in snapshot.messages() if m.role == "tool"]
    assert len(rows) == 1 and "no longer a tool of agent 'payer'" in rows[0]


# --- SIGKILL between a tool's effect and its step's commit, on SQLite and PostgreSQL ---------------------------


def _open_db(kind: str, where: str, schema: str) -> Store:
    if kind == "sqlite":
        return SQLiteStore(where)
    from stopwise.store.postgres import PostgresStore

    return PostgresStore(where, schema=schema, max_size=2)


def _refunder(ledger: str, effects: str, asks: str) -> Agent:
    """Refunds 5 on order 1: ``refund_keyed`` dedupes on the key in a ledger (the doc's example), ``refund_bare``
    does not. Every model call is noted in ``asks``."""

    @tool
    def refund_keyed(order: str, amount: int, ctx: RunContext) -> str:
        """Refund an order, once per key."""
        with sqlite3.connect(ledger) as db:
            db.execute("CREATE TABLE IF NOT EXISTS refunds (key TEXT PRIMARY KEY, order_id TEXT, amount INTEGER)")
            db.execute("INSERT OR IGNORE INTO refunds VALUES (?, ?, ?)", (ctx.idempotency_key, order, amount))
        return _after_effect(f"refunded {amount} on {order}")

    @tool
    def refund_bare(order: str, amount: int, ctx: RunContext) -> str:
        """Refund an order."""
        with open(effects, "a") as f:
            f.write(f"{ctx.idempotency_key} {order} {amount}\n")
        return _after_effect(f"refunded {amount} on {order}")

    def model(request: ModelRequest) -> Reply:
        with open(asks, "a") as f:
            f.write(f"{len(request.messages)}\n")
        if any(m.role == "tool" for m in request.messages):
            return Reply("refunded")
        name = request.tools[0].name
        return Reply(tool_calls=[ToolCall(name, {"order": "1", "amount": 5})])

    return Agent("refunder", "Refund.", FunctionModel(model), tools=[refund_keyed, refund_bare])


def _after_effect(result: str) -> str:
    if _held:  # the doomed process: the effect is done; report, then wait to be killed before the step commits
        _held["queue"].put("effect done")
        os.close(os.open(_held["fifo"], os.O_RDONLY))
    return result


def _doomed_refund(
    kind: str, where: str, schema: str, tool_name: str, files: tuple[str, str, str], fifo: str, q: Any
) -> None:
    _held.update(fifo=fifo, queue=q)

    async def go() -> None:
        store = _open_db(kind, where, schema)
        agent = _refunder(*files)
        agent = Agent(agent.name, agent.instructions, agent.model, tools=[agent.tool_map[tool_name]])
        await Runner(store, lease_seconds=LEASE, owner="doomed").run(agent, "go", session_id="refund")

    asyncio.run(go())


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
@pytest.mark.parametrize("tool_name", ["refund_keyed", "refund_bare"])
def test_sigkill_between_a_tools_effect_and_its_commit_reruns_the_call_once_with_its_key(
    request: pytest.FixtureRequest, tmp_path: Path, kind: str, tool_name: str
) -> None:
    # The doc's contract: at least once, every time with the same key and arguments; exactly once is the tool's
    # half. A tool that dedupes on the key pays once; one that does not pays twice, both times with one key.
    where, schema = str(tmp_path / "log.db"), ""
    if kind == "postgres":
        dsn = request.getfixturevalue("pg_dsn")
        if dsn is None:
            pytest.skip(HOW_TO_ENABLE)
        where, schema = dsn, f"k_{uuid.uuid4().hex[:12]}"
    files = (str(tmp_path / "ledger.db"), str(tmp_path / "effects"), str(tmp_path / "asks"))
    fifo = str(tmp_path / "gate")
    os.mkfifo(fifo)
    ctx = multiprocessing.get_context("forkserver")
    q = ctx.Queue()
    doomed = ctx.Process(target=_doomed_refund, args=(kind, where, schema, tool_name, files, fifo, q))
    doomed.start()
    try:
        assert q.get(timeout=60) == "effect done"
    finally:
        os.kill(doomed.pid, signal.SIGKILL)
        doomed.join(60)
    assert doomed.exitcode == -signal.SIGKILL

    async def retry() -> tuple[Any, list[str]]:
        store = _open_db(kind, where, schema)
        try:
            agent = _refunder(*files)
            agent = Agent(agent.name, agent.instructions, agent.model, tools=[agent.tool_map[tool_name]])
            runner = Runner(store, clock=lambda: time.time() + LEASE + 1, lease_seconds=LEASE)
            done = await runner.retry(agent, "refund")
            snapshot = await store.load_session("refund")
            assert snapshot is not None
            return done, [m.content for m in snapshot.messages() if m.role == "tool"]
        finally:
            await store.close()

    done, rows = asyncio.run(retry())
    assert (done.status, done.output) == ("completed", "refunded")
    assert rows == ["refunded 5 on 1"], "the step settles once"
    asks = Path(files[2]).read_text().split()
    assert len(asks) == 2, "the step whose intent committed is not asked again; the second call is the answer's"
    key = f"{done.run_id}:1:"
    if tool_name == "refund_keyed":
        with sqlite3.connect(files[0]) as db:
            ledger = db.execute("SELECT key, order_id, amount FROM refunds").fetchall()
        assert len(ledger) == 1 and ledger[0][0].startswith(key) and ledger[0][1:] == ("1", 5)
    else:
        effects = Path(files[1]).read_text().splitlines()
        assert len(effects) == 2 and effects[0] == effects[1] and effects[0].startswith(key)


async def test_a_retry_racing_a_resume_is_refused_and_the_approved_call_runs_once(store: Store) -> None:
    paid: list[str] = []
    agent = _payer(paid)
    suspended = await Runner(store, owner="web-1").run(agent, "go", session_id="s")
    in_answer, may_answer = asyncio.Event(), asyncio.Event()

    async def answer(request: ModelRequest) -> Reply:
        in_answer.set()
        await may_answer.wait()
        return _pay_once_model(request)

    slow = Agent("payer", "Pay ana.", FunctionModel(answer), tools=list(agent.tools))
    resuming = asyncio.create_task(Runner(store, owner="web-1").resume(slow, "s", {"call-1": Approve()}))
    retrier = Runner(store, owner="web-2")
    with pytest.raises(RetryNotAllowed):  # whether or not the resume claimed the run yet, its record reads suspended
        await retrier.retry(agent, "s")
    await in_answer.wait()  # the call ran and its step settled; the resume's next model call is out
    with pytest.raises(RunLeased) as leased:
        await retrier.retry(agent, "s")
    assert leased.value.owner == "web-1"
    may_answer.set()
    done = await resuming
    assert (done.status, done.output) == ("completed", "done")
    assert paid == [f"{suspended.run_id}:1:call-1"]


async def test_a_step_the_old_worker_commits_while_the_new_ones_input_guardrails_run_is_not_overwritten(
    store: Store,
) -> None:
    # B claims the run (A's lease lapsed), then its input guardrails take a while; meanwhile A commits the run's
    # last step. B's leg start must not then write the run back to "running" with the older state: the run is
    # A's completed one, and B stops with StepConflict before it asks the model anything.
    a_asked, a_may_answer = asyncio.Event(), asyncio.Event()
    b_checking, b_may_pass = asyncio.Event(), asyncio.Event()
    asked: list[str] = []

    async def model(request: ModelRequest) -> Reply:
        asked.append("model")
        if not a_asked.is_set():
            a_asked.set()
            await a_may_answer.wait()
            return Reply("done by A")
        return Reply("done by B")

    async def check(ctx: Any) -> None:
        if a_asked.is_set():  # B's leg (A's was checked before its model call)
            b_checking.set()
            await b_may_pass.wait()

    agent = Agent("slow", "Answer.", FunctionModel(model), guardrails=Guardrails(on_input=check))

    first, b = await _b_may_take_over(store, agent, a_asked, state={"by": "start"})
    second = asyncio.create_task(b.retry(agent, "s"))
    await asyncio.wait_for(b_checking.wait(), 30)
    a_may_answer.set()
    done = await first
    assert (done.status, done.output) == ("completed", "done by A")
    b_may_pass.set()
    with pytest.raises(StepConflict):
        await second
    assert asked == ["model"], "B asked the model nothing"
    record = await store.get_run(done.run_id)
    assert record is not None
    assert (record.status, record.output) == (RunStatus.COMPLETED, "done by A")


@pytest.mark.parametrize(("column", "value"), [("completion_reason", "from_the_future"), ("status", "hibernating")])
async def test_a_run_record_a_newer_version_wrote_is_a_typed_unreadable_error_and_other_sessions_read_on(
    tmp_path: Path, column: str, value: str
) -> None:
    # Before, a status or completion reason this version does not know raised a bare ValueError from every read
    # of the session, and `stopwise runs` died with a traceback.
    path = tmp_path / "log.db"
    agent = Agent("echo", "Answer.", FunctionModel(lambda r: Reply("hi")))
    async with SQLiteStore(path) as store:
        for session in ("future", "today"):
            await Runner(store).run(agent, "go", session_id=session)
    with sqlite3.connect(path) as db:
        db.execute(f"UPDATE runs SET {column} = ? WHERE session_id = 'future'", (value,))
    async with SQLiteStore(path) as store:
        for read in (lambda: store.load_session("future"), lambda: store.list_runs("future")):
            with pytest.raises(UnreadableEntry) as unreadable:
                await read()
            assert isinstance(unreadable.value, UnreadableRun) and unreadable.value.session_id == "future"
            assert value in unreadable.value.why
        skipped: list[UnreadableEntry] = []
        walked = [s.session_id async for s in every_session(store, on_unreadable=skipped.append)]
    assert walked == ["today"] and [e.session_id for e in skipped] == ["future"]


@pytest.mark.parametrize(
    "error",
    [UnreadableEntry("s", 3, "torn"), UnreadableRun("s", "r1", "a future status")],
    ids=lambda e: type(e).__name__,
)
def test_an_unreadable_log_error_survives_pickling_whole_as_dbos_records_a_workflows_error(
    error: UnreadableEntry,
) -> None:
    import pickle

    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is type(error)
    assert (str(copy), copy.session_id, copy.seq, copy.why) == (str(error), "s", error.seq, error.why)


# --- PostgreSQL under READ COMMITTED: a fence or a claim waiting on the row the old holder's commit updates ---------


def _pg_store(request: pytest.FixtureRequest) -> Any:
    dsn = request.getfixturevalue("pg_dsn")
    if dsn is None:
        pytest.skip(HOW_TO_ENABLE)
    from stopwise.store.postgres import PostgresStore

    return PostgresStore(dsn, schema=f"f_{uuid.uuid4().hex[:12]}", max_size=4)


async def _held_open_deletion(store: Any, session_id: str) -> Any:
    """Retention's deletion of ``session_id`` (its row and holds locked, its log and runs deleted) in a transaction
    held open: a write racing it waits on the session's row (``_held_open_commit``)."""
    from stopwise.store import _sql

    deletion = [
        _sql.Op(_sql.SESSION_KEY + " FOR UPDATE", {"session_id": session_id}),
        _sql.Op(_sql.HOLDS_OF_SESSION + " FOR UPDATE", {"session_id": session_id}),
        *(_sql.Op(d.sql, d.params) for d in _sql.deletions([session_id])),
    ]
    return await _held_open_commit(store, deletion)


async def _racing_the_deletion(store: Any, session_id: str, write: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
    """``write`` started while retention's deletion of ``session_id`` is held open (``_held_open_deletion``), the
    deletion committed once the write waits on its lock: the write's task, to be awaited for its outcome."""
    d = await _held_open_deletion(store, session_id)
    try:
        task = asyncio.create_task(write)
        await _until_waiting_on_a_lock(store, d.info.backend_pid)
        await d.commit()
    finally:
        await d.close()
    return task


async def _held_open_commit(store: Any, ops: list[Any]) -> Any:
    """The statements of a store write run on a connection of their own, in a transaction left open (its row locks
    held) until the caller commits it: the old holder's commit caught between its writes and its COMMIT."""
    import psycopg
    from psycopg.rows import dict_row

    from stopwise.store.postgres import _placeholders

    conn = await psycopg.AsyncConnection.connect(store.dsn, row_factory=dict_row)
    await conn.execute(f"SET search_path TO {store.schema}")
    for op in ops:
        await conn.execute(_placeholders(op.sql), op.params)
    return conn


async def _until_waiting_on_a_lock(store: Any, besides: int) -> None:
    """Return once a backend other than ``besides`` waits on a row lock in the store's database (the racing write
    reached the row the open transaction holds). A condition polled on the server, not a guess at a duration."""
    import psycopg

    async with await psycopg.AsyncConnection.connect(store.dsn, autocommit=True) as watcher:
        for _ in range(10_000):
            cur = await watcher.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> %s "
                "AND wait_event_type = 'Lock'",
                (besides,),
            )
            row = await cur.fetchone()
            if row is not None and row[0] > 0:
                return
        raise AssertionError("the racing write never waited on the row")


def _first_leg() -> tuple[RunRecord, Lease, LogEntry]:
    lease_a = Lease("r1", "a", 1_000.0)
    run = RunRecord("r1", "s", "agent")
    entry = LogEntry("s", 1, "r1", 0, EntryKind.INPUT, (Message("user", "go"),))
    return run, lease_a, entry


async def _claimed_by_b_while_a_finishes(store: Store) -> tuple[RunRecord, Lease, RunRecord, LogEntry]:
    """A started the run and its lease lapsed; B claimed it at seq 1. Returns the run, B's lease, and the completed
    record and last step (seq 2) A is about to commit."""
    run, lease_a, entry = _first_leg()
    await store.start_run(run, entry, {}, lease_a)
    lease_b = Lease("r1", "b", 5_000.0)
    await store.claim(run, 1, lease_b, 2_000.0)
    done = replace(run, status=RunStatus.COMPLETED, output="done by A", steps=1)
    step = LogEntry("s", 2, "r1", 1, EntryKind.STEP, (Message("assistant", "done by A"),))
    return run, lease_b, done, step


async def test_on_postgres_a_fenced_write_waiting_on_the_old_holders_commit_is_refused_once_that_commit_lands(
    request: pytest.FixtureRequest,
) -> None:
    # A's lease lapsed and B claimed the run at seq 1. A's last step (seq 2, run completed) is mid-commit, holding
    # the run's row, when B's leg ends and writes its run record fenced at seq 1. B waits for the row; once A's
    # commit lands the log ends at 2, so B's fence no longer holds: B must be refused, not overwrite A's completion
    # with a record written from a log that ended at 1 (READ COMMITTED re-checks only the row after the wait).
    from stopwise.store import _sql

    store = _pg_store(request)
    try:
        run, lease_b, done, step = await _claimed_by_b_while_a_finishes(store)
        a = await _held_open_commit(store, _sql.commit_ops(step, "{}", done, 2_001.0))
        try:
            failed = replace(run, status=RunStatus.FAILED, detail="B's model call failed")
            b = asyncio.create_task(store.update_run(failed, Fence(lease_b, 1)))
            await _until_waiting_on_a_lock(store, a.info.backend_pid)
            await a.commit()
        finally:
            await a.close()
        with pytest.raises(StepConflict, match="moved on without"):
            await b
        record = await store.get_run("r1")
        assert record is not None
        assert (record.status, record.output) == (RunStatus.COMPLETED, "done by A")
    finally:
        await store.close()


async def test_on_postgres_a_claim_waiting_on_the_old_holders_commit_is_refused_once_that_commit_lands(
    request: pytest.FixtureRequest,
) -> None:
    # The same race on a claim: A's lease lapsed while A settles an approved call (seq 2; the run stays running),
    # and B claims the run having read the log at seq 1. Taking it would have B carry out the settled step again.
    from stopwise.store import _sql

    store = _pg_store(request)
    try:
        run, lease_a, entry = _first_leg()
        await store.start_run(run, entry, {}, lease_a)
        settled = replace(run, steps=1)
        step = LogEntry("s", 2, "r1", 1, EntryKind.SETTLE, (Message("tool", "paid", tool_call_id="c1"),))
        a = await _held_open_commit(store, _sql.commit_ops(step, "{}", settled, 1_500.0))
        try:
            b = asyncio.create_task(store.claim(run, 1, Lease("r1", "b", 5_000.0), 2_000.0))
            await _until_waiting_on_a_lock(store, a.info.backend_pid)
            await a.commit()
        finally:
            await a.close()
        with pytest.raises(StepConflict, match="changed since it was read"):
            await b
        lease = await store._rows(_sql.LEASE_OF_RUN, "test", run_id="r1")
        assert lease[0]["lease_owner"] == "a", "the run is still A's"
    finally:
        await store.close()


@pytest.mark.parametrize(
    ("damage", "missing"),
    [
        ("DELETE FROM log WHERE seq = (SELECT MAX(seq) FROM log)", "no approval request"),
        ("UPDATE log SET messages = '[]' WHERE seq = (SELECT MAX(seq) FROM log)", "no model reply for step 1"),
    ],
)
async def test_resuming_a_suspension_whose_log_was_damaged_is_a_typed_error_naming_the_session_and_writes_nothing(
    tmp_path: Path, damage: str, missing: str
) -> None:
    # The run record says "suspended" but the log lost what settling the step needs (the entry holding the request,
    # or the reply whose calls wait). A bare LookupError (or a StopIteration) told the caller nothing it could act on.
    path = tmp_path / "log.db"
    paid: list[str] = []
    agent = _payer(paid)
    store = SQLiteStore(path)
    try:
        suspended = await Runner(store).run(agent, "go", session_id="s")
        assert suspended.status == "suspended"
    finally:
        await store.close()
    with sqlite3.connect(path) as db:
        db.execute(damage)
        before = db.execute("SELECT COUNT(*), MAX(seq) FROM log").fetchone()
    store = SQLiteStore(path)
    try:
        with pytest.raises(UnreadableSuspension, match=missing) as caught:
            await Runner(store).resume(agent, "s", {"call-1": Approve()})
    finally:
        await store.close()
    assert isinstance(caught.value, UnreadableEntry), "walks that skip an unreadable session skip this one too"
    assert (caught.value.session_id, caught.value.run_id) == ("s", suspended.run_id)
    assert "session 's'" in str(caught.value) and suspended.run_id in str(caught.value)
    assert paid == [], "nothing ran"
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT COUNT(*), MAX(seq) FROM log").fetchone() == before, "nothing was written"


def test_stopwise_runs_lists_the_readable_runs_and_names_the_unreadable_one_on_one_stderr_line_with_exit_1(
    tmp_path: Path,
) -> None:
    # One run record a newer version wrote (a status this one does not know, holding an escape sequence) among
    # readable ones: the listing goes on without it, and stderr names it on one terminal-safe line.
    import subprocess
    import sys

    path = tmp_path / "log.db"
    agent = Agent("echo", "Answer.", FunctionModel(lambda r: Reply("hi")))

    async def write() -> list[str]:
        async with SQLiteStore(path) as store:
            return [(await Runner(store).run(agent, "go", session_id=s)).run_id for s in ("s", "s", "t")]

    first, second, other = asyncio.run(write())
    with sqlite3.connect(path) as db:
        db.execute("UPDATE runs SET status = ? WHERE run_id = ?", ("\x1b[31mhibernating\nfake row", first))

    def runs(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "stopwise", "runs", "--db", str(path), *args],
            capture_output=True,
            text=True,
            timeout=120,
            stdin=subprocess.DEVNULL,
        )

    for args, listed in (((), {second, other}), (("--session", "s"), {second})):
        done = runs(*args)
        assert done.returncode == 1, done.stderr
        assert {run_id for run_id in (first, second, other) if run_id in done.stdout} == listed
        lines = done.stderr.splitlines()
        assert len(lines) == 1, done.stderr
        assert first in lines[0] and "session 's'" in lines[0] and "left out" in lines[0]
        assert "\x1b" not in done.stderr and "\\x1b" in lines[0]


async def test_on_postgres_a_continued_legs_start_racing_the_old_holders_commit_is_refused_not_deadlocked(
    request: pytest.FixtureRequest,
) -> None:
    # Every write takes the session's row before the run's (a commit: the state, then the run record). A continued
    # leg's fenced start took the run's row first: caught between the old holder's two, each waited on the other
    # and PostgreSQL broke the deadlock by failing B with a StoreUnavailable that names no conflict.
    from stopwise.store import _sql

    store = _pg_store(request)
    try:
        run, lease_b, done, step = await _claimed_by_b_while_a_finishes(store)
        entry_and_state, record = (
            _sql.commit_ops(step, "{}", done, 2_001.0)[:2],
            _sql.commit_ops(step, "{}", done, 0)[2],
        )
        a = await _held_open_commit(store, entry_and_state)
        try:
            b = asyncio.create_task(store.start_run(run, None, {}, lease_b, Fence(lease_b, 1)))
            await _until_waiting_on_a_lock(store, a.info.backend_pid)
            from stopwise.store.postgres import _placeholders

            await a.execute(_placeholders(record.sql), record.params)
            await a.commit()
        finally:
            await a.close()
        with pytest.raises(StepConflict, match="moved on without"):
            await b
        stored = await store.get_run("r1")
        assert stored is not None
        assert (stored.status, stored.output) == (RunStatus.COMPLETED, "done by A")
    finally:
        await store.close()


async def test_an_expiry_sweep_skips_a_suspension_whose_log_was_damaged_naming_it_and_ends_the_others(
    tmp_path: Path,
) -> None:
    # A cron job's sweep over every suspended run: one damaged session must not stop it ending the rest.
    @tool(needs_approval=True, approval_ttl=60)
    def pay(to: str) -> str:
        """Pay someone, once a human approved it."""
        return f"paid {to}"

    agent = Agent("payer", "Pay ana.", FunctionModel(_pay_once_model), tools=[pay])
    path = tmp_path / "log.db"
    async with SQLiteStore(path) as store:
        runner = Runner(store, clock=lambda: 1_000.0)
        for session in ("damaged", "fine"):
            assert (await runner.run(agent, "go", session_id=session)).status == "suspended"
    with sqlite3.connect(path) as db:
        db.execute(
            "DELETE FROM log WHERE session_id = 'damaged' AND seq = (SELECT MAX(seq) FROM log WHERE "
            "session_id = 'damaged')"
        )
    async with SQLiteStore(path) as store:
        sweep = await Runner(store, clock=lambda: 1_000.0).expire_all(now=2_000.0)
        assert [r.session_id for r in sweep.expired] == ["fine"]
        assert [s.session_id for s in sweep.skipped] == ["damaged"]
        assert "no approval request" in sweep.skipped[0].why
        assert [r.session_id for r in await store.suspended_runs()] == ["damaged"], "left as it was"


def test_the_serve_runs_page_lists_the_readable_runs_and_names_the_unreadable_one_escaped(tmp_path: Path) -> None:
    # One run record a newer version wrote, its status holding markup, among readable ones: the page lists the
    # others and names that one, escaped, instead of failing whole.
    from stopwise._cli.serve import Viewer

    path = tmp_path / "log.db"
    agent = Agent("echo", "Answer.", FunctionModel(lambda r: Reply("hi")))

    async def write() -> list[str]:
        async with SQLiteStore(path) as store:
            return [(await Runner(store).run(agent, "go", session_id=s)).run_id for s in ("s", "s", "t")]

    first, second, other = asyncio.run(write())
    with sqlite3.connect(path) as db:
        db.execute("UPDATE runs SET status = ? WHERE run_id = ?", ("<script>alert(1)</script>", first))

    html = Viewer(path, {}, "csrf").runs_page()
    listed = html.split("<table id='runs'>", 1)[1].split("</table>", 1)[0]
    assert f"data-run='{second}'" in listed and f"data-run='{other}'" in listed
    assert first not in listed
    named = html.split("<ul id='unreadable-runs'>", 1)[1].split("</ul>", 1)[0]
    assert first in named and "session s" in named
    assert "<script>" not in html and "&lt;script&gt;" in named


async def test_on_postgres_a_commit_racing_the_deletion_of_its_session_is_refused_and_leaves_no_log_row(
    request: pytest.FixtureRequest,
) -> None:
    # Retention deletes a session whose run holds no live lease (its worker's lease lapsed) while that worker
    # commits a step. The deletion holds the session's row and has already removed the log; the commit's insert read
    # the run as still on record. Had the commit gone on, its entry would outlive the session: an orphan log row
    # that a new session under the same id would find at seq 2 with no seq 1.
    store = _pg_store(request)
    try:
        run, lease_a, entry = _first_leg()
        await store.start_run(run, entry, {}, lease_a)
        step = LogEntry("s", 2, "r1", 1, EntryKind.STEP, (Message("assistant", "late"),))
        c = await _racing_the_deletion(store, "s", store.commit(step, {"k": 1}))
        with pytest.raises(StepConflict):
            await c
        assert await store.load_session("s") is None
        import psycopg

        async with await psycopg.AsyncConnection.connect(store.dsn) as conn:
            cur = await conn.execute(f"SELECT count(*) FROM {store.schema}.log WHERE session_id = 's'")
            assert await cur.fetchone() == (0,), "no entry outlives its session"
    finally:
        await store.close()


async def test_a_plain_run_write_after_retention_deleted_its_session_is_a_step_conflict_and_writes_nothing(
    store: Store,
) -> None:
    # A peer run (integrations) writes its ending with a plain update_run. Retention deleted its session (the run's
    # lease lapsed) first: the write is refused as a commit or a fenced write is (StepConflict), not as data the
    # database refused (StoreRefused), and no run record outlives its session.
    run, lease_a, entry = _first_leg()
    await store.start_run(run, entry, {}, lease_a)
    gone = await store.expire_sessions(datetime.now(UTC) + timedelta(days=1), now=lease_a.expires_at + 1)
    assert gone.sessions == 1
    with pytest.raises(StepConflict, match="not on record") as info:
        await store.update_run(replace(run, status=RunStatus.FAILED, detail="the peer raised"))
    assert (info.value.operation, info.value.session_id) == ("update_run", "s")
    assert await store.get_run("r1") is None
    assert await store.list_sessions() == []


async def test_on_postgres_a_plain_run_write_racing_the_deletion_of_its_session_is_a_step_conflict(
    request: pytest.FixtureRequest,
) -> None:
    # The deletion holds the session's row and has removed its runs when the plain write arrives: the write waits
    # for the row, then finds it gone, and is refused typed (StepConflict), not by the runs table's foreign key.
    store = _pg_store(request)
    try:
        run, lease_a, entry = _first_leg()
        await store.start_run(run, entry, {}, lease_a)
        failed = replace(run, status=RunStatus.FAILED, detail="the peer raised")
        w = await _racing_the_deletion(store, "s", store.update_run(failed))
        with pytest.raises(StepConflict, match="not on record"):
            await w
        assert await store.get_run("r1") is None
        assert await store.load_session("s") is None
    finally:
        await store.close()
