"""Leases and claims across real processes, on SQLite and PostgreSQL: a run is driven by one worker at a time.

Each race starts real worker processes against one database. A worker's tool call reports that it started,
writes its effect to a file, and then holds (waiting on a gate the test opens), so the race's loser is decided
while the winner is still inside the run: the outcomes do not depend on timing. Expiry is tested with a clock
passed to the runner, never by waiting.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import signal
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from _pgcluster import HOW_TO_ENABLE
from stopwise import Agent, Approve, FunctionModel, Reply, Runner, SQLiteStore, Store, ToolCall, tool
from stopwise.errors import RunLeased, StepConflict
from stopwise.models import ModelRequest
from stopwise.result import RunStatus
from stopwise.runtime import ExpirySweep
from stopwise.store.base import Lease

SESSION = "leased"
LEASE = 60.0
_WAIT = 60.0  # seconds a queue read, a barrier or a join waits before the test fails rather than hangs
_gate: dict[str, Any] = {}


def _pay(to: str) -> str:
    """The effect the races must not repeat: noted in the effects file, then held until the gate opens."""
    with open(_gate["effects"], "a") as f:
        f.write(f"{_gate['name']} paid {to}\n")
    _gate["started"].put(_gate["name"])
    # Opening a FIFO to read blocks until someone has it open to write: the test does that to open the gate.
    os.close(os.open(_gate["fifo"], os.O_RDONLY))
    return f"paid {to}"


@tool
def pay(to: str) -> str:
    """Pay someone."""
    return _pay(to)


@tool(needs_approval=True)
def pay_approved(to: str) -> str:
    """Pay someone, once a human approved it."""
    return _pay(to)


@tool(needs_approval=True, approval_ttl=600)
def pay_expiring(to: str) -> str:
    """Pay someone, once a human approved it within ten minutes."""
    return _pay(to)


def _reply(request: ModelRequest) -> Reply:
    if any(m.role == "tool" for m in request.messages):
        return Reply("done")
    name = request.tools[0].name
    return Reply(tool_calls=[ToolCall(name, {"to": "ana"}, id="call-1")])


AGENT = Agent("payer", "Pay ana.", FunctionModel(_reply), tools=[pay])
APPROVED = Agent("approver", "Pay ana.", FunctionModel(_reply), tools=[pay_approved])
EXPIRING = Agent("expiring", "Pay ana.", FunctionModel(_reply), tools=[pay_expiring])
AGENTS = {"payer": AGENT, "approver": APPROVED, "expiring": EXPIRING}


@dataclass(frozen=True)
class Db:
    """Where the workers' store is: a SQLite file, or a PostgreSQL schema."""

    kind: str
    where: str
    schema: str = ""

    def open(self) -> Store:
        if self.kind == "sqlite":
            return SQLiteStore(self.where)
        from stopwise.store.postgres import PostgresStore

        return PostgresStore(self.where, schema=self.schema, max_size=2)


@pytest.fixture(params=["sqlite", "postgres"])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Db]:
    if request.param == "sqlite":
        yield Db("sqlite", str(tmp_path / "log.db"))
        return
    dsn = request.getfixturevalue("pg_dsn")
    if dsn is None:
        pytest.skip(HOW_TO_ENABLE)
    yield Db("postgres", dsn, f"l_{uuid.uuid4().hex[:12]}")


@dataclass(frozen=True)
class Job:
    name: str
    """The worker's lease owner."""
    mode: str
    """``run``, ``retry`` or ``resume``."""
    agent: str = "payer"
    clock_offset: float = 0.0
    """Seconds the worker's clock runs ahead: past a lease's expiry, as if that much time had passed."""


def _worker(db: Db, job: Job, effects: str, started: Any, fifo: str, barrier: Any, outcomes: Any) -> None:
    _gate.update(name=job.name, effects=effects, started=started, fifo=fifo)

    async def go() -> tuple[Any, ...]:
        store = db.open()
        runner = Runner(store, owner=job.name, lease_seconds=LEASE, clock=lambda: time.time() + job.clock_offset)
        agent = AGENTS[job.agent]
        try:
            if barrier is not None:
                barrier.wait(_WAIT)
            if job.mode == "run":
                result = await runner.run(agent, "go", session_id=SESSION)
            elif job.mode == "retry":
                result = await runner.retry(agent, SESSION)
            else:
                result = await runner.resume(agent, SESSION, {"call-1": Approve()})
            return ("finished", job.name, result.status.value)
        except RunLeased as exc:
            return ("leased", job.name, exc.owner, exc.until)
        except StepConflict as exc:
            return ("conflict", job.name, str(exc))
        except Exception as exc:  # reported, so the test fails saying what went wrong instead of timing out
            return ("error", job.name, repr(exc))
        finally:
            await store.close()

    outcomes.put(asyncio.run(go()))


class Race:
    """Worker processes on one database, with the queues and the gate they share."""

    def __init__(self, db: Db, tmp_path: Path) -> None:
        self.db = db
        self.ctx = multiprocessing.get_context("forkserver")
        self.effects = str(tmp_path / "effects.txt")
        Path(self.effects).touch()
        self.started = self.ctx.Queue()
        self.outcomes = self.ctx.Queue()
        # The gate is a FIFO rather than a multiprocessing.Event: an Event's set() waits on every waiter it
        # wakes, and a waiter killed with SIGKILL never answers.
        self.fifo = str(tmp_path / "gate")
        os.mkfifo(self.fifo)
        self._gate_fd: int | None = None
        self.procs: list[Any] = []

    def start(self, job: Job, barrier: Any = None) -> Any:
        args = (self.db, job, self.effects, self.started, self.fifo, barrier, self.outcomes)
        p = self.ctx.Process(target=_worker, args=args)
        p.start()
        self.procs.append(p)
        return p

    def open_gate(self) -> None:
        """Let every held tool call (and every later one) through."""
        if self._gate_fd is None:
            self._gate_fd = os.open(self.fifo, os.O_RDWR)  # O_RDWR: does not wait for a reader

    def paid(self) -> list[str]:
        return Path(self.effects).read_text().splitlines()

    def close(self) -> None:
        self.open_gate()
        for p in self.procs:
            p.join(_WAIT)
            if p.exitcode is None:
                p.kill()
        assert self._gate_fd is not None
        os.close(self._gate_fd)


@pytest.fixture
def race(db: Db, tmp_path: Path) -> Iterator[Race]:
    r = Race(db, tmp_path)
    try:
        yield r
    finally:
        r.close()


def _crash_a_live_run(race: Race) -> None:
    """A worker starts the run, is inside its tool call (lease held), and is killed there."""
    live = race.start(Job("crashed", "run"))
    assert race.started.get(timeout=_WAIT) == "crashed"
    os.kill(live.pid, signal.SIGKILL)
    live.join(_WAIT)
    assert live.exitcode == -signal.SIGKILL
    # The killed worker may die holding the queue's write lock (its feeder thread releases it only after the
    # message is through), which would silence every later worker on that queue: they get a fresh one.
    race.started = race.ctx.Queue()


async def _last_run_status(db: Db) -> str:
    store = db.open()
    try:
        snapshot = await store.load_session(SESSION)
        assert snapshot is not None and snapshot.last_run is not None
        return snapshot.last_run.status.value
    finally:
        await store.close()


@pytest.mark.slow
def test_retry_of_a_live_run_is_refused_naming_its_holder_and_the_live_run_finishes_alone(race: Race) -> None:
    live = race.start(Job("live", "run"))
    assert race.started.get(timeout=_WAIT) == "live"

    before = time.time()
    race.start(Job("intruder", "retry"))
    outcome = race.outcomes.get(timeout=_WAIT)
    assert outcome[:3] == ("leased", "intruder", "live")
    assert before + LEASE - 5 < outcome[3] < time.time() + LEASE + 5, "the error says until when the lease holds"

    race.open_gate()
    assert race.outcomes.get(timeout=_WAIT) == ("finished", "live", "completed")
    live.join(_WAIT)
    assert race.paid() == ["live paid ana"]


@pytest.mark.slow
def test_retry_after_a_crash_is_refused_until_the_lease_lapses_then_continues_the_run(race: Race) -> None:
    _crash_a_live_run(race)

    race.start(Job("early", "retry"))
    assert race.outcomes.get(timeout=_WAIT)[:3] == ("leased", "early", "crashed")

    race.open_gate()
    race.start(Job("later", "retry", clock_offset=LEASE + 1))
    assert race.outcomes.get(timeout=_WAIT) == ("finished", "later", "completed")
    # The crashed step never committed, so its call runs again: the crash case, not a race.
    assert race.paid() == ["crashed paid ana", "later paid ana"]
    assert asyncio.run(_last_run_status(race.db)) == "completed"


@pytest.mark.slow
def test_two_retries_of_a_crashed_run_at_once_one_continues_it_the_other_is_refused_before_any_effect(
    race: Race,
) -> None:
    _crash_a_live_run(race)

    barrier = race.ctx.Barrier(2)
    for name in ("first", "second"):
        race.start(Job(name, "retry", clock_offset=LEASE + 1), barrier)
    loser = race.outcomes.get(timeout=_WAIT)  # decided while the winner holds inside its tool call
    assert loser[0] == "leased", loser
    winner = race.started.get(timeout=_WAIT)
    assert loser[0] == "leased" and loser[1] != winner and loser[2] == winner, loser

    race.open_gate()
    assert race.outcomes.get(timeout=_WAIT) == ("finished", winner, "completed")
    assert race.paid() == ["crashed paid ana", f"{winner} paid ana"]


@pytest.mark.slow
def test_two_resumes_of_one_approval_at_once_run_the_approved_call_once(race: Race) -> None:
    async def suspend() -> None:
        store = race.db.open()
        try:
            result = await Runner(store).run(APPROVED, "go", session_id=SESSION)
            assert result.status == "suspended"
        finally:
            await store.close()

    asyncio.run(suspend())

    barrier = race.ctx.Barrier(2)
    for name in ("click", "double-click"):
        race.start(Job(name, "resume", agent="approver"), barrier)
    winner = race.started.get(timeout=_WAIT)
    loser = race.outcomes.get(timeout=_WAIT)
    assert loser[0] == "leased" and loser[1] != winner and loser[2] == winner

    race.open_gate()
    assert race.outcomes.get(timeout=_WAIT) == ("finished", winner, "completed")
    assert race.paid() == [f"{winner} paid ana"]


@pytest.mark.slow
def test_an_expiry_sweep_while_a_resume_runs_the_approved_call_skips_that_run_and_the_call_runs_once(
    race: Race,
) -> None:
    async def suspend() -> None:
        store = race.db.open()
        try:
            assert (await Runner(store).run(EXPIRING, "go", session_id=SESSION)).status == "suspended"
        finally:
            await store.close()

    async def sweep() -> ExpirySweep:
        store = race.db.open()
        try:
            return await Runner(store, owner="sweeper").expire_all(now=time.time() + 3600)
        finally:
            await store.close()

    asyncio.run(suspend())
    race.start(Job("reviewer", "resume", agent="expiring"))
    assert race.started.get(timeout=_WAIT) == "reviewer"  # inside the approved call: the run is claimed
    swept = asyncio.run(sweep())
    assert swept.expired == () and [s.session_id for s in swept.skipped] == [SESSION]
    assert "reviewer" in swept.skipped[0].why, "the skip names the worker that holds the run"
    race.open_gate()
    assert race.outcomes.get(timeout=_WAIT) == ("finished", "reviewer", "completed")
    assert race.paid() == ["reviewer paid ana"]


async def _suspended_run(store: Store) -> None:
    result = await Runner(store).run(APPROVED, "go", session_id=SESSION)
    assert result.status == "suspended"


async def test_a_claim_is_refused_while_another_lease_is_live_and_taken_once_it_lapsed(store: Store) -> None:
    await _suspended_run(store)
    snapshot = await store.load_session(SESSION)
    assert snapshot is not None and snapshot.last_run is not None
    run, last_seq = snapshot.last_run, snapshot.next_seq - 1
    await store.claim(run, last_seq, Lease(run.run_id, "a", 100.0), now=10.0)
    with pytest.raises(RunLeased) as refused:
        await store.claim(run, last_seq, Lease(run.run_id, "b", 150.0), now=50.0)
    assert (refused.value.owner, refused.value.until) == ("a", 100.0)
    await store.claim(run, last_seq, Lease(run.run_id, "b", 200.0), now=100.0)  # a's lease lapsed at 100
    assert not await store.renew(Lease(run.run_id, "a", 300.0)), "a lease taken over is not renewed"
    await store.release(Lease(run.run_id, "b", 200.0))
    await store.claim(run, last_seq, Lease(run.run_id, "c", 300.0), now=0.0)  # released: free at any time


async def test_a_claim_on_a_run_read_before_its_log_moved_on_is_a_step_conflict(store: Store) -> None:
    await _suspended_run(store)
    snapshot = await store.load_session(SESSION)
    assert snapshot is not None and snapshot.last_run is not None
    run = snapshot.last_run
    with pytest.raises(StepConflict):
        await store.claim(run, snapshot.next_seq - 2, Lease(run.run_id, "a", 100.0), now=0.0)
    with pytest.raises(StepConflict):
        await store.claim(
            replace(run, status=RunStatus.FAILED), snapshot.next_seq - 1, Lease(run.run_id, "a", 1.0), 0.0
        )


def test_a_run_leased_error_survives_pickling_whole_as_dbos_records_a_workflows_error() -> None:
    import pickle

    copy = pickle.loads(pickle.dumps(RunLeased("r1", "dbos-workflow:w1", 12.5)))
    assert isinstance(copy, RunLeased)
    assert (copy.run_id, copy.owner, copy.until) == ("r1", "dbos-workflow:w1", 12.5)
    assert str(copy) == str(RunLeased("r1", "dbos-workflow:w1", 12.5))
