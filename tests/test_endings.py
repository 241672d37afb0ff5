"""Every way a run can end, through the public API on a real SQLite log: one scenario per ``CompletionReason``.

The guard test below fails when a member is added without a scenario here, so a new ending cannot ship unexercised.
Each scenario reads the outcome back from the store as well as from the result: the run record and the result
must agree, since ``apply_decision`` is the one writer of both.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from pydantic import BaseModel

from stopwise import (
    Agent,
    CompletionReason,
    Continue,
    FunctionModel,
    Guardian,
    Guardrails,
    Limits,
    Reply,
    Runner,
    RunStatus,
    ScriptedModel,
    SQLiteStore,
    StopGuard,
    StopGuardContext,
    StopReason,
    Terminate,
    ToolCall,
    Usage,
    has_tool_call,
    tool,
)
from stopwise.errors import ErrorCode, ModelError
from stopwise.guardian.evaluators.scripted import ScriptedEvaluator
from stopwise.guardrails import Block, InputContext, OutputContext
from stopwise.models import ModelRequest


@tool
def lookup(q: str) -> str:
    """Look something up."""
    return f"found {q}"


@tool
def done() -> str:
    """Say the work is done."""
    return "ok"


@tool(needs_approval=True)
def transfer(to: str, amount: int) -> str:
    """Move money (a human approves every call)."""
    return f"sent {amount} to {to}"


@tool(needs_approval=True, approval_ttl=60)
def slow_transfer(to: str, amount: int) -> str:
    """Move money (an approval lapses after a minute)."""
    return f"sent {amount} to {to}"


def call(name: str = "lookup", call_id: str = "c1", **args: object) -> Reply:
    return Reply(tool_calls=[ToolCall(name, args or ({"q": "x"} if name == "lookup" else {}), id=call_id)])


class Total(BaseModel):
    total: int


QUIET: dict[str, float | dict[str, float]] = {
    "integrity": 0.0,
    "risk": {"read_only": 1.0},
    "infeasible": 0.0,
    "goal_reached": 0.0,
    "drift": {"0": 1.0},
    "stagnation": 0.0,
}
"""A scripted evaluator item that fires nothing, for whichever question set (pre-execution or turn) it is asked."""


@dataclass(frozen=True)
class Ending:
    """What one scenario ended with: the result's view, and the run record's view from the store."""

    status: RunStatus
    reason: CompletionReason | None
    code: str | None


Scenario = Callable[[SQLiteStore], Awaitable[Ending]]


async def _run(store: SQLiteStore, agent: Agent, prompt: str = "go") -> Ending:
    result = await Runner(store).run(agent, prompt, session_id="s")
    record = (await store.list_runs("s"))[-1]
    ending = Ending(result.status, result.completion_reason, result.error.code if result.error else None)
    stored = Ending(record.status, record.completion_reason, record.error.code if record.error else None)
    assert stored == ending, "the run record and the result disagree"
    return ending


async def final_answer(store: SQLiteStore) -> Ending:
    return await _run(store, Agent("a", "", ScriptedModel([call(), "found it"]), tools=[lookup]))


async def output(store: SQLiteStore) -> Ending:
    return await _run(store, Agent("a", "", ScriptedModel(['{"total": 3}']), output_type=Total))


async def stop_when(store: SQLiteStore) -> Ending:
    model = ScriptedModel([call("done")])
    return await _run(store, Agent("a", "", model, tools=[done], stop_when=has_tool_call("done")))


async def tool_output(store: SQLiteStore) -> Ending:
    model = ScriptedModel([call("done")])
    return await _run(store, Agent("a", "", model, tools=[done], stop_at_tools=[done]))


async def tool_call_limit(store: SQLiteStore) -> Ending:
    model = ScriptedModel([Reply(tool_calls=[ToolCall("lookup", {"q": "a"}, id="a"), ToolCall("lookup", {"q": "b"})])])
    return await _run(store, Agent("a", "", model, tools=[lookup], limits=Limits(tool_calls=1)))


def _costly(n: int = 1) -> ScriptedModel:
    return ScriptedModel([replace(call(call_id=f"c{i}"), usage=Usage(1000, 500)) for i in range(n)] + ["done"])


async def token_limit(store: SQLiteStore) -> Ending:
    return await _run(store, Agent("a", "", _costly(), tools=[lookup], limits=Limits(total_tokens=1000)))


async def cost_limit(store: SQLiteStore) -> Ending:
    limits = Limits(cost=0.001, priced_as="openai:gpt-4.1-mini")
    return await _run(store, Agent("a", "", _costly(), tools=[lookup], limits=limits))


async def time_limit(store: SQLiteStore) -> Ending:
    async def hangs(request: ModelRequest) -> Reply:
        await asyncio.Event().wait()  # never set: only the step's time limit ends this call
        raise AssertionError

    return await _run(store, Agent("a", "", FunctionModel(hangs), limits=Limits(step_seconds=0.05)))


async def max_steps(store: SQLiteStore) -> Ending:
    return await _run(store, Agent("a", "", ScriptedModel([call(), call(call_id="c2")]), tools=[lookup], max_steps=2))


def _stopped(reason: StopReason) -> Scenario:
    async def scenario(store: SQLiteStore) -> Ending:
        return await _run(store, Agent("a", "", ScriptedModel([Reply(text="partial", stop_reason=reason)])))

    return scenario


async def model_failure(store: SQLiteStore) -> Ending:
    def fail(request: ModelRequest) -> Reply:
        raise ModelError("upstream 503", provider="test", status=503, retryable=True)

    return await _run(store, Agent("a", "", FunctionModel(fail)))


async def caller_failure(store: SQLiteStore) -> Ending:
    def broken(ctx: OutputContext) -> None:
        raise RuntimeError("guardrail bug")

    return await _run(store, Agent("a", "", ScriptedModel(["answer"]), guardrails=Guardrails(on_output=broken)))


async def cancelled(store: SQLiteStore) -> Ending:
    gate, entered = asyncio.Event(), asyncio.Event()

    @tool
    async def block() -> str:
        """Never returns: the gate is never opened."""
        entered.set()
        await gate.wait()
        return "released"

    agent = Agent("a", "", ScriptedModel([call("block"), "never"]), tools=[block])
    task = asyncio.create_task(Runner(store).run(agent, "go", session_id="s"))
    await entered.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    record = (await store.list_runs("s"))[-1]
    return Ending(record.status, record.completion_reason, record.error.code if record.error else None)


async def stop_guard_exhausted(store: SQLiteStore) -> Ending:
    guard = StopGuard(lambda ctx: Continue("check again"), max_continues=1)
    return await _run(store, Agent("a", "", ScriptedModel(["first", "second"]), stop_guard=guard))


async def stop_guard_error(store: SQLiteStore) -> Ending:
    def broken(ctx: StopGuardContext) -> None:
        raise RuntimeError("guard bug")

    return await _run(store, Agent("a", "", ScriptedModel(["answer"]), stop_guard=StopGuard(broken)))


async def max_steps_wrapped_up(store: SQLiteStore) -> Ending:
    model = ScriptedModel([call(), "the summary"])
    return await _run(store, Agent("a", "", model, tools=[lookup], max_steps=1, on_max_steps="wrap_up"))


async def max_steps_handled(store: SQLiteStore) -> Ending:
    agent = Agent("a", "", ScriptedModel([call()]), tools=[lookup], max_steps=1, on_max_steps=lambda ctx: "partial")
    return await _run(store, agent)


async def guardrail_input(store: SQLiteStore) -> Ending:
    def no_secrets(ctx: InputContext) -> Block | None:
        return Block("secret in input") if "secret" in ctx.messages[-1].content else None

    model = ScriptedModel([])  # never asked: the block comes before any model call
    return await _run(store, Agent("a", "", model, guardrails=Guardrails(on_input=no_secrets)), "my secret")


async def guardrail_output(store: SQLiteStore) -> Ending:
    guardrails = Guardrails(on_output=lambda ctx: Block("leak", replacement="[withheld]"))
    return await _run(store, Agent("a", "", ScriptedModel(["the password"]), guardrails=guardrails))


def _payer() -> Agent:
    return Agent("a", "", ScriptedModel([call("transfer", to="bob", amount=5), "paid"]), tools=[transfer])


async def awaiting_approval(store: SQLiteStore) -> Ending:
    return await _run(store, _payer())


async def approval_terminated(store: SQLiteStore) -> Ending:
    agent = _payer()
    runner = Runner(store)
    suspended = await runner.run(agent, "pay bob", session_id="s")
    assert suspended.status is RunStatus.SUSPENDED
    result = await runner.resume(agent, "s", {"c1": Terminate("fraud")})
    record = (await store.list_runs("s"))[-1]
    assert (record.status, record.completion_reason) == (result.status, result.completion_reason)
    return Ending(result.status, result.completion_reason, result.error.code if result.error else None)


async def approval_expired(store: SQLiteStore) -> Ending:
    agent = Agent("a", "", ScriptedModel([call("slow_transfer", to="bob", amount=5)]), tools=[slow_transfer])
    runner = Runner(store, clock=lambda: 1000.0)
    suspended = await runner.run(agent, "pay bob", session_id="s")
    assert suspended.status is RunStatus.SUSPENDED
    result = await runner.expire("s", now=1000.0 + 61)
    record = (await store.list_runs("s"))[-1]
    assert (record.status, record.completion_reason) == (result.status, result.completion_reason)
    return Ending(result.status, result.completion_reason, result.error.code if result.error else None)


async def goal_reached(store: SQLiteStore) -> Ending:
    evaluator = ScriptedEvaluator([{**QUIET, "goal_reached": 0.99}] * 4)
    model = ScriptedModel([call(), "never asked"])
    return await _run(store, Agent("a", "", model, tools=[lookup], guardian=Guardian(evaluator)))


async def infeasible(store: SQLiteStore) -> Ending:
    evaluator = ScriptedEvaluator([{**QUIET, "infeasible": 0.99}] * 4)
    model = ScriptedModel([call(), "never asked"])
    return await _run(store, Agent("a", "", model, tools=[lookup], guardian=Guardian(evaluator)))


OK, FAILED, CANCELLED, SUSPENDED = RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED, RunStatus.SUSPENDED
R = CompletionReason

ENDINGS: list[tuple[str, Scenario, Ending]] = [
    ("final_answer", final_answer, Ending(OK, R.FINAL_ANSWER, None)),
    ("output", output, Ending(OK, R.OUTPUT, None)),
    ("stop_when", stop_when, Ending(OK, R.STOP_WHEN, None)),
    ("tool_output", tool_output, Ending(OK, R.TOOL_OUTPUT, None)),
    ("tool_call_limit", tool_call_limit, Ending(FAILED, R.TOOL_CALL_LIMIT, ErrorCode.TOOL_CALL_LIMIT)),
    ("token_limit", token_limit, Ending(FAILED, R.TOKEN_LIMIT, ErrorCode.TOKEN_LIMIT)),
    ("cost_limit", cost_limit, Ending(FAILED, R.COST_LIMIT, ErrorCode.COST_LIMIT)),
    ("time_limit", time_limit, Ending(FAILED, R.TIME_LIMIT, ErrorCode.TIME_LIMIT)),
    ("max_steps", max_steps, Ending(FAILED, R.MAX_STEPS, ErrorCode.MAX_STEPS_EXHAUSTED)),
    ("max_tokens", _stopped(StopReason.MAX_TOKENS), Ending(FAILED, R.MAX_TOKENS, ErrorCode.MAX_TOKENS)),
    (
        "content_filter",
        _stopped(StopReason.CONTENT_FILTER),
        Ending(FAILED, R.CONTENT_FILTER, ErrorCode.CONTENT_FILTER),
    ),
    ("refusal", _stopped(StopReason.REFUSAL), Ending(FAILED, R.REFUSAL, ErrorCode.REFUSAL)),
    ("error_stop_reason", _stopped(StopReason.ERROR), Ending(FAILED, R.ERROR, ErrorCode.MODEL_ERROR)),
    ("model_failure", model_failure, Ending(FAILED, R.ERROR, ErrorCode.MODEL_ERROR)),
    ("caller_failure", caller_failure, Ending(FAILED, R.ERROR, ErrorCode.GUARDRAIL_RAISED)),
    ("cancelled", cancelled, Ending(CANCELLED, R.CANCELLED, ErrorCode.CANCELLED)),
    ("stop_guard_exhausted", stop_guard_exhausted, Ending(OK, R.STOP_GUARD_EXHAUSTED, None)),
    ("stop_guard_error", stop_guard_error, Ending(OK, R.STOP_GUARD_ERROR, None)),
    ("max_steps_wrapped_up", max_steps_wrapped_up, Ending(OK, R.MAX_STEPS_WRAPPED_UP, None)),
    ("max_steps_handled", max_steps_handled, Ending(OK, R.MAX_STEPS_HANDLED, None)),
    ("guardrail_input", guardrail_input, Ending(OK, R.GUARDRAIL_INPUT, None)),
    ("guardrail_output", guardrail_output, Ending(OK, R.GUARDRAIL_OUTPUT, None)),
    ("awaiting_approval", awaiting_approval, Ending(SUSPENDED, R.AWAITING_APPROVAL, None)),
    (
        "approval_terminated",
        approval_terminated,
        Ending(CANCELLED, R.APPROVAL_TERMINATED, ErrorCode.APPROVAL_TERMINATED),
    ),
    ("goal_reached", goal_reached, Ending(OK, R.GOAL_REACHED, None)),
    ("infeasible", infeasible, Ending(FAILED, R.INFEASIBLE, ErrorCode.INFEASIBLE)),
    ("approval_expired", approval_expired, Ending(FAILED, R.APPROVAL_EXPIRED, ErrorCode.APPROVAL_EXPIRED)),
]


@pytest.mark.parametrize(("scenario", "expected"), [(s, e) for _, s, e in ENDINGS], ids=[n for n, _, _ in ENDINGS])
async def test_each_scenario_ends_the_run_with_its_status_reason_and_error_code(
    tmp_path: Path, scenario: Scenario, expected: Ending
) -> None:
    store = SQLiteStore(tmp_path / "log.db")
    try:
        assert await scenario(store) == expected
    finally:
        await store.close()


def test_every_completion_reason_has_a_scenario() -> None:
    assert {e.reason for _, _, e in ENDINGS} == set(CompletionReason)
