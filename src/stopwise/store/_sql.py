"""Store logic shared by the SQL backends: statements, row codecs, the migration plan and the append rule.

The dialect files (``sqlite.py``, ``postgres.py``) only own connections, transactions and placeholder
syntax. Everything that decides *what* is written lives here, so the two backends cannot drift apart:

- every write is a list of ``Op`` run in one transaction by the dialect;
- an ``Op`` that appends a log entry must insert exactly one row, else the dialect raises ``StepConflict``
  (``check_append``): the insert only happens at the session's next free ``seq``, and a taken ``seq`` is
  skipped by ``ON CONFLICT DO NOTHING`` rather than raising, so both dialects see the same "0 rows";
- statements use ``:name`` placeholders; a dialect may rewrite them (PostgreSQL uses ``%(name)s``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from pydantic_core import PydanticSerializationError

from stopwise.errors import RunLeased, SchemaTooNew, StepConflict, StopwiseError, UnreadableEntry, UnreadableRun
from stopwise.messages import Usage, load_messages
from stopwise.result import CompletionReason, RunStatus
from stopwise.storable import is_storable, storable
from stopwise.store._codec import dump_error, dump_json, dump_rows, dump_usage, error_from, load_json, usage_from
from stopwise.store._schema import LATEST, MIGRATIONS
from stopwise.store.base import EntryKind, Fence, Lease, LogEntry, RunRecord, SessionSnapshot
from stopwise.store.retention import RunHold

__all__ = [
    "CLAIM_RUN",
    "HOLDS_BEFORE",
    "HOLDS_OF_SESSION",
    "SESSIONS_AFTER",
    "SESSIONS_BEFORE",
    "SESSION_COUNT",
    "SESSION_KEY",
    "LAST_RUN",
    "LEASE_OF_RUN",
    "ENTRY_COLUMNS",
    "QUICK_COLUMNS",
    "QUICK_COMMIT",
    "RELEASE_LEASE",
    "RENEW_LEASE",
    "RUNS_OF_SESSION",
    "RUN_BY_ID",
    "RUN_ROW",
    "SESSIONS_RECENT",
    "SESSION_LOG",
    "SUB_SESSIONS",
    "SESSION_STATE",
    "TOUCH_SECONDS",
    "Deletion",
    "Op",
    "append_op",
    "check_appended",
    "check_rows",
    "claim_params",
    "claim_refused",
    "commit_many_ops",
    "commit_ops",
    "deletions",
    "entries_from",
    "entry_from",
    "entry_row",
    "fence_broken",
    "hold_from",
    "lease_params",
    "numbered",
    "pending_migrations",
    "quick_commit_row",
    "run_from",
    "runs_from",
    "snapshot_from",
    "start_run_ops",
    "update_run_ops",
]


class Row(Protocol):
    """A result row addressed by column name (``sqlite3.Row`` and psycopg's ``dict_row`` both qualify)."""

    def __getitem__(self, key: str, /) -> Any: ...


_RUN_COLUMNS = (
    "run_id",
    "session_id",
    "agent",
    "status",
    "completion_reason",
    "error",
    "output",
    "text",
    "usage",
    "steps",
    "budget_base",
    "detail",
    "report",
)
_RUN_UPDATED = [c for c in _RUN_COLUMNS if c not in ("run_id", "session_id", "agent")]

_INSERT_RUN = f"INSERT INTO runs ({', '.join(_RUN_COLUMNS)}, created_at, updated_at) "
_RUN_VALUES = f"{', '.join(':' + c for c in _RUN_COLUMNS)}, :now, :now"
_ON_RUN_TAKEN = (
    f"ON CONFLICT (run_id) DO UPDATE SET {', '.join(f'{c}=excluded.{c}' for c in _RUN_UPDATED)}, "
    "updated_at=excluded.updated_at"
)
UPSERT_RUN = f"{_INSERT_RUN}VALUES ({_RUN_VALUES}) {_ON_RUN_TAKEN}"
# A plain run write (``update_run`` without a fence): as ``UPSERT_RUN``, but no row at all once the run's session is
# gone, so a write racing retention's deletion never meets the foreign key (see ``KEEP_SESSION``).
UPSERT_RUN_OF_SESSION = (
    f"{_INSERT_RUN}SELECT {_RUN_VALUES} WHERE EXISTS (SELECT 1 FROM sessions WHERE session_id = :session_id) "
    + _ON_RUN_TAKEN
)

# A leg's run record written without an entry (``Store.update_run`` with a ``Fence``): an update of the stored
# record only while it still names this worker as its lease owner (expired or not: nobody took the run over) and the
# log still ends where the leg last committed, so a worker that lost the run cannot overwrite what another one wrote
# since, nor write back a run that retention deleted.
_FENCE_HOLDS = (
    "WHERE run_id = :run_id AND lease_owner = :owner "
    "AND (SELECT COALESCE(MAX(seq), 0) FROM log WHERE session_id = :session_id) = :last_seq"
)
UPDATE_RUN_FENCED = f"UPDATE runs SET {', '.join(f'{c}=:{c}' for c in _RUN_UPDATED)}, updated_at=:now " + _FENCE_HOLDS
# The same fence ahead of a continued leg's start (``Store.start_run`` with a ``Fence``): a no-op update of the run's
# row that matches it only while the fence holds; else the start's transaction stops before it writes anything.
CHECK_FENCE = "UPDATE runs SET lease_owner = lease_owner " + _FENCE_HOLDS
# The run's row, which PostgreSQL locks (``FOR UPDATE``) in a statement of its own ahead of a fenced write or a claim.
# Under READ COMMITTED a statement that waits for another transaction's lock on the row re-checks its WHERE on the
# row as that transaction left it, but not its sub-select of the log, which still reads the snapshot from before
# the wait: a fence or a claim waiting on the old holder's terminal commit would pass on a log that ended before
# that commit's entry. Waiting in the lock statement instead, the fenced statement starts after it, on a snapshot
# that holds every commit which touched the row. SQLite needs none of this: its write lock is taken first.
RUN_ROW = "SELECT run_id FROM runs WHERE run_id = :run_id"

UPSERT_SESSION = (
    "INSERT INTO sessions (session_id, state, created_at, updated_at) VALUES (:session_id, :state, :now, :now) "
    "ON CONFLICT (session_id) DO UPDATE SET state=excluded.state, updated_at=excluded.updated_at"
)

UPDATE_SESSION_STATE = "UPDATE sessions SET state=:state, updated_at=:now WHERE session_id=:session_id"
# A plain run write's hold on its session's row (``update_run`` without a fence): it changes nothing, but it waits
# for a deletion holding the row (PostgreSQL) and then finds no row, so the write is refused as a commit's is
# (``StepConflict``), not left to the runs table's foreign key (``StoreRefused``), nor inserted as an orphan.
KEEP_SESSION = "UPDATE sessions SET updated_at=updated_at WHERE session_id=:session_id"

# The append rule. The entry goes in only when its seq is the session's next free one: a gap makes the WHERE
# false, and a seq another writer already took (committed, or committing concurrently: PostgreSQL waits for
# that transaction on the primary key) is skipped by ON CONFLICT DO NOTHING. Either way 0 rows: StepConflict.
# Under READ COMMITTED the sub-select sees only committed rows, so an insert at k proves k-1 is committed. The
# entry's run must be on record too: a worker whose session retention deleted (and someone started again under the
# same id) finds its seq free in the new log, but not its run, and gets 0 rows instead of writing into that log.
_INSERT_ENTRY = (
    "INSERT INTO log (session_id, seq, run_id, step, kind, messages, decision, usage, forced, records, created_at) "
    "SELECT :session_id, :seq, :run_id, :step, :kind, :messages, :decision, :usage, :forced, :records, :now "
    "WHERE :seq = (SELECT COALESCE(MAX(seq), 0) + 1 FROM log WHERE session_id = :session_id) "
    "AND EXISTS (SELECT 1 FROM runs WHERE run_id = :run_id) "
)
_ON_TAKEN = "ON CONFLICT (session_id, seq) DO NOTHING"
APPEND_ENTRY = _INSERT_ENTRY + _ON_TAKEN

TOUCH_SECONDS = 1.0
"""How far a session's ``updated_at`` may lag its last commit. A commit that leaves the session's state as it was
moves ``updated_at`` only when the stored time is at least this old, so a fast run's commits write the log's page
alone instead of also the session's row and its ``sessions_by_update`` entry (three pages a commit, two of them
the session's). Retention, which counts in days, and ``list_sessions`` between sessions written a second or more
apart are unaffected; a run's start always moves it."""

ENTRY_COLUMNS = (
    "session_id",
    "seq",
    "run_id",
    "step",
    "kind",
    "messages",
    "decision",
    "usage",
    "forced",
    "records",
    "now",
)
"""The parameters of ``APPEND_ENTRY``, in the order of ``entry_row``'s values."""

# ``Store.commit`` in one statement when the session's row would not change (``QUICK_COMMIT``): the append rule
# as above, and the session already holds the state this commit writes with an ``updated_at`` newer than
# ``:fresh_since``. A single INSERT takes the write lock before it reads (as BEGIN IMMEDIATE does) and commits on
# its own, so the entry still goes in atomically at the next free seq. 0 rows says only "not this way": the
# caller then runs ``commit_ops``, which updates the row or tells a conflict (``StepConflict``).
_SESSION_AS_IS = (
    "AND EXISTS (SELECT 1 FROM sessions WHERE session_id = :session_id AND state = :state "
    "AND updated_at >= :fresh_since) "
)
QUICK_COMMIT = _INSERT_ENTRY + _SESSION_AS_IS + _ON_TAKEN
QUICK_COLUMNS = (*ENTRY_COLUMNS, "state", "fresh_since")
"""The parameters of ``QUICK_COMMIT``, in the order of ``quick_commit_row``'s values."""

# Leases. A claim is one conditional update: it takes the run only while the run still has the status the
# caller read, the log still ends where the caller read it, and no other worker's lease is live. Concurrent
# claims serialise on the run's row (SQLite's write lock; PostgreSQL locks ``RUN_ROW`` first, then claims on a
# snapshot taken after the winner committed), so exactly one gets a row. Expiry is compared with the claimer's
# clock, passed in as :now.
SET_LEASE = "UPDATE runs SET lease_owner = :owner, lease_expires = :until WHERE run_id = :run_id"
CLAIM_RUN = (
    "UPDATE runs SET lease_owner = :owner, lease_expires = :until "
    "WHERE run_id = :run_id AND status = :status "
    "AND (lease_owner IS NULL OR lease_expires <= :now) "
    "AND (SELECT COALESCE(MAX(seq), 0) FROM log WHERE session_id = :session_id) = :last_seq"
)
LEASE_OF_RUN = "SELECT status, lease_owner, lease_expires FROM runs WHERE run_id = :run_id"
RENEW_LEASE = "UPDATE runs SET lease_expires = :until WHERE run_id = :run_id AND lease_owner = :owner"
RELEASE_LEASE = (
    "UPDATE runs SET lease_owner = NULL, lease_expires = NULL WHERE run_id = :run_id AND lease_owner = :owner"
)

SESSION_STATE = "SELECT state FROM sessions WHERE session_id = :session_id"
# The columns ``_entry`` reads, not ``created_at``: a resume reads the whole log, every column it fetches is paid
# per entry.
SESSION_LOG = (
    "SELECT session_id, seq, run_id, step, kind, messages, decision, usage, forced, records "
    "FROM log WHERE session_id = :session_id ORDER BY seq"
)
# rowid breaks ties between equal timestamps: SQLite's implicit one, an identity column on PostgreSQL.
LAST_RUN = "SELECT * FROM runs WHERE session_id = :session_id ORDER BY created_at DESC, rowid DESC LIMIT 1"
RUN_BY_ID = "SELECT * FROM runs WHERE run_id = :run_id"
RUNS_OF_SESSION = "SELECT * FROM runs WHERE session_id = :session_id ORDER BY created_at, rowid"
SESSIONS_RECENT = "SELECT session_id FROM sessions ORDER BY updated_at DESC, rowid DESC LIMIT :limit"
SUSPENDED_RUNS = "SELECT * FROM runs WHERE status = 'suspended' ORDER BY created_at, rowid"
# Retention. Every query goes by a key or an index: the sessions' primary key (a walk in batches), the index on
# sessions.updated_at (the sessions old enough), runs_by_session (their runs). PostgreSQL locks the rows these
# read (``FOR UPDATE`` appended by its dialect), so a claim or a commit racing a deletion waits for it; SQLite
# holds its write lock from the start.
SESSIONS_AFTER = "SELECT session_id FROM sessions WHERE session_id > :after ORDER BY session_id LIMIT :limit"
SESSION_COUNT = "SELECT COUNT(*) AS n FROM sessions"
SESSION_KEY = "SELECT session_id FROM sessions WHERE session_id = :session_id"
HOLDS_OF_SESSION = (
    "SELECT session_id, run_id, status, lease_owner, lease_expires FROM runs WHERE session_id = :session_id"
)
SESSIONS_BEFORE = "SELECT session_id FROM sessions WHERE updated_at < :cutoff"
# A session's sub-agent sessions (``stopwise.store.retention.sub_session_range``): a range of the primary key in
# byte order, SQLite's BINARY collation (PostgreSQL's dialect compares in the "C" collation instead).
SUB_SESSIONS = "SELECT session_id FROM sessions WHERE session_id >= :low AND session_id < :high"
HOLDS_BEFORE = (
    "SELECT session_id, run_id, status, lease_owner, lease_expires FROM runs "
    "WHERE session_id IN (SELECT session_id FROM sessions WHERE updated_at < :cutoff) "
    "AND (status = 'suspended' OR lease_owner IS NOT NULL)"
)
_DELETE_ORDER = ("log", "runs", "sessions")
"""Children first: runs refer to their session."""
_DELETE_BATCH = 500
"""Session ids per ``IN (...)`` list: well under SQLite's oldest limit of 999 host parameters."""


@dataclass(frozen=True, slots=True)
class Deletion:
    """One statement of a retention transaction: it removes (or, as ``count_sql``, counts) ``table``'s rows of
    some sessions."""

    table: str
    where: str
    params: Mapping[str, Any]

    @property
    def sql(self) -> str:
        return f"DELETE FROM {self.table} WHERE {self.where}"

    @property
    def count_sql(self) -> str:
        return f"SELECT COUNT(*) AS n FROM {self.table} WHERE {self.where}"


def deletions(session_ids: Sequence[str]) -> list[Deletion]:
    """The statements that remove ``session_ids`` with their runs and entries, children first, in batches."""
    out: list[Deletion] = []
    for table in _DELETE_ORDER:
        for at in range(0, len(session_ids), _DELETE_BATCH):
            batch = session_ids[at : at + _DELETE_BATCH]
            names = [f"s{i}" for i in range(len(batch))]
            where = f"session_id IN ({', '.join(':' + n for n in names)})"
            out.append(Deletion(table, where, dict(zip(names, batch, strict=True))))
    return out


def hold_from(row: Row) -> RunHold:
    """A ``RunHold`` from a ``HOLDS_OF_SESSION`` or ``HOLDS_BEFORE`` row."""
    return RunHold(row["session_id"], row["run_id"], RunStatus(row["status"]), row["lease_owner"], row["lease_expires"])


@dataclass(frozen=True, slots=True)
class Op:
    """One statement of a write transaction."""

    sql: str
    params: Mapping[str, Any]
    appends: LogEntry | None = None
    """Set on a log append: the dialect passes the statement's row count to ``check_rows``."""
    fence: Fence | None = None
    """Set on a statement that must match its one run row (``UPDATE_RUN_FENCED``, ``CHECK_FENCE``): ``check_rows``
    checks it did."""
    session_kept: str | None = None
    """Set on a commit's update of its session's row, or a plain run write's hold on it (the session's id):
    ``check_rows`` checks the row was still there, since retention may have deleted the session."""


def check_rows(op: Op, rowcount: int) -> None:
    """Raise ``StepConflict`` unless the append ``op`` inserted its one row, the lease-fenced run write ``op``
    wrote its one row, or the commit's session update ``op`` found its row (the caller rolls back)."""
    e = op.appends
    if e is not None and rowcount != 1:
        raise StepConflict(
            f"session {e.session_id!r}: seq {e.seq} is not the next free position in the log, or run {e.run_id} is "
            "not on record (deleted)"
        )
    if op.fence is not None and rowcount != 1:
        operation = "start_run" if op.sql == CHECK_FENCE else "update_run"
        raise fence_broken(op.fence, str(op.params["session_id"]), operation)
    if op.session_kept is not None and rowcount != 1:
        raise StepConflict(
            f"session {op.session_kept!r} is not on record (retention deleted it); nothing was written",
            operation="update_run" if op.sql == KEEP_SESSION else "commit",
            session_id=op.session_kept,
        )


def check_appended(ops: Sequence[Op], rowcount: int) -> None:
    """Raise ``StepConflict`` unless the appends ``ops``, sent as one statement (``executemany``), inserted
    ``rowcount`` = one row each (the caller rolls back)."""
    if rowcount == len(ops):
        return
    entries = [op.appends for op in ops if op.appends is not None]
    first, last = entries[0], entries[-1]
    # The batch may hold several runs' entries (a fork's copy keeps earlier runs' ids): any of them may be gone.
    runs = ", ".join(dict.fromkeys(e.run_id for e in entries))
    raise StepConflict(
        f"session {first.session_id!r}: {len(ops) - rowcount} of entries {first.seq}..{last.seq} were not at the next "
        f"free position in the log, or a run of theirs ({runs}) is not on record (deleted)"
    )


def fence_broken(fence: Fence, session_id: str, operation: str) -> StepConflict:
    """The error of a run write (``operation``) refused by its ``fence``."""
    lease = fence.lease
    return StepConflict(
        f"run {lease.run_id} moved on without {lease.owner!r} (another worker took it over after its lease lapsed, "
        f"or committed after seq {fence.last_seq}, or the run was deleted); nothing was written",
        operation=operation,
        session_id=session_id,
    )


def _fence_params(fence: Fence, session_id: str) -> dict[str, Any]:
    return {
        "run_id": fence.lease.run_id,
        "owner": fence.lease.owner,
        "session_id": session_id,
        "last_seq": fence.last_seq,
    }


def _run_params(run: RunRecord, now: float) -> dict[str, Any]:
    return {
        "run_id": run.run_id,
        "session_id": run.session_id,
        "agent": run.agent,
        "status": run.status.value,
        "completion_reason": None if run.completion_reason is None else run.completion_reason.value,
        "error": dump_error(run.error),
        "output": dump_json(run.output),
        "text": run.text,
        "usage": dump_usage(run.usage),
        "steps": run.steps,
        "budget_base": run.budget_base,
        "detail": run.detail,
        "report": dump_json(run.report) if run.report else None,
        "now": now,
    }


def entry_row(entry: LogEntry, now: float) -> tuple[Any, ...]:
    """The values of ``entry``'s log row (``ENTRY_COLUMNS``), made storable and encoded: once per commit, whichever
    statement then writes them."""
    # The storable-text rule's walk of the entry costs more than encoding it, and the loop already applied the
    # rule to what entered the run: so encode first and walk only when the encoding shows a string that needs it
    # (a lone surrogate fails to encode, a NUL reads ``\u0000``; a false alarm only costs the walk).
    e = entry
    try:
        messages = dump_rows(e.messages)
        decision = None if e.decision is None else dump_json(e.decision)
        records = dump_json(e.records) if e.records else None
    except PydanticSerializationError:
        return _row_of(storable(e, where=f"session {e.session_id!r}, entry {e.seq}"), now)
    if (
        _NUL in messages
        or (decision is not None and _NUL in decision)
        or (records is not None and _NUL in records)
        or not (is_storable(e.session_id) and is_storable(e.run_id))
    ):
        return _row_of(storable(e, where=f"session {e.session_id!r}, entry {e.seq}"), now)
    usage = None if e.usage is None else dump_usage(e.usage)
    return (e.session_id, e.seq, e.run_id, e.step, e.kind.value, messages, decision, usage, int(e.forced), records, now)


_NUL = "\\u0000"
"""How a NUL inside a string reads in JSON: its only form there."""


def _row_of(e: LogEntry, now: float) -> tuple[Any, ...]:
    return (
        e.session_id,
        e.seq,
        e.run_id,
        e.step,
        e.kind.value,
        dump_rows(e.messages),
        None if e.decision is None else dump_json(e.decision),
        dump_usage(e.usage),
        int(e.forced),
        dump_json(e.records) if e.records else None,
        now,
    )


def append_op(entry: LogEntry, now: float, row: tuple[Any, ...] | None = None) -> Op:
    """``APPEND_ENTRY`` of ``entry``, from its ``entry_row`` when the caller has it."""
    values = entry_row(entry, now) if row is None else row
    return Op(APPEND_ENTRY, dict(zip(ENTRY_COLUMNS, values, strict=True)), appends=entry)


def quick_commit_row(row: tuple[Any, ...], state_json: str) -> tuple[Any, ...]:
    """The values of ``QUICK_COMMIT`` (``QUICK_COLUMNS``): the entry's ``row`` goes in alone when the session's row
    already holds ``state_json`` and was written less than ``TOUCH_SECONDS`` before the entry's time. A commit with
    a run record always takes ``commit_ops``."""
    return (*row, state_json, row[-1] - TOUCH_SECONDS)


def numbered(sql: str, names: Sequence[str]) -> str:
    """``sql`` with each ``:name`` as ``?N``, N its place in ``names`` from 1: SQLite then binds a tuple, no dict to
    build and look each name up in (the dialect's choice for its hottest statement)."""
    return re.sub(r"(?<![:\w]):([a-z_][a-z0-9_]*)", lambda m: f"?{names.index(m.group(1)) + 1}", sql)


def lease_params(lease: Lease) -> dict[str, Any]:
    """The parameters of ``SET_LEASE``, ``RENEW_LEASE`` and ``RELEASE_LEASE``."""
    return {"run_id": lease.run_id, "owner": lease.owner, "until": lease.expires_at}


def claim_params(run: RunRecord, last_seq: int, lease: Lease, now: float) -> dict[str, Any]:
    """The parameters of ``CLAIM_RUN`` (``Store.claim``)."""
    return {
        **lease_params(lease),
        "status": run.status.value,
        "session_id": run.session_id,
        "last_seq": last_seq,
        "now": now,
    }


def claim_refused(run: RunRecord, row: Row | None, now: float) -> StopwiseError:
    """Why a claim that updated no row was refused, from the run's ``LEASE_OF_RUN`` row read in its transaction:
    ``RunLeased`` while another worker's lease is live, else ``StepConflict`` (the run or its log moved on)."""
    if row is not None and row["lease_owner"] is not None and row["lease_expires"] > now:
        return RunLeased(run.run_id, row["lease_owner"], row["lease_expires"])
    status = "gone" if row is None else row["status"]
    return StepConflict(
        f"run {run.run_id} changed since it was read (it was {run.status.value}, it is {status}, or its log moved "
        "on): load the session again",
        operation="claim",
        session_id=run.session_id,
    )


def start_run_ops(
    run: RunRecord,
    entry: LogEntry | None,
    state_json: str,
    now: float,
    lease: Lease | None = None,
    fence: Fence | None = None,
) -> list[Op]:
    """``Store.start_run``: the session (created if new) with its state, the run record (holding ``lease``, if
    given), the input entry; with ``fence``, first the check that it holds (``StepConflict`` else)."""
    run = storable(run, where=f"run {run.run_id}")
    ops: list[Op] = [] if fence is None else [Op(CHECK_FENCE, _fence_params(fence, run.session_id), fence=fence)]
    ops += [
        Op(UPSERT_SESSION, {"session_id": run.session_id, "state": state_json, "now": now}),
        Op(UPSERT_RUN, _run_params(run, now)),
    ]
    if lease is not None:
        ops.append(Op(SET_LEASE, lease_params(lease)))
    if entry is not None:
        ops.append(append_op(entry, now))
    return ops


def commit_ops(
    entry: LogEntry, state_json: str, run: RunRecord | None, now: float, append: Op | None = None
) -> list[Op]:
    """``Store.commit``: the state after the entry, then the entry, then on a terminal step the run record; a
    deleted session or a conflict (``check_rows``) rolls the whole transaction back. ``append``: the entry's
    ``append_op`` when the caller already built it (for ``now``)."""
    if run is not None:
        run = storable(run, where=f"run {run.run_id}")
    # The session's row first, the order every write takes the rows in. On PostgreSQL the update waits for a
    # retention deletion that holds the row and then finds it gone; the append after it reads the log and the runs
    # on a snapshot taken after that wait. Appended first, the entry read the run as still on record, went in
    # beside the deletion, and outlived the session (an orphan log row).
    ops = [
        Op(
            UPDATE_SESSION_STATE,
            {"session_id": entry.session_id, "state": state_json, "now": now},
            session_kept=entry.session_id,
        ),
        append_op(entry, now) if append is None else append,
    ]
    if run is not None:
        ops.append(Op(UPSERT_RUN, _run_params(run, now)))
    return ops


def commit_many_ops(
    entries: Sequence[LogEntry], state_json: str, run: RunRecord, now: float, lease: Lease | None = None
) -> list[Op]:
    """``CommitsMany.commit_many``: ``start_run``'s session (created if new) with the state after the entries and
    the run record (holding ``lease``, if given), then every entry by the append rule, in order: one entry refused
    (``check_rows``, or ``check_appended`` for appends sent as one) rolls the whole batch back."""
    return [*start_run_ops(run, None, state_json, now, lease), *(append_op(e, now) for e in entries)]


def update_run_ops(run: RunRecord, now: float, fence: Fence | None = None) -> list[Op]:
    """``Store.update_run``: the run record (created if new), only while its session is on record; with ``fence``,
    an update of the stored record, only while it and its log satisfy the fence."""
    params = _run_params(storable(run, where=f"run {run.run_id}"), now)
    if fence is None:
        keep = Op(KEEP_SESSION, {"session_id": run.session_id}, session_kept=run.session_id)
        return [keep, Op(UPSERT_RUN_OF_SESSION, params)]
    return [Op(UPDATE_RUN_FENCED, {**params, **_fence_params(fence, run.session_id)}, fence=fence)]


def run_from(row: Row) -> RunRecord:
    """The run record a ``runs`` row holds; ``UnreadableRun`` (naming the session, the run and why) when this
    version cannot read it, as ``entry_from`` does for an entry."""
    try:
        return _run(row)
    except Exception as exc:
        raise UnreadableRun(str(row["session_id"]), str(row["run_id"]), f"{type(exc).__name__}: {exc}") from exc


def runs_from(rows: Sequence[Row], on_unreadable: Callable[[UnreadableRun], None] | None) -> list[RunRecord]:
    """The run records of ``rows`` (``Store.list_runs``): an unreadable one raises, or with ``on_unreadable`` is
    handed to it and left out."""
    out: list[RunRecord] = []
    for row in rows:
        try:
            out.append(run_from(row))
        except UnreadableRun as exc:
            if on_unreadable is None:
                raise
            on_unreadable(exc)
    return out


def _run(row: Row) -> RunRecord:
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
        started_at=row["created_at"],
    )


def entry_from(row: Row) -> LogEntry:
    """The entry a ``SESSION_LOG`` row holds; ``UnreadableEntry`` (naming the session, the seq and why) when this
    version cannot read it, so one bad entry never takes the rest of the database down with it."""
    try:
        return _entry(row)
    except Exception as exc:
        raise UnreadableEntry(str(row["session_id"]), int(row["seq"]), f"{type(exc).__name__}: {exc}") from exc


def _entry(row: Row) -> LogEntry:
    return _entry_of(tuple(row[c] for c in _LOG_COLUMNS), {})


_LOG_COLUMNS = ("session_id", "seq", "run_id", "step", "kind", "messages", "decision", "usage", "forced", "records")
"""The columns ``SESSION_LOG`` reads, in its order: the positions ``entries_from`` reads a row by."""

_KINDS = {k.value: k for k in EntryKind}


def entries_from(rows: Sequence[Sequence[Any]]) -> tuple[LogEntry, ...]:
    """The entries ``SESSION_LOG``'s rows hold, each row a plain sequence of its columns in the query's order (by
    position: a session's load reads thousands of rows, and a column read by name costs more than its decode).
    ``UnreadableEntry`` as ``entry_from`` raises it."""
    usages: dict[str, Usage] = {}  # a run's usage texts are few: each decoded once (``Usage`` is immutable)
    out = []
    for row in rows:
        try:
            out.append(_entry_of(row, usages))
        except Exception as exc:
            raise UnreadableEntry(str(row[0]), int(row[1]), f"{type(exc).__name__}: {exc}") from exc
    return tuple(out)


def _entry_of(row: Sequence[Any], usages: dict[str, Usage]) -> LogEntry:
    session_id, seq, run_id, step, kind, messages, decision, usage_text, forced, records = row
    usage = None
    if usage_text is not None:
        usage = usages.get(usage_text)
        if usage is None:
            usage = usages[usage_text] = usage_from(usage_text)
    return LogEntry(
        session_id,
        seq,
        run_id,
        step,
        _KINDS.get(kind) or EntryKind(kind),
        load_messages(messages),
        load_json(decision),
        usage,
        bool(forced),
        tuple(load_json(records) or ()),
    )


def snapshot_from(session_id: str, state: Row, log: Sequence[Sequence[Any]], last_run: Row | None) -> SessionSnapshot:
    """A ``SessionSnapshot`` from the rows of ``SESSION_STATE``, ``SESSION_LOG`` (plain sequences of its columns:
    ``entries_from``) and ``LAST_RUN``."""
    entries = entries_from(log)
    return SessionSnapshot(
        session_id, entries, load_json(state["state"]), None if last_run is None else run_from(last_run)
    )


def pending_migrations(version: int, where: str) -> list[tuple[int, tuple[str, ...]]]:
    """The migrations a database at ``version`` still needs, oldest first.

    Raises ``SchemaTooNew`` (naming ``where``) for a version newer than this stopwise knows: the caller must
    then write nothing at all to the database.
    """
    if version > LATEST:
        raise SchemaTooNew(
            f"{where} has schema version {version}, newer than this stopwise understands ({LATEST}); "
            "upgrade stopwise to open it (nothing was written)"
        )
    return [(target, statements) for target, statements in MIGRATIONS if target > version]
