"""Before a model call: ``Agent.prepare_step`` (the model, tools, tool choice and instructions for this call),
resolved against the agent's defaults and checked; then the history processors (what of the history is sent)."""

from __future__ import annotations

import inspect
from dataclasses import dataclass, replace
from types import MappingProxyType

from stopwise._leg import Leg
from stopwise._step.calls import CallerCodeFailed
from stopwise.errors import ConfigError, ErrorCategory, ErrorCode, ErrorDetail
from stopwise.history import HistoryRecord
from stopwise.history_view import HistoryView
from stopwise.messages import Message, Role
from stopwise.models._registry import resolve_model
from stopwise.models.base import Model, ToolSpec
from stopwise.models.middleware import wrap_model
from stopwise.row_copies import CopiedRows
from stopwise.step_plan import TOOL_CHOICES, StepContext, StepPlan, StepPlanRecord
from stopwise.stop.decision import Phase
from stopwise.tools import Tool

__all__ = ["Prepared", "plain_prepared", "prepare"]


@dataclass(frozen=True, slots=True)
class Prepared:
    """What one model call uses: the agent's defaults, or what ``prepare_step`` chose."""

    caller: Model
    system: tuple[Message, ...]
    messages: HistoryView
    """The history the model is sent (after the history processors): the logged rows as the model's copies
    (``Leg.model_history``)."""
    tools: tuple[ToolSpec, ...]
    """The tools offered (all of the agent's unless the plan narrowed them)."""
    offered: frozenset[str] | None = None
    """The names a call may use on this step; None: any of the agent's tools."""
    tool_choice: str | None = None
    record: StepPlanRecord | None = None
    history: HistoryRecord | None = None
    """What of the history was not sent, when the agent has history processors."""


def plain_prepared(leg: Leg) -> Prepared | None:
    """``prepare``'s answer when the agent has no ``prepare_step`` and no history processors (nothing to await: the
    agent's defaults, less the tools switched off); None when it has either."""
    agent = leg.agent
    if agent.prepare_step is not None or agent.history_processors:
        return None
    return _switched(leg, Prepared(agent.caller, leg.system, leg.model_history(), leg.tool_specs))


async def prepare(leg: Leg, number: int, phase: Phase) -> Prepared:
    """The call's settings. Raises ``CallerCodeFailed`` (``prepare_step_failed``) when ``prepare_step`` raises or
    returns something that is not a valid ``StepPlan``, and (``history_processor_failed``) when a history processor
    raises or returns anything but messages."""
    prepared = _switched(leg, await _planned(leg, number, phase))
    if not leg.agent.history_processors:
        return prepared
    return await _bounded(leg, number, prepared)


def _switched(leg: Leg, prepared: Prepared) -> Prepared:
    """``prepared`` without the tools switched off in this run (``stopwise.tool_switches``)."""
    off = leg.tools_off()
    if not off:
        return prepared
    offered = frozenset(prepared.offered if prepared.offered is not None else leg.tools) - off
    specs = tuple(s for s in prepared.tools if s.name in offered)
    return replace(prepared, tools=specs, offered=offered)


async def _bounded(leg: Leg, number: int, prepared: Prepared) -> Prepared:
    history = leg.history()
    # Each processor is handed copies of the logged rows (its own cache: what it returns is sent), so one that
    # changes a row in place changes neither the log nor later steps; a copy it returns is sent as the logged row.
    copies = leg.processor_copies
    messages = HistoryView.of_log(CopiedRows(leg.messages, copies))
    for fn in leg.agent.history_processors:
        name = getattr(fn, "__name__", type(fn).__name__)
        try:
            result = fn(messages)
            if inspect.isawaitable(result):
                result = await result
            if not all(isinstance(m, Message) for m in result):
                raise TypeError("returned something that is not a list of messages")
        except Exception as exc:
            message = f"history processor {name} failed: {type(exc).__name__}: {exc}"
            error = ErrorDetail(ErrorCode.HISTORY_PROCESSOR_FAILED, message, ErrorCategory.CALLER, retryable=False)
            raise CallerCodeFailed(error) from exc
        messages = HistoryView(result)
    messages = HistoryView(map(copies.original, messages))
    # Rows are compared by identity: a processor that keeps a row passes the same object on. The model is sent
    # its own copy of each logged row kept (``Leg.model_history``), and the rows a processor made as it made them.
    model = {id(m): c for m, c in zip(history, leg.model_history(), strict=True)}
    sent = {id(m) for m in messages}
    dropped = tuple(i for i, m in enumerate(history) if id(m) not in sent)
    added = sum(1 for m in messages if id(m) not in model)
    record = HistoryRecord(number, dropped, added, len(messages))
    return replace(prepared, messages=HistoryView(model.get(id(m), m) for m in messages), history=record)


async def _planned(leg: Leg, number: int, phase: Phase) -> Prepared:
    agent = leg.agent
    defaults = Prepared(agent.caller, leg.system, leg.model_history(), leg.tool_specs)
    fn = agent.prepare_step
    if fn is None:
        return defaults
    ctx = StepContext(
        number,
        leg.steps_used,
        leg.hook_history(),
        MappingProxyType(dict(leg.state)),
        phase is not Phase.NORMAL,
        leg.tools_off(),
    )
    try:
        plan = fn(ctx)
        if inspect.isawaitable(plan):
            plan = await plan
        if plan is None:
            return defaults
        if not isinstance(plan, StepPlan):
            raise TypeError(f"returned {type(plan).__name__}, expected a StepPlan or None")
        return _resolved(leg, number, plan, defaults)
    except Exception as exc:
        message = f"prepare_step failed: {type(exc).__name__}: {exc}"
        error = ErrorDetail(ErrorCode.PREPARE_STEP_FAILED, message, ErrorCategory.CALLER, retryable=False)
        raise CallerCodeFailed(error) from exc


def _resolved(leg: Leg, number: int, plan: StepPlan, defaults: Prepared) -> Prepared:
    agent = leg.agent
    caller, system, specs, offered = defaults.caller, defaults.system, defaults.tools, defaults.offered
    model_name = None
    if plan.model is not None:
        model = resolve_model(plan.model) if isinstance(plan.model, str) else plan.model
        if not callable(getattr(model, "generate", None)):
            raise ConfigError("StepPlan.model", f"must be a Model or a model string, got {plan.model!r}")
        caller, model_name = wrap_model(model, agent.middleware), repr(model)
    names = None
    if plan.tools is not None:
        names = tuple(t.name if isinstance(t, Tool) else t for t in plan.tools)
        unknown = [n for n in names if n not in leg.tools]
        if unknown:
            raise ConfigError("StepPlan.tools", f"names tools the agent does not have: {', '.join(unknown)}")
        offered = frozenset(names)
        specs = tuple(s for s in leg.tool_specs if s.name in offered)
    choice = plan.tool_choice
    if choice is not None and choice not in TOOL_CHOICES and choice not in (offered or leg.tools):
        raise ConfigError("StepPlan.tool_choice", f"must be auto, required, none or an offered tool, got {choice!r}")
    if plan.instructions is not None:
        system = (Message(Role.SYSTEM, plan.instructions),) if plan.instructions else ()
    record = StepPlanRecord(number, model_name, names, choice, plan.instructions)
    return Prepared(caller, system, defaults.messages, specs, offered, choice, record)
