"""The adapters against a server nobody here wrote: LiteLLM's proxy on loopback (issue 12, point 7).

The project's wire fakes (``provider_server.py``) speak the wire format as we read it; this suite checks the
adapters against LiteLLM's own OpenAI-compatible (``/v1/chat/completions``) and Anthropic-compatible
(``/v1/messages``) endpoints, which are its code, not ours. Nothing reaches a provider: the proxy's models are
LiteLLM's mock models (``mock_response``, ``mock_tool_calls``) and one model routed to a canned OpenAI-compatible
upstream on loopback, whose answers LiteLLM translates into the Anthropic wire format (text, tool use, SSE).

LiteLLM's proxy is large (about 120 packages and 750 MB installed), so it lives in a virtualenv of its own rather
than in the test extra: ``.ci/run`` installs it into ``.litellm/``; locally, ``python3 -m venv .litellm &&
.litellm/bin/pip install 'litellm[proxy]'``, or point ``STOPWISE_LITELLM`` at a ``litellm`` executable. Without
it these tests skip and say how to enable them.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("openai")
pytest.importorskip("anthropic")

from provider_server import Answer, ProviderServer, serve
from stopwise import Agent, Reply, Role, Runner, RunStatus, StopReason, tool
from stopwise.models import AnthropicModel, ModelRequest, OpenAIModel, ToolSpec

ROOT = Path(__file__).resolve().parent.parent
HOW_TO_ENABLE = (
    "LiteLLM's proxy is not installed: python3 -m venv .litellm && .litellm/bin/pip install 'litellm[proxy]' "
    "(or set STOPWISE_LITELLM to a litellm executable)"
)
READY = "Uvicorn running on"


def _litellm() -> str | None:
    given = os.environ.get("STOPWISE_LITELLM")
    if given:
        return given
    local = ROOT / ".litellm" / "bin" / "litellm"
    return str(local) if local.exists() else shutil.which("litellm")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _config(upstream: str) -> str:
    tool_calls = [
        {"id": "call_0", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}},
        {"id": "call_0", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Bergen"}'}},
    ]
    models = [
        {
            "model_name": "mock-text",
            "litellm_params": {"model": "openai/mock", "api_key": "none", "mock_response": "Hello from a mock."},
        },
        {
            "model_name": "mock-tools",
            "litellm_params": {"model": "openai/mock", "api_key": "none", "mock_tool_calls": tool_calls},
        },
        # An OpenAI-compatible upstream on loopback (chat completions): LiteLLM translates for /v1/messages.
        {
            "model_name": "upstream",
            "litellm_params": {"model": "hosted_vllm/u", "api_key": "none", "api_base": f"{upstream}/v1"},
        },
    ]
    # JSON is YAML: no YAML writer needed.
    return json.dumps(
        {"model_list": models, "litellm_settings": {"num_retries": 0}, "router_settings": {"num_retries": 0}}
    )


class Proxy:
    def __init__(self, url: str, key: str, upstream: ProviderServer) -> None:
        self.url = url
        self.key = key
        self.upstream = upstream

    def openai(self, model: str) -> OpenAIModel:
        return OpenAIModel(model, base_url=f"{self.url}/v1", api_key=self.key, max_retries=0)

    def anthropic(self, model: str = "upstream") -> AnthropicModel:
        return AnthropicModel(model, base_url=self.url, api_key=self.key, max_retries=0, max_tokens=256)


@pytest.fixture(scope="module")
def proxy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Proxy]:
    exe = _litellm()
    if exe is None:
        pytest.skip(HOW_TO_ENABLE)
    upstream_gen = serve()
    upstream = next(upstream_gen)
    config = tmp_path_factory.mktemp("litellm") / "config.yaml"
    config.write_text(_config(upstream.url), encoding="utf-8")
    port, key = _free_port(), f"sk-stopwise-test-{uuid.uuid4().hex}"
    env = {
        **os.environ,
        "LITELLM_MASTER_KEY": key,
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",  # offline: no download of the model price list
        "LITELLM_TELEMETRY": "False",
        "NO_PROXY": "127.0.0.1,localhost",
    }
    process = subprocess.Popen(
        [exe, "--config", str(config), "--host", "127.0.0.1", "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    ready = threading.Event()
    output: list[str] = []

    def drain() -> None:
        # Reads the proxy's output to the end (a full pipe would stall it) and says when it is serving.
        assert process.stdout is not None
        for line in process.stdout:
            output.append(line)
            if READY in line:
                ready.set()
        ready.set()  # it exited

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        if not ready.wait(timeout=180) or process.poll() is not None:
            pytest.fail("LiteLLM's proxy did not start:\n" + "".join(output[-40:]))
        yield Proxy(f"http://127.0.0.1:{port}", key, upstream)
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        reader.join(timeout=30)
        upstream_gen.close()


@pytest.fixture(autouse=True)
def _fresh_upstream(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    if "proxy" in request.fixturenames:
        upstream: ProviderServer = request.getfixturevalue("proxy").upstream
        upstream.queue.clear()
        upstream.requests.clear()


def _request(*, tools: tuple[ToolSpec, ...] = ()) -> ModelRequest:
    from stopwise import Message

    return ModelRequest(messages=(Message.system("Be brief."), Message.user("Hi")), tools=tools, step=1)


def _completion(content: str | None, calls: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = calls
    finish = "tool_calls" if calls else "stop"
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": "u",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 37, "completion_tokens": 5, "total_tokens": 42},
    }


def _call(call_id: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}


def _chunks(*texts: str) -> list[tuple[str | None, Any]]:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        return {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "u", "choices": [choice]}

    events: list[tuple[str | None, Any]] = [(None, chunk({"role": "assistant", "content": texts[0]}))]
    events += [(None, chunk({"content": t})) for t in texts[1:]]
    events.append((None, chunk({}, "stop")))
    usage = {"prompt_tokens": 37, "completion_tokens": 5, "total_tokens": 42}
    events.append(
        (
            None,
            {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "u", "choices": [], "usage": usage},
        )
    )
    events.append((None, "[DONE]"))
    return events


WEATHER = ToolSpec("get_weather", "Current weather.", {"type": "object", "properties": {"city": {"type": "string"}}})
CITIES: list[str] = []


@tool
def get_weather(city: str) -> str:
    """Current weather."""
    CITIES.append(city)
    return f"sunny in {city}"


# --- OpenAI-compatible: /v1/chat/completions --------------------------------------------------------------------


async def test_openai_adapter_reads_a_litellm_mock_reply_with_usage(proxy: Proxy) -> None:
    reply = await proxy.openai("mock-text").generate(_request())
    assert reply.text == "Hello from a mock." and reply.stop_reason is StopReason.END_TURN
    assert reply.usage is not None and reply.usage.input_tokens > 0 and reply.usage.output_tokens > 0


async def test_openai_adapter_streams_a_litellm_mock_reply(proxy: Proxy) -> None:
    items = [i async for i in proxy.openai("mock-text").stream(_request())]
    reply = items[-1]
    assert isinstance(reply, Reply) and "".join(i for i in items[:-1] if isinstance(i, str)) == reply.text
    assert reply.text == "Hello from a mock."


async def test_openai_adapter_through_litellm_gets_two_calls_with_one_id_as_two_calls_that_each_run_once(
    proxy: Proxy,
) -> None:
    CITIES.clear()
    proxy.upstream.answer(
        Answer(
            body=_completion(
                None,
                [_call("call_0", "get_weather", {"city": "Oslo"}), _call("call_0", "get_weather", {"city": "Bergen"})],
            )
        ),
        Answer(body=_completion("Sunny in both.")),
    )
    agent = Agent("w", "Answer.", proxy.openai("upstream"), tools=[get_weather])
    result = await Runner().run(agent, "weather?")
    assert result.status is RunStatus.COMPLETED and result.text == "Sunny in both.", result.error
    assert sorted(CITIES) == ["Bergen", "Oslo"]
    second = proxy.upstream.requests[1].body["messages"]
    sent_back = [m["tool_call_id"] for m in second if m["role"] == "tool"]
    assert sent_back == ["call_0", "call_0"], "the provider gets its own ids back"


async def test_litellm_mock_tool_calls_sharing_one_id_become_distinct_calls_keeping_the_wire_id(proxy: Proxy) -> None:
    CITIES.clear()
    agent = Agent("w", "Answer.", proxy.openai("mock-tools"), tools=[get_weather], max_steps=1)
    result = await Runner().run(agent, "weather?")
    calls = [c for m in result.messages for c in m.tool_calls]
    assert [c.args for c in calls] == [{"city": "Oslo"}, {"city": "Bergen"}]
    assert len({c.id for c in calls}) == 2 and [c.wire_id for c in calls] == [None, "call_0"]
    assert sorted(CITIES) == ["Bergen", "Oslo"], "each call ran once, with its own arguments"


# --- Anthropic-compatible: /v1/messages -------------------------------------------------------------------------


async def test_anthropic_adapter_reads_a_translated_reply_with_usage(proxy: Proxy) -> None:
    proxy.upstream.answer(Answer(body=_completion("Hello there.")))
    reply = await proxy.anthropic().generate(_request())
    assert reply.text == "Hello there." and reply.stop_reason is StopReason.END_TURN
    assert reply.usage is not None and (reply.usage.input_tokens, reply.usage.output_tokens) == (37, 5)


async def test_anthropic_stream_keeps_the_input_tokens_a_server_reports_in_message_delta(proxy: Proxy) -> None:
    """LiteLLM's SSE sends input_tokens 0 in message_start and the real count in message_delta."""
    proxy.upstream.answer(Answer(events=_chunks("Hel", "lo")))
    items = [i async for i in proxy.anthropic().stream(_request())]
    reply = items[-1]
    assert isinstance(reply, Reply) and reply.text == "Hello" and items[:-1] == ["Hel", "lo"]
    assert reply.usage is not None and (reply.usage.input_tokens, reply.usage.output_tokens) == (37, 5)


async def test_anthropic_adapter_through_litellm_runs_tool_use_and_sends_the_results_back(proxy: Proxy) -> None:
    CITIES.clear()
    proxy.upstream.answer(
        Answer(body=_completion(None, [_call("call_a", "get_weather", {"city": "Oslo"})])),
        Answer(body=_completion("Sunny in Oslo.")),
    )
    agent = Agent("w", "Answer.", proxy.anthropic(), tools=[get_weather])
    result = await Runner().run(agent, "weather?")
    assert result.status is RunStatus.COMPLETED and result.text == "Sunny in Oslo.", result.error
    assert CITIES == ["Oslo"]
    tool_rows = [m for m in result.messages if m.role is Role.TOOL]
    assert [m.content for m in tool_rows] == ["sunny in Oslo"]
    second = proxy.upstream.requests[1].body["messages"]
    assert any(m["role"] == "tool" and "sunny in Oslo" in str(m["content"]) for m in second)


async def test_an_upstream_failure_through_litellm_is_a_model_error_with_its_status(proxy: Proxy) -> None:
    proxy.upstream.answer(Answer(400, {"error": {"message": "bad request", "type": "invalid_request_error"}}))
    result = await Runner().run(Agent("w", "Answer.", proxy.anthropic()), "hi")
    assert result.status is RunStatus.FAILED and result.error is not None
    assert result.error.code == "model_error" and result.error.details.get("status") == 400
    assert result.error.retryable is False
