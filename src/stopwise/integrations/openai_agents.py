"""stopwise's deciders inside an OpenAI Agents SDK agent, through the SDK's guardrails and approvals.

    from stopwise.integrations.openai_agents import Stopwise

    stopwise = Stopwise(stop_guard=..., guardrails=..., guardian=Guardian(), store=SQLiteStore("runs.db"))
    agent = stopwise.attach(Agent("assistant", tools=[...]))
    result = await stopwise.run(agent, "Pay invoice INV-7.")

Where each decider sits in the SDK's run, and what its outcome becomes:

- input guardrails: an SDK input guardrail; a block trips it (``InputGuardrailTripwireTriggered``, its
  ``output_info`` is the stopwise ``Block``);
- tool-call guardrails, then the guardian's risk gate: each function tool's ``needs_approval`` predicate asks
  both, in stopwise's order; an escalation interrupts the run for approval (``result.interruptions``, approve
  on ``result.to_state()`` and run it again); a block is what the model reads instead of the result (the tool's
  input guardrail rejects the content with it);
- the tool-result guardrails, then the guardian's ``integrity`` and ``stagnation`` conditions: each function
  tool's output guardrail, on each result (see ``PeerRun.judge_result``); what the model reads instead (a
  rewrite, a block, the quarantine notice of a result judged injected, the result with the re-anchoring on the
  goal after the same call again and again) is the content the guardrail rejects the result with; a replan past
  ``max_replans`` raises ``RunFailed`` (``infeasible``) out of ``Stopwise.run``;
- the stop guard, then the output guardrails: an SDK output guardrail on the final answer; a continue trips it
  and ``Stopwise.run`` runs the agent again on the history plus the feedback (a stop guard's continue has no
  counterpart in the SDK); a fail trips it and ``Stopwise.run`` raises ``RunFailed``; an output guardrail's
  block trips it (``OutputGuardrailTripwireTriggered``).

Needs the ``openai-agents`` extra. Every decision is recorded in ``store``, so ``stopwise replay`` and
``stopwise guardian stats`` read these runs.
"""

from __future__ import annotations

import contextvars
import dataclasses
import inspect
import json
import uuid
from collections.abc import Mapping, Sequence
from typing import Any, Literal, cast

from stopwise.errors import StopwiseError
from stopwise.guardian.guardian import Guardian
from stopwise.guardrails.hooks import Guardrails
from stopwise.integrations import _base
from stopwise.integrations._base import (
    CallVerdict,
    Deciders,
    FinishVerdict,
    PeerRun,
    RunFailed,
    UnsupportedVerdict,
    answer_text,
)
from stopwise.messages import Message, Role, ToolCall
from stopwise.stop.decision import Action, StepSignals, StopDecision
from stopwise.stop.guard import StopGuard
from stopwise.store.base import Store
from stopwise.tools import Risk

try:
    from agents import (
        Agent,
        FunctionTool,
        GuardrailFunctionOutput,
        InputGuardrail,
        InputGuardrailTripwireTriggered,
        MaxTurnsExceeded,
        OutputGuardrail,
        OutputGuardrailTripwireTriggered,
        RunContextWrapper,
        Runner,
        RunResult,
    )
    from agents.items import ToolApprovalItem
    from agents.run import DEFAULT_MAX_TURNS
    from agents.run_error_handlers import RunErrorHandler, RunErrorHandlerInput, RunErrorHandlers
    from agents.tool_guardrails import (
        ToolGuardrailFunctionOutput,
        ToolInputGuardrail,
        ToolInputGuardrailData,
        ToolOutputGuardrail,
        ToolOutputGuardrailData,
    )
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "stopwise.integrations.openai_agents needs the 'openai-agents' extra: pip install 'stopwise[openai-agents]'"
    ) from exc

__all__ = ["ConvertedHistory", "NotInARun", "RunFailed", "Stopwise", "UnsupportedVerdict", "to_messages"]

_RUN: contextvars.ContextVar[_Run] = contextvars.ContextVar("stopwise_openai_agents_run")


class NotInARun(StopwiseError):
    """An attached agent was run with ``Runner.run`` directly: run it with ``Stopwise.run`` so its decisions
    have a run to be recorded in."""


@dataclasses.dataclass
class _Run:
    peer: PeerRun
    calls: dict[str, CallVerdict] = dataclasses.field(default_factory=dict)
    """Verdicts reached in the approval predicate, applied by the tool's input guardrail."""
    steps: int = 0
    ended: StopDecision | None = None
    seen: list[tuple[str, Message, Message]] = dataclasses.field(default_factory=list)
    """Each call that ran in this run, by id, with its result as the model read it: the SDK's hooks see a
    turn's input only, and the guardian's stagnation check reads the calls made before."""

    converted: ConvertedHistory = dataclasses.field(default_factory=lambda: ConvertedHistory())
    """The turns' input items as rows, converted once each (see ``ConvertedHistory``)."""
    reply: dict[str, ToolCall] = dataclasses.field(default_factory=dict)
    """The calls of the model's latest reply, by id: the SDK asks each call's approval before any of them runs,
    and its hooks never show the reply itself."""
    reply_row: Message | None = None
    """``reply`` as the assistant row the results' checks read (one object for all of them)."""
    capped: bool = False
    """The caller's ``max_turns`` error handler ran: its output is the run's answer, recorded ``max_steps_handled``."""
    replied: bool = False
    """A result of ``reply`` was checked: the next approval asked starts a new reply."""

    def asked(self, call: ToolCall) -> None:
        """``call``'s approval is asked: it belongs to the latest reply, or starts a new one."""
        if self.replied:
            self.reply, self.replied = {}, False
        self.reply[call.id] = call
        self.reply_row = None

    def rows(self, turn_input: Sequence[Any]) -> list[Message]:
        """The turn's input as rows: only the items new since the last hook are converted."""
        self.converted.update(turn_input)
        return self.converted.rows

    def history(self, turn_input: Sequence[Any], call_id: str | None = None) -> list[Message]:
        """The turn's input as rows, followed by the calls (and results) of this run it does not hold; when
        ``call_id`` is one of the latest reply's calls, that reply's earlier results are left out and the reply
        (all its calls) ends the rows, as the native loop's history ends with the reply whose results it judges."""
        rows = list(self.rows(turn_input))
        held = {m.tool_call_id for m in rows if m.tool_call_id}
        reply = self.reply if call_id in self.reply else {}
        for seen_id, call, result in self.seen:
            if seen_id not in held and seen_id not in reply:
                rows.extend((call, result))
        if reply:
            if self.reply_row is None:
                self.reply_row = Message(Role.ASSISTANT, "", tuple(reply.values()))
            rows.append(self.reply_row)
        return rows


def _current() -> _Run:
    try:
        return _RUN.get()
    except LookupError:
        raise NotInARun("run an agent attached with Stopwise.attach through Stopwise.run(agent, input)") from None


class Stopwise:
    """Attach a stop guard, guardrails and a guardian to OpenAI Agents SDK agents, and run them recording every
    decision. Invalid settings raise ``ConfigError`` naming the field."""

    def __init__(
        self,
        *,
        stop_guard: StopGuard | None = None,
        guardrails: Guardrails | None = None,
        guardian: Guardian | None = None,
        store: Store | None = None,
        agent: str = "openai-agents",
        risks: Mapping[str, Risk | str] | None = None,
    ) -> None:
        self.deciders = Deciders.of(
            stop_guard=stop_guard, guardrails=guardrails, guardian=guardian, store=store, agent=agent, risks=risks
        )

    def attach(self, agent: Agent[Any]) -> Agent[Any]:
        """A copy of ``agent`` with stopwise's guardrails added to its own, and its function tools asking
        stopwise before they run (other tools are left as they are). The agents it hands off to (given as
        ``Agent`` s in ``handoffs``, and theirs in turn) are attached too: a handed-off agent's tools pass the same
        gate, and its final answer (the run's, then) meets the stop guard. A ``Handoff`` object is left as it
        is: its target is built by its own callback."""
        return self._attach(agent, {})

    def _attach(self, agent: Agent[Any], done: dict[int, Agent[Any]]) -> Agent[Any]:
        if id(agent) in done:  # agents that hand off to each other are attached once each
            return done[id(agent)]
        tools = [self._tool(t) if isinstance(t, FunctionTool) else t for t in agent.tools]
        attached = done[id(agent)] = agent.clone(
            tools=tools,
            # Not in parallel with the model: a block must come before any model call, and any tool it asks for.
            input_guardrails=[
                *agent.input_guardrails,
                InputGuardrail(self._check_input, name="stopwise_input", run_in_parallel=False),
            ],
            output_guardrails=[*agent.output_guardrails, OutputGuardrail(self._judge, name="stopwise_finish")],
        )
        attached.handoffs = [self._attach(h, done) if isinstance(h, Agent) else h for h in agent.handoffs]
        return attached

    def _tool(self, t: FunctionTool) -> FunctionTool:
        own = t.needs_approval

        async def needs_approval(ctx: RunContextWrapper[Any], params: dict[str, Any], call_id: str) -> bool:
            run = _current()
            run.steps += 1
            history = run.rows(ctx.turn_input)
            proposed = ToolCall(t.name, dict(params), id=call_id)
            run.asked(proposed)
            verdict = await run.peer.check_call(run.steps, proposed, history)
            run.calls[call_id] = verdict
            if verdict.blocked is not None:
                return False  # the model reads the block; there is nothing to approve
            if verdict.decision is not None and verdict.decision.action is Action.SUSPEND:
                return True
            # The tool's own approval rule still holds: stopwise adds a reason to ask, never removes one.
            if callable(own):
                answer = own(ctx, params, call_id)
                return bool(await answer) if inspect.isawaitable(answer) else bool(answer)
            return bool(own)

        def apply_verdict(data: ToolInputGuardrailData) -> ToolGuardrailFunctionOutput:
            verdict = _current().calls.get(data.context.tool_call_id)
            if verdict is not None and verdict.blocked is not None:
                return ToolGuardrailFunctionOutput.reject_content(verdict.blocked, output_info=verdict)
            if verdict is not None and dict(verdict.args) != json.loads(data.context.tool_arguments or "{}"):
                raise UnsupportedVerdict(f"a tool-call guardrail rewrote {t.name}'s arguments: the SDK cannot apply it")
            return ToolGuardrailFunctionOutput.allow(output_info=verdict)

        async def check_result(data: ToolOutputGuardrailData) -> ToolGuardrailFunctionOutput:
            run = _current()
            ctx = data.context
            ran = ToolCall(t.name, json.loads(ctx.tool_arguments or "{}"), id=ctx.tool_call_id)
            run.replied = True
            history = run.history(ctx.turn_input, ran.id)
            verdict = await run.peer.check_result(run.steps, ran, data.output, history)
            judged = await run.peer.judge_result(run.steps, ran, verdict.value, history)
            if judged.stop is not None and judged.stop.error is not None:
                run.ended = judged.stop
                await run.peer.finish(judged.stop, steps=run.steps)
                raise RunFailed(judged.stop.error)
            verdict = judged if judged.changed else verdict
            value = verdict.value
            shown = value if isinstance(value, str) else json.dumps(value, default=str)
            row = Message(Role.TOOL, shown, tool_call_id=ran.id)
            run.seen.append((ran.id, Message(Role.ASSISTANT, "", (ran,)), row))
            if not verdict.changed:
                return ToolGuardrailFunctionOutput.allow(output_info=verdict)
            # The SDK's way to show the model something other than the result: reject it with the new content.
            return ToolGuardrailFunctionOutput.reject_content(shown, output_info=verdict)

        guardrail: ToolInputGuardrail[Any] = ToolInputGuardrail(apply_verdict, name="stopwise_tool_call")
        results: ToolOutputGuardrail[Any] = ToolOutputGuardrail(check_result, name="stopwise_tool_result")
        return dataclasses.replace(
            t,
            needs_approval=needs_approval,
            tool_input_guardrails=[*(t.tool_input_guardrails or []), guardrail],
            tool_output_guardrails=[*(t.tool_output_guardrails or []), results],
        )

    async def _check_input(self, ctx: RunContextWrapper[Any], agent: Agent[Any], items: Any) -> GuardrailFunctionOutput:
        run = _current()
        history = to_messages([{"role": "user", "content": items}] if isinstance(items, str) else items)
        verdict = await run.peer.check_input(history)
        if verdict.decision is not None:
            run.ended = verdict.decision
            return GuardrailFunctionOutput(output_info=verdict, tripwire_triggered=True)
        if list(verdict.history) != history:
            raise UnsupportedVerdict("an input guardrail rewrote the history: the SDK cannot apply it")
        return GuardrailFunctionOutput(output_info=verdict, tripwire_triggered=False)

    async def _judge(self, ctx: RunContextWrapper[Any], agent: Agent[Any], output: Any) -> GuardrailFunctionOutput:
        run = _current()
        if run.capped:  # the caller's max_turns handler gave this output: the SDK's run ends with it, unjudged
            return GuardrailFunctionOutput(output_info=None, tripwire_triggered=False)
        run.steps += 1
        text = answer_text(output)
        verdict = await run.peer.judge_finish(run.steps, text, run.rows(ctx.turn_input))
        run.ended = verdict.decision
        stands = verdict.decision.action is Action.COMPLETE and verdict.text == text
        return GuardrailFunctionOutput(output_info=verdict, tripwire_triggered=not stands)

    async def run(self, agent: Agent[Any], input: Any, *, session_id: str | None = None, **kwargs: Any) -> RunResult:
        """``Runner.run(agent, input, **kwargs)`` with its decisions recorded, and the stop guard's continues
        honoured: a continue runs the agent again on the history plus the feedback. ``input`` may be a
        ``RunState`` (after approving an interruption). Raises ``RunFailed`` when the resolver fails the run."""
        peer = PeerRun(self.deciders, session_id or uuid.uuid4().hex, uuid.uuid4().hex)
        if isinstance(input, list):  # a conversation's items: this run's goal and steps start at its last input
            peer.starts_at_input(to_messages(input))
        await peer.start()
        run = _Run(peer)
        max_turns = kwargs.pop("max_turns", DEFAULT_MAX_TURNS)
        handlers = cast("RunErrorHandlers[Any]", dict(kwargs.pop("error_handlers", None) or {}))
        on_max_turns = handlers.get("max_turns")
        if on_max_turns is not None:
            handlers["max_turns"] = _marking(run, on_max_turns, max_turns)
        turns = 0  # the model calls of the legs before this one: the run's max_turns holds across continues
        token = _RUN.set(run)
        try:
            while True:
                try:
                    if max_turns is not None and turns >= max_turns and on_max_turns is None:
                        raise _exceeded(max_turns)
                    # Continues that spent the turns leave 0: the SDK then hits its cap before any model call and
                    # runs the caller's max_turns handler itself, as on its own cap.
                    left = None if max_turns is None else max(max_turns - turns, 0)
                    result = await Runner.run(agent, input, max_turns=left, error_handlers=handlers or None, **kwargs)
                except OutputGuardrailTripwireTriggered as exc:
                    verdict = exc.guardrail_result.output.output_info
                    if not isinstance(verdict, FinishVerdict):  # the agent's own output guardrail tripped
                        blocked = f"output guardrail '{exc.guardrail_result.guardrail.get_name()}' tripped"
                        await peer.stopped_by_peer(StepSignals(output_blocked=blocked), steps=run.steps)
                        raise
                    if verdict.decision.action is Action.CONTINUE and exc.run_data is not None:
                        replay = _replayable(exc.run_data.input, exc.run_data.new_items)
                        if kwargs.get("session") is not None:  # the SDK's session adds what it saved itself
                            replay = _unsaved(replay, await kwargs["session"].get_items())
                        input = [*replay, _user(verdict.feedback)]
                        turns += len(exc.run_data.raw_responses)
                        continue
                    await peer.finish(verdict.decision, steps=run.steps, text=verdict.text)
                    if verdict.decision.action is Action.FAIL and verdict.decision.error is not None:
                        raise RunFailed(verdict.decision.error) from exc
                    raise
                except InputGuardrailTripwireTriggered as exc:
                    if run.ended is None:  # the agent's own input guardrail tripped, not stopwise's
                        blocked = f"input guardrail '{exc.guardrail_result.guardrail.get_name()}' tripped"
                        await peer.stopped_by_peer(StepSignals(input_blocked=blocked), steps=run.steps)
                    else:
                        await peer.finish(run.ended, steps=run.steps)
                    raise
                except MaxTurnsExceeded as exc:
                    assert max_turns is not None  # the SDK raises it only under a cap
                    await peer.stopped_by_peer(_cap(max_turns), steps=run.steps)
                    if turns:  # a continued leg ran under what was left: the caller set the whole run's cap
                        raise _exceeded(max_turns) from exc
                    raise
                except Exception as exc:
                    if run.ended is not None and run.ended.action is Action.FAIL and run.ended.error is not None:
                        # The guardian stopped the run from a tool's hook: the SDK wraps what a hook raises.
                        raise RunFailed(run.ended.error) from exc
                    await peer.crashed(exc, steps=run.steps)
                    raise
                break
        finally:
            _RUN.reset(token)
        ended = run.ended or StopDecision(Action.COMPLETE)
        if result.interruptions:
            ended = StopDecision(Action.SUSPEND)
        output = result.final_output if isinstance(result.final_output, str) else ""
        if run.capped:
            assert max_turns is not None  # the SDK runs the max_turns handler only under a cap
            await peer.stopped_by_peer(_cap(max_turns, handled=True), steps=run.steps, text=output)
        else:
            await peer.finish(ended, steps=run.steps, text=output)
        return result


def _cap(max_turns: int, *, handled: bool = False) -> StepSignals:
    """The SDK's turn cap as the signals of stopwise's step cap: the run is recorded ``max_steps`` (failed), or,
    when the caller's ``max_turns`` handler gave the output, ``max_steps_handled`` (completed), as stopwise's loop
    records its ``on_max_steps`` handler."""
    on_cap: Literal["fail", "handler"] = "handler" if handled else "fail"
    return StepSignals(has_tool_calls=True, steps_used=max_turns, max_steps=max_turns, on_max_steps=on_cap)


def _exceeded(max_turns: int) -> MaxTurnsExceeded:
    """The SDK's exception for the caller's cap (a continued leg runs under what is left of it)."""
    return MaxTurnsExceeded(f"Max turns ({max_turns}) exceeded")


def _marking(run: _Run, handler: RunErrorHandler[Any], max_turns: int | None) -> RunErrorHandler[Any]:
    """The caller's ``max_turns`` error handler, marking ``run`` capped when the SDK calls it, and shown the
    caller's cap (not what was left of it for a continued leg)."""

    async def marked(data: RunErrorHandlerInput[Any]) -> Any:
        run.capped = True
        if max_turns is not None:
            data = dataclasses.replace(data, error=_exceeded(max_turns))
        out = handler(data)
        return await out if inspect.isawaitable(out) else out

    return marked


def _user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text or "Keep working on the task before you answer."}


def _replayable(first: Any, items: Sequence[Any]) -> list[Any]:
    """The run's input and what it produced, as input for the next run (approval markers are not input)."""
    start = [_user(first)] if isinstance(first, str) else list(first)
    return [*start, *(i.to_input_item() for i in items if not isinstance(i, ToolApprovalItem))]


def _unsaved(replay: Sequence[Any], saved: Sequence[Any]) -> list[Any]:
    """What of ``replay`` the session does not end with: the SDK saves a run's input and its turns' items to the
    session as it goes (not the answer a tripwire stopped), and sends the session's items before the next input."""
    key = [json.dumps(item, sort_keys=True, default=str) for item in replay]
    held = [json.dumps(item, sort_keys=True, default=str) for item in saved]
    kept = next(k for k in range(min(len(key), len(held)), -1, -1) if k == 0 or held[-k:] == key[:k])
    return list(replay[kept:])


def to_messages(items: Sequence[Any]) -> list[Message]:
    """The SDK's input items (Responses API shapes) as stopwise's rows (what the guardian and the guards read)."""
    rows: list[Message] = []
    for item in items:
        _extend(rows, item)
    return rows


class ConvertedHistory(_base.ConvertedHistory[Any]):
    """A run's input items as rows, converted once each (see ``stopwise.integrations._base.ConvertedHistory``):
    the SDK rebuilds a turn's input items (equal ones, compared by value) and appends the turn's new items."""

    def extend(self, rows: list[Message], item: Any) -> None:
        _extend(rows, item)


def _extend(rows: list[Message], item: Any) -> None:
    """Append one input item's row to ``rows``; a call merges into the reply before it when that has no text."""
    data = item if isinstance(item, Mapping) else getattr(item, "model_dump", lambda: {})()
    kind = data.get("type")
    if kind == "function_call":
        call = ToolCall(data["name"], json.loads(data.get("arguments") or "{}"), id=data["call_id"])
        if rows and rows[-1].role is Role.ASSISTANT and not rows[-1].content:
            last = rows.pop()
            rows.append(Message(Role.ASSISTANT, last.content, (*last.tool_calls, call)))
        else:
            rows.append(Message(Role.ASSISTANT, "", (call,)))
    elif kind == "function_call_output":
        output = data.get("output")
        content = output if isinstance(output, str) else json.dumps(output, default=str)
        rows.append(Message(Role.TOOL, content, tool_call_id=data["call_id"]))
    elif data.get("role") in ("user", "assistant", "system", "developer"):
        raw = data.get("content")
        content = (
            raw
            if isinstance(raw, str)
            else "".join(str(p.get("text", "")) for p in raw or () if isinstance(p, Mapping))
        )
        role = Role.SYSTEM if data["role"] == "developer" else Role(data["role"])
        rows.append(Message(role, content))
