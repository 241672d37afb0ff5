"""What a caller gets wrong, and what it gets back: a typed error naming the parameter, raised when the agent (tool,
guard, runner) is defined or before anything is written, never a bare TypeError from deep in the loop, a silent
accept, or a run left half-written.

Each case here was found by trying it against the public API (the round-8 red team); the table in the report of
that round lists them with what they did before.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from stopwise import (
    Agent,
    Approve,
    Continue,
    Fail,
    FunctionModel,
    Goal,
    Guardian,
    Limits,
    Reject,
    Reply,
    Runner,
    RunStatus,
    ScriptedModel,
    StopGuard,
    Terminate,
    Tool,
    ToolCall,
    decode_tool_result,
    tool,
)
from stopwise.approvals import ApprovalError
from stopwise.cli import main
from stopwise.errors import ConfigError, CyclicValue, ErrorCode
from stopwise.guardian import Condition, GuardianOutcome, QuestionSet, YesNo
from stopwise.guardian.answers import yes
from stopwise.guardian.audit import PolicyOverride, replay_all
from stopwise.guardian.evaluators.judge import JudgeEvaluator
from stopwise.guardian.policy import PolicyInputs, ThresholdPolicy
from stopwise.guardian.records import ConditionSpec, GuardianDecision, replay
from stopwise.guardrails import (
    Block,
    Guardrails,
    Rewrite,
    block_pii,
    max_output_length,
    max_tool_result_length,
    named,
    prompt_injection_guardrail,
    redact_pii,
)
from stopwise.integrations._base import Deciders
from stopwise.mcp import MCPServer
from stopwise.messages import AUTOMATED
from stopwise.models.anthropic import AnthropicModel
from stopwise.models.openai import OpenAIModel
from stopwise.step_plan import StepPlan
from stopwise.storable import needs_rule, storable
from stopwise.store.sqlite import SQLiteStore


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def _call(name: str = "add", args: Any = None) -> Reply:
    return Reply(tool_calls=(ToolCall(name, {"a": 1, "b": 2} if args is None else args, id="c1"),))


def _agent(**options: Any) -> Agent:
    options.setdefault("model", ScriptedModel(["done"]))
    return Agent("a", **options)


def _raises_config(make: Callable[[], object], field: str) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        make()
    assert info.value.field.startswith(field), info.value
    return info.value


# --- an agent is checked when it is defined ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "field", "says"),
    [
        ({"model": ScriptedModel}, "model", "the class ScriptedModel"),
        ({"stop_when": lambda: True}, "stop_when", "fn(step)"),
        ({"stop_when": [lambda step, extra: True]}, "stop_when", "fn(step)"),
        ({"on_max_steps": lambda: "out"}, "on_max_steps", "fn(ctx)"),
        ({"prepare_step": lambda ctx, more: None}, "prepare_step", "fn(ctx)"),
        ({"output_validators": [lambda: None]}, "output_validators", "fn(output)"),
        ({"history_processors": [lambda: []]}, "history_processors", "fn(messages)"),
        ({"middleware": [lambda request: request]}, "middleware", "fn(request, call_next)"),
        ({"middleware": lambda request, call_next: call_next(request)}, "middleware", "a list"),
    ],
)
def test_an_agent_refuses_a_model_class_and_functions_it_cannot_call_when_it_is_defined(
    options: dict[str, Any], field: str, says: str
) -> None:
    error = _raises_config(lambda: _agent(**options), field)
    assert says in str(error)


def test_an_output_validator_added_by_decorator_is_checked_like_the_field() -> None:
    agent = _agent()
    with pytest.raises(ConfigError, match=r"output_validators: .*fn\(output\)"):
        agent.output_validator(lambda: None)  # type: ignore[arg-type,misc]
    assert agent.output_validators == ()


def test_a_predicate_with_a_default_or_varargs_is_accepted() -> None:
    assert _agent(stop_when=lambda step, extra=1: False).stop_condition is not None
    assert _agent(stop_when=lambda *args: False).stop_condition is not None


class _SyncModel:
    def generate(self, request: object) -> Reply:
        return Reply(text="done")


class _SyncEvaluator:
    name = "sync"
    model_version = "1"

    def evaluate(self, projection: object, conditions: object) -> None:
        return None


class _SyncSource:
    name = "sync-source"

    def list_tools(self) -> list[Tool]:
        return [add]


async def _async_predicate(args: object) -> bool:
    return False


async def _async_on_event(agent: object, event: object) -> None:
    return None


async def _async_clock() -> float:
    return 0.0


@pytest.mark.parametrize(
    ("make", "field", "says"),
    [
        (lambda: _agent(model=_SyncModel()), "model", "_SyncModel.generate must be 'async def'"),
        (lambda: Guardian(evaluator=_SyncEvaluator()), "guardian.evaluator", "evaluate must be 'async def'"),
        (lambda: _agent(tools=[_SyncSource()]), "tools", "list_tools must be 'async def'"),
        (lambda: tool(name="pay", needs_approval=_async_predicate)(_fn), "tool 'pay'.needs_approval", "not async"),
        (lambda: Runner(on_event=_async_on_event), "on_event", "not async"),
        (lambda: Runner(clock=_async_clock), "clock", "plain function"),
    ],
)
def test_a_sync_method_where_the_loop_awaits_or_an_async_one_where_it_calls_is_refused_when_defined(
    make: Callable[[], object], field: str, says: str
) -> None:
    # Before: a sync generate failed every run at step 1, a sync evaluate escalated every turn, an async
    # needs_approval suspended every call (its coroutine is truthy), an async on_event never ran.
    error = _raises_config(make, field)
    assert says in str(error)


async def test_a_plain_def_middleware_may_answer_itself_or_pass_the_call_on() -> None:
    def canned(request: Any, call_next: Any) -> Reply:
        return Reply(text="from the middleware")

    def passing(request: Any, call_next: Any) -> Any:
        return call_next(request)

    answered = await Runner().run(_agent(middleware=[canned]), "hi")
    passed = await Runner().run(_agent(middleware=[passing]), "hi")
    assert (answered.status, answered.output) == (RunStatus.COMPLETED, "from the middleware")
    assert (passed.status, passed.output) == (RunStatus.COMPLETED, "done")


async def test_a_step_plan_naming_one_tool_as_a_string_fails_prepare_step_naming_the_field() -> None:
    # Before: "add" was read as the tools "a", "d", "d".
    agent = _agent(tools=[add], prepare_step=lambda ctx: StepPlan(tools="add"))  # type: ignore[arg-type]
    result = await Runner().run(agent, "hi")
    assert result.error is not None and result.error.code == ErrorCode.PREPARE_STEP_FAILED
    assert "StepPlan.tools: must be a list of tool names" in result.error.message


# --- tools -----------------------------------------------------------------------------------------------------


def _fn() -> int:
    return 1


class _Opaque:
    """A type pydantic cannot describe in JSON schema."""


def _takes_opaque(thing: _Opaque) -> int:
    return 1


@pytest.mark.parametrize(
    ("make", "field", "says"),
    [
        (lambda: tool(name=5)(_fn), "tool.name", "got 5"),
        (lambda: tool(name="")(_fn), "tool.name", "got ''"),
        (lambda: tool(name="look up")(_fn), "tool.name", "'look up'"),
        (lambda: tool(name="fs.read")(_fn), "tool.name", "'fs.read'"),
        (lambda: tool(name="добавить")(_fn), "tool.name", "letters, digits"),
        (lambda: tool(name="x" * 65)(_fn), "tool.name", "1 to 64"),
        (lambda: tool(description=5)(_fn), "tool '_fn'.description", "got 5"),
        (lambda: tool(timeout="5")(_fn), "tool '_fn'.timeout", "got '5'"),
        (lambda: tool(timeout=float("nan"))(_fn), "tool '_fn'.timeout", "nan"),
        (lambda: tool(timeout=float("inf"))(_fn), "tool '_fn'.timeout", "inf"),
        (lambda: tool(timeout=0)(_fn), "tool '_fn'.timeout", "got 0"),
        (lambda: tool(approval_ttl="60")(_fn), "tool '_fn'.approval_ttl", "got '60'"),
        (lambda: tool(needs_approval=lambda: True)(_fn), "tool '_fn'.needs_approval", "fn(args)"),
        (lambda: tool(int), "tool 'int'", "signature"),
        (lambda: tool(_takes_opaque), "tool '_takes_opaque'", "parameter 'thing'"),
    ],
)
def test_a_tool_definition_the_model_api_or_the_loop_would_trip_on_is_refused_naming_the_field(
    make: Callable[[], object], field: str, says: str
) -> None:
    error = _raises_config(make, field)
    assert says in str(error)
    assert "\n" not in str(error)  # one line, even when pydantic's own message has several


def test_a_tool_name_of_64_letters_digits_underscores_and_hyphens_is_accepted() -> None:
    name = "get-weather_2" + "x" * 51
    assert tool(name=name)(_fn).name == name


def test_a_tool_built_directly_with_a_non_pydantic_args_model_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"args_model: must be a pydantic model class"):
        Tool(name="x", description="", fn=_fn, args_model=int)  # type: ignore[arg-type]


def test_as_tool_with_an_agent_name_no_model_api_accepts_says_to_pass_a_name() -> None:
    agent = Agent("research assistant", model=ScriptedModel(["done"]))
    with pytest.raises(ConfigError, match=r"as_tool.name: .*pass as_tool\(name=\.\.\.\)"):
        agent.as_tool()
    with pytest.raises(ConfigError, match=r"as_tool\.name"):
        agent.as_tool(name=3)  # type: ignore[arg-type]
    assert agent.as_tool(name="research").name == "research"


# --- stop guards and their verdicts ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("make", "field"),
    [
        (lambda: StopGuard(lambda: None), "stop_guard.check"),  # type: ignore[arg-type]
        (lambda: StopGuard(lambda ctx: None, timeout="30"), "stop_guard.timeout"),  # type: ignore[arg-type]
        (lambda: StopGuard(lambda ctx: None, timeout=float("inf")), "stop_guard.timeout"),
        (lambda: StopGuard(lambda ctx: None, name=3), "stop_guard.name"),  # type: ignore[arg-type]
        (lambda: Continue(feedback=3), "Continue.feedback"),  # type: ignore[arg-type]
        (lambda: Continue(context="cite a source"), "Continue.context"),
        (lambda: Fail(message=3), "Fail.message"),  # type: ignore[arg-type]
    ],
)
def test_a_stop_guard_or_verdict_of_the_wrong_type_is_refused_when_made(make: Callable[[], object], field: str) -> None:
    _raises_config(make, field)


async def test_a_continue_with_one_string_as_context_is_the_guards_error_not_one_row_per_letter() -> None:
    guard = StopGuard(lambda ctx: Continue(context="cite a source"))  # type: ignore[arg-type]
    result = await Runner().run(_agent(model=ScriptedModel(["done", "again"]), stop_guard=guard), "hi")
    assert result.completion_reason == "stop_guard_error"
    assert result.stop_guard is not None and "Continue.context" in (result.stop_guard.error or "")
    assert not [m for m in result.messages if m.metadata.get(AUTOMATED)]


# --- guardrails ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("make", "field"),
    [
        (lambda: Guardrails(on_input=lambda: None), "guardrails.on_input"),
        (lambda: Guardrails(on_output=[named("rule", lambda a, b: None)]), "guardrails.on_output"),
        (lambda: Guardrails(timeout=float("inf")), "guardrails.timeout"),
        (lambda: Guardrails(timeout="30"), "guardrails.timeout"),
    ],
)
def test_a_guardrail_that_cannot_take_its_context_or_a_bad_timeout_is_refused_when_defined(
    make: Callable[[], object], field: str
) -> None:
    _raises_config(make, field)


@pytest.mark.parametrize(
    ("guardrails", "says"),
    [
        (Guardrails(on_output=lambda ctx: Block("no", replacement=3)), "Block.replacement must be a string"),  # type: ignore[arg-type]
        (Guardrails(on_tool_call=lambda ctx: Block("no", replacement=3)), "Block.replacement must be a string"),  # type: ignore[arg-type]
        (Guardrails(on_tool_result=lambda ctx: Rewrite(result=object())), "Rewrite.result cannot be serialised"),
        (Guardrails(on_tool_call=lambda ctx: Rewrite(args={"a": object(), "b": 1})), "Rewrite.args cannot be"),
    ],
)
async def test_a_guardrail_verdict_that_cannot_be_logged_fails_the_run_as_guardrail_invalid_and_ends_the_run(
    tmp_path: Path, guardrails: Guardrails, says: str
) -> None:
    store = SQLiteStore(tmp_path / "log.db")
    agent = _agent(model=ScriptedModel([_call(), "done"]), tools=[add], guardrails=guardrails)
    result = await Runner(store).run(agent, "hi", session_id="s")
    assert result.status is RunStatus.FAILED
    assert result.error is not None and result.error.code == ErrorCode.GUARDRAIL_INVALID
    assert says in result.error.message
    snapshot = await store.load_session("s")
    assert snapshot is not None and snapshot.last_run is not None
    assert snapshot.last_run.status is RunStatus.FAILED  # ended, not left "running" for a retry to redo
    await store.close()


# --- test models -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("make", "field"),
    [
        (lambda: ScriptedModel("done"), "ScriptedModel.replies"),  # type: ignore[arg-type]
        (lambda: ScriptedModel(["done", 3]), "ScriptedModel.replies"),  # type: ignore[list-item]
        (lambda: FunctionModel(3), "FunctionModel.fn"),  # type: ignore[arg-type]
        (lambda: FunctionModel(lambda: "done"), "FunctionModel.fn"),  # type: ignore[arg-type]
    ],
)
def test_a_test_model_given_the_wrong_script_or_function_is_refused_when_made(
    make: Callable[[], object], field: str
) -> None:
    _raises_config(make, field)


@pytest.mark.parametrize(
    ("make", "field"),
    [
        (lambda: OpenAIModel("m", api_key="k", timeout="30"), "model"),
        (lambda: OpenAIModel("m", api_key="k", timeout=float("nan")), "model"),
        (lambda: OpenAIModel("m", api_key="k", base_url="localhost:11434/v1"), "model"),
        (lambda: OpenAIModel("m", api_key=3), "model"),  # type: ignore[arg-type]
        (lambda: OpenAIModel("m", api_key="k", logprobs="yes"), "model"),  # type: ignore[arg-type]
        (lambda: OpenAIModel("m", api_key="k", logprobs=True, top_logprobs=50), "model"),
        (lambda: OpenAIModel("m", api_key="k", parallel_tool_calls="no"), "model"),  # type: ignore[arg-type]
        (lambda: OpenAIModel("m", api_key="k", settings=[("temperature", 0)]), "settings"),  # type: ignore[arg-type]
        (lambda: AnthropicModel("m", api_key="k", timeout=-1), "model"),
        (lambda: AnthropicModel("m", api_key="k", base_url="api.anthropic.com"), "model"),
        (lambda: JudgeEvaluator(ScriptedModel), "JudgeEvaluator.model"),  # type: ignore[arg-type]
        (lambda: JudgeEvaluator(_SyncModel()), "JudgeEvaluator.model"),  # type: ignore[arg-type]
    ],
)
def test_a_model_adapter_or_judge_given_an_option_the_sdk_would_trip_on_is_refused_when_made(
    make: Callable[[], object], field: str
) -> None:
    # Checked before the SDK is imported: these hold without the extras installed.
    _raises_config(make, field)


@pytest.mark.parametrize(
    ("make", "field"),
    [
        (lambda: max_output_length("100"), "max_output_length.n"),  # type: ignore[arg-type]
        (lambda: max_tool_result_length(None), "max_tool_result_length.n"),  # type: ignore[arg-type]
        (lambda: block_pii(phones="yes"), "block_pii.phones"),  # type: ignore[arg-type]
        (lambda: redact_pii(cards=1), "redact_pii.cards"),  # type: ignore[arg-type]
        (lambda: prompt_injection_guardrail(3), "prompt_injection_guardrail.policy"),  # type: ignore[arg-type]
    ],
)
def test_a_built_in_guardrail_given_the_wrong_kind_of_setting_is_refused_rather_than_read_as_zero_or_true(
    make: Callable[[], object], field: str
) -> None:
    # Before: max_output_length("100") clamped to 0 and emptied every answer; phones="yes" read as True.
    _raises_config(make, field)


# --- the guardian ----------------------------------------------------------------------------------------------


def _condition(**options: Any) -> Condition:
    return Condition(
        "x",
        YesNo("Is it so?"),
        **{"outcome": GuardianOutcome.STOP_FAILURE, **options},
        cost_false_stop=1,
        cost_false_continue=1,
    )


@pytest.mark.parametrize(
    ("make", "field"),
    [
        (lambda: Guardian(goal=3), "guardian.goal"),  # type: ignore[arg-type]
        (lambda: Guardian(criteria="be brief"), "guardian.criteria"),
        (lambda: Guardian(evaluator="rules"), "guardian.evaluator"),  # type: ignore[arg-type]
        (lambda: Guardian(judge=3), "guardian.judge"),  # type: ignore[arg-type]
        (lambda: Guardian(policy={"max_replans": 1}), "guardian.policy"),  # type: ignore[arg-type]
        (lambda: Guardian(history_steps=0), "guardian.history_steps"),
        (lambda: Guardian(max_chars="8000"), "guardian.max_chars"),  # type: ignore[arg-type]
        (lambda: Guardian(timeout=float("inf")), "guardian.timeout"),
        (lambda: ThresholdPolicy(max_replans="2"), "ThresholdPolicy.max_replans"),  # type: ignore[arg-type]
        (lambda: ThresholdPolicy(repeat_limit=2.5), "ThresholdPolicy.repeat_limit"),  # type: ignore[arg-type]
        (lambda: _condition(outcome="explode"), "Condition x.outcome"),
        (lambda: _condition(when="always"), "Condition x.when"),
        (lambda: _condition(delta="0.1"), "Condition x.delta"),
        (lambda: _condition(fires_on="yes"), "Condition x.fires_on"),
        (lambda: _condition(hysteresis=(1,)), "Condition x.hysteresis"),
        (lambda: QuestionSet(("integrity",)), "QuestionSet.conditions"),  # type: ignore[arg-type]
    ],
)
def test_a_guardian_policy_or_condition_field_of_the_wrong_type_is_refused_naming_it(
    make: Callable[[], object], field: str
) -> None:
    _raises_config(make, field)


def test_a_condition_outcome_given_as_its_string_becomes_the_enum_and_serialises() -> None:
    condition = _condition(outcome="stop_failure")
    assert condition.outcome is GuardianOutcome.STOP_FAILURE
    assert condition.to_data()["outcome"] == "stop_failure"


def test_limits_priced_as_must_name_a_model() -> None:
    _raises_config(lambda: Limits(priced_as=3), "limits.priced_as")  # type: ignore[arg-type]


def test_a_goal_whose_criteria_are_not_a_list_is_a_config_error_and_decode_takes_only_a_row() -> None:
    _raises_config(lambda: Goal("ship it", None), "goal.criteria")  # type: ignore[arg-type]
    _raises_config(lambda: Goal("ship it", 3), "goal.criteria")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="decode_tool_result takes a tool row"):
        decode_tool_result('{"a": 1}')  # type: ignore[arg-type]


# --- the runner and a run's arguments --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"store": "runs.db"}, "store"),
        ({"lease_seconds": "300"}, "lease_seconds"),
        ({"lease_seconds": float("inf")}, "lease_seconds"),
        ({"lease_seconds": None}, "lease_seconds"),
        ({"clock": 5}, "clock"),
        ({"on_event": lambda event: None}, "on_event"),
        ({"owner": 5}, "owner"),
    ],
)
def test_a_runner_given_the_wrong_store_clock_observer_or_lease_is_refused_when_made(
    options: dict[str, Any], field: str
) -> None:
    store = options.pop("store", None)
    _raises_config(lambda: Runner(store, **options), field)


@pytest.mark.parametrize(
    ("input", "options", "error", "says"),
    [
        (None, {}, TypeError, "input must be a str, a Message or a list of Messages, got NoneType"),
        (5, {}, TypeError, "got int"),
        ({"role": "user", "content": "hi"}, {}, TypeError, "got dict"),
        ("", {}, ConfigError, "input: is empty"),
        ("  \n", {}, ConfigError, "input: is empty"),
        ("hi", {"state": [("k", 1)]}, TypeError, "state must be a mapping"),
        ("hi", {"session_id": ""}, ConfigError, "session_id"),
        ("hi", {"session_id": 5}, ConfigError, "session_id"),
    ],
)
async def test_a_run_with_bad_input_state_or_session_id_raises_before_anything_is_written(
    tmp_path: Path, input: Any, options: dict[str, Any], error: type[Exception], says: str
) -> None:
    store = SQLiteStore(tmp_path / "log.db")
    with pytest.raises(error, match=says.replace("(", r"\(")):
        await Runner(store).run(_agent(), input, **{"session_id": "s", **options})
    assert await store.load_session("s") is None
    assert await store.count_sessions() == 0
    await store.close()


async def test_resume_with_decisions_that_are_not_a_mapping_is_an_approval_error_and_the_run_stays_suspended() -> None:
    pay = tool(name="pay", needs_approval=True)(_fn)
    runner = Runner()
    first = await runner.run(_agent(model=ScriptedModel([_call("pay", {})]), tools=[pay]), "pay", session_id="s")
    assert first.status is RunStatus.SUSPENDED
    agent = _agent(model=ScriptedModel(["paid"]), tools=[pay])
    with pytest.raises(ApprovalError, match="decisions must be a mapping"):
        await runner.resume(agent, "s", [Approve()])  # type: ignore[arg-type]
    with pytest.raises(ApprovalError, match="results must be a mapping"):
        await runner.resume(agent, "s", results=["c1"])  # type: ignore[arg-type]
    done = await runner.resume(agent, "s", {"c1": Approve()})
    assert done.status is RunStatus.COMPLETED and done.output == "paid"


@pytest.mark.parametrize(
    ("options", "error", "says"),
    [
        ({"new_session_id": ""}, ConfigError, "new_session_id"),
        ({"new_session_id": 5}, ConfigError, "new_session_id"),
        ({"state": [("k", 1)]}, TypeError, "state must be a mapping"),
    ],
)
async def test_a_fork_with_a_bad_new_session_id_or_state_raises_before_anything_is_written(
    tmp_path: Path, options: dict[str, Any], error: type[Exception], says: str
) -> None:
    store = SQLiteStore(tmp_path / "log.db")
    runner = Runner(store)
    await runner.run(_agent(model=ScriptedModel([_call(), "done"]), tools=[add]), "hi", session_id="s")
    with pytest.raises(error, match=says):
        await runner.fork(_agent(tools=[add]), "s", 1, **options)
    assert await store.count_sessions() == 1
    await store.close()


@pytest.mark.parametrize(
    ("make", "says"),
    [
        (lambda: Reject(3), "Reject.message must be a string"),  # type: ignore[arg-type]
        (lambda: Terminate(3), "Terminate.reason must be a string"),  # type: ignore[arg-type]
        (lambda: Approve(reviewer=3), "Approve.reviewer must be a string or None"),  # type: ignore[arg-type]
        (lambda: Approve(args_hash=b"abc"), "Approve.args_hash must be a string or None"),  # type: ignore[arg-type]
    ],
)
def test_an_approval_decision_with_a_field_of_the_wrong_type_is_refused_when_made(
    make: Callable[[], object], says: str
) -> None:
    with pytest.raises(ApprovalError, match=says):
        make()


@pytest.mark.parametrize("now", ["soon", float("nan"), True])
async def test_expire_with_a_now_that_is_not_unix_seconds_is_a_config_error_and_the_run_stays_suspended(
    now: Any,
) -> None:
    pay = tool(name="pay", needs_approval=True, approval_ttl=10)(_fn)
    runner = Runner(clock=lambda: 1000.0)
    await runner.run(_agent(model=ScriptedModel([_call("pay", {})]), tools=[pay]), "pay", session_id="s")
    with pytest.raises(ConfigError, match="now: must be Unix seconds"):
        await runner.expire("s", now=now)
    with pytest.raises(ConfigError, match="now: must be Unix seconds"):
        await runner.expire_all(now=now)
    snapshot = await runner.store.load_session("s")
    assert snapshot is not None and snapshot.last_run is not None
    assert snapshot.last_run.status is RunStatus.SUSPENDED


# --- MCP servers and the peer integrations ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("make", "field"),
    [
        (lambda: MCPServer.stdio(3), "MCPServer.stdio.command"),  # type: ignore[arg-type]
        (lambda: MCPServer.stdio("python", "server.py"), "MCPServer.stdio.args"),
        (lambda: MCPServer.http("localhost:8000/mcp"), "MCPServer.http.url"),
        (lambda: MCPServer.http("http://127.0.0.1:9/mcp", timeout="5"), "mcp server"),
        (lambda: MCPServer.http("http://127.0.0.1:9/mcp", needs_approval="delete"), "mcp server"),
    ],
)
def test_an_mcp_server_given_a_lone_string_for_a_list_or_a_bad_url_is_refused_when_made(
    make: Callable[[], object], field: str
) -> None:
    _raises_config(make, field)


@pytest.mark.parametrize(
    ("options", "field"),
    [({"store": "runs.db"}, "store"), ({"agent": ""}, "agent"), ({"risks": ["search"]}, "risks")],
)
def test_the_deciders_of_a_peer_integration_refuse_a_wrong_store_name_or_risks(
    options: dict[str, Any], field: str
) -> None:
    given: dict[str, Any] = {"stop_guard": None, "guardrails": None, "guardian": None, "store": None}
    given |= {"agent": "peer", "risks": None} | options
    _raises_config(lambda: Deciders.of(**given), field)


# --- the command line ------------------------------------------------------------------------------------------


def test_stopwise_run_on_a_file_that_exits_while_imported_is_a_load_error_not_a_silent_exit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "script.py").write_text("import sys\nsys.exit(3)\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert main(["run", "script.py:agent", "Hi"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("stopwise run: error: importing script.py called sys.exit(3)")
    assert "if __name__ == '__main__'" in err


def test_stopwise_run_with_an_empty_goal_exits_2_naming_it_rather_than_running_without_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "agents.py").write_text(
        "from stopwise import Agent, ScriptedModel\nagent = Agent('a', model=ScriptedModel(['done']))\n",
        encoding="utf-8",
    )
    monkeypatch.chdir(tmp_path)
    assert main(["run", "agents.py:agent", "Hi", "--goal", ""]) == 2
    assert "goal.text: must be a non-empty string" in capsys.readouterr().err


# --- replay of a record another version wrote; values that contain themselves -------------------------------


def _replan_decision(policy: dict[str, Any]) -> GuardianDecision:
    """A turn on which stagnation held (p 0.9 over its 0.5 threshold), recorded under ``policy``."""
    spec = ConditionSpec("stagnation", GuardianOutcome.REPLAN, 0.5, 0.05, ("yes",), None)
    return GuardianDecision(
        run_id="r1",
        step=3,
        kind="turn",
        call_id=None,
        state_hash="h",
        question_set_version="qs",
        evaluator="fixed",
        model_version="1",
        answers={"stagnation": yes(0.9)},
        conditions=(spec,),
        policy=policy,
        inputs=PolicyInputs({"stagnation": ()}, 0, 0),
        outcome=GuardianOutcome.STOP_FAILURE,
        reason="replans",
        latency_ms=0.5,
    )


def test_replaying_a_record_whose_policy_has_a_setting_this_version_lacks_is_a_config_error_naming_it() -> None:
    newer = _replan_decision({**ThresholdPolicy(max_replans=0).to_data(), "replan_cooldown": 4})
    with pytest.raises(ConfigError, match=r"run r1, step 3.*\['replan_cooldown'\].*newer stopwise"):
        replay(newer)
    # The what-if path reads the recorded policy too, and says the same.
    with pytest.raises(ConfigError, match="replan_cooldown"):
        replay_all([newer], PolicyOverride.from_data({"policy": {"max_replans": 3}}))


def test_replaying_an_older_record_without_a_setting_takes_that_settings_documented_default() -> None:
    # Recorded before budget_nearly_spent existed: the rest of its policy still decides.
    older = _replan_decision(
        {k: v for k, v in ThresholdPolicy(max_replans=0).to_data().items() if k != "budget_nearly_spent"}
    )
    assert replay(older).outcome is GuardianOutcome.STOP_FAILURE
    # With no max_replans recorded, the documented default (2 replans) lets this one replan.
    assert replay(_replan_decision({})).outcome is GuardianOutcome.REPLAN


def test_a_policy_file_with_a_setting_threshold_policy_lacks_is_refused_naming_it() -> None:
    with pytest.raises(ConfigError, match=r"policy file: policy.*max_replan\b"):
        PolicyOverride.from_data({"policy": {"max_replan": 3}})


def _cyclic_list() -> list[Any]:
    loop: list[Any] = ["a"]
    loop.append({"next": loop})
    return loop


def test_storable_of_a_value_that_contains_itself_raises_cyclic_value_naming_the_cycle() -> None:
    with pytest.raises(
        CyclicValue, match=r"the result of call c1 contains itself: \[1\]\['next'\] is the value itself"
    ):
        storable(_cyclic_list(), where="the result of call c1")
    with pytest.raises(CyclicValue):
        needs_rule({"deep": _cyclic_list()})


def test_storable_refuses_a_cycle_even_after_a_string_it_must_replace() -> None:
    # The check stops at the first string to replace; the walk that replaces it must not then loop on the cycle.
    loop: list[Any] = ["\ud800"]
    loop.append(loop)
    with pytest.raises(CyclicValue, match=r"\[1\] is the value itself"):
        storable(loop)


def test_a_container_shared_in_two_places_is_not_a_cycle_and_is_still_cleaned() -> None:
    shared = ["ok", "\x00"]
    value = {"a": shared, "b": [shared, shared], "c": ()}
    assert needs_rule(value)
    out = storable(value)
    assert out["a"] == out["b"][0] == out["b"][1] == ["ok", "\ufffd"]
    clean = {"a": ["ok"], "b": ()}
    clean["c"] = clean["a"]
    assert storable(clean) is clean


def test_a_cyclic_value_error_survives_pickling_with_its_fields() -> None:
    err = pickle.loads(pickle.dumps(CyclicValue("the state", "[0] is the value itself")))
    assert (err.where, err.path) == ("the state", "[0] is the value itself")


async def test_a_tool_returning_a_value_that_contains_itself_gets_an_error_row_and_the_run_goes_on(
    tmp_path: Path,
) -> None:
    @tool
    def loops() -> list[Any]:
        """Return a list that contains itself."""
        return _cyclic_list()

    model = ScriptedModel([Reply(tool_calls=[ToolCall("loops", {}, id="c1")]), Reply(text="done")])
    store = SQLiteStore(tmp_path / "db.sqlite")
    try:
        result = await Runner(store=store).run(Agent("looper", model=model, tools=[loops]), "go")
    finally:
        await store.close()
    assert result.output == "done"
    row = next(m for m in result.messages if m.tool_call_id == "c1")
    assert "cannot be serialised to JSON" in row.content and "contains itself: [1]['next']" in row.content
