"""Edges of what callers, tools and tool sources hand the runner: values JSON cannot hold, no input at all,
reviewer arguments that cannot be logged, tool sources that fail or list the wrong things. Each is refused with
a typed error or ends the run with a typed failure, the same on every store, and the log stays consistent; a
typed error survives pickling (how DBOS hands a workflow's error back)."""

from __future__ import annotations

import json
import math
import pickle
from typing import Any

import pytest

from stopwise import (
    Agent,
    FunctionModel,
    Message,
    Reply,
    Runner,
    RunStatus,
    ScriptedModel,
    Store,
    ToolCall,
    decode_tool_result,
    tool,
)
from stopwise.approvals import ApprovalError, Modify
from stopwise.errors import (
    ConfigError,
    ModelError,
    RunLeased,
    StoreError,
    StoreUnavailable,
    UnreadableEntry,
)
from stopwise.guardrails import Guardrails, Rewrite
from stopwise.messages import TOOL_ERROR
from stopwise.models import ModelRequest


def _calls(*calls: ToolCall) -> Reply:
    return Reply(tool_calls=calls)


# --- a tool result JSON cannot hold ---------------------------------------------------------------------


@tool
def measure(kind: str) -> Any:
    """A reading that is not a JSON number."""
    return {"nan": float("nan"), "inf": [1.0, float("inf")], "neg": -float("inf"), "top": float("nan")}[kind]


@pytest.mark.parametrize("kind", ["nan", "inf", "neg", "top"])
async def test_a_tool_result_holding_nan_or_infinity_is_refused_as_unserialisable_and_the_model_reads_an_error_row(
    store: Store, kind: str
) -> None:
    seen: list[Message] = []

    def model(request: ModelRequest) -> Reply:
        if request.step == 1:
            return _calls(ToolCall("measure", {"kind": kind}, id="c1"))
        seen.extend(request.messages)
        return Reply("the reading failed")

    agent = Agent("a", model=FunctionModel(model), tools=[measure])
    result = await Runner(store).run(agent, "measure", session_id="s")
    assert result.status is RunStatus.COMPLETED, result.error
    row = next(m for m in seen if m.tool_call_id == "c1")
    assert row.metadata.get(TOOL_ERROR) is True
    assert "cannot be serialised to JSON" in decode_tool_result(row)["error"]
    snapshot = await store.load_session("s")
    assert snapshot is not None
    for m in snapshot.messages():  # every stored row is strict JSON where it is JSON at all
        if m.tool_call_id is not None:
            json.loads(m.content, parse_constant=_no_constant)


def _no_constant(name: str) -> Any:
    raise AssertionError(f"{name} is not JSON")


async def test_a_finite_float_result_is_kept_as_it_is() -> None:
    @tool
    def pi() -> float:
        """Pi."""
        return math.pi

    agent = Agent("a", model=ScriptedModel([_calls(ToolCall("pi", {}, id="c1")), "done"]), tools=[pi])
    result = await Runner().run(agent, "pi", session_id="s")
    row = next(m for m in result.messages if m.tool_call_id == "c1")
    assert decode_tool_result(row) == math.pi and not row.metadata.get(TOOL_ERROR)


async def test_a_client_result_holding_nan_is_an_approval_error_and_the_run_stays_suspended(store: Store) -> None:
    @tool(client=True)
    def locate() -> float:
        """Where the device is."""
        return 0.0

    agent = Agent("a", model=ScriptedModel([_calls(ToolCall("locate", {}, id="c1")), "done"]), tools=[locate])
    runner = Runner(store)
    first = await runner.run(agent, "where", session_id="s")
    assert first.status is RunStatus.SUSPENDED
    before = await store.load_session("s")
    with pytest.raises(ApprovalError, match="c1 cannot be serialised to JSON: NaN is not a JSON number"):
        await runner.resume(agent, "s", {}, results={"c1": {"lat": float("nan")}})
    after = await store.load_session("s")
    assert after is not None and before is not None and after.next_seq == before.next_seq
    assert after.last_run is not None and after.last_run.status is RunStatus.SUSPENDED


# --- no input at all ------------------------------------------------------------------------------------


async def test_a_run_with_an_empty_list_on_a_new_session_is_a_config_error_and_nothing_is_written(
    store: Store,
) -> None:
    with pytest.raises(ConfigError, match="input: is empty"):
        await Runner(store).run(Agent("a", model=ScriptedModel(["hi"])), [], session_id="s")
    assert await store.load_session("s") is None


async def test_a_run_with_an_empty_list_continues_a_session_that_already_has_input(store: Store) -> None:
    runner = Runner(store)
    first = await runner.run(Agent("a", model=ScriptedModel(["first"])), "hello", session_id="s")
    assert first.status is RunStatus.COMPLETED
    seen: list[Message] = []

    def model(request: ModelRequest) -> Reply:
        seen.extend(request.messages)
        return Reply("second")

    again = await runner.run(Agent("a", model=FunctionModel(model)), [], session_id="s")
    assert again.status is RunStatus.COMPLETED and again.output == "second"
    assert [m.content for m in seen] == ["hello", "first"]


# --- a reviewer's arguments the log cannot keep ---------------------------------------------------------


@tool(needs_approval=True)
def pay(amount: Any) -> str:
    """Pay an amount."""
    return f"paid {amount}"


@pytest.mark.parametrize(
    ("args", "says"),
    [
        ({"amount": object()}, "object"),
        ({"amount": float("nan")}, "NaN"),
        ({"amount": [1, {"deep": float("inf")}]}, "Infinity"),
        ({1: 5}, "key"),
    ],
)
async def test_modify_with_arguments_json_cannot_hold_is_an_approval_error_naming_the_call_and_nothing_is_written(
    store: Store, args: Any, says: str
) -> None:
    agent = Agent("a", model=ScriptedModel([_calls(ToolCall("pay", {"amount": 5}, id="c1")), "done"]), tools=[pay])
    runner = Runner(store)
    first = await runner.run(agent, "pay", session_id="s")
    assert first.status is RunStatus.SUSPENDED
    before = await store.load_session("s")
    with pytest.raises(ApprovalError, match="c1") as info:
        await runner.resume(agent, "s", {"c1": Modify(args)})
    assert says in str(info.value) and "pay" in str(info.value)
    after = await store.load_session("s")
    assert after is not None and before is not None and after.next_seq == before.next_seq
    assert after.last_run is not None and after.last_run.status is RunStatus.SUSPENDED
    done = await runner.resume(agent, "s", {"c1": Modify({"amount": 7})})  # a good decision still goes through
    assert done.status is RunStatus.COMPLETED
    assert any(m.content == "paid 7" for m in done.messages)


# --- a tool source that fails or lists the wrong things -------------------------------------------------


class _Source:
    """A tool source (``ToolSource``) whose ``list_tools`` answers with ``listing`` or raises it."""

    def __init__(self, listing: Any) -> None:
        self.listing = listing

    @property
    def name(self) -> str:
        return "inventory"

    async def list_tools(self) -> Any:
        if isinstance(self.listing, BaseException):
            raise self.listing
        return self.listing


@pytest.mark.parametrize(
    ("listing", "category", "retryable", "says"),
    [
        (RuntimeError("index corrupt"), "tool", False, "RuntimeError: index corrupt"),
        (ConnectionResetError("peer reset"), "tool", True, "ConnectionResetError: peer reset"),
        (KeyError("tools"), "tool", False, "KeyError"),
        (["measure"], "caller", False, "listed a str ('measure'), not a Tool"),
        ([measure, {"name": "x"}], "caller", False, "listed a dict"),
        (None, "caller", False, "listed NoneType, not a sequence of Tool"),
    ],
)
async def test_a_tool_source_that_raises_or_lists_what_is_not_a_tool_fails_the_run_typed_naming_the_source(
    store: Store, listing: Any, category: str, retryable: bool, says: str
) -> None:
    agent = Agent("a", model=ScriptedModel(["never asked"]), tools=[_Source(listing)])
    result = await Runner(store).run(agent, "go", session_id="s")
    assert result.status is RunStatus.FAILED
    assert result.error is not None and result.error.code == "tool_source_failed"
    assert (result.error.category, result.error.retryable) == (category, retryable)
    assert "tool source 'inventory'" in result.error.message and says in result.error.message
    assert result.error.details["source"] == "inventory"
    snapshot = await store.load_session("s")  # the run is on record, failed, with its input and nothing else
    assert snapshot is not None and snapshot.last_run is not None
    assert snapshot.last_run.status is RunStatus.FAILED and snapshot.last_run.error == result.error
    assert [m.role for m in snapshot.messages()] == ["user"]


async def test_a_run_failed_by_its_tool_source_is_retried_once_the_source_lists_tools() -> None:
    source = _Source(RuntimeError("not yet"))
    model = ScriptedModel([_calls(ToolCall("measure", {"kind": "nan"}, id="c1")), "done"])
    agent = Agent("a", model=model, tools=[source])
    runner = Runner()
    assert (await runner.run(agent, "go", session_id="s")).status is RunStatus.FAILED
    source.listing = [measure]
    again = await runner.retry(agent, "s")
    assert again.status is RunStatus.COMPLETED and again.output == "done"


async def test_a_tool_result_guardrail_rewriting_to_nan_fails_the_run_guardrail_invalid_naming_it() -> None:
    def smudge(ctx: Any) -> Rewrite:
        return Rewrite(result={"value": float("nan")})

    model = ScriptedModel([_calls(ToolCall("measure", {"kind": "nan"}, id="c1")), "done"])
    agent = Agent("a", model=model, tools=[measure], guardrails=Guardrails(on_tool_result=smudge))
    result = await Runner().run(agent, "measure")
    assert result.status is RunStatus.FAILED and result.error is not None
    assert result.error.code == "guardrail_invalid"
    assert "'smudge'" in result.error.message and "NaN is not a JSON number" in result.error.message


# --- typed errors survive pickling (DBOS records a workflow's error so, and ``result`` raises it) -------------


@pytest.mark.parametrize(
    "error",
    [
        ConfigError("input", "is empty"),
        ModelError("openai: HTTP 500", provider="openai", status=500, request_id="req_1", retryable=True),
        StoreError("disk full", operation="commit", session_id="s"),
        StoreUnavailable("lost connection", operation="load_session"),
        UnreadableEntry("s", 3, "unknown kind"),
        RunLeased("r1", "worker-a", 12.5),
    ],
)
def test_a_typed_error_pickled_and_unpickled_keeps_its_type_message_and_fields(error: Exception) -> None:
    again = pickle.loads(pickle.dumps(error))
    assert type(again) is type(error) and str(again) == str(error)
    assert vars(again) == vars(error)
