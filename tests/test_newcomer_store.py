"""What ``SQLiteStore`` does with a file that is not (yet) its own, and with ``read_only=True``: another program's
SQLite database is refused by the store itself, byte for byte untouched; a read-only store reads a log it cannot
write (a read-only file and directory, as another process sees them) and refuses every write with a typed error;
a log that needs a migration is never half-migrated by one."""

from __future__ import annotations

import hashlib
import os
import pickle
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Awaitable, Callable
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest

from stopwise import Agent, Runner, ScriptedModel, SQLiteStore
from stopwise.errors import NotAStopwiseLog, SchemaTooNew, StoreError, StoreReadOnly
from stopwise.store._schema import LATEST, MIGRATIONS
from stopwise.store.base import Lease

REPO = Path(__file__).resolve().parent.parent


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _foreign(path: Path, table: str) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute(f"CREATE TABLE {table} (id INTEGER PRIMARY KEY, name TEXT)")
        conn.execute(f"INSERT INTO {table} (name) VALUES ('alice')")
    conn.close()


async def _log(path: Path) -> None:
    """A closed log at ``path`` holding session ``s`` with one completed run."""
    async with Runner(SQLiteStore(path)) as runner:
        await runner.run(Agent("greeter", "Greet.", ScriptedModel(["hello"])), "hi", session_id="s")


def _sidecars(path: Path) -> list[str]:
    return sorted(p.name for p in path.parent.iterdir() if p.name != path.name)


@pytest.mark.parametrize("read_only", [False, True], ids=["writable", "read_only"])
@pytest.mark.parametrize("tables", [("users",), ("sessions",), ("audit", "log", "runs", "sessions")])
def test_another_programs_database_is_not_a_stopwise_log_naming_the_file_and_its_tables_and_is_untouched(
    tmp_path: Path, tables: tuple[str, ...], read_only: bool
) -> None:
    # "sessions" alone used to fail half-way through creating the schema, after the file was switched to WAL; a
    # database with stopwise's table names but no schema version of stopwise's is not a log either.
    db = tmp_path / "app.db"
    for table in tables:
        _foreign(db, table)
    before = _digest(db)

    with pytest.raises(NotAStopwiseLog) as info:
        SQLiteStore(db, read_only=read_only)

    assert info.value.path == str(db) and info.value.tables == tuple(sorted(tables))
    assert str(info.value).startswith(f"{db}: not a stopwise log: an SQLite database of another program (tables: ")
    assert _digest(db) == before and _sidecars(db) == []
    assert pickle.loads(pickle.dumps(info.value)).tables == info.value.tables


async def test_a_new_path_and_an_empty_file_become_a_new_log(tmp_path: Path) -> None:
    (tmp_path / "empty.db").touch()
    for name in ("new.db", "empty.db"):
        await _log(tmp_path / name)
        async with SQLiteStore(tmp_path / name) as store:
            assert store.schema_version == LATEST and await store.list_sessions() == ["s"]


async def test_a_read_only_store_reads_the_log_and_refuses_every_write_leaving_the_file_as_it_was(
    tmp_path: Path,
) -> None:
    db = tmp_path / "log.db"
    await _log(db)
    before = _digest(db)
    store = SQLiteStore(db, read_only=True)
    snapshot = await store.load_session("s")
    assert snapshot is not None and snapshot.last_run is not None
    run = snapshot.last_run
    assert await store.list_sessions() == ["s"] and [r.run_id for r in await store.list_runs("s")] == [run.run_id]
    assert await store.get_run(run.run_id) == run and await store.count_sessions() == 1

    entry = replace(snapshot.entries[-1], seq=snapshot.entries[-1].seq + 1)
    lease = Lease(run.run_id, "w", 2.0**40)
    writes: dict[str, Callable[[], Awaitable[object]]] = {
        "start_run": lambda: store.start_run(replace(run, run_id="r2"), None, {}),
        "claim": lambda: store.claim(run, entry.seq, lease, 0.0),
        "renew": lambda: store.renew(lease),
        "release": lambda: store.release(lease),
        "commit": lambda: store.commit(entry, {}),
        "commit_many": lambda: store.commit_many([entry], {}, run),
        "update_run": lambda: store.update_run(run),
        "delete_session": lambda: store.delete_session("s"),
        "expire_sessions": lambda: store.expire_sessions(datetime.now(UTC), dry_run=True),
        "vacuum": store.vacuum,
    }
    for operation, write in writes.items():
        with pytest.raises(StoreReadOnly, match="is read-only") as info:
            await write()
        assert info.value.operation == operation
    await store.close()
    assert _digest(db) == before


def _as_unprivileged() -> list[str]:
    """Nothing for a normal user; for root, setpriv without the capabilities that override file permissions."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    prefix = [setpriv, "--bounding-set", "-dac_override,-dac_read_search", "--"] if setpriv else []
    if not setpriv or subprocess.run([*prefix, "true"], capture_output=True).returncode != 0:
        pytest.skip("running as root without setpriv able to drop CAP_DAC_OVERRIDE")
    return [str(p) for p in prefix]


_READER = """
import asyncio, sys
from stopwise import SQLiteStore

async def main(path, read_only):
    try:
        store = SQLiteStore(path, read_only=read_only)
    except Exception as exc:
        print(type(exc).__name__, exc)
        return
    async with store:
        print(await store.list_sessions())
        try:
            await store.delete_session("s")
        except Exception as exc:
            print(type(exc).__name__)

asyncio.run(main(sys.argv[1], sys.argv[2] == "ro"))
"""


@pytest.mark.parametrize("wal", [False, True], ids=["at_rest", "with_wal_left_beside_it"])
async def test_a_log_in_a_read_only_file_and_directory_opens_read_only_and_is_left_as_it_was(
    tmp_path: Path, wal: bool
) -> None:
    shelf = tmp_path / "shelf"
    shelf.mkdir()
    db = shelf / "log.db"
    await _log(db)
    if wal:  # what a reader opening it while its directory was writable leaves: SQLite reads through them
        async with SQLiteStore(db, read_only=True) as store:
            assert await store.list_sessions() == ["s"]
    files = {p.name: _digest(p) for p in shelf.iterdir()}
    db.chmod(0o444)
    shelf.chmod(0o555)
    try:
        env = {**os.environ, "PYTHONPATH": str(REPO / "src")}

        def read(mode: str) -> list[str]:
            command = [*_as_unprivileged(), sys.executable, "-c", _READER, str(db), mode]
            done = subprocess.run(command, capture_output=True, text=True, timeout=60, env=env)
            assert done.returncode == 0, done.stderr
            return done.stdout.splitlines()

        assert read("ro") == ["['s']", "StoreReadOnly"]
        if not wal:  # SQLite cannot create the -wal and -shm files a writable open needs: named, with the way out
            writable = read("rw")
            assert writable[0].startswith("StoreError cannot open SQLite database") and "read_only=True" in writable[0]
        assert {p.name: _digest(p) for p in shelf.iterdir()} == files
    finally:
        shelf.chmod(0o755)


def _v1_log(path: Path) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    version, statements = MIGRATIONS[0]
    for sql in statements:
        conn.execute(sql)
    conn.execute(f"PRAGMA user_version={version}")
    conn.execute("INSERT INTO sessions VALUES ('old', '{}', 0, 0)")
    conn.close()


async def test_a_log_that_needs_a_migration_opened_read_only_says_to_open_it_writable_once_and_is_not_touched(
    tmp_path: Path,
) -> None:
    db = tmp_path / "old.db"
    _v1_log(db)
    before = _digest(db)
    with pytest.raises(StoreReadOnly, match="open it writable once") as info:
        SQLiteStore(db, read_only=True)
    assert info.value.operation == "migrate" and "schema version 1" in str(info.value)
    assert _digest(db) == before and _sidecars(db) == []

    SQLiteStore(db).__exit__()  # migrates it
    async with SQLiteStore(db, read_only=True) as store:
        assert store.schema_version == LATEST and await store.list_sessions() == ["old"]


def test_an_empty_file_or_a_newer_log_opened_read_only_is_refused_untouched(tmp_path: Path) -> None:
    empty = tmp_path / "empty.db"
    empty.touch()
    with pytest.raises(StoreReadOnly, match="is empty"):
        SQLiteStore(empty, read_only=True)
    newer = tmp_path / "newer.db"
    with sqlite3.connect(newer) as conn:
        conn.execute(f"PRAGMA user_version={LATEST + 1}")
    conn.close()
    for path in (empty, newer):
        before = _digest(path)
        with pytest.raises(StoreError):
            SQLiteStore(path, read_only=True)
        assert _digest(path) == before
    with pytest.raises(SchemaTooNew):
        SQLiteStore(newer, read_only=True)
    with pytest.raises(StoreError, match="cannot open"):
        SQLiteStore(tmp_path / "missing.db", read_only=True)
    assert not (tmp_path / "missing.db").exists()


def test_store_names_a_foreign_database_with_a_high_user_version_foreign_not_newer(tmp_path: Path) -> None:
    """Many programs set a ``user_version`` of their own: one above stopwise's latest schema on a file sharing no
    table name with stopwise is another program's database, never "a log of a newer stopwise"."""
    db = tmp_path / "places.sqlite"
    conn = sqlite3.connect(db)
    with conn:
        conn.execute("CREATE TABLE moz_places (id INTEGER PRIMARY KEY, url TEXT)")
        conn.execute(f"PRAGMA user_version = {LATEST + 67}")
    conn.close()
    before = db.read_bytes()
    for read_only in (False, True):
        with pytest.raises(NotAStopwiseLog):
            SQLiteStore(db, read_only=read_only)
    assert db.read_bytes() == before
