"""The ``stopwise`` command, the demo, the examples and the README's code, run for real.

The demo runs as a real subprocess (``python -m stopwise demo``) on a SQLite file in a temporary directory; the
file is then opened with ``SQLiteStore`` to check what the command wrote.
"""

from __future__ import annotations

import ast
import os
import re
import sqlite3
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import pytest

import stopwise
from stopwise import CompletionReason, ErrorCode, RunStatus, SQLiteStore
from stopwise.cli import main
from stopwise.demo import SCENARIOS, Expected, run_demo
from stopwise.store.base import EntryKind

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"

# scenario -> (steps, status, completion reason, error code or None)
EXPECTED_ROWS = {
    "final_answer": ("3", "completed", "final_answer", None),
    "stop_when": ("2", "completed", "stop_when", None),
    "cutoff": ("3", "failed", "max_steps", "max_steps_exhausted"),
    "retry": ("6", "completed", "final_answer", None),
    "stop_guard": ("3", "completed", "final_answer", None),
    "guard_exhausted": ("3", "completed", "stop_guard_exhausted", None),
    "guardrails": ("3", "completed", "final_answer", None),
    "approval": ("2", "completed", "final_answer", None),
    "forced_output": ("3", "completed", "output", None),
    "loop": ("5", "failed", "infeasible", None),
    "drift": ("4", "failed", "infeasible", None),
    "injection": ("2", "completed", "final_answer", None),
    "premature": ("3", "completed", "final_answer", None),
    "infeasible": ("3", "failed", "infeasible", None),
    "irreversible": ("2", "completed", "final_answer", None),
}


def stopwise_cmd(
    *args: str, cwd: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "stopwise", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
    )


def table_rows(stdout: str) -> dict[str, list[str]]:
    """The demo table's rows by scenario name: each cell split on runs of two or more spaces."""
    rows = {}
    for line in stdout.splitlines():
        cells = re.split(r"\s{2,}", line.strip())
        if cells and cells[0] in EXPECTED_ROWS:
            rows[cells[0]] = cells
    return rows


def session_ids(stdout: str) -> list[str]:
    match = re.search(r"^Sessions: (.+)$", stdout, re.MULTILINE)
    assert match, stdout
    return match.group(1).split(", ")


def assert_one_line_error(result: subprocess.CompletedProcess[str], *fragments: str) -> None:
    assert result.returncode == 2, result
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    for fragment in fragments:
        assert fragment in lines[0]


# --- stopwise demo ----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """One real ``python -m stopwise demo --db PATH`` for the tests that read its output or its file."""
    db = tmp_path_factory.mktemp("demo") / "demo.db"
    return db, stopwise_cmd("demo", "--db", str(db))


def test_demo_exits_0_and_prints_every_scenario_as_expected(
    demo_run: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    db, result = demo_run
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stderr == ""
    assert str(db) in result.stdout
    assert f"OK: all {len(EXPECTED_ROWS)} scenarios ended as expected." in result.stdout
    header = next(line for line in result.stdout.splitlines() if line.startswith("scenario"))
    assert re.split(r"\s{2,}", header) == ["scenario", "steps", "status", "completion reason", "detail"]
    rows = table_rows(result.stdout)
    assert list(rows) == list(EXPECTED_ROWS)
    for name, (steps, status, reason, code) in EXPECTED_ROWS.items():
        assert rows[name][1:4] == [steps, status, reason], rows[name]
        if code is not None:
            assert rows[name][4].startswith(f"{code}: "), rows[name]
    assert rows["stop_when"][4] == "tool 'publish' was called"
    assert rows["cutoff"][4] == "max_steps_exhausted: Max steps (3) reached"


async def test_demo_writes_its_runs_to_the_sqlite_file(
    demo_run: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    db, result = demo_run
    assert result.returncode == 0, result.stderr
    sessions = session_ids(result.stdout)
    assert len(sessions) == len(EXPECTED_ROWS) - 1  # the cut-off and its retry share a session
    store = SQLiteStore(db)
    try:
        by_name = {s.rsplit("-", 1)[1]: s for s in sessions}

        [weather] = await store.list_runs(by_name["weather"])
        assert (weather.status, weather.completion_reason, weather.steps) == (
            RunStatus.COMPLETED,
            CompletionReason.FINAL_ANSWER,
            3,
        )
        [announce] = await store.list_runs(by_name["announce"])
        assert (announce.status, announce.completion_reason, announce.steps) == (
            RunStatus.COMPLETED,
            CompletionReason.STOP_WHEN,
            2,
        )
        [report] = await store.list_runs(by_name["report"])
        assert report.completion_reason is CompletionReason.OUTPUT
        assert report.output == {"city": "Lisbon", "celsius": 19.5, "sky": "sunny"}

        # retry() continues the cut-off run: one run record, completed, its budget counted from step 3.
        [archive] = await store.list_runs(by_name["archive"])
        assert (archive.status, archive.completion_reason, archive.error) == (
            RunStatus.COMPLETED,
            CompletionReason.FINAL_ANSWER,
            None,
        )
        assert (archive.steps, archive.budget_base) == (6, 3)
        # The cut-off is still in the log: step 3's recorded decision failed the run with max_steps.
        snapshot = await store.load_session(by_name["archive"])
        assert snapshot is not None
        # A step's decision is in its STEP entry, or in its SETTLE entry after a write-ahead intent.
        steps = [e for e in snapshot.entries if e.kind in (EntryKind.STEP, EntryKind.SETTLE)]
        assert [e.step for e in steps] == [1, 2, 3, 4, 5, 6]
        assert steps[2].decision is not None
        assert {k: steps[2].decision[k] for k in ("action", "reason", "detail")} == {
            "action": "fail",
            "reason": "max_steps",
            "detail": "Max steps (3) reached",
        }
        assert steps[5].decision is not None and steps[5].decision["reason"] == "final_answer"
    finally:
        await store.close()


def test_runs_lists_the_run_records_of_a_session(demo_run: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    db, demo = demo_run
    archive = next(s for s in session_ids(demo.stdout) if s.endswith("-archive"))
    result = stopwise_cmd("runs", "--db", str(db), "--session", archive)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert re.split(r"\s{2,}", lines[0]) == [
        "run_id",
        "session",
        "agent",
        "status",
        "completion_reason",
        "steps",
        "error",
    ]
    assert len(lines) == 3
    cells = re.split(r"\s{2,}", lines[2].strip())
    assert cells[1:] == [archive, "archivist", "completed", "final_answer", "6"]


def test_runs_of_an_unknown_session_exits_1(demo_run: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    db, _ = demo_run
    result = stopwise_cmd("runs", "--db", str(db), "--session", "no-such-session")
    assert result.returncode == 1
    assert "no runs in session 'no-such-session'" in result.stderr


def test_demo_without_db_uses_a_new_temporary_file(tmp_path: Path) -> None:
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    result = stopwise_cmd("demo", env=env)
    assert result.returncode == 0, result.stderr
    match = re.search(r"log in (\S+) \(new temporary file\)", result.stdout)
    assert match, result.stdout
    path = Path(match.group(1))
    assert path.is_file() and path.is_relative_to(tmp_path)


@pytest.mark.slow
def test_demo_reuses_an_existing_database(tmp_path: Path) -> None:
    db = tmp_path / "demo.db"
    first, second = stopwise_cmd("demo", "--db", str(db)), stopwise_cmd("demo", "--db", str(db))
    assert (first.returncode, second.returncode) == (0, 0), second.stderr
    assert set(session_ids(first.stdout)).isdisjoint(session_ids(second.stdout))


def test_demo_db_in_a_missing_directory_is_one_line_and_exit_2(tmp_path: Path) -> None:
    db = tmp_path / "missing" / "demo.db"
    result = stopwise_cmd("demo", "--db", str(db))
    assert_one_line_error(result, "stopwise demo: error:", "does not exist", str(db.parent))
    assert not db.parent.exists()


def test_demo_db_that_is_a_directory_is_exit_2(tmp_path: Path) -> None:
    assert_one_line_error(stopwise_cmd("demo", "--db", str(tmp_path)), "is a directory")


def test_demo_db_that_is_not_sqlite_is_exit_2(tmp_path: Path) -> None:
    db = tmp_path / "notes.db"
    db.write_text("not a database\n" * 100)
    assert_one_line_error(stopwise_cmd("demo", "--db", str(db)), str(db), "not a database")


def test_runs_on_a_missing_file_is_exit_2_and_creates_nothing(tmp_path: Path) -> None:
    db = tmp_path / "none.db"
    assert_one_line_error(stopwise_cmd("runs", "--db", str(db), "--session", "s"), "no such file")
    assert not db.exists()


def test_runs_on_a_newer_schema_is_exit_2(tmp_path: Path) -> None:
    db = tmp_path / "future.db"
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA user_version=999")
    assert_one_line_error(stopwise_cmd("runs", "--db", str(db), "--session", "s"), "schema version 999")


def test_runs_without_db_reads_stopwise_db_and_names_it_when_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)  # as show, report and retry do, runs reads the log stopwise run writes by default
    assert main(["runs"]) == 2
    assert capsys.readouterr().err == "stopwise runs: error: --db stopwise.db: no such file\n"


def test_runs_without_session_lists_the_latest_sessions(
    demo_run: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    db, demo = demo_run
    result = stopwise_cmd("runs", "--db", str(db))
    assert result.returncode == 0, result.stderr
    listed = {re.split(r"\s{2,}", line.strip())[1] for line in result.stdout.splitlines()[2:]}
    assert listed == set(session_ids(demo.stdout))
    one = stopwise_cmd("runs", "--db", str(db), "--limit", "1")
    assert len({re.split(r"\s{2,}", line.strip())[1] for line in one.stdout.splitlines()[2:]}) == 1


def test_runs_with_a_limit_below_one_is_exit_2(demo_run: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    db, _ = demo_run
    assert_one_line_error(stopwise_cmd("runs", "--db", str(db), "--limit", "0"), "--limit")


def test_a_scenario_that_ends_unexpectedly_fails_the_demo(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    first = SCENARIOS[0]
    wrong = replace(first, expected=Expected(RunStatus.FAILED, CompletionReason.MAX_STEPS, steps=3))

    async def broken_demo(path: Path) -> object:
        return await run_demo(path, (wrong, *SCENARIOS[1:]))

    monkeypatch.setattr("stopwise.cli.run_demo", broken_demo)
    assert main(["demo", "--db", str(tmp_path / "demo.db")]) == 1
    captured = capsys.readouterr()
    assert f"FAILED: 1 of {len(EXPECTED_ROWS)} scenarios did not end as expected" in captured.err
    assert "final_answer: status completed, expected failed" in captured.err
    assert "OK:" not in captured.out


async def test_a_scenario_that_raises_is_reported_not_fatal(tmp_path: Path) -> None:
    async def explode(runner: object, session_id: str) -> object:
        raise RuntimeError("boom")

    broken = replace(SCENARIOS[0], run=explode)
    report = await run_demo(tmp_path / "demo.db", (broken, SCENARIOS[1]))
    assert not report.ok
    assert report.outcomes[0].problems == ("raised RuntimeError: boom",)
    assert report.outcomes[1].ok


# --- the command itself -----------------------------------------------------------------------------------


def test_version() -> None:
    result = stopwise_cmd("--version")
    assert result.returncode == 0
    assert result.stdout.strip() == f"stopwise {stopwise.__version__}"


def test_demo_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["demo", "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert "usage: stopwise demo" in out and "--db PATH" in out


def test_no_command_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main([])
    assert exc.value.code == 2
    assert "usage: stopwise" in capsys.readouterr().err


def test_console_script_is_installed(tmp_path: Path) -> None:
    script = Path(sys.executable).parent / ("stopwise.exe" if os.name == "nt" else "stopwise")
    if not script.exists():
        pytest.skip(f"no console script next to {sys.executable}")
    result = subprocess.run(
        [str(script), "demo", "--db", str(tmp_path / "demo.db")], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr


# --- examples and README ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("example", "expected"),
    [
        ("quickstart.py", ["status:            completed", "completion_reason: final_answer"]),
        (
            "cutoff_and_retry.py",
            [
                "run:   failed, reason max_steps, 3 steps",
                "error max_steps_exhausted: Max steps (3) reached",
                "retry: completed, reason final_answer, 6 steps in all",
            ],
        ),
        (
            "budgets.py",
            [
                "1. tool_call_limit: 5 calls ran",
                "retry with a fresh budget: final_answer",
                "2. token_limit after 2 calls: 3000 tokens used",
                "3. tool_output after 2 calls: Report(city='Oslo', population=709000)",
            ],
        ),
    ],
)
def test_examples_run_offline(example: str, expected: Sequence[str], tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "examples" / example)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    for line in expected:
        assert line in result.stdout


def readme_python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.DOTALL)


def test_readme_setup_commands() -> None:
    text = README.read_text(encoding="utf-8")
    assert "python -m pip install -e . && stopwise demo\n" in text
    assert "python -m pip install -e '.[test]' && python -m pytest -q\n" in text


def test_readme_api_table_matches_all() -> None:
    text = README.read_text(encoding="utf-8")
    section = text.split("## Public API", 1)[1].split("\n## ", 1)[0]
    table = "\n".join(line for line in section.splitlines() if line.startswith("|"))
    documented = set(re.findall(r"`([A-Za-z_][A-Za-z0-9_]*)`", table)) - {"stopwise"}
    assert documented == set(stopwise.__all__)


def test_readme_lists_every_completion_reason_and_error_code() -> None:
    text = README.read_text(encoding="utf-8")
    for value in [*CompletionReason, *ErrorCode]:
        assert f"| `{value.value}` |" in text, value


def test_readme_python_blocks_parse() -> None:
    for block in readme_python_blocks():
        ast.parse(block)
