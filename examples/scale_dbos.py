"""Step 3 of scaling: DBOS durable workflows. Runs go on a queue; worker processes take them; a worker that
dies mid-run has its runs recovered and finished by DBOS, from the last committed step. A run that suspends for
a human's approval ends its workflow; any worker resumes it once the decision is in.

Without arguments this runs on SQLite files in a temporary folder (development: one process). With a DSN,
DBOS's system tables and stopwise's log share that PostgreSQL database, and every worker started the same way
(with its own --executor-id) takes runs from the same queue:

    pip install 'stopwise[dbos]'
    python examples/scale_dbos.py
    python examples/scale_dbos.py "host=127.0.0.1 port=5432 dbname=agents user=me" --executor-id worker-1
"""

import argparse
import asyncio
import tempfile
from pathlib import Path

from dbos import DBOS

from stopwise import Agent, FunctionModel, Reply, SQLiteStore, Store, ToolCall, tool
from stopwise.approvals import Approve
from stopwise.models import ModelRequest
from stopwise.runtime.dbos import DBOSRuntime


@tool
def search_page(page: int) -> str:
    """Search one page of the archive."""
    return "found: invoice #4417" if page == 5 else "no match"


def pager(request: ModelRequest) -> Reply:
    pages = sum(1 for m in request.messages if m.role == "tool")
    if pages and request.messages[-1].content.startswith("found"):
        return Reply(f"Page {pages} has it.")
    return Reply(tool_calls=[ToolCall("search_page", {"page": pages + 1})])


agent = Agent(
    name="archivist", instructions="Find the invoice.", model=FunctionModel(pager), tools=[search_page], max_steps=3
)


@tool(needs_approval=True)
def issue_refund(invoice: str) -> str:
    """Refund an invoice (a person approves every refund)."""
    return f"refunded {invoice}"


def refunds(request: ModelRequest) -> Reply:
    done = [m.content for m in request.messages if m.role == "tool"]
    if done:
        return Reply(f"Done: {done[-1]}")
    return Reply(tool_calls=[ToolCall("issue_refund", {"invoice": "#4417"})])


refunder = Agent(
    name="refunder", instructions="Refund what you are asked to.", model=FunctionModel(refunds), tools=[issue_refund]
)


async def main(dsn: str | None, executor_id: str, folder: Path) -> None:
    store: Store
    if dsn is None:
        store = SQLiteStore(folder / "agents.db")
        system_database_url = f"sqlite:///{folder / 'dbos.sqlite'}"
    else:
        from psycopg.conninfo import conninfo_to_dict

        from stopwise.store.postgres import PostgresStore

        store = PostgresStore(dsn)
        i = conninfo_to_dict(dsn)
        system_database_url = (
            f"postgresql://{i.get('user', '')}@{i.get('host', '')}:{i.get('port', 5432)}/{i['dbname']}"
        )
    DBOS(
        config={
            "name": "stopwise-example",
            "system_database_url": system_database_url,
            # Every worker has an executor id of its own, stable across restarts: a restarted worker recovers
            # the runs it had in flight. All workers of one deployment share the application version.
            "executor_id": executor_id,
            "application_version": "example-1",
            "log_level": "WARNING",
        }
    )
    runtime = DBOSRuntime(store, [agent, refunder], polling_interval=0.1)
    await runtime.launch()
    try:
        result = await runtime.run(agent, "Which invoice is overdue?", session_id="invoices")
        print(f"run:   {result.status}, reason {result.completion_reason}, {result.steps} steps")
        handle = await runtime.retry(agent, "invoices")  # a DBOS workflow too, continuing the same run
        result = await runtime.result(handle)
        print(f"retry: {result.status}, reason {result.completion_reason}, {result.steps} steps in all")
        print(f"output: {result.output}")

        result = await runtime.run(refunder, "Refund invoice #4417", session_id="refund-4417")
        print(f"refund: {result.status}, waiting on {', '.join(p.tool for p in result.pending)}")
        # A person decides, maybe hours later; any process with a DBOSRuntime on these databases resumes it.
        decisions = {p.call_id: Approve(args_hash=p.args_hash) for p in result.pending}
        result = await runtime.resume(refunder, "refund-4417", decisions)
        print(f"resume: {result.status}, {result.output}")
    finally:
        DBOS.destroy()
        await store.close()


if __name__ == "__main__":  # importing the file runs nothing and reads no arguments
    parser = argparse.ArgumentParser()
    parser.add_argument("dsn", nargs="?", help="PostgreSQL for DBOS and the log (default: SQLite files, one process)")
    parser.add_argument("--executor-id", default="example-worker")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(main(args.dsn, args.executor_id, Path(tmp)))
