"""Stores: the append-only log and run records.

``SQLiteStore`` and ``PostgresStore`` are imported when first named (``sqlite3``, the SQL layer), so a program
that keeps its log in memory does not load them.
"""

from typing import TYPE_CHECKING

from stopwise._lazy import lazy
from stopwise.store.base import EntryKind, LogEntry, RunRecord, SessionSnapshot, Store
from stopwise.store.memory import MemoryStore

if TYPE_CHECKING:
    from stopwise.store.postgres import PostgresStore  # imports psycopg only when a store is built
    from stopwise.store.sqlite import SQLiteStore

__all__ = [
    "EntryKind",
    "LogEntry",
    "MemoryStore",
    "PostgresStore",
    "RunRecord",
    "SQLiteStore",
    "SessionSnapshot",
    "Store",
]

__getattr__ = lazy(__name__, {"PostgresStore": "stopwise.store.postgres", "SQLiteStore": "stopwise.store.sqlite"})
