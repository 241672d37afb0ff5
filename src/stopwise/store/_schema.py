"""Versioned schema of the database stores. Migrations run in order on open, each in its own transaction.

Never edit a released migration: add a new one. A database whose version is newer than ``LATEST`` is refused.
"""

from __future__ import annotations

__all__ = ["LATEST", "MIGRATIONS"]

MIGRATIONS: tuple[tuple[int, tuple[str, ...]], ...] = (
    (
        1,
        (
            """CREATE TABLE sessions (
                session_id TEXT PRIMARY KEY,
                state TEXT NOT NULL,
                created_at REAL NOT NULL,
                updated_at REAL NOT NULL
            )""",
            """CREATE TABLE runs (
                run_id TEXT PRIMARY KEY,
                session_id TEXT NOT NULL REFERENCES sessions(session_id),
                agent TEXT NOT NULL,
                status TEXT NOT NULL,
                error TEXT,
                output TEXT,
                text TEXT NOT NULL,
                usage TEXT,
                steps INTEGER NOT NULL,
                budget_base INTEGER NOT NULL,
                created_at REAL NOT NULL,
                updated_at REAL NOT NULL
            )""",
            "CREATE INDEX runs_by_session ON runs(session_id, created_at)",
            """CREATE TABLE log (
                session_id TEXT NOT NULL,
                seq INTEGER NOT NULL,
                run_id TEXT NOT NULL,
                step INTEGER NOT NULL,
                kind TEXT NOT NULL,
                messages TEXT NOT NULL,
                decision TEXT,
                usage TEXT,
                forced INTEGER NOT NULL DEFAULT 0,
                created_at REAL NOT NULL,
                PRIMARY KEY (session_id, seq)
            ) WITHOUT ROWID""",
        ),
    ),
    (
        # Why a run ended became a column of its own; older runs read back with no reason.
        2,
        (
            "ALTER TABLE runs ADD COLUMN completion_reason TEXT",
            "ALTER TABLE runs ADD COLUMN detail TEXT NOT NULL DEFAULT ''",
        ),
    ),
    (
        # Decisions as data: typed records (guard verdicts, guardrail verdicts, receipts) on each log entry,
        # and the run's report (stop guard, guardrails, pending approvals) on its record.
        3,
        (
            "ALTER TABLE log ADD COLUMN records TEXT",
            "ALTER TABLE runs ADD COLUMN report TEXT",
        ),
    ),
    (
        # Leases: the worker driving a run and until when (Unix seconds by its runner's clock). Older runs read
        # back with none, so a run that was running when the database was upgraded can be retried at once.
        4,
        (
            "ALTER TABLE runs ADD COLUMN lease_owner TEXT",
            "ALTER TABLE runs ADD COLUMN lease_expires REAL",
        ),
    ),
    (
        # The most recent sessions (``list_sessions``) by index, not by sorting every session.
        5,
        ("CREATE INDEX sessions_by_update ON sessions(updated_at)",),
    ),
    (
        # No table changes: from here on the log's records are in the lean form (a run's guardian config stored
        # once, decisions naming it by hash; messages and usage without their default fields). This version
        # reads both forms; the bump keeps a version-5 stopwise, which cannot read the lean form, from opening
        # a log that holds it.
        6,
        (),
    ),
    (
        # No table changes: the lean form leaner (a guardian decision without its run's id, which the run's
        # config holds, without default fields, and with only the evaluator notes that explain it; a step's
        # decision without its default fields). This version reads every earlier form; the bump keeps a
        # version-6 stopwise, which would fail on a decision without its run's id, from opening such a log.
        7,
        (),
    ),
)

LATEST = MIGRATIONS[-1][0]
