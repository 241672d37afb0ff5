"""AnthropicModel against a real HTTP server on loopback that answers in the messages API wire format."""

from __future__ import annotations

import inspect
import json
import sys
from typing import Any

import pytest

pytest.importorskip("anthropic")

from provider_server import Answer, ProviderServer, anthropic_message
from stopwise import ConfigError, Message, ModelError, Reply, Role, StopReason, ToolCall
from stopwise.messages import automated_feedback, encode_tool_result, error_tool_result
from stopwise.models import AnthropicModel, ModelRequest, StreamingModel, ToolSpec

FAST_RETRY = {"retry-after-ms": "1"}


def _model(server: ProviderServer, **options: Any) -> AnthropicModel:
    return AnthropicModel("claude-test", base_url=server.url, api_key="sk-ant-test", max_tokens=256, **options)


def _request(
    *messages: Message, tools: tuple[ToolSpec, ...] = (), schema: dict[str, Any] | None = None
) -> ModelRequest:
    rows = messages or (Message.system("Be brief."), Message.user("Hi"))
    return ModelRequest(messages=rows, tools=tools, step=1, output_schema=schema)


def message(*content: dict[str, Any], stop: str | None = "end_turn") -> dict[str, Any]:
    return anthropic_message(*content, stop=stop, cache_read=4)


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def tool_use(use_id: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"type": "tool_use", "id": use_id, "name": name, "input": args}


def error(kind: str, text: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": kind, "message": text}}


WEATHER = ToolSpec("get_weather", "Current weather.", {"type": "object", "properties": {"city": {"type": "string"}}})


async def test_text_reply_with_usage_and_system_rows_as_the_system_parameter(server: ProviderServer) -> None:
    server.answer(Answer(body=message(text("Hello!"))))
    reply = await _model(server).generate(
        _request(Message.system("Be brief."), Message.system("Be kind."), Message.user("Hi"))
    )
    assert reply.text == "Hello!" and reply.stop_reason is StopReason.END_TURN and reply.logprobs is None
    assert reply.usage is not None and (reply.usage.input_tokens, reply.usage.output_tokens) == (24, 6)
    (got,) = server.requests
    assert got.path == "/v1/messages"
    assert got.body["model"] == "claude-test" and got.body["max_tokens"] == 256
    assert got.body["system"] == "Be brief.\n\nBe kind."
    assert got.body["messages"] == [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}]
    assert "tools" not in got.body


async def test_parallel_tool_use_blocks_become_tool_calls_in_order(server: ProviderServer) -> None:
    server.answer(
        Answer(
            body=message(
                text("Checking both."),
                tool_use("toolu_a", "get_weather", {"city": "Oslo"}),
                tool_use("toolu_b", "get_weather", {"city": "Rome"}),
                stop="tool_use",
            )
        )
    )
    reply = await _model(server).generate(_request(tools=(WEATHER,)))
    assert reply.tool_calls == (
        ToolCall("get_weather", {"city": "Oslo"}, id="toolu_a"),
        ToolCall("get_weather", {"city": "Rome"}, id="toolu_b"),
    )
    assert reply.text == "Checking both." and reply.stop_reason is StopReason.TOOL_USE
    assert server.requests[0].body["tools"] == [
        {"name": "get_weather", "description": "Current weather.", "input_schema": dict(WEATHER.parameters)}
    ]


async def test_tool_rows_become_tool_results_in_one_user_turn_with_same_role_turns_merged(
    server: ProviderServer,
) -> None:
    server.answer(Answer(body=message(text("Sunny."))))
    history = (
        Message.system("Be brief."),
        Message.user("Weather?"),
        Message.user("In Oslo and Rome."),
        Message(
            Role.ASSISTANT,
            "Checking.",
            (ToolCall("get_weather", {"city": "Oslo"}, id="t1"), ToolCall("get_weather", "{bad", id="t2")),
        ),
        encode_tool_result("sunny", tool_call_id="t1"),
        error_tool_result("arguments are not JSON", tool_call_id="t2"),
        automated_feedback("Answer now.", source="test"),
    )
    await _model(server).generate(_request(*history, tools=(WEATHER,)))
    turns = server.requests[0].body["messages"]
    assert [t["role"] for t in turns] == ["user", "assistant", "user"]
    assert turns[0]["content"] == [{"type": "text", "text": "Weather?"}, {"type": "text", "text": "In Oslo and Rome."}]
    assert turns[1]["content"] == [
        {"type": "text", "text": "Checking."},
        {"type": "tool_use", "id": "t1", "name": "get_weather", "input": {"city": "Oslo"}},
        {"type": "tool_use", "id": "t2", "name": "get_weather", "input": {}},
    ]
    results = turns[2]["content"]
    assert results[0] == {"type": "tool_result", "tool_use_id": "t1", "content": "sunny"}
    assert results[1]["tool_use_id"] == "t2" and results[1]["is_error"] is True
    assert json.loads(results[1]["content"]) == {"error": "arguments are not JSON"}
    assert results[2]["type"] == "text" and results[2]["text"].endswith("Answer now.")


async def test_tools_off_with_tool_blocks_in_history_declares_them_and_forbids_calls(server: ProviderServer) -> None:
    server.answer(Answer(body=message(text('{"city": "Oslo"}'))))
    history = (
        Message.user("Weather?"),
        Message(Role.ASSISTANT, "", (ToolCall("get_weather", {"city": "Oslo"}, id="t1"),)),
        encode_tool_result("sunny", tool_call_id="t1"),
    )
    schema = {"title": "Report", "type": "object", "properties": {"city": {"type": "string"}}}
    await _model(server).generate(_request(*history, schema=schema))
    body = server.requests[0].body
    assert [t["name"] for t in body["tools"]] == ["get_weather"]
    assert body["tool_choice"] == {"type": "none"}
    assert json.dumps(schema) in body["system"]


@pytest.mark.parametrize(
    ("stop", "expected"),
    [
        ("end_turn", StopReason.END_TURN),
        ("stop_sequence", StopReason.STOP_SEQUENCE),
        ("max_tokens", StopReason.MAX_TOKENS),
        ("refusal", StopReason.REFUSAL),
        ("pause_turn", StopReason.END_TURN),
    ],
)
async def test_stop_reasons_map(server: ProviderServer, stop: str, expected: StopReason) -> None:
    server.answer(Answer(body=message(text("..."), stop=stop)))
    assert (await _model(server).generate(_request())).stop_reason is expected


async def test_a_429_is_retried_after_retry_after_and_the_second_answer_is_used(server: ProviderServer) -> None:
    server.answer(
        Answer(429, error("rate_limit_error", "slow down"), {**FAST_RETRY, "retry-after": "0"}),
        Answer(body=message(text("after the wait"))),
    )
    assert (await _model(server).generate(_request())).text == "after the wait"
    assert len(server.requests) == 2


async def test_an_overload_that_persists_raises_model_error_with_status_and_request_id(server: ProviderServer) -> None:
    server.always = Answer(529, error("overloaded_error", "Overloaded"), {**FAST_RETRY, "request-id": "req_ant"})
    with pytest.raises(ModelError) as info:
        await _model(server, max_retries=1).generate(_request())
    e = info.value
    assert (e.provider, e.status, e.request_id, e.retryable) == ("anthropic", 529, "req_ant", True)
    assert "Overloaded" in str(e)
    assert len(server.requests) == 2


async def test_a_500_raises_model_error(server: ProviderServer) -> None:
    server.always = Answer(500, error("api_error", "Internal"), {**FAST_RETRY, "request-id": "req_500"})
    with pytest.raises(ModelError) as info:
        await _model(server, max_retries=0).generate(_request())
    assert (info.value.status, info.value.request_id) == (500, "req_500")


@pytest.mark.parametrize("body", [b"{not json", json.dumps({"type": "message"}).encode()])
async def test_a_malformed_response_raises_model_error(server: ProviderServer, body: bytes) -> None:
    server.answer(Answer(body=body))
    with pytest.raises(ModelError, match="malformed") as info:
        await _model(server).generate(_request())
    assert info.value.provider == "anthropic"


def _events(*blocks: tuple[str, Any], stop: str = "end_turn") -> list[tuple[str | None, Any]]:
    """The SSE events of a streamed message: each block is ("text", [deltas]) or ("tool", (id, name, [json]))."""
    start = message(stop=None)
    start["usage"] = {"input_tokens": 20, "output_tokens": 1}
    events: list[tuple[str | None, Any]] = [("message_start", {"type": "message_start", "message": start})]
    for index, (kind, value) in enumerate(blocks):
        if kind == "text":
            block: dict[str, Any] = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": t} for t in value]
        else:
            use_id, name, parts = value
            block = {"type": "tool_use", "id": use_id, "name": name, "input": {}}
            deltas = [{"type": "input_json_delta", "partial_json": p} for p in parts]
        events.append(("content_block_start", {"type": "content_block_start", "index": index, "content_block": block}))
        events.append(("ping", {"type": "ping"}))
        for d in deltas:
            events.append(("content_block_delta", {"type": "content_block_delta", "index": index, "delta": d}))
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    events.append(
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": 9},
            },
        )
    )
    events.append(("message_stop", {"type": "message_stop"}))
    return events


async def test_stream_yields_text_deltas_then_the_whole_reply(server: ProviderServer) -> None:
    server.answer(Answer(events=_events(("text", ["Hel", "lo!"]))))
    model = _model(server)
    assert isinstance(model, StreamingModel)
    items = [item async for item in model.stream(_request())]
    assert items[:2] == ["Hel", "lo!"] and len(items) == 3
    reply = items[2]
    assert isinstance(reply, Reply) and reply.text == "Hello!" and reply.stop_reason is StopReason.END_TURN
    assert reply.usage is not None and (reply.usage.input_tokens, reply.usage.output_tokens) == (20, 9)
    assert server.requests[0].body["stream"] is True


async def test_stream_assembles_tool_input_from_json_deltas(server: ProviderServer) -> None:
    events = _events(
        ("text", ["Let me check."]),
        ("tool", ("toolu_1", "get_weather", ['{"city":', ' "Oslo"}'])),
        ("tool", ("toolu_2", "get_weather", [])),
        stop="tool_use",
    )
    server.answer(Answer(events=events))
    items = [item async for item in _model(server).stream(_request(tools=(WEATHER,)))]
    assert items[0] == "Let me check."
    reply = items[-1]
    assert isinstance(reply, Reply) and reply.stop_reason is StopReason.TOOL_USE
    assert [(c.id, c.args) for c in reply.tool_calls] == [("toolu_1", {"city": "Oslo"}), ("toolu_2", {})]


async def test_stream_error_status_raises_model_error(server: ProviderServer) -> None:
    server.answer(Answer(400, error("invalid_request_error", "bad"), {"request-id": "req_s"}))
    with pytest.raises(ModelError) as info:
        async for _ in _model(server).stream(_request()):
            pass
    assert (info.value.status, info.value.request_id, info.value.retryable) == (400, "req_s", False)


def test_missing_anthropic_api_key_is_a_config_error_saying_what_to_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(ConfigError, match="ANTHROPIC_API_KEY") as info:
        AnthropicModel("claude-test")
    assert info.value.field == "model"


def test_missing_sdk_is_a_config_error_naming_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "anthropic", None)
    with pytest.raises(ConfigError, match=r"pip install 'stopwise\[anthropic\]'"):
        AnthropicModel("claude-test", api_key="k")


def test_settings_the_installed_sdk_does_not_take_are_a_config_error_when_the_model_is_defined() -> None:
    """The docs' old example, settings={"temperature": 0}, raised TypeError mid-run with anthropic 2.15 (its
    messages.create has no temperature), and the failed run was marked retryable."""
    import anthropic

    accepted = inspect.signature(anthropic.resources.messages.AsyncMessages.create).parameters
    bad = "temperature" if "temperature" not in accepted else "no_such_setting"
    with pytest.raises(ConfigError, match="settings") as info:
        AnthropicModel("claude-test", api_key="sk-ant-test", settings={bad: 0})
    assert repr(bad) in str(info.value) and anthropic.__version__ in str(info.value)
    model = AnthropicModel("claude-test", api_key="sk-ant-test", settings={"extra_body": {bad: 0}})
    assert model.request_params(_request())["extra_body"] == {bad: 0}


async def test_stream_takes_the_input_tokens_reported_in_message_delta(server: ProviderServer) -> None:
    events = _events(("text", ["Hi"]))
    events[0][1]["message"]["usage"] = {"input_tokens": 0, "output_tokens": 0}
    delta = next(e for name, e in events if name == "message_delta")
    delta["usage"] = {"input_tokens": 31, "output_tokens": 4, "cache_read_input_tokens": 2}
    server.answer(Answer(events=events))
    items = [item async for item in _model(server).stream(_request())]
    reply = items[-1]
    assert isinstance(reply, Reply) and reply.usage is not None
    assert (reply.usage.input_tokens, reply.usage.output_tokens) == (33, 4)


# --- content that is not a list of blocks -----------------------------------------------------------------


@pytest.mark.parametrize("content", ["Hello!", {"type": "text", "text": "Hello!"}, ["Hello!"], [{"text": "Hello!"}]])
async def test_content_that_is_not_a_list_of_blocks_fails_the_run_model_error_instead_of_completing_with_nothing(
    server: ProviderServer, tmp_path: Any, content: Any
) -> None:
    from stopwise import Agent, Runner, SQLiteStore

    body = message()
    body["content"] = content
    server.answer(Answer(body=body))
    store = SQLiteStore(tmp_path / "log.db")
    result = await Runner(store).run(Agent("a", model=_model(server)), "Hi", session_id="s")
    assert result.status == "failed" and result.output is None
    assert result.error is not None and result.error.code == "model_error"
    assert result.error.details["provider"] == "anthropic" and "malformed response" in result.error.message
    snapshot = await store.load_session("s")
    assert snapshot is not None and [m.role for m in snapshot.messages()] == ["user"]  # nothing of the reply
    await store.close()


async def test_an_empty_list_of_blocks_is_a_reply_with_no_text_not_a_malformed_one(server: ProviderServer) -> None:
    server.answer(Answer(body=message()))
    reply = await _model(server).generate(_request())
    assert (reply.text, reply.tool_calls, reply.stop_reason) == ("", (), StopReason.END_TURN)
