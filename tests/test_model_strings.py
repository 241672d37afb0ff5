"""Model strings (``Agent(model="openai:...")``), lazy SDK imports, and the streaming capability of models."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator

import pytest

from stopwise import Agent, ConfigError, Message, Reply, ScriptedModel, ToolCall
from stopwise.models import FunctionModel, ModelRequest, StreamingModel, resolve_model, stream_reply


def _request() -> ModelRequest:
    return ModelRequest(messages=(Message.user("hi"),), tools=(), step=1)


# --- model strings ----------------------------------------------------------------------------------------


def test_openai_string_makes_an_openai_model(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("openai")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    model = resolve_model("openai:ft:gpt-4.1-mini:org:custom")
    assert type(model).__name__ == "OpenAIModel"
    assert (model.model, model.base_url, model.provider) == ("ft:gpt-4.1-mini:org:custom", None, "openai")  # type: ignore[attr-defined]


def test_anthropic_string_makes_an_anthropic_model(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("anthropic")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    model = resolve_model("anthropic:claude-sonnet-4-5")
    assert type(model).__name__ == "AnthropicModel"
    assert model.model == "claude-sonnet-4-5"  # type: ignore[attr-defined]


def test_openai_compatible_string_takes_a_base_url_and_a_model_with_colons(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("openai")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)  # a local server needs no key
    model = resolve_model("openai-compatible:http://127.0.0.1:11434/v1#llama3.1:8b")
    assert (model.model, model.base_url, model.provider) == (  # type: ignore[attr-defined]
        "llama3.1:8b",
        "http://127.0.0.1:11434/v1",
        "openai-compatible",
    )


def test_agent_resolves_a_model_string_when_defined(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("openai")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    agent = Agent(name="a", instructions="", model="openai:gpt-4.1-mini")
    assert type(agent.model).__name__ == "OpenAIModel"


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        ("gpt-4.1-mini", "not a model string"),
        ("mistral:large", "unknown provider 'mistral'"),
        ("openai:", "names no model"),
        ("openai-compatible:http://127.0.0.1:8000/v1", "BASE_URL#MODEL"),
        ("openai-compatible:127.0.0.1:8000#m", "http://"),
        ("openai-compatible:http://127.0.0.1:8000/v1#", "names no model"),
    ],
)
def test_a_bad_model_string_is_a_config_error_on_the_model_field(spec: str, problem: str) -> None:
    with pytest.raises(ConfigError, match="model: ") as info:
        Agent(name="a", instructions="", model=spec)
    assert info.value.field == "model"
    assert problem in info.value.problem


@pytest.mark.parametrize(
    ("spec", "variable"), [("openai:gpt-4.1-mini", "OPENAI_API_KEY"), ("anthropic:claude-x", "ANTHROPIC_API_KEY")]
)
def test_a_missing_api_key_fails_at_definition_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, spec: str, variable: str
) -> None:
    pytest.importorskip(spec.partition(":")[0])
    monkeypatch.delenv(variable, raising=False)
    with pytest.raises(ConfigError, match=f"{variable} is not set") as info:
        Agent(name="a", instructions="", model=spec)
    assert info.value.field == "model"


@pytest.mark.parametrize(("spec", "sdk"), [("openai:gpt-4.1-mini", "openai"), ("anthropic:claude-x", "anthropic")])
def test_a_model_string_whose_sdk_is_missing_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch, spec: str, sdk: str
) -> None:
    monkeypatch.setitem(sys.modules, sdk, None)  # import fails as if the extra were not installed
    with pytest.raises(ConfigError, match=rf"pip install 'stopwise\[{sdk}\]'"):
        Agent(name="a", instructions="", model=spec)


def test_importing_stopwise_imports_no_sdk() -> None:
    code = (
        "import sys, stopwise, stopwise.models\n"
        "from stopwise import OpenAIModel, AnthropicModel\n"
        "loaded = sorted(m for m in ('openai', 'anthropic') if m in sys.modules)\n"
        "assert not loaded, loaded\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


# --- streaming --------------------------------------------------------------------------------------------


async def test_scripted_model_streams_its_text_as_one_delta_then_the_reply() -> None:
    reply = Reply(text="Hello")
    model = ScriptedModel([reply, Reply(tool_calls=[ToolCall("f")])])
    assert isinstance(model, StreamingModel)
    assert [item async for item in model.stream(_request())] == ["Hello", reply]
    (only,) = [item async for item in model.stream(_request())]  # no text: no delta
    assert isinstance(only, Reply) and only.tool_calls
    assert len(model.requests) == 2


async def test_function_model_streams_too() -> None:
    model = FunctionModel(lambda request: Reply(text="ok"))
    assert [item async for item in model.stream(_request())] == ["ok", Reply(text="ok")]


async def test_stream_reply_gives_a_plain_model_reply_alone() -> None:
    class Plain:
        async def generate(self, request: ModelRequest) -> Reply:
            return Reply(text="whole")

    assert not isinstance(Plain(), StreamingModel)
    assert [item async for item in stream_reply(Plain(), _request())] == [Reply(text="whole")]


async def test_stream_reply_drops_empty_deltas_and_refuses_a_stream_without_a_reply() -> None:
    class Chatty:
        async def generate(self, request: ModelRequest) -> Reply:
            return Reply(text="ab")

        async def stream(self, request: ModelRequest) -> AsyncIterator[str | Reply]:
            for piece in ("a", "", "b"):
                yield piece
            if request.step == 1:
                yield Reply(text="ab")

    assert [item async for item in stream_reply(Chatty(), _request())] == ["a", "b", Reply(text="ab")]
    with pytest.raises(TypeError, match="without yielding a Reply"):
        async for _ in stream_reply(Chatty(), ModelRequest(messages=(), tools=(), step=2)):
            pass
