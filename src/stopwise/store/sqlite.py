"""``SQLiteStore``: the log in a SQLite file, the embedded default of the command line.

Durability: WAL journal. With ``synchronous="NORMAL"`` (the default) a commit survives a crash of the
process (SIGKILL included) but the last commits may be rolled back by a power loss or an OS crash; pass
``synchronous="FULL"`` to fsync the WAL on every commit and survive those too, at a cost per step.

Where the work runs: a step's writes (``start_run``, ``commit``, ``update_run``, and a lease's ``renew`` and
``release``) are a few small statements on indexed rows, and a WAL commit at ``synchronous="NORMAL"`` does not wait
for the disk, so by default they run on the event loop's own thread: handing them to a thread and back cost three
times their SQL. They never wait there: when the connection is busy on the worker thread, or another connection
(another process) holds the write lock, the write goes to the worker thread instead, which waits up to
``busy_timeout``. Everything that may be long (loading a session, listing, retention, ``VACUUM``) runs on that one
worker thread. ``offload=True`` sends every statement to the thread, so the loop never runs SQL (for a
``synchronous="FULL"`` store, where each commit waits for an fsync, or a disk that stalls).

A commit that leaves the session's row as it was (the same state, its time less than a second old) is one
statement that writes the log's page alone (``_sql.QUICK_COMMIT``); any other commit is a transaction that also
updates the session's row (see ``docs/scaling.md``, "The durable step").
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import sqlite3
import threading
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from os import PathLike
from pathlib import Path
from typing import Any, Literal, TypeVar

from stopwise.errors import (
    ConfigError,
    NotAStopwiseLog,
    StoreError,
    StoreReadOnly,
    StoreRefused,
    StoreUnavailable,
    UnreadableRun,
)
from stopwise.store import _schema, _sql
from stopwise.store._checkpoint import BACKSTOP_FRAMES, JOURNAL_LIMIT_BYTES, Checkpointer
from stopwise.store._codec import dump_state
from stopwise.store.base import Fence, Lease, LogEntry, RunRecord, SessionSnapshot, check_batch
from stopwise.store.retention import Expired, cutoff_of, expiry_plan, refuse_if_leased, sub_session_range

__all__ = ["SQLiteStore"]

T = TypeVar("T")

_QUICK_COMMIT = _sql.numbered(_sql.QUICK_COMMIT, _sql.QUICK_COLUMNS)

_WRITES = frozenset(
    {"start_run", "claim", "renew", "release", "commit", "commit_many", "update_run", "delete_session"}
    | {"expire_sessions", "vacuum"}
)
"""The operations a read-only store refuses: every one that writes (or takes the write lock)."""

_STOPWISE_TABLES = frozenset({"sessions", "runs", "log"})
"""Tables every stopwise SQLite log has, from its first schema version on."""


class SQLiteStore:
    """A ``Store`` in one SQLite file. Opening migrates an older schema and refuses a newer one, and another
    program's SQLite database (``NotAStopwiseLog``), writing nothing to either. ``read_only=True`` opens the file
    so that nothing can be written to it (a read-only file, directory or mount): every write raises
    ``StoreReadOnly``, and a log that needs a migration is refused with it (``docs/durability.md``)."""

    def __init__(
        self,
        path: str | PathLike[str],
        *,
        synchronous: Literal["NORMAL", "FULL"] = "NORMAL",
        busy_timeout: float = 5.0,
        offload: bool = False,
        read_only: bool = False,
    ) -> None:
        if synchronous not in ("NORMAL", "FULL"):
            raise ConfigError("synchronous", f"must be 'NORMAL' or 'FULL', got {synchronous!r}")
        self.path = str(path)
        self.read_only = read_only
        """Opened with ``read_only=True``: every write raises ``StoreReadOnly`` and nothing is written to the file."""
        try:
            # The connection is used by the worker thread and, for the step's writes, the event loop's thread, one at
            # a time (``_lock``); it is opened here, on the caller's thread.
            if read_only:
                conn = _connect_read_only(self.path, busy_timeout)
            else:
                conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=busy_timeout)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open SQLite database {self.path!r}: {_opening_problem(exc, read_only)}") from exc
        conn.row_factory = sqlite3.Row
        self._conn = conn
        try:
            # The checks come first: a newer database, or another program's, must not be touched, not even its
            # journal mode.
            self.schema_version = self._check_read_only() if read_only else self._migrate(busy_timeout)
            conn.execute(f"PRAGMA synchronous={synchronous}")
            conn.execute("PRAGMA foreign_keys=ON")
        except sqlite3.DatabaseError as exc:
            conn.close()
            raise StoreError(f"cannot open SQLite database {self.path!r}: {_opening_problem(exc, read_only)}") from exc
        except BaseException:
            conn.close()
            raise
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="stopwise-sqlite")
        self._closed = False
        self.offload = offload
        self._lock = threading.Lock()
        """Held by whichever thread uses the connection: the worker, or the loop for an inline write."""
        self._busy_ms = int(busy_timeout * 1000)
        self._checkpointer = Checkpointer(self.path)
        conn.execute(f"PRAGMA wal_autocheckpoint={BACKSTOP_FRAMES}")
        # A journal that grew to the backstop is cut back to SQLite's default size (1,000 pages) when it starts over.
        conn.execute(f"PRAGMA journal_size_limit={JOURNAL_LIMIT_BYTES}")
        if not offload:
            # Inline writes must never wait for another connection's write lock on the loop's thread: the
            # connection waits for nothing, and the worker raises the wait to ``busy_timeout`` for its own work.
            conn.execute("PRAGMA busy_timeout=0")

    def _check_read_only(self) -> int:
        """The schema version of a log opened read-only, refusing (before anything is read from its tables) a
        newer one, another program's database, and one that needs a migration first."""
        version: int = self._conn.execute("PRAGMA user_version").fetchone()[0]
        _refuse_foreign(self._conn, self.path)
        pending = _sql.pending_migrations(version, repr(self.path))  # raises SchemaTooNew first
        if pending:
            what = "is empty" if version == 0 else f"has schema version {version}, older than this stopwise's"
            raise StoreReadOnly(
                f"SQLite {self.path!r} {what}: a read-only store cannot migrate it; open it writable once "
                f"(SQLiteStore(path), or a stopwise command that writes) to bring it to version {_schema.LATEST}; "
                "nothing was written",
                operation="migrate",
            )
        return version

    def _migrate(self, busy_timeout: float) -> int:
        conn = self._conn
        version: int = conn.execute("PRAGMA user_version").fetchone()[0]
        _refuse_foreign(conn, self.path)
        pending = _sql.pending_migrations(version, repr(self.path))  # raises SchemaTooNew before any write
        _to_wal(conn, busy_timeout)
        while pending:
            target, statements = pending[0]
            conn.execute("BEGIN IMMEDIATE")
            try:
                # Read again under the write lock: another process opening the file at the same time may have
                # applied this migration (or all of them) since, and a migration must run once.
                version = conn.execute("PRAGMA user_version").fetchone()[0]
                if version < target:
                    for sql in statements:
                        conn.execute(sql)
                    conn.execute(f"PRAGMA user_version={target}")
                    version = target
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            pending = _sql.pending_migrations(version, repr(self.path))
        return version

    async def _do(self, fn: Callable[[], T], operation: str, session_id: str | None = None) -> T:
        """Run ``fn`` on the worker thread."""
        self._check_open(operation, session_id)
        try:
            return await asyncio.get_running_loop().run_in_executor(self._executor, self._on_worker, fn)
        except sqlite3.Error as exc:
            raise _failure(exc, self.path, operation, session_id) from exc

    async def _do_small(self, fn: Callable[[], T], operation: str, session_id: str | None = None) -> T:
        """Run ``fn``, a write of a few small statements that starts with ``BEGIN IMMEDIATE`` (or a single
        statement), on the calling thread when the connection and the database's write lock are free at once;
        else on the worker thread, as ``_do``."""
        self._check_open(operation, session_id)
        if self.offload or not self._lock.acquire(blocking=False):
            return await self._do(fn, operation, session_id)
        try:
            return fn()
        except sqlite3.OperationalError as exc:
            if getattr(exc, "sqlite_errorcode", 0) & 0xFF != sqlite3.SQLITE_BUSY or self._conn.in_transaction:
                raise _failure(exc, self.path, operation, session_id) from exc
            # Another connection holds the write lock: nothing was written; the worker waits for it.
        except sqlite3.Error as exc:
            raise _failure(exc, self.path, operation, session_id) from exc
        finally:
            self._lock.release()
        return await self._do(fn, operation, session_id)

    def _on_worker(self, fn: Callable[[], T]) -> T:
        with self._lock:
            if self.offload:
                return fn()
            conn = self._conn
            conn.execute(f"PRAGMA busy_timeout={self._busy_ms}")
            try:
                return fn()
            finally:
                conn.execute("PRAGMA busy_timeout=0")

    def _close_connection(self) -> None:
        self._checkpointer.close()
        with self._lock:
            self._conn.close()

    def _check_open(self, operation: str, session_id: str | None) -> None:
        if self._closed:
            raise StoreUnavailable(f"SQLiteStore {self.path!r} is closed", operation=operation, session_id=session_id)
        if self.read_only and operation in _WRITES:
            raise StoreReadOnly(
                f"SQLiteStore {self.path!r} is read-only: {operation} refused (nothing was written)",
                operation=operation,
                session_id=session_id,
            )

    def _run_ops(self, ops: list[_sql.Op]) -> None:
        # BEGIN IMMEDIATE takes the write lock up front, so the append's "next free seq" check and the insert
        # see the same log even with other connections (processes) writing the file.
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            for op in ops:
                _sql.check_rows(op, conn.execute(op.sql, op.params).rowcount)
            conn.execute("COMMIT")
            self._checkpointer.committed()
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise

    async def _write(self, build: Callable[[float], list[_sql.Op]], operation: str, session_id: str) -> None:
        await self._do_small(lambda: self._run_ops(build(time.time())), operation, session_id)

    def _rows(self, sql: str, **params: Any) -> list[sqlite3.Row]:
        return self._conn.execute(sql, params).fetchall()

    async def load_session(self, session_id: str) -> SessionSnapshot | None:
        def read() -> SessionSnapshot | None:
            # One read transaction, so the state, the log and the last run are of the same moment.
            self._conn.execute("BEGIN")
            try:
                state = self._rows(_sql.SESSION_STATE, session_id=session_id)
                if not state:
                    return None
                # Plain tuples, read by position: a long run's load reads thousands of rows.
                cursor = self._conn.cursor()
                cursor.row_factory = None
                log = cursor.execute(_sql.SESSION_LOG, {"session_id": session_id}).fetchall()
                last = self._rows(_sql.LAST_RUN, session_id=session_id)
                return _sql.snapshot_from(session_id, state[0], log, last[0] if last else None)
            finally:
                if self._conn.in_transaction:
                    self._conn.execute("COMMIT")

        if not self._exists_inline(session_id):
            return None
        return await self._do(read, "load_session", session_id)

    def _exists_inline(self, session_id: str) -> bool:
        """False only when the session certainly does not exist, read by its key on the calling thread (a new
        run's load, then, costs no hop to the worker and back); True when it exists or the read could not be made
        at once (the connection busy, ``offload``, any error: the worker's load then answers or raises)."""
        if self.offload or not self._lock.acquire(blocking=False):
            return True
        try:
            return self._conn.execute(_sql.SESSION_KEY, {"session_id": session_id}).fetchone() is not None
        except sqlite3.Error:
            return True
        finally:
            self._lock.release()

    async def start_run(
        self,
        run: RunRecord,
        entry: LogEntry | None,
        state: Mapping[str, Any],
        lease: Lease | None = None,
        fence: Fence | None = None,
    ) -> None:
        state_json = dump_state(state, run.session_id)
        await self._write(
            lambda now: _sql.start_run_ops(run, entry, state_json, now, lease, fence), "start_run", run.session_id
        )

    async def claim(self, run: RunRecord, last_seq: int, lease: Lease, now: float) -> None:
        def claim() -> None:
            # BEGIN IMMEDIATE: the write lock is taken before the conditions are read, so two processes claiming
            # at once are serialised and the second sees the first's lease.
            conn = self._conn
            conn.execute("BEGIN IMMEDIATE")
            try:
                taken = conn.execute(_sql.CLAIM_RUN, _sql.claim_params(run, last_seq, lease, now)).rowcount
                row = None if taken else conn.execute(_sql.LEASE_OF_RUN, {"run_id": run.run_id}).fetchone()
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            if not taken:
                raise _sql.claim_refused(run, row, now)

        await self._do(claim, "claim", run.session_id)

    async def renew(self, lease: Lease) -> bool:
        def renew() -> bool:
            return bool(self._conn.execute(_sql.RENEW_LEASE, _sql.lease_params(lease)).rowcount)

        return await self._do_small(renew, "renew")

    async def release(self, lease: Lease) -> None:
        await self._do_small(lambda: self._conn.execute(_sql.RELEASE_LEASE, _sql.lease_params(lease)), "release")

    async def commit(self, entry: LogEntry, state: Mapping[str, Any], run: RunRecord | None = None) -> None:
        state_json = dump_state(state, entry.session_id)

        def write() -> None:
            now = time.time()
            row = _sql.entry_row(entry, now)
            # Most of a run's commits leave the session's row as it was: then one statement, which writes the
            # log's page alone (see ``_sql.TOUCH_SECONDS``); else the transaction that updates the row.
            if run is None and self._conn.execute(_QUICK_COMMIT, _sql.quick_commit_row(row, state_json)).rowcount:
                self._checkpointer.committed()
                return
            self._run_ops(_sql.commit_ops(entry, state_json, run, now, _sql.append_op(entry, now, row)))

        await self._do_small(write, "commit", entry.session_id)

    async def commit_many(
        self, entries: Sequence[LogEntry], state: Mapping[str, Any], run: RunRecord, lease: Lease | None = None
    ) -> None:
        """``CommitsMany.commit_many``: one ``BEGIN IMMEDIATE`` transaction, on the worker thread (a batch may be
        thousands of rows: the event loop is not held meanwhile)."""
        check_batch(entries, run, lease)
        state_json = dump_state(state, run.session_id)

        def write() -> None:
            self._run_ops(_sql.commit_many_ops(entries, state_json, run, time.time(), lease))

        await self._do(write, "commit_many", run.session_id)

    async def update_run(self, run: RunRecord, fence: Fence | None = None) -> None:
        await self._write(lambda now: _sql.update_run_ops(run, now, fence), "update_run", run.session_id)

    async def get_run(self, run_id: str) -> RunRecord | None:
        def read() -> RunRecord | None:
            rows = self._rows(_sql.RUN_BY_ID, run_id=run_id)
            return _sql.run_from(rows[0]) if rows else None

        return await self._do(read, "get_run")

    async def list_runs(
        self, session_id: str, *, on_unreadable: Callable[[UnreadableRun], None] | None = None
    ) -> list[RunRecord]:
        def read() -> list[RunRecord]:
            return _sql.runs_from(self._rows(_sql.RUNS_OF_SESSION, session_id=session_id), on_unreadable)

        return await self._do(read, "list_runs", session_id)

    async def list_sessions(self, limit: int = 100) -> list[str]:
        def read() -> list[str]:
            return [r[0] for r in self._rows(_sql.SESSIONS_RECENT, limit=limit)]

        return await self._do(read, "list_sessions")

    async def suspended_runs(self) -> list[RunRecord]:
        def read() -> list[RunRecord]:
            return [_sql.run_from(r) for r in self._rows(_sql.SUSPENDED_RUNS)]

        return await self._do(read, "suspended_runs")

    async def iter_sessions(self, batch: int = 500) -> AsyncIterator[list[str]]:
        def page(after: str) -> list[str]:
            return [r[0] for r in self._rows(_sql.SESSIONS_AFTER, after=after, limit=batch)]

        ids = await self._do(functools.partial(page, ""), "iter_sessions")
        while ids:
            yield ids
            ids = await self._do(functools.partial(page, ids[-1]), "iter_sessions")

    async def count_sessions(self) -> int:
        return await self._do(lambda: int(self._rows(_sql.SESSION_COUNT)[0][0]), "count_sessions")

    async def delete_session(self, session_id: str, *, now: float | None = None) -> bool:
        at = time.time() if now is None else now

        def delete() -> bool:
            with self._write_lock():
                if not self._rows(_sql.SESSION_KEY, session_id=session_id):
                    return False
                low, high = sub_session_range(session_id)
                family = [session_id, *(r[0] for r in self._rows(_sql.SUB_SESSIONS, low=low, high=high))]
                holds = (_sql.hold_from(r) for sid in family for r in self._rows(_sql.HOLDS_OF_SESSION, session_id=sid))
                refuse_if_leased(holds, at)
                self._delete(family)
                return True

        return await self._do(delete, "delete_session", session_id)

    async def expire_sessions(
        self, older_than: datetime, *, dry_run: bool = False, include_suspended: bool = False, now: float | None = None
    ) -> Expired:
        cutoff = cutoff_of(older_than)
        at = time.time() if now is None else now

        def expire() -> Expired:
            with self._write_lock():
                old = [r[0] for r in self._rows(_sql.SESSIONS_BEFORE, cutoff=cutoff)]
                holds = [_sql.hold_from(r) for r in self._rows(_sql.HOLDS_BEFORE, cutoff=cutoff)]
                doomed, leased, suspended = expiry_plan(old, holds, at, include_suspended=include_suspended)
                counts = self._delete(doomed, count_only=dry_run)
            if doomed and not dry_run:
                self._vacuum()
            return Expired(len(doomed), counts["runs"], counts["log"], leased, suspended, dry_run)

        return await self._do(expire, "expire_sessions")

    async def vacuum(self) -> None:
        """Give the space of deleted rows back to the file system (``VACUUM``, then a WAL checkpoint that
        truncates the journal). It rewrites the file: it takes about as long as reading it, needs free disk
        space up to the file's size, and holds the write lock meanwhile."""
        await self._do(self._vacuum, "vacuum")

    @contextlib.contextmanager
    def _write_lock(self) -> Iterator[None]:
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise

    def _delete(self, session_ids: list[str], *, count_only: bool = False) -> Counter[str]:
        """Remove the sessions' rows (or only count them); the rows per table."""
        counts: Counter[str] = Counter()
        for d in _sql.deletions(session_ids):
            if count_only:
                counts[d.table] += self._conn.execute(d.count_sql, d.params).fetchone()[0]
            else:
                counts[d.table] += self._conn.execute(d.sql, d.params).rowcount
        return counts

    def _vacuum(self) -> None:
        # VACUUM, not incremental vacuum: the latter needs auto_vacuum set before a file's first table (so no
        # existing file has it) and keeps pointer-map pages up to date on every commit, the hot path.
        self._conn.execute("VACUUM")
        self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    async def close(self) -> None:
        """Close the database. Idempotent; any later use raises ``StoreError``."""
        if self._closed:
            return
        try:
            await asyncio.get_running_loop().run_in_executor(self._executor, self._close_connection)
        except sqlite3.Error as exc:
            raise _failure(exc, self.path, "close", None) from exc
        self._closed = True
        self._executor.shutdown(wait=True)

    async def __aenter__(self) -> SQLiteStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def __enter__(self) -> SQLiteStore:
        """``with SQLiteStore(path) as store:`` for scripts (with ``Runner.run_sync``); closes on exit."""
        return self

    def __exit__(self, *exc: object) -> None:
        if self._closed:
            return
        # Closed on the worker thread, as ``close()`` does, after any work queued there.
        self._executor.submit(self._close_connection).result()
        self._closed = True
        self._executor.shutdown(wait=True)

    def __repr__(self) -> str:
        return f"SQLiteStore({self.path!r})"


def _to_wal(conn: sqlite3.Connection, busy_timeout: float) -> None:
    """``PRAGMA journal_mode=WAL``, tried again for up to ``busy_timeout`` while the file is busy. The switch needs
    the file to itself, and SQLite refuses it at once (its busy handler is not called) while other connections
    open the same new file: processes starting together on one database would fail to open it."""
    deadline = time.monotonic() + busy_timeout
    while True:
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            busy = getattr(exc, "sqlite_errorcode", 0) & 0xFF == sqlite3.SQLITE_BUSY
            if not busy or time.monotonic() >= deadline:
                raise
        time.sleep(0.005)  # the other openers hold the file for a few statements


def _connect_read_only(path: str, busy_timeout: float) -> sqlite3.Connection:
    """A connection that cannot write the file (``mode=ro``). A log at rest in a directory this process cannot
    write (no ``-wal`` journal beside it, and none can be created) is opened ``immutable``: SQLite then reads the
    file without the ``-shm`` file it cannot create. A writer could only append to it by creating a ``-wal`` in
    that directory; what one writes after the open is not seen."""
    uri = f"{Path(path).resolve().as_uri()}?mode=ro"
    conn = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False, timeout=busy_timeout)
    try:
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()  # opens the WAL index, where there is one
        return conn
    except sqlite3.OperationalError as exc:
        conn.close()
        if getattr(exc, "sqlite_errorcode", 0) & 0xFF != sqlite3.SQLITE_READONLY or Path(f"{path}-wal").exists():
            raise
    return sqlite3.connect(f"{uri}&immutable=1", uri=True, isolation_level=None, check_same_thread=False)


def _opening_problem(exc: sqlite3.Error, read_only: bool) -> str:
    """What ``exc``, raised while opening the file (``read_only`` or not), means to the person who asked."""
    if getattr(exc, "sqlite_errorname", "") == "SQLITE_READONLY_DIRECTORY":
        way_out = "" if read_only else ", or open it read_only=True"
        return (
            f"{exc}: its directory is not writable and SQLite needs the -wal and -shm files beside it "
            f"(copy the file to a directory of your own{way_out})"
        )
    return str(exc)


def _refuse_foreign(conn: sqlite3.Connection, path: str) -> None:
    """``NotAStopwiseLog`` when the database has tables but is not a stopwise log: no schema version of ours, not
    all of stopwise's tables, or a version above ours with no table of stopwise's name (a program's own
    ``user_version``; a newer stopwise's log is left to ``SchemaTooNew``). Checked before the version. Reads only
    (a new or empty file has no tables and passes). The version and the tables are read in one read transaction:
    another process migrating the same new file meanwhile commits its tables and its version together, and both
    must be seen from the same moment."""
    conn.execute("BEGIN")
    try:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        rows = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name").fetchall()
    finally:
        conn.execute("COMMIT")
    tables = tuple(str(name) for (name, *_) in rows if not str(name).startswith("sqlite_"))
    if not tables:
        return
    if version > _schema.LATEST:
        # A newer stopwise may have renamed some tables (SchemaTooNew says to upgrade); but many programs set a
        # user_version of their own, so a file sharing no table name with stopwise is another program's.
        foreign = _STOPWISE_TABLES.isdisjoint(tables)
    else:
        foreign = version == 0 or not set(tables) >= _STOPWISE_TABLES
    if foreign:
        raise NotAStopwiseLog(path, tables)


def _failure(exc: sqlite3.Error, path: str, operation: str, session_id: str | None) -> StoreError:
    """The typed error for a ``sqlite3`` failure after open: the data refused (a constraint) or the database
    unable to work (disk full, I/O error, locked, closed, corrupt)."""
    code = getattr(exc, "sqlite_errorname", None)
    what = f"{exc} ({code})" if code else str(exc)
    where = f" for session {session_id!r}" if session_id is not None else ""
    message = f"SQLite {path!r}: {operation}{where} failed: {what}"
    kind = StoreRefused if isinstance(exc, (sqlite3.IntegrityError, sqlite3.DataError)) else StoreUnavailable
    return kind(message, operation=operation, session_id=session_id)
