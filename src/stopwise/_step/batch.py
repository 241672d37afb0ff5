"""What of a step's batch runs, and the stop-at tool's result after it: the end strategy (``Agent.end_strategy``)
and the tool-call budget (``Limits.tool_calls``) are applied to the planned calls before anything executes; the
first stop-at call that succeeded gives the run its output."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic_core import ValidationError

from stopwise._leg import CallPlan, Leg
from stopwise.messages import TOOL_ERROR, Message, Reply, decode_tool_result, error_tool_result
from stopwise.stop.limits import LimitHit, LimitKind, calls_allowed, cut_at_cap, spent_before_tools

__all__ = ["ToolOutput", "output_problems", "plan_batch", "tool_output"]


@dataclass(frozen=True, slots=True)
class ToolOutput:
    """A stop-at tool's successful result, as the run's output."""

    tool: str
    value: Any
    """The validated ``output_type`` instance, or the tool's result as JSON data when there is no output type."""
    error: str | None = None
    """Why the result is not valid ``output_type`` (then ``value`` is None)."""


def plan_batch(leg: Leg, plans: list[CallPlan], reply: Reply | None = None) -> tuple[list[CallPlan], LimitHit | None]:
    """The calls that will run, and the budget's hit when the batch may not run whole.

    First the end strategy: with ``end_strategy="early"``, a batch holding a stop-at call runs only the first such
    call. Then the budgets: when the reply that asked for the calls took the leg past a token or cost budget, or
    was cut at its budget's output cap (a cut may leave a call's arguments unfinished) (``reply``, given on a step's
    first pass; not when approved calls run on a resume), none of them runs;
    else the calls past ``Limits.tool_calls`` (in call order) do not run. Either way a call that does not run is
    answered with a "not run" row (a denial: it does not count toward the runaway-error guard); in a reply cut at
    the cap the row says so, also for a call whose arguments do not parse (they were cut short, not written
    wrong). Calls already answered otherwise (unknown tool, bad arguments in a reply not cut at the cap, a block)
    keep their rows and cost nothing."""
    agent = leg.agent
    out = list(plans)
    if agent.stop_at_tools is not None and agent.end_strategy == "early":
        first = next((p for p in out if p.row is None and agent.stops_at(p.call.name)), None)
        if first is not None:
            why = f"Not run: the call to '{first.call.name}' in the same batch ends the run"
            out = [p if p is first or p.row is not None else _not_run(p, why) for p in out]
    limits = agent.limits
    if limits is None:
        return out, None
    if reply is not None:
        with_reply = leg.spent(reply.usage)
        cut = cut_at_cap(limits, leg.output_cap(), reply, with_reply)
        spent = spent_before_tools(limits, with_reply) or cut
        if spent is not None:
            if cut is None:
                why = f"Not run: {spent.error().message}"
            else:
                # The model reads these rows when the run is retried: a call cut short must not read as bad JSON
                # it wrote, nor a whole one as refused for a reason it cannot see in its reply.
                why = (
                    "Not run: the reply was cut off at the token budget's cap, so the call may be incomplete. "
                    + cut.error().message
                )
            return [_not_run(p, why) if p.row is None or (cut is not None and _unparsed(p)) else p for p in out], spent
    if limits.tool_calls is None:
        return out, None
    allowed = calls_allowed(limits, leg.spent())
    runnable = [p for p in out if p.row is None]
    if allowed is None or len(runnable) <= allowed:
        return out, None
    limit = limits.tool_calls
    past = {id(p) for p in runnable[allowed:]}
    why = f"Not run: this run's tool-call limit ({limit}) is reached"
    hit = LimitHit(LimitKind.TOOL_CALLS, limit, leg.budget_tool_calls + len(runnable))
    return [_not_run(p, why) if id(p) in past else p for p in out], hit


def _unparsed(plan: CallPlan) -> bool:
    """Whether the call was answered because its arguments are not a JSON object: its tool is known and it has no
    arguments (a block or a rejection keeps the arguments it judged; an unknown tool has no tool)."""
    return plan.row is not None and plan.tool is not None and plan.args is None


def _not_run(plan: CallPlan, why: str) -> CallPlan:
    row = error_tool_result(why, tool_call_id=plan.call.id, origin="stopwise", denied=True)
    return CallPlan(plan.call, plan.tool, plan.args, row)


def tool_output(leg: Leg, plans: Sequence[CallPlan], rows: Sequence[Message]) -> ToolOutput | None:
    """The first stop-at call (in call order) whose result is not an error, with its result as the output; None
    when no stop-at call succeeded (a failed call does not stop the run)."""
    agent = leg.agent
    if agent.stop_at_tools is None:
        return None  # no stop-at tools: nothing to look for (the common case, every tool step)
    for plan, row in zip(plans, rows, strict=True):
        if agent.stops_at(plan.call.name) and plan.row is None and not row.metadata.get(TOOL_ERROR):
            value = decode_tool_result(row)
            if agent.output_type is None:
                return ToolOutput(plan.call.name, value)
            try:
                if isinstance(value, str):
                    return ToolOutput(plan.call.name, agent.output_type.model_validate_json(value))
                return ToolOutput(plan.call.name, agent.output_type.model_validate(value))
            except ValidationError as exc:
                error = f"the result of tool '{plan.call.name}' is not valid output: {output_problems(exc)}"
                return ToolOutput(plan.call.name, None, error)
    return None


def output_problems(exc: ValidationError) -> str:
    """A validation error against the output type, in one line: ``field: message; ...``."""
    return "; ".join(f"{'.'.join(map(str, e['loc'])) or '(root)'}: {e['msg']}" for e in exc.errors(include_url=False))
