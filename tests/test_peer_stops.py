"""The peers' ways to stop, translated to stopwise and run end to end on a real SQLite log. Each test's docstring
names the peer and its API; the body is the stopwise counterpart (docs/coming-from.md)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence
from decimal import Decimal
from pathlib import Path

import pytest
from pydantic import BaseModel

from stopwise import (
    Agent,
    Approve,
    ConfigError,
    FunctionModel,
    Limits,
    Reply,
    RetryOutput,
    Runner,
    ScriptedModel,
    SQLiteStore,
    ToolCall,
    Usage,
    has_tool_call,
    tool,
)
from stopwise.events import RunFinished, TextDelta
from stopwise.history import HistoryRecord, keep_last_steps, summarise, token_budget
from stopwise.messages import Message, decode_tool_result
from stopwise.models import ModelRequest
from stopwise.records import parse_records
from stopwise.step_plan import StepContext, StepPlan, StepPlanRecord
from stopwise.stop.max_steps import MaxStepsContext


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


async def test_a_return_direct_tool_ends_the_run_with_its_result(store: SQLiteStore) -> None:
    """LangGraph ``create_react_agent`` with a tool declared ``return_direct=True``: the tool's result is returned
    to the caller without another model call. stopwise: ``stop_at_tools=[tool]``."""
    model = ScriptedModel([calls(("log_visit", {"city": "Oslo"})), calls(("get_weather", {"city": "Oslo"}))])
    agent = Agent("a", "", model, tools=[get_weather, log_visit], stop_at_tools=[log_visit])
    result = await Runner(store).run(agent, "log it")
    assert result.completion_reason == "tool_output" and result.output == "noted" and model.remaining == 1


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


# --- limits ------------------------------------------------------------------------------------------------


def lookups(n: int, usage: Usage | None = None, prefix: str = "c") -> Reply:
    batch = [ToolCall("log_visit", {"city": f"city{i}"}, id=f"{prefix}{i}") for i in range(n)]
    return Reply(tool_calls=batch, usage=usage)


async def test_tool_calls_limit_is_checked_before_the_batch_runs(store: SQLiteStore) -> None:
    """pydantic-ai ``UsageLimits(tool_calls_limit=5)``: checked before a batch runs, so only the allowed calls
    execute (a ``stop_when`` counting calls acts after the batch: 8 would have run). stopwise:
    ``Limits(tool_calls=5)``; the calls past it get an error row and the run ends ``tool_call_limit``."""
    agent = Agent("a", "", ScriptedModel([lookups(8)]), tools=[log_visit], limits=Limits(tool_calls=5))
    result = await Runner(store).run(agent, "go")
    assert len(ran) == 5
    assert result.status == "failed" and result.completion_reason == "tool_call_limit"
    assert result.error is not None and result.error.code == "tool_call_limit"
    assert result.error.details == {"limit": "tool_calls", "allowed": 5, "used": 8}
    refused = [decode_tool_result(m) for m in result.messages if m.role == "tool"][5:]
    assert len(refused) == 3 and all("tool-call limit (5)" in r["error"] for r in refused)


async def test_tool_calls_limit_counts_across_steps_and_allows_reaching_it_exactly(store: SQLiteStore) -> None:
    """pydantic-ai ``UsageLimits(tool_calls_limit=3)`` over several model requests: the count is the run's."""
    model = ScriptedModel([lookups(2), lookups(1, prefix="d"), lookups(1, prefix="e")])
    agent = Agent("a", "", model, tools=[log_visit], limits=Limits(tool_calls=3))
    result = await Runner(store).run(agent, "go")
    assert len(ran) == 3 and result.steps == 3 and result.completion_reason == "tool_call_limit"


@pytest.mark.parametrize(
    ("limits", "kind"),
    [
        (Limits(input_tokens=1500), "input_tokens"),
        (Limits(output_tokens=900), "output_tokens"),
        (Limits(total_tokens=2500), "total_tokens"),
    ],
)
async def test_token_limits_end_the_run_after_the_step_that_went_past(
    store: SQLiteStore, limits: Limits, kind: str
) -> None:
    """pydantic-ai ``UsageLimits(input_tokens_limit=, output_tokens_limit=, total_tokens_limit=)``: the run stops
    once the reported usage goes past the limit (reaching it exactly is within it)."""
    model = ScriptedModel([lookups(1, Usage(1000, 500)), lookups(1, Usage(1000, 500), "d"), "never asked"])
    result = await Runner(store).run(Agent("a", "", model, tools=[log_visit], limits=limits), "go")
    assert result.completion_reason == "token_limit" and result.steps == 2
    assert result.error is not None and result.error.details["limit"] == kind
    assert model.remaining == 1


async def test_a_final_answer_on_the_step_that_spent_the_budget_still_completes(store: SQLiteStore) -> None:
    """The peers raise on the response that went past (pydantic-ai ``UsageLimitExceeded``). stopwise keeps an
    answer the tokens already paid for: a final answer is checked before the budgets."""
    model = ScriptedModel([Reply("the answer", usage=Usage(5000, 10))])
    result = await Runner(store).run(Agent("a", "", model, limits=Limits(total_tokens=100)), "go")
    assert result.completion_reason == "final_answer" and result.output == "the answer"


async def test_token_budget_is_counted_from_the_log_across_a_resume(store: SQLiteStore) -> None:
    """A resume (after an approval) rebuilds the leg from the log: the budget it had spent is still spent."""

    @tool(needs_approval=True)
    def publish(city: str) -> str:
        """Publish a city (a human approves)."""
        return "published"

    first = Reply(tool_calls=[ToolCall("publish", {"city": "Oslo"}, id="p")], usage=Usage(1000, 500))
    model = ScriptedModel([first, lookups(1, Usage(1000, 500)), "never asked"])
    agent = Agent("a", "", model, tools=[publish, log_visit], limits=Limits(total_tokens=2000))
    runner = Runner(store)
    assert (await runner.run(agent, "go", session_id="s")).status == "suspended"
    result = await runner.resume(agent, "s", {"p": Approve()})
    assert result.completion_reason == "token_limit" and result.usage.total_tokens == 3000


async def test_a_retry_starts_a_fresh_budget_and_usage_adds_up_across_legs(store: SQLiteStore) -> None:
    """Budgets count per leg, as ``max_steps`` does: ``retry()`` after a limit starts a fresh one; ``usage`` on the
    result is the whole run's."""
    model = ScriptedModel([lookups(1, Usage(1000, 500)), lookups(1, Usage(1000, 500), "d"), "done"])
    agent = Agent("a", "", model, tools=[log_visit], limits=Limits(total_tokens=1500))
    runner = Runner(store)
    first = await runner.run(agent, "go", session_id="s")
    assert first.completion_reason == "token_limit" and first.steps == 2
    second = await runner.retry(agent, "s")
    assert second.completion_reason == "final_answer" and second.steps == 3
    assert second.usage.total_tokens == 3000


async def test_step_timeout_cancels_a_slow_model_call_and_the_run_ends_retryable(store: SQLiteStore) -> None:
    """Vercel AI SDK ``generateText({ timeout: { stepMs } })``: a step past its time is aborted. stopwise:
    ``Limits(step_seconds=)`` cancels the model call; the run fails ``time_limit``, retryable."""
    cancelled = asyncio.Event()

    async def slow_then_quick(request: ModelRequest) -> Reply:
        if not cancelled.is_set():
            try:
                await asyncio.Event().wait()  # never set: only the time limit ends this call
            except asyncio.CancelledError:
                cancelled.set()
                raise
        return Reply("quick")

    agent = Agent("a", "", FunctionModel(slow_then_quick), limits=Limits(step_seconds=0.05))
    runner = Runner(store)
    result = await runner.run(agent, "go", session_id="s")
    assert cancelled.is_set()
    assert result.completion_reason == "time_limit" and result.error is not None and result.error.retryable
    assert result.error.details["limit"] == "step_time" and result.steps == 0
    assert (await runner.retry(agent, "s")).output == "quick"


async def test_a_streamed_model_call_past_the_step_time_is_cut_after_its_deltas(store: SQLiteStore) -> None:
    """Vercel AI SDK ``streamText({ timeout: { stepMs } })``: the stream is aborted mid-way. stopwise: the deltas
    already sent stay sent, the call is cancelled, and the run ends ``time_limit``."""

    class Stalls:
        async def generate(self, request: ModelRequest) -> Reply:
            raise AssertionError("streamed, not generated")

        async def stream(self, request: ModelRequest) -> AsyncIterator[str | Reply]:
            yield "partial "
            await asyncio.Event().wait()  # never set: only the time limit ends this stream
            yield Reply("unreachable")

    agent = Agent("a", "", Stalls(), limits=Limits(step_seconds=0.05))
    events = [e async for e in Runner(store).stream(agent, "go")]
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["partial "]
    finished = events[-1]
    assert isinstance(finished, RunFinished) and finished.result.completion_reason == "time_limit"


def _clock(*times: float) -> Callable[[], float]:
    """A runner clock reading ``times`` in turn, then staying at the last."""
    left = list(times)

    def now() -> float:
        return left.pop(0) if len(left) > 1 else left[0]

    return now


async def test_run_time_limit_counts_from_the_legs_start(store: SQLiteStore) -> None:
    """Vercel AI SDK ``timeout: { totalMs }``: the whole call is bounded. stopwise: ``Limits(run_seconds=)``;
    between steps a leg past it ends, and a model call gets only what is left (here nothing: cut at once)."""
    now = _clock(0.0, 1.0, 2.0, 10.0)
    model = ScriptedModel([lookups(1), lookups(1, prefix="d"), "never asked"])
    agent = Agent("a", "", model, tools=[log_visit], limits=Limits(run_seconds=5))
    result = await Runner(store, clock=now).run(agent, "go")
    assert result.completion_reason == "time_limit" and result.steps == 1
    assert result.error is not None and result.error.details["limit"] == "run_time"


async def test_a_leg_past_its_run_time_ends_after_the_step_that_went_past(store: SQLiteStore) -> None:
    """``Limits(run_seconds=)`` is also checked when a step is decided: the step that went past commits, with the
    run's failure, and no further model call is made."""
    now = _clock(0.0, 0.0, 1.0, 9.0)  # the first reading dates the runner's lease on the run
    model = ScriptedModel([lookups(1), "never asked"])
    agent = Agent("a", "", model, tools=[log_visit], limits=Limits(run_seconds=5))
    result = await Runner(store, clock=now).run(agent, "go", session_id="s")
    assert result.completion_reason == "time_limit" and result.steps == 1 and model.remaining == 1
    snapshot = await store.load_session("s")
    assert snapshot is not None and (snapshot.entries[-1].decision or {})["action"] == "fail"


async def test_a_tool_past_the_step_time_gets_a_timeout_row_and_the_run_goes_on(store: SQLiteStore) -> None:
    """Vercel AI SDK ``timeout.stepMs`` also bounds the step's tool executions. stopwise: the call is answered
    with a timeout error row the model reads, as ``@tool(timeout=)`` does."""

    @tool
    async def stuck() -> str:
        """Never returns."""
        await asyncio.Event().wait()
        return "unreachable"

    model = ScriptedModel([Reply(tool_calls=[ToolCall("stuck", {}, id="s1")]), "gave up on it"])
    agent = Agent("a", "", model, tools=[stuck], limits=Limits(step_seconds=0.05))
    result = await Runner(store).run(agent, "go")
    assert result.completion_reason == "final_answer"
    row = next(m for m in result.messages if m.role == "tool")
    assert "step's time limit" in decode_tool_result(row)["error"]


def _researcher(n_replies: int) -> Agent:
    replies = [Reply(f"finding {i}", usage=Usage(800, 200)) for i in range(n_replies)]
    return Agent("researcher", "", ScriptedModel(replies))


async def test_sub_agent_usage_counts_toward_the_token_budget_and_is_reported_apart(store: SQLiteStore) -> None:
    """OpenAI Agents SDK ``agent.as_tool()``: the sub-agent's usage is its own run's. stopwise counts a sub-agent's
    model calls toward the parent's token budgets (the default the issue asks for) and reports them as
    ``result.sub_usage``, apart from the parent's own ``usage``."""
    research = _researcher(2).as_tool()
    ask = Reply(tool_calls=[ToolCall("researcher", {"input": "look"}, id="r1")], usage=Usage(100, 10))
    ask_again = Reply(tool_calls=[ToolCall("researcher", {"input": "more"}, id="r2")], usage=Usage(100, 10))
    model = ScriptedModel([ask, ask_again, "never asked"])
    parent = Agent("lead", "", model, tools=[research], limits=Limits(total_tokens=1500))
    result = await Runner(store).run(parent, "go", session_id="s")
    assert result.completion_reason == "token_limit" and result.steps == 2
    assert result.usage.total_tokens == 220 and result.sub_usage.total_tokens == 2000
    assert result.error is not None and result.error.details["used"] == 2220


async def test_sub_agent_usage_is_counted_from_the_log_on_a_resume(store: SQLiteStore) -> None:
    """The sub-agent's usage is in the parent's step entry, so a leg rebuilt from the log (a resume after an
    approval) keeps it in the budget and in the report."""

    @tool(needs_approval=True)
    def publish(text: str) -> str:
        """Publish (a human approves)."""
        return "published"

    research = _researcher(1).as_tool()
    model = ScriptedModel(
        [
            Reply(tool_calls=[ToolCall("researcher", {"input": "look"}, id="r1")]),
            Reply(tool_calls=[ToolCall("publish", {"text": "x"}, id="p1")]),
            Reply(tool_calls=[ToolCall("log_visit", {"city": "Oslo"}, id="v1")], usage=Usage(10, 10)),
            "never asked",
        ]
    )
    parent = Agent("lead", "", model, tools=[research, publish, log_visit], limits=Limits(total_tokens=1010))
    runner = Runner(store)
    assert (await runner.run(parent, "go", session_id="s")).status == "suspended"
    result = await runner.resume(parent, "s", {"p1": Approve()})
    assert result.completion_reason == "token_limit" and result.sub_usage.total_tokens == 1000


async def test_cost_is_priced_from_the_price_table_and_limits_the_run(store: SQLiteStore) -> None:
    """pydantic-ai prices usage with ``genai-prices``; stopwise does too: ``Limits(cost=)`` in US dollars, and
    ``RunResult.cost`` for the run's usage."""
    model = ScriptedModel([lookups(1, Usage(1000, 500)), lookups(1, Usage(1000, 500), "d"), "never asked"])
    limits = Limits(cost=0.002, priced_as="openai:gpt-4.1-mini")
    result = await Runner(store).run(Agent("a", "", model, tools=[log_visit], limits=limits), "go")
    assert result.completion_reason == "cost_limit" and result.steps == 2
    assert result.cost is not None and Decimal("0.002") < result.cost < Decimal("0.003")


def test_a_model_without_a_price_is_a_config_error_not_a_cost_of_zero() -> None:
    with pytest.raises(ConfigError, match="no price is known"):
        Agent("a", "", ScriptedModel([]), limits=Limits(cost=1, priced_as="nobody:no-such-model-xyz"))
    with pytest.raises(ConfigError, match="priced_as"):
        Agent("a", "", ScriptedModel([]), limits=Limits(cost=1))


@pytest.mark.parametrize("bad", [{"tool_calls": -1}, {"total_tokens": 1.5}, {"cost": 0}, {"step_seconds": True}])
def test_limits_reject_values_that_are_not_budgets(bad: dict[str, object]) -> None:
    with pytest.raises(ConfigError, match=r"limits\."):
        Limits(**bad)  # type: ignore[arg-type]


# --- output validators -----------------------------------------------------------------------------------


class Answer(BaseModel):
    city: str
    source: str


def _answers(*texts: str) -> ScriptedModel:
    return ScriptedModel(list(texts))


async def test_an_output_validator_sends_the_model_back_with_the_applications_feedback(store: SQLiteStore) -> None:
    """pydantic-ai ``@agent.output_validator`` raising ``ModelRetry("...")``: a semantic check of the structured
    output that sends the model back with feedback. stopwise: ``@agent.output_validator`` raising
    ``RetryOutput``; the feedback row is marked as coming from the application."""
    model = _answers('{"city": "Oslo", "source": ""}', '{"city": "Oslo", "source": "ssb.no"}')
    agent = Agent("a", "", model, tools=[log_visit], output_type=Answer)

    @agent.output_validator
    def has_source(answer: Answer) -> None:
        if not answer.source:
            raise RetryOutput("cite a source")

    result = await Runner(store).run(agent, "capital of Norway?")
    assert result.completion_reason == "output" and result.output == Answer(city="Oslo", source="ssb.no")
    feedback = [m for m in result.messages if m.metadata.get("source") == "output_validator"]
    assert len(feedback) == 1 and "cite a source" in feedback[0].content
    assert len(model.requests[1].tools) == 1  # a retry, not forced completion: the tools stay on


async def test_async_output_validators_run_on_text_and_may_replace_it(store: SQLiteStore) -> None:
    """pydantic-ai output validators may be async and may return a changed output; they also run on text output."""
    agent = Agent("a", "", _answers("oslo"))

    @agent.output_validator
    async def capitalised(text: str) -> str:
        return text.capitalize()

    result = await Runner(store).run(agent, "capital of Norway?")
    assert result.output == "Oslo" and result.text == "Oslo"


async def test_output_validator_retries_count_against_max_completion_retries(store: SQLiteStore) -> None:
    """pydantic-ai counts ``ModelRetry`` from output validators against the agent's ``retries`` (then
    ``UnexpectedModelBehavior``). stopwise: against ``max_completion_retries``, then ``output_rejected``."""
    model = _answers("no", "still no", "never asked")
    agent = Agent("a", "", model, max_completion_retries=1)

    @agent.output_validator
    def never(text: str) -> None:
        raise RetryOutput("not good enough")

    result = await Runner(store).run(agent, "go")
    assert result.status == "failed" and result.error is not None and result.error.code == "output_rejected"
    assert result.steps == 2 and model.remaining == 1


async def test_an_output_validator_that_raises_fails_the_run_naming_it(store: SQLiteStore) -> None:
    agent = Agent("a", "", _answers("x"))

    @agent.output_validator
    def broken(text: str) -> None:
        raise KeyError("bug")

    result = await Runner(store).run(agent, "go")
    assert result.error is not None and result.error.code == "output_validator_raised"
    assert "broken" in result.error.message


async def test_output_validators_also_judge_a_stop_at_tools_output(store: SQLiteStore) -> None:
    """OpenAI Agents SDK final outputs from ``StopAtTools`` are not validated further; stopwise runs the output
    validators on them too, so one check covers every way the run can produce its output."""
    model = ScriptedModel([calls(("submit", {"answer": "maybe"})), calls(("submit", {"answer": "42"}))])
    agent = Agent("a", "", model, tools=[submit], stop_at_tools=[submit])

    @agent.output_validator
    def numeric(answer: object) -> None:
        if not str(answer).isdigit():
            raise RetryOutput("answer with a number")

    result = await Runner(store).run(agent, "answer")
    assert result.completion_reason == "tool_output" and result.output == "42" and result.steps == 2


# --- the step cap ----------------------------------------------------------------------------------------


def _looping() -> ScriptedModel:
    return ScriptedModel([calls(("log_visit", {"city": f"c{i}"})) for i in range(3)] + ["never asked"])


async def test_max_turns_handler_gives_the_final_output_without_a_model_call(store: SQLiteStore) -> None:
    """OpenAI Agents SDK ``Runner.run(..., error_handlers={"max_turns": handler})``: at the cap the handler returns
    the final output and no model call is made. stopwise: ``Agent(on_max_steps=handler)``, reason
    ``max_steps_handled``."""
    seen = []

    def summarise(ctx: MaxStepsContext) -> dict[str, object]:
        seen.append(ctx)
        visits = [decode_tool_result(m) for m in ctx.messages if m.role == "tool"]
        return {"city": "unknown", "source": f"{len(visits)} lookups, cap {ctx.max_steps}"}

    model = _looping()
    agent = Agent("a", "", model, tools=[log_visit], max_steps=3, output_type=Answer, on_max_steps=summarise)
    result = await Runner(store).run(agent, "go", session_id="s")
    assert result.ok and result.completion_reason == "max_steps_handled"
    assert result.output == Answer(city="unknown", source="3 lookups, cap 3")
    assert model.remaining == 1 and result.steps == 3
    assert (await store.list_runs("s"))[-1].output == {"city": "unknown", "source": "3 lookups, cap 3"}


async def test_an_async_max_steps_handler_on_a_text_agent_returns_text(store: SQLiteStore) -> None:
    async def apologise(ctx: MaxStepsContext) -> str:
        return "Out of steps; here is what I have."

    agent = Agent("a", "", _looping(), tools=[log_visit], max_steps=2, on_max_steps=apologise)
    result = await Runner(store).run(agent, "go")
    assert result.completion_reason == "max_steps_handled" and result.output == "Out of steps; here is what I have."


async def test_a_max_steps_handler_returning_the_wrong_kind_fails_naming_it(store: SQLiteStore) -> None:
    agent = Agent("a", "", _looping(), tools=[log_visit], max_steps=1, on_max_steps=lambda ctx: 42)
    result = await Runner(store).run(agent, "go")
    assert result.error is not None and result.error.code == "max_steps_handler_raised"


async def test_with_an_output_type_the_cap_costs_at_most_one_forced_call(store: SQLiteStore) -> None:
    """OpenAI Agents SDK ``max_turns``: the run stops at its cap (``MaxTurnsExceeded``). stopwise with an
    ``output_type`` asks once for the output after the cap (``forced_calls_at_cap=1``), then fails."""
    model = ScriptedModel([calls(("log_visit", {"city": "a"})), "not json", "never asked", "never asked"])
    agent = Agent("a", "", model, tools=[log_visit], max_steps=1, output_type=Answer, max_completion_retries=3)
    result = await Runner(store).run(agent, "go")
    assert result.error is not None and result.error.code == "output_invalid"
    assert result.steps == 2 and model.remaining == 2


# --- per-step preparation --------------------------------------------------------------------------------


async def test_prepare_step_chooses_model_tools_choice_and_instructions_and_is_logged(store: SQLiteStore) -> None:
    """Vercel AI SDK ``prepareStep({ stepNumber })`` returning ``{ model, activeTools, toolChoice, system }``:
    per-step settings. stopwise: ``prepare_step(ctx) -> StepPlan``; what it chose is in the step's log entry."""
    first = ScriptedModel([calls(("log_visit", {"city": "Oslo"}))])
    second = ScriptedModel(["done"])

    def plan(ctx: StepContext) -> StepPlan | None:
        if ctx.step == 1:
            return StepPlan(tools=[log_visit], tool_choice="required", instructions="Log the visit first.")
        return StepPlan(model=second)

    agent = Agent("a", "Be brief.", first, tools=[get_weather, log_visit], prepare_step=plan)
    result = await Runner(store).run(agent, "go", session_id="s")
    assert result.output == "done"
    request = first.requests[0]
    assert [t.name for t in request.tools] == ["log_visit"] and request.tool_choice == "required"
    assert request.messages[0].content == "Log the visit first."
    assert second.requests[0].messages[0].content == "Be brief." and len(second.requests[0].tools) == 2
    snapshot = await store.load_session("s")
    assert snapshot is not None
    plans = [r for e in snapshot.entries for r in parse_records(e.records) if isinstance(r, StepPlanRecord)]
    assert [(p.step, p.tools, p.tool_choice) for p in plans] == [(1, ("log_visit",), "required"), (2, None, None)]
    assert plans[1].model is not None and "ScriptedModel" in plans[1].model


async def test_a_tool_the_step_does_not_offer_is_answered_with_an_error_row(store: SQLiteStore) -> None:
    """Vercel AI SDK ``activeTools``: tools outside the list are not available to the model on that step."""
    model = ScriptedModel([calls(("get_weather", {"city": "Oslo"})), "ok"])
    agent = Agent(
        "a", "", model, tools=[get_weather, log_visit], prepare_step=lambda ctx: StepPlan(tools=["log_visit"])
    )
    result = await Runner(store).run(agent, "go")
    assert ran == [] and result.output == "ok"
    row = next(m for m in result.messages if m.role == "tool")
    assert "not available at this step" in decode_tool_result(row)["error"]


async def test_an_async_prepare_step_that_fails_ends_the_run_naming_it(store: SQLiteStore) -> None:
    async def broken(ctx: StepContext) -> StepPlan:
        return StepPlan(tools=["no_such_tool"])

    model = ScriptedModel(["never asked"])
    result = await Runner(store).run(Agent("a", "", model, tools=[log_visit], prepare_step=broken), "go")
    assert result.error is not None and result.error.code == "prepare_step_failed"
    assert "no_such_tool" in result.error.message and model.remaining == 1


def test_the_openai_and_anthropic_adapters_send_the_tool_choice() -> None:
    from stopwise.models import ModelRequest as Request
    from stopwise.models.anthropic import AnthropicModel
    from stopwise.models.openai import OpenAIModel

    specs = Agent("a", "", ScriptedModel([]), tools=[log_visit]).tool_specs
    forced = Request(messages=(), tools=specs, step=1, tool_choice="log_visit")
    openai = OpenAIModel("gpt-4.1-mini", api_key="k").request_params(forced)
    assert openai["tool_choice"] == {"type": "function", "function": {"name": "log_visit"}}
    anthropic = AnthropicModel("claude-x", api_key="k").request_params(forced)
    assert anthropic["tool_choice"] == {"type": "tool", "name": "log_visit"}
    required = Request(messages=(), tools=specs, step=1, tool_choice="required")
    assert AnthropicModel("claude-x", api_key="k").request_params(required)["tool_choice"] == {"type": "any"}


# --- bounded context -------------------------------------------------------------------------------------


def _visits(n: int) -> ScriptedModel:
    return ScriptedModel([calls(("log_visit", {"city": f"c{i}"})) for i in range(n)] + ["done"])


async def _history_records(store: SQLiteStore) -> list[HistoryRecord]:
    snapshot = await store.load_session("s")
    assert snapshot is not None
    return [r for e in snapshot.entries for r in parse_records(e.records) if isinstance(r, HistoryRecord)]


async def test_keep_last_steps_sends_the_opening_input_and_the_last_steps_and_records_the_rest(
    store: SQLiteStore,
) -> None:
    """pydantic-ai ``Agent(history_processors=[keep_recent_messages])``: what the model is sent is trimmed; stopwise
    keeps the whole log and records, per step, which rows the call was not sent."""
    model = _visits(3)
    agent = Agent("a", "sys", model, tools=[log_visit], history_processors=[keep_last_steps(1)])
    result = await Runner(store).run(agent, "visit", session_id="s")
    assert result.output == "done" and len(result.messages) == 1 + 3 * 2 + 1  # the log keeps everything
    last = model.requests[-1].messages
    assert [m.role for m in last] == ["system", "user", "assistant", "tool"]
    assert last[2].tool_calls[0].args == {"city": "c2"}
    records = await _history_records(store)
    assert [r.dropped for r in records] == [(), (), (1, 2), (1, 2, 3, 4)]
    assert records[-1].sent == 3


async def test_token_budget_keeps_the_latest_steps_that_fit(store: SQLiteStore) -> None:
    """Vercel AI SDK ``prepareStep`` returning trimmed ``messages`` to stay within a context budget. stopwise:
    ``token_budget(n)`` (the count function is pluggable; the latest step always stays)."""
    model = _visits(3)
    agent = Agent("a", "", model, tools=[log_visit], history_processors=[token_budget(3, count=lambda m: 1)])
    await Runner(store).run(agent, "visit", session_id="s")
    assert [m.role for m in model.requests[-1].messages] == ["user", "assistant", "tool"]


async def test_summarise_replaces_the_dropped_steps_with_a_summary_row(store: SQLiteStore) -> None:
    """pydantic-ai's summarising history processor (an LLM call that condenses old messages). stopwise:
    ``summarise(fn, keep_last=n)``; ``fn`` may be async, and is called only once something is dropped."""
    seen: list[int] = []

    async def condense(rows: Sequence[Message]) -> str:
        seen.append(len(rows))
        return f"{len(rows)} earlier rows"

    model = _visits(4)
    agent = Agent("a", "", model, tools=[log_visit], history_processors=[summarise(condense, keep_last=2)])
    await Runner(store).run(agent, "visit", session_id="s")
    assert seen == [2, 4]  # the 4th and 5th calls each dropped the steps before the last two
    sent = model.requests[-1].messages
    assert sent[1].metadata["source"] == "history_summary" and "4 earlier rows" in sent[1].content
    records = await _history_records(store)
    assert records[-1].added == 1 and records[-1].dropped == (1, 2, 3, 4)


async def test_a_history_processor_that_returns_junk_fails_the_run(store: SQLiteStore) -> None:
    agent = Agent("a", "", _visits(1), tools=[log_visit], history_processors=[lambda ms: ["not a message"]])  # type: ignore[list-item]
    result = await Runner(store).run(agent, "visit")
    assert result.error is not None and result.error.code == "history_processor_failed"


# --- client-side tools -----------------------------------------------------------------------------------


@tool(client=True)
def ask_user(question: str) -> str:
    """Ask the user a question; the application shows it and returns the answer."""
    raise AssertionError("a client tool's body never runs")


async def test_a_client_tool_suspends_the_run_and_resume_continues_with_its_result(store: SQLiteStore) -> None:
    """Vercel AI SDK tools without ``execute``: the loop stops and hands the calls to the caller, who continues
    with the results. stopwise: ``@tool(client=True)``; the run suspends with the call in ``result.pending``;
    ``runner.resume(agent, session, results={call_id: value})`` continues it, durably, from any process."""
    model = ScriptedModel([calls(("ask_user", {"question": "Which city?"})), "Oslo it is."])
    agent = Agent("a", "", model, tools=[ask_user])
    suspended = await Runner(store).run(agent, "plan a trip", session_id="s")
    assert suspended.status == "suspended"
    (pending,) = suspended.pending
    assert (pending.tool, pending.source, dict(pending.args)) == ("ask_user", "client", {"question": "Which city?"})
    result = await Runner(store).resume(agent, "s", results={pending.call_id: "Oslo"})
    assert result.output == "Oslo it is."
    row = next(m for m in result.messages if m.role == "tool")
    assert decode_tool_result(row) == "Oslo" and row.metadata["origin"] == "client"
    assert "Oslo" in model.requests[1].messages[-1].content


async def test_a_client_tools_failure_and_a_missing_result_are_handled(store: SQLiteStore) -> None:
    """A client tool's failure (``ToolError`` as the result) is an error row the model reads; resuming without the
    result, or with a result for a call that is not a client tool's, is an ``ApprovalError``."""
    from stopwise import ApprovalError, ToolError

    model = ScriptedModel([calls(("ask_user", {"question": "Which city?"})), "I will guess."])
    agent = Agent("a", "", model, tools=[ask_user])
    runner = Runner(store)
    await runner.run(agent, "plan a trip", session_id="s")
    with pytest.raises(ApprovalError, match="needs its result"):
        await runner.resume(agent, "s", {"c0": Approve()})
    with pytest.raises(ApprovalError, match="not a pending client tool call"):
        await runner.resume(agent, "s", results={"nope": 1})
    result = await runner.resume(agent, "s", results={"c0": ToolError("the user closed the dialog")})
    row = next(m for m in result.messages if m.role == "tool")
    assert decode_tool_result(row) == {"error": "the user closed the dialog"} and result.output == "I will guess."


def test_a_client_tool_cannot_also_need_approval_or_time_out() -> None:
    with pytest.raises(ConfigError, match="client"):
        tool(client=True, needs_approval=True)(ask_user.fn)
