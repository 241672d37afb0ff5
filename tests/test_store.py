"""Stores: one contract for memory and SQLite; atomic steps, conflicts, schema versions, durability settings."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
from pathlib import Path

import pytest

from stopwise import (
    Agent,
    Message,
    Reply,
    RunContext,
    Runner,
    ScriptedModel,
    SQLiteStore,
    Store,
    StoreError,
    ToolCall,
    tool,
)
from stopwise.errors import SchemaTooNew, StateNotSerializable, StepConflict
from stopwise.result import RunStatus
from stopwise.store._checkpoint import BACKSTOP_FRAMES, JOURNAL_LIMIT_BYTES, Checkpointer
from stopwise.store._schema import LATEST, MIGRATIONS
from stopwise.store.base import EntryKind, LogEntry, RunRecord


def entry(seq: int, text: str = "x", run_id: str = "r1") -> LogEntry:
    return LogEntry("s", seq, run_id, seq, EntryKind.STEP, (Message("assistant", text),))


async def started(store: Store) -> None:
    await store.start_run(
        RunRecord("r1", "s", "a", RunStatus.RUNNING),
        LogEntry("s", 1, "r1", 0, EntryKind.INPUT, (Message.user("hi"),)),
        {},
    )


async def test_log_is_keyed_by_session_and_seq_and_a_taken_seq_conflicts(store: Store) -> None:
    await started(store)
    await store.commit(entry(2), {"n": 1})
    with pytest.raises(StepConflict):
        await store.commit(entry(2, "duplicate"), {"n": 2})
    snapshot = await store.load_session("s")
    assert snapshot is not None
    assert [m.content for m in snapshot.messages()] == ["hi", "x"]
    assert snapshot.state == {"n": 1}  # the conflicting commit wrote nothing


async def test_a_gap_in_seq_conflicts(store: Store) -> None:
    await started(store)
    with pytest.raises(StepConflict):
        await store.commit(entry(5), {})


async def test_a_start_refused_for_its_seq_leaves_no_session_and_no_run(store: Store) -> None:
    # A new session's first entry must be seq 1: refused, the start writes nothing (the memory store as on disk).
    with pytest.raises(StepConflict):
        await store.start_run(RunRecord("r1", "s", "a", RunStatus.RUNNING), entry(2), {"n": 1})
    assert await store.load_session("s") is None and await store.get_run("r1") is None
    assert await store.list_sessions() == []


async def test_step_and_terminal_run_record_commit_together(store: Store) -> None:
    await started(store)
    done = RunRecord("r1", "s", "a", RunStatus.COMPLETED, steps=1, text="x")
    await store.commit(entry(2), {"k": "v"}, done)
    run = await store.get_run("r1")
    assert run is not None and run.status == "completed" and run.steps == 1
    snapshot = await store.load_session("s")
    assert snapshot is not None and snapshot.last_run == run and snapshot.state == {"k": "v"}


async def test_unserialisable_state_is_refused_before_anything_is_written(store: Store) -> None:
    await started(store)
    with pytest.raises(StateNotSerializable):
        await store.commit(entry(2), {"bad": object()})
    snapshot = await store.load_session("s")
    assert snapshot is not None and snapshot.next_seq == 2


async def test_a_tool_writing_unserialisable_state_fails_the_run_and_keeps_committed_steps(store: Store) -> None:
    @tool
    def poison(ctx: RunContext) -> str:
        """Put something unserialisable in state."""
        ctx.state["bad"] = object()
        return "done"

    @tool
    def fine() -> str:
        """Do nothing."""
        return "ok"

    model = ScriptedModel([Reply(tool_calls=[ToolCall("fine", {})]), Reply(tool_calls=[ToolCall("poison", {})])])
    result = await Runner(store).run(Agent("p", "", model, tools=[poison, fine]), "go", session_id="s")
    assert result.status == "failed" and result.error is not None and result.error.code == "state_invalid"
    snapshot = await store.load_session("s")
    assert snapshot is not None and [m.role for m in snapshot.messages()] == ["user", "assistant", "tool"]
    assert snapshot.last_run is not None and snapshot.last_run.status == "failed"


async def test_runs_are_listed_oldest_first(store: Store) -> None:
    runner = Runner(store)
    a = Agent("a", "", ScriptedModel(["1", "2", "3"]))
    ids = [(await runner.run(a, "go", session_id="s")).run_id for _ in range(3)]
    assert [r.run_id for r in await store.list_runs("s")] == ids
    assert await store.list_runs("missing") == []
    assert await store.load_session("missing") is None


async def test_sqlite_log_survives_reopening(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    store = SQLiteStore(path)
    result = await Runner(store).run(Agent("a", "", ScriptedModel(["bye"])), "hello", session_id="s")
    await store.close()
    reopened = SQLiteStore(path)
    snapshot = await reopened.load_session("s")
    await reopened.close()
    assert snapshot is not None and tuple(snapshot.messages()) == result.messages
    assert snapshot.last_run is not None and snapshot.last_run.completion_reason == "final_answer"


def _updated_at(path: Path, session_id: str = "s") -> float:
    conn = sqlite3.connect(path)
    try:
        return float(conn.execute("SELECT updated_at FROM sessions WHERE session_id = ?", (session_id,)).fetchone()[0])
    finally:
        conn.close()


def _set_updated_at(path: Path, when: float, session_id: str = "s") -> None:
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("UPDATE sessions SET updated_at = ? WHERE session_id = ?", (when, session_id))
    conn.close()


async def test_sqlite_session_time_moves_at_most_once_a_second_while_the_state_stays(tmp_path: Path) -> None:
    path = tmp_path / "log.db"
    store = SQLiteStore(path)
    await started(store)
    recent = time.time() + 3600  # less than a second old at the next commits, however slow the machine
    _set_updated_at(path, recent)
    await store.commit(entry(2), {})
    await store.commit(entry(3), {})
    assert _updated_at(path) == recent  # the same state and a recent time: the log's rows only
    old = time.time() - 5
    _set_updated_at(path, old)
    await store.commit(entry(4), {})
    assert old + 4 < _updated_at(path) < recent  # a second or more old: the commit moves it to its own time
    snapshot = await store.load_session("s")
    await store.close()
    assert snapshot is not None and [e.seq for e in snapshot.entries] == [1, 2, 3, 4]


async def test_sqlite_a_commit_that_changes_the_state_writes_it_and_the_time_at_once(tmp_path: Path) -> None:
    path = tmp_path / "log.db"
    store = SQLiteStore(path)
    await started(store)
    at_start = _updated_at(path)
    await store.commit(entry(2), {"n": 1})  # within the second, but the state changed
    first = await store.load_session("s")
    assert first is not None and first.state == {"n": 1} and _updated_at(path) >= at_start
    _set_updated_at(path, 1000.0)
    await store.commit(entry(3), {"n": 2})
    snapshot = await store.load_session("s")
    await store.close()
    assert snapshot is not None and snapshot.state == {"n": 2} and _updated_at(path) > 1000.0


async def test_sqlite_a_commit_writes_its_state_over_one_another_connection_wrote_meanwhile(tmp_path: Path) -> None:
    path = tmp_path / "log.db"
    ours, other = SQLiteStore(path), SQLiteStore(path)
    await started(ours)
    await other.start_run(RunRecord("r2", "s", "a", RunStatus.RUNNING), None, {"theirs": True})
    await ours.commit(entry(2), {})  # the state this process last wrote, no longer the stored one
    snapshot = await other.load_session("s")
    await ours.close()
    await other.close()
    assert snapshot is not None and snapshot.state == {} and snapshot.next_seq == 3


async def test_sqlite_loads_a_session_another_connection_started_after_it_found_none(tmp_path: Path) -> None:
    path = tmp_path / "log.db"
    reader, writer = SQLiteStore(path), SQLiteStore(path)
    assert await reader.load_session("s") is None
    await started(writer)
    snapshot = await reader.load_session("s")
    await reader.close()
    await writer.close()
    assert snapshot is not None and [m.content for m in snapshot.messages()] == ["hi"]


async def test_a_closed_sqlite_store_refuses_to_load_a_session_it_does_not_have(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "log.db")
    await store.close()
    with pytest.raises(StoreError, match="closed"):
        await store.load_session("missing")


async def test_a_taken_seq_conflicts_when_the_state_is_unchanged_too(store: Store) -> None:
    await started(store)
    await store.commit(entry(2), {})
    with pytest.raises(StepConflict):
        await store.commit(entry(2, "duplicate"), {})
    snapshot = await store.load_session("s")
    assert snapshot is not None and [m.content for m in snapshot.messages()] == ["hi", "x"]


def test_sqlite_uses_wal_and_normal_sync_by_default(tmp_path: Path) -> None:
    SQLiteStore(tmp_path / "a.db")
    conn = sqlite3.connect(tmp_path / "a.db")
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


async def test_sqlite_full_sync_is_applied_when_asked(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "a.db", synchronous="FULL")
    assert store._conn.execute("PRAGMA synchronous").fetchone()[0] == 2
    await store.close()


def test_sqlite_bad_synchronous_value_names_the_field(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="synchronous"):
        SQLiteStore(tmp_path / "a.db", synchronous="OFF")  # type: ignore[arg-type]


def test_sqlite_unopenable_path_raises_store_error(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="cannot open"):
        SQLiteStore(tmp_path / "missing-dir" / "a.db")


async def test_closed_sqlite_store_refuses_work(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "a.db")
    await store.close()
    with pytest.raises(StoreError, match="closed"):
        await store.load_session("s")


async def test_every_store_is_an_async_context_manager_that_closes_it(store: Store) -> None:
    async with store as opened:
        assert opened is store
        await opened.start_run(RunRecord("r1", "s", "a", RunStatus.RUNNING), None, {})
        assert [r.run_id for r in await opened.list_runs("s")] == ["r1"]


async def test_sqlite_store_closes_on_leaving_async_with(tmp_path: Path) -> None:
    async with SQLiteStore(tmp_path / "a.db") as store:
        await store.start_run(RunRecord("r1", "s", "a", RunStatus.RUNNING), None, {})
    with pytest.raises(StoreError, match="closed"):
        await store.load_session("s")


def test_sqlite_store_closes_on_leaving_a_plain_with(tmp_path: Path) -> None:
    with SQLiteStore(tmp_path / "a.db") as store:
        result = Runner(store).run_sync(Agent("a", model=ScriptedModel(["hi"])), "go", session_id="s")
    assert result.ok
    with pytest.raises(StoreError, match="closed"):
        asyncio.run(store.load_session("s"))
    reopened = SQLiteStore(tmp_path / "a.db")  # what was written is on disk
    assert [r.status for r in asyncio.run(reopened.list_runs("s"))] == ["completed"]
    asyncio.run(reopened.close())


async def test_a_runner_closes_its_store_on_leaving_async_with(tmp_path: Path) -> None:
    async with Runner(SQLiteStore(tmp_path / "a.db")) as runner:
        result = await runner.run(Agent("a", model=ScriptedModel(["hi"])), "go")
    assert result.ok
    with pytest.raises(StoreError, match="closed"):
        await runner.store.load_session(result.session_id)


async def test_a_plain_with_runner_inside_a_loop_raises_a_clear_error(tmp_path: Path) -> None:
    runner = Runner(SQLiteStore(tmp_path / "a.db"))
    with pytest.raises(RuntimeError, match="async with"), runner:
        pass
    await runner.close()


def _write_v1_database(path: Path) -> None:
    """A file exactly as schema version 1 wrote it."""
    conn = sqlite3.connect(path, isolation_level=None)
    (version, statements) = MIGRATIONS[0]
    assert version == 1
    for sql in statements:
        conn.execute(sql)
    conn.execute("PRAGMA user_version=1")
    conn.execute("INSERT INTO sessions VALUES ('old', '{\"k\": 1}', 0, 0)")
    conn.execute(
        "INSERT INTO runs (run_id, session_id, agent, status, error, output, text, usage, steps, budget_base, "
        "created_at, updated_at) VALUES ('r-old', 'old', 'a', 'completed', NULL, '\"hi\"', 'hi', NULL, 1, 0, 0, 0)"
    )
    old_rows = [
        (1, 0, "input", [{"role": "user", "content": "q"}]),
        (2, 1, "step", [{"role": "tool", "content": '"quoted"', "tool_call_id": "c"}]),
    ]
    for seq, step, kind, rows in old_rows:
        conn.execute(
            "INSERT INTO log (session_id, seq, run_id, step, kind, messages, created_at) "
            "VALUES ('old', ?, 'r-old', ?, ?, ?, 0)",
            (seq, step, kind, json.dumps(rows)),
        )
    conn.close()


async def test_a_file_written_by_schema_v1_opens_migrates_and_reads(tmp_path: Path) -> None:
    from stopwise import decode_tool_result

    path = tmp_path / "v1.db"
    _write_v1_database(path)
    store = SQLiteStore(path)
    assert store.schema_version == LATEST
    run = await store.get_run("r-old")
    assert run is not None and run.status == "completed" and run.completion_reason is None and run.output == "hi"
    snapshot = await store.load_session("old")
    assert snapshot is not None and snapshot.state == {"k": 1}
    rows = snapshot.messages()
    assert rows[0].content == "q"
    assert decode_tool_result(rows[1]) == "quoted"  # an old unmarked row decodes as JSON
    # And the migrated file takes new runs.
    result = await Runner(store).run(Agent("a", "", ScriptedModel(["more"])), "again", session_id="old")
    assert [m.content for m in result.messages][-2:] == ["again", "more"]
    await store.close()


def test_a_database_with_a_newer_schema_is_refused_untouched(tmp_path: Path) -> None:
    # A newer stopwise keeps a table of its name (the log's); a file with none of them and a high user_version is
    # another program's (tests/test_newcomer_store.py).
    path = tmp_path / "future.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE sessions (id TEXT PRIMARY KEY)")
    conn.execute("CREATE TABLE future_thing (x)")
    conn.execute(f"PRAGMA user_version={LATEST + 1}")
    conn.commit()
    conn.close()
    before = path.read_bytes()
    with pytest.raises(SchemaTooNew, match="upgrade stopwise"):
        SQLiteStore(path)
    assert path.read_bytes() == before


async def test_the_most_recent_sessions_are_listed_by_index_without_sorting_every_session(tmp_path: Path) -> None:
    from stopwise.store._sql import SESSIONS_RECENT

    path = tmp_path / "many.db"
    store = SQLiteStore(path)
    for i in range(3):
        await Runner(store).run(Agent("a", "", ScriptedModel(["ok"])), "hi", session_id=f"s{i}")
    assert await store.list_sessions(2) == ["s2", "s1"]
    await store.close()
    conn = sqlite3.connect(path)
    plan = " ".join(str(row[-1]) for row in conn.execute("EXPLAIN QUERY PLAN " + SESSIONS_RECENT, {"limit": 20}))
    conn.close()
    assert "USING INDEX sessions_by_update" in plan and "TEMP B-TREE" not in plan, plan


def test_migrations_are_numbered_in_order_without_gaps() -> None:
    assert [v for v, _ in MIGRATIONS] == list(range(1, LATEST + 1))


async def test_sessions_are_listed_most_recently_written_first(store: Store) -> None:
    runner = Runner(store)
    a = Agent("a", "", ScriptedModel(["1", "2", "3"]))
    await runner.run(a, "go", session_id="first")
    await runner.run(a, "go", session_id="second")
    await runner.run(a, "go", session_id="first")
    assert await store.list_sessions() == ["first", "second"]
    assert await store.list_sessions(limit=1) == ["first"]


def test_a_file_that_is_not_sqlite_raises_store_error(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("this is not a database, just some text that is long enough to have a header\n" * 20)
    with pytest.raises(StoreError, match="cannot open"):
        SQLiteStore(path)


async def test_entry_records_and_run_report_round_trip(store: Store) -> None:
    await started(store)
    records = ({"type": "stop_guard", "verdict": "continue", "nested": {"a": [1, 2]}},)
    e = LogEntry("s", 2, "r1", 1, EntryKind.STEP, (Message("assistant", "x"),), records=records)
    report = {"stop_guard": {"continues_used": 1, "exhausted": False, "error": None}}
    await store.commit(e, {}, RunRecord("r1", "s", "a", RunStatus.COMPLETED, steps=1, report=report))
    snapshot = await store.load_session("s")
    assert snapshot is not None and snapshot.entries[-1].records == records
    assert snapshot.last_run is not None and snapshot.last_run.report == report


def test_the_checkpoint_thread_copies_the_journal_back_and_the_next_commit_starts_it_over(tmp_path: Path) -> None:
    """Every ``every`` commits a passive checkpoint runs on the checkpoint thread's own connection; once it has
    copied the journal back, the writer's next commit starts the journal from its beginning, so the journal stays
    a few hundred pages long without the writer ever checkpointing (its own autocheckpoint is off here)."""
    path = str(tmp_path / "wal.db")
    writer = sqlite3.connect(path, isolation_level=None)
    writer.execute("PRAGMA journal_mode=WAL")
    writer.execute("PRAGMA wal_autocheckpoint=0")
    writer.execute("CREATE TABLE t (k INTEGER PRIMARY KEY, body TEXT)")
    checkpointer = Checkpointer(path, every=100)
    for k in range(200):
        writer.execute("INSERT INTO t VALUES (?, ?)", (k, "x" * 600))
        checkpointer.committed()
    checkpointer.close()  # waits for the checkpoint queued at the 200th commit
    writer.execute("INSERT INTO t VALUES (200, 'after')")
    probe = sqlite3.connect(path, isolation_level=None)
    ((busy, pages, _),) = probe.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
    assert busy == 0 and pages <= 3, "the journal started over: it holds only the last commit's pages"
    assert probe.execute("SELECT COUNT(*) FROM t").fetchone()[0] == 201
    probe.close()
    writer.close()


def test_a_sqlite_store_leaves_checkpoints_to_its_thread_with_a_higher_backstop(tmp_path: Path) -> None:
    with SQLiteStore(tmp_path / "s.db") as store:
        assert store._conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == BACKSTOP_FRAMES
        assert store._conn.execute("PRAGMA journal_size_limit").fetchone()[0] == JOURNAL_LIMIT_BYTES
