"""Token budgets hold during a model call: each call is capped at what is left of ``Limits.output_tokens`` /
``total_tokens`` (``ModelRequest.max_output_tokens``), the adapters send the cap in the provider's own field, and a
reply the provider cut at the budget's cap ends the run ``token_limit`` (its calls never run). The adapters are run
against the local server that speaks the real wire formats; the runs log to SQLite on disk."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("openai")
pytest.importorskip("anthropic")

from provider_server import Answer, ProviderServer, anthropic_message, chat_completion
from stopwise import (
    Agent,
    ConfigError,
    FunctionModel,
    Limits,
    Message,
    Reply,
    Runner,
    SQLiteStore,
    StopReason,
    ToolCall,
    Usage,
    tool,
)
from stopwise.cli import main
from stopwise.events import RunFinished
from stopwise.models import AnthropicModel, ModelRequest, OpenAIModel
from stopwise.stop.decision import Phase, StepSignals, resolve
from stopwise.stop.limits import LimitHit, LimitKind, OutputCap, Spent, cut_at_cap, output_cap

ran: list[dict[str, Any]] = []


@tool
def read_file(path: str) -> str:
    """Read a file."""
    ran.append({"path": path})
    return f"contents of {path}"


@pytest.fixture
def store(tmp_path: Path) -> SQLiteStore:
    ran.clear()
    return SQLiteStore(tmp_path / "log.db")


def _request(cap: int | None) -> ModelRequest:
    return ModelRequest(
        messages=(Message.system("Be brief."), Message.user("Hi")), tools=(), step=1, max_output_tokens=cap
    )


# --- the wire: OpenAI ---------------------------------------------------------------------------------------


def completion(
    content: str | None, *, finish: str = "stop", calls: list[dict[str, Any]] | None = None, output: int = 5
) -> dict[str, Any]:
    body = chat_completion(content, finish=finish, model="gpt-test")
    if calls:
        body["choices"][0]["message"]["tool_calls"] = calls
    body["usage"] = {"prompt_tokens": 11, "completion_tokens": output, "total_tokens": 11 + output}
    return body


def chunks(text: str, *, finish: str = "stop", output: int = 5) -> list[tuple[str | None, Any]]:
    head = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-test"}
    usage = {"prompt_tokens": 11, "completion_tokens": output, "total_tokens": 11 + output}
    return [
        (None, {**head, "choices": [{"index": 0, "delta": {"role": "assistant", "content": text}}]}),
        (None, {**head, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}),
        (None, {**head, "choices": [], "usage": usage}),
        (None, "[DONE]"),
    ]


def _openai(server: ProviderServer, **options: Any) -> OpenAIModel:
    return OpenAIModel("gpt-test", base_url=server.url + "/v1", api_key="sk-test", **options)


def _openai_proper(server: ProviderServer, **options: Any) -> OpenAIModel:
    """An adapter that believes it talks to OpenAI itself (no base_url of its own), through a client pointed at
    the local server."""
    import openai

    client = openai.AsyncOpenAI(api_key="sk-test", base_url=server.url + "/v1", max_retries=0)
    return OpenAIModel("gpt-test", client=client, **options)


async def test_openai_sends_the_cap_as_max_completion_tokens_on_generate_and_stream(server: ProviderServer) -> None:
    server.answer(Answer(body=completion("Hi")), Answer(events=chunks("Hi")))
    model = _openai_proper(server)
    await model.generate(_request(40))
    _ = [item async for item in model.stream(_request(40))]
    bodies = [r.body for r in server.requests]
    assert [b.get("max_completion_tokens") for b in bodies] == [40, 40]
    assert all("max_tokens" not in b for b in bodies)
    assert bodies[1]["stream"] is True


async def test_an_openai_compatible_server_gets_the_cap_as_max_tokens_on_generate_and_stream(
    server: ProviderServer,
) -> None:
    server.answer(Answer(body=completion("Hi")), Answer(events=chunks("Hi")))
    model = _openai(server)
    await model.generate(_request(40))
    _ = [item async for item in model.stream(_request(40))]
    assert [r.body.get("max_tokens") for r in server.requests] == [40, 40]
    assert all("max_completion_tokens" not in r.body for r in server.requests)


@pytest.mark.parametrize(("own", "sent"), [(25, 25), (400, 40)])
async def test_openai_sends_the_least_of_its_own_max_and_the_cap_in_the_field_its_settings_use(
    server: ProviderServer, own: int, sent: int
) -> None:
    server.answer(Answer(body=completion("Hi")), Answer(body=completion("Hi")))
    await _openai(server, settings={"max_completion_tokens": own}).generate(_request(40))
    await _openai_proper(server, settings={"max_tokens": own}).generate(_request(40))
    first, second = (r.body for r in server.requests)
    assert first["max_completion_tokens"] == sent and "max_tokens" not in first
    assert second["max_tokens"] == sent and "max_completion_tokens" not in second


async def test_openai_request_without_a_cap_is_unchanged(server: ProviderServer) -> None:
    server.answer(Answer(body=completion("Hi")), Answer(body=completion("Hi")))
    await _openai(server).generate(_request(None))
    await _openai(server, settings={"max_completion_tokens": 77}).generate(_request(None))
    first, second = (r.body for r in server.requests)
    assert "max_tokens" not in first and "max_completion_tokens" not in first
    assert second["max_completion_tokens"] == 77 and "max_tokens" not in second


async def test_an_openai_reply_cut_at_length_is_max_tokens_even_with_a_tool_call(server: ProviderServer) -> None:
    """Before, a reply with calls read ``tool_use`` whatever its finish: the loop could not tell that its last
    call's arguments were cut off."""
    call = {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "/etc/pa'}}
    server.answer(Answer(body=completion(None, finish="length", calls=[call])))
    reply = await _openai(server).generate(_request(40))
    assert reply.stop_reason is StopReason.MAX_TOKENS
    assert reply.tool_calls[0].args == '{"path": "/etc/pa'  # unfinished JSON: kept raw, for the loop to refuse


# --- the wire: Anthropic ------------------------------------------------------------------------------------


message = anthropic_message


def events(text: str, *, stop: str = "end_turn", output: int = 6) -> list[tuple[str | None, Any]]:
    start = message(stop="end_turn")
    start["stop_reason"] = None
    start["content"] = []
    block = {"type": "text", "text": ""}
    delta = {"type": "text_delta", "text": text}
    return [
        ("message_start", {"type": "message_start", "message": start}),
        ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": block}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": output},
            },
        ),
        ("message_stop", {"type": "message_stop"}),
    ]


def _anthropic(server: ProviderServer, **options: Any) -> AnthropicModel:
    return AnthropicModel("claude-test", base_url=server.url, api_key="sk-ant-test", **options)


async def test_anthropic_sends_the_least_of_max_tokens_and_the_cap_on_generate_and_stream(
    server: ProviderServer,
) -> None:
    server.answer(*[Answer(body=message({"type": "text", "text": "Hi"}))] * 2, *[Answer(events=events("Hi"))] * 2)
    model = _anthropic(server, max_tokens=256)
    await model.generate(_request(40))
    await model.generate(_request(1000))
    _ = [item async for item in model.stream(_request(40))]
    _ = [item async for item in model.stream(_request(None))]
    assert [r.body["max_tokens"] for r in server.requests] == [40, 256, 40, 256]
    assert [r.body.get("stream", False) for r in server.requests] == [False, False, True, True]


async def test_anthropic_caps_a_max_tokens_given_in_its_settings(server: ProviderServer) -> None:
    server.answer(Answer(body=message({"type": "text", "text": "Hi"})))
    await _anthropic(server, settings={"max_tokens": 500}).generate(_request(40))
    assert server.requests[0].body["max_tokens"] == 40


def test_a_cap_below_one_is_a_config_error_naming_the_field() -> None:
    for bad in (0, -5, 2.5, True):
        with pytest.raises(ConfigError, match="max_output_tokens"):
            _request(bad)  # type: ignore[arg-type]


# --- the cap the loop sets ----------------------------------------------------------------------------------


async def test_the_cap_is_the_least_of_what_is_left_of_the_output_and_total_budgets(store: SQLiteStore) -> None:
    seen: list[int | None] = []
    usages = iter([Usage(400, 30), Usage(450, 10), Usage(80, 5)])

    def model(request: ModelRequest) -> Reply:
        seen.append(request.max_output_tokens)
        if len(seen) == 4:
            return Reply("done", usage=Usage(5, 5))
        return Reply(tool_calls=[ToolCall("read_file", {"path": f"f{len(seen)}"})], usage=next(usages))

    agent = Agent("a", "", FunctionModel(model), tools=[read_file], limits=Limits(output_tokens=100, total_tokens=1000))
    result = await Runner(store).run(agent, "go")
    assert result.completion_reason == "final_answer"
    # step 1: 100 output left, 1000 total; step 2: 70 and 570; step 3: 60 and 110; step 4: 55 and 25 (total sets it)
    assert seen == [100, 70, 60, 25]


async def test_no_cap_without_an_output_or_total_token_budget(store: SQLiteStore) -> None:
    seen: list[int | None] = []

    def model(request: ModelRequest) -> Reply:
        seen.append(request.max_output_tokens)
        return Reply("done", usage=Usage(5, 5))

    for limits in (None, Limits(input_tokens=100, tool_calls=3, run_seconds=60)):
        await Runner(store).run(Agent("a", "", FunctionModel(model), limits=limits), "go")
    assert seen == [None, None]


def test_the_cap_is_what_is_left_of_the_budget_and_never_below_one() -> None:
    limits = Limits(output_tokens=100)
    assert output_cap(limits, Spent(usage=Usage(0, 60))) == OutputCap(40, LimitKind.OUTPUT_TOKENS)
    assert output_cap(limits, Spent(usage=Usage(0, 100))) == OutputCap(1, LimitKind.OUTPUT_TOKENS)
    assert output_cap(limits, Spent(usage=Usage(0, 130))) == OutputCap(1, LimitKind.OUTPUT_TOKENS)
    assert output_cap(Limits(output_tokens=50, total_tokens=50), Spent()) == OutputCap(50, LimitKind.OUTPUT_TOKENS)
    assert output_cap(Limits(input_tokens=10), Spent()) is None and output_cap(None, Spent()) is None


@pytest.mark.parametrize(("count_sub_agents", "second_cap"), [(True, 50), (False, 90)])
async def test_the_cap_counts_a_sub_agents_spending_as_the_budget_does_and_leaves_the_sub_agent_uncapped(
    store: SQLiteStore, count_sub_agents: bool, second_cap: int
) -> None:
    sub_caps: list[int | None] = []

    def sub_model(request: ModelRequest) -> Reply:
        sub_caps.append(request.max_output_tokens)
        return Reply("found it", usage=Usage(10, 40))

    caps: list[int | None] = []

    def lead_model(request: ModelRequest) -> Reply:
        caps.append(request.max_output_tokens)
        if len(caps) == 1:
            return Reply(tool_calls=[ToolCall("researcher", {"input": "look"})], usage=Usage(5, 10))
        return Reply("done", usage=Usage(5, 1))

    researcher = Agent("researcher", "", FunctionModel(sub_model))
    limits = Limits(output_tokens=100, count_sub_agents=count_sub_agents)
    lead = Agent("lead", "", FunctionModel(lead_model), tools=[researcher.as_tool()], limits=limits)
    result = await Runner(store).run(lead, "go", session_id="s")
    assert result.ok and caps == [100, second_cap]
    assert sub_caps == [None]  # its own Limits (none here) cap a sub-agent, not what is left of the parent's


# --- a reply cut at the budget ------------------------------------------------------------------------------


def test_a_cut_below_the_cap_or_without_usage_is_not_the_budgets() -> None:
    limits, cap = Limits(output_tokens=100), OutputCap(100, LimitKind.OUTPUT_TOKENS)
    at_cap = Spent(usage=Usage(20, 100))
    cut = Reply("x", stop_reason=StopReason.MAX_TOKENS, usage=Usage(20, 100))
    assert cut_at_cap(limits, cap, cut, at_cap) == LimitHit(LimitKind.OUTPUT_TOKENS, 100, 100)
    short = Reply("x", stop_reason=StopReason.MAX_TOKENS, usage=Usage(20, 64))
    assert cut_at_cap(limits, cap, short, Spent(usage=Usage(20, 64))) is None
    assert cut_at_cap(limits, cap, Reply("x", stop_reason=StopReason.MAX_TOKENS), Spent()) is None
    assert cut_at_cap(limits, cap, Reply("x", usage=Usage(20, 100)), at_cap) is None  # ended by itself


def test_the_resolver_gives_the_budgets_reason_for_a_cut_reply_and_a_forced_call_past_it() -> None:
    hit = LimitHit(LimitKind.OUTPUT_TOKENS, 100, 100)
    cut = StepSignals(stop_reason=StopReason.MAX_TOKENS, limit_hit=hit)
    assert resolve(cut).reason == "token_limit"
    assert resolve(StepSignals(stop_reason=StopReason.MAX_TOKENS)).reason == "max_tokens"
    forced = StepSignals(
        phase=Phase.FORCED_OUTPUT, wants_output=True, output_error="not JSON", completion_attempts_left=2
    )
    assert resolve(forced).action == "force_output"
    decision = resolve(replace(forced, limit_hit=hit))
    assert decision.action == "fail" and decision.reason == "token_limit"


async def test_a_text_reply_cut_at_the_output_budget_ends_token_limit_not_max_tokens(
    server: ProviderServer, store: SQLiteStore
) -> None:
    server.answer(Answer(body=completion("a long ramble that was cut", finish="length", output=50)))
    agent = Agent("a", "", _openai(server), limits=Limits(output_tokens=50))
    result = await Runner(store).run(agent, "go")
    assert server.requests[0].body["max_tokens"] == 50
    assert result.status == "failed" and result.completion_reason == "token_limit"
    assert result.error is not None and result.error.code == "token_limit"
    assert result.error.details == {"limit": "output_tokens", "allowed": 50, "used": 50}
    assert result.usage.output_tokens == 50


async def test_a_cut_at_the_adapters_own_max_with_budget_left_still_fails_max_tokens(
    server: ProviderServer, store: SQLiteStore
) -> None:
    server.answer(Answer(events=events("a ramble", stop="max_tokens", output=64)))
    agent = Agent("a", "", _anthropic(server, max_tokens=64), limits=Limits(output_tokens=10_000))
    finished = [e async for e in Runner(store).stream(agent, "go") if isinstance(e, RunFinished)]
    result = finished[0].result
    assert server.requests[0].body["max_tokens"] == 64
    assert result.completion_reason == "max_tokens" and result.error is not None
    assert result.error.code == "max_tokens"


async def test_a_tool_call_cut_at_the_budget_never_runs_and_a_retry_with_a_fresh_budget_continues(
    server: ProviderServer, store: SQLiteStore, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "/etc/pa'}}
    server.answer(
        Answer(body=completion("Reading.", finish="length", calls=[call], output=30)),
        Answer(body=completion("The file could not be read.", output=8)),
    )
    agent = Agent("a", "", _openai(server), tools=[read_file], limits=Limits(output_tokens=30))
    runner = Runner(store)
    first = await runner.run(agent, "read the passwords", session_id="s")
    assert server.requests[0].body["max_tokens"] == 30
    # The budget is reached, not passed: the cut at its cap is what ends the run.
    assert first.status == "failed" and first.completion_reason == "token_limit"
    assert first.error is not None and first.error.details == {"limit": "output_tokens", "allowed": 30, "used": 30}
    assert ran == []
    snapshot = await store.load_session("s")
    assert snapshot is not None
    rows = snapshot.messages()
    assert [m.role for m in rows] == ["user", "assistant", "tool"]
    assert rows[1].tool_calls[0].args == '{"path": "/etc/pa'
    assert rows[2].tool_call_id == rows[1].tool_calls[0].id and "cut off at the token budget's cap" in rows[2].content
    assert await asyncio.to_thread(main, ["show", "s", "--db", str(tmp_path / "log.db")]) == 0
    assert "completion reason: token_limit" in capsys.readouterr().out

    second = await runner.retry(agent, "s")
    assert second.completion_reason == "final_answer" and second.output == "The file could not be read."
    assert ran == []
    sent = server.requests[1].body
    assert sent["max_tokens"] == 30  # a fresh budget
    assert [m["role"] for m in sent["messages"]] == ["user", "assistant", "tool"]
    assert sent["messages"][1]["tool_calls"][0]["function"]["arguments"] == '{"path": "/etc/pa'
    assert sent["messages"][2]["tool_call_id"] == "c1"
    assert "cut off at the token budget's cap" in sent["messages"][2]["content"]  # what the model reads on retry


def _cut_call(
    args: str, *, cap: int, stop: StopReason = StopReason.MAX_TOKENS, output: int | None = None
) -> FunctionModel:
    """A model whose first reply asks for ``read_file`` with the raw ``args``, stopping for ``stop`` after
    ``output`` tokens (all of ``cap`` by default); its next reply is a final answer."""

    def model(request: ModelRequest) -> Reply:
        if request.step > 1:
            return Reply("Done.", usage=Usage(10, 1))
        assert request.max_output_tokens == cap
        spent = Usage(10, cap if output is None else output)
        return Reply(tool_calls=[ToolCall("read_file", args, id="c1")], stop_reason=stop, usage=spent)

    return FunctionModel(model)


@pytest.mark.parametrize(
    ("limits", "cap"),
    [(Limits(output_tokens=30), 30), (Limits(total_tokens=100), 100)],
    ids=["output_tokens", "total_tokens"],
)
async def test_a_call_cut_at_the_budgets_cap_is_answered_as_cut_short_not_as_bad_json(
    store: SQLiteStore, limits: Limits, cap: int
) -> None:
    agent = Agent("a", "", _cut_call('{"path": "/etc/pa', cap=cap), tools=[read_file], limits=limits)
    result = await Runner(store).run(agent, "go", session_id="s")
    assert result.completion_reason == "token_limit" and ran == []
    snapshot = await store.load_session("s")
    assert snapshot is not None
    row = snapshot.messages()[-1]
    assert row.role == "tool" and row.tool_call_id == "c1"
    assert "Not run: the reply was cut off at the token budget's cap" in row.content
    assert "not valid JSON" not in row.content


@pytest.mark.parametrize(
    ("stop", "output"), [(StopReason.TOOL_USE, 5), (StopReason.MAX_TOKENS, 20)], ids=["finished", "cut_below_cap"]
)
async def test_bad_json_in_a_reply_not_cut_at_the_budgets_cap_still_reads_not_valid_json(
    store: SQLiteStore, stop: StopReason, output: int
) -> None:
    model = _cut_call('{"path": "/etc/pa', cap=30, stop=stop, output=output)
    agent = Agent("a", "", model, tools=[read_file], limits=Limits(output_tokens=30))
    await Runner(store).run(agent, "go", session_id="s")
    snapshot = await store.load_session("s")
    assert snapshot is not None
    row = snapshot.messages()[2]
    assert row.role == "tool" and row.tool_call_id == "c1"
    assert "Arguments for tool 'read_file' are not valid JSON" in row.content


async def test_a_whole_tool_call_in_a_reply_cut_at_the_budget_does_not_run_either(store: SQLiteStore) -> None:
    """Anthropic returns a cut tool_use block with whatever input it had (an object, possibly partial): the
    arguments may parse, and still are not what the model meant."""

    def model(request: ModelRequest) -> Reply:
        assert request.max_output_tokens == 20
        return Reply(
            tool_calls=[ToolCall("read_file", {"path": "/etc"})],
            stop_reason=StopReason.MAX_TOKENS,
            usage=Usage(10, 20),
        )

    agent = Agent("a", "", FunctionModel(model), tools=[read_file], limits=Limits(output_tokens=20))
    result = await Runner(store).run(agent, "go", session_id="s")
    assert result.completion_reason == "token_limit" and ran == []
    snapshot = await store.load_session("s")
    assert snapshot is not None and snapshot.messages()[-1].role == "tool"
    assert "Not run: the reply was cut off at the token budget's cap" in snapshot.messages()[-1].content


async def test_a_model_that_ignores_the_cap_is_still_held_to_the_budget_after_the_call(store: SQLiteStore) -> None:
    def model(request: ModelRequest) -> Reply:
        return Reply(tool_calls=[ToolCall("read_file", {"path": "/a"})], usage=Usage(10, 9000))

    agent = Agent("a", "", FunctionModel(model), tools=[read_file], limits=Limits(output_tokens=1000))
    result = await Runner(store).run(agent, "go")
    assert result.completion_reason == "token_limit" and ran == []
    assert result.error is not None and result.error.details["used"] == 9000
