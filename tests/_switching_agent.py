"""The agent both views of a run (``stopwise show`` and ``stopwise report``) are tested on: its ``search`` tool
switches itself off after use, and its stop guard continues once, switching it back on."""

from __future__ import annotations

from stopwise import Agent, Continue, FunctionModel, Reply, RunContext, StopGuard, ToolCall, tool
from stopwise.models import ModelRequest
from stopwise.stop.guard import StopGuardContext
from stopwise.tool_switches import ToolSwitch


@tool
def search(q: str, ctx: RunContext) -> str:
    """Search once: the tool switches itself off after use."""
    ctx.switch_off("search")
    return f"found {q}"


def _model(req: ModelRequest) -> Reply:
    if req.step == 1:
        return Reply(tool_calls=[ToolCall("search", {"q": "a"}, id="s1")])
    return Reply(f"answer {req.step}")


def _guard(ctx: StopGuardContext) -> Continue | None:
    return None if ctx.continues_used else Continue("Search again.", context=[ToolSwitch(on=["search"])])


def switching_agent() -> Agent:
    """Agent ``s``: step 1 calls ``search`` (which switches itself off), step 2 answers, the guard continues once
    with ``search`` switched on again, step 3 answers."""
    return Agent("s", "", FunctionModel(_model), tools=[search], stop_guard=StopGuard(_guard))
