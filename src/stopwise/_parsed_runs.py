"""The typed records of the runs a runner resumed last, kept so that resuming the same run again parses only the
entries committed since.

A run whose every step waits for an approval is resumed once a step, and each resume reads the run's log back
(``stopwise.records.RunLog``): parsing every record, each field type-checked, is most of a resume's cost, and it
grows with the run, so the run's total cost would grow with the square of its length. ``ParsedRuns`` keeps, per
session, the records each entry of the run held as the store returned them and what they parsed to. The next
read of that run takes the parse of each entry whose seq and records still compare equal to what was kept, and
parses the rest (with the guardian configs the kept entries held, in log order, as ``RunLog.of`` does).

Parsing is a pure function of an entry's records and the configs of the entries before it, so a kept parse is what
parsing the entry again would give: the result is the same ``RunLog`` as ``RunLog.of`` (a second process, which
keeps nothing, gets the same answer). Nothing is trusted from memory alone: every entry is compared with the
log as read now (an entry rewritten by hand, a session deleted and written again, parses again), and an entry that
cannot be parsed raises as ``RunLog.of`` raises, every time. The comparison still reads each record once (a
fraction of parsing it); reading the session from the store and folding the leg still grow with the run.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from stopwise.guardian.records import GuardianConfig
from stopwise.records import LogRecord, RunLog, parse_entry
from stopwise.store.base import LogEntry

__all__ = ["ENTRIES_KEPT", "SESSIONS_KEPT", "ParsedRuns"]

SESSIONS_KEPT = 4
"""Sessions whose last parsed run a ``ParsedRuns`` keeps, the least recently read dropped first."""

ENTRIES_KEPT = 20_000
"""Entries a ``ParsedRuns`` keeps in all, the least recently read sessions dropped first to stay under it, but
never the last one read. A kept entry holds its records twice (as read, and typed): about 3 KB an entry of a run
approved at every step (three entries a step), 11 KB an entry of a ``Guardian()`` run (tracemalloc, 1,000-step
runs), so the memory kept is bounded by this many entries, or by one run's parse, which a resume of that run holds
anyway while it runs."""


@dataclass(frozen=True, slots=True)
class _Parsed:
    """One run's entries as they were parsed: their seqs and records as read, what each parsed to, and the
    guardian configs they held."""

    run_id: str
    seqs: tuple[int, ...]
    data: tuple[tuple[Mapping[str, Any], ...], ...]
    records: tuple[tuple[LogRecord, ...], ...]
    configs: Mapping[str, GuardianConfig]

    def reusable(self, entries: Sequence[LogEntry]) -> int:
        """How many of ``entries`` (the run's, in log order) are the kept ones unchanged, from the first: 0 when
        the log no longer starts with them all (a kept parse is reused only as a whole prefix, since each entry's
        parse takes the configs of those before it)."""
        n = len(self.seqs)
        if len(entries) < n:
            return 0
        for e, seq, data in zip(entries, self.seqs, self.data, strict=False):
            if e.seq != seq or e.records != data:
                return 0
        return n


class ParsedRuns:
    """A runner's kept parses (see the module): ``run_log`` is ``RunLog.of`` for a run's entries, reusing the
    parse of the entries it read last time for that session. Safe to share between threads."""

    def __init__(self, sessions: int = SESSIONS_KEPT, entries: int = ENTRIES_KEPT) -> None:
        self._sessions = sessions
        self._entries = entries
        self._held = 0
        self._kept: OrderedDict[str, _Parsed] = OrderedDict()
        self._lock = threading.Lock()

    def run_log(self, session_id: str, run_id: str, entries: Sequence[LogEntry]) -> RunLog:
        """The run's log as ``RunLog.of(entries)`` reads it (``entries``: the run's, in log order, as the store
        returned them now); ``UnreadableEntry`` for an entry that cannot be read, as there."""
        with self._lock:
            kept = self._kept.get(session_id)
        reused = 0 if kept is None or kept.run_id != run_id else kept.reusable(entries)
        configs: dict[str, GuardianConfig] = dict(kept.configs) if kept is not None and reused else {}
        records = list(kept.records) if kept is not None and reused else []
        records.extend(parse_entry(e, configs) for e in entries[reused:])
        parsed = _Parsed(
            run_id,
            tuple(e.seq for e in entries),
            tuple(e.records for e in entries),
            tuple(records),
            dict(configs),  # its own copy: the returned log's mapping is the caller's
        )
        with self._lock:
            self._drop(session_id)
            self._kept[session_id] = parsed
            self._held += len(parsed.seqs)
            while len(self._kept) > 1 and (len(self._kept) > self._sessions or self._held > self._entries):
                self._drop(next(iter(self._kept)))
        return RunLog(tuple(zip(entries, parsed.records, strict=True)), configs)

    def forget(self, session_id: str) -> None:
        """Drop the parse kept for ``session_id`` (its run ended: nothing will resume it)."""
        with self._lock:
            self._drop(session_id)

    def _drop(self, session_id: str) -> None:
        gone = self._kept.pop(session_id, None)
        if gone is not None:
            self._held -= len(gone.seqs)
