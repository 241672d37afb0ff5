"""The peers' ways to stop, translated to stopwise and run end to end on a real SQLite log. Each test's docstring
names the peer and its API; the body is the stopwise counterpart (docs/coming-from.md)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import BaseModel

from stopwise import Agent, ConfigError, Reply, Runner, ScriptedModel, SQLiteStore, ToolCall, has_tool_call, tool
from stopwise.messages import decode_tool_result


class Weather(BaseModel):
    city: str
    celsius: int


ran: list[str] = []


@tool
def get_weather(city: str) -> dict[str, object]:
    """The weather in a city."""
    ran.append(f"get_weather:{city}")
    return {"city": city, "celsius": 21}


@tool
def log_visit(city: str) -> str:
    """Note that the user asked about a city."""
    ran.append(f"log_visit:{city}")
    return "noted"


@tool
def submit(answer: str) -> str:
    """Submit the final answer; raises on an empty one."""
    ran.append(f"submit:{answer}")
    if not answer:
        raise ValueError("empty answer")
    return answer


def calls(*pairs: tuple[str, dict[str, object]]) -> Reply:
    return Reply(tool_calls=[ToolCall(name, args, id=f"c{i}") for i, (name, args) in enumerate(pairs)])


@pytest.fixture
def store(tmp_path: Path) -> SQLiteStore:
    ran.clear()
    return SQLiteStore(tmp_path / "log.db")


# --- stop at a tool, with its result as the output ------------------------------------------------------


async def test_stop_on_first_tool_makes_the_first_tools_result_the_output(store: SQLiteStore) -> None:
    """OpenAI Agents SDK ``Agent(tool_use_behavior="stop_on_first_tool")``: the first tool's output is the final
    output, with no further model call. stopwise: ``stop_at_tools="any"``."""
    model = ScriptedModel([calls(("get_weather", {"city": "Oslo"})), "never asked"])
    agent = Agent("a", "", model, tools=[get_weather], stop_at_tools="any")
    result = await Runner(store).run(agent, "weather in Oslo?")
    assert result.ok and result.completion_reason == "tool_output"
    assert result.output == {"city": "Oslo", "celsius": 21}
    assert model.remaining == 1 and result.steps == 1


async def test_stop_at_tools_stops_only_for_the_named_tools(store: SQLiteStore) -> None:
    """OpenAI Agents SDK ``tool_use_behavior=StopAtTools(stop_at_tool_names=["get_weather"])``: other tools go back
    to the model; the named one ends the run with its output."""
    model = ScriptedModel([calls(("log_visit", {"city": "Oslo"})), calls(("get_weather", {"city": "Oslo"}))])
    agent = Agent("a", "", model, tools=[get_weather, log_visit], stop_at_tools=[get_weather])
    result = await Runner(store).run(agent, "weather in Oslo?")
    assert result.completion_reason == "tool_output" and result.steps == 2
    assert result.output == {"city": "Oslo", "celsius": 21}
    assert "get_weather" in result.detail


async def test_a_stop_at_tools_result_is_validated_against_the_output_type(store: SQLiteStore) -> None:
    """OpenAI Agents SDK ``StopAtTools`` with an ``output_type``: the tool's result is the typed final output.
    stopwise validates it; the read-back result holds the ``output_type`` instance."""
    model = ScriptedModel([calls(("get_weather", {"city": "Oslo"}))])
    agent = Agent("a", "", model, tools=[get_weather], stop_at_tools=[get_weather], output_type=Weather)
    result = await Runner(store).run(agent, "weather in Oslo?", session_id="s")
    assert result.output == Weather(city="Oslo", celsius=21)
    record = (await store.list_runs("s"))[-1]
    assert record.output == {"city": "Oslo", "celsius": 21}


async def test_a_stop_at_tools_invalid_result_forces_the_output_from_the_model(store: SQLiteStore) -> None:
    """pydantic-ai output tools: a result that does not validate sends the model back to produce the output.
    stopwise: the stop-at tool's invalid result enters forced completion (tools off, the schema asked for)."""
    model = ScriptedModel([calls(("log_visit", {"city": "Oslo"})), '{"city": "Oslo", "celsius": 3}'])
    agent = Agent("a", "", model, tools=[log_visit], stop_at_tools=[log_visit], output_type=Weather)
    result = await Runner(store).run(agent, "weather in Oslo?")
    assert result.completion_reason == "output" and result.output == Weather(city="Oslo", celsius=3)
    assert result.steps == 2


async def test_a_failed_stop_at_call_does_not_stop_the_run(store: SQLiteStore) -> None:
    """OpenAI Agents SDK ``StopAtTools``: stops on the named tool even if it failed. stopwise's one rule (for
    ``stop_at_tools`` and ``stop_when=has_tool_call``): a failed call does not stop, the model fixes it."""
    model = ScriptedModel([calls(("submit", {"answer": ""})), calls(("submit", {"answer": "42"}))])
    agent = Agent("a", "", model, tools=[submit], stop_at_tools=[submit])
    result = await Runner(store).run(agent, "answer")
    assert result.completion_reason == "tool_output" and result.output == "42" and result.steps == 2


async def test_has_tool_call_does_not_stop_on_a_failed_call(store: SQLiteStore) -> None:
    """Vercel AI SDK ``stopWhen: hasToolCall("submit")``: stops once the tool was called. stopwise's
    ``has_tool_call`` waits for a call that succeeded (``include_failed=True`` for the peer's rule)."""
    model = ScriptedModel([calls(("submit", {"answer": ""})), calls(("submit", {"answer": "42"}))])
    agent = Agent("a", "", model, tools=[submit], stop_when=has_tool_call("submit"))
    result = await Runner(store).run(agent, "answer")
    assert result.completion_reason == "stop_when" and result.steps == 2
    model = ScriptedModel([calls(("submit", {"answer": ""}))])
    eager = Agent("a", "", model, tools=[submit], stop_when=has_tool_call("submit", include_failed=True))
    assert (await Runner(store).run(eager, "answer")).steps == 1


# --- end strategy -----------------------------------------------------------------------------------------


async def test_end_strategy_early_skips_the_rest_of_the_batch(store: SQLiteStore) -> None:
    """pydantic-ai ``Agent(end_strategy="early")``: once a call ends the run, the other calls of the response are
    not executed (each answered "not executed"). stopwise: ``end_strategy="early"`` (the default)."""
    batch = calls(("log_visit", {"city": "Oslo"}), ("get_weather", {"city": "Oslo"}), ("log_visit", {"city": "Rome"}))
    agent = Agent("a", "", ScriptedModel([batch]), tools=[get_weather, log_visit], stop_at_tools=[get_weather])
    result = await Runner(store).run(agent, "weather?")
    assert ran == ["get_weather:Oslo"]
    rows = [m for m in result.messages if m.role == "tool"]
    assert [decode_tool_result(r)["error"].startswith("Not run") for r in (rows[0], rows[2])] == [True, True]
    assert result.output == {"city": "Oslo", "celsius": 21}


async def test_end_strategy_exhaustive_runs_the_whole_batch(store: SQLiteStore) -> None:
    """pydantic-ai ``Agent(end_strategy="exhaustive")``: every call of the response runs; the first final result
    is the output."""
    batch = calls(("log_visit", {"city": "Oslo"}), ("get_weather", {"city": "Oslo"}), ("get_weather", {"city": "Rome"}))
    agent = Agent(
        "a",
        "",
        ScriptedModel([batch]),
        tools=[get_weather, log_visit],
        stop_at_tools=["get_weather"],
        end_strategy="exhaustive",
    )
    result = await Runner(store).run(agent, "weather?")
    assert sorted(ran) == ["get_weather:Oslo", "get_weather:Rome", "log_visit:Oslo"]
    assert result.output == {"city": "Oslo", "celsius": 21}


def test_stop_at_tools_and_end_strategy_are_checked_at_definition() -> None:
    model = ScriptedModel([])
    with pytest.raises(ConfigError, match="stop_at_tools"):
        Agent("a", "", model, tools=[get_weather], stop_at_tools=["nope"])
    with pytest.raises(ConfigError, match="stop_at_tools"):
        Agent("a", "", model, tools=[get_weather], stop_at_tools=[])
    with pytest.raises(ConfigError, match="end_strategy"):
        Agent("a", "", model, tools=[get_weather], end_strategy="lazy")  # type: ignore[arg-type]
