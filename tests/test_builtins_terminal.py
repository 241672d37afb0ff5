"""Terminal safety: every stored string the command line prints has its control characters escaped, so no escape
sequence reaches the terminal and no newline forges a table row."""

from __future__ import annotations

import asyncio
import sys
import textwrap
from pathlib import Path

import pytest

from stopwise import Agent, Runner, ScriptedModel, SQLiteStore
from stopwise._terminal import terminal_safe
from stopwise.cli import main

HOSTILE = "s1\x1b]0;pwned\x07\x1b[2J\r\nrun_forged  s2  evil  completed  final_answer  1\u202e\x9b31m"


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("a\x1b[31mred", "a\\x1b[31mred"),
        ("line\nnext\r", "line\\nnext\\r"),
        ("tab\there", "tab\\there"),
        ("del\x7f c1\x9b", "del\\x7f c1\\x9b"),
        ("bidi\u202eevil\u2066", "bidi\\u202eevil\\u2066"),
        ("sep\u2028x", "sep\\u2028x"),
        ("back\\slash", "back\\\\slash"),
        ("Zürich, 東京, émoji 🙂", "Zürich, 東京, émoji 🙂"),
    ],
)
def test_terminal_safe_escapes_controls_and_keeps_letters(raw: str, shown: str) -> None:
    assert terminal_safe(raw) == shown


def test_terminal_safe_leaves_no_control_character() -> None:
    every = "".join(map(chr, range(0x00, 0x250))) + "\u2028\u2029\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
    out = terminal_safe(every)
    assert all(not (ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F) for c in out)
    assert not set(out) & set("\u2028\u2029\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


async def _hostile_run(db: Path) -> None:
    store = SQLiteStore(str(db))
    try:
        agent = Agent(f"agent{HOSTILE}", "", ScriptedModel(["done"]))
        await Runner(store).run(agent, "hi", session_id=HOSTILE)
    finally:
        await store.close()


def test_runs_escapes_a_hostile_session_id_and_agent_name(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "log.db"
    asyncio.run(_hostile_run(db))
    assert main(["runs", "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\r" not in out and "\x9b" not in out and "\u202e" not in out
    lines = out.splitlines()
    assert len(lines) == 3, lines  # header, rule, one row: the newline forged nothing
    assert "\\x1b]0;pwned\\x07" in lines[2] and "\\r\\nrun_forged" in lines[2]


def test_runs_escapes_the_session_it_could_not_find(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "log.db"
    asyncio.run(_hostile_run(db))
    assert main(["runs", "--db", str(db), "--session", "nope\x1b[2J"]) == 1
    assert "\x1b" not in capsys.readouterr().err


def test_run_escapes_the_models_answer_and_the_session_id(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "path", [*sys.path])
    agent_file = tmp_path / "hostile.py"
    agent_file.write_text(
        textwrap.dedent(
            """
            from stopwise import Agent, ScriptedModel

            agent = Agent("h", "", ScriptedModel(["ok\\x1b]52;c;cm0gLXJmIH4=\\x07\\nstatus: completed"]))
            """
        ),
        encoding="utf-8",
    )
    assert main(["run", f"{agent_file}:agent", "hi", "--db", str(tmp_path / "log.db")]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out
    assert [line for line in out.splitlines() if line.startswith("status:")] == ["status: completed"]
    assert "output: ok\\x1b]52;c;cm0gLXJmIH4=\\x07\\nstatus: completed" in out
