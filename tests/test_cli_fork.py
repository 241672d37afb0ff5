"""``stopwise fork SESSION --at STEP --agent FILE.py:NAME``: continues a session's last run from an earlier
committed step in a new session, on a real SQLite file; the source session is untouched, and every refusal is
one line, exit code 2, with nothing written."""

from __future__ import annotations

import asyncio
import re
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from _cli_fixtures import stopwise_cmd
from stopwise import SQLiteStore
from stopwise.cli import main
from stopwise.messages import Role
from stopwise.records import ForkRecord, parse_log

AGENTS = textwrap.dedent(
    '''
    from stopwise import Agent, FunctionModel, Reply, RunContext, ToolCall, tool
    from stopwise.messages import Role


    @tool
    def tick(ctx: RunContext) -> int:
        """Count one tick in the session's state."""
        ctx.state["ticks"] = ctx.state.get("ticks", 0) + 1
        return int(ctx.state["ticks"])


    def _ticks(request):
        done = sum(1 for m in request.messages if m.role is Role.TOOL)
        if done < 3:
            return Reply(tool_calls=(ToolCall("tick", {}, id=f"t{done}"),))
        said = [m.content for m in request.messages if m.role is Role.USER][-1]
        return f"ticked {done}, last told {said!r}"


    @tool(needs_approval=True)
    def pay(amount: int) -> str:
        """Pay an amount."""
        return f"paid {amount}"


    def _pay(request):
        if any(m.role is Role.TOOL for m in request.messages):
            return "paid"
        return Reply(tool_calls=(ToolCall("pay", {"amount": 5}, id="p1"),))


    ticker = Agent(name="ticker", model=FunctionModel(_ticks), tools=(tick,))
    payer = Agent(name="payer", model=FunctionModel(_pay), tools=(pay,))
    '''
)


@pytest.fixture(autouse=True)
def _restore_sys_path(monkeypatch: pytest.MonkeyPatch) -> None:
    # Loading an agent file puts its folder on sys.path for good; keep that from leaking into other tests.
    monkeypatch.setattr(sys, "path", [*sys.path])


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "agents.py").write_text(AGENTS, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _session(stdout: str) -> str:
    return re.search(r"^session: (\S+)", stdout, re.MULTILINE).group(1)  # type: ignore[union-attr]


def _read(db: Path, session: str) -> tuple[Any, Any]:
    async def read() -> tuple[Any, Any]:
        store = SQLiteStore(db)
        try:
            return await store.load_session(session), await store.list_runs(session)
        finally:
            await store.close()

    return asyncio.run(read())


def test_a_fork_at_an_earlier_step_completes_in_a_new_session_and_leaves_the_source_untouched(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = workdir / "stopwise.db"
    assert main(["run", "agents.py:ticker", "tick three times"]) == 0
    source = _session(capsys.readouterr().out)
    before, (source_run,) = _read(db, source)
    assert before.last_run.steps == 4

    code = main(["fork", source, "--at", "1", "--agent", "agents.py:ticker", "--new-session", "again"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert f"forked from: session {source}, run {source_run.run_id}, step 1\n" in out
    forked_run = re.search(r"^run: (\S+)$", out, re.MULTILINE).group(1)  # type: ignore[union-attr]
    assert forked_run != source_run.run_id
    assert "status: completed\n" in out
    assert "output: ticked 3, last told 'tick three times'\n" in out
    assert _session(out) == "again"

    after, runs = _read(db, source)
    assert after.entries == before.entries and runs == [source_run]  # the source session is untouched
    forked, (record,) = _read(db, "again")
    assert record.run_id == forked_run and record.status == "completed" and record.steps == 4
    # The fork kept step 1's tool result and ran two more: three in all, not the source's three plus two.
    assert sum(1 for m in forked.messages() if m.role is Role.TOOL) == 3
    notes = [r for _, rs in parse_log(forked.entries) for r in rs if isinstance(r, ForkRecord)]
    assert [(n.source_session_id, n.source_run_id, n.at_step) for n in notes] == [(source, source_run.run_id, 1)]


def test_a_forks_message_is_new_input_the_model_reads(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "agents.py:ticker", "tick"]) == 0
    source = _session(capsys.readouterr().out)
    code = main(["fork", source, "--at", "0", "--agent", "agents.py:ticker", "--message", "once more"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "output: ticked 3, last told 'once more'\n" in out
    assert _session(out) != source


def test_every_refusal_is_one_line_exit_2_and_writes_nothing(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = workdir / "stopwise.db"
    assert main(["run", "agents.py:ticker", "tick"]) == 0
    ticked = _session(capsys.readouterr().out)
    assert main(["run", "agents.py:payer", "pay"]) == 1  # suspends at step 1, waiting for approval
    suspended = _session(capsys.readouterr().out)
    assert main(["fork", ticked, "--at", "1", "--agent", "agents.py:ticker", "--new-session", "taken"]) == 0
    capsys.readouterr()
    written = db.read_bytes()

    refusals = {
        "a step not committed": ([ticked, "--at", "9"], "has no committed step 9 (its committed steps are 0..4)"),
        "not a number": ([ticked, "--at", "two"], "--at two: not a step number"),
        "a negative step": ([ticked, "--at", "-1"], "--at -1: not a step number"),
        "a suspended step": (
            [suspended, "--at", "1", "--agent", "agents.py:payer"],
            "suspended for approval; fork at an earlier step",
        ),
        "an unknown session": (["nobody", "--at", "1"], "session 'nobody' has no run to continue"),
        "a session of another agent": ([suspended, "--at", "0"], "belongs to agent 'payer', not 'ticker'"),
        "a new session that exists": ([ticked, "--at", "1", "--new-session", "taken"], "session 'taken' exists"),
        "an agent that is not there": ([ticked, "--at", "1", "--agent", "agents.py:nobody"], "nobody"),
        "a missing database": ([ticked, "--at", "1", "--db", "missing.db"], "--db missing.db: no such file"),
    }
    for what, (args, problem) in refusals.items():
        if "--agent" not in args:
            args = [*args, "--agent", "agents.py:ticker"]
        assert main(["fork", *args]) == 2, what
        captured = capsys.readouterr()
        assert captured.out == "", what
        assert captured.err.startswith("stopwise fork: error: ") and captured.err.count("\n") == 1, what
        assert problem in captured.err, (what, captured.err)
        assert db.read_bytes() == written, f"{what}: the log changed"
    assert not (workdir / "missing.db").exists()


@pytest.mark.slow
def test_fork_as_a_real_process_prints_the_new_session_run_and_status(workdir: Path) -> None:
    run = stopwise_cmd("run", "agents.py:ticker", "tick", cwd=workdir)
    assert run.returncode == 0, run.stderr
    source = _session(run.stdout)
    fork = stopwise_cmd("fork", source, "--at", "2", "--agent", "agents.py:ticker", cwd=workdir)
    assert fork.returncode == 0, fork.stderr
    assert re.search(r"^run: [0-9a-f]{32}$", fork.stdout, re.MULTILINE)
    assert "status: completed" in fork.stdout and _session(fork.stdout) != source
    refused = stopwise_cmd("fork", source, "--at", "9", "--agent", "agents.py:ticker", cwd=workdir)
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1
