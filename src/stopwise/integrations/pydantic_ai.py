"""stopwise's deciders inside a pydantic-ai agent, as one capability (pydantic-ai's public extension point).

    from stopwise.integrations.pydantic_ai import StopwiseCapability

    agent = Agent(model, output_type=[str, DeferredToolRequests],
                  capabilities=[StopwiseCapability(stop_guard=..., guardrails=..., guardian=Guardian(),
                                                   store=SQLiteStore("runs.db"))])

Where each decider sits in pydantic-ai's run, and what its outcome becomes:

- input guardrails: ``before_model_request`` of the run's first request; a block skips the model call and the
  run ends with the block's replacement text as its output;
- tool-call guardrails, then the guardian's risk gate: ``before_tool_execute``; a block is what the model reads
  instead of the tool's result, a rewrite changes the arguments, an escalation raises pydantic-ai's
  ``ApprovalRequired`` (the run ends with ``DeferredToolRequests``; run again with ``DeferredToolResults`` to go
  on, and an approved call runs without asking the gate again);
- the tool-result guardrails, then the guardian's ``integrity`` and ``stagnation`` conditions:
  ``after_tool_execute``, on each result (see ``PeerRun.judge_result``): a result judged injected is withheld
  (the model reads the quarantine notice), the same call again and again appends the re-anchoring on the goal
  to what the model reads, a replan past ``max_replans`` raises ``RunFailed`` (``infeasible``);
- the stop guard, then the output guardrails: ``after_output_process`` on a text answer; a continue is a
  ``ModelRetry`` carrying the feedback, a fail raises ``RunFailed`` out of ``agent.run``;
- the run's token budgets (pydantic-ai's own ``UsageLimits(output_tokens_limit=, total_tokens_limit=)``) cap
  each model call as stopwise's loop caps it: ``before_model_request`` sets the request's ``max_tokens`` to what
  is left of them (the caller's own ``max_tokens`` when lower); a reply the model cut at that cap is the
  budget's end: ``after_model_request`` raises pydantic-ai's ``UsageLimitExceeded`` naming the budget, none of
  its calls runs, and the run is recorded ``token_limit``.

Needs the ``pydantic-ai`` extra. Every decision is recorded in ``store`` under the run's id, in a session named
by pydantic-ai's conversation id, so ``stopwise replay`` and ``stopwise guardian stats`` read these runs.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from stopwise.guardian.guardian import Guardian
from stopwise.guardrails.hooks import Guardrails
from stopwise.integrations import _base
from stopwise.integrations._base import Deciders, PeerRun, RunFailed, UnsupportedVerdict, answer_text
from stopwise.messages import Message, Reply, Role, StopReason, ToolCall, Usage
from stopwise.stop.decision import Action, StepSignals, StopDecision
from stopwise.stop.guard import StopGuard
from stopwise.stop.limits import LimitHit, LimitKind, Limits, OutputCap, Spent, cut_at_cap, output_cap
from stopwise.store.base import Store
from stopwise.tools import Risk

try:
    from pydantic_ai import DeferredToolRequests, ModelRetry, RunContext
    from pydantic_ai.capabilities import AbstractCapability
    from pydantic_ai.exceptions import ApprovalRequired, SkipModelRequest, SkipToolExecution, UsageLimitExceeded
    from pydantic_ai.messages import (
        ModelMessage,
        ModelRequest,
        ModelResponse,
        RetryPromptPart,
        SystemPromptPart,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
        UserPromptPart,
    )
    from pydantic_ai.models import ModelRequestContext
    from pydantic_ai.run import AgentRunResult
    from pydantic_ai.settings import ModelSettings
    from pydantic_ai.tools import ToolDefinition
    from pydantic_ai.usage import RequestUsage, RunUsage, UsageLimits
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "stopwise.integrations.pydantic_ai needs the 'pydantic-ai' extra: pip install 'stopwise[pydantic-ai]'"
    ) from exc

__all__ = ["ConvertedHistory", "RunFailed", "StopwiseCapability", "UnsupportedVerdict", "to_messages"]


class StopwiseCapability(AbstractCapability[Any]):
    """Attach a stop guard, guardrails and a guardian to a pydantic-ai agent, recording their decisions.

    One instance may serve many runs: each run gets a fresh copy (``for_run``) holding that run's records.
    Give the agent ``output_type=[..., DeferredToolRequests]`` when a guardian may escalate, and output
    retries (``retries=``) at least the stop guard's ``max_continues``: a continue is a retry to pydantic-ai.
    """

    def __init__(
        self,
        *,
        stop_guard: StopGuard | None = None,
        guardrails: Guardrails | None = None,
        guardian: Guardian | None = None,
        store: Store | None = None,
        agent: str = "pydantic-ai",
        risks: Mapping[str, Risk | str] | None = None,
        deciders: Deciders | None = None,
    ) -> None:
        self.deciders = deciders or Deciders.of(
            stop_guard=stop_guard, guardrails=guardrails, guardian=guardian, store=store, agent=agent, risks=risks
        )
        self._run: PeerRun | None = None
        self._ended: StopDecision | None = None
        self._asked = False
        self._cap: _Cap | None = None
        """The output cap the budgets set on the current model request (None: none, or the caller's lower one)."""
        self._history = ConvertedHistory()
        """This run's messages as rows, converted once each (see ``ConvertedHistory``)."""

    def _rows(self, ctx: RunContext[Any]) -> list[Message]:
        """The run's messages as rows: only the messages new since the last hook are converted."""
        self._history.update(ctx.messages)
        return self._history.rows

    async def for_run(self, ctx: RunContext[Any]) -> StopwiseCapability:
        fresh = StopwiseCapability(deciders=self.deciders)
        run_id = ctx.run_id or "run"
        fresh._run = PeerRun(self.deciders, ctx.conversation_id or run_id, run_id)
        # ``message_history=`` holds earlier runs: this run's goal and steps start at its prompt, which follows
        # them, or (a run that goes on after approvals, with no prompt of its own) at the latest prompt in them.
        earlier = ctx.messages
        fresh._run.run_start = len(to_messages(earlier)) if ctx.prompt is not None else prompt_start(earlier)
        return fresh

    @property
    def run(self) -> PeerRun:
        if self._run is None:  # pragma: no cover - pydantic-ai calls for_run before any hook
            raise RuntimeError("StopwiseCapability hooks run on the copy for_run returns")
        return self._run

    async def before_run(self, ctx: RunContext[Any]) -> None:
        await self.run.start()

    async def before_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        request_context = self._capped(ctx, request_context)
        if self._asked:
            return request_context
        self._asked = True
        history = self._rows(ctx)
        verdict = await self.run.check_input(history)
        if verdict.decision is not None:
            # The run ends here: no model call, the block's replacement (if any) is the answer.
            self._ended = verdict.decision
            raise SkipModelRequest(ModelResponse(parts=[TextPart(verdict.replacement)]))
        if list(verdict.history) != history:
            raise UnsupportedVerdict("an input guardrail rewrote the history: pydantic-ai offers no way to apply it")
        return request_context

    def _capped(self, ctx: RunContext[Any], request_context: ModelRequestContext) -> ModelRequestContext:
        """``request_context`` with its ``max_tokens`` at most what is left of the run's token budgets."""
        self._cap = None
        budgets, before = _budgets(ctx.usage_limits), _usage(ctx.usage)
        cap = output_cap(budgets, Spent(usage=before))
        if budgets is None or cap is None:
            return request_context
        settings: ModelSettings = {**(request_context.model_settings or {})}
        own = settings.get("max_tokens")
        if own is not None and own < cap.tokens:
            return request_context  # the caller's own cap is the lower: a reply cut there is not the budget's
        self._cap = _Cap(budgets, cap, before)
        settings["max_tokens"] = cap.tokens
        return dataclasses.replace(request_context, model_settings=settings)

    async def after_model_request(
        self, ctx: RunContext[Any], *, request_context: ModelRequestContext, response: ModelResponse
    ) -> ModelResponse:
        capped = self._cap
        if capped is None or response.finish_reason != "length":
            return response
        used = _usage(response.usage)
        reply = Reply(stop_reason=StopReason.MAX_TOKENS, usage=used)
        hit = cut_at_cap(capped.budgets, capped.cap, reply, Spent(usage=capped.before + used))
        if hit is None:
            return response
        # Cut at the budget's cap: the budget is spent (even when exactly), and the cut reply's calls may be
        # unfinished. pydantic-ai's own check is "more than the limit", so it would run them; end as it ends a
        # run past a limit instead (``on_run_error`` records it ``token_limit``).
        name = hit.kind.value
        raise UsageLimitExceeded(f"The reply was cut off at the {name}_limit of {hit.allowed} ({name}={hit.used})")

    async def before_tool_execute(
        self, ctx: RunContext[Any], *, call: ToolCallPart, tool_def: ToolDefinition, args: Any
    ) -> Any:
        if ctx.tool_call_approved:
            return args  # a human approved this call when the run went on: the gate asked already
        proposed = ToolCall(call.tool_name, dict(args) if isinstance(args, Mapping) else {}, id=call.tool_call_id)
        history = self._rows(ctx)
        verdict = await self.run.check_call(ctx.run_step, proposed, history)
        if verdict.blocked is not None:
            raise SkipToolExecution({"error": verdict.blocked})
        if verdict.decision is not None and verdict.decision.action is Action.SUSPEND:
            self._ended = verdict.decision
            reason = verdict.gate.reason if verdict.gate is not None else verdict.decision.detail
            raise ApprovalRequired({"stopwise": reason})
        return dict(verdict.args) if isinstance(args, Mapping) else args

    async def after_tool_execute(
        self, ctx: RunContext[Any], *, call: ToolCallPart, tool_def: ToolDefinition, args: Any, result: Any
    ) -> Any:
        proposed = ToolCall(call.tool_name, dict(args) if isinstance(args, Mapping) else {}, id=call.tool_call_id)
        history = self._rows(ctx)
        value = (await self.run.check_result(ctx.run_step, proposed, result, history)).value
        judged = await self.run.judge_result(ctx.run_step, proposed, value, history)
        if judged.stop is not None and judged.stop.error is not None:
            self._ended = judged.stop
            await self.run.finish(judged.stop, steps=ctx.run_step)
            raise RunFailed(judged.stop.error)
        return judged.value

    async def after_output_process(self, ctx: RunContext[Any], *, output_context: Any, output: Any) -> Any:
        if isinstance(output, DeferredToolRequests) or self._ended is not None:
            return output
        # A structured output is judged as the JSON the model gave; only a text output can be rewritten.
        text = answer_text(output)
        history = self._rows(ctx)
        if history and history[-1].role is Role.ASSISTANT:
            history = history[:-1]  # the answer under judgment is passed on its own
        verdict = await self.run.judge_finish(ctx.run_step, text, history)
        if verdict.decision.action is Action.CONTINUE:
            raise ModelRetry(verdict.feedback or "Keep working on the task before you answer.")
        self._ended = verdict.decision
        if verdict.decision.action is Action.FAIL:
            await self.run.finish(verdict.decision, steps=ctx.run_step, text=text)
            assert verdict.decision.error is not None
            raise RunFailed(verdict.decision.error)
        if isinstance(output, str):
            return verdict.text
        if verdict.text != text:
            await self.run.finish(verdict.decision, steps=ctx.run_step, text=verdict.text)
            raise UnsupportedVerdict(
                "an output guardrail rewrote or blocked a structured output: pydantic-ai would return it unchanged"
            )
        return output

    async def on_run_error(self, ctx: RunContext[Any], *, error: BaseException) -> AgentRunResult[Any]:
        limit = _limit_signals(error, ctx.usage) if isinstance(error, UsageLimitExceeded) else None
        if limit is not None:
            await self.run.stopped_by_peer(limit, steps=ctx.run_step)
        await self.run.crashed(error, steps=ctx.run_step)
        raise error

    async def after_run(self, ctx: RunContext[Any], *, result: AgentRunResult[Any]) -> AgentRunResult[Any]:
        if self.run.run.status.value != "running":
            return result
        ended = self._ended or StopDecision(Action.COMPLETE)
        if isinstance(result.output, DeferredToolRequests):
            ended = ended if ended.action is Action.SUSPEND else StopDecision(Action.SUSPEND)
        text = result.output if isinstance(result.output, str) else ""
        await self.run.finish(ended, steps=ctx.run_step, text=text)
        return result


_LIMIT = re.compile(
    r"(request|tool_calls|per_request_input_tokens|input_tokens|output_tokens|total_tokens|cost)_limit`? of ([0-9.]+)"
)
_USED = re.compile(r"\(`?\w+`?=([0-9.]+)\)")
_LIMIT_KINDS = {
    "tool_calls": LimitKind.TOOL_CALLS,
    "input_tokens": LimitKind.INPUT_TOKENS,
    "per_request_input_tokens": LimitKind.INPUT_TOKENS,
    "output_tokens": LimitKind.OUTPUT_TOKENS,
    "total_tokens": LimitKind.TOTAL_TOKENS,
    "cost": LimitKind.COST,
}


def _limit_signals(error: UsageLimitExceeded, usage: RunUsage) -> StepSignals | None:
    """The stopwise budget a ``UsageLimitExceeded`` names: ``request_limit`` is the step cap (``max_steps``), the
    others the budget of the same name. The exception has no field naming it, so its message is read (the
    ``UsageLimits`` field and its value); None for a message that names none (the run is then a crash)."""
    found = _LIMIT.search(str(error))
    if found is None:
        return None
    name, cap = found.group(1), float(found.group(2).rstrip("."))
    if name == "request":
        return StepSignals(has_tool_calls=True, steps_used=int(cap), max_steps=int(cap))
    kind = _LIMIT_KINDS[name]
    said = _USED.search(str(error))  # the figure that went past, where the message gives it
    counted = {
        LimitKind.TOOL_CALLS: usage.tool_calls,
        LimitKind.INPUT_TOKENS: usage.input_tokens,
        LimitKind.OUTPUT_TOKENS: usage.output_tokens,
        LimitKind.TOTAL_TOKENS: usage.total_tokens,
    }.get(kind, usage.cost if usage.cost is not None else 0)
    used = float(said.group(1)) if said is not None else counted
    return StepSignals(has_tool_calls=True, limit_hit=LimitHit(kind, cap, used))


@dataclasses.dataclass(frozen=True, slots=True)
class _Cap:
    """The cap the budgets set on a model request: the budgets, the cap, and the run's usage before it."""

    budgets: Limits
    cap: OutputCap
    before: Usage


def _budgets(limits: UsageLimits | None) -> Limits | None:
    """pydantic-ai's output and total token limits as stopwise's budgets (what caps a call); None when neither
    is set."""
    if limits is None or (limits.output_tokens_limit is None and limits.total_tokens_limit is None):
        return None
    return Limits(output_tokens=limits.output_tokens_limit, total_tokens=limits.total_tokens_limit)


def _usage(usage: RunUsage | RequestUsage) -> Usage:
    return Usage(input_tokens=usage.input_tokens, output_tokens=usage.output_tokens)


def to_messages(history: Sequence[ModelMessage]) -> list[Message]:
    """pydantic-ai's history as stopwise's rows (what the guardian's projection and the guards read)."""
    return [row for row, _ in _rows(history)]


def prompt_start(history: Sequence[ModelMessage]) -> int:
    """The index in ``to_messages(history)`` of the latest user prompt (a retry prompt is not one), 0 if none."""
    return max((i for i, (_, prompt) in enumerate(_rows(history)) if prompt), default=0)


def _rows(history: Sequence[ModelMessage]) -> Iterator[tuple[Message, bool]]:
    """Each row of ``history``, and whether it is a user prompt."""
    for message in history:
        yield from _message_rows(message)


class ConvertedHistory(_base.ConvertedHistory[ModelMessage]):
    """A run's messages as rows, converted once each (see ``stopwise.integrations._base.ConvertedHistory``):
    pydantic-ai hands every hook the run's same message objects, and completes its newest request in place."""

    def extend(self, rows: list[Message], item: ModelMessage) -> None:
        rows.extend(row for row, _ in _message_rows(item))

    def mark(self, item: ModelMessage) -> object:
        """A reply's parts list and their count: pydantic-ai appends to a request it completes in place, never to a
        reply it has made, so a reply with the same parts converts to the same rows (every hook of a 500-call
        reply's calls then costs a comparison, not 500 conversions). A request is converted again each time."""
        return (item.parts, len(item.parts)) if isinstance(item, ModelResponse) else None


def _message_rows(message: ModelMessage) -> Iterator[tuple[Message, bool]]:
    """The rows of one message, and whether each is a user prompt."""
    if isinstance(message, ModelResponse):
        text = "".join(p.content for p in message.parts if isinstance(p, TextPart))
        calls = tuple(
            ToolCall(p.tool_name, p.args_as_dict(), id=p.tool_call_id)
            for p in message.parts
            if isinstance(p, ToolCallPart)
        )
        yield Message(Role.ASSISTANT, text, calls), False
        return
    if not isinstance(message, ModelRequest):
        return
    for part in message.parts:
        if isinstance(part, SystemPromptPart):
            yield Message(Role.SYSTEM, part.content), False
        elif isinstance(part, UserPromptPart):
            content = part.content if isinstance(part.content, str) else json.dumps(part.content, default=str)
            yield Message(Role.USER, content), True
        elif isinstance(part, ToolReturnPart):
            yield Message(Role.TOOL, part.model_response_str(), tool_call_id=part.tool_call_id), False
        elif isinstance(part, RetryPromptPart):
            if part.tool_name is not None and part.tool_call_id:
                yield Message(Role.TOOL, part.model_response(), tool_call_id=part.tool_call_id), False
            else:
                yield Message(Role.USER, part.model_response()), False
