"""The agents the DBOS tests run in worker processes, and the worker's entry point.

``python tests/_fleet.py DSN EXECUTOR_ID [KILL_AT]`` runs one DBOS worker on the queue until it is killed.
With ``KILL_AT`` the worker kills itself with SIGKILL inside its ``KILL_AT``-th ``add`` call: mid-run and
mid-step, after the model replied and before the step was committed. ``FLEET_KILL`` in the environment picks
another moment for the first SIGKILL: ``pay`` (inside the first ``pay`` call), ``start_run`` (just after the
first run's start commits) or ``settle`` (just after the first settle of a suspended step commits).

``python tests/_fleet.py DSN EXECUTOR_ID --resume SESSION DECISIONS_JSON`` starts a worker, resumes the
suspended run of ``SESSION`` with ``DBOSRuntime.resume`` (``DECISIONS_JSON`` as ``decisions_to_data`` writes it),
prints the result (or the refusal) as one JSON line and exits.

``python tests/_fleet.py DSN NAME --act ACTION AGENT SESSION [DECISIONS_JSON]`` does one thing to the session and
prints its outcome the same way (a ``RunLeased`` with its ``owner`` and ``until``): ``dbos-resume`` and
``dbos-retry`` submit with ``DBOSRuntime`` from a process that runs no workflows (it listens to no queue), then
wait for the result; ``local-resume``, ``local-retry`` and ``local-expire`` use a ``Runner`` whose lease owner is
``NAME``, without DBOS. ``FLEET_CLOCK_OFFSET`` (seconds) runs that process's lease clock ahead.

``FLEET_GATE`` in the environment (a FIFO, see ``Fleet.hold``) makes ``pay`` and ``charge`` hold after noting
their start, until the test opens the gate: a race's loser is decided while the winner is inside the call.
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


def _held() -> None:
    """Test instrumentation: with ``FLEET_GATE``, wait until the test opens the gate (opening a FIFO to read
    blocks until it is open to write). Tools run in a thread: the worker's event loop goes on meanwhile."""
    gate = os.environ.get("FLEET_GATE")
    if gate:
        os.close(os.open(gate, os.O_RDONLY))


@tool(needs_approval=True)
def pay(to: str, amount: int, ctx: RunContext) -> str:
    """Pay someone (a human approves every payment)."""
    _effect(f"start {ctx.session_id} {to} {amount}")
    if os.environ.get("FLEET_KILL") == "pay":
        os.kill(os.getpid(), signal.SIGKILL)
    _held()
    ctx.state["paid"] = ctx.state.get("paid", 0) + amount
    _effect(f"done {ctx.session_id} {to} {amount}")
    return f"paid {amount} to {to}"


@tool(needs_approval=True, approval_ttl=0.05)
def wire(to: str, amount: int) -> str:
    """Wire money abroad (an approval for it lapses quickly)."""
    _effect(f"wire {to} {amount}")
    return f"wired {amount} to {to}"


@tool(needs_approval=True, approval_ttl=600)
def remit(to: str, amount: int, ctx: RunContext) -> str:
    """Remit money (its approval lapses after ten minutes)."""
    _effect(f"start {ctx.session_id} {to} {amount}")
    _held()
    _effect(f"done {ctx.session_id} {to} {amount}")
    return f"remitted {amount} to {to}"


def _pay_reply(request: ModelRequest) -> Reply:
    """``pay bob 50`` asks for one call of that tool; once its result is in, answers with it."""
    results = [m.content for m in request.messages if m.role == "tool"]
    if results:
        return Reply("settled: " + "; ".join(results))
    verb, to, amount = next(m.content for m in request.messages if m.role == "user").split()
    return Reply(tool_calls=[ToolCall(verb, {"to": to, "amount": int(amount)}, id="c1")])


PAYER = Agent("payer", "Pay people.", FunctionModel(_pay_reply), tools=[pay, wire, remit], max_steps=5)


@tool
def charge(to: str, amount: int, ctx: RunContext) -> str:
    """Charge someone (no approval: the run goes straight through)."""
    _effect(f"start {ctx.session_id} {to} {amount}")
    if os.environ.get("FLEET_KILL") == "pay":
        os.kill(os.getpid(), signal.SIGKILL)
    _held()
    _effect(f"done {ctx.session_id} {to} {amount}")
    return f"charged {amount} to {to}"


CHARGER = Agent("charger", "Charge people.", FunctionModel(_pay_reply), tools=[charge], max_steps=5)


@tool(client=True)
def ask(question: str) -> str:
    """Ask the user (the application runs it and resumes the run with the answer)."""
    raise AssertionError("a client tool's body never runs")


def _ask_reply(request: ModelRequest) -> Reply:
    answers = [m.content for m in request.messages if m.role == "tool"]
    if answers:
        return Reply("answer: " + "; ".join(answers))
    return Reply(tool_calls=[ToolCall("ask", {"question": "Which city?"}, id="c1")])


ASKER = Agent("asker", "Ask the user.", FunctionModel(_ask_reply), tools=[ask], max_steps=5)
AGENTS = {a.name: a for a in (AGENT, PAYER, CHARGER, ASKER)}


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
        self.actors: list[subprocess.Popen[str]] = []
        self.gate = ready / "gate"
        self._gate_fd: int | None = None

    def hold(self) -> None:
        """From now on, started processes hold inside ``pay`` and ``charge`` until ``open_gate``."""
        os.mkfifo(self.gate)

    def open_gate(self) -> None:
        """Let every held call (and every later one) through."""
        if self._gate_fd is None and self.gate.exists():
            self._gate_fd = os.open(self.gate, os.O_RDWR)  # O_RDWR: does not wait for a reader

    def _env(self, kill: str = "") -> dict[str, str]:
        env = {**os.environ, "FLEET_READY_DIR": str(self.ready), "FLEET_KILL": kill}
        if self.gate.exists():
            env["FLEET_GATE"] = str(self.gate)
        return env

    def start(self, executor_id: str, kill_at: int = 0, kill: str = "") -> subprocess.Popen[bytes]:
        """Start a worker; ``kill_at`` and ``kill`` (``FLEET_KILL``) say where it kills itself, if anywhere."""
        (self.ready / executor_id).unlink(missing_ok=True)
        env = self._env(kill)
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
        args = [sys.executable, __file__, self.dsn, executor_id, "--resume", session_id, json.dumps(decisions)]
        done = subprocess.run(args, env=self._env(), capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stdout + done.stderr
        result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
        return result

    def act(
        self,
        name: str,
        action: str,
        agent: str,
        session_id: str,
        decisions: dict[str, Any] | None = None,
        clock_offset: float = 0.0,
    ) -> subprocess.Popen[str]:
        """Start a process doing ``action`` (see the module's docstring) to the session; ``outcome`` reads it.
        ``clock_offset``: seconds its lease clock runs ahead, as if that much time had passed."""
        args = [sys.executable, __file__, self.dsn, name, "--act", action, agent, session_id, json.dumps(decisions)]
        env = {**self._env(), "FLEET_CLOCK_OFFSET": str(clock_offset)}
        proc = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.actors.append(proc)
        return proc

    @staticmethod
    def outcome(proc: subprocess.Popen[str], timeout: float = 60) -> dict[str, Any]:
        """The JSON line an ``act`` process printed, once it exited."""
        out, err = proc.communicate(timeout=timeout)
        assert proc.returncode == 0, out + err
        result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
        return result

    def wait_payments(self, count: int, timeout: float = 60) -> list[str]:
        """The payments file once it has ``count`` lines (a held call noted its start)."""
        deadline = time.monotonic() + timeout
        while len(self.payments()) < count:
            assert time.monotonic() < deadline, f"payments: {self.payments()}"
            time.sleep(0.05)
        return self.payments()

    def payments(self) -> list[str]:
        path = self.ready / "payments"
        return path.read_text().splitlines() if path.exists() else []

    def stop(self) -> None:
        self.open_gate()
        for proc in [*self.procs.values(), *self.actors]:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        if self._gate_fd is not None:
            os.close(self._gate_fd)


def submit(client: Any, workflow_id: str, request: dict[str, Any]) -> None:
    """Submit a workflow with a ``DBOSClient`` (a process that runs no workers), as an application would."""
    options = {
        "workflow_name": "stopwise.run",
        "queue_name": QUEUE,
        "workflow_id": workflow_id,
        "app_version": APP_VERSION,
    }
    client.enqueue(options, request)


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


def _print_outcome(result: Any = None, exc: Exception | None = None) -> None:
    from stopwise.errors import RunLeased

    if exc is None:
        print(json.dumps({"status": result.status, "output": result.output, "steps": result.steps}))
    elif isinstance(exc, RunLeased):
        print(json.dumps({"error": "RunLeased", "message": str(exc), "owner": exc.owner, "until": exc.until}))
    else:
        print(json.dumps({"error": type(exc).__name__, "message": str(exc)}))


async def _act(dsn: str, name: str, action: str, agent_name: str, session_id: str, decisions_json: str) -> None:
    from dbos import DBOS

    from stopwise import Runner
    from stopwise.runtime.dbos import DBOSRuntime, decisions_from_data
    from stopwise.store.postgres import PostgresStore

    agent = AGENTS[agent_name]
    decisions = decisions_from_data(json.loads(decisions_json) or {})
    offset = float(os.environ.get("FLEET_CLOCK_OFFSET", "0"))

    def clock() -> float:
        return time.time() + offset

    store = PostgresStore(dsn)
    try:
        if action.startswith("local-"):
            runner = Runner(store, owner=name, clock=clock)
            try:
                if action == "local-resume":
                    result = await runner.resume(agent, session_id, decisions)
                elif action == "local-retry":
                    result = await runner.retry(agent, session_id)
                else:
                    result = await runner.expire(session_id, now=time.time() + 3600)
                _print_outcome(result)
            except Exception as exc:
                _print_outcome(exc=exc)
            return
        DBOS(
            config={
                "name": "stopwise-fleet",
                "system_database_url": dbos_url(dsn),
                "executor_id": name,
                "application_version": APP_VERSION,
                "log_level": "WARNING",
            }
        )
        DBOS.listen_queues([])  # submits only: the fleet's workers run the workflows
        runtime = DBOSRuntime(store, list(AGENTS.values()), queue=QUEUE, polling_interval=0.1, clock=clock)
        await runtime.launch()
        try:
            if action == "dbos-resume":
                result = await runtime.resume(agent, session_id, decisions)
            else:
                result = await runtime.result(await runtime.retry(agent, session_id))
            _print_outcome(result)
        except Exception as exc:
            _print_outcome(exc=exc)
        finally:
            DBOS.destroy()
    finally:
        await store.close()


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
    runtime = DBOSRuntime(store, list(AGENTS.values()), queue=QUEUE, worker_concurrency=5, polling_interval=0.1)
    await runtime.launch()
    if resume is not None:
        session_id, decisions = resume
        try:
            _print_outcome(await runtime.resume(PAYER, session_id, decisions_from_data(json.loads(decisions))))
        except Exception as exc:
            _print_outcome(exc=exc)
        DBOS.destroy()
        await store.close()
        return
    _note(folder / executor_id, "ready")
    await asyncio.Event().wait()


if __name__ == "__main__":
    if len(sys.argv) > 3 and sys.argv[3] == "--act":
        asyncio.run(_act(sys.argv[1], sys.argv[2], *sys.argv[4:8]))
    elif len(sys.argv) > 3 and sys.argv[3] == "--resume":
        asyncio.run(_serve(sys.argv[1], sys.argv[2], (sys.argv[4], sys.argv[5])))
    else:
        _calls["kill_at"] = int(sys.argv[3]) if len(sys.argv) > 3 else 0
        asyncio.run(_serve(sys.argv[1], sys.argv[2]))
