"""What the inspecting subcommands share: opening the SQLite log, finding a run, the usage error, the command that
settles a suspended run."""

from __future__ import annotations

import shlex
from pathlib import Path

from stopwise.store.base import RunRecord, SessionSnapshot
from stopwise.store.sqlite import SQLiteStore

__all__ = ["DEFAULT_DB", "UsageError", "existing_db", "find_run", "settle_command"]

DEFAULT_DB = "stopwise.db"
"""The log ``stopwise run`` writes without ``--db`` (in the current directory); the other commands read it too."""


class UsageError(Exception):
    """A problem with what the user asked for; ``stopwise.cli`` shows it as one line, exit code 2."""


def existing_db(db: str) -> Path:
    path = Path(db)
    if not path.exists():
        raise UsageError(f"--db {db}: no such file")
    if not path.is_file():
        raise UsageError(f"--db {db}: not a file")
    return path


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
