"""The run's token budgets cap each model call inside a peer integration, as stopwise's own loop caps it: pydantic-ai's
``UsageLimits(output_tokens_limit=, total_tokens_limit=)`` reach its offline ``FunctionModel`` as the request's
``max_tokens`` (what is left of them), and a reply the model cut at that cap ends the run as the native loop ends
(``token_limit``, none of its calls run). The OpenAI Agents SDK and LangGraph have no token budget to cap from
(docs/integrations/*.md, "What stays the peer's"): the SDK's own per-call ``ModelSettings.max_tokens`` reaches its
model through ``Stopwise.run`` unchanged."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

pytest.importorskip("pydantic_ai", reason="needs the 'pydantic-ai' extra")

from pydantic_ai import Agent, DeferredToolRequests
from pydantic_ai.exceptions import UsageLimitExceeded
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models import StreamedResponse
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.wrapper import WrapperModel
from pydantic_ai.settings import ModelSettings
from pydantic_ai.usage import RequestUsage, UsageLimits

from stopwise.integrations.pydantic_ai import StopwiseCapability
from stopwise.store.base import RunRecord, RunStatus, Store


class Model:
    """pydantic-ai's FunctionModel behind it: a tool call spending ``first`` output tokens, then an answer that
    spends all of the ``max_tokens`` it is sent (cut: ``finish_reason="length"``) or ``short`` tokens when
    ``short`` is set. Keeps the settings each call was sent."""

    def __init__(self, *, first: int = 30, short: int | None = None, calls_after: bool = False) -> None:
        self.first, self.short, self.calls_after = first, short, calls_after
        self.settings: list[ModelSettings | None] = []

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.settings.append(info.model_settings)
        if not any(isinstance(m, ModelResponse) for m in messages):
            call = ToolCallPart("lookup", {"city": "Oslo"}, tool_call_id="c1")
            return ModelResponse(parts=[call], usage=RequestUsage(input_tokens=10, output_tokens=self.first))
        if self.short is not None:
            return ModelResponse(
                parts=[TextPart("Sunny.")], usage=RequestUsage(input_tokens=10, output_tokens=self.short)
            )
        spent = int((info.model_settings or {}).get("max_tokens") or 10_000)
        parts: list[Any] = [TextPart("It is sunny in Oslo and")]
        if self.calls_after:
            parts.append(ToolCallPart("lookup", {"city": "Li"}, tool_call_id="c2"))
        return ModelResponse(
            parts=parts, usage=RequestUsage(input_tokens=10, output_tokens=spent), finish_reason="length"
        )

    def max_tokens(self) -> list[Any]:
        return [(s or {}).get("max_tokens") for s in self.settings]


def agent_of(model: Model, capability: StopwiseCapability, settings: ModelSettings | None = None) -> Any:
    agent: Agent[None, Any] = Agent(
        FunctionModel(model),
        output_type=[str, DeferredToolRequests],
        capabilities=[capability],
        model_settings=settings,
    )
    looked: list[str] = []

    @agent.tool_plain
    def lookup(city: str) -> str:
        """The weather in a city."""
        looked.append(city)
        return "sunny"

    agent.looked = looked  # type: ignore[attr-defined]
    return agent


async def only_run(store: Store) -> RunRecord:
    (session,) = await store.list_sessions()
    (run,) = await store.list_runs(session)
    return run


async def test_pydantic_ai_output_token_limit_caps_each_model_call_at_what_is_left_of_it() -> None:
    model = Model(first=30, short=5)
    agent = agent_of(model, StopwiseCapability())
    result = await agent.run("Weather in Oslo?", usage_limits=UsageLimits(output_tokens_limit=100))
    assert result.output == "Sunny."
    assert model.max_tokens() == [100, 70]


async def test_pydantic_ai_total_token_limit_caps_each_call_at_what_is_left_of_the_total() -> None:
    model = Model(first=30, short=5)
    agent = agent_of(model, StopwiseCapability())
    await agent.run("Weather in Oslo?", usage_limits=UsageLimits(total_tokens_limit=100, output_tokens_limit=90))
    # 100 - (10 in + 30 out) = 60 left of the total, 90 - 30 = 60 of the output: equal, and both bound the call.
    assert model.max_tokens() == [90, 60]


async def test_pydantic_ai_callers_own_lower_max_tokens_is_sent_and_no_budget_leaves_settings_alone() -> None:
    model = Model(first=30, short=5)
    agent = agent_of(model, StopwiseCapability(), settings=ModelSettings(max_tokens=50, temperature=0.0))
    await agent.run("Weather in Oslo?", usage_limits=UsageLimits(output_tokens_limit=100))
    assert model.max_tokens() == [50, 50]
    assert all(s is not None and s.get("temperature") == 0.0 for s in model.settings)

    bare = Model(first=30, short=5)
    await agent_of(bare, StopwiseCapability()).run("Weather in Oslo?")
    assert bare.max_tokens() == [None, None]


async def test_pydantic_ai_reply_cut_at_the_budgets_cap_ends_the_run_token_limit_and_runs_none_of_its_calls() -> None:
    model = Model(first=30, calls_after=True)
    capability = StopwiseCapability()
    agent = agent_of(model, capability)
    with pytest.raises(UsageLimitExceeded, match="output_tokens_limit of 100"):
        await agent.run("Weather in Oslo and Lima?", usage_limits=UsageLimits(output_tokens_limit=100))
    assert model.max_tokens() == [100, 70]
    assert agent.looked == ["Oslo"]  # the cut reply's call (its arguments cut short) never ran
    run = await only_run(capability.deciders.store)
    assert run.status is RunStatus.FAILED and run.completion_reason == "token_limit"
    assert run.error is not None and not run.error.retryable
    assert (run.error.details["allowed"], run.error.details["used"]) == (100, 100)


async def test_pydantic_ai_reply_cut_at_the_total_budgets_cap_names_the_total_budget() -> None:
    model = Model(first=30)
    capability = StopwiseCapability()
    with pytest.raises(UsageLimitExceeded, match="total_tokens_limit of 100"):
        await agent_of(model, capability).run("Weather?", usage_limits=UsageLimits(total_tokens_limit=100))
    assert model.max_tokens() == [100, 60]
    run = await only_run(capability.deciders.store)
    assert run.completion_reason == "token_limit"
    assert run.error is not None and run.error.details["limit"] == "total_tokens"
    assert run.error.details["used"] == 10 + 30 + 10 + 60


async def test_pydantic_ai_reply_cut_below_the_budgets_cap_by_the_callers_max_tokens_is_not_the_budgets_end() -> None:
    model = Model(first=30)
    capability = StopwiseCapability()
    agent = agent_of(model, capability, settings=ModelSettings(max_tokens=20))
    result = await agent.run("Weather?", usage_limits=UsageLimits(output_tokens_limit=100))
    assert result.output == "It is sunny in Oslo and"  # pydantic-ai's own way with a cut answer: it stands
    run = await only_run(capability.deciders.store)
    assert run.status is RunStatus.COMPLETED


async def test_pydantic_ai_reply_cut_at_the_callers_max_tokens_equal_to_what_is_left_is_the_budgets_end() -> None:
    model = Model(first=30)
    capability = StopwiseCapability()
    agent = agent_of(model, capability, settings=ModelSettings(max_tokens=70))
    with pytest.raises(UsageLimitExceeded, match="output_tokens_limit of 100"):
        await agent.run("Weather?", usage_limits=UsageLimits(output_tokens_limit=100))
    assert model.max_tokens() == [70, 70]
    assert (await only_run(capability.deciders.store)).completion_reason == "token_limit"


class CutStream(WrapperModel):
    """A streamed model whose provider reports each reply stopped for ``max_tokens`` (pydantic-ai's
    ``FunctionModel`` streams leave ``finish_reason`` unset): what a provider says of a reply cut at the cap."""

    @asynccontextmanager
    async def request_stream(self, *args: Any, **kwargs: Any) -> AsyncIterator[StreamedResponse]:
        async with super().request_stream(*args, **kwargs) as stream:
            stream.finish_reason = "length"
            yield stream


async def test_pydantic_ai_streamed_run_is_capped_and_a_reply_cut_at_the_cap_ends_token_limit() -> None:
    sent: list[Any] = []

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str]:
        cap = (info.model_settings or {}).get("max_tokens")
        sent.append(cap)
        for _ in range(int(cap or 5)):  # pydantic-ai counts a streamed word as one output token
            yield "sunny "

    capability = StopwiseCapability()
    agent: Agent[None, str] = Agent(CutStream(FunctionModel(stream_function=stream)), capabilities=[capability])
    with pytest.raises(UsageLimitExceeded, match="output_tokens_limit of 40"):
        async with agent.run_stream("Weather?", usage_limits=UsageLimits(output_tokens_limit=40)) as result:
            await result.get_output()
    assert sent == [40]
    run = await only_run(capability.deciders.store)
    assert run.completion_reason == "token_limit"


async def test_openai_agents_own_per_call_max_tokens_reaches_every_model_call_of_a_stopwise_run() -> None:
    """The SDK has no token budget to cap from (its alternative: ``ModelSettings(max_tokens=)`` per call, the
    run's usage in ``result.context_wrapper.usage``): the agent's own cap reaches each call unchanged, the calls
    of a stop guard's continue (a second ``Runner.run``) too."""
    pytest.importorskip("agents", reason="needs the 'openai-agents' extra")
    from agents import Agent as SdkAgent
    from agents import ModelSettings as SdkSettings
    from agents import function_tool, set_tracing_disabled
    from agents.testing import ScriptedModel, assistant_message, function_call

    from stopwise.integrations.openai_agents import Stopwise
    from stopwise.stop.guard import Continue, StopGuard

    set_tracing_disabled(True)

    @function_tool
    def lookup(city: str) -> str:
        """The weather in a city."""
        return "sunny"

    def once_more(ctx: Any) -> Any:
        return None if "Oslo" in ctx.reply.text else Continue("Say which city.")

    model = ScriptedModel(
        [
            [function_call("lookup", {"city": "Oslo"}, call_id="c1")],
            [assistant_message("Sunny.")],
            [assistant_message("Sunny in Oslo.")],
        ]
    )
    agent = SdkAgent("weather", model=model, tools=[lookup], model_settings=SdkSettings(max_tokens=64))
    stopwise = Stopwise(stop_guard=StopGuard(once_more))
    result = await stopwise.run(stopwise.attach(agent), "Weather in Oslo?")
    assert result.final_output == "Sunny in Oslo."
    assert [c.model_settings.max_tokens for c in model.calls] == [64, 64, 64]
