"""What the inspecting subcommands share: opening the SQLite log, finding a run, the usage error, the command that
settles a suspended run."""

from __future__ import annotations

import asyncio
import os
import shlex
from pathlib import Path
from typing import TYPE_CHECKING

from stopwise.errors import StoreError
from stopwise.result import RunStatus
from stopwise.store.base import RunRecord, SessionSnapshot

if TYPE_CHECKING:
    # Imported where a log is opened, not here: building the parser (``stopwise --help``) opens none.
    from stopwise.store.sqlite import SQLiteStore

__all__ = [
    "DEFAULT_DB",
    "Interrupted",
    "UsageError",
    "existing_db",
    "find_run",
    "interrupted",
    "output_file",
    "reading_store",
    "settle_command",
    "writable_db",
]

DEFAULT_DB = "stopwise.db"
"""The log ``stopwise run`` writes without ``--db`` (in the current directory); the other commands read it too."""


class UsageError(Exception):
    """A problem with what the user asked for; ``stopwise.cli`` shows it as one line, exit code 2."""


class Interrupted(KeyboardInterrupt):
    """Ctrl-C ended a command that was driving the run of a known session: ``stopwise.cli`` prints ``hint`` (how to
    continue it) with the ``interrupted`` line, exit code 130."""

    def __init__(self, hint: str) -> None:
        super().__init__(hint)
        self.hint = hint


def existing_db(db: str, *, positional: bool = False, reading: bool = False) -> Path:
    """``--db`` (or, ``positional``, the ``DB`` argument) of a command that reads or continues a log: a file that
    exists and can be opened, for writing unless the command is only ``reading`` (it then opens the log with
    ``reading_store``). ``UsageError`` naming the problem otherwise, before the store opens it. Another program's
    database is refused by the store itself (``NotAStopwiseLog``), before anything is written to it."""
    path, named = Path(db), db if positional else f"--db {db}"
    if not path.exists():
        raise UsageError(f"{named}: no such file")
    if not path.is_file():
        raise UsageError(f"{named}: not a file")
    if reading:
        if not os.access(path, os.R_OK):
            raise UsageError(f"{named}: the file is not readable by this user")
    else:
        _check_writable(path, named)
    return path


def reading_store(path: Path) -> SQLiteStore:
    """The store of a command that only reads the log at ``path``: opened read-only when this process cannot write
    the file or create SQLite's ``-wal``/``-shm`` files beside it (a read-only file, directory or mount), else as
    usual, so an older log is migrated once and a read leaves no journal files behind."""
    from stopwise.store.sqlite import SQLiteStore

    return SQLiteStore(path, read_only=_unwritable(path) is not None)


def writable_db(db: str) -> Path:
    """``--db`` of a command that writes a log, created if missing: a file path in a directory that exists and
    lets a file be created; an existing file must be writable (the store refuses one that is not a stopwise log).
    ``UsageError`` otherwise."""
    path = Path(db)
    if path.is_dir():
        raise UsageError(f"--db {db}: is a directory, expected a file path")
    parent = path.parent
    if not parent.is_dir():
        raise UsageError(f"--db {db}: directory {str(parent)!r} does not exist")
    if path.exists():
        _check_writable(path, f"--db {db}")
    elif not os.access(parent, os.W_OK | os.X_OK):
        raise UsageError(f"--db {db}: cannot create it: directory {str(parent)!r} is not writable")
    return path


def output_file(out: str, flag: str) -> Path:
    """A file the command writes (``-o``): a path, not a directory, in a directory that exists."""
    target = Path(out)
    if target.is_dir():
        raise UsageError(f"{flag} {out}: is a directory, expected a file path")
    if not target.parent.is_dir():
        raise UsageError(f"{flag} {out}: directory {str(target.parent)!r} does not exist")
    return target


def _check_writable(path: Path, named: str) -> None:
    """Refuse, before the store touches it, a log this process cannot write (SQLite opens a WAL log for writing
    even to read it, unless the store is read-only)."""
    problem = _unwritable(path)
    if problem is not None:
        raise UsageError(f"{named}: {problem}")


def _unwritable(path: Path) -> str | None:
    """Why this process cannot open the existing log ``path`` for writing, or None when it can."""
    if not os.access(path, os.R_OK | os.W_OK):
        return (
            "the file is not writable by this user; stopwise opens its log for writing: copy it to a directory of "
            "your own"
        )
    sidecars = [Path(f"{path}-wal"), Path(f"{path}-shm")]
    if not os.access(path.parent, os.W_OK | os.X_OK) and not all(os.access(s, os.W_OK) for s in sidecars):
        return (
            f"directory {str(path.parent)!r} is not writable, and SQLite needs to create the log's -wal and -shm "
            "files beside it: copy the file to a directory of your own"
        )
    return None


async def find_run(store: SQLiteStore, ref: str) -> tuple[SessionSnapshot, RunRecord]:
    """The run ``ref`` names: a run id, or a session id (its last run). ``UsageError`` when neither exists."""
    run = await store.get_run(ref)
    snapshot = await store.load_session(ref if run is None else run.session_id)
    if run is None and snapshot is not None:
        run = snapshot.last_run
    if run is None or snapshot is None:
        raise UsageError(f"no run or session {ref!r}")
    return snapshot, run


def settle_command(session: str, target: str, path: Path | None) -> str:
    """The command that settles ``session``'s pending calls, to copy once ``CALL...`` is filled in and one of
    ``approve|reject|terminate`` chosen: with the agent ``target`` and the log ``path`` (left out when None), each
    quoted for a POSIX shell, so it works from the directory it was printed in."""
    where = f"--agent {shlex.quote(target)}" + ("" if path is None else f" --db {shlex.quote(str(path))}")
    return f"stopwise approve|reject|terminate {shlex.quote(session)} CALL... {where}"


def interrupted(session: str, target: str, path: Path) -> Interrupted:
    """Ctrl-C while ``session``'s run went on (with the agent ``target``, on the log ``path``): the hint is the
    command that goes on from where the log says the run now stands, read back from it. A run recorded as
    cancelled (or left running) is continued by ``stopwise retry``; one still suspended (Ctrl-C during the calls
    an approval let run, before their results committed) waits for its decisions again."""
    import sqlite3

    try:
        status = asyncio.run(_last_status(path, session))
    except (StoreError, sqlite3.Error, OSError):
        status = None
    if status is RunStatus.SUSPENDED:
        return Interrupted(f"the run still waits for approval; settle it with: {settle_command(session, target, path)}")
    if status is None or status is RunStatus.COMPLETED:
        return Interrupted(
            f"see where the run stands: stopwise show {shlex.quote(session)} --db {shlex.quote(str(path))}"
        )
    command = f"stopwise retry {shlex.quote(target)} {shlex.quote(session)} --db {shlex.quote(str(path))}"
    return Interrupted(f"what was committed is kept; continue with: {command}")


async def _last_status(path: Path, session: str) -> RunStatus | None:
    # Only read: a log this process cannot write (a read-only copy, directory or mount) still gives its status.
    async with reading_store(path) as store:
        runs = await store.list_runs(session)
    return runs[-1].status if runs else None
