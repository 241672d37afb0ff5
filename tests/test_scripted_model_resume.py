"""A ScriptedModel carried on in another process gives the next reply of its script, not the first: its position
comes from the replies the run already holds when it is first asked, so a run killed with SIGKILL and retried, or
a suspended run approved from the command line, does not replay replies it already gave."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from stopwise import Agent, Approve, MemoryStore, Reply, Role, Runner, ScriptedModel, SQLiteStore, ToolCall, tool
from stopwise.messages import Message
from stopwise.models import ModelRequest
from stopwise.result import RunStatus

SRC = str(Path(__file__).resolve().parents[1] / "src")

NOTES_AGENT = """
import os
import signal
from pathlib import Path

from stopwise import Agent, Reply, ScriptedModel, ToolCall, tool

KILLED = Path(__file__).with_name("killed")


@tool
def note(text: str) -> str:
    \"\"\"Write a note.\"\"\"
    if text == "second" and not KILLED.exists():
        KILLED.write_text("")
        os.kill(os.getpid(), signal.SIGKILL)  # the process dies mid-step, its reply committed
    with Path(__file__).with_name("notes.txt").open("a") as f:
        f.write(text + "\\n")
    return f"noted {text}"


def reply(text):
    return Reply(tool_calls=[ToolCall("note", {"text": text})])


agent = Agent("notes", "Take notes.", ScriptedModel([reply("first"), reply("second"), reply("third"), "Done."]),
              tools=[note])
"""

PUBLISH_AGENT = """
from stopwise import Agent, Reply, ScriptedModel, ToolCall, tool


@tool(needs_approval=True)
def publish(text: str) -> str:
    \"\"\"Publish a note.\"\"\"
    return f"published {text}"


agent = Agent("publisher", "Publish.", ScriptedModel([Reply(tool_calls=[ToolCall("publish", {"text": "hi"})]),
              "Published."]), tools=[publish])
"""


def python(tmp_path: Path, code: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": SRC}
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], cwd=tmp_path, env=env, capture_output=True, text=True
    )


def stopwise(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": SRC}
    return subprocess.run(
        [sys.executable, "-m", "stopwise", *args], cwd=tmp_path, env=env, capture_output=True, text=True
    )


def said(out: str, label: str) -> str:
    """The first word after ``label`` on its line of the CLI's output."""
    return next(line.split()[1] for line in out.splitlines() if line.startswith(label))


def replies(messages: list[Message]) -> list[str]:
    return [m.content or ",".join(str(c.args) for c in m.tool_calls) for m in messages if m.role is Role.ASSISTANT]


async def test_a_run_killed_with_sigkill_and_retried_in_another_process_gets_the_next_scripted_reply(
    tmp_path: Path,
) -> None:
    (tmp_path / "agent.py").write_text(NOTES_AGENT)
    killed = python(
        tmp_path,
        """
        import asyncio
        from stopwise import Runner, SQLiteStore
        from stopwise._load import load_agent

        async def main():
            async with SQLiteStore("log.db") as store:
                await Runner(store).run(load_agent("agent.py:agent"), "take notes", session_id="notes")

        asyncio.run(main())
        """,
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    retried = python(
        tmp_path,
        """
        import asyncio, time
        from stopwise import Runner, SQLiteStore
        from stopwise._load import load_agent

        async def main():
            async with SQLiteStore("log.db") as store:
                # The killed process never dropped its lease: recover on a clock past it.
                runner = Runner(store, clock=lambda: time.time() + 3600)
                result = await runner.retry(load_agent("agent.py:agent"), "notes")
                print(result.status.value)

        asyncio.run(main())
        """,
    )
    assert retried.returncode == 0 and retried.stdout.strip() == "completed", retried.stderr
    async with SQLiteStore(tmp_path / "log.db") as store:
        snapshot = await store.load_session("notes")
    assert snapshot is not None
    assert replies(list(snapshot.messages())) == [
        "{'text': 'first'}",
        "{'text': 'second'}",
        "{'text': 'third'}",
        "Done.",
    ]
    assert (tmp_path / "notes.txt").read_text().split() == ["first", "second", "third"]


def test_a_run_approved_from_the_cli_in_a_second_process_gets_the_next_scripted_reply(tmp_path: Path) -> None:
    (tmp_path / "agent.py").write_text(PUBLISH_AGENT)
    ran = stopwise(tmp_path, "run", "agent.py:agent", "publish hi", "--db", "log.db")
    assert ran.returncode == 1 and "status: suspended" in ran.stdout, ran.stdout + ran.stderr
    session, call = said(ran.stdout, "session:"), said(ran.stdout, "pending:")
    approved = stopwise(tmp_path, "approve", session, call, "--agent", "agent.py:agent", "--db", "log.db")
    assert approved.returncode == 0, approved.stdout + approved.stderr
    assert "output: Published." in approved.stdout


async def test_a_new_script_for_a_resumed_leg_starts_at_its_first_reply() -> None:
    @tool(needs_approval=True)
    def publish(text: str) -> str:
        """Publish a note."""
        return f"published {text}"

    store = MemoryStore()
    first = Agent("p", "", ScriptedModel([Reply(tool_calls=[ToolCall("publish", {"text": "hi"})])]), tools=[publish])
    suspended = await Runner(store).run(first, "publish", session_id="s")
    assert suspended.status is RunStatus.SUSPENDED
    # The run's reply is not this script's first: it answers from its own first reply.
    then = Agent("p", "", ScriptedModel(["Published."]), tools=[publish])
    result = await Runner(store).resume(then, "s", {suspended.pending[0].call_id: Approve()})
    assert result.status is RunStatus.COMPLETED and result.output == "Published."


async def test_a_fresh_scripted_model_carries_on_after_the_replies_of_its_script_the_run_holds() -> None:
    calls = [Reply(tool_calls=[ToolCall("note", {"text": t}, id=f"c{i}")]) for i, t in enumerate(["a", "b"])]
    model = ScriptedModel([*calls, "Done."])
    history = (
        Message(Role.USER, "earlier run"),
        Message(Role.ASSISTANT, "Done."),
        Message(Role.USER, "take notes"),
        *(
            m
            for i, r in enumerate(calls)
            for m in (Message(Role.ASSISTANT, "", r.tool_calls), Message(Role.TOOL, "ok", tool_call_id=f"c{i}"))
        ),
    )
    reply = await model.generate(ModelRequest(messages=history, tools=(), step=3))
    assert reply.text == "Done." and model.remaining == 0
