"""Store failures after open are typed (``StoreError`` subclasses naming the operation and the session), a failed
commit leaves the run retryable, and one unreadable entry never takes the rest of the database down (issue 12,
points 1 and 6). SQLite faults are real: a page limit that fills the file, a lock held by another connection, a
value over the length limit; PostgreSQL's are a connection the server terminated."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from stopwise import (
    Agent,
    FunctionModel,
    Reply,
    Runner,
    RunStatus,
    ScriptedModel,
    SQLiteStore,
    StoreError,
    ToolCall,
    tool,
)
from stopwise.approvals import Approve
from stopwise.cli import main as cli
from stopwise.errors import StepConflict
from stopwise.guardian import Guardian
from stopwise.models import ModelRequest
from stopwise.store.base import RunRecord
from test_evals_cli import Unsure


@tool
def fetch(page: int) -> str:
    """A big page of text."""
    return f"page {page}: " + "lorem ipsum " * 2000


def _pager(pages: int) -> Agent:
    def model(request: ModelRequest) -> Reply:
        done = sum(1 for m in request.messages if m.role == "tool")
        return Reply(tool_calls=[ToolCall("fetch", {"page": done})]) if done < pages else Reply("read them all")

    return Agent("pager", "Read every page.", FunctionModel(model), tools=[fetch])


def _pages(store: SQLiteStore) -> int:
    # The store's own connection: max_page_count is a setting of one connection, not of the file.
    return int(store._conn.execute("PRAGMA page_count").fetchone()[0])


def _limit(store: SQLiteStore, pages: int) -> None:
    store._conn.execute(f"PRAGMA max_page_count = {pages}")


async def test_a_full_sqlite_disk_is_store_unavailable_naming_commit_and_the_session_and_retry_continues(
    tmp_path: Path,
) -> None:
    store = SQLiteStore(tmp_path / "log.db")
    runner = Runner(store)
    await runner.run(Agent("warm", "Hi.", ScriptedModel(["hello"])), "hi", session_id="warm")
    _limit(store, _pages(store) + 1)  # room for the run's start, not for its big steps
    with pytest.raises(StoreError) as info:
        await runner.run(_pager(3), "read", session_id="s")
    exc = info.value
    assert type(exc).__name__ == "StoreUnavailable"
    assert exc.operation == "commit" and exc.session_id == "s" and "full" in str(exc)
    record = (await store.list_runs("s"))[-1]
    assert record.status is RunStatus.RUNNING, "the failed commit left the run as a crash leaves it"
    _limit(store, 1_000_000)
    done = await runner.retry(_pager(3), "s")
    assert done.status is RunStatus.COMPLETED and done.text == "read them all"
    tool_rows = [m for m in done.messages if m.role == "tool"]
    assert len(tool_rows) == 3, "the step that failed to commit ran again; the committed ones did not"
    await store.close()


async def test_a_sqlite_database_locked_by_another_connection_is_store_unavailable(tmp_path: Path) -> None:
    path = tmp_path / "log.db"
    store = SQLiteStore(path, busy_timeout=0.05)
    runner = Runner(store)
    await runner.run(Agent("a", "Hi.", ScriptedModel(["hello"])), "hi", session_id="s")
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(StoreError) as info:
            await runner.run(Agent("a", "Hi.", ScriptedModel(["again"])), "hi", session_id="t")
        assert type(info.value).__name__ == "StoreUnavailable" and info.value.operation == "start_run"
        assert "locked" in str(info.value)
    finally:
        other.execute("ROLLBACK")
        other.close()
    await store.close()


async def test_a_value_the_database_refuses_is_store_refused_with_the_operation(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "log.db")
    runner = Runner(store)
    await runner.run(Agent("a", "Hi.", ScriptedModel(["hello"])), "hi", session_id="s")
    # A value over the database's length limit (lowered here, as a deployment's build may set it) is refused data.
    store._conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, 1_000)
    with pytest.raises(StoreError) as info:
        await runner.run(Agent("a", "Hi.", ScriptedModel(["x" * 5_000])), "hi", session_id="s")
    assert type(info.value).__name__ == "StoreRefused"
    assert (info.value.operation, info.value.session_id) == ("commit", "s")
    await store.close()


async def test_a_run_record_whose_session_is_not_on_record_is_a_step_conflict_not_refused_data(
    tmp_path: Path,
) -> None:
    store = SQLiteStore(tmp_path / "log.db")
    orphan = RunRecord("r1", "no-such-session", "a", RunStatus.RUNNING)
    with pytest.raises(StepConflict) as info:
        await store.update_run(orphan)
    assert (info.value.operation, info.value.session_id) == ("update_run", "no-such-session")
    assert await store.get_run("r1") is None
    await store.close()


async def test_a_closed_sqlite_connection_is_store_unavailable_not_a_raw_sqlite_error(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "log.db")
    await Runner(store).run(Agent("a", "Hi.", ScriptedModel(["hello"])), "hi", session_id="s")
    store._conn.close()  # the connection went away under the store (what a closed handle looks like)
    with pytest.raises(StoreError) as info:
        await store.load_session("s")
    assert type(info.value).__name__ == "StoreUnavailable" and info.value.operation == "load_session"
    store._closed = True  # nothing left to close


async def test_a_killed_postgres_connection_is_store_unavailable(pg_dsn: str | None) -> None:
    if pg_dsn is None:
        pytest.skip("PostgreSQL is not installed here")
    import uuid

    import psycopg
    from psycopg.conninfo import make_conninfo

    from stopwise.store.postgres import PostgresStore

    name = f"t_{uuid.uuid4().hex[:12]}"
    dsn = make_conninfo(pg_dsn, application_name=name)  # so that only this store's connections are terminated
    store = PostgresStore(dsn, schema=name, min_size=1, max_size=1)
    await Runner(store).run(Agent("a", "Hi.", ScriptedModel(["hello"])), "hi", session_id="s")
    async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as admin:
        cur = await admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s", (name,)
        )
        assert await cur.fetchall(), "the store's connection was found and terminated"
    with pytest.raises(StoreError) as info:
        await store.load_session("s")
    assert type(info.value).__name__ == "StoreUnavailable"
    assert (info.value.operation, info.value.session_id) == ("load_session", "s")
    await store.close()


# --- one unreadable entry -------------------------------------------------------------------------------------


def _database_with_an_unreadable_session(tmp_path: Path) -> Path:
    """A log with a reviewed guardian run (decisions and a label) in session "good", and a session "bad" whose
    step entry holds a tool call with list arguments, as an older stopwise could commit."""
    db = tmp_path / "log.db"

    async def build() -> None:
        store = SQLiteStore(db)
        try:
            model = FunctionModel(
                lambda r: Reply(tool_calls=[ToolCall("fetch", {"page": r.step})]) if r.step < 3 else Reply("done")
            )
            agent = Agent("a", "Do it.", model, tools=[fetch], guardian=Guardian(Unsure()))
            runner = Runner(store)
            await runner.run(agent, "find it", session_id="good")
            await runner.resume(agent, "good", {"guardian:1": Approve()})
            await runner.run(Agent("b", "Hi.", ScriptedModel(["hello"])), "hi", session_id="bad")
        finally:
            await store.close()

    asyncio.run(build())
    bad = '[{"role": "assistant", "content": "", "tool_calls": [{"name": "x", "args": [1, 2], "id": "c"}]}]'
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE log SET messages = ? WHERE session_id = 'bad' AND seq = 2", (bad,))
    return db


async def test_loading_a_session_with_an_unreadable_entry_names_the_session_the_seq_and_why(tmp_path: Path) -> None:
    db = await asyncio.to_thread(_database_with_an_unreadable_session, tmp_path)
    store = SQLiteStore(db)
    try:
        with pytest.raises(StoreError) as info:
            await store.load_session("bad")
        exc: Any = info.value
        assert type(exc).__name__ == "UnreadableEntry"
        assert (exc.session_id, exc.seq) == ("bad", 2) and "args" in exc.why
        assert await store.load_session("good") is not None
    finally:
        await store.close()


@pytest.mark.parametrize(
    "command",
    [["runs"], ["replay"], ["guardian", "stats"], ["eval"]],
    ids=["runs", "replay", "guardian-stats", "eval-db"],
)
def test_every_cli_command_keeps_working_on_the_rest_of_a_database_with_an_unreadable_entry(
    tmp_path: Path, command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    db = _database_with_an_unreadable_session(tmp_path)
    code = cli([*command, str(db)] if command[0] != "runs" else ["runs", "--db", str(db)])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "Traceback" not in err
    if command[0] != "runs":
        assert "session 'bad'" in err and "log entry 2" in err, "the unreadable entry is reported"
    if command[0] == "runs":
        assert "good" in out and "bad" in out


def _statement_threads(store: SQLiteStore) -> list[str]:
    """The name of the thread that runs each of the store's statements from now on."""
    threads: list[str] = []
    store._conn.set_trace_callback(lambda _sql: threads.append(threading.current_thread().name))
    return threads


@pytest.mark.parametrize("offload", [False, True])
async def test_a_step_commit_runs_on_the_loop_thread_unless_offload_sends_it_to_the_worker(
    tmp_path: Path, offload: bool
) -> None:
    store = SQLiteStore(tmp_path / "log.db", offload=offload)
    runner = Runner(store)
    await runner.run(Agent("a", "Hi.", ScriptedModel(["hello"])), "hi", session_id="s")
    snapshot = await store.load_session("s")
    assert snapshot is not None and snapshot.last_run is not None
    threads = _statement_threads(store)
    entry = replace(snapshot.entries[-1], seq=len(snapshot.entries) + 1)
    await store.commit(entry, {"n": 1})
    assert threads, "the commit ran no statement"
    on_loop = {name == threading.current_thread().name for name in threads}
    assert on_loop == ({False} if offload else {True})
    reread = await store.load_session("s")
    assert reread is not None and reread.entries[-1] == entry and dict(reread.state) == {"n": 1}
    await store.close()


async def test_a_commit_waits_for_another_connections_write_lock_on_the_worker_not_on_the_loop(
    tmp_path: Path,
) -> None:
    path = tmp_path / "log.db"
    store = SQLiteStore(path)
    await Runner(store).run(Agent("a", "Hi.", ScriptedModel(["hello"])), "hi", session_id="s")
    snapshot = await store.load_session("s")
    assert snapshot is not None
    entry = replace(snapshot.entries[-1], seq=len(snapshot.entries) + 1)
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    try:
        committing = asyncio.create_task(store.commit(entry, {"n": 2}))
        await asyncio.sleep(0)  # one turn of the loop: the commit found the lock taken and went to the worker
        assert not committing.done(), "the commit went through while another connection held the write lock"
    finally:
        other.execute("COMMIT")
        other.close()
    await committing  # the loop was free meanwhile; the worker took the lock once it was released
    reread = await store.load_session("s")
    assert reread is not None and reread.entries[-1] == entry and dict(reread.state) == {"n": 2}
    await store.close()
