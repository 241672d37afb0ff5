"""pydantic-ai's own documented and tested behaviours, run on pydantic-ai's real runtime (its ``FunctionModel``
and ``TestModel``) twice: the bare agent, and the same agent with ``StopwiseCapability`` attached (every
decider present and passing: guardrails on each hook, the guardian, an accepting stop guard). What pydantic-ai
shows its caller (output, messages, usage, the exception raised) must be the same; stopwise's log records the run.

Each test names the pydantic-ai behaviour it checks; its docstring names the API and the test in pydantic-ai's
own suite (``pydantic/pydantic-ai`` ``tests/``) that pins it there."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

pytest.importorskip("pydantic_ai", reason="needs the 'pydantic-ai' extra")

from pydantic import BaseModel
from pydantic_ai import Agent, DeferredToolRequests, ModelRetry, ToolFailed
from pydantic_ai.exceptions import ApprovalRequired, UnexpectedModelBehavior, UsageLimitExceeded
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel
from pydantic_ai.models.test import TestModel
from pydantic_ai.usage import UsageLimits

from _passing_deciders import accepting_guard, passing_guardrails
from stopwise import MemoryStore
from stopwise.guardian import Guardian
from stopwise.guardrails import Guardrails
from stopwise.integrations.pydantic_ai import StopwiseCapability, UnsupportedVerdict
from stopwise.records import parse_records
from stopwise.stop.guard import Continue, StopGuard, StopGuardRecord
from stopwise.store.base import RunRecord, RunStatus

Model = Callable[[list[ModelMessage], AgentInfo], ModelResponse]


def _responses(messages: list[ModelMessage]) -> int:
    return sum(1 for m in messages if isinstance(m, ModelResponse))


def calls_then(answer: str, *batches: list[tuple[str, dict[str, Any]]]) -> Model:
    """A model that asks for each batch of calls in turn, then answers ``answer``."""

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        n = _responses(messages)
        if n < len(batches):
            return ModelResponse(
                parts=[ToolCallPart(name, args, tool_call_id=f"c{n}{i}") for i, (name, args) in enumerate(batches[n])]
            )
        return ModelResponse(parts=[TextPart(answer)])

    return model


def passing_capability(
    store: MemoryStore, stop_guard: StopGuard | None = None, *, guardian: bool = True
) -> StopwiseCapability:
    """Every decider attached (the guardian unless told), none of them intervening on these runs."""
    guardrails = passing_guardrails()
    guard = stop_guard or accepting_guard()
    return StopwiseCapability(
        stop_guard=guard, guardrails=guardrails, guardian=Guardian() if guardian else None, store=store
    )


@dataclass
class Outcome:
    """What pydantic-ai shows its caller."""

    output: Any
    messages: list[Any]
    requests: int
    tool_calls: int


@dataclass
class Both:
    bare: Outcome | BaseException
    wrapped: Outcome | BaseException
    store: MemoryStore
    tool_log: list[tuple[str, Any]]

    async def run(self) -> RunRecord:
        (session,) = await self.store.list_sessions()
        (run,) = await self.store.list_runs(session)
        return run

    async def records(self) -> list[Any]:
        (session,) = await self.store.list_sessions()
        snapshot = await self.store.load_session(session)
        assert snapshot is not None
        return [r for e in snapshot.entries for r in parse_records(e.records)]


def _shape(messages: list[ModelMessage]) -> list[Any]:
    """The messages as the caller reads them, without timestamps and run ids."""
    shown: list[Any] = []
    for m in messages:
        for p in m.parts:
            content = getattr(p, "content", None)
            args = getattr(p, "args", None)
            shown.append((type(m).__name__, type(p).__name__, getattr(p, "tool_name", None), content, args))
    return shown


Build = Callable[[list[StopwiseCapability], list[tuple[str, Any]]], Agent[None, Any]]


async def both(
    build: Build, prompt: str = "go", stop_guard: StopGuard | None = None, *, guardian: bool = True, **run: Any
) -> Both:
    """Run the agent ``build`` makes bare, then with the capability; keep what each showed its caller."""
    outcomes: list[Outcome | BaseException] = []
    store = MemoryStore()
    logs: list[list[tuple[str, Any]]] = []
    for capabilities in ([], [passing_capability(store, stop_guard, guardian=guardian)]):
        log: list[tuple[str, Any]] = []
        agent = build(capabilities, log)
        try:
            result = await agent.run(prompt, **run)
        except Exception as exc:  # the peer's own exception is part of what the caller sees
            outcomes.append(exc)
        else:
            usage = result.usage
            outcomes.append(Outcome(result.output, _shape(result.all_messages()), usage.requests, usage.tool_calls))
        logs.append(log)
    assert sorted(logs[0]) == sorted(logs[1]), "the tools ran differently"  # a batch's calls run concurrently
    return Both(outcomes[0], outcomes[1], store, logs[0])


def same_exception(pair: Both) -> BaseException:
    assert isinstance(pair.bare, BaseException) and isinstance(pair.wrapped, BaseException)
    assert type(pair.bare) is type(pair.wrapped)
    assert str(pair.bare) == str(pair.wrapped)
    return pair.bare


def agent_with_tools(model: Model, **agent: Any) -> Build:
    def build(capabilities: list[StopwiseCapability], log: list[tuple[str, Any]]) -> Agent[None, Any]:
        built: Agent[None, Any] = Agent(FunctionModel(model), capabilities=capabilities, **agent)

        @built.tool_plain(retries=2)
        def lookup(city: str) -> str:
            """Look a city's weather up."""
            log.append(("lookup", city))
            if city == "Atlantis":
                raise ModelRetry("No such city: try a real one.")
            if city == "Nowhere":
                raise ToolFailed("The weather service has no station there.")
            if city == "Crash":
                raise ValueError("weather service down")
            return f"sunny in {city}"

        return built

    return build


async def test_a_tools_model_retry_sends_a_retry_prompt_and_the_run_goes_on() -> None:
    """pydantic-ai: a tool raising ``ModelRetry`` gets its message back as the call's result and the model tries again
    (``tests/test_agent.py::test_tool_retry_count_resets_after_successful_call``)."""
    pair = await both(
        agent_with_tools(calls_then("done", [("lookup", {"city": "Atlantis"})], [("lookup", {"city": "Oslo"})]))
    )
    assert pair.bare == pair.wrapped
    assert isinstance(pair.bare, Outcome) and pair.bare.output == "done"
    assert ("ModelRequest", "ToolReturnPart", "lookup", "No such city: try a real one.", None) in pair.bare.messages
    assert (await pair.run()).status is RunStatus.COMPLETED


async def test_a_tool_past_its_retries_fails_the_run_with_unexpected_model_behavior() -> None:
    """pydantic-ai: past a tool's ``retries`` the run raises ``UnexpectedModelBehavior``
    (``tests/test_agent.py::test_tool_retry_budget_survives_interleaved_tool_calls``); stopwise records it failed."""
    batches = [[("lookup", {"city": "Atlantis"})]] * 4
    pair = await both(agent_with_tools(calls_then("never", *batches)))
    assert isinstance(same_exception(pair), UnexpectedModelBehavior)
    run = await pair.run()
    assert run.status is RunStatus.FAILED and run.error is not None and run.error.code == "model_error"


async def test_parallel_tool_calls_all_run_and_their_results_reach_the_model_in_order() -> None:
    """pydantic-ai: the calls of one response all run and each result is returned under its call id
    (``tests/test_tools.py::test_tool_failed_parallel``)."""
    batch = [("lookup", {"city": "Oslo"}), ("lookup", {"city": "Lima"}), ("lookup", {"city": "Pune"})]
    pair = await both(agent_with_tools(calls_then("three cities", batch)))
    assert pair.bare == pair.wrapped
    assert isinstance(pair.bare, Outcome) and pair.bare.tool_calls == 3
    assert sorted(city for _, city in pair.tool_log) == ["Lima", "Oslo", "Pune"]


async def test_a_tool_failed_is_a_result_the_model_reads_and_costs_no_retry() -> None:
    """pydantic-ai: ``ToolFailed`` is a terminal result (``outcome="failed"``), not a retry
    (``tests/test_tools.py::test_tool_failed_does_not_consume_retry_budget``)."""
    batches = [[("lookup", {"city": "Nowhere"})]] * 4
    pair = await both(agent_with_tools(calls_then("gave up", *batches), retries=1))
    assert pair.bare == pair.wrapped
    assert isinstance(pair.bare, Outcome) and pair.bare.output == "gave up"


async def test_a_tools_exception_propagates_out_of_agent_run() -> None:
    """pydantic-ai: any other exception a tool raises ends the run and propagates out of ``agent.run``
    (``tests/test_agent.py``, tool errors); stopwise records the run failed."""
    pair = await both(agent_with_tools(calls_then("never", [("lookup", {"city": "Crash"})])))
    assert isinstance(same_exception(pair), ValueError)
    assert (await pair.run()).status is RunStatus.FAILED


async def test_an_unknown_tool_name_is_a_retry_prompt_naming_the_tools() -> None:
    """pydantic-ai: a call to a tool the agent does not have is answered with a retry prompt
    (``tests/test_tools.py``, unknown tool)."""
    pair = await both(agent_with_tools(calls_then("ok", [("teleport", {})])))
    assert pair.bare == pair.wrapped
    assert isinstance(pair.bare, Outcome) and pair.bare.output == "ok"


async def test_an_output_validator_retry_sends_the_model_back_and_its_output_stands() -> None:
    """pydantic-ai: an ``@agent.output_validator`` raising ``ModelRetry`` asks the model again
    (``tests/test_agent.py::test_output_validator``); the stop guard judges only the answer that passed it."""
    judged: list[str] = []

    def judge(ctx: Any) -> None:
        judged.append(ctx.reply.text)

    def build(capabilities: list[StopwiseCapability], log: list[tuple[str, Any]]) -> Agent[None, Any]:
        def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
            return ModelResponse(parts=[TextPart(f"draft {_responses(messages)}")])

        built: Agent[None, Any] = Agent(FunctionModel(model), capabilities=capabilities)

        @built.output_validator
        def no_first_draft(output: str) -> str:
            log.append(("validated", output))
            if output == "draft 0":
                raise ModelRetry("Not the first draft.")
            return output

        return built

    pair = await both(build, stop_guard=StopGuard(judge, name="records"))
    assert pair.bare == pair.wrapped
    assert isinstance(pair.bare, Outcome) and pair.bare.output == "draft 1"
    assert judged == ["draft 1"]


class Forecast(BaseModel):
    city: str
    celsius: int


async def test_a_structured_output_type_is_returned_as_the_model_and_meets_the_stop_guard() -> None:
    """pydantic-ai: ``output_type=<BaseModel>`` returns a validated instance (its output tool), retrying
    invalid arguments (``tests/test_agent.py::test_result_pydantic_model_retry``). With stopwise the stop guard
    judges it as JSON (before, a structured output skipped every decider)."""
    judged: list[str] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        name = info.output_tools[0].name
        args = {"city": "Oslo", "celsius": "cold"} if _responses(messages) == 0 else {"city": "Oslo", "celsius": 4}
        return ModelResponse(parts=[ToolCallPart(name, args)])

    def build(capabilities: list[StopwiseCapability], log: list[tuple[str, Any]]) -> Agent[None, Any]:
        return Agent(FunctionModel(model), output_type=Forecast, capabilities=capabilities)

    pair = await both(build, stop_guard=StopGuard(lambda ctx: judged.append(ctx.reply.text), name="records"))
    assert pair.bare == pair.wrapped
    assert isinstance(pair.bare, Outcome) and pair.bare.output == Forecast(city="Oslo", celsius=4)
    assert judged == ['{"city":"Oslo","celsius":4}']


async def test_a_stop_guard_continue_on_a_structured_output_is_an_output_retry() -> None:
    """The stop guard's continue on a structured output is the same ``ModelRetry`` as on text: the model is sent
    back with the feedback and its next output is returned (``TestModel`` builds valid outputs itself)."""
    store = MemoryStore()
    verdicts = iter([Continue("Check the city once more."), None])
    capability = passing_capability(store, StopGuard(lambda ctx: next(verdicts), name="once"))
    agent: Agent[None, Forecast] = Agent(TestModel(), output_type=Forecast, capabilities=[capability], retries=2)
    result = await agent.run("forecast")
    assert isinstance(result.output, Forecast)
    assert result.usage.requests == 2
    records = [r for e in (await store.load_session((await store.list_sessions())[0])).entries for r in e.records]
    assert [r["event"] for r in records if r.get("type") == StopGuardRecord.TYPE] == ["continued", "accepted"]


async def test_an_output_guardrail_rewriting_a_structured_output_is_refused_by_name() -> None:
    """A structured output cannot take an output guardrail's text rewrite: ``UnsupportedVerdict`` (not the
    unchanged output as if nothing was said), and the run is recorded with the guardrail's decision."""
    from stopwise.guardrails import Rewrite

    store = MemoryStore()
    capability = StopwiseCapability(guardrails=Guardrails(on_output=[lambda ctx: Rewrite(text="{}")]), store=store)
    agent: Agent[None, Forecast] = Agent(TestModel(), output_type=Forecast, capabilities=[capability])
    with pytest.raises(UnsupportedVerdict, match="structured output"):
        await agent.run("forecast")
    (run,) = await store.list_runs((await store.list_sessions())[0])
    assert run.status is RunStatus.COMPLETED and run.output == "{}"


async def test_a_request_limit_raises_usage_limit_exceeded_and_is_recorded_as_the_step_cap() -> None:
    """pydantic-ai: ``UsageLimits(request_limit=N)`` raises ``UsageLimitExceeded`` before request N+1
    (``tests/test_usage_limits.py::test_retry_limit``). stopwise records it as its own step cap
    (``max_steps``, not retryable), not as a model error."""
    batches = [[("lookup", {"city": "Oslo"})]] * 5
    pair = await both(agent_with_tools(calls_then("never", *batches)), usage_limits=UsageLimits(request_limit=2))
    assert isinstance(same_exception(pair), UsageLimitExceeded)
    run = await pair.run()
    assert run.status is RunStatus.FAILED and run.completion_reason == "max_steps"
    assert run.error is not None and run.error.code == "max_steps_exhausted" and not run.error.retryable


async def test_a_tool_calls_limit_raises_usage_limit_exceeded_and_is_recorded_as_the_tool_call_budget() -> None:
    """pydantic-ai: ``UsageLimits(tool_calls_limit=N)`` refuses the batch that would pass it
    (``tests/test_usage_limits.py::test_tool_call_limit``); stopwise records ``tool_call_limit``."""
    batches = [[("lookup", {"city": "Oslo"}), ("lookup", {"city": "Lima"})]] * 2
    pair = await both(agent_with_tools(calls_then("never", *batches)), usage_limits=UsageLimits(tool_calls_limit=3))
    assert isinstance(same_exception(pair), UsageLimitExceeded)
    run = await pair.run()
    assert run.completion_reason == "tool_call_limit"
    assert run.error is not None and (run.error.details["allowed"], run.error.details["used"]) == (3, 4)


async def test_a_tools_own_approval_required_defers_the_call_as_without_stopwise() -> None:
    """pydantic-ai: a tool raising ``ApprovalRequired`` ends the run with ``DeferredToolRequests``
    (``tests/test_tools.py::test_tool_raises_approval_required``); stopwise records the run suspended."""

    def build(capabilities: list[StopwiseCapability], log: list[tuple[str, Any]]) -> Agent[None, Any]:
        model = calls_then("never", [("transfer", {"amount": 50})])
        built: Agent[None, Any] = Agent(
            FunctionModel(model), output_type=[str, DeferredToolRequests], capabilities=capabilities
        )

        @built.tool_plain
        def transfer(amount: int) -> str:
            """Move money."""
            raise ApprovalRequired({"why": "money moves"})

        return built

    pair = await both(build, guardian=False)  # the guardian's own gate would ask first: a transfer moves money
    assert isinstance(pair.bare, Outcome) and isinstance(pair.wrapped, Outcome)
    assert pair.bare.output == pair.wrapped.output
    assert [c.tool_name for c in pair.bare.output.approvals] == ["transfer"]
    assert (await pair.run()).status is RunStatus.SUSPENDED


async def test_a_run_on_message_history_continues_the_conversation_as_without_stopwise() -> None:
    """pydantic-ai: ``agent.run(message_history=...)`` sends the earlier messages with the new prompt
    (``tests/test_agent.py``, message history)."""
    seen: list[list[str]] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        prompts = [str(p.content) for m in messages if isinstance(m, ModelRequest) for p in m.parts]
        seen.append(prompts)
        return ModelResponse(parts=[TextPart(f"answer to {prompts[-1]}")])

    outputs = []
    for capabilities in ([], [passing_capability(MemoryStore())]):
        agent: Agent[None, str] = Agent(FunctionModel(model), capabilities=capabilities)
        first = await agent.run("first question")
        second = await agent.run("second question", message_history=first.all_messages())
        outputs.append((second.output, _shape(second.all_messages())))
    assert outputs[0] == outputs[1]
    assert seen[1] == seen[3] == ["first question", "second question"]


async def _stream(capabilities: list[StopwiseCapability]) -> tuple[list[str], str]:
    async def stream(messages: list[ModelMessage], info: AgentInfo) -> Any:
        for piece in ("It is ", "sunny ", "in Oslo."):
            yield piece

    agent: Agent[None, str] = Agent(
        FunctionModel(calls_then("unused"), stream_function=stream), capabilities=capabilities, retries=2
    )
    async with agent.run_stream("weather?") as result:
        pieces = [text async for text in result.stream_text(delta=True, debounce_by=None)]
        output = await result.get_output()
    return pieces, output


async def test_a_streamed_runs_deltas_and_output_are_the_same_and_the_run_is_recorded() -> None:
    """pydantic-ai: ``agent.run_stream`` yields the text as it comes and ``get_output`` the whole answer
    (``tests/test_streaming.py``); with stopwise the stop guard judges the streamed answer and the run completes
    on record."""
    store = MemoryStore()
    judged: list[str] = []
    capability = passing_capability(store, StopGuard(lambda ctx: judged.append(ctx.reply.text), name="records"))
    assert await _stream([]) == await _stream([capability])
    assert judged == ["It is sunny in Oslo."]
    (run,) = await store.list_runs((await store.list_sessions())[0])
    assert run.status is RunStatus.COMPLETED and run.output == "It is sunny in Oslo."


async def test_a_stop_guard_continue_in_a_streamed_run_ends_it_as_pydantic_ai_ends_a_retry_there() -> None:
    """Deliberate difference: pydantic-ai supports no retry in ``run_stream`` (an output validator's
    ``ModelRetry`` raises ``UnexpectedModelBehavior``, ``tests/test_streaming.py``); a stop guard's continue is
    such a retry, so a streamed run the guard wants to go on ends the same way. Use ``agent.run`` (or
    ``agent.iter``) where the stop guard may continue."""
    capability = passing_capability(MemoryStore(), StopGuard(lambda ctx: Continue("Not yet."), name="wants_more"))
    with pytest.raises(UnexpectedModelBehavior, match="run_stream"):
        await _stream([capability])


async def test_a_streamed_tool_call_runs_through_the_deciders_like_a_non_streamed_one() -> None:
    """pydantic-ai: a streamed response may carry tool calls (``DeltaToolCall``); they run before the answer
    streams (``tests/test_streaming.py``)."""
    ran: list[str] = []

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> Any:
        if _responses(messages) == 0:
            yield {0: DeltaToolCall("lookup", '{"city": "Oslo"}', tool_call_id="s1")}
        else:
            yield "sunny"

    outputs = []
    for capabilities in ([], [passing_capability(MemoryStore())]):
        agent: Agent[None, str] = Agent(FunctionModel(stream_function=stream), capabilities=capabilities)

        @agent.tool_plain
        def lookup(city: str) -> str:
            """Look a city's weather up."""
            ran.append(city)
            return "sunny"

        async with agent.run_stream("weather?") as result:
            outputs.append(await result.get_output())
    assert outputs == ["sunny", "sunny"]
    assert ran == ["Oslo", "Oslo"]


async def test_concurrent_runs_of_one_agent_stay_apart_and_each_is_its_own_run_on_record() -> None:
    """pydantic-ai: one ``Agent`` serves concurrent ``run`` calls, each with its own messages and usage
    (``tests/test_agent.py``, concurrency). With one capability attached, each run is recorded on its own."""

    def echo(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        prompt = next(str(p.content) for m in messages if isinstance(m, ModelRequest) for p in m.parts)
        if _responses(messages) == 0:
            return ModelResponse(parts=[ToolCallPart("lookup", {"city": prompt}, tool_call_id="c0")])
        return ModelResponse(parts=[TextPart(f"weather for {prompt}")])

    store = MemoryStore()
    outputs = []
    for capabilities in ([], [passing_capability(store)]):
        log: list[tuple[str, Any]] = []
        agent = agent_with_tools(echo)(capabilities, log)
        results = await asyncio.gather(*(agent.run(city) for city in ("Oslo", "Lima", "Pune")))
        outputs.append([(r.output, r.usage.requests) for r in results])
    assert outputs[0] == outputs[1] == [(f"weather for {c}", 2) for c in ("Oslo", "Lima", "Pune")]
    sessions = await store.list_sessions()
    runs = [run for s in sessions for run in await store.list_runs(s)]
    assert len(runs) == 3 and {r.text for r in runs} == {f"weather for {c}" for c in ("Oslo", "Lima", "Pune")}


async def test_iterating_a_run_node_by_node_gives_the_same_nodes_and_output() -> None:
    """pydantic-ai: ``agent.iter`` walks the run's graph nodes (``UserPromptNode``, ``ModelRequestNode``,
    ``CallToolsNode``, ``End``) (``tests/test_agent.py``, ``iter``); the capability's hooks run inside them."""
    walks = []
    for capabilities in ([], [passing_capability(MemoryStore())]):
        agent = agent_with_tools(calls_then("done", [("lookup", {"city": "Oslo"})]))(capabilities, [])
        async with agent.iter("go") as run:
            nodes = [type(node).__name__ async for node in run]
        assert run.result is not None
        walks.append((nodes, run.result.output))
    assert walks[0] == walks[1]
    assert walks[0][1] == "done"
