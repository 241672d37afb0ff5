"""Another program's SQLite database is named as such whatever its ``PRAGMA user_version``: many programs set one
(a browser's history file, an app's database) and a version above stopwise's latest schema must not turn it into
"a log written by a newer stopwise" (which tells the user to upgrade stopwise). The CLI runs as a real process."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from tests._cli_fixtures import stopwise_cmd

from stopwise.store._schema import LATEST


def test_a_foreign_database_with_a_high_user_version_is_named_foreign_not_newer(tmp_path: Path) -> None:
    db = tmp_path / "places.sqlite"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE moz_places (id INTEGER PRIMARY KEY, url TEXT)")
        conn.execute(f"PRAGMA user_version = {LATEST + 67}")
    conn.close()
    before = db.read_bytes()

    proc = stopwise_cmd("runs", "--db", str(db), cwd=tmp_path)

    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert "not a stopwise log: an SQLite database of another program (tables: moz_places)" in proc.stderr
    assert "upgrade stopwise" not in proc.stderr
    assert db.read_bytes() == before


def test_a_log_of_a_newer_stopwise_still_says_to_upgrade(tmp_path: Path) -> None:
    db = tmp_path / "new.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE sessions (id TEXT PRIMARY KEY)")
        conn.execute("CREATE TABLE runs (id TEXT PRIMARY KEY)")
        conn.execute("CREATE TABLE log_entries (seq INTEGER)")  # a newer schema may rename a table
        conn.execute(f"PRAGMA user_version = {LATEST + 1}")
    conn.close()

    proc = stopwise_cmd("runs", "--db", str(db), cwd=tmp_path)

    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert "upgrade stopwise" in proc.stderr
    assert "another program" not in proc.stderr
