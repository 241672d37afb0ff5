"""The answer must cite a source: a stop guard sends the model back until it does, at most twice.

Runs offline: the model is scripted. Swap in a real model (see docs/models.md) to use it for real.
"""

from __future__ import annotations

from stopwise import Agent, Continue, Reply, Runner, ScriptedModel, StopGuard, StopGuardContext, ToolCall, tool


@tool
def search(query: str) -> str:
    """Search the reference library.

    Args:
        query: What to look for.
    """
    return "Factbook: Mount Everest, 8,849 m (2020 survey)."


def cites_a_source(ctx: StopGuardContext) -> Continue | None:
    """Accept an answer that cites a source; otherwise ask for one, and remember that we asked."""
    if "[source:" in ctx.reply.text:
        return None
    ctx.update_state(lambda state: state.update(asked_for_source=ctx.continues_used + 1))
    return Continue("Cite one source as [source: ...] before you finish.")


model = ScriptedModel(
    [
        Reply(tool_calls=[ToolCall("search", {"query": "highest mountain"})]),
        "Everest is 8,849 m high.",  # no source: the guard sends it back
        "Everest is 8,849 m high [source: Factbook, 2020 survey].",
    ]
)
agent = Agent(
    name="sourced-answers",
    instructions="Write short, sourced answers.",
    model=model,
    tools=[search],
    stop_guard=StopGuard(cites_a_source, max_continues=2),
)

if __name__ == "__main__":
    result = Runner().run_sync(agent, "How high is the highest mountain?")
    print(f"status:            {result.status}")
    print(f"completion reason: {result.completion_reason}")
    print(f"answer:            {result.output}")
    print(f"stop guard:        {result.stop_guard}")
    print(f"state:             {dict(result.state)}")
    assert result.completion_reason == "final_answer" and result.stop_guard is not None
    assert result.stop_guard.continues_used == 1
