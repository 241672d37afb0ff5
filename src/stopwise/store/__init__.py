"""Stores: the append-only log and run records."""

from stopwise.store.base import EntryKind, LogEntry, RunRecord, SessionSnapshot, Store
from stopwise.store.memory import MemoryStore
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
