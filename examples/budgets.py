"""Budgets and stopping at a tool, on a SQLite file. Offline, no API key:

    python examples/budgets.py

1. A tool-call budget: the model asks for 8 lookups in one batch with ``Limits(tool_calls=5)``. Only 5 run; the
   other 3 are answered "not run" and the run fails ``tool_call_limit``. ``retry()`` starts a fresh budget.
2. A token budget: each model call reports 1,500 tokens; ``Limits(total_tokens=2000)`` ends the run after the
   second call (``token_limit``), with the usage on the result.
3. Stop at a tool: ``stop_at_tools=[submit]`` ends the run when ``submit`` succeeds, its result the typed output.
   A first call that fails does not stop the run: the model reads the error and calls again.
"""

import asyncio
import tempfile
from pathlib import Path

from pydantic import BaseModel

from stopwise import Agent, Limits, Reply, Runner, ScriptedModel, SQLiteStore, ToolCall, Usage, tool


@tool
def lookup(city: str) -> str:
    """Look up a city's population."""
    return f"{city}: about a million"


class Report(BaseModel):
    city: str
    population: int


@tool
def submit(city: str, population: int) -> Report:
    """Submit the final report (the population must be positive)."""
    if population <= 0:
        raise ValueError("population must be positive")
    return Report(city=city, population=population)


def batch(n: int, usage: Usage | None = None, prefix: str = "c") -> Reply:
    calls = [ToolCall("lookup", {"city": f"city {i}"}, id=f"{prefix}{i}") for i in range(n)]
    return Reply(tool_calls=calls, usage=usage)


async def main(db_path: Path) -> int:
    store = SQLiteStore(db_path)
    runner = Runner(store)
    try:
        model = ScriptedModel([batch(8), "Five cities looked up."])
        agent = Agent("surveyor", "", model, tools=[lookup], limits=Limits(tool_calls=5))
        result = await runner.run(agent, "Look up eight cities.", session_id="calls")
        ran = sum(1 for m in result.messages if m.role == "tool" and "not run" not in m.content.lower())
        print(f"1. {result.completion_reason}: {ran} calls ran; {result.error.message if result.error else ''}")
        again = await runner.retry(agent, "calls")
        print(f"   retry with a fresh budget: {again.completion_reason}, {again.output!r}")

        usage = Usage(1000, 500)
        model = ScriptedModel([batch(1, usage), batch(1, usage, "d"), "never asked"])
        agent = Agent("surveyor", "", model, tools=[lookup], limits=Limits(total_tokens=2000))
        result = await runner.run(agent, "Look up cities.", session_id="tokens")
        print(f"2. {result.completion_reason} after {result.steps} calls: {result.usage.total_tokens} tokens used")

        model = ScriptedModel(
            [
                Reply(tool_calls=[ToolCall("submit", {"city": "Oslo", "population": 0}, id="s1")]),
                Reply(tool_calls=[ToolCall("submit", {"city": "Oslo", "population": 709_000}, id="s2")]),
            ]
        )
        agent = Agent("surveyor", "", model, tools=[submit], stop_at_tools=[submit], output_type=Report)
        result = await runner.run(agent, "Report on Oslo.", session_id="submit")
        print(f"3. {result.completion_reason} after {result.steps} calls: {result.output!r}")
        ok = result.completion_reason == "tool_output" and again.ok
        return 0 if ok else 1
    finally:
        await store.close()


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        raise SystemExit(asyncio.run(main(Path(tmp) / "budgets.db")))
