"""Budgets besides ``max_steps``: tool calls, tokens, cost and wall time, as one immutable ``Limits`` and the pure
checks the loop turns into stop signals.

What a leg has spent is counted from the log (``Spent``): a retry after a failure starts a fresh budget, as it does
for steps, while the run's usage on ``RunResult`` adds up across legs. The checks read no clock: the loop passes the
elapsed time in.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from decimal import Decimal
from enum import StrEnum
from typing import Any

from stopwise.errors import ConfigError, ErrorCategory, ErrorCode, ErrorDetail
from stopwise.messages import Reply, StopReason, Usage
from stopwise.result import CompletionReason

__all__ = [
    "LimitHit",
    "LimitKind",
    "Limits",
    "OutputCap",
    "Spent",
    "budget_used",
    "calls_allowed",
    "cut_at_cap",
    "exceeded",
    "output_cap",
    "run_time_left",
    "spent_before_tools",
    "time_left",
]


class LimitKind(StrEnum):
    """Which budget ran out."""

    TOOL_CALLS = "tool_calls"
    INPUT_TOKENS = "input_tokens"
    OUTPUT_TOKENS = "output_tokens"
    TOTAL_TOKENS = "total_tokens"
    COST = "cost"
    RUN_TIME = "run_time"
    STEP_TIME = "step_time"


@dataclass(frozen=True, slots=True)
class Limits:
    """Budgets for one run leg (a retry after a failure starts fresh ones). ``None`` leaves a budget unlimited.

    A budget that runs out ends the run failed with its own reason (``tool_call_limit``, ``token_limit``,
    ``cost_limit``, ``time_limit``) after the step that spent it; a final answer on that step still completes.
    """

    tool_calls: int | None = None
    """Tool calls that may run. Checked before a batch runs: the calls past it are answered with an error row the
    model reads (they never run), and the run ends with ``tool_call_limit``."""
    input_tokens: int | None = None
    output_tokens: int | None = None
    total_tokens: int | None = None
    """Token budgets, checked after each model call against the usage the provider reported. ``output_tokens`` and
    ``total_tokens`` also cap each model call (``ModelRequest.max_output_tokens``: what is left of them), so a
    provider adapter stops the reply at the budget rather than after it."""
    cost: Decimal | float | None = None
    """US dollars, priced by ``genai-prices`` (the ``stopwise[prices]`` extra) for the agent's model; a model it
    has no price for is a ``ConfigError`` when the agent is defined, never a cost of zero."""
    priced_as: str | None = None
    """The model to price as (``"openai:gpt-4.1-mini"``); default: the agent's model's own name."""
    run_seconds: float | None = None
    """Wall time for the leg. A model call still running when it runs out is cancelled (``time_limit``,
    retryable); between steps, a leg past it ends."""
    step_seconds: float | None = None
    """Wall time for one step's model call, and separately for its tools: a model call past it is cancelled
    (``time_limit``, retryable); a tool call past it is answered with a timeout error row, as ``@tool(timeout=)``
    does (a sync tool's worker thread cannot be stopped: it runs to its end and its result is dropped)."""
    count_judges: bool = True
    """Whether the token budgets count the guardian's model calls (an LLM judge, any evaluator that reports
    usage). They are reported apart either way, as ``RunResult.judge_usage``."""
    count_sub_agents: bool = True
    """Whether the token budgets count the sub-agents' model calls (``Agent.as_tool``). Reported apart either way,
    as ``RunResult.sub_usage``."""

    def __post_init__(self) -> None:
        for name in ("tool_calls", "input_tokens", "output_tokens", "total_tokens"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
                raise ConfigError(f"limits.{name}", f"must be an int >= 0 or None, got {value!r}")
        for name in ("cost", "run_seconds", "step_seconds"):
            value = getattr(self, name)
            ok = isinstance(value, int | float | Decimal) and not isinstance(value, bool) and value > 0
            if value is not None and not (ok and math.isfinite(float(value))):
                raise ConfigError(f"limits.{name}", f"must be a positive number or None, got {value!r}")
        if self.priced_as is not None and (not isinstance(self.priced_as, str) or not self.priced_as.strip()):
            raise ConfigError(
                "limits.priced_as", f"must be a model name such as 'openai:gpt-4.1-mini', got {self.priced_as!r}"
            )
        for name in ("count_judges", "count_sub_agents"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"limits.{name}", f"must be True or False, got {getattr(self, name)!r}")


@dataclass(frozen=True, slots=True)
class Spent:
    """What a leg has used against its limits."""

    tool_calls: int = 0
    """Calls that ran (not those answered without running)."""
    usage: Usage = field(default_factory=Usage)
    cost: Decimal | None = None
    """In US dollars, when the agent prices its model; None otherwise."""
    seconds: float = 0.0
    """Wall time since the leg began."""


@dataclass(frozen=True, slots=True)
class LimitHit:
    """A budget that ran out: which, what it allowed, and what was used (or asked for)."""

    kind: LimitKind
    allowed: float | Decimal
    used: float | Decimal

    @property
    def reason(self) -> CompletionReason:
        return _REASONS[self.kind][0]

    def error(self) -> ErrorDetail:
        """The run's failure for this hit: a stable code per budget; only a time limit is worth retrying as is."""
        _, code = _REASONS[self.kind]
        noun = _NOUNS[self.kind]
        message = f"{noun} limit ({_show(self.allowed)}) reached: {_show(self.used)} used"
        if self.kind is LimitKind.TOOL_CALLS:
            message = f"{noun} limit ({_show(self.allowed)}) reached: {_show(self.used)} asked for"
        retryable = self.kind in (LimitKind.RUN_TIME, LimitKind.STEP_TIME)
        facts: dict[str, Any] = {"limit": self.kind.value, "allowed": _json(self.allowed), "used": _json(self.used)}
        return ErrorDetail(code, message, ErrorCategory.FRAMEWORK, retryable, facts)


_REASONS = {
    LimitKind.TOOL_CALLS: (CompletionReason.TOOL_CALL_LIMIT, ErrorCode.TOOL_CALL_LIMIT),
    LimitKind.INPUT_TOKENS: (CompletionReason.TOKEN_LIMIT, ErrorCode.TOKEN_LIMIT),
    LimitKind.OUTPUT_TOKENS: (CompletionReason.TOKEN_LIMIT, ErrorCode.TOKEN_LIMIT),
    LimitKind.TOTAL_TOKENS: (CompletionReason.TOKEN_LIMIT, ErrorCode.TOKEN_LIMIT),
    LimitKind.COST: (CompletionReason.COST_LIMIT, ErrorCode.COST_LIMIT),
    LimitKind.RUN_TIME: (CompletionReason.TIME_LIMIT, ErrorCode.TIME_LIMIT),
    LimitKind.STEP_TIME: (CompletionReason.TIME_LIMIT, ErrorCode.TIME_LIMIT),
}
_NOUNS = {
    LimitKind.TOOL_CALLS: "Tool-call",
    LimitKind.INPUT_TOKENS: "Input-token",
    LimitKind.OUTPUT_TOKENS: "Output-token",
    LimitKind.TOTAL_TOKENS: "Total-token",
    LimitKind.COST: "Cost (USD)",
    LimitKind.RUN_TIME: "Run time (s)",
    LimitKind.STEP_TIME: "Step time (s)",
}


def _show(value: float | Decimal) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _json(value: float | Decimal) -> float | int | str:
    return str(value) if isinstance(value, Decimal) else value


def calls_allowed(limits: Limits | None, spent: Spent) -> int | None:
    """How many more tool calls may run in this leg (None: no limit)."""
    if limits is None or limits.tool_calls is None:
        return None
    return max(0, limits.tool_calls - spent.tool_calls)


def exceeded(limits: Limits | None, spent: Spent) -> LimitHit | None:
    """The first budget ``spent`` has gone past (tokens, cost, run time; in that order), or None. A budget is
    past when more than it allows was used: reaching it exactly is still within it."""
    if limits is None:
        return None
    usage = spent.usage
    checks: tuple[tuple[LimitKind, float | Decimal | None, float | Decimal | None], ...] = (
        (LimitKind.INPUT_TOKENS, limits.input_tokens, usage.input_tokens),
        (LimitKind.OUTPUT_TOKENS, limits.output_tokens, usage.output_tokens),
        (LimitKind.TOTAL_TOKENS, limits.total_tokens, usage.total_tokens),
        (LimitKind.COST, limits.cost, spent.cost),
        (LimitKind.RUN_TIME, limits.run_seconds, spent.seconds),
    )
    for kind, allowed, used in checks:
        if allowed is not None and used is not None and Decimal(str(used)) > Decimal(str(allowed)):
            return LimitHit(kind, allowed, used)
    return None


@dataclass(frozen=True, slots=True)
class OutputCap:
    """The most output tokens the next model call may spend, and the budget that sets it."""

    tokens: int
    """At least 1: the providers take no cap of 0 (a leg with nothing left still makes its call, as it did before
    there was a cap, and that call's usage ends the run past the budget)."""
    kind: LimitKind
    """``OUTPUT_TOKENS`` or ``TOTAL_TOKENS``; the output budget when both leave the same."""


def output_cap(limits: Limits | None, spent: Spent) -> OutputCap | None:
    """The cap for the next model call of a leg that has spent ``spent``: the least of what is left of
    ``output_tokens`` and of ``total_tokens`` (what is left of the total bounds this call's output, its input
    aside), or None when neither budget is set. Input and cost budgets set no cap: a call's input is known before
    it is made, and its price is not a token count."""
    if limits is None:
        return None
    usage = spent.usage
    caps = []
    if limits.output_tokens is not None:
        caps.append((limits.output_tokens - usage.output_tokens, LimitKind.OUTPUT_TOKENS))
    if limits.total_tokens is not None:
        caps.append((limits.total_tokens - usage.total_tokens, LimitKind.TOTAL_TOKENS))
    if not caps:
        return None
    left, kind = min(caps, key=lambda c: c[0])  # min keeps the first of equals: the output budget
    return OutputCap(max(1, left), kind)


def cut_at_cap(limits: Limits | None, cap: OutputCap | None, reply: Reply, spent: Spent) -> LimitHit | None:
    """The budget a reply used up when the provider cut it at the budget's cap, or None: ``reply`` stopped for
    ``max_tokens`` having spent all of ``cap`` (by the usage it reports), so its budget is the reason it is cut
    short, even when that leaves it exactly reached (``spent``: the leg with this reply). A reply cut below the
    cap (the adapter's own limit was lower, or a context window) or without usage is not the budget's cut."""
    if limits is None or cap is None or reply.stop_reason is not StopReason.MAX_TOKENS or reply.usage is None:
        return None
    if reply.usage.output_tokens < cap.tokens:
        return None
    if cap.kind is LimitKind.OUTPUT_TOKENS:
        allowed, used = limits.output_tokens, spent.usage.output_tokens
    else:
        allowed, used = limits.total_tokens, spent.usage.total_tokens
    assert allowed is not None  # the cap came from this budget
    return LimitHit(cap.kind, allowed, used)


def spent_before_tools(limits: Limits | None, spent: Spent) -> LimitHit | None:
    """The token or cost budget ``spent`` has gone past, or None: a reply that took the leg past one has its tool
    calls refused (none runs past the budget). Time is left out: a model call past the time budget was cancelled,
    so its reply never asks for anything."""
    return exceeded(limits, replace(spent, seconds=0.0))


def budget_used(limits: Limits | None, spent: Spent) -> tuple[float, LimitKind] | None:
    """The largest fraction of any budget ``spent`` has used (1.0: all of it; more: past it), with which budget;
    None when ``limits`` sets none. What the guardian's policy reads (``PolicyInputs.budget_used``). The step-time
    budget is per call, not for the run, so it is not one of them. A budget of zero is all used from the start."""
    if limits is None:
        return None
    usage = spent.usage
    budgets: tuple[tuple[LimitKind, float | Decimal | None, float | Decimal | None], ...] = (
        (LimitKind.TOOL_CALLS, limits.tool_calls, spent.tool_calls),
        (LimitKind.INPUT_TOKENS, limits.input_tokens, usage.input_tokens),
        (LimitKind.OUTPUT_TOKENS, limits.output_tokens, usage.output_tokens),
        (LimitKind.TOTAL_TOKENS, limits.total_tokens, usage.total_tokens),
        (LimitKind.COST, limits.cost, spent.cost),
        (LimitKind.RUN_TIME, limits.run_seconds, spent.seconds),
    )
    worst: tuple[float, LimitKind] | None = None
    for kind, allowed, used in budgets:
        if allowed is None or used is None:
            continue
        # Past a zero budget reads as twice it: any figure over 1.0 means the same, and JSON has no infinity.
        fraction = round(float(used) / float(allowed), 4) if allowed else (1.0 if not used else 2.0)
        if worst is None or fraction > worst[0]:
            worst = (fraction, kind)
    return worst


def time_left(limits: Limits | None, seconds: float) -> tuple[float, LimitKind] | None:
    """How long the next model call may take, ``seconds`` into the leg, and which budget bounds it (None: no
    time limit)."""
    if limits is None:
        return None
    bounds = []
    if limits.step_seconds is not None:
        bounds.append((float(limits.step_seconds), LimitKind.STEP_TIME))
    run_left = run_time_left(limits, seconds)
    if run_left is not None:
        bounds.append((run_left, LimitKind.RUN_TIME))
    return min(bounds, key=lambda b: b[0]) if bounds else None


def run_time_left(limits: Limits | None, seconds: float) -> float | None:
    """Seconds left of the leg's ``run_seconds``, ``seconds`` into the leg (0 once spent); None without that
    budget. What bounds the caller code the loop awaits between model calls (a ``stop_when`` predicate)."""
    if limits is None or limits.run_seconds is None:
        return None
    return max(0.0, float(limits.run_seconds) - seconds)
