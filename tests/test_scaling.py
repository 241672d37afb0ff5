"""The scaling examples run for real (SQLite; PostgreSQL on the test cluster; DBOS on SQLite and on
PostgreSQL), and the DBOS runtime refuses misuse before touching DBOS."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from _pgcluster import Server
from stopwise import Agent, ConfigError, ScriptedModel

ROOT = Path(__file__).resolve().parent.parent


def _example(name: str, *args: str, cwd: Path) -> str:
    result = subprocess.run(
        [sys.executable, str(ROOT / "examples" / name), *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


DBOS_LINES = (
    "run:   failed, reason max_steps, 3 steps",
    "retry: completed, reason final_answer, 6 steps in all",
    "output: Page 5 has it.",
)


def _has(out: str, lines: Sequence[str]) -> None:
    for line in lines:
        assert line in out, out


@pytest.mark.slow
def test_sqlite_example(tmp_path: Path) -> None:
    _has(_example("scale_sqlite.py", cwd=tmp_path), ["20 of 20 runs completed, 80 steps"])


@pytest.mark.slow
def test_postgres_example(pg_server: Server, tmp_path: Path) -> None:
    out = _example("scale_postgres.py", pg_server.new_database(), cwd=tmp_path)
    _has(out, ["20 of 20 runs completed, 80 steps", "completed, final_answer, 4 steps"])


@pytest.mark.slow
def test_dbos_example_on_sqlite(tmp_path: Path) -> None:
    pytest.importorskip("dbos")
    _has(_example("scale_dbos.py", cwd=tmp_path), DBOS_LINES)


@pytest.mark.slow
def test_dbos_example_on_postgres(pg_server: Server, tmp_path: Path) -> None:
    pytest.importorskip("dbos")
    _has(_example("scale_dbos.py", pg_server.new_database(), cwd=tmp_path), DBOS_LINES)


def test_dbos_runtime_refuses_duplicate_and_unknown_agents() -> None:
    pytest.importorskip("dbos")
    from stopwise import MemoryStore
    from stopwise.runtime.dbos import DBOSRuntime

    a = Agent("a", "", ScriptedModel(["x"]))
    with pytest.raises(ConfigError, match="repeated: a"):
        DBOSRuntime(MemoryStore(), [a, Agent("a", "", ScriptedModel(["y"]))])
    runtime = DBOSRuntime(MemoryStore(), [a])
    with pytest.raises(ConfigError, match="no agent named 'b'"):
        runtime.agent("b")
