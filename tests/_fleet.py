"""The agents the DBOS tests run in worker processes, and the worker's entry point.

``python tests/_fleet.py DSN EXECUTOR_ID [KILL_AT]`` runs one DBOS worker on the queue until it is killed.
With ``KILL_AT`` the worker kills itself with SIGKILL inside its ``KILL_AT``-th ``add`` call: mid-run and
mid-step, after the model replied and before the step was committed. ``FLEET_KILL`` in the environment picks
another moment for the first SIGKILL: ``pay`` (inside the first ``pay`` call), ``start_run`` (just after the
first run's start commits) or ``settle`` (just after the first settle of a suspended step commits).

``python tests/_fleet.py DSN EXECUTOR_ID --resume SESSION DECISIONS_JSON`` starts a worker, resumes the
suspended run of ``SESSION`` with ``DBOSRuntime.resume`` (``DECISIONS_JSON`` as ``decisions_to_data`` writes it),
prints the result (or the refusal) as one JSON line and exits.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from stopwise import Agent, FunctionModel, Reply, RunContext, ToolCall, tool
from stopwise.models import ModelRequest

QUEUE = "stopwise-test"
APP_VERSION = "fleet-test-1"
_calls = {"n": 0, "kill_at": 0}


@tool
def add(n: int, ctx: RunContext) -> str:
    """Add n to the running total in state."""
    _calls["n"] += 1
    if _calls["n"] == _calls["kill_at"]:
        os.kill(os.getpid(), signal.SIGKILL)
    ctx.state["total"] = ctx.state.get("total", 0) + n
    return f"added {n}"


def _reply(request: ModelRequest) -> Reply:
    """Depends only on the messages, so a step run again gets the same reply."""
    steps = sum(1 for m in request.messages if m.role == "assistant")
    job = next(m.content for m in request.messages if m.role == "user")
    if steps >= 5:
        return Reply(f"{job}: done after {steps} steps")
    width = 2 if steps % 2 else 1
    return Reply(tool_calls=[ToolCall("add", {"n": steps * 10 + j}, id=f"s{steps}c{j}") for j in range(width)])


AGENT = Agent("adder", "Add things.", FunctionModel(_reply), tools=[add], max_steps=20)


def _effect(line: str) -> None:
    """Test instrumentation: every time a payment's body starts and finishes, in ``FLEET_READY_DIR/payments``."""
    folder = os.environ.get("FLEET_READY_DIR")
    if folder:
        _note(Path(folder) / "payments", line)


@tool(needs_approval=True)
def pay(to: str, amount: int, ctx: RunContext) -> str:
    """Pay someone (a human approves every payment)."""
    _effect(f"start {ctx.session_id} {to} {amount}")
    if os.environ.get("FLEET_KILL") == "pay":
        os.kill(os.getpid(), signal.SIGKILL)
    ctx.state["paid"] = ctx.state.get("paid", 0) + amount
    _effect(f"done {ctx.session_id} {to} {amount}")
    return f"paid {amount} to {to}"


@tool(needs_approval=True, approval_ttl=0.05)
def wire(to: str, amount: int) -> str:
    """Wire money abroad (an approval for it lapses quickly)."""
    _effect(f"wire {to} {amount}")
    return f"wired {amount} to {to}"


def _pay_reply(request: ModelRequest) -> Reply:
    """``pay bob 50`` asks for one call of that tool; once its result is in, answers with it."""
    results = [m.content for m in request.messages if m.role == "tool"]
    if results:
        return Reply("settled: " + "; ".join(results))
    verb, to, amount = next(m.content for m in request.messages if m.role == "user").split()
    return Reply(tool_calls=[ToolCall(verb, {"to": to, "amount": int(amount)}, id="c1")])


PAYER = Agent("payer", "Pay people.", FunctionModel(_pay_reply), tools=[pay, wire], max_steps=5)


def dbos_url(dsn: str) -> str:
    """SQLAlchemy URL of a key=value DSN, for DBOS's system database (in the same database as the store)."""
    from psycopg.conninfo import conninfo_to_dict

    info: dict[str, Any] = conninfo_to_dict(dsn)
    return f"postgresql://{info['user']}@{info['host']}:{info['port']}/{info['dbname']}"


class Fleet:
    """Worker processes for a test: started, awaited until ready, killed at the end."""

    def __init__(self, dsn: str, ready: Path) -> None:
        self.dsn, self.ready = dsn, ready
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    def start(self, executor_id: str, kill_at: int = 0, kill: str = "") -> subprocess.Popen[bytes]:
        """Start a worker; ``kill_at`` and ``kill`` (``FLEET_KILL``) say where it kills itself, if anywhere."""
        (self.ready / executor_id).unlink(missing_ok=True)
        env = {**os.environ, "FLEET_READY_DIR": str(self.ready), "FLEET_KILL": kill}
        args = [sys.executable, __file__, self.dsn, executor_id, str(kill_at)]
        proc = subprocess.Popen(args, env=env)
        self.procs[executor_id] = proc
        deadline = time.monotonic() + 60
        while not (self.ready / executor_id).exists():
            assert proc.poll() is None, f"worker {executor_id} exited with {proc.returncode}"
            assert time.monotonic() < deadline, f"worker {executor_id} did not start"
            time.sleep(0.05)
        return proc

    def resume(self, executor_id: str, session_id: str, decisions: dict[str, Any]) -> dict[str, Any]:
        """Resume a session from a new process (a worker too, until it has the result); its JSON line."""
        env = {**os.environ, "FLEET_READY_DIR": str(self.ready), "FLEET_KILL": ""}
        args = [sys.executable, __file__, self.dsn, executor_id, "--resume", session_id, json.dumps(decisions)]
        done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stdout + done.stderr
        result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
        return result

    def payments(self) -> list[str]:
        path = self.ready / "payments"
        return path.read_text().splitlines() if path.exists() else []

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def wait_all(client: Any, ids: list[str], timeout: float) -> dict[str, str]:
    """Wait until every workflow of ``ids`` has ended; their statuses."""
    deadline = time.monotonic() + timeout
    while True:
        statuses = {w.workflow_id: w.status for w in client.list_workflows(workflow_ids=ids)}
        ended = ("SUCCESS", "ERROR", "CANCELLED", "MAX_RECOVERY_ATTEMPTS_EXCEEDED")
        if len(statuses) == len(ids) and all(s in ended for s in statuses.values()):
            return statuses
        assert time.monotonic() < deadline, f"runs still pending: {sorted(set(statuses.values()))}"
        time.sleep(0.1)


def _note(path: Path, line: str) -> None:
    with path.open("a") as f:
        f.write(line + "\n")


def _die_after(store: Any, method: str, when: Any) -> None:
    """Test instrumentation: SIGKILL right after ``store.<method>`` returns for the first call ``when`` accepts
    (the write is durable; DBOS has not recorded the step that made it)."""
    original = getattr(store, method)

    async def dying(*args: Any, **kwargs: Any) -> None:
        await original(*args, **kwargs)
        if when(*args):
            os.kill(os.getpid(), signal.SIGKILL)

    setattr(store, method, dying)


async def _serve(dsn: str, executor_id: str, resume: tuple[str, str] | None = None) -> None:
    from dbos import DBOS

    from stopwise import Runner
    from stopwise.runtime.dbos import DBOSRuntime, decisions_from_data
    from stopwise.store.base import EntryKind
    from stopwise.store.postgres import PostgresStore

    folder = Path(os.environ["FLEET_READY_DIR"])
    rebuilt_log = folder / f"rebuilt-{executor_id}"
    open_leg = Runner.open_leg

    async def noting_open_leg(self: Runner, agent: Any, mode: Any, **kwargs: Any) -> Any:
        # Test instrumentation: which legs this worker rebuilt from the log (recovered runs).
        if mode == "retry":
            _note(rebuilt_log, str(kwargs.get("session_id")))
        return await open_leg(self, agent, mode, **kwargs)

    Runner.open_leg = noting_open_leg  # type: ignore[method-assign]

    DBOS(
        config={
            "name": "stopwise-fleet",
            "system_database_url": dbos_url(dsn),
            "executor_id": executor_id,
            "application_version": APP_VERSION,
            "log_level": "WARNING",
        }
    )
    store = PostgresStore(dsn)
    kill = os.environ.get("FLEET_KILL")
    if kill == "start_run":
        _die_after(store, "start_run", lambda *_: True)
    elif kill == "settle":
        _die_after(store, "commit", lambda entry, *_: entry.kind is EntryKind.SETTLE)
    runtime = DBOSRuntime(store, [AGENT, PAYER], queue=QUEUE, worker_concurrency=5, polling_interval=0.1)
    await runtime.launch()
    if resume is not None:
        session_id, decisions = resume
        try:
            result = await runtime.resume(PAYER, session_id, decisions_from_data(json.loads(decisions)))
            print(json.dumps({"status": result.status, "output": result.output, "steps": result.steps}))
        except Exception as exc:
            print(json.dumps({"error": type(exc).__name__, "message": str(exc)}))
        DBOS.destroy()
        await store.close()
        return
    _note(folder / executor_id, "ready")
    await asyncio.Event().wait()


if __name__ == "__main__":
    if len(sys.argv) > 3 and sys.argv[3] == "--resume":
        asyncio.run(_serve(sys.argv[1], sys.argv[2], (sys.argv[4], sys.argv[5])))
    else:
        _calls["kill_at"] = int(sys.argv[3]) if len(sys.argv) > 3 else 0
        asyncio.run(_serve(sys.argv[1], sys.argv[2]))
