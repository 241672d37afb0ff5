"""Crash safety: a real child process is killed with SIGKILL at every point of a run, between steps and
inside commits; ``retry()`` then finishes each run with the transcript of an uninterrupted one.

Kill points are counted in the child: each model call, each tool call and each SQL statement the store
executes (via SQLite's statement trace, which fires as a statement starts, so a kill at ``COMMIT`` leaves
that transaction uncommitted).
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import signal
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from stopwise import (
    Agent,
    Continue,
    FunctionModel,
    Message,
    Reply,
    RetryNotAllowed,
    RunContext,
    Runner,
    RunResult,
    SQLiteStore,
    StopGuard,
    StopGuardContext,
    ToolCall,
    tool,
)
from stopwise._results import result_from_log
from stopwise.approvals import Approve
from stopwise.models import ModelRequest
from stopwise.store import _sql
from stopwise.store.base import EntryKind, SessionSnapshot

SESSION = "crash"
LEASE = 60.0
"""The child's lease on its run. A killed child never drops it, so recovery runs on a clock past it (a crashed
run is continued once its lease has lapsed)."""


def _after_lease() -> float:
    return time.time() + LEASE


_ticks = {"n": 0, "kill_at": 0}


def _tick_statement(sql: str) -> None:
    # Dropping the lease comes after the run's last commit: a kill there leaves a completed run, nothing to
    # recover, so it is not a kill point here (the lease races are tested in test_leases.py).
    if not sql.startswith(_sql.RELEASE_LEASE.split(":")[0]):  # the trace shows the statement with its values
        _tick()


def _tick() -> None:
    _ticks["n"] += 1
    if _ticks["n"] == _ticks["kill_at"]:
        os.kill(os.getpid(), signal.SIGKILL)


@tool
def add(n: int, ctx: RunContext) -> str:
    """Add n to the running total in state."""
    _tick()
    ctx.state["total"] = ctx.state.get("total", 0) + n
    return f"added {n}"


def _reply(request: ModelRequest) -> Reply:
    """Depends only on the messages, so a re-run step gets the same reply."""
    _tick()
    steps = sum(1 for m in request.messages if m.role == "assistant")
    if steps >= 8:
        results = [m.content for m in request.messages if m.role == "tool"]
        return Reply(f"done after {len(results)} additions")
    width = 2 if steps % 3 == 1 else 1  # some steps call tools in parallel
    return Reply(tool_calls=[ToolCall("add", {"n": steps * 10 + j}, id=f"s{steps}c{j}") for j in range(width)])


AGENT = Agent("adder", "Add things.", FunctionModel(_reply), tools=[add], max_steps=20)


def _draft_reply(request: ModelRequest) -> Reply:
    _tick()
    drafts = sum(1 for m in request.messages if m.role == "assistant")
    if drafts == 0:
        return Reply(tool_calls=[ToolCall("add", {"n": 1}, id="first")])
    return Reply(f"draft {drafts}")


def _insist(ctx: StopGuardContext) -> Continue:
    """Never satisfied: continues until its budget is spent, writing state each time."""
    _tick()
    ctx.update_state(lambda d: d.update(consulted=d.get("consulted", 0) + 1))
    return Continue(f"not yet ({ctx.continues_used})")


GUARDED = Agent(
    "guarded",
    "Draft things.",
    FunctionModel(_draft_reply),
    tools=[add],
    max_steps=20,
    stop_guard=StopGuard(_insist, max_continues=2),
)
_ledger = {"path": ""}
"""The payment provider's ledger (a file): ``ask``, ``attempt`` and ``paid`` lines."""


def _log(line: str) -> None:
    with open(_ledger["path"], "a") as f:
        f.write(line + "\n")


def _effect_once(ctx: RunContext) -> None:
    """An effect outside the log, done once per idempotency key (the tool author's half); a kill point before
    and after it."""
    _tick()
    key = ctx.idempotency_key
    _log(f"attempt {key}")
    if f"paid {key}" not in Path(_ledger["path"]).read_text().splitlines():
        _log(f"paid {key}")
    _tick()


@tool
def pay(amount: int, ctx: RunContext) -> str:
    """Pay an amount: an effect outside the log, done once per idempotency key (the tool author's half)."""
    _effect_once(ctx)
    return f"paid {amount}"


def _pay_reply(request: ModelRequest) -> Reply:
    """Like a real provider, mints new call ids on every call: asking again would change the idempotency keys."""
    _tick()
    asked = sum(1 for m in request.messages if m.role == "assistant")
    _log(f"ask {asked}")
    plan = [[10, 20], [30]]
    if asked >= len(plan):
        return Reply(f"made {asked} payment steps")
    return Reply(tool_calls=[ToolCall("pay", {"amount": a}, id=f"call_{uuid.uuid4().hex[:12]}") for a in plan[asked]])


PAYER = Agent("payer", "Pay things.", FunctionModel(_pay_reply), tools=[pay], max_steps=10)
SCENARIOS = {"adder": AGENT, "guarded": GUARDED, "payer": PAYER}


def _child(db: str, kill_at: int, scenario: str = "adder", ledger: str = "") -> None:
    _ticks["kill_at"] = kill_at
    _ledger["path"] = ledger
    store = SQLiteStore(db)
    store._conn.set_trace_callback(_tick_statement)
    runner = Runner(store, lease_seconds=LEASE)
    asyncio.run(runner.run(SCENARIOS[scenario], "go", session_id=SESSION, state={"total": 0}))


def _shape(messages: tuple[Message, ...] | list[Message]) -> list[tuple[Any, ...]]:
    return [(m.role, m.content, m.tool_calls, m.tool_call_id, dict(m.metadata)) for m in messages]


def _assert_log_whole(snapshot: SessionSnapshot) -> None:
    """Entries are gap-free and each step commits once with its reply and one result per call: in one STEP
    entry, or in a write-ahead INTENT and the SETTLE right after it (the last intent may still lack it)."""
    entries = snapshot.entries
    assert [e.seq for e in entries] == list(range(1, len(entries) + 1))
    steps = [e.step for e in entries if e.kind in (EntryKind.STEP, EntryKind.SETTLE)]
    assert steps == list(range(1, len(steps) + 1)), "a step was lost or duplicated"
    for i, e in enumerate(entries):
        if e.kind is EntryKind.STEP:
            reply, *rows = e.messages
        elif e.kind is EntryKind.INTENT:
            if i + 1 == len(entries):
                continue  # killed before its results committed: retry carries it out
            results = entries[i + 1]
            assert results.kind is EntryKind.SETTLE and results.step == e.step, "an intent's results went missing"
            (reply,), rows = e.messages, list(results.messages)
        else:
            continue
        results = [r for r in rows if r.role == "tool"]
        assert reply.role == "assistant" and len(results) == len(reply.tool_calls)
        assert [r.tool_call_id for r in results] == [c.id for c in reply.tool_calls]
        assert all(r.role == "tool" or r.metadata.get("automated") for r in rows)


async def _reference(tmp_path: Path, agent: Agent = AGENT) -> RunResult:
    store = SQLiteStore(tmp_path / f"reference-{agent.name}.db")
    result = await Runner(store).run(agent, "go", session_id=SESSION, state={"total": 0})
    await store.close()
    return result


async def _count_ticks(tmp_path: Path, agent: Agent = AGENT) -> int:
    _ticks.update(n=0, kill_at=0)
    store = SQLiteStore(tmp_path / f"count-{agent.name}.db")
    store._conn.set_trace_callback(_tick_statement)
    await Runner(store).run(agent, "go", session_id=SESSION, state={"total": 0})
    await store.close()
    return _ticks["n"]


async def _recover(db: Path, agent: Agent = AGENT) -> tuple[SessionSnapshot | None, RunResult]:
    store = SQLiteStore(db)
    runner = Runner(store, clock=_after_lease)
    try:
        before = await store.load_session(SESSION)
        if before is None or before.last_run is None:
            # Killed before the run was recorded: nothing to continue, so the caller starts it again.
            result = await runner.run(agent, "go", session_id=SESSION, state={"total": 0})
        else:
            _assert_log_whole(before)
            result = await runner.retry(agent, SESSION)
        after = await store.load_session(SESSION)
        assert after is not None
        _assert_log_whole(after)
        return before, result
    finally:
        await store.close()


@pytest.mark.slow
def test_sigkill_at_every_point_then_retry_matches_an_uninterrupted_run(tmp_path: Path) -> None:
    reference = asyncio.run(_reference(tmp_path))
    assert reference.status == "completed" and reference.steps == 9
    total = asyncio.run(_count_ticks(tmp_path))
    assert total >= 50, f"only {total} kill points"

    ctx = multiprocessing.get_context("forkserver")
    retried = 0
    for kill_at in range(1, total + 1):
        db = tmp_path / f"kill-{kill_at}.db"
        child = ctx.Process(target=_child, args=(str(db), kill_at))
        child.start()
        child.join(30)
        assert child.exitcode == -signal.SIGKILL, f"kill point {kill_at}: child exited {child.exitcode}"

        before, result = asyncio.run(_recover(db))
        retried += before is not None and before.last_run is not None
        assert result.status == "completed", f"kill point {kill_at}: {result.error}"
        assert _shape(result.messages) == _shape(reference.messages), f"kill point {kill_at}: transcript differs"
        assert dict(result.state) == dict(reference.state)
        assert result.output == reference.output
        if before is not None and before.last_run is not None:
            assert result.run_id == before.last_run.run_id
    assert retried >= 50, f"only {retried} kill points left a run to retry"


@pytest.mark.slow
def test_sigkill_around_stop_guard_commits_then_retry_lands_guard_rows_once(tmp_path: Path) -> None:
    """The guard's rows and writes ride the reply's commit: a kill before it re-runs the step and the guard,
    a kill after it never repeats them, and the exhausted budget survives the crash."""
    reference = asyncio.run(_reference(tmp_path, GUARDED))
    assert reference.completion_reason == "stop_guard_exhausted" and reference.steps == 4
    assert reference.stop_guard is not None and reference.stop_guard.continues_used == 2
    total = asyncio.run(_count_ticks(tmp_path, GUARDED))
    ctx = multiprocessing.get_context("forkserver")
    for kill_at in range(1, total + 1):
        db = tmp_path / f"guarded-{kill_at}.db"
        child = ctx.Process(target=_child, args=(str(db), kill_at, "guarded"))
        child.start()
        child.join(30)
        assert child.exitcode == -signal.SIGKILL, f"kill point {kill_at}: child exited {child.exitcode}"
        _, result = asyncio.run(_recover(db, GUARDED))
        assert _shape(result.messages) == _shape(reference.messages), f"kill point {kill_at}"
        guard_rows = [m for m in result.messages if m.metadata.get("source") == "stop_guard"]
        assert len(guard_rows) == 2, f"kill point {kill_at}: guard rows {len(guard_rows)}"
        assert result.stop_guard == reference.stop_guard, f"kill point {kill_at}"
        assert result.completion_reason == "stop_guard_exhausted"
        assert dict(result.state) == dict(reference.state) == {"total": 1, "consulted": 3}


def test_retry_after_the_run_completed_in_the_child_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "done.db"
    ctx = multiprocessing.get_context("forkserver")
    child = ctx.Process(target=_child, args=(str(db), 10**9))
    child.start()
    child.join(30)
    assert child.exitcode == 0

    async def check() -> None:
        store = SQLiteStore(db)
        try:
            with pytest.raises(RetryNotAllowed):
                await Runner(store).retry(AGENT, SESSION)
        finally:
            await store.close()

    asyncio.run(check())


def _canonical(messages: tuple[Message, ...] | list[Message]) -> list[tuple[Any, ...]]:
    """The transcript with each call id replaced by its order of appearance (the provider mints random ids)."""
    ids: dict[str, str] = {}

    def name(call_id: str | None) -> str | None:
        return None if call_id is None else ids.setdefault(call_id, f"#{len(ids)}")

    return [
        (m.role, m.content, [(name(c.id), c.name, c.args) for c in m.tool_calls], name(m.tool_call_id))
        for m in messages
    ]


def _open_intent(snapshot: SessionSnapshot | None) -> int | None:
    """The step whose intent is the log's last entry (its results not committed), if any."""
    if snapshot is None or not snapshot.entries or snapshot.entries[-1].kind is not EntryKind.INTENT:
        return None
    return snapshot.entries[-1].step


def _load(db: Path) -> SessionSnapshot:
    async def load() -> SessionSnapshot:
        store = SQLiteStore(db)
        try:
            snapshot = await store.load_session(SESSION)
        finally:
            await store.close()
        assert snapshot is not None
        return snapshot

    return asyncio.run(load())


@pytest.mark.slow
def test_sigkill_between_intent_and_results_runs_each_call_once_with_its_recorded_id(tmp_path: Path) -> None:
    """Write-ahead: a step's reply and planned calls commit before any tool runs. A kill anywhere, and above all
    between that intent and the results' commit, then ``retry()``: the recorded calls run again with the same
    ids (so the same ``idempotency_key``), the model is not asked that step again, a tool that dedupes on the key
    pays each amount exactly once, and the transcript is the uninterrupted run's."""
    _ledger["path"] = str(tmp_path / "reference.ledger")
    reference = asyncio.run(_reference(tmp_path, PAYER))
    assert reference.status == "completed" and reference.steps == 3
    _ledger["path"] = str(tmp_path / "count.ledger")
    total = asyncio.run(_count_ticks(tmp_path, PAYER))

    ctx = multiprocessing.get_context("forkserver")
    between = reattempted = 0
    for kill_at in range(1, total + 1):
        db, ledger = tmp_path / f"pay-{kill_at}.db", tmp_path / f"pay-{kill_at}.ledger"
        ledger.touch()
        child = ctx.Process(target=_child, args=(str(db), kill_at, "payer", str(ledger)))
        child.start()
        child.join(30)
        assert child.exitcode == -signal.SIGKILL, f"kill point {kill_at}: child exited {child.exitcode}"

        _ledger["path"] = str(ledger)
        before, result = asyncio.run(_recover(db, PAYER))
        assert result.status == "completed", f"kill point {kill_at}: {result.error}"
        assert _canonical(result.messages) == _canonical(reference.messages), f"kill point {kill_at}"
        lines = ledger.read_text().splitlines()
        paid = [line.split()[1] for line in lines if line.startswith("paid ")]
        calls = [(e.step, c) for e in _load(db).entries for m in e.messages for c in m.tool_calls]
        keys = [f"{result.run_id}:{step}:{c.id}" for step, c in calls]
        assert sorted(paid) == sorted(keys) and len(paid) == 3, f"kill point {kill_at}: paid {paid}, calls {keys}"
        step = _open_intent(before)
        if step is not None:
            between += 1
            asks = [line for line in lines if line == f"ask {step - 1}"]
            assert len(asks) == 1, f"kill point {kill_at}: the model was asked step {step} again"
            attempts = [line.split()[1] for line in lines if line.startswith("attempt ")]
            reattempted += len(attempts) > len(set(attempts))
    assert between >= 4, f"only {between} kill points fell between an intent and its results"
    assert reattempted >= 1, "no kill point re-ran a call whose effect had already happened"


@tool(needs_approval=True)
def sign(doc: str, ctx: RunContext) -> str:
    """Sign a document (a human approves each call): an effect outside the log, done once per key."""
    _effect_once(ctx)
    return f"signed {doc}"


def _sign_reply(request: ModelRequest) -> Reply:
    """A payment that needs no approval and two signatures that do, in one batch (fresh ids on every call)."""
    _tick()
    asked = sum(1 for m in request.messages if m.role == "assistant")
    _log(f"ask {asked}")
    if asked >= 1:
        return Reply(f"{sum(1 for m in request.messages if m.role == 'tool')} results read")
    calls = [ToolCall("pay", {"amount": 10}), ToolCall("sign", {"doc": "a"}), ToolCall("sign", {"doc": "b"})]
    return Reply(tool_calls=[ToolCall(c.name, c.args, id=f"call_{uuid.uuid4().hex[:12]}") for c in calls])


SIGNER = Agent("signer", "Sign things.", FunctionModel(_sign_reply), tools=[pay, sign], run_unapproved_siblings=True)


async def _drive_signer(runner: Runner, result: RunResult | None) -> RunResult:
    """Settle the signer's pending calls one resume at a time (in pieces), in the order they are pending."""
    if result is None:
        result = await runner.run(SIGNER, "go", session_id=SESSION)
    while result.status == "suspended":
        result = await runner.resume(SIGNER, SESSION, {result.pending[0].call_id: Approve()})
    return result


def _child_signer(db: str, kill_at: int, ledger: str) -> None:
    _ticks["kill_at"] = kill_at
    _ledger["path"] = ledger
    store = SQLiteStore(db)
    store._conn.set_trace_callback(_tick_statement)
    asyncio.run(_drive_signer(Runner(store, lease_seconds=LEASE), None))


async def _recover_signer(db: Path) -> RunResult:
    """Whatever the kill left: start the run, carry out an intent (retry), or settle what is still pending."""
    async with SQLiteStore(db) as store:
        runner = Runner(store, clock=_after_lease)
        snapshot = await store.load_session(SESSION)
        last = None if snapshot is None else snapshot.last_run
        if last is None:
            return await _drive_signer(runner, None)
        if last.status == "running":
            return await _drive_signer(runner, await runner.retry(SIGNER, SESSION))
        assert snapshot is not None
        return await _drive_signer(runner, result_from_log(SIGNER, snapshot, last))


@pytest.mark.slow
def test_sigkill_while_siblings_run_and_between_approval_pieces_runs_each_call_once(tmp_path: Path) -> None:
    """The new crash points of issue 12 point 5: the siblings' intent before the suspension commits, and each
    piece of decisions between claim and commit. Recovery carries the intent out or sends the same pieces again:
    every effect happens once per key, and the transcript is the uninterrupted run's."""
    _ledger["path"] = str(tmp_path / "reference.ledger")
    Path(_ledger["path"]).touch()
    reference = asyncio.run(_drive_signer(Runner(SQLiteStore(tmp_path / "reference.db")), None))
    assert reference.status == "completed" and reference.text == "3 results read"
    _ledger["path"] = str(tmp_path / "count.ledger")
    Path(_ledger["path"]).touch()
    _ticks.update(n=0, kill_at=0)
    store = SQLiteStore(tmp_path / "count.db")
    store._conn.set_trace_callback(_tick_statement)
    asyncio.run(_drive_signer(Runner(store), None))
    total = _ticks["n"]
    assert total >= 30, f"only {total} kill points"

    ctx = multiprocessing.get_context("forkserver")
    for kill_at in range(1, total + 1):
        db, ledger = tmp_path / f"sign-{kill_at}.db", tmp_path / f"sign-{kill_at}.ledger"
        ledger.touch()
        child = ctx.Process(target=_child_signer, args=(str(db), kill_at, str(ledger)))
        child.start()
        child.join(30)
        assert child.exitcode == -signal.SIGKILL, f"kill point {kill_at}: child exited {child.exitcode}"
        _ledger["path"] = str(ledger)
        result = asyncio.run(_recover_signer(db))
        assert result.status == "completed", f"kill point {kill_at}: {result.error}"
        assert _canonical(result.messages) == _canonical(reference.messages), f"kill point {kill_at}"
        paid = [line.split()[1] for line in ledger.read_text().splitlines() if line.startswith("paid ")]
        calls = [c for m in result.messages for c in m.tool_calls]
        assert sorted(paid) == sorted(f"{result.run_id}:1:{c.id}" for c in calls), f"kill point {kill_at}"
