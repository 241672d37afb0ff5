"""OpenAIModel against a real HTTP server on loopback that answers in the chat completions wire format."""

from __future__ import annotations

import asyncio
import json
import socket
import sys
import threading
from typing import Any

import pytest

pytest.importorskip("openai")

from provider_server import Answer, ProviderServer
from stopwise import Agent, ConfigError, Message, ModelError, Reply, Role, Runner, StopReason, ToolCall, tool
from stopwise.messages import TokenLogprob, encode_tool_result, error_tool_result
from stopwise.models import ModelRequest, OpenAIModel, StreamingModel, ToolSpec

FAST_RETRY = {"retry-after-ms": "1"}  # the SDK honours it: retries wait a millisecond, not seconds


def _model(server: ProviderServer, **options: Any) -> OpenAIModel:
    return OpenAIModel("gpt-test", base_url=server.url + "/v1", api_key="sk-test", **options)


def _request(
    *messages: Message, tools: tuple[ToolSpec, ...] = (), schema: dict[str, Any] | None = None
) -> ModelRequest:
    rows = messages or (Message.system("Be brief."), Message.user("Hi"))
    return ModelRequest(messages=rows, tools=tools, step=1, output_schema=schema)


def completion(
    content: str | None = None,
    calls: list[dict[str, Any]] | None = None,
    finish: str = "stop",
    refusal: str | None = None,
    logprobs: dict[str, Any] | None = None,
) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content, "refusal": refusal}
    if calls:
        message["tool_calls"] = calls
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": "gpt-test",
        "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": logprobs}],
        "usage": {"prompt_tokens": 11, "completion_tokens": 5, "total_tokens": 16},
    }


def call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def chunk(delta: dict[str, Any] | None = None, finish: str | None = None, usage: bool = False) -> dict[str, Any]:
    body: dict[str, Any] = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-test"}
    body["choices"] = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
    if usage:
        body["usage"] = {"prompt_tokens": 11, "completion_tokens": 5, "total_tokens": 16}
    return body


WEATHER = ToolSpec("get_weather", "Current weather.", {"type": "object", "properties": {"city": {"type": "string"}}})


# --- replies ----------------------------------------------------------------------------------------------


async def test_text_reply_with_usage_and_the_request_in_openai_format(server: ProviderServer) -> None:
    server.answer(Answer(body=completion("Hello!")))
    reply = await _model(server).generate(_request())
    assert reply.text == "Hello!" and reply.tool_calls == ()
    assert reply.stop_reason is StopReason.END_TURN
    assert reply.usage is not None and (reply.usage.input_tokens, reply.usage.output_tokens) == (11, 5)
    assert reply.logprobs is None
    (got,) = server.requests
    assert got.path == "/v1/chat/completions"
    assert got.headers["authorization"] == "Bearer sk-test"
    assert got.body["model"] == "gpt-test"
    assert got.body["messages"] == [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    assert "tools" not in got.body and "response_format" not in got.body and "stream" not in got.body


async def test_tool_call_reply_and_tools_offered_as_functions(server: ProviderServer) -> None:
    server.answer(Answer(body=completion(None, [call("call_1", "get_weather", '{"city": "Oslo"}')], "tool_calls")))
    reply = await _model(server).generate(_request(tools=(WEATHER,)))
    assert reply.tool_calls == (ToolCall("get_weather", {"city": "Oslo"}, id="call_1"),)
    assert reply.stop_reason is StopReason.TOOL_USE and reply.text == ""
    assert server.requests[0].body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Current weather.",
                "parameters": dict(WEATHER.parameters),
            },
        }
    ]
    assert "parallel_tool_calls" not in server.requests[0].body


async def test_parallel_tool_calls_keep_their_order_and_ids(server: ProviderServer) -> None:
    calls = [call("call_a", "get_weather", '{"city": "Oslo"}'), call("call_b", "get_weather", '{"city": "Rome"}')]
    server.answer(Answer(body=completion("Checking both.", calls, "tool_calls")))
    reply = await _model(server, parallel_tool_calls=True).generate(_request(tools=(WEATHER,)))
    assert [(c.id, c.args) for c in reply.tool_calls] == [("call_a", {"city": "Oslo"}), ("call_b", {"city": "Rome"})]
    assert reply.text == "Checking both."
    assert server.requests[0].body["parallel_tool_calls"] is True


async def test_arguments_that_are_not_a_json_object_pass_through_as_the_raw_string(server: ProviderServer) -> None:
    calls = [call("c1", "get_weather", '{"city": "Os'), call("c2", "get_weather", "[1]"), call("c3", "get_weather", "")]
    server.answer(Answer(body=completion(None, calls, "tool_calls")))
    reply = await _model(server).generate(_request(tools=(WEATHER,)))
    assert [c.args for c in reply.tool_calls] == ['{"city": "Os', "[1]", {}]


async def test_history_rows_become_assistant_tool_calls_and_tool_messages(server: ProviderServer) -> None:
    server.answer(Answer(body=completion("Sunny in Oslo.")))
    history = (
        Message.system("Be brief."),
        Message.user("Weather?"),
        Message(
            Role.ASSISTANT, "", (ToolCall("get_weather", {"city": "Oslo"}, id="c1"), ToolCall("f", "{bad", id="c2"))
        ),
        encode_tool_result("sunny", tool_call_id="c1"),
        error_tool_result("arguments are not JSON", tool_call_id="c2"),
    )
    await _model(server).generate(_request(*history, tools=(WEATHER,)))
    sent = server.requests[0].body["messages"]
    assert sent[2] == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}},
            {"id": "c2", "type": "function", "function": {"name": "f", "arguments": "{bad"}},
        ],
    }
    assert sent[3] == {"role": "tool", "tool_call_id": "c1", "content": "sunny"}
    assert sent[4]["role"] == "tool" and json.loads(sent[4]["content"]) == {"error": "arguments are not JSON"}


@pytest.mark.parametrize(
    ("finish", "calls", "expected"),
    [
        ("stop", False, StopReason.END_TURN),
        ("length", False, StopReason.MAX_TOKENS),
        ("content_filter", False, StopReason.CONTENT_FILTER),
        ("tool_calls", True, StopReason.TOOL_USE),
        ("stop", True, StopReason.TOOL_USE),  # some compatible servers say "stop" for a reply with calls
    ],
)
async def test_finish_reasons_map_to_stop_reasons(
    server: ProviderServer, finish: str, calls: bool, expected: StopReason
) -> None:
    tool_calls = [call("c1", "get_weather", "{}")] if calls else None
    server.answer(Answer(body=completion(None if calls else "text", tool_calls, finish)))
    assert (await _model(server).generate(_request())).stop_reason is expected


async def test_refusal_is_a_refusal_reply_carrying_the_refusal_text(server: ProviderServer) -> None:
    server.answer(Answer(body=completion(None, refusal="I can't help with that.")))
    reply = await _model(server).generate(_request())
    assert reply.stop_reason is StopReason.REFUSAL
    assert reply.text == "I can't help with that."


async def test_logprobs_are_asked_for_and_put_on_the_reply(server: ProviderServer) -> None:
    logprobs = {
        "content": [
            {
                "token": "yes",
                "logprob": -0.1,
                "bytes": None,
                "top_logprobs": [
                    {"token": "yes", "logprob": -0.1, "bytes": None},
                    {"token": "no", "logprob": -2.4, "bytes": None},
                ],
            },
        ],
        "refusal": None,
    }
    server.answer(Answer(body=completion("yes", logprobs=logprobs)))
    reply = await _model(server, logprobs=True, top_logprobs=2).generate(_request())
    assert reply.logprobs == (TokenLogprob("yes", -0.1, (("yes", -0.1), ("no", -2.4))),)
    assert server.requests[0].body["logprobs"] is True and server.requests[0].body["top_logprobs"] == 2


def test_top_logprobs_without_logprobs_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="top_logprobs"):
        OpenAIModel("gpt-test", api_key="k", top_logprobs=3)


async def test_an_output_schema_is_sent_as_a_json_schema_response_format(server: ProviderServer) -> None:
    server.answer(Answer(body=completion('{"city": "Oslo"}')))
    schema = {"title": "Weather report", "type": "object", "properties": {"city": {"type": "string"}}}
    await _model(server, settings={"temperature": 0}).generate(_request(schema=schema))
    body = server.requests[0].body
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "Weather_report", "schema": schema, "strict": False},
    }
    assert body["temperature"] == 0


# --- errors and retries -----------------------------------------------------------------------------------


async def test_a_429_is_retried_after_retry_after_and_the_second_answer_is_used(server: ProviderServer) -> None:
    server.answer(
        Answer(
            429, {"error": {"message": "Rate limit reached", "type": "requests"}}, {**FAST_RETRY, "retry-after": "0"}
        ),
        Answer(body=completion("after the wait")),
    )
    reply = await _model(server).generate(_request())
    assert reply.text == "after the wait"
    assert len(server.requests) == 2
    assert server.requests[1].headers.get("x-stainless-retry-count") == "1"


async def test_a_500_that_persists_raises_model_error_after_the_sdk_retries(server: ProviderServer) -> None:
    server.always = Answer(
        500, {"error": {"message": "The server had an error"}}, {**FAST_RETRY, "x-request-id": "req_42"}
    )
    with pytest.raises(ModelError) as info:
        await _model(server, max_retries=2).generate(_request())
    error = info.value
    assert (error.provider, error.status, error.request_id, error.retryable) == (
        "openai-compatible",
        500,
        "req_42",
        True,
    )
    assert "The server had an error" in str(error)
    assert len(server.requests) == 3  # the first try and two retries


async def test_a_400_is_not_retried_and_is_not_retryable(server: ProviderServer) -> None:
    server.answer(Answer(400, {"error": {"message": "Unknown parameter"}}, {"x-request-id": "req_1"}))
    with pytest.raises(ModelError) as info:
        await _model(server).generate(_request())
    assert (info.value.status, info.value.retryable, info.value.request_id) == (400, False, "req_1")
    assert len(server.requests) == 1


@pytest.mark.parametrize("body", [b"{not json", b"", json.dumps({"object": "chat.completion"}).encode()])
async def test_a_malformed_response_raises_model_error(server: ProviderServer, body: bytes) -> None:
    server.answer(Answer(body=body))
    with pytest.raises(ModelError, match="malformed") as info:
        await _model(server).generate(_request())
    assert info.value.provider == "openai-compatible" and info.value.retryable is False


async def test_a_connection_that_fails_raises_a_retryable_model_error() -> None:
    with socket.socket() as sock:  # a port that was free a moment ago and has no listener now
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    model = OpenAIModel("gpt-test", base_url=f"http://127.0.0.1:{port}/v1", api_key="k", max_retries=0)
    with pytest.raises(ModelError, match="connection") as info:
        await model.generate(_request())
    assert info.value.status is None and info.value.retryable is True


async def test_a_request_that_times_out_raises_a_retryable_model_error(server: ProviderServer) -> None:
    release = threading.Event()
    server.answer(Answer(body=completion("too late"), hold=release))
    try:
        with pytest.raises(ModelError, match="timed out") as info:
            await _model(server, timeout=0.05, max_retries=0).generate(_request())
    finally:
        release.set()  # let the server's handler finish so the server can stop
    assert info.value.status is None and info.value.retryable is True


# --- streaming --------------------------------------------------------------------------------------------


async def test_stream_yields_text_deltas_then_the_whole_reply(server: ProviderServer) -> None:
    events = [
        (None, chunk({"role": "assistant", "content": ""})),
        (None, chunk({"content": "Hel"})),
        (None, chunk({"content": "lo!"})),
        (None, chunk({}, finish="stop")),
        (None, chunk(usage=True)),
        (None, "[DONE]"),
    ]
    server.answer(Answer(events=events))
    model = _model(server)
    assert isinstance(model, StreamingModel)
    items = [item async for item in model.stream(_request())]
    assert items[:2] == ["Hel", "lo!"]
    reply = items[2]
    assert isinstance(reply, Reply) and len(items) == 3
    assert reply.text == "Hello!" and reply.stop_reason is StopReason.END_TURN
    assert reply.usage is not None and reply.usage.output_tokens == 5
    body = server.requests[0].body
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}


async def test_stream_assembles_tool_calls_from_their_deltas(server: ProviderServer) -> None:
    def tool_delta(index: int, **fields: Any) -> dict[str, Any]:
        return {"tool_calls": [{"index": index, **fields}]}

    events = [
        (None, chunk(tool_delta(0, id="call_a", type="function", function={"name": "get_weather", "arguments": ""}))),
        (None, chunk(tool_delta(0, function={"arguments": '{"city": '}))),
        (None, chunk(tool_delta(1, id="call_b", type="function", function={"name": "get_weather", "arguments": "{}"}))),
        (None, chunk(tool_delta(0, function={"arguments": '"Oslo"}'}))),
        (None, chunk({}, finish="tool_calls")),
        (None, "[DONE]"),
    ]
    server.answer(Answer(events=events))
    items = [item async for item in _model(server).stream(_request(tools=(WEATHER,)))]
    (reply,) = items
    assert isinstance(reply, Reply) and reply.stop_reason is StopReason.TOOL_USE
    assert [(c.id, c.args) for c in reply.tool_calls] == [("call_a", {"city": "Oslo"}), ("call_b", {})]


async def test_stream_error_status_raises_model_error(server: ProviderServer) -> None:
    server.answer(
        Answer(503, {"error": {"message": "overloaded"}}, {"x-request-id": "req_s", "x-should-retry": "false"})
    )
    with pytest.raises(ModelError) as info:
        async for _ in _model(server).stream(_request()):
            pass
    assert (info.value.status, info.value.request_id) == (503, "req_s")


async def test_stream_with_malformed_event_data_raises_model_error(server: ProviderServer) -> None:
    server.answer(Answer(events=[(None, chunk({"content": "Hi"})), (None, "{not json")]))
    with pytest.raises(ModelError, match="malformed"):
        async for _ in _model(server).stream(_request()):
            pass


# --- configuration ----------------------------------------------------------------------------------------


def test_missing_openai_api_key_is_a_config_error_saying_what_to_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ConfigError, match="OPENAI_API_KEY") as info:
        OpenAIModel("gpt-4.1-mini")
    assert info.value.field == "model"


async def test_a_compatible_server_needs_no_key_and_never_gets_the_openai_key(
    server: ProviderServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    monkeypatch.delenv("OPENAI_COMPATIBLE_API_KEY", raising=False)
    server.answer(Answer(body=completion("ok")))
    await OpenAIModel("llama3.1", base_url=server.url + "/v1").generate(_request())
    assert "sk-secret" not in server.requests[0].headers["authorization"]


def test_missing_sdk_is_a_config_error_naming_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "openai", None)  # import openai now raises ImportError
    with pytest.raises(ConfigError, match=r"pip install 'stopwise\[openai\]'"):
        OpenAIModel("gpt-test", api_key="k")


def test_one_model_serves_runs_on_successive_event_loops(server: ProviderServer) -> None:
    # run_sync and the CLI start a new event loop per run; the SDK client must not outlive its loop.
    server.answer(Answer(body=completion("one")), Answer(body=completion("two")))
    model = _model(server)
    assert asyncio.run(model.generate(_request())).text == "one"
    assert asyncio.run(model.generate(_request())).text == "two"


# --- end to end through the Runner ------------------------------------------------------------------------


@tool
def get_weather(city: str) -> str:
    """Current weather for a city."""
    return f"{city}: 18 °C"


async def test_an_agent_on_openai_model_runs_a_tool_and_completes(server: ProviderServer) -> None:
    server.answer(
        Answer(body=completion(None, [call("call_1", "get_weather", '{"city": "Lisbon"}')], "tool_calls")),
        Answer(body=completion("It is 18 °C in Lisbon.")),
    )
    agent = Agent(name="forecaster", instructions="Use the tools.", model=_model(server), tools=[get_weather])
    result = await Runner().run(agent, "Weather in Lisbon?")
    assert result.status == "completed" and result.completion_reason == "final_answer"
    assert result.output == "It is 18 °C in Lisbon."
    assert result.usage.input_tokens == 22 and result.usage.requests == 2
    second = server.requests[1].body["messages"]
    assert second[0] == {"role": "system", "content": "Use the tools."}
    assert second[-1] == {"role": "tool", "tool_call_id": "call_1", "content": "Lisbon: 18 °C"}


async def test_an_agent_whose_server_always_fails_ends_model_error_with_status_and_request_id(
    server: ProviderServer,
) -> None:
    server.always = Answer(500, {"error": {"message": "boom"}}, {**FAST_RETRY, "x-request-id": "req_e2e"})
    agent = Agent(name="unlucky", instructions="", model=_model(server))
    result = await Runner().run(agent, "Hi")
    assert result.status == "failed" and result.completion_reason == "error"
    assert result.error is not None and result.error.code == "model_error" and result.error.retryable
    assert result.error.details == {"provider": "openai-compatible", "status": 500, "request_id": "req_e2e"}
    assert result.steps == 0


@tool
def note(text: str) -> str:
    """Keep a note."""
    return f"noted {text}"


async def test_a_server_that_sends_a_lone_surrogate_gives_a_completed_run_with_u_fffd(
    server: ProviderServer, tmp_path: Any
) -> None:
    """JSON may escape a lone surrogate (valid JSON, not valid UTF-8): before the storable-text rule a run through
    OpenAIModel lost the step to a raw serialisation error and stayed ``running``."""
    from stopwise import SQLiteStore

    raw_args = json.dumps({"text": "a\ud800"})  # json.dumps escapes it: '{"text": "a\\ud800"}'
    server.answer(
        Answer(body=completion("thinking \ud800", [call("c1", "note", raw_args)], finish="tool_calls")),
        Answer(body=completion("done \ud800")),
    )
    store = SQLiteStore(tmp_path / "log.db")
    agent = Agent("n", "Take notes.", _model(server), tools=[note])
    result = await Runner(store).run(agent, "note it", session_id="s")
    assert result.status == "completed", result.error
    assert result.text == "done \ufffd"
    snapshot = await store.load_session("s")
    assert snapshot is not None
    call_row = next(m for m in snapshot.messages() if m.tool_calls)
    assert call_row.content == "thinking \ufffd" and dict(call_row.tool_calls[0].args) == {"text": "a\ufffd"}
    await store.close()


def test_settings_the_installed_sdk_does_not_take_are_a_config_error_when_the_model_is_defined() -> None:
    with pytest.raises(ConfigError, match="settings") as info:
        OpenAIModel("gpt-test", api_key="sk-test", settings={"temprature": 0})
    assert "'temprature'" in str(info.value) and "temperature" in str(info.value)
    assert OpenAIModel("gpt-test", api_key="sk-test", settings={"temperature": 0, "seed": 1}).settings["seed"] == 1


# --- a reply with nothing in it ---------------------------------------------------------------------------


@pytest.mark.parametrize("finish", ["stop", None, "tool_calls"])
async def test_null_content_without_calls_or_refusal_fails_the_run_model_error_instead_of_completing_with_nothing(
    server: ProviderServer, tmp_path: Any, finish: str | None
) -> None:
    from stopwise import SQLiteStore

    body = completion(None)
    body["choices"][0]["finish_reason"] = finish
    server.answer(Answer(body=body))
    store = SQLiteStore(tmp_path / "log.db")
    result = await Runner(store).run(Agent("a", model=_model(server)), "Hi", session_id="s")
    assert result.status == "failed" and result.output is None
    assert result.error is not None and result.error.code == "model_error"
    assert result.error.details["provider"] == "openai-compatible" and result.error.retryable is False
    assert "null content" in result.error.message
    snapshot = await store.load_session("s")
    assert snapshot is not None and [m.role for m in snapshot.messages()] == ["user"]  # nothing of the reply
    # The documented way on: retry() asks the model again.
    server.answer(Answer(body=completion("Hello!")))
    again = await Runner(store).retry(Agent("a", model=_model(server)), "s")
    assert again.status == "completed" and again.output == "Hello!"
    await store.close()


@pytest.mark.parametrize(
    ("body", "stop"),
    [(completion(None, finish="length"), StopReason.MAX_TOKENS), (completion(""), StopReason.END_TURN)],
)
async def test_an_empty_reply_cut_short_or_an_empty_string_is_not_a_malformed_reply(
    server: ProviderServer, body: dict[str, Any], stop: StopReason
) -> None:
    server.answer(Answer(body=body))
    reply = await _model(server).generate(_request())
    assert (reply.text, reply.tool_calls, reply.stop_reason) == ("", (), stop)


async def test_content_that_is_not_a_string_raises_a_malformed_model_error(server: ProviderServer) -> None:
    body = completion(None)
    body["choices"][0]["message"]["content"] = {"text": "Hi"}
    server.answer(Answer(body=body))
    with pytest.raises(ModelError, match="malformed response: the message's content is dict"):
        await _model(server).generate(_request())


async def test_a_stream_without_any_content_calls_or_refusal_raises_a_malformed_model_error(
    server: ProviderServer,
) -> None:
    events = [(None, chunk({"role": "assistant"})), (None, chunk({}, finish="stop")), (None, "[DONE]")]
    server.answer(Answer(events=events))
    with pytest.raises(ModelError, match="null content"):
        async for _ in _model(server).stream(_request()):
            pass
