"""The agent the DBOS tests run in worker processes, and the worker's entry point.

``python tests/_fleet.py DSN EXECUTOR_ID [KILL_AT]`` runs one DBOS worker on the queue until it is killed.
With ``KILL_AT`` the worker kills itself with SIGKILL inside its ``KILL_AT``-th tool call: mid-run and
mid-step, after the model replied and before the step was committed.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path
from typing import Any

from stopwise import Agent, FunctionModel, ModelRequest, Reply, RunContext, ToolCall, tool

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


def dbos_url(dsn: str) -> str:
    """SQLAlchemy URL of a key=value DSN, for DBOS's system database (in the same database as the store)."""
    from psycopg.conninfo import conninfo_to_dict

    info: dict[str, Any] = conninfo_to_dict(dsn)
    return f"postgresql://{info['user']}@{info['host']}:{info['port']}/{info['dbname']}"


def _note(path: Path, line: str) -> None:
    with path.open("a") as f:
        f.write(line + "\n")


async def _serve(dsn: str, executor_id: str) -> None:
    from dbos import DBOS

    import stopwise.runtime.dbos as sw_dbos
    from stopwise.runtime.dbos import DBOSRuntime
    from stopwise.store.postgres import PostgresStore

    rebuild = sw_dbos._retry_leg
    rebuilt_log = Path(os.environ["FLEET_READY_DIR"]) / f"rebuilt-{executor_id}"

    async def noting_rebuild(runner: Any, agent: Any, session_id: str, message: Any) -> Any:
        # Test instrumentation: which legs this worker rebuilt from the log (recovered runs).
        _note(rebuilt_log, session_id)
        return await rebuild(runner, agent, session_id, message)

    sw_dbos._retry_leg = noting_rebuild

    DBOS(
        config={
            "name": "stopwise-fleet",
            "system_database_url": dbos_url(dsn),
            "executor_id": executor_id,
            "application_version": APP_VERSION,
            "log_level": "WARNING",
        }
    )
    runtime = DBOSRuntime(PostgresStore(dsn), [AGENT], queue=QUEUE, worker_concurrency=5, polling_interval=0.1)
    await runtime.launch()
    _note(Path(os.environ["FLEET_READY_DIR"]) / executor_id, "ready")
    await asyncio.Event().wait()


if __name__ == "__main__":
    _calls["kill_at"] = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    asyncio.run(_serve(sys.argv[1], sys.argv[2]))
