"""WAL checkpoints of a SQLite store, run off the thread that commits.

In WAL mode SQLite copies the journal back into the database (a checkpoint: about a thousand pages written and
two fsyncs) inside whichever commit crosses ``wal_autocheckpoint``, so every few hundred steps one step's commit
stalls for milliseconds on the event loop's thread. ``Checkpointer`` runs the same passive checkpoint on a thread
and connection of its own after every ``every`` commits; SQLite lets writers go on appending meanwhile, and the
next commit after a pass that copied everything starts the journal over. The store's own connection keeps a higher
``wal_autocheckpoint`` as a backstop. When commits never pause (an instant model and tools: the step benchmark) a
pass rarely finds the journal all copied, so it grows to the backstop, where the writer's own checkpoint finds most
pages already copied back and starts it over (and the file is cut back to ``JOURNAL_LIMIT_BYTES``); an agent that
waits for a model between steps gives the thread its pauses. The journal is copied back at least as often as
before, so what a power loss can roll back at ``synchronous=NORMAL`` is no more than before.
"""

from __future__ import annotations

import logging
import sqlite3
from concurrent.futures import ThreadPoolExecutor

__all__ = ["BACKSTOP_FRAMES", "CHECKPOINT_COMMITS", "JOURNAL_LIMIT_BYTES", "Checkpointer"]

CHECKPOINT_COMMITS = 256
"""Commits between two background checkpoints: at two or three journal pages a commit, under SQLite's default
``wal_autocheckpoint`` of 1,000 pages."""

BACKSTOP_FRAMES = 4000
"""The store connection's own ``wal_autocheckpoint`` (pages) while a ``Checkpointer`` runs."""

JOURNAL_LIMIT_BYTES = 4096 * 1000
"""The store connection's ``journal_size_limit``: a journal that grew towards the backstop is cut back to about
SQLite's default checkpoint size when it starts over, so the file does not keep 16 MB it no longer uses."""

_PASSES = 8
"""Checkpoint passes at most, one after another, to catch up with writers that keep appending."""

_log = logging.getLogger("stopwise")


class Checkpointer:
    """Passive WAL checkpoints of the database at ``path`` on a thread of their own, one at a time."""

    def __init__(self, path: str, every: int = CHECKPOINT_COMMITS) -> None:
        self._path = path
        self._every = every
        self._count = 0
        self._pending = False
        self._conn: sqlite3.Connection | None = None
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="stopwise-sqlite-checkpoint")

    def committed(self) -> None:
        """Count one commit (the caller holds the store's connection lock); every ``every`` commits, queue a
        checkpoint unless one is still queued or running."""
        self._count += 1
        if self._count >= self._every and not self._pending:
            self._count = 0
            self._pending = True
            self._executor.submit(self._checkpoint)

    def _checkpoint(self) -> None:
        try:
            if self._conn is None:
                self._conn = sqlite3.connect(self._path, isolation_level=None, check_same_thread=False, timeout=0)
            # Writers append while a pass copies; the journal restarts from its start only once a pass has copied
            # every page in it, so a pass that fell short goes round again, a bounded number of times.
            for _ in range(_PASSES):
                ((busy, pages, copied),) = self._conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
                if busy or copied >= pages:
                    break
        except sqlite3.Error as exc:
            # Not an error of any commit: the connection's own autocheckpoint (the backstop) still bounds the WAL.
            _log.debug("stopwise: background checkpoint of %r failed: %s", self._path, exc)
        finally:
            self._pending = False

    def close(self) -> None:
        """Wait for a queued checkpoint and close this connection (before the store's own, so that the store's
        close, the last, checkpoints what is left and removes the journal)."""
        self._executor.shutdown(wait=True)
        if self._conn is not None:
            self._conn.close()
            self._conn = None
