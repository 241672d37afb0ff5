"""``SQLiteStore``: the log in a SQLite file, the embedded default of the command line.

Durability: WAL journal. With ``synchronous="NORMAL"`` (the default) a commit survives a crash of the
process (SIGKILL included) but the last commits may be rolled back by a power loss or an OS crash; pass
``synchronous="FULL"`` to fsync the WAL on every commit and survive those too, at a cost per step.

All database work runs on one worker thread per store, so the event loop never blocks on disk.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from os import PathLike
from typing import Any, Literal, TypeVar

from stopwise.errors import ConfigError, SchemaTooNew, StepConflict, StoreError
from stopwise.messages import dump_messages, load_messages
from stopwise.result import CompletionReason, RunStatus
from stopwise.store._codec import (
    dump_error,
    dump_json,
    dump_state,
    dump_usage,
    error_from,
    load_json,
    usage_from,
)
from stopwise.store._schema import LATEST, MIGRATIONS
from stopwise.store.base import EntryKind, LogEntry, RunRecord, SessionSnapshot

__all__ = ["SQLiteStore"]

T = TypeVar("T")

_RUN_COLUMNS = (
    "run_id, session_id, agent, status, completion_reason, error, output, text, usage, steps, budget_base, "
    "detail, report"
)
_UPSERT_RUN = f"""
INSERT INTO runs ({_RUN_COLUMNS}, created_at, updated_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)
ON CONFLICT(run_id) DO UPDATE SET status=excluded.status, completion_reason=excluded.completion_reason,
  error=excluded.error, output=excluded.output, text=excluded.text, usage=excluded.usage,
  steps=excluded.steps, budget_base=excluded.budget_base, detail=excluded.detail, report=excluded.report,
  updated_at=excluded.updated_at
"""
# Appends only at the next free seq: a gap or a taken seq inserts nothing and is reported as a conflict.
_INSERT_ENTRY = """
INSERT INTO log (session_id, seq, run_id, step, kind, messages, decision, usage, forced, records, created_at)
SELECT ?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11
WHERE ?2 = (SELECT COALESCE(MAX(seq), 0) + 1 FROM log WHERE session_id = ?1)
"""


def _append(conn: sqlite3.Connection, e: LogEntry, now: float) -> None:
    if conn.execute(_INSERT_ENTRY, _entry_params(e, now)).rowcount != 1:
        raise StepConflict(f"session {e.session_id!r}: seq {e.seq} is not the next free position in the log")


def _run_params(run: RunRecord, now: float) -> tuple[Any, ...]:
    return (
        run.run_id,
        run.session_id,
        run.agent,
        run.status.value,
        None if run.completion_reason is None else run.completion_reason.value,
        dump_error(run.error),
        dump_json(run.output),
        run.text,
        dump_usage(run.usage),
        run.steps,
        run.budget_base,
        run.detail,
        dump_json(run.report) if run.report else None,
        now,
        now,
    )


def _entry_params(e: LogEntry, now: float) -> tuple[Any, ...]:
    return (
        e.session_id,
        e.seq,
        e.run_id,
        e.step,
        e.kind.value,
        dump_messages(e.messages).decode(),
        None if e.decision is None else dump_json(e.decision),
        dump_usage(e.usage),
        int(e.forced),
        dump_json(e.records) if e.records else None,
        now,
    )


def _run_from(row: sqlite3.Row) -> RunRecord:
    reason = row["completion_reason"]
    return RunRecord(
        run_id=row["run_id"],
        session_id=row["session_id"],
        agent=row["agent"],
        status=RunStatus(row["status"]),
        completion_reason=None if reason is None else CompletionReason(reason),
        error=error_from(row["error"]),
        output=load_json(row["output"]),
        text=row["text"],
        usage=usage_from(row["usage"]),
        steps=row["steps"],
        budget_base=row["budget_base"],
        detail=row["detail"],
        report=load_json(row["report"]) or {},
    )


def _entry_from(row: sqlite3.Row) -> LogEntry:
    return LogEntry(
        session_id=row["session_id"],
        seq=row["seq"],
        run_id=row["run_id"],
        step=row["step"],
        kind=EntryKind(row["kind"]),
        messages=load_messages(row["messages"]),
        decision=load_json(row["decision"]),
        usage=None if row["usage"] is None else usage_from(row["usage"]),
        forced=bool(row["forced"]),
        records=tuple(load_json(row["records"]) or ()),
    )


class SQLiteStore:
    """A ``Store`` in one SQLite file. Opening migrates an older schema and refuses a newer one."""

    def __init__(
        self,
        path: str | PathLike[str],
        *,
        synchronous: Literal["NORMAL", "FULL"] = "NORMAL",
        busy_timeout: float = 5.0,
    ) -> None:
        if synchronous not in ("NORMAL", "FULL"):
            raise ConfigError("synchronous", f"must be 'NORMAL' or 'FULL', got {synchronous!r}")
        self.path = str(path)
        try:
            # One worker thread owns all use of the connection; check_same_thread is off only because the
            # connection is opened here, on the caller's thread.
            conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=busy_timeout)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open SQLite database {self.path!r}: {exc}") from exc
        conn.row_factory = sqlite3.Row
        self._conn = conn
        try:
            # The version check comes first: a newer database must not be touched, not even its journal mode.
            self.schema_version = self._migrate()
            conn.execute(f"PRAGMA synchronous={synchronous}")
            conn.execute("PRAGMA foreign_keys=ON")
        except sqlite3.DatabaseError as exc:
            conn.close()
            raise StoreError(f"cannot open SQLite database {self.path!r}: {exc}") from exc
        except BaseException:
            conn.close()
            raise
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="stopwise-sqlite")
        self._closed = False

    def _migrate(self) -> int:
        conn = self._conn
        version: int = conn.execute("PRAGMA user_version").fetchone()[0]
        if version > LATEST:
            raise SchemaTooNew(
                f"{self.path!r} has schema version {version}, newer than this stopwise understands "
                f"({LATEST}); upgrade stopwise to open it (nothing was written)"
            )
        conn.execute("PRAGMA journal_mode=WAL")
        for target, statements in MIGRATIONS:
            if target <= version:
                continue
            conn.execute("BEGIN IMMEDIATE")
            try:
                for sql in statements:
                    conn.execute(sql)
                conn.execute(f"PRAGMA user_version={target}")
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            version = target
        return version

    async def _do(self, fn: Callable[[], T]) -> T:
        if self._closed:
            raise StoreError(f"SQLiteStore {self.path!r} is closed")
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn)

    def _transaction(self, work: Callable[[sqlite3.Connection, float], None]) -> None:
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            work(conn, time.time())
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise

    async def load_session(self, session_id: str) -> SessionSnapshot | None:
        def read() -> SessionSnapshot | None:
            conn = self._conn
            row = conn.execute("SELECT state FROM sessions WHERE session_id=?", (session_id,)).fetchone()
            if row is None:
                return None
            entries = tuple(
                _entry_from(r) for r in conn.execute("SELECT * FROM log WHERE session_id=? ORDER BY seq", (session_id,))
            )
            last = conn.execute(
                "SELECT * FROM runs WHERE session_id=? ORDER BY created_at DESC, rowid DESC LIMIT 1",
                (session_id,),
            ).fetchone()
            return SessionSnapshot(
                session_id, entries, load_json(row["state"]), None if last is None else _run_from(last)
            )

        return await self._do(read)

    async def start_run(self, run: RunRecord, entry: LogEntry | None, state: Mapping[str, Any]) -> None:
        state_json = dump_state(state)

        def work(conn: sqlite3.Connection, now: float) -> None:
            conn.execute(
                "INSERT INTO sessions (session_id, state, created_at, updated_at) VALUES (?,?,?,?) "
                "ON CONFLICT(session_id) DO UPDATE SET state=excluded.state, updated_at=excluded.updated_at",
                (run.session_id, state_json, now, now),
            )
            conn.execute(_UPSERT_RUN, _run_params(run, now))
            if entry is not None:
                _append(conn, entry, now)

        await self._do(lambda: self._transaction(work))

    async def commit(self, entry: LogEntry, state: Mapping[str, Any], run: RunRecord | None = None) -> None:
        state_json = dump_state(state)

        def work(conn: sqlite3.Connection, now: float) -> None:
            _append(conn, entry, now)
            conn.execute(
                "UPDATE sessions SET state=?, updated_at=? WHERE session_id=?",
                (state_json, now, entry.session_id),
            )
            if run is not None:
                conn.execute(_UPSERT_RUN, _run_params(run, now))

        await self._do(lambda: self._transaction(work))

    async def update_run(self, run: RunRecord) -> None:
        def work(conn: sqlite3.Connection, now: float) -> None:
            conn.execute(_UPSERT_RUN, _run_params(run, now))

        await self._do(lambda: self._transaction(work))

    async def get_run(self, run_id: str) -> RunRecord | None:
        def read() -> RunRecord | None:
            row = self._conn.execute("SELECT * FROM runs WHERE run_id=?", (run_id,)).fetchone()
            return None if row is None else _run_from(row)

        return await self._do(read)

    async def list_runs(self, session_id: str) -> list[RunRecord]:
        def read() -> list[RunRecord]:
            rows = self._conn.execute("SELECT * FROM runs WHERE session_id=? ORDER BY created_at, rowid", (session_id,))
            return [_run_from(r) for r in rows]

        return await self._do(read)

    async def list_sessions(self, limit: int = 100) -> list[str]:
        def read() -> list[str]:
            rows = self._conn.execute(
                "SELECT session_id FROM sessions ORDER BY updated_at DESC, rowid DESC LIMIT ?", (limit,)
            )
            return [r[0] for r in rows]

        return await self._do(read)

    async def close(self) -> None:
        if self._closed:
            return
        await self._do(self._conn.close)
        self._closed = True
        self._executor.shutdown(wait=True)

    def __repr__(self) -> str:
        return f"SQLiteStore({self.path!r})"
