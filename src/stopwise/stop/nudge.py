"""Finish nudges: a bounded second look before a natural finish is accepted (verify-on-stop).

``finish_nudge(fn)`` builds a ``StopGuard`` from a function of passive evidence (the answer, the turns used, the
run's tool trace, the nudges already spent) that returns a nudge to send back, or ``""`` to accept. The cap is
the guard's ``max_continues``, counted by the loop from the log, so a function that never says yes is still
bounded; a function that raises accepts the finish and is reported (``stop_guard_error``).
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from stopwise.errors import ConfigError
from stopwise.messages import TOOL_ERROR, Role
from stopwise.stop.guard import Continue, Stop, StopGuard, StopGuardContext, StopGuardVerdict

__all__ = ["FinishEvidence", "ToolTrace", "finish_nudge"]


@dataclass(frozen=True, slots=True)
class ToolTrace:
    """One tool call of the run, as the evidence shows it."""

    name: str
    args: Any
    ok: bool
    """False when the call's result was an error row."""


@dataclass(frozen=True, slots=True)
class FinishEvidence:
    """What a nudge function may look at: passive evidence only, it cannot call tools or models."""

    final: str
    """The answer the run would return."""
    turns: int
    """Model calls made by this run, this one included."""
    tools: tuple[ToolTrace, ...]
    """The run's tool calls so far, in order."""
    nudges: int
    """Nudges already sent in this run (0 on the first consultation)."""


NudgeFn = Callable[[FinishEvidence], str | Awaitable[str]]


def _evidence(ctx: StopGuardContext) -> FinishEvidence:
    results = {m.tool_call_id: m for m in ctx.run_messages if m.role is Role.TOOL}
    trace = tuple(
        ToolTrace(call.name, call.args, not results[call.id].metadata.get(TOOL_ERROR, False))
        for m in ctx.run_messages
        if m.role is Role.ASSISTANT
        for call in m.tool_calls
        if call.id in results
    )
    return FinishEvidence(ctx.reply.text, ctx.step, trace, ctx.continues_used)


def finish_nudge(
    fn: NudgeFn | None,
    max_nudges: int = 2,
    progress_note: str = "verifying before finishing",
    *,
    timeout: float | None = 30.0,
) -> StopGuard:
    """A stop guard that sends ``fn(evidence)`` back to the model as a nudge, at most ``max_nudges`` times.

    The nudge reaches the model as a labelled, hidden row marked as external input; the user-facing stream
    shows ``progress_note`` instead. ``max_nudges=0`` never nudges. ``fn=None`` accepts every finish (seed 004:
    a guard wired with nothing to check is inert, not broken).
    """
    if fn is not None and not callable(fn):
        raise ConfigError("finish_nudge.fn", f"must be callable or None, got {type(fn).__name__}")

    async def check(ctx: StopGuardContext) -> StopGuardVerdict:
        if fn is None:
            return Stop()
        nudge = fn(_evidence(ctx))
        if inspect.isawaitable(nudge):
            nudge = await nudge
        if not isinstance(nudge, str):
            raise TypeError(f"the nudge function must return a str, got {type(nudge).__name__}")
        # An empty nudge accepts: re-running the same turn on an unchanged conversation would only spin.
        return Continue(feedback=nudge) if nudge.strip() else Stop()

    name = getattr(fn, "__name__", "finish_nudge")
    return StopGuard(
        check,
        max_continues=max_nudges,
        timeout=timeout,
        on_error="stop",
        name="finish_nudge" if name == "<lambda>" else name,
        progress_note=progress_note,
    )
