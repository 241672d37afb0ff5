"""What of a step's batch runs, and the stop-at tool's result after it: the end strategy (``Agent.end_strategy``)
is applied to the planned calls before anything executes; the first stop-at call that succeeded gives the run
its output."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from stopwise._leg import CallPlan, Leg
from stopwise.messages import TOOL_ERROR, Message, decode_tool_result, error_tool_result

__all__ = ["ToolOutput", "apply_end_strategy", "output_problems", "tool_output"]


@dataclass(frozen=True, slots=True)
class ToolOutput:
    """A stop-at tool's successful result, as the run's output."""

    tool: str
    value: Any
    """The validated ``output_type`` instance, or the tool's result as JSON data when there is no output type."""
    error: str | None = None
    """Why the result is not valid ``output_type`` (then ``value`` is None)."""


def apply_end_strategy(leg: Leg, plans: list[CallPlan]) -> list[CallPlan]:
    """With ``end_strategy="early"``, a batch holding a stop-at call runs only the first such call; the others get
    a "not run" row (a denial: it does not count toward the runaway-error guard). Calls already answered (unknown
    tool, bad arguments, a block) keep their rows."""
    agent = leg.agent
    if agent.stop_at_tools is None or agent.end_strategy != "early":
        return plans
    first = next((p for p in plans if p.row is None and agent.stops_at(p.call.name)), None)
    if first is None:
        return plans
    message = f"Not run: the call to '{first.call.name}' in the same batch ends the run"
    out = []
    for p in plans:
        if p is first or p.row is not None:
            out.append(p)
            continue
        row = error_tool_result(message, tool_call_id=p.call.id, origin="stopwise", denied=True)
        out.append(CallPlan(p.call, p.tool, p.args, row))
    return out


def tool_output(leg: Leg, plans: Sequence[CallPlan], rows: Sequence[Message]) -> ToolOutput | None:
    """The first stop-at call (in call order) whose result is not an error, with its result as the output; None
    when no stop-at call succeeded (a failed call does not stop the run)."""
    agent = leg.agent
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
