"""A max_steps cut-off and its retry, on a SQLite file.

The model pages through an archive one tool call at a time. With ``max_steps=3`` it is cut off before it finds
what it is looking for: the run ends ``failed`` with reason ``max_steps`` and error code
``max_steps_exhausted``, and nothing it did is lost. ``Runner.retry`` then continues the same session from its
last committed step with a fresh budget of 3 steps, and the run completes. Offline, no API key:

    python examples/cutoff_and_retry.py
"""

import asyncio
import tempfile
from pathlib import Path

from stopwise import Agent, FunctionModel, Reply, Role, Runner, SQLiteStore, ToolCall, decode_tool_result, tool
from stopwise.models import ModelRequest


@tool
def search_page(page: int) -> str:
    """Search one page of the archive.

    Args:
        page: The page to search, from 1.
    """
    return "found: invoice #4417" if page == 5 else "no match"


def pager(request: ModelRequest) -> Reply:
    """A deterministic stand-in for a model: reads the next page until a page says ``found``."""
    results = [decode_tool_result(m) for m in request.messages if m.role is Role.TOOL]
    if results and str(results[-1]).startswith("found"):
        return Reply(text=f"Page {len(results)} has it: {results[-1]}.")
    return Reply(tool_calls=[ToolCall("search_page", {"page": len(results) + 1})])


async def main(db_path: Path) -> int:
    agent = Agent(
        name="archivist",
        instructions="Find the overdue invoice, one page at a time.",
        model=FunctionModel(pager),
        tools=[search_page],
        max_steps=3,
    )
    store = SQLiteStore(db_path)
    runner = Runner(store)
    try:
        result = await runner.run(agent, "Which invoice is overdue?")
        print(f"run:   {result.status}, reason {result.completion_reason}, {result.steps} steps")
        if result.error is not None:
            print(f"       error {result.error.code}: {result.error.message}")

        if result.error is not None and result.error.code == "max_steps_exhausted":
            # Out of budget, not broken: continue from the last committed step with a fresh budget.
            result = await runner.retry(agent, result.session_id)
        print(f"retry: {result.status}, reason {result.completion_reason}, {result.steps} steps in all")
        print(f"       {result.output}")

        records = await store.list_runs(result.session_id)
        print(f"stored run records for session {result.session_id}: {len(records)}")
        for r in records:
            print(f"  {r.run_id}  {r.status}  {r.completion_reason}  steps={r.steps}")
        return 0 if result.ok else 1
    finally:
        await runner.close()


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        raise SystemExit(asyncio.run(main(Path(tmp) / "archive.db")))
