"""Quick start: an agent with one tool, run to its final answer.

A ``ScriptedModel`` plays the model, so this runs offline with no API key:

    python examples/quickstart.py
"""

from stopwise import Agent, Reply, Runner, ScriptedModel, ToolCall, tool


@tool
def get_weather(city: str) -> str:
    """Current weather for a city.

    Args:
        city: The city's name.
    """
    return f"{city}: 18 °C, light wind"


def main() -> int:
    model = ScriptedModel(
        [
            # Step 1: the model asks for a tool call; the runner executes it.
            Reply(tool_calls=[ToolCall("get_weather", {"city": "Lisbon"})]),
            # Step 2: a plain-text reply is a final answer, and ends the run.
            "It is 18 °C with a light wind in Lisbon.",
        ]
    )
    agent = Agent(
        name="forecaster",
        instructions="Answer weather questions. Use the tools.",
        model=model,
        tools=[get_weather],
    )

    result = Runner().run_sync(agent, "What is the weather in Lisbon?")

    print(f"status:            {result.status}")
    print(f"completion_reason: {result.completion_reason}")
    print(f"steps:             {result.steps}")
    print(f"error:             {result.error}")
    print(f"output:            {result.output}")
    return 0 if result.ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
