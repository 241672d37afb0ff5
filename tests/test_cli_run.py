"""``stopwise run FILE.py:NAME PROMPT``: loads a caller's agent from a file, runs it on SQLite, prints the outcome."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from stopwise import SQLiteStore
from stopwise.cli import main

AGENT_FILE = textwrap.dedent(
    """
    from helpers import FORECAST  # a neighbour module: the file's folder is importable

    from stopwise import Agent, Reply, ScriptedModel, ToolCall, tool


    @tool
    def get_weather(city: str) -> str:
        \"\"\"Current weather for a city.\"\"\"
        return f"{city}: {FORECAST}"


    agent = Agent(
        name="forecaster",
        instructions="Use the tools.",
        model=ScriptedModel([Reply(tool_calls=[ToolCall("get_weather", {"city": "Oslo"})]), "Oslo: 4 °C, cloudy."]),
        tools=[get_weather],
    )
    looper = Agent(
        name="looper",
        instructions="",
        model=ScriptedModel([Reply(tool_calls=[ToolCall("get_weather", {"city": "Oslo"})])] * 2),
        tools=[get_weather],
        max_steps=2,
    )
    not_an_agent = 42
    """
)


@pytest.fixture(autouse=True)
def _restore_sys_path(monkeypatch: pytest.MonkeyPatch) -> None:
    # Loading an agent file puts its folder on sys.path for good; keep that from leaking into other tests.
    monkeypatch.setattr(sys, "path", [*sys.path])


@pytest.fixture
def agent_file(tmp_path: Path) -> Path:
    (tmp_path / "helpers.py").write_text('FORECAST = "4 °C, cloudy"\n', encoding="utf-8")
    path = tmp_path / "agents.py"
    path.write_text(AGENT_FILE, encoding="utf-8")
    return path


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONIOENCODING": "utf-8"}
    return subprocess.run(
        [sys.executable, "-m", "stopwise", *args], cwd=cwd, capture_output=True, text=True, timeout=120, env=env
    )


def test_run_prints_each_decision_and_the_outcome_and_logs_to_the_db(agent_file: Path, tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    proc = _cli("run", f"{agent_file}:agent", "Weather in Oslo?", "--db", str(db), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[:4] == [
        "step 1: continue",
        "step 2: complete (final_answer)",
        "status: completed",
        "completion reason: final_answer",
    ]
    assert "output: Oslo: 4 °C, cloudy." in lines
    session = next(line for line in lines if line.startswith("session: ")).split()[1]

    async def runs() -> list[str]:
        store = SQLiteStore(db)
        try:
            return [r.status.value for r in await store.list_runs(session)]
        finally:
            await store.close()

    assert asyncio.run(runs()) == ["completed"]


def test_run_keeps_its_log_in_stopwise_db_in_the_current_directory_by_default(
    agent_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["run", "agents.py:agent", "Weather?"]) == 0
    assert (tmp_path / "stopwise.db").is_file()
    assert "status: completed" in capsys.readouterr().out


def test_a_run_that_fails_exits_1_and_prints_the_error(
    agent_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", f"{agent_file}:looper", "Go", "--db", str(tmp_path / "x.db")]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[:2] == ["step 1: continue", "step 2: fail (max_steps): Max steps (2) reached"]
    assert "status: failed" in out
    assert "error: max_steps_exhausted: Max steps (2) reached" in out


@pytest.mark.parametrize(
    ("target", "problem"),
    [
        ("missing.py:agent", "missing.py: no such file"),
        ("agents.py:nope", "agents.py has no attribute 'nope'"),
        ("agents.py:not_an_agent", "agents.py:not_an_agent is of type int, expected an Agent"),
        ("agents.py", "expected FILE.py:NAME"),
        ("broken.py:agent", "importing broken.py raised ZeroDivisionError: division by zero"),
        ("keyless.py:agent", "keyless.py: model: unknown provider 'nowhere'"),
    ],
)
def test_an_agent_that_cannot_be_loaded_exits_2_with_one_line(
    agent_file: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    target: str,
    problem: str,
) -> None:
    (tmp_path / "broken.py").write_text("x = 1 / 0\n", encoding="utf-8")
    (tmp_path / "keyless.py").write_text(
        "from stopwise import Agent\nagent = Agent(name='a', instructions='', model='nowhere:m')\n", encoding="utf-8"
    )
    monkeypatch.chdir(tmp_path)
    assert main(["run", target, "Hi"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1
    assert captured.err.startswith("stopwise run: error: ")
    assert problem in captured.err
    assert not (tmp_path / "stopwise.db").exists()


def test_a_bad_model_string_exits_2_naming_the_model(
    agent_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", f"{agent_file}:agent", "Hi", "--model", "gpt-4", "--db", str(tmp_path / "x.db")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "model: 'gpt-4' is not a model string" in err


@pytest.fixture
def server() -> Iterator[object]:
    pytest.importorskip("openai")
    from provider_server import serve

    yield from serve()


@pytest.mark.slow
def test_model_option_runs_the_agent_on_an_openai_compatible_server(
    agent_file: Path, tmp_path: Path, server: object
) -> None:
    from provider_server import Answer, ProviderServer

    assert isinstance(server, ProviderServer)
    reply = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": "llama-test",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "Hi from the server."}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7},
    }
    server.answer(Answer(body=reply))
    spec = f"openai-compatible:{server.url}/v1#llama-test"
    proc = _cli("run", f"{agent_file}:agent", "Hi", "--model", spec, "--db", str(tmp_path / "x.db"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "output: Hi from the server." in proc.stdout.splitlines()
    assert server.requests[0].body["model"] == "llama-test"
    assert [t["function"]["name"] for t in server.requests[0].body["tools"]] == ["get_weather"]


def test_run_logs_the_goal_and_criteria_given_on_the_command_line(
    agent_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "g.db"
    args = ["run", f"{agent_file}:agent", "Weather?", "--db", str(db), "--goal", "Report Oslo's weather"]
    assert main([*args, "--criterion", "the temperature", "--criterion", "the sky"]) == 0
    capsys.readouterr()

    async def goals() -> list[object]:
        store = SQLiteStore(db)
        try:
            (session,) = await store.list_sessions()
            snapshot = await store.load_session(session)
            assert snapshot is not None
            return [r for e in snapshot.entries for r in e.records if r["type"] == "run_goal"]
        finally:
            await store.close()

    assert asyncio.run(goals()) == [
        {"type": "run_goal", "text": "Report Oslo's weather", "criteria": ["the temperature", "the sky"]}
    ]
    assert main(["run", f"{agent_file}:agent", "Weather?", "--db", str(db), "--goal", " "]) == 2
    assert "goal.text" in capsys.readouterr().err
