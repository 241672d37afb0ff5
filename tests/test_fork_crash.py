"""A fork killed mid-write (SIGKILL, a real child process), on SQLite and PostgreSQL: afterwards the new session
either does not exist or holds the whole copy and its note, never a part of one, and the source session is as it
was. Either way the user can go on: fork again (nothing was written), or ``retry()`` the complete fork.

Kill points: SQLite, through its statement trace (which fires as a statement starts, so a kill at ``COMMIT``
leaves the transaction uncommitted), at the copy's first entry, its middle one, the note, and the ``COMMIT``;
PostgreSQL, by a trigger that makes the insert of one of the copy's entries wait on a lock the test holds, the
child killed while it waits. And, on both, after the fork committed: at the forked run's first model call.
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

from _pgcluster import HOW_TO_ENABLE
from stopwise import Agent, FunctionModel, Reply, RunContext, Runner, SQLiteStore, Store, ToolCall, tool
from stopwise._fork import incomplete_fork, plan_fork
from stopwise.models import ModelRequest
from stopwise.records import ForkRecord, parse_records
from stopwise.store.base import SessionSnapshot

pytestmark = pytest.mark.slow

STEPS = 150
"""The source run's steps: each writes an intent and its settle, so the copy is about 300 entries."""
LEASE = 60.0
HOLD = 0x5707_F0C4
"""The advisory lock the PostgreSQL trigger waits on while the test holds it."""
_kill = {"inserts": 0, "commit_after": 0, "model": False}
_seen = {"inserts": 0}


@tool
def tick(ctx: RunContext) -> int:
    """Count ticks in state."""
    ctx.state["ticks"] = ctx.state.get("ticks", 0) + 1
    return int(ctx.state["ticks"])


def _reply(request: ModelRequest) -> Reply:
    """Depends only on the messages, so a forked run's steps are the source's; with ``_kill["model"]`` the
    process dies at its first call (the fork has committed by then)."""
    if _kill["model"]:
        os.kill(os.getpid(), signal.SIGKILL)
    done = sum(1 for m in request.messages if m.role == "tool")
    if done < STEPS:
        return Reply(tool_calls=[ToolCall("tick", {}, id=f"c{done}")])
    return Reply(f"ticked {done}")


AGENT = Agent("ticker", "Tick.", FunctionModel(_reply), tools=[tick], max_steps=STEPS + 5)


def _open(kind: str, where: str, schema: str) -> Store:
    if kind == "sqlite":
        return SQLiteStore(where)
    from stopwise.store.postgres import PostgresStore

    return PostgresStore(where, schema=schema, max_size=2)


def _trace(sql: str) -> None:
    if sql.startswith("INSERT INTO log"):
        _seen["inserts"] += 1
        if _seen["inserts"] == _kill["inserts"]:
            os.kill(os.getpid(), signal.SIGKILL)
    elif sql == "COMMIT" and _kill["commit_after"] and _seen["inserts"] >= _kill["commit_after"]:
        os.kill(os.getpid(), signal.SIGKILL)


def _doomed_fork(kind: str, where: str, schema: str, kill: dict[str, Any]) -> None:
    _kill.update(kill)

    async def go() -> None:
        store = _open(kind, where, schema)
        if isinstance(store, SQLiteStore):
            store._conn.set_trace_callback(_trace)
        await Runner(store, lease_seconds=LEASE).fork(AGENT, "s", STEPS - 1, new_session_id="f")

    asyncio.run(go())


async def _source(kind: str, where: str, schema: str) -> tuple[SessionSnapshot, int]:
    """Run the source session; it as written and the number of entries its fork writes."""
    store = _open(kind, where, schema)
    try:
        done = await Runner(store).run(AGENT, "go", session_id="s")
        assert done.status == "completed" and done.steps == STEPS + 1
        snapshot = await store.load_session("s")
        assert snapshot is not None and snapshot.last_run is not None
        return snapshot, len(plan_fork(snapshot, snapshot.last_run, STEPS - 1, "f", "x").entries)
    finally:
        await store.close()


async def _after(kind: str, where: str, schema: str, source: SessionSnapshot, written: int) -> str:
    """What the killed fork left, checked: "none" (and a new fork into the same session completes) or "whole"
    (and ``retry()`` completes it); the source session is as it was either way."""
    store = _open(kind, where, schema)
    try:
        assert await store.load_session("s") == source, "the source session changed"
        forked = await store.load_session("f")
        runner = Runner(store, clock=lambda: time.time() + LEASE + 1, lease_seconds=LEASE)
        if forked is None:
            done = await runner.fork(AGENT, "s", STEPS - 1, new_session_id="f")
            left = "none"
        else:
            run = forked.last_run
            assert run is not None and incomplete_fork(forked, run) is None, "a part of a fork was left"
            assert len(forked.entries) == written, "the fork's copy is not whole"
            *copied, note = forked.entries
            (record,) = parse_records(note.records)
            assert isinstance(record, ForkRecord) and record.source_seq == len(copied)
            assert [e.messages for e in copied] == [e.messages for e in source.entries[: len(copied)]]
            done = await runner.retry(AGENT, "f")
            left = "whole"
        assert done.status == "completed" and done.output == f"ticked {STEPS}"
        return left
    finally:
        await store.close()


def _kill_points(written: int) -> list[tuple[dict[str, Any], str]]:
    """SQLite's kill points, each with what it must leave."""
    return [
        ({"inserts": 1}, "none"),
        ({"inserts": written // 2}, "none"),
        ({"inserts": written}, "none"),  # the note
        ({"commit_after": written}, "none"),
        ({"model": True}, "whole"),
    ]


def _run_child(kind: str, where: str, schema: str, kill: dict[str, Any]) -> None:
    child = multiprocessing.get_context("forkserver").Process(target=_doomed_fork, args=(kind, where, schema, kill))
    child.start()
    child.join(120)
    assert child.exitcode == -signal.SIGKILL, f"{kill}: the child exited {child.exitcode}"


def test_sigkill_mid_fork_on_sqlite_leaves_no_new_session_or_a_whole_one(tmp_path: Path) -> None:
    _, written = asyncio.run(_source("sqlite", str(tmp_path / "count.db"), ""))
    assert written > STEPS
    for i, (kill, expected) in enumerate(_kill_points(written)):
        db = str(tmp_path / f"kill-{i}.db")
        source, _ = asyncio.run(_source("sqlite", db, ""))
        _run_child("sqlite", db, "", kill)
        assert asyncio.run(_after("sqlite", db, "", source, written)) == expected, kill


def _hold_on_insert(dsn: str, schema: str, seq: int) -> None:
    """A trigger that makes the insert of session 'f''s entry ``seq`` wait for the advisory lock ``HOLD``."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"DROP TRIGGER IF EXISTS hold ON {schema}.log")
        conn.execute(
            f"CREATE OR REPLACE FUNCTION {schema}.hold() RETURNS trigger LANGUAGE plpgsql AS "
            f"$$ BEGIN PERFORM pg_advisory_xact_lock({HOLD}); RETURN NEW; END $$"
        )
        conn.execute(
            f"CREATE TRIGGER hold BEFORE INSERT ON {schema}.log FOR EACH ROW "
            f"WHEN (NEW.session_id = 'f' AND NEW.seq = {seq}) EXECUTE FUNCTION {schema}.hold()"
        )


def _kill_while_held(dsn: str, schema: str, seq: int) -> None:
    """Run the doomed fork with the insert of entry ``seq`` held; SIGKILL it while it waits there."""
    import psycopg

    _hold_on_insert(dsn, schema, seq)
    with psycopg.connect(dsn, autocommit=True) as lock:
        lock.execute("SELECT pg_advisory_lock(%s)", (HOLD,))
        child = multiprocessing.get_context("forkserver").Process(
            target=_doomed_fork, args=("postgres", dsn, schema, {})
        )
        child.start()
        try:
            deadline = time.monotonic() + 60
            waiting = "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
            while lock.execute(waiting).fetchone() != (1,):
                assert time.monotonic() < deadline, "the fork never reached the held insert"
                time.sleep(0.01)  # polling another process's progress, not waiting for time to pass
        finally:
            os.kill(child.pid, signal.SIGKILL)
            child.join(60)
        assert child.exitcode == -signal.SIGKILL
        lock.execute("SELECT pg_advisory_unlock(%s)", (HOLD,))
        lock.execute(f"DROP TRIGGER hold ON {schema}.log")


def test_sigkill_mid_fork_on_postgres_leaves_no_new_session_or_a_whole_one(request: pytest.FixtureRequest) -> None:
    dsn = request.getfixturevalue("pg_dsn")
    if dsn is None:
        pytest.skip(HOW_TO_ENABLE)
    # A schema per kill point, each with its own source run.
    schemas = [f"k_{uuid.uuid4().hex[:12]}" for _ in range(4)]
    sources = {schema: asyncio.run(_source("postgres", dsn, schema)) for schema in schemas}
    written = sources[schemas[0]][1]
    *held_in, last = schemas
    for schema, seq in zip(held_in, [1, written // 2, written], strict=True):  # the first entry, a middle one, the note
        _kill_while_held(dsn, schema, seq)
        assert asyncio.run(_after("postgres", dsn, schema, sources[schema][0], written)) == "none", seq
    _run_child("postgres", dsn, last, {"model": True})
    assert asyncio.run(_after("postgres", dsn, last, sources[last][0], written)) == "whole"
