"""The stop guard's part of a step: whether it applies, its consultation under a time limit, its record."""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

from stopwise._leg import Leg
from stopwise.messages import Message, Reply, Role
from stopwise.stop.decision import Action, Phase, StopDecision
from stopwise.stop.guard import (
    GUARD_SOURCE,
    GuardEvent,
    InvalidVerdict,
    StopGuard,
    StopGuardContext,
    StopGuardOutcome,
    StopGuardRecord,
    guard_budget,
    settle,
)
from stopwise.tool_switches import ToolSwitchRecord

__all__ = [
    "ask_guard",
    "consult_guard",
    "guard_applies",
    "guard_event",
    "guard_record",
    "guard_rows_kept",
    "guard_switches",
]


def guard_applies(leg: Leg, reply: Reply, phase: Phase) -> bool:
    """The stop guard runs only on a natural finish that the run chose, never on a cut-off or forced call."""
    agent = leg.agent
    if agent.stop_guard is None or not reply.is_natural_finish or phase is Phase.FORCED_OUTPUT:
        return False
    if phase is Phase.WRAP_UP:
        return True
    # On the step that reaches the cap, continuing would turn a completion into a max-steps failure.
    return agent.max_steps is None or leg.steps_used + 1 < agent.max_steps


async def consult_guard(leg: Leg, step: int, reply: Reply, phase: Phase) -> tuple[StopGuardOutcome, bool]:
    """Call the guard under its time limit; returns its outcome and whether a continue was still allowed."""
    guard = leg.agent.stop_guard
    assert guard is not None
    used, attempt = guard_budget(leg.records)
    ctx = StopGuardContext(
        session_id=leg.run.session_id,
        run_id=leg.run.run_id,
        step=step,
        attempt=attempt,
        reply=reply,
        messages=leg.hook_history([Message(Role.ASSISTANT, reply.text)]),
        run_start=leg.run_start,
        state=leg.state,
        continues_used=used,
        max_continues=guard.max_continues,
        goal=leg.goal,
    )
    budget_left = used < guard.max_continues and phase is Phase.NORMAL
    outcome = await ask_guard(guard, ctx)
    unknown = sorted({n for s in outcome.switches for n in (*s.on, *s.off)} - leg.tools.keys())
    if unknown:
        # An invalid verdict: like any other, nothing of the consultation commits.
        outcome = StopGuardOutcome(
            "error", f"invalid verdict: ToolSwitch names tools the agent does not have: {unknown}"
        )
    return outcome, budget_left


async def ask_guard(guard: StopGuard, ctx: StopGuardContext) -> StopGuardOutcome:
    """The guard's verdict under its time limit; a raise, a timeout or an invalid verdict is an ``error``
    outcome (what that means for the run is the resolver's call, after ``on_error``). The context is closed when
    this returns: a sync guard that timed out keeps running in its thread, but its late writes are discarded."""
    try:
        async with asyncio.timeout(guard.timeout) as scope:
            verdict: Any = guard.check(ctx) if guard.is_async else await asyncio.to_thread(guard.check, ctx)
            if inspect.isawaitable(verdict):
                verdict = await verdict
        return settle(verdict, ctx)
    except InvalidVerdict as exc:
        return StopGuardOutcome("error", f"invalid verdict: {exc}", usage=ctx.usage)
    except TimeoutError as exc:
        if scope.expired():
            return StopGuardOutcome("error", f"timed out after {guard.timeout:g}s", usage=ctx.usage)
        return StopGuardOutcome("error", f"raised TimeoutError: {exc}", usage=ctx.usage)
    except Exception as exc:
        return StopGuardOutcome("error", f"raised {type(exc).__name__}: {exc}", usage=ctx.usage)
    finally:
        # Whatever the guard (or a thread or task it left running) writes from now on is discarded.
        ctx.close()


_EVENTS: dict[str, GuardEvent] = {"stop": "accepted", "fail": "rejected", "error": "error", "continue": "continued"}


def guard_record(leg: Leg, step: int, guard: tuple[StopGuardOutcome, bool], decision: StopDecision) -> StopGuardRecord:
    outcome, _ = guard
    name = leg.agent.stop_guard.name if leg.agent.stop_guard is not None else GUARD_SOURCE
    return StopGuardRecord(guard_event(outcome.kind, decision), name, step, outcome.message or None, outcome.usage)


def guard_rows_kept(guard: tuple[StopGuardOutcome, bool], decision: StopDecision) -> bool:
    """Whether the guard's rows and tool switches commit with the step: whatever it decided, except a continue
    refused for budget (nobody would act on them)."""
    return guard[0].kind != "continue" or decision.action is Action.CONTINUE


def guard_switches(step: int, guard: tuple[StopGuardOutcome, bool]) -> list[ToolSwitchRecord]:
    """The guard's tool switches, as the step's records."""
    return [ToolSwitchRecord("stop_guard", step, s.on, s.off) for s in guard[0].switches]


def guard_event(kind: str, decision: StopDecision) -> GuardEvent:
    """What the log records for a consultation: a continue the resolver refused (no budget) is ``exhausted``."""
    if kind == "continue" and decision.action is not Action.CONTINUE:
        return "exhausted"
    return _EVENTS[kind]
