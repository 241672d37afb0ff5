"""The OpenAI Agents SDK's own documented and tested behaviours, run on the SDK's real runner (its offline
``agents.testing.ScriptedModel``, which answers with the SDK's real response types) twice: ``Runner.run`` on the
bare agent, and ``Stopwise.run`` on the attached agent (every decider present and passing: guardrails on each
hook, the guardian, an accepting stop guard). What the SDK shows its caller (final output, new items, last
agent, the exception raised) must be the same; stopwise's log records the run.

Each test names the SDK behaviour it checks; its docstring names the API and the test in the SDK's own suite
(``openai/openai-agents-python`` ``tests/``) that pins it there."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pytest

pytest.importorskip("agents", reason="needs the 'openai-agents' extra")

from agents import (
    Agent,
    GuardrailFunctionOutput,
    InputGuardrailTripwireTriggered,
    MaxTurnsExceeded,
    OutputGuardrailTripwireTriggered,
    Runner,
    StopAtTools,
    function_tool,
    input_guardrail,
    output_guardrail,
    set_tracing_disabled,
)
from agents.agent import ToolsToFinalOutputResult
from agents.run_error_handlers import RunErrorHandlerInput, RunErrorHandlerResult
from agents.testing import ScriptedModel, assistant_message, function_call
from pydantic import BaseModel

from _passing_deciders import accepting_guard, passing_guardrails
from stopwise import MemoryStore
from stopwise.guardian import Guardian
from stopwise.guardrails import Block, Guardrails
from stopwise.integrations.openai_agents import NotInARun, Stopwise
from stopwise.stop.guard import Continue, StopGuard
from stopwise.store.base import RunRecord, RunStatus

set_tracing_disabled(True)
RAN: list[tuple[str, Any]] = []


@function_tool
def lookup(city: str) -> str:
    """Look a city's weather up."""
    RAN.append(("lookup", city))
    return f"sunny in {city}"


@function_tool
def unreliable(city: str) -> str:
    """A weather service that is down."""
    RAN.append(("unreliable", city))
    raise ValueError("weather service down")


@function_tool
def delete_file(path: str) -> str:
    """Delete a file."""
    RAN.append(("delete_file", path))
    return f"deleted {path}"


Step = Sequence[Any]


def passing(store: MemoryStore, stop_guard: StopGuard | None = None) -> Stopwise:
    """Every decider attached, none of them intervening on these runs."""
    guardrails = passing_guardrails()
    guard = stop_guard or accepting_guard()
    # The weather tools only read: declared so, the guardian's risk gate lets them run as the bare SDK does.
    risks = {"lookup": "read_only", "unreliable": "read_only"}
    return Stopwise(stop_guard=guard, guardrails=guardrails, guardian=Guardian(), store=store, risks=risks)


@dataclass
class Outcome:
    """What the SDK shows its caller."""

    output: Any
    items: list[Any]
    last_agent: str
    model_calls: int


@dataclass
class Both:
    bare: Outcome | BaseException
    wrapped: Outcome | BaseException
    store: MemoryStore

    async def run(self) -> RunRecord:
        (session,) = await self.store.list_sessions()
        (run,) = await self.store.list_runs(session)
        return run


def _items(result: Any) -> list[Any]:
    shown = []
    for item in result.new_items:
        raw = item.raw_item
        data = raw if isinstance(raw, dict) else raw.model_dump()
        shown.append((type(item).__name__, data.get("name"), data.get("arguments"), getattr(item, "output", None)))
    return shown


async def both(
    agent: Callable[[ScriptedModel], Agent[Any]],
    script: Sequence[Step],
    prompt: str = "go",
    stop_guard: StopGuard | None = None,
    **run: Any,
) -> Both:
    """Run the agent (on a fresh copy of ``script``) with ``Runner.run``, then attached with ``Stopwise.run``."""
    outcomes: list[Outcome | BaseException] = []
    logs: list[list[tuple[str, Any]]] = []
    store = MemoryStore()
    for wrapped in (False, True):
        RAN.clear()
        model = ScriptedModel([list(step) for step in script])
        built = agent(model)
        try:
            if wrapped:
                stopwise = passing(store, stop_guard)
                result = await stopwise.run(stopwise.attach(built), prompt, **run)
            else:
                result = await Runner.run(built, prompt, **run)
        except Exception as exc:  # the SDK's own exception is part of what the caller sees
            outcomes.append(exc)
        else:
            outcomes.append(Outcome(result.final_output, _items(result), result.last_agent.name, len(model.calls)))
        logs.append(list(RAN))
    assert logs[0] == logs[1], "the tools ran differently"
    return Both(outcomes[0], outcomes[1], store)


def same_exception(pair: Both) -> BaseException:
    assert isinstance(pair.bare, BaseException) and isinstance(pair.wrapped, BaseException)
    assert type(pair.bare) is type(pair.wrapped)
    assert str(pair.bare) == str(pair.wrapped)
    return pair.bare


def weather_agent(**agent: Any) -> Callable[[ScriptedModel], Agent[Any]]:
    return lambda model: Agent("weather", model=model, tools=[lookup, unreliable], **agent)


async def test_parallel_tool_calls_all_run_and_each_result_is_an_output_item() -> None:
    """SDK: the function calls of one response all run, each giving a ``ToolCallOutputItem``
    (``tests/test_agent_runner.py``, multiple tool calls in one turn)."""
    calls = [function_call("lookup", {"city": c}, call_id=f"c{i}") for i, c in enumerate(("Oslo", "Lima"))]
    pair = await both(weather_agent(), [calls, [assistant_message("both sunny")]])
    assert pair.bare == pair.wrapped
    assert isinstance(pair.bare, Outcome) and pair.bare.output == "both sunny"
    assert (await pair.run()).status is RunStatus.COMPLETED


async def test_a_tools_exception_is_an_error_message_the_model_reads_and_the_run_goes_on() -> None:
    """SDK: a function tool that raises answers with the default failure message and the run goes on
    (``tests/test_function_tool.py``, ``default_tool_error_function``)."""
    script = [[function_call("unreliable", {"city": "Oslo"}, call_id="c1")], [assistant_message("service is down")]]
    pair = await both(weather_agent(), script)
    assert pair.bare == pair.wrapped
    assert isinstance(pair.bare, Outcome) and "error occurred while running the tool" in str(pair.bare.items[1][3])


async def test_max_turns_raises_max_turns_exceeded_and_is_recorded_as_the_step_cap() -> None:
    """SDK: past ``max_turns`` model calls the run raises ``MaxTurnsExceeded``
    (``tests/test_max_turns.py::test_non_streamed_max_turns``). stopwise records ``max_steps`` (not retryable),
    not a model error."""
    script = [[function_call("lookup", {"city": "Oslo"}, call_id=f"c{i}")] for i in range(5)]
    pair = await both(weather_agent(), script, max_turns=3)
    assert isinstance(same_exception(pair), MaxTurnsExceeded)
    run = await pair.run()
    assert run.status is RunStatus.FAILED and run.completion_reason == "max_steps"
    assert run.error is not None and not run.error.retryable


async def test_max_turns_none_disables_the_limit() -> None:
    """SDK: ``max_turns=None`` runs until the model answers
    (``tests/test_max_turns.py::test_non_streamed_max_turns_none_disables_limit``)."""
    cities = [f"city {i}" for i in range(12)]  # a different call each turn: the same one again would stagnate
    script = [*([function_call("lookup", {"city": c}, call_id=c)] for c in cities), [assistant_message("ok")]]
    pair = await both(weather_agent(), script, max_turns=None)
    assert pair.bare == pair.wrapped
    assert isinstance(pair.bare, Outcome) and pair.bare.model_calls == 13


async def test_a_stop_guards_continues_count_against_the_runs_max_turns() -> None:
    """stopwise runs the agent again on a stop guard's continue; the caller's ``max_turns`` caps the model calls
    of the whole run, as it would cap one ``Runner.run`` (before, each continue started a fresh budget)."""
    store = MemoryStore()
    stopwise = passing(store, StopGuard(lambda ctx: Continue("Check again."), max_continues=10, name="never_done"))
    model = ScriptedModel([[assistant_message(f"answer {i}")] for i in range(10)])
    agent = stopwise.attach(Agent("weather", model=model))
    with pytest.raises(MaxTurnsExceeded, match=r"Max turns \(3\)"):
        await stopwise.run(agent, "go", max_turns=3)
    assert len(model.calls) == 3
    (run,) = await store.list_runs((await store.list_sessions())[0])
    assert run.completion_reason == "max_steps"


def give_up(calls: list[int]) -> Callable[[RunErrorHandlerInput[Any]], RunErrorHandlerResult]:
    """A ``max_turns`` error handler that answers in the run's place, counting its calls."""

    def handler(data: RunErrorHandlerInput[Any]) -> RunErrorHandlerResult:
        assert isinstance(data.error, MaxTurnsExceeded)
        calls.append(len(data.run_data.raw_responses))
        return RunErrorHandlerResult(final_output="gave up")

    return handler


async def test_the_sdks_max_turns_handler_answers_in_place_of_the_exception_and_is_recorded_handled() -> None:
    """SDK: ``error_handlers={"max_turns": ...}`` turns the cap into a final output
    (``tests/test_run_error_handlers.py``). stopwise returns that output unjudged and records the run completed
    ``max_steps_handled``, as its own loop records an ``on_max_steps`` handler's output."""
    calls: list[int] = []
    script = [[function_call("lookup", {"city": f"city {i}"}, call_id=f"c{i}")] for i in range(5)]
    pair = await both(weather_agent(), script, max_turns=3, error_handlers={"max_turns": give_up(calls)})
    assert pair.bare == pair.wrapped
    assert isinstance(pair.bare, Outcome) and pair.bare.output == "gave up" and pair.bare.model_calls == 3
    assert calls == [3, 3]  # once each run
    run = await pair.run()
    assert run.status is RunStatus.COMPLETED and run.completion_reason == "max_steps_handled"
    assert run.output == "gave up"


async def test_continues_that_spend_max_turns_run_the_sdks_max_turns_handler() -> None:
    """A stop guard's continues that use up ``max_turns`` end the run as the SDK's own cap does: the caller's
    ``max_turns`` handler runs once and its output is the answer (before, stopwise raised ``MaxTurnsExceeded``
    past it); the run is recorded ``max_steps_handled``."""
    store = MemoryStore()
    stopwise = passing(store, StopGuard(lambda ctx: Continue("Check again."), max_continues=10, name="never_done"))
    model = ScriptedModel([[assistant_message(f"answer {i}")] for i in range(10)])
    agent = stopwise.attach(Agent("weather", model=model))
    calls: list[int] = []
    result = await stopwise.run(agent, "go", max_turns=3, error_handlers={"max_turns": give_up(calls)})
    assert result.final_output == "gave up"
    assert len(model.calls) == 3 and len(calls) == 1
    (run,) = await store.list_runs((await store.list_sessions())[0])
    assert run.status is RunStatus.COMPLETED and run.completion_reason == "max_steps_handled"
    assert run.output == "gave up"


async def test_a_max_turns_handler_that_returns_none_lets_max_turns_exceeded_through() -> None:
    """SDK: a handler that returns ``None`` declines and the run raises ``MaxTurnsExceeded``; after a stop guard's
    continues too."""
    store = MemoryStore()
    stopwise = passing(store, StopGuard(lambda ctx: Continue("Check again."), max_continues=10, name="never_done"))
    model = ScriptedModel([[assistant_message(f"answer {i}")] for i in range(10)])
    agent = stopwise.attach(Agent("weather", model=model))
    with pytest.raises(MaxTurnsExceeded, match=r"Max turns \(3\)"):
        await stopwise.run(agent, "go", max_turns=3, error_handlers={"max_turns": lambda data: None})
    assert len(model.calls) == 3
    (run,) = await store.list_runs((await store.list_sessions())[0])
    assert run.completion_reason == "max_steps"


async def test_stop_on_first_tool_makes_the_first_tool_result_the_final_output() -> None:
    """SDK: ``tool_use_behavior="stop_on_first_tool"`` ends the run with the first tool's output
    (``tests/test_tool_use_behavior.py::test_stop_on_first_tool_behavior``); stopwise's stop guard judges it."""
    judged: list[str] = []
    script = [[function_call("lookup", {"city": "Oslo"}, call_id="c1")], [assistant_message("unused")]]
    guard = StopGuard(lambda ctx: judged.append(ctx.reply.text), name="records")
    pair = await both(weather_agent(tool_use_behavior="stop_on_first_tool"), script, stop_guard=guard)
    assert pair.bare == pair.wrapped
    assert isinstance(pair.bare, Outcome) and pair.bare.output == "sunny in Oslo" and pair.bare.model_calls == 1
    assert judged == ["sunny in Oslo"]


async def test_stop_at_tools_stops_only_at_the_named_tools() -> None:
    """SDK: ``StopAtTools(stop_at_tool_names=[...])`` ends the run at a named tool's output only
    (``tests/test_tool_use_behavior.py::test_tool_names_to_stop_at_behavior``)."""
    script = [
        [function_call("unreliable", {"city": "Oslo"}, call_id="c1")],
        [function_call("lookup", {"city": "Oslo"}, call_id="c2")],
        [assistant_message("unused")],
    ]
    pair = await both(weather_agent(tool_use_behavior=StopAtTools(stop_at_tool_names=["lookup"])), script)
    assert pair.bare == pair.wrapped
    assert isinstance(pair.bare, Outcome) and pair.bare.output == "sunny in Oslo" and pair.bare.model_calls == 2


async def test_a_custom_tool_use_behavior_decides_the_final_output() -> None:
    """SDK: a ``tool_use_behavior`` function gets the tool results and may make one the final output
    (``tests/test_tool_use_behavior.py::test_custom_tool_use_behavior_async``)."""

    async def first_sunny(ctx: Any, results: list[Any]) -> ToolsToFinalOutputResult:
        sunny = [r.output for r in results if "sunny" in str(r.output)]
        return ToolsToFinalOutputResult(is_final_output=bool(sunny), final_output=sunny[0] if sunny else None)

    script = [[function_call("lookup", {"city": "Lima"}, call_id="c1")], [assistant_message("unused")]]
    pair = await both(weather_agent(tool_use_behavior=first_sunny), script)
    assert pair.bare == pair.wrapped
    assert isinstance(pair.bare, Outcome) and pair.bare.output == "sunny in Lima"


@input_guardrail
async def no_passwords(ctx: Any, agent: Any, items: Any) -> GuardrailFunctionOutput:
    return GuardrailFunctionOutput(output_info="asks for a password", tripwire_triggered="password" in str(items))


@output_guardrail
async def no_rain(ctx: Any, agent: Any, output: Any) -> GuardrailFunctionOutput:
    return GuardrailFunctionOutput(output_info="says rain", tripwire_triggered="rain" in str(output))


async def test_the_agents_own_input_tripwire_raises_and_is_recorded_as_an_input_block() -> None:
    """SDK: an input guardrail's tripwire raises ``InputGuardrailTripwireTriggered``
    (``tests/test_agent_runner.py::test_input_guardrail_tripwire_triggered_causes_exception``); stopwise records
    ``guardrail_input`` (before: a retryable ``model_error``)."""
    pair = await both(weather_agent(input_guardrails=[no_passwords]), [[assistant_message("hi")]], prompt="password?")
    assert isinstance(same_exception(pair), InputGuardrailTripwireTriggered)
    run = await pair.run()
    assert run.status is RunStatus.COMPLETED and run.completion_reason == "guardrail_input"
    assert "no_passwords" in run.detail


async def test_the_agents_own_output_tripwire_raises_and_is_recorded_as_an_output_block() -> None:
    """SDK: an output guardrail's tripwire raises ``OutputGuardrailTripwireTriggered``
    (``tests/test_agent_runner.py::test_output_guardrail_tripwire_triggered_causes_exception``); stopwise records
    ``guardrail_output`` (before: the run was left ``running`` for good)."""
    pair = await both(weather_agent(output_guardrails=[no_rain]), [[assistant_message("rain all day")]])
    assert isinstance(same_exception(pair), OutputGuardrailTripwireTriggered)
    run = await pair.run()
    assert run.status is RunStatus.COMPLETED and run.completion_reason == "guardrail_output"


async def test_a_slow_stopwise_input_block_comes_before_any_model_call_or_tool() -> None:
    """SDK: an input guardrail runs alongside the model unless ``run_in_parallel=False``
    (``tests/test_guardrails.py::test_input_guardrail_run_in_parallel_false``). stopwise's input block must
    come first: a guardrail that awaits (an LLM judge) used to let the model call, and a tool run, before the
    tripwire."""

    async def slow_block(ctx: Any) -> Block:
        for _ in range(50):  # hands the loop over, as an awaited judge would
            await asyncio.sleep(0)
        return Block("not this one")

    RAN.clear()
    model = ScriptedModel(
        [[function_call("delete_file", {"path": "notes.txt"}, call_id="c1")], [assistant_message("ok")]]
    )
    stopwise = Stopwise(guardrails=Guardrails(on_input=[slow_block]))
    with pytest.raises(InputGuardrailTripwireTriggered):
        await stopwise.run(stopwise.attach(Agent("a", model=model, tools=[delete_file])), "tidy up")
    assert len(model.calls) == 0 and RAN == []


async def test_a_session_holds_each_item_once_across_a_stop_guards_continue() -> None:
    """SDK: with ``session=`` the runner sends the session's items before the input and saves the run's items
    (``tests/test_session.py``). A stop guard's continue runs the agent again: the model must read the
    conversation once, and the session hold each item once (before, the input went to the model, and into the
    session, twice)."""
    from agents import SQLiteSession

    verdicts = iter([Continue("Say which city."), None])
    stopwise = Stopwise(stop_guard=StopGuard(lambda ctx: next(verdicts), name="once"))
    model = ScriptedModel(
        [
            [function_call("lookup", {"city": "Oslo"}, call_id="c1")],
            [assistant_message("sunny")],
            [assistant_message("sunny in Oslo")],
        ]
    )
    session = SQLiteSession("weather")
    await session.add_items([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}])
    agent = stopwise.attach(Agent("weather", model=model, tools=[lookup]))
    result = await stopwise.run(agent, "weather in Oslo?", session=session)
    assert result.final_output == "sunny in Oslo"

    def texts(items: Sequence[Any]) -> list[str]:
        return [str(i.get("content") or i.get("output") or i.get("name")) for i in items]

    last_input = texts(model.calls[-1].input)
    assert [t for t in last_input if "weather in Oslo?" in t or t in ("hi", "hello")] == [
        "hi",
        "hello",
        "weather in Oslo?",
    ]
    saved = texts(await session.get_items())
    assert len(saved) == len(set(saved)), saved


def triage(model: ScriptedModel) -> Agent[Any]:
    clerk = Agent(
        "clerk",
        model=ScriptedModel(
            [[function_call("delete_file", {"path": "notes.txt"}, call_id="s1")], [assistant_message("clerk done")]]
        ),
        tools=[delete_file],
    )
    return Agent("triage", model=model, handoffs=[clerk])


async def test_a_handoff_moves_the_run_to_the_other_agent_and_its_answer_is_the_output() -> None:
    """SDK: a handoff makes the target agent the run's current agent; its answer is the final output and it is
    ``last_agent`` (``tests/test_agent_runner.py::test_handoffs``)."""

    def no_gate(model: ScriptedModel) -> Agent[Any]:
        clerk = Agent("clerk", model=ScriptedModel([[assistant_message("clerk done")]]))
        return Agent("triage", model=model, handoffs=[clerk])

    pair = await both(no_gate, [[function_call("transfer_to_clerk", {}, call_id="h")]])
    assert pair.bare == pair.wrapped
    assert isinstance(pair.bare, Outcome) and pair.bare.output == "clerk done" and pair.bare.last_agent == "clerk"


async def test_a_handed_off_agents_tools_pass_the_same_gate() -> None:
    """A handed-off agent is attached with the agent it came from: its tool calls meet the guardian's risk gate
    (here the deletion waits for approval, as it would on the first agent) and its answer the stop guard. Before,
    ``attach`` left handoff targets bare and their tools ran unasked."""
    RAN.clear()
    bare = await Runner.run(triage(ScriptedModel([[function_call("transfer_to_clerk", {}, call_id="h")]])), "tidy")
    assert RAN == [("delete_file", "notes.txt")] and bare.final_output == "clerk done"
    RAN.clear()
    stopwise = Stopwise(guardian=Guardian())
    agent = stopwise.attach(triage(ScriptedModel([[function_call("transfer_to_clerk", {}, call_id="h")]])))
    result = await stopwise.run(agent, "tidy", session_id="s")
    assert RAN == [] and [i.raw_item.call_id for i in result.interruptions] == ["s1"]
    assert result.last_agent.name == "clerk"
    (run,) = await stopwise.deciders.store.list_runs("s")
    assert run.status is RunStatus.SUSPENDED


def test_agents_that_hand_off_to_each_other_are_attached_once_each() -> None:
    """Handoffs may form a cycle (triage -> clerk -> triage): each agent is attached once and the attached
    copies hand off to each other."""
    first = Agent("triage")
    second = Agent("clerk", handoffs=[first])
    first.handoffs = [second]
    attached = Stopwise().attach(first)
    (clerk,) = attached.handoffs
    assert isinstance(clerk, Agent) and clerk is not second
    assert clerk.handoffs == [attached]


class Forecast(BaseModel):
    city: str
    celsius: int


async def test_a_structured_output_type_is_returned_as_the_model() -> None:
    """SDK: ``output_type=<BaseModel>`` makes the final output a validated instance
    (``tests/test_agent_runner.py::test_structured_output``); stopwise judges it as JSON."""
    judged: list[str] = []
    script = [[assistant_message('{"city": "Oslo", "celsius": 4}')]]
    guard = StopGuard(lambda ctx: judged.append(ctx.reply.text), name="records")
    pair = await both(weather_agent(output_type=Forecast), script, stop_guard=guard)
    assert pair.bare == pair.wrapped
    assert isinstance(pair.bare, Outcome) and pair.bare.output == Forecast(city="Oslo", celsius=4)
    assert judged == ['{"city":"Oslo","celsius":4}']


async def test_a_streamed_run_of_an_attached_agent_names_the_fix() -> None:
    """Deliberate difference: ``Runner.run_streamed`` (``tests/test_agent_runner_streamed.py``) has no stopwise
    counterpart: a stop guard's continue runs the agent again, which a stream handed to the caller cannot. An
    attached agent streamed directly raises ``NotInARun`` naming ``Stopwise.run`` rather than run undecided."""
    stopwise = passing(MemoryStore())
    agent = stopwise.attach(Agent("weather", model=ScriptedModel([[assistant_message("sunny")]])))
    streamed = Runner.run_streamed(agent, "weather?")
    with pytest.raises(NotInARun, match=r"Stopwise\.run"):
        async for _ in streamed.stream_events():
            pass
