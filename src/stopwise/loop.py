"""One run leg as a sequence of step phases (DESIGN.md §4). The loop gathers signals and obeys the
resolver; it owns no policy of its own. Every side effect of a step lands in one ``store.commit``.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncGenerator, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from pydantic import ValidationError

from stopwise.agent import Agent
from stopwise.context import RunContext
from stopwise.errors import ErrorCategory, ErrorCode, ErrorDetail, ModelError, StateNotSerializable
from stopwise.events import (
    Event,
    ModelReplied,
    RunFinished,
    StepCommitted,
    StepStarted,
    ToolCalled,
    ToolReturned,
)
from stopwise.messages import Message, Reply, Role, Usage, automated_feedback, error_tool_result
from stopwise.models.base import ModelRequest
from stopwise.result import CompletionReason, RunResult, RunStatus
from stopwise.stop.conditions import StepView
from stopwise.stop.decision import Action, Decision, StepSignals, resolve
from stopwise.store.base import EntryKind, LogEntry, RunRecord, Store

__all__ = ["Leg", "drive"]

_NO_TOOLS_NOW = "Tools are disabled now: reply with the structured output only."
_FENCE = re.compile(r"^\s*```(?:json)?\s*(.*?)\s*```\s*$", re.DOTALL)


@dataclass(slots=True)
class Leg:
    """The mutable state of one run leg (a run, or a retry of it). Built by the runner from the store."""

    agent: Agent
    store: Store
    runner: Any
    run: RunRecord
    """The run record as of the leg's start; the counters below move on from it and are written back at
    the end, so a step costs no record copy."""
    messages: list[Message]
    """The session's log as committed, plus nothing uncommitted between steps."""
    state: dict[str, Any]
    next_seq: int
    forcing: bool = False
    """In forced completion: the next call has tools off and must return the structured output."""
    forced_attempts: int = 0
    """Forced-completion calls made in this leg."""
    system: tuple[Message, ...] = field(init=False)
    steps: int = field(init=False)
    usage: Usage = field(init=False)
    text: str = field(init=False)

    def __post_init__(self) -> None:
        self.system = (Message(Role.SYSTEM, self.agent.instructions),) if self.agent.instructions else ()
        self.steps = self.run.steps
        self.usage = self.run.usage
        self.text = self.run.text

    @property
    def steps_used(self) -> int:
        return self.steps - self.run.budget_base

    def record(self, **changes: Any) -> RunRecord:
        """The run record with this leg's progress and the given changes."""
        return replace(self.run, steps=self.steps, usage=self.usage, text=self.text, **changes)


async def drive(leg: Leg) -> AsyncGenerator[Event, None]:
    """Run steps until the resolver ends the leg; yields events, the last one ``RunFinished``."""
    run_id = leg.run.run_id
    try:
        while True:
            step = leg.steps + 1
            forced = leg.forcing
            yield StepStarted(run_id, step, forced)
            reply = await _call_model(leg, step, forced)
            if isinstance(reply, ErrorDetail):
                yield RunFinished(run_id, step, await _end_without_step(leg, reply, CompletionReason.ERROR))
                return
            yield ModelReplied(run_id, step, reply)
            rows: list[Message] = []
            if reply.tool_calls:
                for call in reply.tool_calls:
                    yield ToolCalled(run_id, step, call)
                rows = await _run_tools(leg, step, reply, forced)
                for call, row in zip(reply.tool_calls, rows, strict=True):
                    yield ToolReturned(run_id, step, call, row)
            decision, output = _decide(leg, reply, rows, forced)
            try:
                entry, result = await _commit(leg, step, reply, rows, decision, output, forced)
            except StateNotSerializable as exc:
                # Nothing of the step was written; the run ends with the committed steps intact.
                error = ErrorDetail(ErrorCode.STATE_INVALID, str(exc), ErrorCategory.CALLER, retryable=False)
                yield RunFinished(run_id, step, await _end_without_step(leg, error, CompletionReason.ERROR))
                return
            yield StepCommitted(run_id, step, entry.seq, decision)
            if result is not None:
                yield RunFinished(run_id, step, result)
                return
    except (asyncio.CancelledError, GeneratorExit):
        # The caller cancelled the task or abandoned the stream: record it so retry() can continue.
        if leg.run.status is not RunStatus.RUNNING:
            raise
        await asyncio.shield(
            _end_without_step(
                leg,
                ErrorDetail(ErrorCode.CANCELLED, "The run was cancelled", ErrorCategory.CALLER, retryable=True),
                CompletionReason.CANCELLED,
                status=RunStatus.CANCELLED,
            )
        )
        raise


async def _call_model(leg: Leg, step: int, forced: bool) -> Reply | ErrorDetail:
    agent = leg.agent
    request = ModelRequest(
        messages=(*leg.system, *leg.messages),
        tools=() if forced else agent.tool_specs,
        step=step,
        output_schema=agent.output_schema,
        forced_output=forced,
    )
    try:
        reply = await agent.model.generate(request)
    except ModelError as exc:
        facts = {"provider": exc.provider, "status": exc.status, "request_id": exc.request_id}
        return ErrorDetail(ErrorCode.MODEL_ERROR, str(exc), ErrorCategory.MODEL, exc.retryable, facts)
    except Exception as exc:
        return ErrorDetail(ErrorCode.MODEL_ERROR, f"{type(exc).__name__}: {exc}", ErrorCategory.MODEL, retryable=True)
    if not isinstance(reply, Reply):
        return ErrorDetail(
            ErrorCode.MODEL_ERROR,
            f"model returned {type(reply).__name__}, expected Reply",
            ErrorCategory.MODEL,
            retryable=False,
        )
    return reply


async def _run_tools(leg: Leg, step: int, reply: Reply, forced: bool) -> list[Message]:
    if forced:
        return [error_tool_result(_NO_TOOLS_NOW, tool_call_id=c.id) for c in reply.tool_calls]
    tool_map = leg.agent.tool_map
    run = leg.run

    async def one(call: Any) -> Message:
        t = tool_map.get(call.name)
        if t is None:
            names = ", ".join(tool_map) or "none"
            return error_tool_result(f"Unknown tool '{call.name}'. Available tools: {names}", tool_call_id=call.id)
        ctx = RunContext(run.session_id, run.run_id, step, call.id, leg.state, leg.runner)
        return await t.invoke(call, ctx)

    if len(reply.tool_calls) == 1:
        return [await one(reply.tool_calls[0])]
    return list(await asyncio.gather(*(one(c) for c in reply.tool_calls)))


def _check_output(leg: Leg, text: str) -> tuple[Any, str | None]:
    output_type = leg.agent.output_type
    assert output_type is not None
    match = _FENCE.match(text)
    try:
        return output_type.model_validate_json(match.group(1) if match else text), None
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or '(root)'}: {e['msg']}" for e in exc.errors(include_url=False)
        )
        return None, problems


def _decide(leg: Leg, reply: Reply, rows: list[Message], forced: bool) -> tuple[Decision, Any]:
    """Gather this step's signals and ask the resolver. Caller predicates run here, never in the resolver."""
    agent = leg.agent
    output, output_error = None, None
    if agent.output_type is not None and (forced or not reply.tool_calls):
        if reply.tool_calls:
            output_error = "the reply called tools instead of giving the structured output"
        else:
            output, output_error = _check_output(leg, reply.text)
    stop_when, stop_when_error = None, None
    condition = agent.stop_condition
    if condition is not None and reply.tool_calls and not forced:
        view = StepView(leg.steps_used + 1, reply, tuple(rows), (*leg.messages, *rows))
        try:
            stop_when = condition(view)
        except Exception as exc:
            stop_when_error = f"stop_when {condition.label} raised {type(exc).__name__}: {exc}"
    attempts_left = agent.max_completion_retries - leg.forced_attempts - (1 if forced else 0)
    signals = StepSignals(
        stop_reason=reply.stop_reason,
        has_tool_calls=bool(reply.tool_calls),
        steps_used=leg.steps_used + 1,
        max_steps=agent.max_steps,
        stop_when=stop_when,
        stop_when_error=stop_when_error,
        wants_output=agent.output_type is not None,
        output_error=output_error,
        forced=forced,
        completion_attempts_left=attempts_left,
    )
    return resolve(signals), output


async def _commit(
    leg: Leg,
    step: int,
    reply: Reply,
    rows: list[Message],
    decision: Decision,
    output: Any,
    forced: bool,
) -> tuple[LogEntry, RunResult | None]:
    """Commit the step (and, if it ends the run, the run record) in one transaction; then advance the leg."""
    run = leg.run
    new_rows = [Message(Role.ASSISTANT, reply.text, reply.tool_calls), *rows]
    if decision.action is Action.FORCE_OUTPUT:
        why = f" ({decision.detail})" if decision.detail else ""
        new_rows.append(
            automated_feedback(
                f"Respond now with only a JSON object that matches the required output schema, and call no tools{why}.",
                source="forced_completion",
            )
        )
    usage = reply.usage or Usage()
    usage = Usage(usage.input_tokens, usage.output_tokens, usage.requests or 1)
    entry = LogEntry(
        run.session_id,
        leg.next_seq,
        run.run_id,
        step,
        EntryKind.STEP,
        tuple(new_rows),
        {"action": decision.action.value, "reason": decision.reason, "detail": decision.detail},
        usage,
        forced,
    )
    leg_usage = leg.usage + usage
    ended: RunRecord | None = None
    final_output: Any = None
    if decision.ends_run:
        if decision.reason is CompletionReason.OUTPUT:
            final_output = output
        elif decision.reason is CompletionReason.FINAL_ANSWER:
            final_output = reply.text
        completed = decision.action is Action.COMPLETE
        ended = replace(
            run,
            status=RunStatus.COMPLETED if completed else RunStatus.FAILED,
            completion_reason=decision.reason,
            error=decision.error,
            output=_jsonable(final_output),
            detail=decision.detail,
            steps=step,
            usage=leg_usage,
            text=reply.text,
        )
    await leg.store.commit(entry, leg.state, ended)
    # Only now, with the step durable, does the leg move on.
    leg.steps, leg.usage, leg.text = step, leg_usage, reply.text
    leg.messages.extend(new_rows)
    leg.next_seq += 1
    if forced:
        leg.forced_attempts += 1
    leg.forcing = decision.action is Action.FORCE_OUTPUT
    result = None
    if ended is not None:
        leg.run = ended
        result = _result(leg, final_output)
    return entry, result


async def _end_without_step(
    leg: Leg,
    error: ErrorDetail,
    reason: CompletionReason,
    status: RunStatus = RunStatus.FAILED,
) -> RunResult:
    """End the leg when no step can be committed (the model raised, the run was cancelled)."""
    leg.run = leg.record(status=status, completion_reason=reason, error=error, detail=error.message)
    await leg.store.update_run(leg.run)
    return _result(leg, None)


def _jsonable(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)
    return dump(mode="json") if dump is not None else value


def _result(leg: Leg, output: Any) -> RunResult:
    run = leg.run
    return RunResult(
        status=run.status,
        completion_reason=run.completion_reason,
        error=run.error,
        output=output,
        text=run.text,
        usage=run.usage,
        steps=run.steps,
        session_id=run.session_id,
        run_id=run.run_id,
        state=_frozen_copy(leg.state),
        messages=tuple(leg.messages),
        detail=run.detail,
    )


def _frozen_copy(state: Mapping[str, Any]) -> Mapping[str, Any]:
    return MappingProxyType(dict(state))
