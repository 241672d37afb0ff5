"""Tools: schema from the signature and docstring, invocation, and every failure as an error row."""

import asyncio
import json
from typing import Any

import pytest
from pydantic import BaseModel

from stopwise import ConfigError, Message, Risk, RunContext, Tool, ToolCall, ToolError, decode_tool_result, tool
from stopwise.messages import CONTENT_ENCODING, TOOL_ERROR


def _ctx(call: ToolCall, state: dict[str, Any] | None = None) -> RunContext:
    return RunContext(
        session_id="s",
        run_id="r",
        step=1,
        tool_call_id=call.id,
        state={} if state is None else state,
        runner=None,
    )


async def _invoke(t: Tool, args: Any, state: dict[str, Any] | None = None) -> Message:
    call = ToolCall(t.name, args)
    row = await t.invoke(call, _ctx(call, state))
    assert row.tool_call_id == call.id
    return row


def _error_text(row: Message) -> str:
    assert row.metadata.get(TOOL_ERROR) is True
    body = json.loads(row.content)
    assert set(body) == {"error"}
    assert isinstance(body["error"], str)
    return body["error"]


class Address(BaseModel):
    street: str
    city: str


@tool
def search(query: str, limit: int = 10, tags: list[str] | None = None) -> list[str]:
    """Search the catalogue for items.

    Args:
        query: Free text to look for.
        limit: Most results to return.
        tags: Only items carrying all of these tags.
    """
    return [f"{query}:{i}" for i in range(limit)]


@tool
def ship(address: Address, items: list[int]) -> dict[str, Any]:
    """Ship items to an address."""
    return {"city": address.city, "is_model": isinstance(address, Address), "count": len(items)}


@tool
async def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@tool
def remember(key: str, value: str, ctx: RunContext) -> str:
    """Remember a value in the session state."""
    ctx.state[key] = value
    return f"stored {key} for {ctx.session_id}/{ctx.run_id} step {ctx.step} call {ctx.tool_call_id}"


# --- definition: names, descriptions, schema ------------------------------------------------------------


def test_bare_decorator_uses_function_name_and_docstring_summary() -> None:
    assert isinstance(search, Tool)
    assert search.name == "search"
    assert search.description == "Search the catalogue for items."
    assert search.spec.name == "search"
    assert search.spec.description == "Search the catalogue for items."


def test_decorator_options_override_name_and_description() -> None:
    @tool(name="lookup", description="Look something up.")
    def f(x: str) -> str:
        """Ignored docstring."""
        return x

    assert f.name == "lookup"
    assert f.description == "Look something up."
    assert f.spec.name == "lookup"
    assert f.spec.description == "Look something up."


def test_schema_requires_params_without_defaults_and_keeps_defaults() -> None:
    params = search.spec.parameters
    assert params["type"] == "object"
    assert params["required"] == ["query"]
    assert set(params["properties"]) == {"query", "limit", "tags"}
    assert params["properties"]["query"]["type"] == "string"
    assert params["properties"]["limit"]["type"] == "integer"
    assert params["properties"]["limit"]["default"] == 10


def test_schema_forbids_extra_arguments() -> None:
    assert search.spec.parameters["additionalProperties"] is False


def test_docstring_args_become_parameter_descriptions() -> None:
    props = search.spec.parameters["properties"]
    assert props["query"]["description"] == "Free text to look for."
    assert props["limit"]["description"] == "Most results to return."
    assert props["tags"]["description"] == "Only items carrying all of these tags."


def test_docstring_args_section_is_not_part_of_the_description() -> None:
    assert "Args" not in search.description
    assert "Free text" not in search.description


def test_list_param_schema_is_an_array_of_its_item_type() -> None:
    items = ship.spec.parameters["properties"]["items"]
    assert items["type"] == "array"
    assert items["items"] == {"type": "integer"}


def test_nested_pydantic_model_param_is_described_in_the_schema() -> None:
    params = ship.spec.parameters
    assert params["required"] == ["address", "items"]
    ref = params["properties"]["address"]["$ref"]
    model_schema = params["$defs"][ref.rsplit("/", 1)[-1]]
    assert set(model_schema["properties"]) == {"street", "city"}
    assert set(model_schema["required"]) == {"street", "city"}


async def test_nested_pydantic_model_param_is_passed_as_a_model_instance() -> None:
    row = await _invoke(ship, {"address": {"street": "1 Main St", "city": "Oslo"}, "items": [1, 2, 3]})
    assert TOOL_ERROR not in row.metadata
    assert decode_tool_result(row) == {"city": "Oslo", "is_model": True, "count": 3}


def test_run_context_param_is_hidden_from_the_schema() -> None:
    params = remember.spec.parameters
    assert set(params["properties"]) == {"key", "value"}
    assert params["required"] == ["key", "value"]
    assert remember.context_param == "ctx"


def test_tool_without_params_has_an_empty_object_schema() -> None:
    @tool
    def ping() -> str:
        return "pong"

    assert ping.spec.parameters["type"] == "object"
    assert ping.spec.parameters.get("properties", {}) == {}
    assert ping.description == ""


# --- definition errors ---------------------------------------------------------------------------------


def test_lambda_without_name_raises_config_error() -> None:
    with pytest.raises(ConfigError) as info:
        tool(lambda x: x)
    assert "name" in info.value.field


def test_lambda_with_explicit_name_is_accepted() -> None:
    t = tool(name="echo")(lambda x: x)
    assert t.name == "echo"


def test_var_positional_param_raises_config_error() -> None:
    def f(*args: int) -> int:
        return sum(args)

    with pytest.raises(ConfigError, match="args"):
        tool(f)


def test_var_keyword_param_raises_config_error() -> None:
    def f(a: int, **kwargs: int) -> int:
        return a

    with pytest.raises(ConfigError, match="kwargs"):
        tool(f)


@pytest.mark.parametrize("bad", [-1, -0.5, 0])
def test_non_positive_timeout_raises_config_error_naming_timeout(bad: float) -> None:
    def f() -> None:
        return None

    with pytest.raises(ConfigError) as info:
        tool(timeout=bad)(f)
    assert "timeout" in info.value.field


def test_unknown_risk_string_raises_config_error_naming_risk() -> None:
    def f() -> None:
        return None

    with pytest.raises(ConfigError) as info:
        tool(risk="dangerous")(f)
    assert "risk" in info.value.field
    assert "read_only" in str(info.value)


def test_risk_defaults_to_unknown() -> None:
    assert search.risk is Risk.UNKNOWN


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        (Risk.READ_ONLY, Risk.READ_ONLY),
        ("read_only", Risk.READ_ONLY),
        ("reversible", Risk.REVERSIBLE),
        (Risk.IRREVERSIBLE, Risk.IRREVERSIBLE),
        ("regulated", Risk.REGULATED),
    ],
)
def test_declared_risk_is_kept_and_strings_are_accepted(given: Risk | str, expected: Risk) -> None:
    def f() -> None:
        return None

    t = tool(risk=given)(f)
    assert t.risk is expected


def test_declared_timeout_is_kept() -> None:
    def f() -> None:
        return None

    assert tool(timeout=2.5)(f).timeout == 2.5
    assert search.timeout is None


# --- invoking: success ---------------------------------------------------------------------------------


async def test_sync_tool_result_is_returned_as_json() -> None:
    row = await _invoke(search, {"query": "q", "limit": 2})
    assert row.metadata.get(TOOL_ERROR) is None
    assert CONTENT_ENCODING not in row.metadata
    assert decode_tool_result(row) == ["q:0", "q:1"]


async def test_async_tool_is_awaited_and_its_result_returned() -> None:
    row = await _invoke(add, {"a": 2, "b": 3})
    assert row.content == "5"
    assert decode_tool_result(row) == 5


async def test_defaulted_params_use_their_default_when_omitted() -> None:
    row = await _invoke(search, {"query": "q"})
    assert len(decode_tool_result(row)) == 10


async def test_args_given_as_a_json_object_string_are_decoded() -> None:
    row = await _invoke(add, '{"a": 1, "b": 41}')
    assert TOOL_ERROR not in row.metadata
    assert decode_tool_result(row) == 42


async def test_string_returned_by_a_tool_is_stored_verbatim_with_text_marker() -> None:
    @tool
    def raw() -> str:
        return '{"looks": "like json"}'

    row = await _invoke(raw, {})
    assert row.content == '{"looks": "like json"}'
    assert row.metadata[CONTENT_ENCODING] == "text"
    assert decode_tool_result(row) == '{"looks": "like json"}'


async def test_pydantic_model_returned_by_a_tool_is_stored_as_json() -> None:
    @tool
    def where() -> Address:
        return Address(street="s", city="c")

    row = await _invoke(where, {})
    assert CONTENT_ENCODING not in row.metadata
    assert decode_tool_result(row) == {"street": "s", "city": "c"}


async def test_tool_receives_the_run_context_and_its_state_writes_reach_the_dict_passed() -> None:
    state: dict[str, Any] = {"existing": 1}
    call = ToolCall("remember", {"key": "colour", "value": "blue"})
    row = await remember.invoke(call, _ctx(call, state))
    assert state == {"existing": 1, "colour": "blue"}
    assert row.content == f"stored colour for s/r step 1 call {call.id}"


async def test_async_tool_receives_the_run_context() -> None:
    @tool
    async def who(ctx: RunContext) -> str:
        ctx.state["seen"] = True
        return ctx.idempotency_key

    state: dict[str, Any] = {}
    call = ToolCall("who", {}, id="call_1")
    row = await who.invoke(call, _ctx(call, state))
    assert row.content == "r:1:call_1"
    assert state == {"seen": True}


# --- invoking: invalid arguments become error rows -----------------------------------------------------


async def test_wrong_argument_type_returns_error_row_naming_tool_and_field() -> None:
    err = _error_text(await _invoke(add, {"a": "not a number", "b": 1}))
    assert "'add'" in err
    assert "a: " in err
    assert "integer" in err


async def test_missing_required_argument_returns_error_row_naming_the_field() -> None:
    err = _error_text(await _invoke(add, {"a": 1}))
    assert "'add'" in err
    assert "b: " in err
    assert "required" in err.lower()


async def test_unknown_extra_argument_returns_error_row_naming_it() -> None:
    err = _error_text(await _invoke(add, {"a": 1, "b": 2, "c": 3}))
    assert "'add'" in err
    assert "c: " in err
    assert "extra" in err.lower()


async def test_args_string_that_is_not_json_returns_error_row() -> None:
    err = _error_text(await _invoke(add, "{a: 1, b: 2"))
    assert "'add'" in err
    assert "not valid JSON" in err


@pytest.mark.parametrize("args", ["[1, 2]", "42", '"text"', "null"])
async def test_args_json_string_that_is_not_an_object_returns_error_row(args: str) -> None:
    err = _error_text(await _invoke(add, args))
    assert "'add'" in err
    assert "JSON object" in err


async def test_args_given_as_a_list_returns_error_row() -> None:
    err = _error_text(await _invoke(add, [1, 2]))
    assert "'add'" in err
    assert "JSON object" in err
    assert "list" in err


async def test_invalid_arguments_do_not_call_the_tool() -> None:
    calls: list[int] = []

    @tool
    def record(n: int) -> int:
        calls.append(n)
        return n

    await _invoke(record, {"n": "x"})
    await _invoke(record, "not json")
    await _invoke(record, {"n": 1, "extra": 2})
    assert calls == []


# --- invoking: failures in the tool become error rows --------------------------------------------------


async def test_exception_in_sync_tool_returns_error_row_naming_type_and_message() -> None:
    @tool
    def boom() -> None:
        raise ValueError("disk is full")

    err = _error_text(await _invoke(boom, {}))
    assert "'boom'" in err
    assert "ValueError" in err
    assert "disk is full" in err


async def test_exception_in_async_tool_returns_error_row_naming_type_and_message() -> None:
    @tool
    async def aboom() -> None:
        raise KeyError("missing")

    err = _error_text(await _invoke(aboom, {}))
    assert "KeyError" in err
    assert "missing" in err


@pytest.mark.parametrize("is_async", [False, True])
async def test_tool_error_gives_exactly_its_message_as_the_error(is_async: bool) -> None:
    if is_async:

        async def refuse() -> None:
            raise ToolError("Order 17 is already shipped")

        t = tool(refuse)
    else:

        def refuse_sync() -> None:
            raise ToolError("Order 17 is already shipped")

        t = tool(refuse_sync)
    row = await _invoke(t, {})
    assert json.loads(row.content) == {"error": "Order 17 is already shipped"}
    assert row.metadata[TOOL_ERROR] is True


async def test_async_tool_past_its_timeout_returns_error_row_saying_it_timed_out() -> None:
    never = asyncio.Event()

    @tool(timeout=0.05)
    async def wait_forever() -> str:
        await never.wait()
        return "unreachable"

    err = _error_text(await _invoke(wait_forever, {}))
    assert "'wait_forever'" in err
    assert "timed out" in err
    assert "0.05" in err


async def test_async_tool_within_its_timeout_returns_its_result() -> None:
    @tool(timeout=5)
    async def quick() -> int:
        return 1

    row = await _invoke(quick, {})
    assert decode_tool_result(row) == 1


async def test_timeout_error_raised_by_a_tool_without_timeout_returns_error_row() -> None:
    # e.g. a network client's own timeout (socket.timeout is TimeoutError): the call failed, the run goes on.
    @tool
    def fetch() -> str:
        raise TimeoutError("connect timed out")

    err = _error_text(await _invoke(fetch, {}))
    assert "'fetch'" in err
    assert "TimeoutError" in err
    assert "connect timed out" in err


async def test_a_tools_own_timeout_error_is_not_reported_as_our_time_limit() -> None:
    @tool(timeout=30)
    async def fetch_slow() -> str:
        raise TimeoutError("upstream said 504")

    err = _error_text(await _invoke(fetch_slow, {}))
    assert "TimeoutError" in err and "upstream said 504" in err
    assert "timed out after" not in err


def test_a_parameter_starting_with_underscore_raises_config_error_naming_it() -> None:
    def f(_secret: int) -> int:
        return _secret

    with pytest.raises(ConfigError, match="_secret"):
        tool(f)


async def test_result_that_cannot_be_serialised_returns_error_row_instead_of_raising() -> None:
    @tool
    def opaque() -> object:
        return object()

    err = _error_text(await _invoke(opaque, {}))
    assert "'opaque'" in err
