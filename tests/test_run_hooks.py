"""Seeds 000 and 002, completion and failure hooks: an application that never reads the event stream learns of
every run's end, completed or failed, from ``Runner(on_event=...)``, with the same result the caller gets."""

from __future__ import annotations

from stopwise import Agent, Reply, Runner, ScriptedModel, ToolCall, tool
from stopwise.events import Event, RunFinished


@tool
def look(q: str) -> str:
    """Look something up."""
    return "seen"


async def test_on_event_hands_every_run_end_completed_or_failed_to_an_application_hook() -> None:
    ended: list[tuple[str, str, str | None]] = []

    def on_end(agent: Agent, event: Event) -> None:
        if isinstance(event, RunFinished):
            code = event.result.error.code.value if event.result.error is not None else None
            ended.append((agent.name, event.result.status, code))

    runner = Runner(on_event=on_end)
    done = await runner.run(Agent("ok", "", ScriptedModel(["answer"])), "q")
    looping = ScriptedModel([Reply(tool_calls=[ToolCall("look", {"q": "x"})])] * 2)
    cut = await runner.run(Agent("cut", "", looping, tools=[look], max_steps=1), "q")
    assert (done.status, cut.status) == ("completed", "failed")
    assert ended == [("ok", "completed", None), ("cut", "failed", "max_steps_exhausted")]
