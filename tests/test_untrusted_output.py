"""The model's output is untrusted input: one validation at the model boundary, call ids unique by construction,
and the storable-text rule (issue 12, points 1 and 2). Each test names the failure it guards against."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from stopwise import (
    Agent,
    ErrorCode,
    FunctionModel,
    Message,
    Reply,
    Role,
    Runner,
    RunStatus,
    ScriptedModel,
    Store,
    ToolCall,
    Usage,
    decode_tool_result,
    tool,
)
from stopwise.approvals import Approve
from stopwise.errors import ConfigError
from stopwise.models import ModelRequest

REPLACEMENT = "\ufffd"
"""What the storable-text rule turns a lone surrogate or a NUL into."""
LONE = "\ud800"
"""A lone UTF-16 surrogate: valid JSON (``"\\ud800"``) decodes to it, and UTF-8 cannot encode it."""


@tool
def echo(text: str) -> str:
    """Say it back."""
    return f"echo: {text}"


@tool
def lone_result() -> str:
    """A tool whose string result holds a lone surrogate and a NUL."""
    return f"bad{LONE}and\x00nul"


@tool
def lone_json() -> dict[str, Any]:
    """A tool whose JSON result holds a lone surrogate."""
    return {"value": f"x{LONE}"}


def _agent(model: Any, tools: list[Any] | None = None, **options: Any) -> Agent:
    return Agent("untrusted", "Be brief.", model, tools=tools or [echo, lone_result, lone_json], **options)


class _Returns:
    """A model (any object with ``generate``) that returns ``value`` as it is, whatever it is."""

    def __init__(self, value: Any) -> None:
        self.value = value

    async def generate(self, request: ModelRequest) -> Any:
        return self.value


async def _fails_with_model_error(store: Store, reply: Any, **options: Any) -> Any:
    """Run one step whose reply is ``reply``; the run must fail ``model_error`` with nothing of the step kept."""
    runner = Runner(store)
    result = await runner.run(_agent(_Returns(reply), **options), "go", session_id="s")
    assert result.status is RunStatus.FAILED
    assert result.error is not None and result.error.code == ErrorCode.MODEL_ERROR
    snapshot = await store.load_session("s")
    assert snapshot is not None
    assert [e.kind.value for e in snapshot.entries] == ["input"], "nothing of the malformed reply is committed"
    return result.error


# --- malformed replies are a typed model_error naming the field ------------------------------------------------


@pytest.mark.parametrize(
    ("args", "field"),
    [([1, 2], "tool_calls[0].args"), (None, "tool_calls[0].args"), (7, "tool_calls[0].args")],
)
async def test_tool_call_args_that_are_not_a_json_object_fail_model_error_and_never_commit(
    store: Store, args: Any, field: str
) -> None:
    error = await _fails_with_model_error(store, Reply(tool_calls=[ToolCall("echo", args, id="c1")]))
    assert error.details["field"] == field and not error.retryable
    assert await Runner(store).run(_agent(ScriptedModel(["fine"])), "again", session_id="s2")


@pytest.mark.parametrize(
    ("call", "field"),
    [(ToolCall(3, {}, id="c1"), "tool_calls[0].name"), (ToolCall("echo", {}, id=5), "tool_calls[0].id")],  # type: ignore[arg-type]
)
async def test_a_tool_call_name_or_id_that_is_not_a_string_fails_model_error(
    store: Store, call: ToolCall, field: str
) -> None:
    error = await _fails_with_model_error(store, Reply(tool_calls=[call]))
    assert error.details["field"] == field


@pytest.mark.parametrize(
    ("reply", "field"),
    [
        (Reply(text=None), "text"),  # type: ignore[arg-type]
        (Reply(tool_calls=[{"name": "echo", "args": {}}]), "tool_calls[0]"),  # type: ignore[list-item]
        (Reply(text="hi", usage="lots"), "usage"),  # type: ignore[arg-type]
        (Reply(text="hi", usage=Usage(-1, 0, 1)), "usage.input_tokens"),
        ("just a string", "reply"),
        (Reply(tool_calls=[ToolCall("echo", {1: "x"}, id="c1")]), "tool_calls[0].args"),  # type: ignore[dict-item]
        (Reply(tool_calls=[ToolCall("echo", {"x": float("nan")}, id="c1")]), "tool_calls[0].args.x"),
        (Reply(tool_calls=[ToolCall("echo", {"x": object()}, id="c1")]), "tool_calls[0].args.x"),
    ],
)
async def test_bad_reply_fields_are_a_typed_model_error_naming_the_field_not_a_raw_exception(
    store: Store, reply: Any, field: str
) -> None:
    error = await _fails_with_model_error(store, reply)
    assert error.details["field"] == field
    assert error.category == "model" and not error.retryable, "a wrong type repeats on every call"


def _nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(depth - 1):
        value = {"a": value}
    return value


async def test_arguments_nested_100k_deep_are_a_retryable_model_error_not_a_recursion_error(store: Store) -> None:
    error = await _fails_with_model_error(store, Reply(tool_calls=[ToolCall("echo", _nested(100_000), id="c1")]))
    assert error.details["field"] == "tool_calls[0].args" and "64 levels" in error.details["problem"]
    assert error.retryable, "another sample of the model may stay within the bound"


async def test_arguments_over_the_size_bound_are_a_retryable_model_error(store: Store) -> None:
    from stopwise import ReplyLimits

    big = Reply(
        tool_calls=[ToolCall("echo", {"text": "x" * 600}, id="a"), ToolCall("echo", {"text": "y" * 600}, id="b")]
    )
    error = await _fails_with_model_error(store, big, reply_limits=ReplyLimits(max_args_bytes=1000))
    assert error.details["field"] == "tool_calls[1].args" and error.retryable


def test_the_default_bounds_are_64_levels_and_one_megabyte() -> None:
    from stopwise import ReplyLimits
    from stopwise.models._validate import validate_reply

    limits = ReplyLimits()
    assert (limits.max_depth, limits.max_args_bytes) == (64, 1_000_000)
    assert isinstance(validate_reply(Reply(tool_calls=[ToolCall("e", _nested(64), id="c")]), limits), Reply)
    assert not isinstance(validate_reply(Reply(tool_calls=[ToolCall("e", _nested(65), id="c")]), limits), Reply)
    with pytest.raises(ConfigError, match=r"reply_limits\.max_depth"):
        ReplyLimits(max_depth=0)
    with pytest.raises(ConfigError, match="reply_limits"):
        _agent(ScriptedModel([]), reply_limits={"max_depth": 3})


async def test_middleware_output_is_validated_like_a_model_reply(store: Store) -> None:
    async def breaks_it(request: ModelRequest, call_next: Any) -> Reply:
        reply = await call_next(request)
        return Reply(text=reply.text, tool_calls=[ToolCall("echo", ["not", "an", "object"], id="m1")])  # type: ignore[arg-type]

    runner = Runner(store)
    result = await runner.run(_agent(ScriptedModel(["hi"]), middleware=[breaks_it]), "go", session_id="s")
    assert result.error is not None and result.error.details["field"] == "tool_calls[0].args"


async def test_an_exception_the_adapter_did_not_classify_is_not_retryable() -> None:
    def raises(_: ModelRequest) -> Reply:
        raise TypeError("create() got an unexpected keyword argument 'temperature'")

    result = await Runner().run(_agent(FunctionModel(raises)), "go")
    assert result.error is not None and result.error.code == ErrorCode.MODEL_ERROR
    assert result.error.retryable is False and result.error.details == {"exception": "TypeError"}


async def test_a_timeout_or_dropped_connection_from_a_model_stays_retryable() -> None:
    for exc in (TimeoutError("slow"), ConnectionResetError("reset")):

        def raises(_: ModelRequest, exc: Exception = exc) -> Reply:
            raise exc

        result = await Runner().run(_agent(FunctionModel(raises)), "go")
        assert result.error is not None and result.error.retryable is True


# --- the storable-text rule ------------------------------------------------------------------------------------


def test_the_storable_text_rule_replaces_lone_surrogates_and_nul_and_keeps_pairs() -> None:
    from stopwise.storable import storable, storable_text

    assert storable_text(f"a{LONE}b\x00c") == f"a{REPLACEMENT}b{REPLACEMENT}c"
    assert storable_text("\ud83d\ude00") == "\U0001f600", "a surrogate pair is the character it encodes"
    clean = "héllo wörld"
    assert storable_text(clean) is clean
    value = {"k": [1, "ok", ("t", LONE)], LONE: None}
    assert storable(value) == {"k": [1, "ok", ("t", REPLACEMENT)], REPLACEMENT: None}
    untouched = {"k": ["ok", 1]}
    assert storable(untouched) is untouched


@pytest.mark.parametrize("where", ["text", "args", "result", "json_result"])
async def test_a_lone_surrogate_from_the_model_or_a_tool_is_stored_as_u_fffd_with_a_log_note(
    store: Store, where: str, caplog: pytest.LogCaptureFixture
) -> None:
    first = {
        "text": Reply(text=f"hello {LONE}\x00"),
        "args": Reply(tool_calls=[ToolCall("echo", {"text": f"a{LONE}"}, id="c1")]),
        "result": Reply(tool_calls=[ToolCall("lone_result", {}, id="c1")]),
        "json_result": Reply(tool_calls=[ToolCall("lone_json", {}, id="c1")]),
    }[where]
    runner = Runner(store)
    with caplog.at_level(logging.WARNING, logger="stopwise"):
        result = await runner.run(_agent(ScriptedModel([first, "done"])), "go", session_id="s")
    assert result.status is RunStatus.COMPLETED, result.error
    assert "U+FFFD" in caplog.text
    snapshot = await store.load_session("s")
    assert snapshot is not None
    rows = snapshot.messages()
    everything = repr([(m.content, [(c.name, c.args) for c in m.tool_calls]) for m in rows])
    assert LONE not in everything and "\\x00" not in everything and REPLACEMENT in everything
    if where == "result":
        tool_row = next(m for m in rows if m.role is Role.TOOL)
        assert decode_tool_result(tool_row) == f"bad{REPLACEMENT}and{REPLACEMENT}nul"


async def test_a_final_answer_with_nul_completes_on_every_store(store: Store) -> None:
    """PostgreSQL refuses NUL in text: before the rule, the final step was lost to a raw psycopg.DataError."""
    runner = Runner(store)
    result = await runner.run(_agent(ScriptedModel(["a\x00b"])), "go", session_id="s")
    assert result.status is RunStatus.COMPLETED and result.text == f"a{REPLACEMENT}b"
    record = await store.get_run(result.run_id)
    assert record is not None and record.text == f"a{REPLACEMENT}b" and record.status is RunStatus.COMPLETED


async def test_a_store_applies_the_rule_to_text_that_did_not_pass_the_model_boundary(store: Store) -> None:
    """User input, state and records reach the store without the model boundary: the store is the backstop."""
    runner = Runner(store)
    result = await runner.run(
        _agent(ScriptedModel(["ok"])), [Message.user(f"in{LONE}put")], session_id="s", state={"k": f"v{LONE}"}
    )
    assert result.status is RunStatus.COMPLETED
    snapshot = await store.load_session("s")
    assert snapshot is not None
    assert snapshot.messages()[0].content == f"in{REPLACEMENT}put" and snapshot.state == {"k": f"v{REPLACEMENT}"}


async def test_a_store_finds_nul_and_surrogates_from_the_encoding_and_keeps_a_literal_escape(store: Store) -> None:
    """A store encodes first and applies the rule only when the encoding shows a string that needs it: a NUL, a
    surrogate pair made of two code points, and a lone surrogate are all caught, while the six characters of the
    text ``\\u0000`` (what a NUL looks like once encoded) are kept as written."""
    literal = "\\u0000"
    runner = Runner(store)
    result = await runner.run(
        _agent(ScriptedModel(["ok"])),
        [Message.user(f"a\ud83d\ude00{literal}"), Message.user("n\x00ul"), Message.user(f"{literal} and {LONE}")],
        session_id="s",
        state={"k": "v\x00", "lit": literal},
    )
    assert result.status is RunStatus.COMPLETED
    snapshot = await store.load_session("s")
    assert snapshot is not None
    assert [m.content for m in snapshot.messages()[:3]] == [
        f"a\U0001f600{literal}",
        f"n{REPLACEMENT}ul",
        f"{literal} and {REPLACEMENT}",
    ]
    assert snapshot.state == {"k": f"v{REPLACEMENT}", "lit": literal}


# --- call ids are unique by construction -----------------------------------------------------------------------

RAN: list[tuple[str, Any]] = []


@tool(needs_approval=True)
def pay(to: str, amount: int) -> str:
    """Pay someone."""
    RAN.append((to, amount))
    return f"paid {amount} to {to}"


async def test_two_calls_with_one_id_in_a_reply_are_two_pending_approvals_and_each_runs_once(store: Store) -> None:
    RAN.clear()
    same = Reply(
        tool_calls=[
            ToolCall("pay", {"to": "ann", "amount": 1}, id="dup"),
            ToolCall("pay", {"to": "bob", "amount": 2}, id="dup"),
        ]
    )
    agent = _agent(ScriptedModel([same, "done"]), tools=[pay])
    runner = Runner(store)
    suspended = await runner.run(agent, "pay both", session_id="s")
    assert suspended.status is RunStatus.SUSPENDED
    ids = [p.call_id for p in suspended.pending]
    assert len(set(ids)) == 2 and ids[0] == "dup", "the first use keeps the provider's id"
    assert [dict(p.args) for p in suspended.pending] == [{"to": "ann", "amount": 1}, {"to": "bob", "amount": 2}]
    done = await runner.resume(agent, "s", {p.call_id: Approve(p.args_hash) for p in suspended.pending})
    assert done.status is RunStatus.COMPLETED
    assert sorted(RAN) == [("ann", 1), ("bob", 2)], "each call ran once with its own arguments"


async def test_a_call_id_reused_from_an_earlier_step_gets_a_fresh_id_so_a_sub_agent_runs_again(store: Store) -> None:
    child = Agent("child", "Answer.", ScriptedModel(["first answer", "second answer"]))
    step1 = Reply(tool_calls=[ToolCall("child", {"input": "one"}, id="call_0")])
    step2 = Reply(tool_calls=[ToolCall("child", {"input": "two"}, id="call_0")])
    parent = Agent("parent", "Delegate.", ScriptedModel([step1, step2, "done"]), tools=[child.as_tool()])
    result = await Runner(store).run(parent, "go", session_id="p")
    assert result.status is RunStatus.COMPLETED
    tool_rows = [m for m in result.messages if m.role is Role.TOOL]
    assert [decode_tool_result(m) for m in tool_rows] == ["first answer", "second answer"]
    calls = [c for m in result.messages for c in m.tool_calls]
    assert calls[0].id == "call_0" and calls[1].id != "call_0" and calls[1].wire_id == "call_0"


def test_unique_call_ids_keeps_unique_ids_and_replaces_repeats_keeping_the_wire_id() -> None:
    from stopwise.call_ids import unique_call_ids

    reply = Reply(tool_calls=[ToolCall("a", {}, id="x"), ToolCall("b", {}, id="x"), ToolCall("c", {}, id="old")])
    out = unique_call_ids(reply, {"old"})
    ids = [c.id for c in out.tool_calls]
    assert ids[0] == "x" and len(set(ids)) == 3 and "old" not in ids
    assert [c.wire_id for c in out.tool_calls] == [None, "x", "old"]
    fine = Reply(tool_calls=[ToolCall("a", {}, id="y")])
    assert unique_call_ids(fine, {"x"}) is fine


async def test_adapters_send_the_provider_its_own_ids_back_for_replaced_ones() -> None:
    pytest.importorskip("openai")
    pytest.importorskip("anthropic")
    from stopwise.models import AnthropicModel, OpenAIModel

    call = ToolCall("echo", {"text": "x"}, id="sw_1", wire_id="call_0")
    history = (
        Message(Role.ASSISTANT, "", (call,)),
        Message(Role.TOOL, "echo: x", tool_call_id="sw_1"),
    )
    request = ModelRequest(messages=history, tools=(), step=2)
    openai_msgs = OpenAIModel("m", api_key="k").request_params(request)["messages"]
    assert openai_msgs[0]["tool_calls"][0]["id"] == "call_0" and openai_msgs[1]["tool_call_id"] == "call_0"
    turns = AnthropicModel("m", api_key="k").request_params(request)["messages"]
    assert turns[0]["content"][0]["id"] == "call_0" and turns[1]["content"][0]["tool_use_id"] == "call_0"
