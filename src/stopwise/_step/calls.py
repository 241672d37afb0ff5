"""A step's tool calls: planned (arguments, tool-call guardrails, the guardian's risk gate, the approval gate),
executed concurrently, then judged by the tool-result guardrails, all before anything reaches the log."""

from __future__ import annotations

import asyncio
from dataclasses import replace

from stopwise._leg import CallPlan, Leg
from stopwise._step.guardian import consult_call
from stopwise.context import RunContext
from stopwise.errors import ErrorCategory, ErrorCode, ErrorDetail
from stopwise.guardian.conditions import GuardianOutcome
from stopwise.guardrails.hooks import ToolCallContext, ToolResultContext, run_chain
from stopwise.guardrails.verdicts import GuardrailError, GuardrailRaised, GuardrailTimeout, Hook
from stopwise.messages import (
    ORIGIN,
    TOOL_ERROR,
    Message,
    Reply,
    Role,
    ToolCall,
    decode_tool_result,
    encode_tool_result,
    error_tool_result,
)
from stopwise.records import LogRecord, ToolReceipt
from stopwise.stop.decision import Phase
from stopwise.tools import parse_args

__all__ = ["CallerCodeFailed", "caller_failure", "execute_calls", "guard_results", "plan_calls"]


NO_TOOLS_NOW = "Tools are disabled now: reply with a final answer only."


class CallerCodeFailed(Exception):
    """Caller code (a guardrail, an approval predicate) failed mid-step: the run ends with this detail."""

    def __init__(self, detail: ErrorDetail) -> None:
        super().__init__(detail.message)
        self.detail = detail


def caller_failure(exc: Exception) -> ErrorDetail:
    code = ErrorCode.GUARDRAIL_RAISED
    if isinstance(exc, GuardrailError):
        code = ErrorCode.GUARDRAIL_INVALID
    elif isinstance(exc, GuardrailTimeout):
        code = ErrorCode.GUARDRAIL_TIMEOUT
    return ErrorDetail(code, str(exc), ErrorCategory.CALLER, retryable=False)


async def plan_calls(leg: Leg, step: int, reply: Reply, phase: Phase, records: list[LogRecord]) -> list[CallPlan]:
    """Parse each call, run the tool-call guardrails, and ask the approval gate; nothing executes yet."""
    if phase is not Phase.NORMAL:
        return [
            CallPlan(c, None, None, error_tool_result(NO_TOOLS_NOW, tool_call_id=c.id, origin="stopwise"))
            for c in reply.tool_calls
        ]
    history = (*leg.messages, Message(Role.ASSISTANT, reply.text, reply.tool_calls))
    return [await _plan(leg, step, call, history, records) for call in reply.tool_calls]


async def _plan(
    leg: Leg, step: int, call: ToolCall, history: tuple[Message, ...], records: list[LogRecord]
) -> CallPlan:
    """One call: its tool and arguments, the tool-call guardrails, the risk gate, the approval gate."""
    tool_map = leg.agent.tool_map
    t = tool_map.get(call.name)
    if t is None:
        message = f"Unknown tool '{call.name}'. Available tools: {', '.join(tool_map) or 'none'}"
        return CallPlan(call, None, None, error_tool_result(message, tool_call_id=call.id, origin="stopwise"))
    args = parse_args(call, t.name)
    if isinstance(args, Message):
        return CallPlan(call, t, None, args)
    guardrails = leg.agent.guardrails
    if guardrails is not None and guardrails.has(Hook.TOOL_CALL):
        run = leg.run
        try:
            chain = await run_chain(
                guardrails,
                Hook.TOOL_CALL,
                args,
                lambda a: ToolCallContext(
                    history, step, run.session_id, run.run_id, leg.runtime_context, replace(call, args=a)
                ),
                step=step,
                tool_call_id=call.id,
            )
        except (GuardrailRaised, GuardrailError) as exc:
            raise CallerCodeFailed(caller_failure(exc)) from exc
        records.extend(chain.records)
        if chain.block is not None:
            # A verdict, not a tool failure: the model reads it, it never reaches approval, and it does not count
            # toward the runaway-error guard.
            message = f"Blocked by guardrail '{chain.blocked_by}': {chain.block.reason}"
            return CallPlan(
                call, t, args, error_tool_result(message, tool_call_id=call.id, origin="stopwise", denied=True)
            )
        args = chain.value
    gate = None
    if leg.agent.guardian is not None and leg.agent.guardian.call_conditions:
        consultation = await consult_call(leg, step, [history[-1]], replace(call, args=dict(args)))
        records.extend([consultation.decision, *consultation.labels])
        # The risk gate runs before the approval gate: an escalation here is an approval request.
        if consultation.decision.outcome is GuardianOutcome.ESCALATE:
            gate = consultation.decision
    try:
        needs = gate is not None or t.requires_approval(args)
    except Exception as exc:
        detail = f"needs_approval of tool '{t.name}' raised {type(exc).__name__}: {exc}"
        error = ErrorDetail(ErrorCode.APPROVAL_PREDICATE_RAISED, detail, ErrorCategory.CALLER, retryable=False)
        raise CallerCodeFailed(error) from exc
    return CallPlan(call, t, args, needs_approval=needs, gate=gate)


async def execute_calls(leg: Leg, step: int, plans: list[CallPlan]) -> list[Message]:
    """Run every call that has no answer yet, concurrently; answers keep the calls' order."""
    run = leg.run

    async def one(plan: CallPlan) -> Message:
        if plan.row is not None:
            return plan.row
        assert plan.tool is not None and plan.args is not None
        ctx = RunContext(run.session_id, run.run_id, step, plan.call.id, leg.state, leg.runner, leg.runtime_context)
        return await plan.tool.invoke(plan.call, ctx, plan.args)

    if len(plans) == 1:
        return [await one(plans[0])]
    return list(await asyncio.gather(*(one(p) for p in plans)))


async def guard_results(
    leg: Leg, step: int, plans: list[CallPlan], rows: list[Message], records: list[LogRecord]
) -> list[Message]:
    """Tool-result guardrails, per result in call order, once the whole batch settled. Only output a tool
    produced is judged; a rewrite or block keeps the raw result in a receipt record for audit."""
    guardrails = leg.agent.guardrails
    if guardrails is None or not guardrails.has(Hook.TOOL_RESULT):
        return rows
    run = leg.run
    history = tuple(leg.messages)
    guarded = []
    for plan, row in zip(plans, rows, strict=True):
        if plan.row is not None or row.metadata.get(ORIGIN) == "stopwise":
            guarded.append(row)
            continue
        is_error = bool(row.metadata.get(TOOL_ERROR))
        this = replace(plan.call, args=dict(plan.args or {}))
        try:
            chain = await run_chain(
                guardrails,
                Hook.TOOL_RESULT,
                decode_tool_result(row),
                lambda value, this=this, is_error=is_error: ToolResultContext(  # type: ignore[misc]
                    history, step, run.session_id, run.run_id, leg.runtime_context, this, value, is_error
                ),
                step=step,
                tool_call_id=plan.call.id,
            )
        except (GuardrailRaised, GuardrailError) as exc:
            raise CallerCodeFailed(caller_failure(exc)) from exc
        if not chain.records:
            guarded.append(row)
            continue
        records.extend(chain.records)
        records.append(ToolReceipt(plan.call.id, row.content, dict(row.metadata)))
        if chain.block is not None:
            message = f"Blocked by guardrail '{chain.blocked_by}': {chain.block.reason}"
            guarded.append(error_tool_result(message, tool_call_id=plan.call.id, origin="stopwise"))
        else:
            new = encode_tool_result(chain.value, tool_call_id=plan.call.id)
            if is_error:
                new = replace(new, metadata={**new.metadata, TOOL_ERROR: True, ORIGIN: "tool"})
            guarded.append(new)
    return guarded
