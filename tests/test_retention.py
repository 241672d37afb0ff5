"""Retention on every store (memory, SQLite on disk, PostgreSQL): delete a session, expire old ones, `stopwise gc`;
and reading a whole store: walks by key, no session left out without a word."""

from __future__ import annotations

import asyncio
import sqlite3
import uuid
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from _cli_fixtures import stopwise_cmd
from _pgcluster import HOW_TO_ENABLE
from stopwise import MemoryStore, SQLiteStore, Store
from stopwise.errors import ConfigError, RunLeased, StepConflict
from stopwise.messages import Message
from stopwise.result import RunStatus
from stopwise.store.base import EntryKind, Lease, LogEntry, RunRecord
from stopwise.store.retention import Expired

DAY = 86400.0


async def session(store: Store, sid: str, *, steps: int = 2, status: RunStatus = RunStatus.COMPLETED) -> str:
    """A session with one run of ``steps`` steps that ended with ``status``; the run's id."""
    run = RunRecord(f"run-{sid}", sid, "agent")
    await store.start_run(run, LogEntry(sid, 1, run.run_id, 0, EntryKind.INPUT, (Message.user("hi " * 50),)), {})
    for k in range(1, steps + 1):
        reply = LogEntry(sid, k + 1, run.run_id, k, EntryKind.STEP, (Message("assistant", f"step {k} " * 50),))
        last = k == steps
        await store.commit(reply, {"k": k}, replace(run, status=status, steps=k) if last else None)
    return run.run_id


async def backdate(store: Store, sid: str, days: float) -> None:
    """Make ``sid`` look last written ``days`` ago, as a session from that long ago would be on each store."""
    when = datetime.now(UTC).timestamp() - days * DAY
    if isinstance(store, MemoryStore):
        store._sessions[sid].updated_at = when
    elif isinstance(store, SQLiteStore):
        with sqlite3.connect(store.path) as conn:
            conn.execute("UPDATE sessions SET updated_at = ? WHERE session_id = ?", (when, sid))
    else:
        import psycopg

        from stopwise.store.postgres import PostgresStore

        assert isinstance(store, PostgresStore)
        async with await psycopg.AsyncConnection.connect(store.dsn, autocommit=True) as conn:
            await conn.execute(f"UPDATE {store.schema}.sessions SET updated_at = %s WHERE session_id = %s", (when, sid))


async def gone(store: Store, sid: str, run_id: str) -> bool:
    return (
        await store.load_session(sid) is None
        and await store.get_run(run_id) is None
        and await store.list_runs(sid) == []
        and sid not in await store.list_sessions()
    )


def days_ago(days: float) -> datetime:
    return datetime.now(UTC) - timedelta(days=days)


# --- delete_session --------------------------------------------------------------------------------------------


async def test_deleting_a_session_removes_its_runs_and_entries_and_nothing_else(store: Store) -> None:
    doomed = await session(store, "doomed")
    kept = await session(store, "kept")
    assert await store.delete_session("doomed") is True
    assert await gone(store, "doomed", doomed)
    snapshot = await store.load_session("kept")
    assert snapshot is not None and len(snapshot.entries) == 3 and snapshot.state == {"k": 2}
    assert [r.run_id for r in await store.list_runs("kept")] == [kept]
    assert await store.delete_session("doomed") is False, "a session that is not there: False, no error"


async def test_a_deleted_session_id_can_start_over_from_seq_1(store: Store) -> None:
    await session(store, "s")
    await store.delete_session("s")
    await session(store, "s", steps=1)
    snapshot = await store.load_session("s")
    assert snapshot is not None and [e.seq for e in snapshot.entries] == [1, 2]


async def test_a_session_whose_run_holds_a_live_lease_is_refused_whole_until_the_lease_lapses(store: Store) -> None:
    run = RunRecord("r-live", "live", "agent")
    entry = LogEntry("live", 1, run.run_id, 0, EntryKind.INPUT, (Message.user("hi"),))
    await store.start_run(run, entry, {}, Lease(run.run_id, "worker-1", expires_at=1000.0))
    with pytest.raises(RunLeased) as refused:
        await store.delete_session("live", now=999.0)
    assert (refused.value.owner, refused.value.until, refused.value.run_id) == ("worker-1", 1000.0, "r-live")
    assert await store.get_run("r-live") is not None and await store.load_session("live") is not None
    assert await store.delete_session("live", now=1000.0) is True, "a lapsed lease (a crashed worker) holds nothing"
    assert await gone(store, "live", "r-live")


async def test_a_suspended_run_is_deleted_with_its_session_when_asked_by_name(store: Store) -> None:
    run_id = await session(store, "waiting", status=RunStatus.SUSPENDED)
    assert await store.delete_session("waiting") is True
    assert await gone(store, "waiting", run_id)


async def test_a_commit_after_its_session_was_deleted_conflicts_instead_of_leaving_orphan_entries(store: Store) -> None:
    run_id = await session(store, "s")
    await store.delete_session("s")
    with pytest.raises(StepConflict):
        await store.commit(LogEntry("s", 4, run_id, 3, EntryKind.STEP, (Message("assistant", "late"),)), {})
    assert await store.load_session("s") is None


# --- expire_sessions -------------------------------------------------------------------------------------------


async def test_sessions_last_written_before_the_date_are_removed_and_younger_ones_kept(store: Store) -> None:
    old = [await session(store, f"old-{i}", steps=i + 1) for i in range(3)]
    young = await session(store, "young")
    for i in range(3):
        await backdate(store, f"old-{i}", days=40)
    await backdate(store, "young", days=10)
    expired = await store.expire_sessions(days_ago(30))
    # steps + the input entry: 2 + 3 + 4
    assert expired == Expired(sessions=3, runs=3, entries=9, kept_leased=0, kept_suspended=0)
    for i, run_id in enumerate(old):
        assert await gone(store, f"old-{i}", run_id)
    assert [r.run_id for r in await store.list_runs("young")] == [young]
    assert await store.expire_sessions(days_ago(30)) == Expired(0, 0, 0, 0, 0), "nothing left to expire"


async def test_a_dry_run_counts_what_would_go_and_removes_nothing(store: Store) -> None:
    run_id = await session(store, "old", steps=4)
    await backdate(store, "old", days=40)
    assert await store.expire_sessions(days_ago(30), dry_run=True) == Expired(1, 1, 5, 0, 0, dry_run=True)
    assert await store.get_run(run_id) is not None
    snapshot = await store.load_session("old")
    assert snapshot is not None and len(snapshot.entries) == 5


async def test_expiry_keeps_leased_and_suspended_sessions_and_says_so(store: Store) -> None:
    run = RunRecord("r-live", "live", "agent")
    entry = LogEntry("live", 1, run.run_id, 0, EntryKind.INPUT, (Message.user("hi"),))
    await store.start_run(run, entry, {}, Lease(run.run_id, "worker-1", expires_at=1000.0))
    waiting = await session(store, "waiting", status=RunStatus.SUSPENDED)
    crashed = await session(store, "crashed", status=RunStatus.RUNNING)  # no lease: nobody drives it
    for sid in ("live", "waiting", "crashed"):
        await backdate(store, sid, days=40)
    expired = await store.expire_sessions(days_ago(30), now=500.0)
    assert expired == Expired(sessions=1, runs=1, entries=3, kept_leased=1, kept_suspended=1)
    assert await gone(store, "crashed", crashed)
    assert await store.get_run("r-live") is not None and await store.get_run(waiting) is not None
    expired = await store.expire_sessions(days_ago(30), include_suspended=True, now=500.0)
    assert expired == Expired(sessions=1, runs=1, entries=3, kept_leased=1, kept_suspended=0)
    assert await gone(store, "waiting", waiting)
    assert (await store.expire_sessions(days_ago(30), now=1000.0)).sessions == 1, "the lease lapsed"


async def test_a_naive_datetime_is_refused_naming_the_argument(store: Store) -> None:
    with pytest.raises(ConfigError, match="older_than"):
        await store.expire_sessions(datetime(2026, 1, 1))


async def test_every_session_is_walked_in_key_order_one_batch_at_a_time(store: Store) -> None:
    ids = [f"s{i:03}" for i in range(7)]
    for sid in reversed(ids):
        await session(store, sid, steps=1)
    batches = [b async for b in store.iter_sessions(batch=3)]
    assert batches == [ids[0:3], ids[3:6], ids[6:7]]
    assert await store.count_sessions() == 7


# --- SQLite: the file shrinks; PostgreSQL: the rows are gone ---------------------------------------------------


def _bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))


async def test_sqlite_gives_the_space_of_expired_sessions_back_to_the_file_system(tmp_path: Path) -> None:
    path = tmp_path / "big.db"
    async with SQLiteStore(path) as store:
        for i in range(120):
            await session(store, f"s{i:03}", steps=6)
        for i in range(100):
            await backdate(store, f"s{i:03}", days=40)
        before = _bytes(path)
        expired = await store.expire_sessions(days_ago(30))
        after = _bytes(path)
        assert expired.sessions == 100
        assert after < before * 0.4, f"{before} -> {after} bytes: the file (with its WAL) did not shrink"
        assert await store.count_sessions() == 20
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert conn.execute("SELECT COUNT(*) FROM log").fetchone()[0] == 20 * 7


async def test_postgres_expiry_deletes_the_rows_of_every_table(pg_dsn: str | None) -> None:
    if pg_dsn is None:
        pytest.skip(HOW_TO_ENABLE)
    import psycopg

    from stopwise.store.postgres import PostgresStore

    async with PostgresStore(pg_dsn, schema=f"t_{uuid.uuid4().hex[:12]}", max_size=2) as store:
        await session(store, "old", steps=3)
        await session(store, "young", steps=3)
        await backdate(store, "old", days=40)
        await store.expire_sessions(days_ago(30))
        async with await psycopg.AsyncConnection.connect(pg_dsn) as conn:
            for table in ("log", "runs", "sessions"):
                sql = f"SELECT session_id, COUNT(*) FROM {store.schema}.{table} GROUP BY session_id"
                rows = await (await conn.execute(sql)).fetchall()
                assert dict(rows) == {"young": 4 if table == "log" else 1}, table


# --- stopwise gc -----------------------------------------------------------------------------------------------


async def _aged_db(path: Path) -> None:
    """Four sessions: two written 40 days ago, one of them suspended; one 10 days ago; one now."""
    async with SQLiteStore(path) as store:
        await session(store, "old", steps=3)
        await session(store, "old-waiting", status=RunStatus.SUSPENDED)
        await session(store, "recent")
        await session(store, "now")
        for sid, days in (("old", 40), ("old-waiting", 40), ("recent", 10)):
            await backdate(store, sid, days)


def _sessions(path: Path) -> set[str]:
    with sqlite3.connect(path) as conn:
        return {r[0] for r in conn.execute("SELECT session_id FROM sessions")}


async def test_gc_dry_run_prints_what_would_go_and_leaves_the_file_as_it_was(tmp_path: Path) -> None:
    await _aged_db(tmp_path / "log.db")
    done = stopwise_cmd("gc", "--db", "log.db", "--older-than", "30d", "--dry-run", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "would remove 1 sessions (1 runs, 4 log entries) last written before" in done.stdout
    assert "1 with a run suspended for approval (--include-suspended removes them)" in done.stdout
    assert _sessions(tmp_path / "log.db") == {"old", "old-waiting", "recent", "now"}


async def test_gc_removes_sessions_older_than_an_age_or_a_date_and_reports_the_file_size(tmp_path: Path) -> None:
    await _aged_db(tmp_path / "log.db")
    done = stopwise_cmd("gc", "--db", "log.db", "--older-than", "30d", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("removed 1 sessions (1 runs, 4 log entries)"), done.stdout
    assert "log.db: " in done.stdout and " -> " in done.stdout
    assert _sessions(tmp_path / "log.db") == {"old-waiting", "recent", "now"}
    date = (datetime.now(UTC) - timedelta(days=5)).date().isoformat()
    done = stopwise_cmd("gc", "--db", "log.db", "--older-than", date, "--include-suspended", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("removed 2 sessions"), done.stdout
    assert _sessions(tmp_path / "log.db") == {"now"}


def test_gc_with_an_unreadable_age_names_the_flag_and_exits_2(tmp_path: Path) -> None:
    with SQLiteStore(tmp_path / "log.db"):
        pass
    done = stopwise_cmd("gc", "--db", "log.db", "--older-than", "last week", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.startswith("stopwise gc: error: --older-than 'last week': expected an ISO date"), done.stderr


async def test_a_walk_over_every_session_loads_each_once_and_reports_progress(store: Store) -> None:
    from stopwise.store.walk import every_session

    for i in range(5):
        await session(store, f"s{i}", steps=1)
    seen: list[tuple[int, int]] = []
    walked = [s.session_id async for s in every_session(store, progress=lambda d, t: seen.append((d, t)), batch=2)]
    assert walked == [f"s{i}" for i in range(5)]
    assert seen == [(d, 5) for d in range(1, 6)]


@pytest.mark.parametrize(
    ("query", "params", "index"),
    [
        ("SESSIONS_BEFORE", {"cutoff": 0.0}, "sessions_by_update"),
        ("HOLDS_BEFORE", {"cutoff": 0.0}, "runs_by_session"),
        ("HOLDS_OF_SESSION", {"session_id": "s"}, "runs_by_session"),
        ("SESSIONS_AFTER", {"after": "", "limit": 10}, "sqlite_autoindex_sessions_1"),
    ],
)
def test_retention_and_walks_find_their_rows_by_an_index_never_by_a_scan(
    tmp_path: Path, query: str, params: dict[str, object], index: str
) -> None:
    from stopwise.store import _sql

    with SQLiteStore(tmp_path / "log.db"):
        pass
    with sqlite3.connect(tmp_path / "log.db") as conn:
        plan = " ".join(str(row[-1]) for row in conn.execute("EXPLAIN QUERY PLAN " + getattr(_sql, query), params))
    assert index in plan and "SCAN sessions" not in plan and "SCAN runs" not in plan, plan


async def test_the_served_runs_page_says_how_many_sessions_it_leaves_out(tmp_path: Path) -> None:
    from stopwise._cli.serve import _SESSIONS_LISTED, Viewer

    path = tmp_path / "log.db"
    async with SQLiteStore(path) as store:
        for i in range(_SESSIONS_LISTED + 2):
            await session(store, f"s{i:03}", steps=1)
    page = await asyncio.to_thread(Viewer(path, {}, "csrf").runs_page)
    assert f"the {_SESSIONS_LISTED} most recently written sessions of {_SESSIONS_LISTED + 2}" in page
    assert page.count("data-run=") == _SESSIONS_LISTED
