"""``MemoryStore``: the log in process memory. The default of a ``Runner()``; gone when the process ends."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from stopwise.errors import StepConflict, UnreadableRun
from stopwise.result import RunStatus
from stopwise.row_copies import own_error, own_row, own_value
from stopwise.storable import needs_rule, storable
from stopwise.store import _sql
from stopwise.store._codec import dump_state, load_json
from stopwise.store.base import Fence, Lease, LogEntry, RunRecord, SessionSnapshot, check_batch
from stopwise.store.retention import Expired, RunHold, cutoff_of, expiry_plan, refuse_if_leased, sub_session_range

__all__ = ["MemoryStore"]


@dataclass(slots=True)
class _Session:
    entries: list[LogEntry] = field(default_factory=list)
    checked: int = 0
    """How many of ``entries`` (from the first) have had the storable-text rule applied (see ``_readable``)."""
    state_json: str = "{}"
    runs: list[str] = field(default_factory=list)
    updated_at: float = 0.0
    """Unix time of the last write, as the database stores' ``sessions.updated_at`` (for ``expire_sessions``)."""


class MemoryStore:
    """Same contract as the database stores, including conflict detection. State is kept as JSON text so
    the caller's later mutations never leak into what was committed. Every read hands out copies, as a database
    store decodes fresh objects: a caller changing a snapshot's rows, records or run records in place changes
    nothing this store reads back."""

    def __init__(self) -> None:
        self._sessions: dict[str, _Session] = {}
        self._runs: dict[str, RunRecord] = {}
        self._leases: dict[str, Lease] = {}

    async def load_session(self, session_id: str) -> SessionSnapshot | None:
        s = self._sessions.get(session_id)
        if s is None:
            return None
        last = _own_run(self._runs[s.runs[-1]]) if s.runs else None
        return SessionSnapshot(session_id, tuple(map(_own_entry, _readable(s))), load_json(s.state_json), last)

    async def start_run(
        self,
        run: RunRecord,
        entry: LogEntry | None,
        state: Mapping[str, Any],
        lease: Lease | None = None,
        fence: Fence | None = None,
    ) -> None:
        if fence is not None:
            self._check_fence(fence, run.session_id, "start_run")
        # The storable-text rule holds here as on disk, so a session reads back the same on every store.
        state_json = dump_state(state, run.session_id)
        run = storable(run, where=f"run {run.run_id}")
        if entry is not None:  # checked before anything changes: a refused start leaves no session behind
            self._check_seq(self._sessions.get(run.session_id) or _Session(), entry)
        s = self._put_run(run, state_json, lease)
        if entry is not None:
            s.entries.append(entry)

    async def claim(self, run: RunRecord, last_seq: int, lease: Lease, now: float) -> None:
        stored = self._runs.get(run.run_id)
        held = self._leases.get(run.run_id)
        s = self._sessions.get(run.session_id)
        log_end = s.entries[-1].seq if s is not None and s.entries else 0
        free = held is None or held.expires_at <= now
        if stored is None or stored.status is not run.status or log_end != last_seq or not free:
            row = None if stored is None else _lease_row(stored, held)
            raise _sql.claim_refused(run, row, now)
        self._leases[run.run_id] = lease

    async def renew(self, lease: Lease) -> bool:
        held = self._leases.get(lease.run_id)
        if held is None or held.owner != lease.owner:
            return False
        self._leases[lease.run_id] = lease
        return True

    async def release(self, lease: Lease) -> None:
        held = self._leases.get(lease.run_id)
        if held is not None and held.owner == lease.owner:
            del self._leases[lease.run_id]

    async def commit(self, entry: LogEntry, state: Mapping[str, Any], run: RunRecord | None = None) -> None:
        state_json = dump_state(state, entry.session_id)
        if run is not None and needs_rule(run):
            run = storable(run, where=f"run {run.run_id}")
        s = self._sessions.pop(entry.session_id, None)
        if s is None:  # never started, or deleted since: as on disk, there is no free seq to append at
            raise StepConflict(f"session {entry.session_id!r}: no such session to append entry {entry.seq} to")
        self._sessions[entry.session_id] = s
        if not s.entries or entry.seq != s.entries[-1].seq + 1:  # the check, without a call for the common append
            self._check_seq(s, entry)
        if entry.run_id not in self._runs:  # deleted with its session (which may have started again since)
            raise StepConflict(f"session {entry.session_id!r}: run {entry.run_id} is not on record (deleted)")
        s.entries.append(entry)
        s.state_json = state_json
        s.updated_at = time.time()
        if run is not None:
            self._runs[run.run_id] = run

    async def commit_many(
        self, entries: Sequence[LogEntry], state: Mapping[str, Any], run: RunRecord, lease: Lease | None = None
    ) -> None:
        """``CommitsMany.commit_many``: everything is checked before anything changes, so a refused batch leaves
        the store as it was."""
        check_batch(entries, run, lease)
        state_json = dump_state(state, run.session_id)
        run = storable(run, where=f"run {run.run_id}")
        self._check_seq(self._sessions.get(run.session_id) or _Session(), entries[0])
        # As on disk, an entry's run must be on record (a fork's copy keeps earlier runs' entries under their ids).
        ghost = next((e for e in entries if e.run_id != run.run_id and e.run_id not in self._runs), None)
        if ghost is not None:
            raise StepConflict(f"session {run.session_id!r}: run {ghost.run_id} of entry {ghost.seq} is not on record")
        self._put_run(run, state_json, lease).entries.extend(entries)

    def _put_run(self, run: RunRecord, state_json: str, lease: Lease | None) -> _Session:
        """``run``'s session (created if new, moved to the newest) holding ``state_json``, and ``run``'s record
        (holding ``lease``, if given): what ``start_run`` and ``commit_many`` write once their checks passed."""
        s = self._sessions.pop(run.session_id, None) or _Session()
        self._sessions[run.session_id] = s
        if run.run_id not in self._runs:
            s.runs.append(run.run_id)
        self._runs[run.run_id] = run
        s.state_json = state_json
        s.updated_at = time.time()
        if lease is not None:
            self._leases[run.run_id] = lease
        return s

    async def update_run(self, run: RunRecord, fence: Fence | None = None) -> None:
        if fence is not None:
            self._check_fence(fence, run.session_id, "update_run")
        elif run.session_id not in self._sessions:  # never started, or retention deleted it: as on disk
            raise StepConflict(
                f"session {run.session_id!r} is not on record (retention deleted it); nothing was written",
                operation="update_run",
                session_id=run.session_id,
            )
        self._runs[run.run_id] = storable(run, where=f"run {run.run_id}")

    async def get_run(self, run_id: str) -> RunRecord | None:
        run = self._runs.get(run_id)
        return None if run is None else _own_run(run)

    async def list_runs(
        self, session_id: str, *, on_unreadable: Callable[[UnreadableRun], None] | None = None
    ) -> list[RunRecord]:
        # Records held as objects are always readable: on_unreadable is never called.
        s = self._sessions.get(session_id)
        return [] if s is None else [_own_run(self._runs[r]) for r in s.runs]

    async def list_sessions(self, limit: int = 100) -> list[str]:
        # Dicts keep insertion order; a session moves to the end when it is written again.
        return list(reversed(self._sessions))[:limit]

    async def suspended_runs(self) -> list[RunRecord]:
        return [_own_run(r) for r in self._runs.values() if r.status is RunStatus.SUSPENDED]

    async def iter_sessions(self, batch: int = 500) -> AsyncIterator[list[str]]:
        ids = sorted(self._sessions)
        for at in range(0, len(ids), batch):
            yield ids[at : at + batch]

    async def count_sessions(self) -> int:
        return len(self._sessions)

    async def delete_session(self, session_id: str, *, now: float | None = None) -> bool:
        if session_id not in self._sessions:
            return False
        low, high = sub_session_range(session_id)
        family = [session_id, *(sid for sid in self._sessions if low <= sid < high)]
        refuse_if_leased((h for sid in family for h in self._holds(sid)), time.time() if now is None else now)
        self._remove(family)
        return True

    async def expire_sessions(
        self, older_than: datetime, *, dry_run: bool = False, include_suspended: bool = False, now: float | None = None
    ) -> Expired:
        cutoff = cutoff_of(older_than)
        old = [sid for sid, s in self._sessions.items() if s.updated_at < cutoff]
        holds = [h for sid in old for h in self._holds(sid)]
        at = time.time() if now is None else now
        doomed, leased, suspended = expiry_plan(old, holds, at, include_suspended=include_suspended)
        runs = sum(len(self._sessions[sid].runs) for sid in doomed)
        entries = sum(len(self._sessions[sid].entries) for sid in doomed)
        if not dry_run:
            self._remove(doomed)
        return Expired(len(doomed), runs, entries, leased, suspended, dry_run)

    def _holds(self, session_id: str) -> list[RunHold]:
        holds = []
        for run_id in self._sessions[session_id].runs:
            lease = self._leases.get(run_id)
            owner, until = (None, None) if lease is None else (lease.owner, lease.expires_at)
            holds.append(RunHold(session_id, run_id, self._runs[run_id].status, owner, until))
        return holds

    def _remove(self, session_ids: list[str]) -> None:
        for sid in session_ids:
            for run_id in self._sessions.pop(sid).runs:
                self._runs.pop(run_id, None)
                self._leases.pop(run_id, None)

    async def close(self) -> None:
        return None

    async def __aenter__(self) -> MemoryStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def __enter__(self) -> MemoryStore:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def _check_fence(self, fence: Fence, session_id: str, operation: str) -> None:
        """``StepConflict`` unless the fence holds: its run on record, holding its lease, the log ending at its seq."""
        held = self._leases.get(fence.lease.run_id)
        s = self._sessions.get(session_id)
        last_seq = s.entries[-1].seq if s is not None and s.entries else 0
        stored = fence.lease.run_id in self._runs
        if not stored or held is None or held.owner != fence.lease.owner or last_seq != fence.last_seq:
            raise _sql.fence_broken(fence, session_id, operation)

    @staticmethod
    def _check_seq(s: _Session, entry: LogEntry) -> None:
        expected = s.entries[-1].seq + 1 if s.entries else 1
        if entry.seq != expected:
            raise StepConflict(
                f"session {entry.session_id!r}: entry seq {entry.seq} conflicts (next free seq is {expected})"
            )


def _readable(s: _Session) -> tuple[LogEntry, ...]:
    """The session's entries with the storable-text rule applied, as a database store would read them back.

    The rule is applied here, when the log is read, rather than on every commit: nothing but a read can see an
    entry of this store, and a step's two commits then cost no walk over everything they hold. Each entry is
    checked once (``_Session.checked``); one that needed the rule is replaced by its storable copy, with the same
    log note a database store writes when it commits it."""
    entries = s.entries
    for i in range(s.checked, len(entries)):
        entry = entries[i]
        if needs_rule(entry):
            entries[i] = storable(entry, where=f"session {entry.session_id!r}, entry {entry.seq}")
    s.checked = len(entries)
    return tuple(entries)


def _own_entry(entry: LogEntry) -> LogEntry:
    """A copy of ``entry`` sharing no list or dict with it (its rows', its decision's, its records')."""
    # The constructor, not ``dataclasses.replace``, as ``own_row``: this runs for every entry of every read. A
    # field added to LogEntry is added here too (tests/test_user_code_rows.py compares a read with a deep copy).
    decision = None if entry.decision is None else own_value(dict(entry.decision))
    records = tuple(own_value(dict(r)) for r in entry.records) if entry.records else ()
    rows = tuple(map(own_row, entry.messages))
    return LogEntry(
        entry.session_id,
        entry.seq,
        entry.run_id,
        entry.step,
        entry.kind,
        rows,
        decision,
        entry.usage,
        entry.forced,
        records,
    )


def _own_run(run: RunRecord) -> RunRecord:
    """A copy of ``run`` sharing no list or dict with it (its error's details, its output, its report)."""
    return replace(run, error=own_error(run.error), output=own_value(run.output), report=own_value(dict(run.report)))


def _lease_row(run: RunRecord, lease: Lease | None) -> dict[str, Any]:
    """The run's lease as the database stores' ``LEASE_OF_RUN`` row reads, for ``_sql.claim_refused``."""
    return {
        "status": run.status.value,
        "lease_owner": None if lease is None else lease.owner,
        "lease_expires": None if lease is None else lease.expires_at,
    }
