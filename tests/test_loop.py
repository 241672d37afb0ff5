"""The run loop end to end, on every store: outcomes, cut-offs, stop_when, bad input, structured output."""

from __future__ import annotations

import asyncio
import json

import pytest
from pydantic import BaseModel

from stopwise import (
    Agent,
    FunctionModel,
    Reply,
    Runner,
    RunStatus,
    ScriptedModel,
    StepView,
    StopReason,
    Store,
    ToolCall,
    Usage,
    decode_tool_result,
    has_tool_call,
    step_count_is,
    text_contains,
    tool,
)
from stopwise.events import (
    ModelReplied,
    RunFinished,
    StepCommitted,
    StepStarted,
    TextDelta,
    ToolCalled,
    ToolReturned,
)
from stopwise.models import ModelRequest


@tool
async def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@tool
def echo(text: str) -> str:
    """Return the text as given."""
    return text


def call(name: str = "add", **args: object) -> Reply:
    return Reply(tool_calls=[ToolCall(name, args or {"a": 1, "b": 2})])


def agent(model: object, **kw: object) -> Agent:
    return Agent(name="t", instructions="You add.", model=model, tools=[add, echo], **kw)  # type: ignore[arg-type]


async def test_final_answer_completes_with_text_output_and_log(store: Store) -> None:
    model = ScriptedModel([call(), "3"])
    result = await Runner(store).run(agent(model), "1+2?")
    assert result.status == "completed" and result.status is RunStatus.COMPLETED
    assert result.completion_reason == "final_answer"
    assert result.error is None
    assert result.output == "3" and result.text == "3"
    assert result.steps == 2
    assert [m.role for m in result.messages] == ["user", "assistant", "tool", "assistant"]
    assert decode_tool_result(result.messages[2]) == 3


async def test_model_sees_system_instructions_log_and_tool_specs() -> None:
    model = ScriptedModel([call(), "done"])
    await Runner().run(agent(model), "go")
    first, second = model.requests
    assert first.messages[0].role == "system" and first.messages[0].content == "You add."
    assert [t.name for t in first.tools] == ["add", "echo"]
    assert first.step == 1 and second.step == 2
    assert [m.role for m in second.messages] == ["system", "user", "assistant", "tool"]


async def test_cut_off_fails_typed_and_keeps_the_transcript(store: Store) -> None:
    model = FunctionModel(lambda req: call())
    result = await Runner(store).run(agent(model, max_steps=3), "loop")
    assert result.status == "failed"
    assert result.completion_reason == "max_steps"
    assert result.error is not None
    assert result.error.code == "max_steps_exhausted"
    assert result.error.message == "Max steps (3) reached"
    assert result.error.category == "framework" and result.error.retryable is False
    assert result.steps == 3
    assert len(result.messages) == 1 + 3 * 2
    record = await store.get_run(result.run_id)
    assert record is not None and record.status == "failed" and record.completion_reason == "max_steps"
    assert record.error == result.error


async def test_final_answer_on_the_last_allowed_step_completes(store: Store) -> None:
    model = ScriptedModel([call(), call(), "done"])
    result = await Runner(store).run(agent(model, max_steps=3), "go")
    assert result.status == "completed" and result.completion_reason == "final_answer" and result.steps == 3


async def test_stop_when_fires_on_the_cap_step_before_max_steps(store: Store) -> None:
    model = ScriptedModel([call(), call(), call("echo", text="publish")])
    result = await Runner(store).run(agent(model, max_steps=3, stop_when=has_tool_call("echo")), "go")
    assert result.status == "completed"
    assert result.completion_reason == "stop_when"
    assert "echo" in result.detail


async def test_stop_when_runs_after_the_steps_tools() -> None:
    seen: list[StepView] = []

    def predicate(step: StepView) -> bool:
        seen.append(step)
        return len(step.tool_results) == 1 and decode_tool_result(step.tool_results[0]) == 3

    result = await Runner().run(agent(ScriptedModel([call()]), stop_when=predicate), "go")
    assert result.completion_reason == "stop_when"
    assert seen[0].number == 1 and seen[0].messages[-1].role == "tool"


async def test_stop_when_list_any_true_stops() -> None:
    model = ScriptedModel([call(), call()])
    result = await Runner().run(agent(model, stop_when=[lambda s: False, step_count_is(2)]), "go")
    assert result.completion_reason == "stop_when" and result.steps == 2
    assert result.detail == "step count reached 2"


async def test_stop_when_composed_with_and_needs_both() -> None:
    model = ScriptedModel(
        [Reply("thinking", [ToolCall("add", {"a": 1, "b": 1})]), Reply("FINAL", [ToolCall("add", {"a": 1, "b": 1})])]
    )
    cond = text_contains("FINAL") & has_tool_call("add")
    result = await Runner().run(agent(model, stop_when=cond), "go")
    assert result.completion_reason == "stop_when" and result.steps == 2


async def test_stop_when_that_raises_fails_once_and_is_not_retried(store: Store) -> None:
    calls = 0

    def broken(step: StepView) -> bool:
        nonlocal calls
        calls += 1
        raise RuntimeError("predicate bug")

    model = ScriptedModel([call(), call()])
    result = await Runner(store).run(agent(model, stop_when=broken), "go")
    assert calls == 1
    assert result.status == "failed" and result.completion_reason == "error"
    assert result.error is not None and result.error.code == "stop_when_raised"
    assert result.error.retryable is False and "predicate bug" in result.error.message
    assert model.remaining == 1  # no further model call


async def test_model_that_raises_ends_failed_with_model_error_steps_intact(store: Store) -> None:
    def fn(req: ModelRequest) -> Reply:
        if req.step == 3:
            raise ConnectionError("provider down")
        return call()

    runner = Runner(store)
    result = await runner.run(agent(FunctionModel(fn)), "go")
    assert result.status == "failed" and result.completion_reason == "error"
    assert result.error is not None and result.error.code == "model_error" and result.error.category == "model"
    assert "provider down" in result.error.message
    assert result.steps == 2
    snapshot = await store.load_session(result.session_id)
    assert snapshot is not None and len(snapshot.messages()) == 1 + 2 * 2


async def test_scripted_model_running_out_fails_the_run_naming_the_step() -> None:
    result = await Runner().run(agent(ScriptedModel([call()])), "go")
    assert result.error is not None and result.error.code == "model_error"
    assert "step 2" in result.error.message


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        ("{not json", "not valid JSON"),
        ('["a", 1]', "must be a JSON object"),
        ({"a": "x", "b": 2}, "Invalid arguments"),
        ({"a": 1}, "b: Field required"),
    ],
)
async def test_bad_arguments_become_an_error_result_and_the_run_goes_on(args: object, fragment: str) -> None:
    model = ScriptedModel([Reply(tool_calls=[ToolCall("add", args)]), "recovered"])  # type: ignore[arg-type]
    result = await Runner().run(agent(model), "go")
    assert result.status == "completed" and result.output == "recovered"
    row = result.messages[2]
    assert row.metadata.get("tool_error") is True and fragment in decode_tool_result(row)["error"]
    assert model.requests[1].messages[-1] == row  # the model reads it


async def test_unknown_tool_becomes_an_error_result_naming_the_tools() -> None:
    model = ScriptedModel([Reply(tool_calls=[ToolCall("nope", {})]), "ok"])
    result = await Runner().run(agent(model), "go")
    error = decode_tool_result(result.messages[2])["error"]
    assert "Unknown tool 'nope'" in error and "add" in error and result.status == "completed"


async def test_parallel_tool_calls_run_concurrently_and_keep_call_order() -> None:
    started: list[str] = []
    both = asyncio.Event()

    @tool
    async def wait_for_peer(name: str) -> str:
        """Wait until both calls are running."""
        started.append(name)
        if len(started) == 2:
            both.set()
        await both.wait()
        return name

    model = ScriptedModel(
        [
            Reply(
                tool_calls=[ToolCall("wait_for_peer", {"name": "first"}), ToolCall("wait_for_peer", {"name": "second"})]
            ),
            "ok",
        ]
    )
    a = Agent("p", "", model, tools=[wait_for_peer])
    result = await asyncio.wait_for(Runner().run(a, "go"), 5)
    assert [m.content for m in result.messages if m.role == "tool"] == ["first", "second"]


async def test_string_tool_result_reaches_the_model_verbatim(store: Store) -> None:
    model = ScriptedModel([call("echo", text='{"a":1}'), "ok"])
    result = await Runner(store).run(agent(model), "go")
    row = result.messages[2]
    assert row.content == '{"a":1}' and row.metadata["content_encoding"] == "text"
    assert decode_tool_result(row) == '{"a":1}'
    snapshot = await store.load_session(result.session_id)
    assert snapshot is not None and snapshot.messages()[2] == row


@pytest.mark.parametrize(
    ("stop_reason", "reason"),
    [("max_tokens", "max_tokens"), ("content_filter", "content_filter"), ("refusal", "refusal"), ("error", "error")],
)
async def test_reply_cut_or_refused_fails_with_that_reason(stop_reason: str, reason: str) -> None:
    model = ScriptedModel([Reply(text="partial", stop_reason=StopReason(stop_reason))])
    result = await Runner().run(agent(model), "go")
    assert result.status == "failed" and result.completion_reason == reason


async def test_usage_adds_up_across_steps() -> None:
    model = ScriptedModel(
        [Reply(tool_calls=[ToolCall("add", {"a": 1, "b": 1})], usage=Usage(10, 2)), Reply("ok", usage=Usage(20, 3))]
    )
    result = await Runner().run(agent(model), "go")
    assert result.usage == Usage(30, 5, 2)


async def test_state_is_passed_in_written_by_tools_and_returned(store: Store) -> None:
    from stopwise import RunContext

    @tool
    def count(ctx: RunContext) -> int:
        """Count calls in state."""
        ctx.state["calls"] = ctx.state.get("calls", 0) + 1
        return int(ctx.state["calls"])

    a = Agent("s", "", ScriptedModel([Reply(tool_calls=[ToolCall("count", {})])] * 2 + ["done"]), tools=[count])
    result = await Runner(store).run(a, "go", state={"calls": 10, "user": "ann"})
    assert dict(result.state) == {"calls": 12, "user": "ann"}
    snapshot = await store.load_session(result.session_id)
    assert snapshot is not None and snapshot.state == {"calls": 12, "user": "ann"}


async def test_a_second_run_on_a_session_continues_the_conversation(store: Store) -> None:
    runner = Runner(store)
    model = ScriptedModel(["first", "second"])
    first = await runner.run(agent(model), "hello", session_id="s1")
    second = await runner.run(agent(model), "again", session_id="s1")
    assert first.run_id != second.run_id
    assert [m.content for m in second.messages] == ["hello", "first", "again", "second"]
    assert [r.run_id for r in await store.list_runs("s1")] == [first.run_id, second.run_id]


async def test_stream_yields_typed_events_in_order() -> None:
    model = ScriptedModel([call(), "3"])
    events = [e async for e in Runner().stream(agent(model), "go")]
    kinds = [type(e) for e in events]
    assert kinds == [
        StepStarted,
        ModelReplied,
        ToolCalled,
        ToolReturned,
        StepCommitted,
        StepStarted,
        TextDelta,
        ModelReplied,
        StepCommitted,
        RunFinished,
    ]
    finished = events[-1]
    assert isinstance(finished, RunFinished) and finished.result.output == "3"


async def test_leaving_a_stream_early_records_the_run_cancelled_and_retry_continues(store: Store) -> None:
    runner = Runner(store)
    model = ScriptedModel([call(), call(), "done"])
    a = agent(model)
    stream = runner.stream(a, "go", session_id="c")
    async for event in stream:
        if isinstance(event, StepCommitted):
            break
    await stream.aclose()
    runs = await store.list_runs("c")
    assert runs[-1].status == "cancelled" and runs[-1].completion_reason == "cancelled"
    result = await runner.retry(a, "c")
    assert result.status == "completed" and result.steps == 3


async def test_cancelling_the_task_records_the_run_cancelled(store: Store) -> None:
    gate = asyncio.Event()
    entered = asyncio.Event()

    @tool
    async def block() -> str:
        """Never returns until released."""
        entered.set()
        await gate.wait()
        return "released"

    runner = Runner(store)
    a = Agent("c", "", ScriptedModel([Reply(tool_calls=[ToolCall("block", {})]), "done"]), tools=[block])
    task = asyncio.create_task(runner.run(a, "go", session_id="k"))
    await entered.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert (await store.list_runs("k"))[-1].status == "cancelled"


class Answer(BaseModel):
    total: int
    note: str = ""


async def test_output_type_validates_the_final_answer(store: Store) -> None:
    model = ScriptedModel([call(), '{"total": 3}'])
    result = await Runner(store).run(agent(model, output_type=Answer), "go")
    assert result.status == "completed" and result.completion_reason == "output"
    assert result.output == Answer(total=3)
    record = await store.get_run(result.run_id)
    assert record is not None and record.output == {"total": 3, "note": ""}
    assert model.requests[0].output_schema is not None and "total" in json.dumps(model.requests[0].output_schema)


async def test_output_type_at_the_cap_enters_forced_completion_with_tools_off() -> None:
    model = ScriptedModel([call(), call(), '```json\n{"total": 7}\n```'])
    result = await Runner().run(agent(model, output_type=Answer, max_steps=2), "go")
    assert result.status == "completed" and result.completion_reason == "output"
    assert result.output == Answer(total=7)
    forced = model.requests[2]
    assert forced.forced_output is True and forced.tools == ()
    nudge = forced.messages[-1]
    assert nudge.role == "user" and nudge.content.startswith("Automated feedback from the application")
    assert nudge.metadata["hidden"] is True


async def test_forced_completion_spent_fails_output_invalid() -> None:
    model = FunctionModel(lambda req: Reply("not json") if req.forced_output else call())
    result = await Runner().run(agent(model, output_type=Answer, max_steps=2, max_completion_retries=2), "go")
    assert result.status == "failed" and result.error is not None
    assert result.error.code == "output_invalid"
    assert result.steps == 2 + 2


async def test_invalid_final_output_enters_forced_completion_before_the_cap() -> None:
    model = ScriptedModel(['{"total": "many"}', '{"total": 4}'])
    result = await Runner().run(agent(model, output_type=Answer, max_steps=10), "go")
    assert result.output == Answer(total=4) and result.steps == 2
    assert "total" in model.requests[1].messages[-1].content


async def test_tool_calls_during_forced_completion_get_error_results() -> None:
    model = ScriptedModel([call(), call(), '{"total": 1}'])
    result = await Runner().run(agent(model, output_type=Answer, max_steps=1, max_completion_retries=2), "go")
    assert result.status == "completed" and result.steps == 3
    forced_rows = [m for m in result.messages if m.role == "tool"][1]
    assert "disabled" in decode_tool_result(forced_rows)["error"]


async def test_max_completion_retries_zero_fails_at_the_cap() -> None:
    model = FunctionModel(lambda req: call())
    result = await Runner().run(agent(model, output_type=Answer, max_steps=2, max_completion_retries=0), "go")
    assert result.error is not None and result.error.code == "output_invalid" and result.steps == 2


async def test_sub_agent_cut_off_reaches_the_parent_as_a_failed_tool_result(store: Store) -> None:
    child = Agent("researcher", "", FunctionModel(lambda req: call()), tools=[add], max_steps=2)
    parent_model = ScriptedModel([Reply(tool_calls=[ToolCall("researcher", {"input": "dig"})]), "gave up"])
    parent = Agent("lead", "", parent_model, tools=[child.as_tool()])
    result = await Runner(store).run(parent, "go")
    assert result.status == "completed"
    row = result.messages[2]
    assert json.loads(row.content) == {"error": "Max steps (2) reached"}
    assert row.metadata["tool_error"] is True
    assert parent_model.requests[1].messages[-1] == row


async def test_sub_agent_success_returns_its_output() -> None:
    child = Agent("helper", "", ScriptedModel(["child answer"]))
    parent_model = ScriptedModel([Reply(tool_calls=[ToolCall("helper", {"input": "q"})]), "ok"])
    result = await Runner().run(Agent("lead", "", parent_model, tools=[child.as_tool()]), "go")
    assert result.messages[2].content == "child answer"


def test_run_sync_runs_a_script() -> None:
    result = Runner().run_sync(agent(ScriptedModel(["hi"])), "go")
    assert result.ok and result.output == "hi"


async def test_run_sync_inside_a_loop_raises_a_clear_error() -> None:
    with pytest.raises(RuntimeError, match=r"await runner\.run"):
        Runner().run_sync(agent(ScriptedModel(["hi"])), "go")


async def test_a_provider_error_carries_status_and_request_id_into_the_error_detail(store: Store) -> None:
    from stopwise import ModelError

    def fn(req: ModelRequest) -> Reply:
        if req.step == 2:
            raise ModelError("rate limited", provider="acme", status=429, request_id="req_9", retryable=True)
        return call()

    result = await Runner(store).run(agent(FunctionModel(fn)), "go")
    assert result.error is not None and result.error.code == "model_error" and result.error.retryable
    assert result.error.details == {"provider": "acme", "status": 429, "request_id": "req_9"}
    record = await store.get_run(result.run_id)
    assert record is not None and record.error == result.error and result.steps == 1


async def test_stream_sends_text_deltas_before_the_reply_when_the_model_streams() -> None:
    from collections.abc import AsyncIterator

    class Streaming:
        async def generate(self, request: ModelRequest) -> Reply:
            return Reply("Hello world")

        async def stream(self, request: ModelRequest) -> AsyncIterator[str | Reply]:
            for piece in ("Hel", "lo ", "world"):
                yield piece
            yield Reply("Hello world")

    events = [e async for e in Runner().stream(agent(Streaming()), "hi")]
    deltas = [e.text for e in events if isinstance(e, TextDelta)]
    assert deltas == ["Hel", "lo ", "world"]
    kinds = [type(e).__name__ for e in events]
    assert kinds.index("ModelReplied") > max(i for i, k in enumerate(kinds) if k == "TextDelta")
    result = await Runner().run(agent(Streaming()), "hi")
    assert result.output == "Hello world"


async def test_a_stream_that_fails_mid_reply_ends_the_run_with_model_error() -> None:
    from collections.abc import AsyncIterator

    class Broken:
        async def generate(self, request: ModelRequest) -> Reply:
            return Reply("unused")

        async def stream(self, request: ModelRequest) -> AsyncIterator[str | Reply]:
            yield "partial"
            raise ConnectionError("stream cut")

    events = [e async for e in Runner().stream(agent(Broken()), "hi")]
    result = events[-1].result  # type: ignore[attr-defined]
    assert result.error is not None and result.error.code == "model_error" and "stream cut" in result.error.message
