"""A run approved at every step, the approvals alternating between this process (``Runner.resume``) and a second
one (``stopwise approve`` on SQLite, a script with its own ``Runner`` on PostgreSQL) every third step: each resume
reads the log the other process grew, every approved call runs exactly once, and the run completes.
(What each approval costs as the log grows: ``benchmarks/bench_approvals.py``, docs/scaling.md.)"""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections import Counter
from pathlib import Path

import pytest

from _cli_fixtures import stopwise_cmd
from _pgcluster import HOW_TO_ENABLE
from stopwise import Approve, Runner, SQLiteStore, Store
from stopwise._load import load_agent
from stopwise.runtime import result_from_log

STEPS = 10

AGENT = '''
import os

from stopwise import Agent, FunctionModel, Guardian, Reply, Risk, ToolCall, tool

EFFECTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "effects.log")


@tool(needs_approval=True, risk=Risk.REVERSIBLE)
def send_email(to: str, body: str) -> str:
    """Send an email."""
    with open(EFFECTS, "a") as f:
        f.write(to + "\\n")
    return "sent to " + to


def reply(request):
    k = sum(1 for m in request.messages if m.role.value == "assistant") + 1
    if k < {steps}:
        return Reply(tool_calls=[ToolCall("send_email", {{"to": "user%d@example.com" % k, "body": "note %d" % k}})])
    return Reply(text="done")


agent = Agent(name="mailer", model=FunctionModel(reply), tools=[send_email], max_steps=50, guardian=Guardian())
'''

PROMPT = "send_email a note to every user, one email each"


def _agent_file(folder: Path) -> str:
    path = folder / "mailer.py"
    path.write_text(AGENT.format(steps=STEPS))
    return f"{path}:agent"


def _effects(folder: Path) -> Counter[str]:
    return Counter((folder / "effects.log").read_text().split())


def _second_process(kind: str, where: str, target: str, session: str, calls: list[str], cwd: Path) -> None:
    """Approve ``calls`` of the session's suspended run in another process: ``stopwise approve`` on SQLite, a
    script with its own ``Runner`` on PostgreSQL (the command line keeps its log in SQLite only)."""
    if kind == "sqlite":
        done = stopwise_cmd("approve", session, *calls, "--agent", target, "--db", where, cwd=cwd)
    else:
        dsn, schema = where.rsplit("|", 1)
        script = (
            "import asyncio, sys\n"
            "from stopwise import Approve, Runner\n"
            "from stopwise._load import load_agent\n"
            "from stopwise.store.postgres import PostgresStore\n"
            "async def main():\n"
            f"    agent = load_agent({target!r})\n"
            f"    async with Runner(PostgresStore({dsn!r}, schema={schema!r}, max_size=2)) as runner:\n"
            f"        await runner.resume(agent, {session!r}, {{c: Approve() for c in {calls!r}}})\n"
            "asyncio.run(main())\n"
        )
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=cwd, timeout=120)
    assert done.returncode in (0, 1), done.stderr  # 1: the run suspended again (the next step's call)


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
async def test_a_run_approved_at_every_step_here_and_in_a_second_process_runs_each_call_once(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    target = _agent_file(tmp_path)
    agent = load_agent(target)
    store: Store
    if kind == "sqlite":
        where = str(tmp_path / "log.db")
        store = SQLiteStore(where)
    else:
        dsn = request.getfixturevalue("pg_dsn")
        if dsn is None:
            pytest.skip(HOW_TO_ENABLE)
        from stopwise.store.postgres import PostgresStore

        schema = f"t_{uuid.uuid4().hex[:12]}"
        where = f"{dsn}|{schema}"
        store = PostgresStore(dsn, schema=schema, max_size=2)
    runner = Runner(store)  # one runner for every resume in this process, as a server resuming sessions has
    try:
        result = await runner.run(agent, PROMPT, session_id="s")
        turn = 0
        while result.status.value == "suspended":
            turn += 1
            decisions = {p.call_id: Approve() for p in result.pending}
            if turn % 3 == 0:
                # Another process settles this step: the log grows past what this runner last read.
                _second_process(kind, where, target, "s", list(decisions), tmp_path)
                snapshot = await store.load_session("s")
                assert snapshot is not None and snapshot.last_run is not None
                result = result_from_log(agent, snapshot, snapshot.last_run)
                continue
            result = await runner.resume(agent, "s", decisions)
    finally:
        await store.close()
    # Every step but the last asked for approval; a third of them were settled by the second process.
    assert (result.status.value, result.steps, turn) == ("completed", STEPS, STEPS - 1)
    assert _effects(tmp_path) == Counter(f"user{k}@example.com" for k in range(1, STEPS))
