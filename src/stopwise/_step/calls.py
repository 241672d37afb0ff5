"""A step's tool calls: planned (arguments, tool-call guardrails, the guardian's risk gate, the approval gate),
executed concurrently, then judged by the tool-result guardrails, all before anything reaches the log."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from stopwise._leg import CallPlan, Leg
from stopwise._step.guardian import consult_call, note_redacted
from stopwise.context import RunContext
from stopwise.errors import ErrorCategory, ErrorCode, ErrorDetail
from stopwise.guardian.conditions import GuardianOutcome
from stopwise.guardian.records import GuardianDecision
from stopwise.guardrails.hooks import Guardrails, ToolCallContext, ToolResultContext, run_chain
from stopwise.guardrails.receipts import tool_receipt, withheld_receipt
from stopwise.guardrails.verdicts import GuardrailError, GuardrailRaised, GuardrailTimeout, Hook
from stopwise.history_view import HistoryView
from stopwise.messages import (
    ORIGIN,
    TOOL_ERROR,
    Message,
    Reply,
    Role,
    ToolCall,
    Usage,
    decode_tool_result,
    encode_tool_result,
    error_tool_result,
)
from stopwise.records import LogRecord
from stopwise.row_copies import own_args, own_call
from stopwise.stop.decision import Phase
from stopwise.tool_switches import ToolSwitchRecord
from stopwise.tools import Tool, ToolUnavailable, parse_args

__all__ = [
    "CallerCodeFailed",
    "caller_failure",
    "execute_calls",
    "guard_results",
    "list_sources",
    "plan_calls",
    "plans_now",
]


NO_TOOLS_NOW = "Tools are disabled now: reply with a final answer only."


class CallerCodeFailed(Exception):
    """Caller code (a guardrail, an approval predicate), or the server behind a tool, failed mid-step: the run
    ends with this detail and nothing of the step commits."""

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


def unavailable(exc: ToolUnavailable) -> ErrorDetail:
    """A tool's server could not be reached: the run fails, and a retry (once it is back) may succeed."""
    return ErrorDetail(ErrorCode.TOOL_UNAVAILABLE, str(exc), ErrorCategory.TOOL, retryable=True)


def source_failed(source: str, problem: str, *, raised: Exception | None = None) -> ErrorDetail:
    """A tool source's ``list_tools`` raised (``raised``: a tool-side failure, retryable when transient, as a model's
    unclassified exception is) or listed what is not a ``Tool`` (the source's code is wrong: not retryable)."""
    message = f"tool source {source!r} failed to list its tools: {problem}"
    if raised is None:
        return ErrorDetail(ErrorCode.TOOL_SOURCE_FAILED, message, ErrorCategory.CALLER, False, {"source": source})
    transient = isinstance(raised, TimeoutError | ConnectionError)
    details = {"source": source, "exception": type(raised).__name__}
    return ErrorDetail(ErrorCode.TOOL_SOURCE_FAILED, message, ErrorCategory.TOOL, transient, details)


async def list_sources(leg: Leg) -> ErrorDetail | None:
    """List the agent's tool sources once for this leg and add their tools to the leg's; the failure that ends
    the leg when a source cannot be reached, raises, lists what is not a ``Tool``, or offers a name the agent
    already has."""
    for source in leg.agent.tool_sources:
        try:
            listed = await source.list_tools()
        except ToolUnavailable as exc:
            return unavailable(exc)
        except Exception as exc:
            return source_failed(source.name, f"{type(exc).__name__}: {exc}", raised=exc)
        if isinstance(listed, str | bytes | Mapping) or not isinstance(listed, Iterable):
            return source_failed(source.name, f"listed {type(listed).__name__}, not a sequence of Tool")
        for t in listed:
            if not isinstance(t, Tool):
                return source_failed(source.name, f"listed a {type(t).__name__} ({t!r:.60}), not a Tool")
            if t.name in leg.tools:
                message = f"tool {t.name!r} of {source.name!r} has the name of another tool of agent {leg.agent.name!r}"
                return ErrorDetail(ErrorCode.TOOL_NAME_CLASH, message, ErrorCategory.CALLER, retryable=False)
            leg.tools[t.name] = t
    if leg.agent.tool_sources:
        leg.tool_specs = tuple(t.spec for t in leg.tools.values())
        # A resumed step was planned before this leg listed its sources: its approved calls find their tools now.
        for plan in leg.settle.plans if leg.settle is not None else ():
            if plan.tool is None and plan.row is None:
                plan.tool = leg.tools.get(plan.call.name)
                if plan.tool is None:
                    message = f"Tool '{plan.call.name}' is no longer offered by its server"
                    plan.row = error_tool_result(message, tool_call_id=plan.call.id, origin="stopwise")
    return None


def plans_now(leg: Leg, reply: Reply, phase: Phase, *, offered: frozenset[str] | None = None) -> list[CallPlan] | None:
    """``plan_calls``' answer when it has nothing to await (a forced phase, or no tool-call guardrail and no risk
    gate: the common step); None when it has."""
    if phase is not Phase.NORMAL:
        return [
            CallPlan(c, None, None, error_tool_result(NO_TOOLS_NOW, tool_call_id=c.id, origin="stopwise"))
            for c in reply.tool_calls
        ]
    guardrails, guardian = leg.guardrails, leg.agent.guardian
    if (guardrails is not None and guardrails.has(Hook.TOOL_CALL)) or (
        guardian is not None and guardian.call_conditions
    ):
        return None
    plans = []
    for call in reply.tool_calls:
        if offered is not None and call.name not in offered and call.name in leg.tools:
            plans.append(CallPlan(call, None, None, _not_offered(call, offered)))
        else:
            found = _resolved(leg, call)
            plans.append(found if isinstance(found, CallPlan) else _approval(call, *found, None))
    return plans


async def plan_calls(
    leg: Leg,
    step: int,
    reply: Reply,
    phase: Phase,
    records: list[LogRecord],
    *,
    offered: frozenset[str] | None = None,
    row: Message | None = None,
) -> list[CallPlan]:
    """Parse each call, run the tool-call guardrails, and ask the approval gate; nothing executes yet. A call to a
    tool outside ``offered`` (the step's plan narrowed the tools) is answered with an error row. ``row``: the reply
    as its history row, when the caller has it already."""
    now = plans_now(leg, reply, phase, offered=offered)
    if now is not None:
        return now
    if row is None:
        row = Message(Role.ASSISTANT, reply.text, reply.tool_calls)
    guardrails = leg.guardrails
    # Only a tool-call guardrail reads the whole history.
    history = leg.hook_history([row]) if guardrails is not None and guardrails.has(Hook.TOOL_CALL) else None
    plans = []
    for call in reply.tool_calls:
        if offered is not None and call.name not in offered and call.name in leg.tools:
            plans.append(CallPlan(call, None, None, _not_offered(call, offered)))
        else:
            plan = await _plan(leg, step, call, row, history, records)
            plans.append(plan)
            row = _with_call(row, plan.call)
    return plans


def _with_call(row: Message, call: ToolCall) -> Message:
    """``row`` (the reply's history row) with ``call`` in the place of the call of the same id; ``row`` itself when
    that call is ``call`` already (no redacting verdict replaced it)."""
    if all(c is call or c.id != call.id for c in row.tool_calls):
        return row
    return replace(row, tool_calls=tuple(call if c.id == call.id else c for c in row.tool_calls))


def _not_offered(call: ToolCall, offered: frozenset[str]) -> Message:
    message = f"Tool '{call.name}' is not available at this step. Available: {', '.join(sorted(offered))}"
    return error_tool_result(message, tool_call_id=call.id, origin="stopwise")


def _resolved(leg: Leg, call: ToolCall) -> CallPlan | tuple[Tool, Mapping[str, Any]]:
    """The call's tool and arguments, or its answered plan when the tool is unknown or the arguments bad."""
    tool_map = leg.tools
    t = tool_map.get(call.name)
    if t is None:
        message = f"Unknown tool '{call.name}'. Available tools: {', '.join(tool_map) or 'none'}"
        return CallPlan(call, None, None, error_tool_result(message, tool_call_id=call.id, origin="stopwise"))
    args = parse_args(call, t.name)
    if isinstance(args, Message):
        return CallPlan(call, t, None, args)
    return t, args


def _approval(call: ToolCall, t: Tool, args: Mapping[str, Any], gate: GuardianDecision | None) -> CallPlan:
    """The plan after the approval gate: it waits for a reviewer when the risk gate escalated, the tool runs on
    the client, or the tool's ``needs_approval`` says so."""
    try:
        # ``needs_approval=False`` (the default) is answered without a call: this runs for every call. A predicate
        # gets a copy of the arguments: what it changes of them is neither run nor logged.
        needs = gate is not None or t.client or (t.needs_approval is not False and t.requires_approval(own_args(args)))
    except Exception as exc:
        detail = f"needs_approval of tool '{t.name}' raised {type(exc).__name__}: {exc}"
        error = ErrorDetail(ErrorCode.APPROVAL_PREDICATE_RAISED, detail, ErrorCategory.CALLER, retryable=False)
        raise CallerCodeFailed(error) from exc
    return CallPlan(call, t, args, needs_approval=needs, gate=gate)


async def _plan(
    leg: Leg,
    step: int,
    call: ToolCall,
    row: Message,
    history: HistoryView | None,
    records: list[LogRecord],
) -> CallPlan:
    """One call of the step's reply ``row``: its tool and arguments, the tool-call guardrails (which read
    ``history``, the session's rows up to ``row``; given when there are any), the risk gate, the approval
    gate."""
    found = _resolved(leg, call)
    if isinstance(found, CallPlan):
        return found
    t, args = found
    guardrails = leg.guardrails
    if guardrails is not None and history is not None:
        run = leg.run
        try:
            chain = await run_chain(
                guardrails,
                Hook.TOOL_CALL,
                args,
                lambda a: ToolCallContext(
                    history,
                    step,
                    run.session_id,
                    run.run_id,
                    leg.runtime_context,
                    own_call(replace(call, args=a)),
                    agent_path=leg.agent_path,
                ),
                step=step,
                tool_call_id=call.id,
            )
        except (GuardrailRaised, GuardrailError) as exc:
            raise CallerCodeFailed(caller_failure(exc)) from exc
        records.extend(chain.records)
        if chain.redacted:
            # What a redacting verdict removed is stored nowhere: the call as the log, the model's next request,
            # the suspension and the guardian see it carries the arguments the chain left (none after a block).
            if leg.agent.guardian is not None:
                note_redacted(leg, call.id, args)  # the repeat count must tell two redacted calls apart
            args = {} if chain.block is not None else chain.value
            call = replace(call, args=dict(args))
            row = _with_call(row, call)
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
        consultation = await consult_call(leg, step, [row], replace(call, args=dict(args)))
        records.extend([consultation.decision, *consultation.labels])
        # The risk gate runs before the approval gate: an escalation here is an approval request.
        if consultation.decision.outcome is GuardianOutcome.ESCALATE:
            gate = consultation.decision
    return _approval(call, t, args, gate)


async def execute_calls(
    leg: Leg, step: int, plans: list[CallPlan], records: list[LogRecord] | None = None
) -> tuple[list[Message], Usage]:
    """Run every call that has no answer yet, concurrently; answers keep the calls' order. Also returns the usage
    of the sub-agents the calls ran (``RunContext.sub_usage``), and adds to ``records`` a ``ToolSwitchRecord`` per
    call that switched tools off (``RunContext.switch_off``), in call order. Raises ``CallerCodeFailed``
    (``tool_unavailable``) when a tool's server could not be reached."""
    limits = leg.agent.limits
    step_limit = None if limits is None or limits.step_seconds is None else float(limits.step_seconds)
    contexts: list[RunContext] = []
    if len(plans) == 1:
        # One call (the common step): awaited directly, without a gather.
        answers = [await _one(leg, step, plans[0], step_limit, contexts)]
    else:
        answers = list(await asyncio.gather(*[_one(leg, step, p, step_limit, contexts) for p in plans]))
    rows: list[Message] = []
    for row in answers:
        if isinstance(row, ToolUnavailable):
            raise CallerCodeFailed(unavailable(row)) from row
        rows.append(row)
    sub_usage = contexts[0].sub_usage if contexts else Usage()
    switched_off = bool(contexts and contexts[0].switched_off)
    for ctx in contexts[1:]:
        sub_usage = sub_usage + ctx.sub_usage
        switched_off = switched_off or bool(ctx.switched_off)
    if records is not None and switched_off:
        by_call = {ctx.tool_call_id: ctx for ctx in contexts}
        switched = [by_call[p.call.id] for p in plans if p.call.id in by_call and by_call[p.call.id].switched_off]
        records.extend(
            ToolSwitchRecord("tool", step, off=tuple(c.switched_off), tool_call_id=c.tool_call_id) for c in switched
        )
    return rows, sub_usage


async def _one(
    leg: Leg, step: int, plan: CallPlan, limit: float | None, contexts: list[RunContext]
) -> Message | ToolUnavailable:
    """One call of ``execute_calls``: its row (the plan's own when it has one); its context joins ``contexts``."""
    if plan.row is not None:
        return plan.row
    assert plan.tool is not None and plan.args is not None
    run = leg.run
    ctx = RunContext(
        run.session_id,
        run.run_id,
        step,
        plan.call.id,
        leg.state,
        leg.runner,
        leg.runtime_context,
        agent_path=leg.agent_path,
        guardrails=leg.guardrails,
    )
    contexts.append(ctx)
    try:
        return await plan.tool.invoke(plan.call, ctx, plan.args, limit=limit)
    except ToolUnavailable as exc:
        # Returned, not raised, so the batch's other calls settle before the step fails.
        return exc


async def guard_results(
    leg: Leg, step: int, plans: list[CallPlan], rows: list[Message], records: list[LogRecord]
) -> tuple[list[Message], ErrorDetail | None]:
    """Tool-result guardrails, per result in call order, once the whole batch settled. Only output a tool
    produced is judged (a client tool's result given to ``resume`` too); a rewrite or block leaves a receipt
    record for audit (``guardrails.receipts``).

    A guardrail that raises cannot end the step unlogged: its tools ran. That result and every later unjudged
    one are withheld (a notice row for the model, a receipt record for audit), and the failure comes back with
    the rows for the step to commit as the run's ending (seed 003)."""
    guardrails = leg.guardrails
    if guardrails is None or not guardrails.has(Hook.TOOL_RESULT):
        return rows, None
    run = leg.run
    history = leg.hook_history()
    guarded: list[Message] = []
    failed: ErrorDetail | None = None
    for plan, row in zip(plans, rows, strict=True):
        origin = row.metadata.get(ORIGIN)
        # A client tool's result (``resume(results=...)``) is a tool's output too; stopwise's own answers are not.
        if origin == "stopwise" or (plan.row is not None and origin != "client"):
            guarded.append(row)
            continue
        if failed is not None:
            guarded.append(_withheld(guardrails, plan, row, records))
            continue
        is_error = bool(row.metadata.get(TOOL_ERROR))
        this = own_call(replace(plan.call, args=plan.args or {}))
        try:
            chain = await run_chain(
                guardrails,
                Hook.TOOL_RESULT,
                decode_tool_result(row),
                lambda value, this=this, is_error=is_error: ToolResultContext(  # type: ignore[misc]
                    history,
                    step,
                    run.session_id,
                    run.run_id,
                    leg.runtime_context,
                    this,
                    value,
                    is_error,
                    agent_path=leg.agent_path,
                ),
                step=step,
                tool_call_id=plan.call.id,
            )
        except (GuardrailRaised, GuardrailError) as exc:
            failed = caller_failure(exc)
            guarded.append(_withheld(guardrails, plan, row, records))
            continue
        if not chain.records:
            guarded.append(row)
            continue
        records.extend(chain.records)
        records.append(tool_receipt(guardrails, plan.call.id, row, chain))
        if chain.block is not None:
            message = f"Blocked by guardrail '{chain.blocked_by}': {chain.block.reason}"
            guarded.append(error_tool_result(message, tool_call_id=plan.call.id, origin="stopwise"))
        else:
            new = encode_tool_result(chain.value, tool_call_id=plan.call.id)
            if is_error:
                new = replace(new, metadata={**new.metadata, TOOL_ERROR: True, ORIGIN: origin or "tool"})
            elif origin is not None:
                new = replace(new, metadata={**new.metadata, ORIGIN: origin})
            guarded.append(new)
    return guarded, failed


_WITHHELD = "The tool ran, but its result is withheld: the tool-result guardrails could not check it."


def _withheld(guardrails: Guardrails, plan: CallPlan, row: Message, records: list[LogRecord]) -> Message:
    records.append(withheld_receipt(guardrails, plan.call.id, row))
    return error_tool_result(_WITHHELD, tool_call_id=plan.call.id, origin="stopwise")
