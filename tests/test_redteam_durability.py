"""Attacks on exactly-once effects, leases, crash recovery and stored logs (round 8's red team).

Each test is an attack someone could make on a real deployment: two workers on one run, a lease that lapses
mid-step, a log written by someone else. Real components: SQLite on disk, PostgreSQL when the test server is
there (the ``store`` fixture), real processes where a crash is the point. Interleavings are forced with events
and clocks passed to the runners, never by sleeping.
"""

from __future__ import annotations

import asyncio

import pytest

from stopwise import Agent, FunctionModel, Reply, Runner, Store
from stopwise.errors import StepConflict
from stopwise.models import ModelRequest
from stopwise.result import RunStatus

LEASE = 60.0


class _Clock:
    """A runner's clock, moved by the test."""

    def __init__(self, now: float = 1_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


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
    clock_a, clock_b = _Clock(), _Clock()
    a = Runner(store, clock=clock_a, lease_seconds=LEASE, owner="a")
    b = Runner(store, clock=clock_b, lease_seconds=LEASE, owner="b")
    first = asyncio.create_task(a.run(agent, "go", session_id="s"))
    await a_asked.wait()
    clock_b.now += LEASE + 1  # A's lease has lapsed by B's clock
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
    clock_b = _Clock()
    a = Runner(store, clock=_Clock(), lease_seconds=LEASE, owner="a")
    b = Runner(store, clock=clock_b, lease_seconds=LEASE, owner="b")
    first = asyncio.create_task(a.run(agent, "go", session_id="s"))
    await a_asked.wait()
    clock_b.now += LEASE + 1
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
    clock_b = _Clock()
    a = Runner(store, clock=_Clock(), lease_seconds=LEASE, owner="a")
    b = Runner(store, clock=clock_b, lease_seconds=LEASE, owner="b")
    first = asyncio.create_task(a.run(agent, "go", session_id="s"))
    await a_asked.wait()
    clock_b.now += LEASE + 1
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
