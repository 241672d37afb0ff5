"""The test-double models that ship with the package: ScriptedModel and FunctionModel."""

import pytest

from stopwise import (
    Agent,
    FunctionModel,
    Message,
    Model,
    Reply,
    Runner,
    ScriptedModel,
    StopReason,
    StopwiseError,
    ToolCall,
)
from stopwise.errors import ModelScriptExhausted
from stopwise.models import ModelRequest, ToolSpec


def _request(step: int = 1, text: str = "hi") -> ModelRequest:
    return ModelRequest(messages=(Message.user(text),), tools=(), step=step)


def test_model_request_defaults_to_no_output_schema_and_no_forced_output() -> None:
    spec = ToolSpec("f", "does f", {"type": "object"})
    req = ModelRequest(messages=(Message.system("be brief"),), tools=(spec,), step=3)
    assert req.step == 3
    assert req.tools == (spec,)
    assert req.output_schema is None
    assert req.forced_output is False


async def test_scripted_model_returns_replies_in_order() -> None:
    first = Reply(tool_calls=(ToolCall("f", {}, id="c1"),))
    second = Reply(text="done")
    model = ScriptedModel([first, second])
    assert await model.generate(_request(1)) is first
    assert await model.generate(_request(2)) is second


async def test_scripted_model_turns_strings_into_text_replies() -> None:
    model = ScriptedModel(["hello", Reply(text="bye", stop_reason=StopReason.MAX_TOKENS)])
    reply = await model.generate(_request())
    assert reply == Reply(text="hello")
    assert reply.stop_reason is StopReason.END_TURN
    assert (await model.generate(_request())).stop_reason is StopReason.MAX_TOKENS


async def test_scripted_model_records_every_request_it_saw() -> None:
    model = ScriptedModel(["a", "b"])
    r1, r2 = _request(1, "one"), _request(2, "two")
    await model.generate(r1)
    await model.generate(r2)
    assert model.requests == [r1, r2]
    assert model.remaining == 0


async def test_scripted_model_out_of_replies_raises_naming_the_step() -> None:
    model = ScriptedModel(["only"])
    await model.generate(_request(1))
    with pytest.raises(ModelScriptExhausted, match=r"step 3\b") as info:
        await model.generate(_request(3))
    assert isinstance(info.value, StopwiseError)
    assert len(model.requests) == 2


async def test_scripted_model_with_no_replies_raises_on_the_first_request() -> None:
    with pytest.raises(ModelScriptExhausted, match="step 7"):
        await ScriptedModel([]).generate(_request(7))


async def test_scripted_model_accepts_any_iterable_of_replies() -> None:
    model = ScriptedModel(r for r in ["x", "y"])
    assert (await model.generate(_request())).text == "x"
    assert (await model.generate(_request())).text == "y"


async def test_function_model_calls_a_sync_function_with_the_request() -> None:
    seen: list[ModelRequest] = []

    def reply_with_step(request: ModelRequest) -> Reply:
        seen.append(request)
        return Reply(text=f"step {request.step}")

    req = _request(4)
    assert (await FunctionModel(reply_with_step).generate(req)).text == "step 4"
    assert seen == [req]


async def test_function_model_awaits_an_async_function() -> None:
    async def last_user_text(request: ModelRequest) -> Reply:
        return Reply(text=request.messages[-1].content.upper())

    assert (await FunctionModel(last_user_text).generate(_request(text="abc"))).text == "ABC"


async def test_function_model_takes_a_plain_string_as_a_text_reply() -> None:
    def echo(request: ModelRequest) -> str:
        return f"you said {request.messages[-1].content}"

    async def shout(request: ModelRequest) -> str:
        return request.messages[-1].content.upper()

    assert await FunctionModel(echo).generate(_request(text="hi")) == Reply(text="you said hi")
    assert await FunctionModel(shout).generate(_request(text="abc")) == Reply(text="ABC")


async def test_a_string_reply_from_a_function_model_finishes_a_run() -> None:
    agent = Agent("echo", model=FunctionModel(lambda request: "done"))
    result = await Runner().run(agent, "go")
    assert result.status == "completed" and result.output == "done"


async def test_function_model_returning_neither_reply_nor_str_raises_type_error_naming_the_model() -> None:
    def sloppy(request: ModelRequest) -> dict[str, str]:
        return {"text": "just text"}

    with pytest.raises(TypeError, match="sloppy") as info:
        await FunctionModel(sloppy).generate(_request())  # type: ignore[arg-type]
    assert "dict" in str(info.value)
    assert "Reply or str" in str(info.value)


async def test_function_model_uses_the_given_name_in_its_error() -> None:
    async def fn(request: ModelRequest) -> None:
        return None

    with pytest.raises(TypeError, match="my-model"):
        await FunctionModel(fn, name="my-model").generate(_request())  # type: ignore[arg-type]


def test_test_models_satisfy_the_model_protocol() -> None:
    assert isinstance(ScriptedModel([]), Model)
    assert isinstance(FunctionModel(lambda r: Reply()), Model)
