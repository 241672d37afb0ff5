"""``MemoryStore``: the log in process memory. The default of a ``Runner()``; gone when the process ends."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from stopwise.errors import StepConflict
from stopwise.store._codec import dump_state
from stopwise.store.base import LogEntry, RunRecord, SessionSnapshot

__all__ = ["MemoryStore"]


@dataclass(slots=True)
class _Session:
    entries: list[LogEntry] = field(default_factory=list)
    state_json: str = "{}"
    runs: list[str] = field(default_factory=list)


class MemoryStore:
    """Same contract as the database stores, including conflict detection. State is kept as JSON text so
    the caller's later mutations never leak into what was committed."""

    def __init__(self) -> None:
        self._sessions: dict[str, _Session] = {}
        self._runs: dict[str, RunRecord] = {}

    async def load_session(self, session_id: str) -> SessionSnapshot | None:
        s = self._sessions.get(session_id)
        if s is None:
            return None
        last = self._runs[s.runs[-1]] if s.runs else None
        return SessionSnapshot(session_id, tuple(s.entries), json.loads(s.state_json), last)

    async def start_run(self, run: RunRecord, entry: LogEntry | None, state: Mapping[str, Any]) -> None:
        state_json = dump_state(state)
        s = self._sessions.pop(run.session_id, None) or _Session()
        self._sessions[run.session_id] = s
        if entry is not None:
            self._check_seq(s, entry)
        if run.run_id not in self._runs:
            s.runs.append(run.run_id)
        self._runs[run.run_id] = run
        if entry is not None:
            s.entries.append(entry)
        s.state_json = state_json

    async def commit(self, entry: LogEntry, state: Mapping[str, Any], run: RunRecord | None = None) -> None:
        state_json = dump_state(state)
        s = self._sessions.pop(entry.session_id)
        self._sessions[entry.session_id] = s
        self._check_seq(s, entry)
        s.entries.append(entry)
        s.state_json = state_json
        if run is not None:
            self._runs[run.run_id] = run

    async def update_run(self, run: RunRecord) -> None:
        self._runs[run.run_id] = run

    async def get_run(self, run_id: str) -> RunRecord | None:
        return self._runs.get(run_id)

    async def list_runs(self, session_id: str) -> list[RunRecord]:
        s = self._sessions.get(session_id)
        return [] if s is None else [self._runs[r] for r in s.runs]

    async def list_sessions(self, limit: int = 100) -> list[str]:
        # Dicts keep insertion order; a session moves to the end when it is written again.
        return list(reversed(self._sessions))[:limit]

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

    @staticmethod
    def _check_seq(s: _Session, entry: LogEntry) -> None:
        expected = s.entries[-1].seq + 1 if s.entries else 1
        if entry.seq != expected:
            raise StepConflict(
                f"session {entry.session_id!r}: entry seq {entry.seq} conflicts (next free seq is {expected})"
            )
