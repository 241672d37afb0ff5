"""Step 2 of scaling: PostgreSQL. The same agents and the same log, shared by any number of processes.

Every process builds a ``PostgresStore`` on the same database; a run started in one can be read, retried or
continued in another. Needs the ``postgres`` extra and a server:

    pip install 'stopwise[postgres]'
    python examples/scale_postgres.py "host=127.0.0.1 port=5432 dbname=agents user=me"
"""

import asyncio
import sys

from stopwise import Agent, FunctionModel, Reply, RunContext, Runner, ToolCall, tool
from stopwise.models import ModelRequest
from stopwise.store.postgres import PostgresStore


@tool
def count(ctx: RunContext) -> str:
    """Count one more in the session state."""
    ctx.state["n"] = ctx.state.get("n", 0) + 1
    return f"count is {ctx.state['n']}"


def model(request: ModelRequest) -> Reply:
    calls = sum(1 for m in request.messages if m.role == "tool")
    return Reply("counted to 3") if calls >= 3 else Reply(tool_calls=[ToolCall("count")])


agent = Agent(name="counter", instructions="Count to three.", model=FunctionModel(model), tools=[count])


async def main(dsn: str) -> None:
    # Tables live in the schema "stopwise" (created and migrated on first use); connect_timeout bounds a
    # server that does not answer.
    async with PostgresStore(dsn, max_size=10, connect_timeout=5) as store:
        runner = Runner(store)
        results = await asyncio.gather(*(runner.run(agent, "count", session_id=f"pg-job-{i}") for i in range(20)))
        print(f"{sum(r.ok for r in results)} of {len(results)} runs completed, {sum(r.steps for r in results)} steps")
        # Any other process on this database sees the same records:
        record = (await store.list_runs(results[0].session_id))[-1]
        print(f"{record.session_id}: {record.status}, {record.completion_reason}, {record.steps} steps")


if __name__ == "__main__":  # importing the file runs nothing and reads no arguments
    if len(sys.argv) != 2:
        sys.exit('usage: python examples/scale_postgres.py "host=... port=... dbname=... user=..."')
    asyncio.run(main(sys.argv[1]))
