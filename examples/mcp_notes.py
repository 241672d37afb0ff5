"""An MCP server's tools under the default guardian: a read-only tool runs, a destructive one waits for a human.

The notes server (``examples/mcp_notes_server.py``, the official MCP SDK) runs as a child process over stdio; a
``ScriptedModel`` plays the model, so this runs offline with no API key (it needs the ``mcp`` extra):

    pip install 'stopwise[mcp]'
    python examples/mcp_notes.py
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path

from stopwise import Agent, Reply, Runner, ScriptedModel, ToolCall
from stopwise.approvals import Approve
from stopwise.guardian import Guardian
from stopwise.mcp import MCPServer

SERVER = Path(__file__).with_name("mcp_notes_server.py")


async def main() -> int:
    folder = Path(tempfile.mkdtemp()) / "notes"
    folder.mkdir()
    (folder / "groceries.txt").write_text("eggs, flour, milk")
    (folder / "old_draft.txt").write_text("to be thrown away")

    model = ScriptedModel(
        [
            Reply(tool_calls=[ToolCall("read_note", {"name": "groceries"}, id="read")]),
            Reply(tool_calls=[ToolCall("delete_note", {"name": "old_draft"}, id="delete")]),
            "Your grocery list has eggs, flour and milk, and I deleted your old draft as asked.",
        ]
    )
    async with MCPServer.stdio(sys.executable, [str(SERVER), str(folder)]) as notes:
        for t in await notes.list_tools():
            print(f"{t.name:12} risk={t.risk.value:12} hints={t.hints}")
        agent = Agent("notes", "Help with the notes.", model, tools=[notes], guardian=Guardian())
        runner = Runner()
        result = await runner.run(agent, "What is on my grocery list? Then delete my old draft.", session_id="demo")
        print(f"\nstatus: {result.status}")  # suspended: delete_note is destructive
        for decision in result.decisions:
            if decision.kind == "pre_execution":
                print(f"  gate on {decision.call_id}: {decision.reason}")
        print(f"old draft still there: {(folder / 'old_draft.txt').exists()}")

        done = await runner.resume(agent, "demo", {p.call_id: Approve() for p in result.pending})
        print(f"\nafter approval: {done.status}: {done.output}")
        print(f"old draft still there: {(folder / 'old_draft.txt').exists()}")
    return 0 if done.status == "completed" else 1


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
