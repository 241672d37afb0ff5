"""Step 1 of scaling: one process, a SQLite file. Many concurrent runs, each step one SQLite transaction.

Right for a single machine: a CLI, a service with one worker process, tests. Offline:

    python examples/scale_sqlite.py
"""

import asyncio
import tempfile
from pathlib import Path

from stopwise import Agent, FunctionModel, Reply, RunContext, Runner, SQLiteStore, ToolCall, tool
from stopwise.models import ModelRequest


@tool
def count(ctx: RunContext) -> str:
    """Count one more in the session state."""
    ctx.state["n"] = ctx.state.get("n", 0) + 1
    return f"count is {ctx.state['n']}"


def model(request: ModelRequest) -> Reply:
    calls = sum(1 for m in request.messages if m.role == "tool")
    return Reply("counted to 3") if calls >= 3 else Reply(tool_calls=[ToolCall("count")])


agent = Agent(name="counter", instructions="Count to three.", model=FunctionModel(model), tools=[count])


async def main(path: Path) -> None:
    store = SQLiteStore(path)
    runner = Runner(store)
    results = await asyncio.gather(*(runner.run(agent, "count", session_id=f"job-{i}") for i in range(20)))
    print(f"{sum(r.ok for r in results)} of {len(results)} runs completed, {sum(r.steps for r in results)} steps")
    for record in await store.list_runs("job-0"):
        print(f"job-0: {record.status}, {record.completion_reason}, {record.steps} steps")
    await store.close()


if __name__ == "__main__":  # importing the file (stopwise run examples/scale_sqlite.py:agent) runs nothing
    with tempfile.TemporaryDirectory() as folder:
        asyncio.run(main(Path(folder) / "agents.db"))
