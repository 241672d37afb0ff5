"""stopwise's deciders between the steps of a LangGraph agent graph (a ``messages`` state), as three nodes.

    from stopwise.integrations.langgraph import Stopwise

    stopwise = Stopwise(stop_guard=..., guardrails=..., guardian=Guardian(), store=SQLiteStore("runs.db"))
    graph = StateGraph(MessagesState)
    graph.add_node("input", stopwise.input_node(model="model"))                    # first, on each input
    graph.add_node("model", call_model)
    graph.add_node("finish", stopwise.finish_node(model="model", tools="tools"))   # after every model call
    graph.add_node("tools", stopwise.tool_node(tools, model="model"))              # instead of ToolNode
    graph.add_edge(START, "input"); graph.add_edge("model", "finish")             # no edge out of "tools"
    app = graph.compile(checkpointer=InMemorySaver())

- ``input_node`` runs the input guardrails once per input: a block ends the graph with its replacement;
- ``finish_node`` routes a reply with tool calls to the tools node; on a final answer it asks the guardian's
  turn conditions (an escalation interrupts, a stop with failure raises ``RunFailed``), then the stop guard,
  then the output guardrails: a continue goes back to the model with the feedback as a human message, a fail
  raises ``RunFailed`` out of ``invoke``, a complete ends the graph (with the output guardrails' rewrite);
- ``tool_node`` runs the tool calls as stopwise's loop does: the tool-call guardrails and the guardian's risk
  gate for every call first; an escalation is LangGraph's ``interrupt()`` (resume with ``Command(resume=True)``
  to approve, ``Command(resume="why")`` or ``False`` to reject), and nothing in the batch runs until every
  escalated call is answered; a block is the call's result; the calls that may run are run by LangGraph's own
  ``ToolNode`` (pass yours to keep its settings). Then the guardian's turn conditions on the turn,
  mapped as the loop maps them: continue; replan (the re-anchoring on the goal follows the results); escalate
  (``interrupt({"guardian": ...})``; a turn escalated for integrity shows the model the quarantine notice
  instead of each output, an approval releases them as labelled data, a rejection re-anchors); stop (the graph
  ends, or ``RunFailed`` for ``infeasible``). It routes itself (``Command(goto=model)`` or ``END``).
- a run left behind (``ainvoke`` raised out of it) is recorded cancelled when the thread's next input reaches
  ``input_node``; a graph without ``input_node`` goes on under the run left behind (nothing else tells a new input
  from a resume).

Needs the ``langgraph`` extra. Decisions are recorded in ``store``: a session per thread, a run per input (from
the first node call until the finish node ends the graph), so ``stopwise replay`` and ``guardian stats`` read
them.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from stopwise._step.guardian import QUARANTINE
from stopwise.approvals import Approve, Reject
from stopwise.errors import StopwiseError
from stopwise.guardian.guardian import Guardian
from stopwise.guardrails.hooks import Guardrails
from stopwise.integrations import _base
from stopwise.integrations._base import CallVerdict, Deciders, PeerRun, RunFailed, TurnVerdict, UnsupportedVerdict
from stopwise.messages import Message, Role, ToolCall, automated_feedback
from stopwise.result import RunStatus
from stopwise.stop.decision import Action, StepSignals, StopDecision, resolve
from stopwise.stop.guard import StopGuard
from stopwise.store.base import Store
from stopwise.tools import Risk

try:
    from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
    from langchain_core.runnables import RunnableConfig
    from langchain_core.tools import BaseTool
    from langgraph.graph import END
    from langgraph.prebuilt import ToolNode
    from langgraph.prebuilt.tool_node import msg_content_output
    from langgraph.types import Command, interrupt
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "stopwise.integrations.langgraph needs the 'langgraph' extra: pip install 'stopwise[langgraph]'"
    ) from exc

__all__ = ["ConvertedHistory", "RunFailed", "Stopwise", "UnsupportedToolOutput", "UnsupportedVerdict", "to_messages"]


class Stopwise:
    """The deciders a graph consults, and the two nodes that consult them. Invalid settings raise
    ``ConfigError`` naming the field."""

    def __init__(
        self,
        *,
        stop_guard: StopGuard | None = None,
        guardrails: Guardrails | None = None,
        guardian: Guardian | None = None,
        store: Store | None = None,
        agent: str = "langgraph",
        risks: Mapping[str, Risk | str] | None = None,
    ) -> None:
        self.deciders = Deciders.of(
            stop_guard=stop_guard, guardrails=guardrails, guardian=guardian, store=store, agent=agent, risks=risks
        )
        self._runs: dict[str, PeerRun] = {}
        self._verdicts: dict[tuple[str, str], CallVerdict] = {}
        """Verdicts by (thread, call): LangGraph re-executes a node after an interrupt, and a call already
        judged is not judged (nor recorded) again."""
        self._results: dict[tuple[str, str], ToolMessage] = {}
        """What each call answered, by (thread, call): a batch that ran does not run again on a re-execution."""
        self._turns: dict[tuple[str, str], TurnVerdict] = {}
        """The guardian's turn verdicts by (thread, ``turn:<step>``), judged once per turn."""
        self._histories: dict[str, ConvertedHistory] = {}
        """Each running thread's messages as rows, converted once (see ``ConvertedHistory``)."""

    def _rows(self, config: RunnableConfig, messages: Sequence[BaseMessage]) -> ConvertedHistory:
        """The thread's messages as rows: only the messages new since the thread's last step are converted."""
        thread = _thread(config)
        converted = self._histories.get(thread)
        if converted is None:
            converted = self._histories[thread] = ConvertedHistory()
        converted.update(messages)
        return converted

    async def _run(self, config: RunnableConfig, rows: Sequence[Message]) -> PeerRun:
        thread = _thread(config)
        run = self._runs.get(thread)
        if run is None:
            run = self._runs[thread] = PeerRun(self.deciders, thread, uuid.uuid4().hex)
            run.starts_at_input(rows)  # the thread's earlier runs are not this run's
            await run.start()
        return run

    def _forget(self, run: PeerRun) -> None:
        """The run ended: the thread's next input starts a new run."""
        thread = run.run.session_id
        self._runs.pop(thread, None)
        self._histories.pop(thread, None)
        for memo in (self._verdicts, self._results, self._turns):
            for key in [k for k in memo if k[0] == thread]:
                del memo[key]

    async def _abandon(self, run: PeerRun) -> None:
        """End a run the graph left behind: ``ainvoke`` raised out of it (a tool's exception, ``recursion_limit``,
        a model error) or the caller dropped it mid-run. No node sees why, so it is recorded cancelled; a run that
        waits for approval is left waiting only while the graph can be resumed, and a new input means it was not."""
        steps = self._histories[run.run.session_id].steps if run.run.session_id in self._histories else 0
        if run.run.status in (RunStatus.RUNNING, RunStatus.SUSPENDED):
            await run.finish(resolve(StepSignals(cancelled=True)), steps=steps)
        self._forget(run)

    def input_node(self, *, model: str = "model") -> Any:
        """The node between ``START`` and the model: the input guardrails on the history. A block ends the graph
        with the block's replacement as the answer (no model call); otherwise the graph goes on to ``model``."""

        async def check_input(state: Mapping[str, Any], config: RunnableConfig) -> Command[Any]:
            left = self._runs.get(_thread(config))
            if left is not None:  # a new input while the thread's run never ended: it was abandoned
                await self._abandon(left)
            history = self._rows(config, state["messages"]).rows
            run = await self._run(config, history)
            verdict = await run.check_input(history)
            if verdict.decision is not None:
                await run.finish(verdict.decision, steps=0, text=verdict.replacement)
                self._forget(run)
                return Command(goto=END, update={"messages": [AIMessage(verdict.replacement)]})
            if list(verdict.history) != history:
                raise UnsupportedVerdict("an input guardrail rewrote the history: rewrite the state in a node instead")
            return Command(goto=model)

        return check_input

    def finish_node(self, *, model: str = "model", tools: str = "tools") -> Any:
        """The node after the model: tool calls go to ``tools``; a final answer is judged (see the module)."""

        async def finish(state: Mapping[str, Any], config: RunnableConfig) -> Command[Any]:
            messages: Sequence[BaseMessage] = state["messages"]
            last = messages[-1]
            if isinstance(last, AIMessage) and last.tool_calls:
                return Command(goto=tools)
            converted = self._rows(config, messages)
            run = await self._run(config, converted.rows)
            history = converted.rows[:-1]  # the rows before the answer under judgment
            step = converted.steps
            _, decision, feedback = await self._turn(run, step, history, [], final=last.text)
            if decision.action is Action.FAIL and decision.error is not None:
                await run.finish(decision, steps=step, text=last.text)
                self._forget(run)
                raise RunFailed(decision.error)
            if decision.action is Action.REPLAN:  # a rejected review of the answer: back to the model
                return Command(goto=model, update={"messages": _feedback(feedback)})
            verdict = await run.judge_finish(step, last.text, history)
            if verdict.decision.action is Action.CONTINUE:
                feedback = verdict.feedback or "Keep working on the task before you answer."
                return Command(goto=model, update={"messages": [HumanMessage(feedback)]})
            await run.finish(verdict.decision, steps=step, text=verdict.text)
            self._forget(run)
            if verdict.decision.action is Action.FAIL and verdict.decision.error is not None:
                raise RunFailed(verdict.decision.error)
            update = {} if verdict.text == last.text else {"messages": [AIMessage(verdict.text, id=last.id)]}
            return Command(goto=END, update=update)

        return finish

    def tool_node(self, tools: Sequence[BaseTool] | ToolNode, *, model: str = "model") -> Any:
        """The node that runs the last reply's tool calls, after the guardrails and the risk gate, then asks the
        guardian's turn conditions about the turn; it routes itself: on to ``model``, or to ``END`` when the
        guardian stops the run (see the module). Add no edge out of it.

        The calls that may run are run by LangGraph's own ``ToolNode`` (``tools``, or one built from them), so
        what LangGraph documents for it holds: the calls of a batch run concurrently; an unknown tool and
        invalid arguments are error ``ToolMessage`` s the model reads; ``handle_tool_errors`` (give your own
        ``ToolNode``) decides whether a tool's exception is an error message or raises out of the graph; an
        ``interrupt()`` inside a tool pauses the graph and the batch runs again on resume."""
        runner = tools if isinstance(tools, ToolNode) else ToolNode(list(tools))

        async def run_tools(state: Mapping[str, Any], config: RunnableConfig) -> Command[Any]:
            messages: Sequence[BaseMessage] = state["messages"]
            last = messages[-1]
            assert isinstance(last, AIMessage)
            converted = self._rows(config, messages)
            run = await self._run(config, converted.rows)
            thread = run.run.session_id
            history = converted.rows
            step = converted.steps
            verdicts = []
            for call in last.tool_calls:
                key = (thread, str(call["id"]))
                if key not in self._verdicts:
                    proposed = ToolCall(call["name"], dict(call["args"]), id=str(call["id"]))
                    self._verdicts[key] = await run.check_call(step, proposed, history)
                verdicts.append(self._verdicts[key])
            # Every escalation is answered before anything in the batch runs (stopwise's approval rule): on a
            # resume LangGraph re-executes this node and interrupt() returns the answers in order.
            escalated = [v.decision for v in verdicts if v.decision is not None and v.decision.action is Action.SUSPEND]
            if escalated and run.run.status is RunStatus.RUNNING:
                await run.finish(escalated[0], steps=step)  # on record as waiting for approval
            answers: list[Any] = []
            for call, verdict in zip(last.tool_calls, verdicts, strict=True):
                if verdict.decision is not None and verdict.decision.action is Action.SUSPEND:
                    reason = verdict.gate.reason if verdict.gate is not None else ""
                    answers.append(interrupt({"tool_call": call, "reason": reason}))
                else:
                    answers.append(True)
            pending = [
                (call, verdict)
                for call, verdict, answer in zip(last.tool_calls, verdicts, answers, strict=True)
                if (thread, str(call["id"])) not in self._results  # a re-execution runs no finished batch again
            ]
            if pending:
                ran = await self._execute(run, step, runner, state, config, last, pending, answers, history)
                self._results.update(((thread, str(m.tool_call_id)), m) for m in ran)
            done = [self._results[(thread, str(call["id"]))] for call in last.tool_calls]
            results = [Message(Role.TOOL, m.text, tool_call_id=str(m.tool_call_id)) for m in done]
            turn, decision, feedback = await self._turn(run, step, history, results)
            rows: list[BaseMessage] = [
                m if r.content == m.text else m.model_copy(update={"content": r.content})
                for m, r in zip(done, turn.results, strict=True)
            ]
            if decision.ends_run:
                await run.finish(decision, steps=step, text=last.text)
                self._forget(run)
                if decision.action is Action.FAIL and decision.error is not None:
                    raise RunFailed(decision.error)
                return Command(goto=END, update={"messages": rows})
            return Command(goto=model, update={"messages": [*rows, *_feedback(feedback)]})

        return run_tools

    async def _execute(
        self,
        run: PeerRun,
        step: int,
        runner: ToolNode,
        state: Mapping[str, Any],
        config: RunnableConfig,
        last: AIMessage,
        pending: Sequence[tuple[Mapping[str, Any], CallVerdict]],
        answers: Sequence[Any],
        history: Sequence[Message],
    ) -> list[ToolMessage]:
        """The pending calls' results, in the reply's order: a block's or a rejection's error message, the rest
        run together by ``runner`` (with a tool-call guardrail's arguments), then the tool-result guardrails."""
        answer_of = {str(c["id"]): a for c, a in zip(last.tool_calls, answers, strict=True)}
        out: dict[str, ToolMessage] = {}
        allowed: list[Any] = []
        for call, verdict in pending:
            call_id, answer = str(call["id"]), answer_of[str(call["id"])]
            if verdict.blocked is not None:
                out[call_id] = _refused(call, {"error": verdict.blocked})
            elif answer is not True:
                why = answer if isinstance(answer, str) else "no reason given"
                out[call_id] = _refused(call, {"error": f"Rejected by the reviewer: {why}"})
            else:
                allowed.append({**call, "args": dict(verdict.args)})
        if allowed:
            # The state as the node got it, its last reply asking only for the calls that may run.
            batch = {**state, "messages": [*state["messages"][:-1], last.model_copy(update={"tool_calls": allowed})]}
            produced = await runner.ainvoke(batch, config)
            for message in _tool_messages(produced):
                call = next(c for c in allowed if str(c["id"]) == str(message.tool_call_id))
                ran = ToolCall(call["name"], dict(call["args"]), id=str(call["id"]))
                failed = message.status == "error"
                value = {"error": message.text} if failed else _decoded(message.text)
                guarded = await run.check_result(step, ran, value, history, is_error=failed)
                out[ran.id] = message
                if guarded.changed:  # what the model reads instead, as ToolNode would render it
                    out[ran.id] = message.model_copy(update={"content": msg_content_output(guarded.value)})
        return [out[str(c["id"])] for c, _ in pending]

    async def _turn(
        self,
        run: PeerRun,
        step: int,
        history: Sequence[Message],
        results: Sequence[Message],
        *,
        final: str | None = None,
    ) -> tuple[TurnVerdict, StopDecision, Sequence[str]]:
        """The guardian's turn conditions on this turn (judged once: LangGraph re-executes a node after an
        interrupt), and what follows: an escalation is ``interrupt()``-ed for a human and settled with the answer.
        Returns the verdict (the tool rows the model reads), the decision that stands and the model's feedback."""
        thread = run.run.session_id
        key = (thread, f"turn:{step}")
        if key not in self._turns:
            self._turns[key] = await run.check_turn(step, history, results, final=final)
        turn = self._turns[key]
        if turn.decision.action is not Action.SUSPEND:
            return turn, turn.decision, [turn.feedback] if turn.feedback else []
        if run.run.status is RunStatus.RUNNING:
            await run.finish(turn.decision, steps=step)  # on record as waiting for the review
        assert turn.turn is not None
        review = {"conditions": list(turn.turn.escalated), "reason": turn.turn.reason}
        answer = interrupt({"guardian": {**review, "quarantined": list(turn.quarantined)}})
        settled = await run.review_turn(step, turn, _review(answer), history)
        return turn, settled.decision, settled.feedback


def _thread(config: RunnableConfig) -> str:
    return str((config.get("configurable") or {}).get("thread_id") or "default")


def _decoded(content: str) -> Any:
    """A tool result as the tool-result guardrails read it (as the loop decodes one): the data a tool's JSON
    content holds (``ToolNode`` renders a non-text result as JSON), else the text."""
    if content[:1] in ("{", "["):
        try:
            return json.loads(content)
        except ValueError:
            pass
    return content


def _refused(call: Mapping[str, Any], error: Mapping[str, str]) -> ToolMessage:
    """What the model reads for a call that does not run (a guardrail's block, a reviewer's rejection)."""
    return ToolMessage(json.dumps(error), tool_call_id=str(call["id"]), name=call["name"], status="error")


def _tool_messages(produced: Any) -> list[ToolMessage]:
    """The ``ToolMessage`` s a ``ToolNode`` returned; a tool that returns a ``Command`` is refused by name."""
    items = produced.get("messages", []) if isinstance(produced, Mapping) else produced
    if any(not isinstance(m, ToolMessage) for m in items):
        raise UnsupportedToolOutput("a tool returned a Command: stopwise's tool node routes the graph itself")
    return list(items)


def _feedback(texts: Sequence[str]) -> list[HumanMessage]:
    """Feedback for the model as human messages behind stopwise's automated-feedback label."""
    return [HumanMessage(automated_feedback(text, source="guardian").content) for text in texts]


def _review(answer: Any) -> Approve | Reject:
    """A resume value as a review: ``True`` approves; a string (the reviewer's message) or anything else rejects."""
    if answer is True:
        return Approve()
    return Reject(answer) if isinstance(answer, str) else Reject("The reviewer rejected the turn.")


class UnsupportedToolOutput(StopwiseError):
    """A tool returned a ``Command`` (a state update or a route): the tool node routes the graph itself, so it
    cannot apply one."""


def to_messages(history: Sequence[BaseMessage]) -> list[Message]:
    """LangChain messages as stopwise's rows (what the guardian's projection and the guards read); a message of
    another kind has no row."""
    return [row for row in map(_row, history) if row is not None]


def _row(m: BaseMessage) -> Message | None:
    if isinstance(m, AIMessage):
        calls = tuple(ToolCall(c["name"], dict(c["args"]), id=str(c["id"])) for c in m.tool_calls)
        return Message(Role.ASSISTANT, m.text, calls)
    if isinstance(m, ToolMessage):
        # A withheld output stays marked: the guardian's projection shows it as withheld, not as evidence.
        held = {"quarantined": True} if m.text == QUARANTINE else {}
        return Message(Role.TOOL, m.text, tool_call_id=m.tool_call_id, metadata=held)
    if isinstance(m, HumanMessage):
        return Message(Role.USER, m.text)
    if isinstance(m, SystemMessage):
        return Message(Role.SYSTEM, m.text)
    return None


class ConvertedHistory(_base.ConvertedHistory[BaseMessage]):
    """One thread's messages as rows, converted once each (see ``stopwise.integrations._base.ConvertedHistory``):
    LangGraph hands a node the same message objects step after step; messages read back from a checkpoint are
    compared by value; a message removed with ``RemoveMessage`` or replaced by id, or a state overwritten,
    converts the whole history again."""

    def extend(self, rows: list[Message], item: BaseMessage) -> None:
        row = _row(item)
        if row is not None:
            rows.append(row)
