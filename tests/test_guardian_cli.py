"""``stopwise replay`` and ``stopwise guardian stats`` over a real SQLite log."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from stopwise import Runner, SQLiteStore
from stopwise.guardian import Guardian
from test_guardian import QUIET, Fixed, agent, searching


async def _log(tmp_path: Path) -> Path:
    db = tmp_path / "guardian.db"
    store = SQLiteStore(db)
    ev = Fixed(lambda p, q: {**QUIET, "goal_reached": 0.7 if len(p.steps) >= 2 else 0.1})
    await Runner(store).run(agent(searching(4), Guardian(ev)), "go", session_id="s")
    await store.close()
    return db


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "stopwise", *args], capture_output=True, text=True, timeout=120)


async def test_replay_agrees_with_every_recorded_outcome(tmp_path: Path) -> None:
    db = await _log(tmp_path)
    result = cli("replay", str(db))
    assert result.returncode == 0, result.stderr
    assert "every outcome agrees with the log" in result.stdout


async def test_replay_exits_1_listing_a_decision_that_disagrees(tmp_path: Path) -> None:
    import sqlite3

    db = await _log(tmp_path)
    conn = sqlite3.connect(db)
    row = conn.execute(
        'SELECT session_id, seq, records FROM log WHERE records LIKE \'%"kind":"turn"%\' LIMIT 1'
    ).fetchone()
    records = json.loads(row[2])
    for r in records:
        if r.get("type") == "guardian" and r.get("kind") == "turn":
            r["outcome"] = "stop_success"  # a tampered record
    conn.execute("UPDATE log SET records=? WHERE session_id=? AND seq=?", (json.dumps(records), row[0], row[1]))
    conn.commit()
    conn.close()
    result = cli("replay", str(db))
    assert result.returncode == 1
    assert "1 disagree with the log" in result.stderr and "stop_success" in result.stdout


async def test_replay_under_another_policy_lists_what_would_flip(tmp_path: Path) -> None:
    db = await _log(tmp_path)
    policy = tmp_path / "lenient.json"
    policy.write_text(json.dumps({"conditions": {"goal_reached": {"threshold": 0.5}}}))
    result = cli("replay", str(db), "--policy", str(policy))
    assert result.returncode == 0, result.stderr
    assert "would flip" in result.stdout and "stop_success" in result.stdout
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"conditions": {"goal_reached": {"threshhold": 0.5}}}))
    refused = cli("replay", str(db), "--policy", str(bad))
    assert refused.returncode == 2 and "threshhold" in refused.stderr


async def test_guardian_stats_prints_counts_histograms_and_escalation_rates(tmp_path: Path) -> None:
    db = await _log(tmp_path)
    result = cli("guardian", "stats", str(db))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("7 decisions: continue 7")
    header = next(line for line in lines if line.startswith("condition"))
    assert "escalation rate" in header
    goal = next(line for line in lines if line.startswith("goal_reached"))
    assert goal.split()[1] == "4"  # asked on each of the 4 turns


def test_replay_of_a_missing_file_is_exit_2(tmp_path: Path) -> None:
    result = cli("replay", str(tmp_path / "nope.db"))
    assert result.returncode == 2 and "no such file" in result.stderr


async def test_stats_and_replay_of_one_run_read_only_its_session(tmp_path: Path) -> None:
    import sqlite3

    db = await _log(tmp_path)  # session "s": 7 decisions
    store = SQLiteStore(db)
    ev = Fixed(QUIET)
    other = await Runner(store).run(agent(searching(2), Guardian(ev)), "go", session_id="other")
    await store.close()
    conn = sqlite3.connect(db)
    conn.execute("UPDATE log SET records='not json' WHERE session_id='s'")  # session "s" is now unreadable
    conn.commit()
    conn.close()
    stats = cli("guardian", "stats", str(db), "--run", other.run_id)
    assert stats.returncode == 0, stats.stderr
    assert stats.stdout.startswith("3 decisions: continue 3") and stats.stderr == ""
    replayed = cli("replay", str(db), "--run", other.run_id)
    assert replayed.returncode == 0 and "replayed 3 decisions" in replayed.stdout and replayed.stderr == ""
    whole = cli("guardian", "stats", str(db))
    assert whole.stdout.startswith("3 decisions") and "the session is skipped" in whole.stderr  # and said so


def _with_stderr_on_a_terminal(*args: str) -> tuple[subprocess.CompletedProcess[str], bytes]:
    """``stopwise ARGS`` with its stderr on a pseudo-terminal: the process, and what it drew there."""
    import os
    import pty

    leader, follower = pty.openpty()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "stopwise", *args], stdout=subprocess.PIPE, stderr=follower, text=True, timeout=120
        )
        os.close(follower)
        drawn = b""
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # the terminal's other end is closed: everything was read
                break
            if not chunk:
                break
            drawn += chunk
    finally:
        os.close(leader)
    return done, drawn


async def test_whole_database_stats_draw_a_progress_bar_on_a_terminal_and_none_into_a_pipe(tmp_path: Path) -> None:
    db = await _log(tmp_path)
    store = SQLiteStore(db)
    await Runner(store).run(agent(searching(2), Guardian(Fixed(QUIET))), "go", session_id="other")
    await store.close()
    piped = cli("guardian", "stats", str(db))
    assert piped.returncode == 0 and piped.stderr == "", "not a terminal: no bar"
    done, drawn = _with_stderr_on_a_terminal("guardian", "stats", str(db))
    assert done.returncode == 0 and done.stdout == piped.stdout, "the bar goes to stderr only"
    assert b"reading sessions [" in drawn and b"2/2" in drawn, drawn
