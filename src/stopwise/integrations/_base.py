"""What every integration shares: the deciders it consults, one peer run as stopwise records it, and the typed
failure a peer's run API raises when the resolver fails the run.

An integration owns no policy. It turns the peer's hook into the signals our deciders take (a proposed call, a
final answer, the input), asks them here, and turns the resolver's ``StopDecision`` into what the peer
understands (a retry prompt, an approval request, an exception). Every verdict is written to a stopwise store as
the loop writes it (the same typed records, in ``note`` entries of the run), so ``stopwise replay`` and
``stopwise guardian stats`` read a peer's runs like any other.
"""

from __future__ import annotations

import abc
import dataclasses
import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from pydantic import BaseModel

from stopwise._checks import check_store
from stopwise._step.calls import caller_failure
from stopwise._step.guardian import held_before, reanchor_text, released, withhold
from stopwise._step.stop_guard import ask_guard, guard_event
from stopwise.approvals import ApprovalRecord, Approve, Reject
from stopwise.errors import ConfigError, ErrorCategory, ErrorCode, ErrorDetail, StopwiseError
from stopwise.guardian.conditions import Condition, GuardianOutcome
from stopwise.guardian.guardian import Guardian, consult, label
from stopwise.guardian.policy import PolicyInputs
from stopwise.guardian.projection import Projection, tail_start
from stopwise.guardian.records import GuardianDecision
from stopwise.guardrails.hooks import (
    Guardrails,
    InputContext,
    OutputContext,
    ToolCallContext,
    ToolResultContext,
    run_chain,
)
from stopwise.guardrails.verdicts import GuardrailError, GuardrailRaised, GuardrailTimeout, Hook
from stopwise.history_view import HistoryView
from stopwise.messages import Message, Reply, Role, ToolCall, automated_feedback, encode_tool_result
from stopwise.records import LogRecord, ToolReceipt, parse_log, to_data
from stopwise.result import RunStatus
from stopwise.row_copies import CopiedRows, RowCopies, own_args, own_call, own_row, own_value
from stopwise.stop.decision import Action, GuardSignal, StepSignals, StopDecision, apply_decision, resolve
from stopwise.stop.guard import StopGuard, StopGuardContext, StopGuardRecord, guard_budget
from stopwise.stop.repeats import Repeats
from stopwise.store.base import EntryKind, LogEntry, RunRecord, Store
from stopwise.store.memory import MemoryStore
from stopwise.tools import Risk

__all__ = [
    "ConvertedHistory",
    "CallVerdict",
    "Deciders",
    "FinishVerdict",
    "InputVerdict",
    "PeerRun",
    "ResultVerdict",
    "ReviewVerdict",
    "RunFailed",
    "TurnVerdict",
    "UnsupportedVerdict",
    "answer_text",
]


class UnsupportedVerdict(StopwiseError):
    """A guardrail asked for something the peer offers no public way to do: rewriting the input history
    (pydantic-ai, LangGraph's nodes), a tool call's arguments or the input (the OpenAI Agents SDK), a structured
    output (pydantic-ai). One class for every integration, so one ``except`` catches it whichever peer runs."""


class RunFailed(StopwiseError):
    """The resolver failed the run (a stop guard's ``Fail``, a failing guard with ``on_error="fail"``): raised
    through the peer's run API, carrying the same ``ErrorDetail`` a stopwise run would end with."""

    def __init__(self, error: ErrorDetail) -> None:
        super().__init__(f"{error.code}: {error.message}")
        self.error = error

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickled whole (a worker pool or DBOS hands it across processes so): rebuilt from the detail.
        return (type(self), (self.error,))


@dataclass(frozen=True, slots=True)
class Deciders:
    """The deciders a peer's agent consults, and where their records go. Invalid values raise ``ConfigError``."""

    stop_guard: StopGuard | None = None
    """Consulted on the peer's final answer: stop, continue with feedback, or fail."""
    guardrails: Guardrails | None = None
    """The input, tool-call and output hooks (the tool-result hook where the peer offers one)."""
    guardian: Guardian | None = None
    """Its pre-execution questions (risk) gate each proposed tool call; an escalation asks for approval. Its turn
    conditions (progress, drift, integrity, goal reached, ...) judge each turn where the peer lets us see one."""
    store: Store = field(default_factory=MemoryStore)
    """Where runs and decision records are written: a ``SQLiteStore`` makes them readable by ``stopwise``."""
    agent: str = "agent"
    """The agent's name on the run records."""
    risks: Mapping[str, Risk | str] = field(default_factory=dict)
    """Declared risk classes of the peer's tools, by name (a floor for the guardian, as ``@tool(risk=...)``)."""

    @classmethod
    def of(
        cls,
        *,
        stop_guard: StopGuard | None,
        guardrails: Guardrails | None,
        guardian: Guardian | None,
        store: Store | None,
        agent: str,
        risks: Mapping[str, Risk | str] | None,
    ) -> Deciders:
        """The deciders from an integration's keyword arguments: a fresh in-memory store unless one is given."""
        kept = store if store is not None else MemoryStore()
        return cls(stop_guard, guardrails, guardian, kept, agent, risks if risks is not None else {})

    def __post_init__(self) -> None:
        if self.stop_guard is not None and not isinstance(self.stop_guard, StopGuard):
            raise ConfigError("stop_guard", f"must be a StopGuard, got {type(self.stop_guard).__name__}")
        if self.guardrails is not None and not isinstance(self.guardrails, Guardrails):
            raise ConfigError("guardrails", f"must be a Guardrails(...), got {type(self.guardrails).__name__}")
        if self.guardian is not None and not isinstance(self.guardian, Guardian):
            raise ConfigError("guardian", f"must be a Guardian(...), got {type(self.guardian).__name__}")
        check_store("store", self.store)
        if not isinstance(self.agent, str) or not self.agent.strip():
            raise ConfigError("agent", f"must be a non-empty string (the name on run records), got {self.agent!r}")
        if not isinstance(self.risks, Mapping):
            raise ConfigError("risks", f"must be a mapping of tool name to risk class, got {type(self.risks).__name__}")
        risks: dict[str, Risk] = {}
        for name, risk in self.risks.items():
            try:
                risks[name] = Risk(risk)
            except ValueError:
                raise ConfigError(f"risks[{name!r}]", f"must be one of {[r.value for r in Risk]}") from None
        object.__setattr__(self, "risks", risks)


@dataclass(frozen=True, slots=True)
class InputVerdict:
    """What happens to the run's input."""

    history: tuple[Message, ...]
    """The history to send (an input guardrail may have rewritten it)."""
    decision: StopDecision | None = None
    """Set when a guardrail blocked: complete, ``guardrail_input``; the peer ends the run with no model call."""
    replacement: str = ""
    """The block's replacement answer, if it gave one."""


@dataclass(frozen=True, slots=True)
class CallVerdict:
    """What happens to one proposed tool call."""

    args: Mapping[str, Any]
    """The arguments to run it with (after a tool-call guardrail's rewrite)."""
    blocked: str | None = None
    """A guardrail blocked it: what the model reads instead of a result."""
    decision: StopDecision | None = None
    """``suspend`` when it needs a human first (the guardian's risk gate escalated)."""
    gate: GuardianDecision | None = None


@dataclass(frozen=True, slots=True)
class ResultVerdict:
    """What the model reads of one tool result."""

    value: Any
    changed: bool = False
    """A guardrail rewrote or blocked the result, or the guardian withheld it or added feedback to it: ``value``
    replaces it (a block: ``{"error": ...}``)."""
    stop: StopDecision | None = None
    """Set when the guardian stopped the run (a replan past ``max_replans``: ``fail``, ``infeasible``): the peer
    ends the run with it (``PeerRun.finish`` is not called yet) and raises ``RunFailed``."""


@dataclass(frozen=True, slots=True)
class FinishVerdict:
    """What happens to the peer's final answer."""

    decision: StopDecision
    """``continue`` (send ``feedback`` to the model), ``complete`` or ``fail`` (raise ``RunFailed``)."""
    text: str
    """The answer that stands (an output guardrail may have rewritten or replaced it)."""
    feedback: str = ""


@dataclass(frozen=True, slots=True)
class TurnVerdict:
    """The guardian's turn conditions on one turn: what the model reads of its tool results, and what happens.

    ``decision`` is the resolver's, as the native loop gets it: ``continue``; ``replan`` (send ``feedback``, the
    re-anchoring on the goal, to the model); ``suspend`` (the turn escalated: a human reviews it, see
    ``PeerRun.review_turn``); ``complete`` (``goal_reached``) or ``fail`` (``infeasible``) end the run. On a final
    answer (no tool calls) only ``suspend`` and ``fail`` are the guardian's; anything else lets the answer go on
    to the stop guard."""

    decision: StopDecision
    results: tuple[Message, ...] = ()
    """The turn's tool rows as the model reads them: an integrity escalation replaces each output with the
    quarantine notice (the raw output is kept in a quarantined ``ToolReceipt`` record)."""
    turn: GuardianDecision | None = None
    """The guardian's decision record; None when the guardian has no turn conditions."""
    feedback: str = ""
    """For a replan: the re-anchoring the model reads (behind stopwise's automated-feedback label)."""
    quarantined: tuple[str, ...] = ()
    """The call ids whose outputs were withheld."""


@dataclass(frozen=True, slots=True)
class ReviewVerdict:
    """A human's answer to a turn escalation, as the native loop settles a guardian review."""

    decision: StopDecision
    """``continue`` after an approval; ``replan`` after a rejection."""
    feedback: tuple[str, ...] = ()
    """What the model reads next (behind stopwise's automated-feedback label): each released output after an
    approval, the re-anchoring with the reviewer's message after a rejection."""


def answer_text(output: Any) -> str:
    """A peer's final output as the text the stop guard and the output guardrails read: text as it is, a
    structured output (a pydantic model, or plain data) as JSON."""
    if isinstance(output, str):
        return output
    if isinstance(output, BaseModel):
        return output.model_dump_json()
    return json.dumps(output, default=str)


def _message_text(rows: Sequence[Message]) -> str:
    return "\n\n".join(m.content for m in rows if m.content)


_PER_RESULT = ("integrity", "stagnation")
"""The turn conditions a per-result hook asks: what one tool result can show on its own."""


@dataclass(frozen=True, slots=True)
class _CallBase:
    """The projection a reply's calls share, without a pending call, and what it was made from: the run's goal,
    its steps before the rows projected, and those rows."""

    goal: str
    before: int
    window: tuple[Message, ...]
    projection: Projection


@dataclass(slots=True)
class _Reply:
    """A reply whose results a per-result hook judges one by one, and what the native loop would read once for
    its step: the policy's inputs as they stood before its first result, and whether it replanned already."""

    row: Message
    at: int
    """Its index in the history the hooks pass."""
    calls: dict[str, ToolCall]
    """Its calls by id."""
    inputs: PolicyInputs
    replanned: bool = False


class PeerRun:
    """One run of a peer's agent as stopwise records it. Start it, consult it from the peer's hooks, finish it."""

    def __init__(self, deciders: Deciders, session_id: str, run_id: str) -> None:
        self.deciders = deciders
        self.run = RunRecord(run_id, session_id, deciders.agent)
        self.records: list[LogRecord] = []
        """This session's stop guard records and this run's others: the guard's budget is counted from them."""
        self._seq = 1
        self._started = False
        self.replans = 0
        """Replans made in this run (the guardian's own and rejected reviews): the policy's ``max_replans``."""
        self.run_start = 0
        """Where this run's rows start in the histories the peer passes its hooks (the index of its input), for a
        peer whose histories hold a thread's earlier runs too (LangGraph): the guardian reads the run's goal and
        steps from there on, as the native loop reads them from the run's start."""
        self._counted: tuple[int, Message | None, int] = (0, None, 0)
        """The run's assistant rows counted at the last projection: up to which index, the row just before it,
        and how many (see ``_steps_before``)."""
        self._reply: _Reply | None = None
        """The reply whose results ``judge_result`` judges (see ``_reply_of``)."""
        self._call_base: _CallBase | None = None
        """The projection the risk gate shares among one reply's calls (see ``_project``)."""
        self._rewritten: dict[str, ToolCall] = {}
        """The calls a redacting tool-call guardrail changed, by id, with the arguments it left: the peer's history
        keeps the model's arguments, and the guardian's projections (stored in its records) read these instead."""
        self._copies = RowCopies()
        """The copies of the peer's rows the guardrails and the stop guard have read in this run (see ``_shown``)."""

    def _shown(self, history: Sequence[Message], *tail: Message) -> HistoryView:
        """``history`` (then ``tail``) as a guardrail or the stop guard is handed it: each row it reads is a copy
        (of a row of ``history``, made on its first read in the run: ``stopwise.row_copies``), so a hook that
        changes a row in place changes neither the peer's own history (a row's calls share their arguments with
        the peer's messages) nor what the guardian projects. ``history`` is taken as it stands: a peer's converted
        history may be cut back and converted again between hooks."""
        return HistoryView.of_log(CopiedRows(tuple(history), self._copies), tail=map(own_row, tail))

    def starts_at_input(self, rows: Sequence[Message]) -> None:
        """Start this run's rows (``run_start``) at the latest user row of ``rows``, the history it is given."""
        self.run_start = next((i for i in range(len(rows) - 1, -1, -1) if rows[i].role is Role.USER), 0)

    async def start(self) -> None:
        """Write the run record (running). Earlier runs of the session count toward the stop guard's budget."""
        if self._started:
            return
        snapshot = await self.deciders.store.load_session(self.run.session_id)
        if snapshot is not None:
            self._seq = snapshot.next_seq
            # Read as the core reads a session (``parse_log``): a damaged record is ``UnreadableEntry`` naming it.
            self.records = [r for _, rs in parse_log(snapshot.entries) for r in rs if isinstance(r, StopGuardRecord)]
        await self.deciders.store.start_run(self.run, None, {})
        self._started = True

    async def _record(self, step: int, records: Sequence[LogRecord]) -> None:
        if not records:
            return
        self.records.extend(records)
        entry = LogEntry(
            self.run.session_id, self._seq, self.run.run_id, step, EntryKind.NOTE, (), records=to_data(records)
        )
        await self.deciders.store.commit(entry, {})
        self._seq += 1

    async def check_input(self, history: Sequence[Message]) -> InputVerdict:
        """The input guardrails on the run's history (see ``InputVerdict``)."""
        guardrails = self.deciders.guardrails
        if guardrails is None or not guardrails.has(Hook.INPUT):
            return InputVerdict(tuple(history))
        run = self.run
        chain = await run_chain(
            guardrails,
            Hook.INPUT,
            self._shown(history),
            lambda msgs: InputContext(msgs, None, run.session_id, run.run_id, None),
            step=None,
        )
        await self._record(0, chain.records)
        if chain.block is not None:
            decision = resolve(StepSignals(input_blocked=chain.block.reason))
            return InputVerdict(tuple(history), decision, chain.block.replacement or "")
        # A row passed on as handed is the peer's own row again: only a rewrite's new rows are new.
        return InputVerdict(tuple(map(self._copies.original, chain.value)))

    async def check_call(self, step: int, call: ToolCall, history: Sequence[Message]) -> CallVerdict:
        """The tool-call guardrails, then the guardian's risk gate, on one proposed call (``history`` ends with
        the reply that proposed it). The gate judges it against this run's goal and steps (from ``run_start``)."""
        args: Mapping[str, Any] = own_args(call.args) if isinstance(call.args, Mapping) else {}
        guardrails = self.deciders.guardrails
        run = self.run
        if guardrails is not None and guardrails.has(Hook.TOOL_CALL):
            chain = await run_chain(
                guardrails,
                Hook.TOOL_CALL,
                args,
                lambda a: ToolCallContext(
                    self._shown(history),
                    step,
                    run.session_id,
                    run.run_id,
                    None,
                    own_call(dataclasses.replace(call, args=a)),
                ),
                step=step,
                tool_call_id=call.id,
            )
            await self._record(step, chain.records)
            if chain.redacted:
                # As the native loop: what a redacting verdict removed reaches no projection (none of the
                # arguments after a block); a rewrite that is no redaction keeps the model's arguments, for audit.
                kept = {} if chain.block is not None else dict(chain.value)
                self._rewritten[call.id] = dataclasses.replace(call, args=kept)
            if chain.block is not None:
                return CallVerdict(args, blocked=f"Blocked by guardrail '{chain.blocked_by}': {chain.block.reason}")
            args = chain.value
        guardian = self.deciders.guardian
        if guardian is None or not guardian.call_conditions:
            return CallVerdict(args)
        pending = dataclasses.replace(call, args=dict(args))
        projection = self._project(guardian, history, self._goal(guardian, history), pending=pending)
        consultation = await consult(
            guardian,
            projection,
            guardian.call_conditions,
            PolicyInputs({}),
            run_id=run.run_id,
            step=step,
            kind="pre_execution",
            call_id=call.id,
        )
        await self._record(step, [consultation.decision, *consultation.labels])
        if consultation.decision.outcome is GuardianOutcome.ESCALATE:
            return CallVerdict(args, decision=resolve(StepSignals(approvals_pending=True)), gate=consultation.decision)
        return CallVerdict(args, gate=consultation.decision)

    async def check_result(
        self, step: int, call: ToolCall, value: Any, history: Sequence[Message], *, is_error: bool = False
    ) -> ResultVerdict:
        """The tool-result guardrails on what a call returned (see ``ResultVerdict``); a changed result keeps
        the raw one in a ``ToolReceipt`` record, as the loop does."""
        guardrails = self.deciders.guardrails
        if guardrails is None or not guardrails.has(Hook.TOOL_RESULT):
            return ResultVerdict(value)
        run = self.run
        # The guardrails are handed a copy of the peer's result, which the peer's history holds as it is.
        chain = await run_chain(
            guardrails,
            Hook.TOOL_RESULT,
            own_value(value),
            lambda v: ToolResultContext(
                self._shown(history), step, run.session_id, run.run_id, None, own_call(call), v, is_error
            ),
            step=step,
            tool_call_id=call.id,
        )
        if not chain.records:
            return ResultVerdict(value)
        raw = encode_tool_result(value, tool_call_id=call.id)
        await self._record(step, [*chain.records, ToolReceipt(call.id, raw.content, dict(raw.metadata))])
        if chain.block is not None:
            return ResultVerdict({"error": f"Blocked by guardrail '{chain.blocked_by}': {chain.block.reason}"}, True)
        return ResultVerdict(chain.value, True)

    async def check_turn(
        self, step: int, history: Sequence[Message], results: Sequence[Message], *, final: str | None = None
    ) -> TurnVerdict:
        """The guardian's turn conditions on one turn, as the native loop asks them after the turn's tools ran:
        ``history`` is the rows up to the reply that made the calls (this run's from ``run_start``; the guardian
        reads no earlier run's goal nor steps), ``results`` their tool rows (with
        ``tool_call_id``); on a final answer, ``history`` is the rows before it, ``final`` its text and
        ``results`` empty. The policy reads the run's earlier turn decisions (hysteresis), its replans and how
        many times in a row the latest call was made (stagnation). The decision is recorded, with a quarantined
        ``ToolReceipt`` for each output an integrity escalation withholds (see ``TurnVerdict``)."""
        guardian = self.deciders.guardian
        conditions = guardian.turn_conditions if guardian is not None else ()
        return await self._consult_turn(step, history, results, final, conditions)

    async def judge_result(self, step: int, call: ToolCall, value: Any, history: Sequence[Message]) -> ResultVerdict:
        """The guardian's ``integrity`` and ``stagnation`` conditions on one tool result, for a peer whose only
        point after a tool ran is a per-result hook (``history``: the run's rows up to the reply that made the
        call). One consultation per result (a ``turn`` decision with the call's id), read as the native loop
        reads a turn: an integrity escalation withholds the output (the model reads the quarantine notice, the
        raw output is kept in a quarantined ``ToolReceipt``); a replan (the same call again and again) appends
        the re-anchoring on the goal to what the model reads; a replan past ``max_replans`` is ``stop`` (the
        typed ``infeasible`` failure, for the peer to end the run with). A peer cannot suspend after a tool ran:
        an escalation is recorded, and its output withheld, but no human is asked.

        The consultation sees the run's earlier steps and, of the reply, its text and this call with its result:
        not the reply's other calls, whose results have not come yet (the native loop never projects a call
        without its result). Its cost does not grow with the reply's calls, and the integrity answer is the one
        the native loop gives a step of this result alone, so the native loop escalates a wide step exactly
        when one of its results escalates here (its answer is the most suspicious result's). What the native
        loop asks once per step is asked once per reply: the policy's inputs (earlier turns, replans, the run's
        latest call repeated, counted over the whole reply) are the reply's, and a reply that replans counts one
        replan, its re-anchoring added to the first result that replans."""
        guardian = self.deciders.guardian
        conditions = guardian.conditions.only(_PER_RESULT).turn() if guardian is not None else ()
        if guardian is None or not conditions:
            return ResultVerdict(value)
        row = encode_tool_result(value, tool_call_id=call.id)
        reply = self._reply_of(history, call, conditions)
        if reply is None:
            # No reply in the history made it (a peer whose hooks never show the reply): the call is the reply.
            rows = [*history, Message(Role.ASSISTANT, "", (call,))]
        else:
            made = reply.calls[call.id]
            rows = [*history[: reply.at], Message(Role.ASSISTANT, reply.row.content, (made,))]
        turn = await self._consult_turn(step, rows, [row], None, conditions, call.id, reply)
        if turn.quarantined:
            return ResultVerdict(turn.results[0].content, True)
        if turn.decision.action is Action.FAIL:
            return ResultVerdict(value, stop=turn.decision)
        if turn.feedback:
            feedback = automated_feedback(turn.feedback, source="guardian_replan").content
            return ResultVerdict(f"{row.content}\n\n{feedback}", True)
        return ResultVerdict(value)

    def _reply_of(self, history: Sequence[Message], call: ToolCall, conditions: Sequence[Condition]) -> _Reply | None:
        """The reply in ``history`` that made ``call`` (its latest assistant row), kept while its results come in:
        None when the latest assistant row did not make it (the call is then the turn's whole reply)."""
        at = next((i for i in range(len(history) - 1, self.run_start - 1, -1) if history[i].role is Role.ASSISTANT), -1)
        if at < 0:
            return None
        kept = self._reply
        if kept is None or kept.at != at or (kept.row is not history[at] and kept.row != history[at]):
            row = history[at]
            calls = {c.id: c for c in row.tool_calls}
            if call.id not in calls:
                return None
            kept = self._reply = _Reply(row, at, calls, self._policy_inputs(history, conditions))
        return kept if call.id in kept.calls else None

    def _policy_inputs(self, rows: Sequence[Message], conditions: Sequence[Condition]) -> PolicyInputs:
        """The policy's inputs after ``rows``: the conditions held before, the run's replans, and how many times
        in a row this run (its rows from ``run_start``) repeated its latest call, and the latest cycle of calls it
        repeated, counted as the native loop counts them."""
        repeats = Repeats.of(rows, start=self.run_start)
        held = held_before(conditions, self.records)
        return PolicyInputs(held, self.replans, repeats.streak.count, cycle=repeats.cycles.latest)

    async def _consult_turn(
        self,
        step: int,
        history: Sequence[Message],
        results: Sequence[Message],
        final: str | None,
        conditions: tuple[Condition, ...],
        call_id: str | None = None,
        reply: _Reply | None = None,
    ) -> TurnVerdict:
        guardian = self.deciders.guardian
        if guardian is None or not conditions:
            return TurnVerdict(resolve(StepSignals(has_tool_calls=final is None)), tuple(results))
        started = time.perf_counter()
        rows = [*history, *results]
        shown = [*rows, Message(Role.ASSISTANT, final)] if final is not None else rows
        projection = self._project(guardian, shown, self._goal(guardian, history), final=final)
        inputs = reply.inputs if reply is not None else self._policy_inputs(shown, conditions)
        consultation = await consult(
            guardian,
            projection,
            conditions,
            inputs,
            run_id=self.run.run_id,
            step=step,
            kind="turn",
            call_id=call_id,
            started=started,
        )
        turn = consultation.decision
        records: list[LogRecord] = [turn, *consultation.labels]
        seen = tuple(results)
        quarantined: tuple[str, ...] = ()
        if turn.outcome is GuardianOutcome.ESCALATE and "integrity" in turn.escalated and results:
            ids = [r.tool_call_id or "" for r in results]
            seen = tuple(withhold(ids, results, records))
            quarantined = tuple(i for i, r in zip(ids, seen, strict=True) if r.metadata.get("quarantined"))
        await self._record(step, records)
        guardian_said = None if turn.outcome is GuardianOutcome.CONTINUE else turn.outcome.value
        signals = StepSignals(
            has_tool_calls=final is None,
            guardian=guardian_said,  # type: ignore[arg-type]  # GuardianOutcome's values are the Literal's
            guardian_reason=turn.reason if guardian_said is not None else "",
        )
        decision = resolve(signals)
        if final is not None and decision.action not in (Action.SUSPEND, Action.FAIL):
            decision = resolve(StepSignals())  # the answer goes on to the stop guard, as in the native loop
        feedback = ""
        if decision.action is Action.REPLAN and not (reply is not None and reply.replanned):
            self.replans += 1
            feedback = reanchor_text(self._goal(guardian, history), guardian.criteria, decision.detail)
            if reply is not None:
                reply.replanned = True
        return TurnVerdict(decision, seen, turn, feedback, quarantined)

    def _goal(self, guardian: Guardian, history: Sequence[Message]) -> str:
        """The run's goal as the guardian reads it: its configured goal, else the run's first user input (the
        first at or after ``run_start`` in ``history``)."""
        if guardian.goal:
            return guardian.goal
        rows = (history[i] for i in range(self.run_start, len(history)))
        return next((m.content for m in rows if m.role is Role.USER), "")

    def _project(
        self,
        guardian: Guardian,
        rows: Sequence[Message],
        goal: str,
        *,
        pending: ToolCall | None = None,
        final: str | None = None,
    ) -> Projection:
        """The guardian's projection of ``rows``: only the last ``history_steps`` steps are projected, the steps
        before them counted (the same projection as of all the rows, at a cost that does not grow with the run).
        The risk gate's projections of one reply's calls share one projection of the rows, each call then put in
        as the pending one, as the native loop shares them: without it a reply of n calls cost n projections of
        n calls each (the risk gates of a 500-call reply: 0.65-0.90 s, now 0.26-0.41 s)."""
        start = tail_start(rows, guardian.history_steps, lo=min(self.run_start, len(rows)))
        window = tuple(self._as_run(r) for r in rows[start:])
        before = self._steps_before(rows, start)
        risks = {name: Risk(risk).value for name, risk in self.deciders.risks.items()}
        if pending is not None and final is None:
            kept = self._call_base
            # The same rows: the same objects, or equal ones (a peer converts its newest message again per hook).
            if kept is None or kept.goal != goal or kept.before != before or kept.window != window:
                base = guardian.project(window, goal=goal, criteria=guardian.criteria, risks=risks, steps_before=before)
                kept = self._call_base = _CallBase(goal, before, window, base)
            return dataclasses.replace(
                kept.projection, pending=pending, pending_risk=risks.get(pending.name, "unknown")
            )
        return guardian.project(
            window,
            goal=goal,
            criteria=guardian.criteria,
            risks=risks,
            steps_before=before,
            pending=pending,
            final=final,
        )

    def _as_run(self, row: Message) -> Message:
        """``row`` with each call a redacting tool-call guardrail changed in the arguments it left (as the native
        loop keeps its history row: a redacted secret reaches no projection, so no stored decision); ``row``
        itself when it holds none."""
        rewritten = self._rewritten
        if not rewritten or not any(c.id in rewritten for c in row.tool_calls):
            return row
        return dataclasses.replace(row, tool_calls=tuple(rewritten.get(c.id, c) for c in row.tool_calls))

    def _steps_before(self, rows: Sequence[Message], start: int) -> int:
        """The run's assistant rows before index ``start`` of ``rows``. Counts only the rows after those counted
        last time when ``rows`` still holds, at the same index, the very row object counted last (a peer's
        history grown by appending keeps its row objects; a converted-again one has new ones): a long run's
        projection costs the same per step as a short one's."""
        end, last, count = self._counted
        if not (self.run_start < end <= start and rows[end - 1] is last):
            end, count = self.run_start, 0
        count += sum(1 for i in range(end, start) if rows[i].role is Role.ASSISTANT)
        if start > self.run_start:
            self._counted = (start, rows[start - 1], count)
        return count

    async def review_turn(
        self, step: int, verdict: TurnVerdict, answer: Approve | Reject, history: Sequence[Message]
    ) -> ReviewVerdict:
        """Settle a turn escalation with a human's answer, as the native loop settles a guardian review: the
        approval or rejection is recorded (an ``ApprovalRecord`` for ``guardian:<step>``, a human label per
        escalated condition); an approval releases each quarantined output as a labelled row that says it is
        data, not instructions; a rejection re-anchors the run on its goal (the first user input in ``history``
        unless the guardian sets one) with the reviewer's message."""
        turn, guardian = verdict.turn, self.deciders.guardian
        assert turn is not None and guardian is not None, "only a turn the guardian escalated is reviewed"
        held = not isinstance(answer, Approve)
        run_id = self.run.run_id
        records: list[LogRecord] = [
            ApprovalRecord.of(f"guardian:{step}", "guardian", answer, time.time()),
            *(
                label(name, held, turn.state or "", turn.state_hash, "human", run_id, step, reviewer=answer.reviewer)
                for name in turn.escalated
            ),
        ]
        await self._record(step, records)
        if isinstance(answer, Approve):
            raw = {r.tool_call_id: r.raw for r in self.records if isinstance(r, ToolReceipt) and r.quarantined}
            feedback = tuple(released(call_id, raw[call_id]) for call_id in verdict.quarantined)
            return ReviewVerdict(resolve(StepSignals(has_tool_calls=True)), feedback)
        self.replans += 1
        decision = resolve(StepSignals(has_tool_calls=True, review_rejected=answer.message))
        reanchor = reanchor_text(self._goal(guardian, history), guardian.criteria, answer.message)
        return ReviewVerdict(decision, (reanchor,))

    async def judge_finish(self, step: int, text: str, history: Sequence[Message]) -> FinishVerdict:
        """The stop guard on a final answer, then (when it stands) the output guardrails: the resolver's decision
        and the text that stands. ``history`` is the run's rows before the answer."""
        guard = self.deciders.stop_guard
        signal: GuardSignal | None = None
        feedback = ""
        if guard is not None:
            used, attempt = guard_budget(self.records)
            ctx = StopGuardContext(
                session_id=self.run.session_id,
                run_id=self.run.run_id,
                step=step,
                attempt=attempt,
                reply=Reply(text),
                messages=self._shown(history, Message(Role.ASSISTANT, text)),
                run_start=0,
                state={},
                continues_used=used,
                max_continues=guard.max_continues,
            )
            outcome = await ask_guard(guard, ctx)
            signal = GuardSignal(outcome.kind, outcome.message, used < guard.max_continues, guard.on_error)
            feedback = _message_text(outcome.rows)
        decision = resolve(StepSignals(guard=signal))
        if guard is not None and signal is not None:
            record = StopGuardRecord(guard_event(signal.kind, decision), guard.name, step, signal.message or None)
            await self._record(step, [record])
        if decision.action is not Action.COMPLETE:
            return FinishVerdict(decision, text, feedback)
        return await self._guard_output(step, decision, text, history)

    async def _guard_output(
        self, step: int, decision: StopDecision, text: str, history: Sequence[Message]
    ) -> FinishVerdict:
        guardrails = self.deciders.guardrails
        if guardrails is None or not guardrails.has(Hook.OUTPUT):
            return FinishVerdict(decision, text)
        run = self.run
        chain = await run_chain(
            guardrails,
            Hook.OUTPUT,
            text,
            lambda t: OutputContext(self._shown(history), step, run.session_id, run.run_id, None, t),
            step=step,
        )
        await self._record(step, chain.records)
        if chain.block is not None:
            blocked = resolve(StepSignals(output_blocked=chain.block.reason))
            return FinishVerdict(blocked, chain.block.replacement or "")
        return FinishVerdict(decision, chain.value)

    async def stopped_by_peer(self, signals: StepSignals, *, steps: int, text: str = "") -> None:
        """The peer ended the run on its own terms (its turn or usage limit, its own guardrail's tripwire):
        record the end the resolver gives ``signals`` (the stopwise reason that names it, as a stopwise run would
        end), with ``text`` as its output when the peer gave one, unless the run's end is on record already."""
        if self.run.status is RunStatus.RUNNING:
            await self.finish(resolve(signals), steps=steps, text=text)

    async def crashed(self, exc: BaseException, *, steps: int) -> None:
        """The peer's run raised: record it failed, unless its end is on record already. A guardrail that raised
        or misbehaved is caller code (``guardrail_raised``, ...); anything else the peer raised mid-run counts as
        a model failure (``model_error``, retryable), as the loop counts a model adapter that raises."""
        if self.run.status is not RunStatus.RUNNING:
            return
        if isinstance(exc, (GuardrailRaised, GuardrailError, GuardrailTimeout)):
            decision = resolve(StepSignals(caller_failed=caller_failure(exc)))
        else:
            error = ErrorDetail(ErrorCode.MODEL_ERROR, f"{type(exc).__name__}: {exc}", ErrorCategory.MODEL, True)
            decision = resolve(StepSignals(model_failed=error))
        await self.finish(decision, steps=steps)

    async def finish(self, decision: StopDecision, *, steps: int, text: str = "") -> RunRecord:
        """Write how the run ended (or that it waits for approval), once."""
        self.run = apply_decision(self.run, decision, steps=steps, text=text, output=text or None)
        await self.deciders.store.update_run(self.run)
        return self.run


S = TypeVar("S")


class ConvertedHistory(abc.ABC, Generic[S]):
    """A peer's history (its own message objects) as stopwise's rows, kept between the run's steps so that a step
    converts only what changed: ``rows`` always equals converting, from scratch, the items last given to ``update``.

    Each peer names its conversion by overriding ``extend`` (one item's rows onto the rows so far). The items
    converted before are kept (references, not copies) and must be the prefix of the new ones, each the same
    object or an equal one: the check is a pointer comparison per item when the peer hands the same objects
    step after step, a comparison by value when it rebuilds them (still cheaper than converting). The newest
    item kept is converted again on every update, because a peer may complete its newest message in place
    (pydantic-ai adds parts to its last request), unless it is the same object and its ``mark`` is unchanged
    (a reply of 500 calls is then converted once, not once per hook of each of its calls). Anything else (an
    item removed, replaced or edited before the newest) converts the whole history again."""

    def __init__(self) -> None:
        self._source: list[S] = []
        self.rows: list[Message] = []
        self.steps = 0
        """The assistant rows in ``rows``: the run's step count."""
        self._tail: tuple[int, Message | None, int] = (0, None, 0)
        """Before the newest kept item was converted: the row count, the last row and ``steps``."""
        self._mark: object = None
        """The newest kept item's ``mark`` when it was converted."""

    @abc.abstractmethod
    def extend(self, rows: list[Message], item: S) -> None:
        """Append ``item``'s rows to ``rows``; it may replace ``rows[-1]`` (a call merged into the reply before
        it), never an earlier row."""

    def mark(self, item: S) -> object:
        """What changes when ``item`` is completed in place, compared with ``==`` (its parts list and their
        count, say); None (the default): the peer may change it in any way, so the newest item is always
        converted again."""
        return None

    def update(self, items: Sequence[S]) -> None:
        """Bring ``rows`` up to ``items``."""
        kept = len(self._source) - 1  # the newest item is converted again (see the class)
        if kept < 0 or len(items) < kept or list(items[:kept]) != self._source[:kept]:
            self._source, self.rows, self.steps, self._tail = [], [], 0, (0, None, 0)
            kept = 0
        elif len(items) > kept and items[kept] is self._source[kept] and self._unchanged(items[kept]):
            kept += 1  # the newest item as it was converted: its rows stand
        else:
            count, last, steps = self._tail
            del self._source[kept:], self.rows[count:]
            if last is not None:
                self.rows[-1] = last
            self.steps = steps
        for item in items[kept:]:
            count, last = len(self.rows), (self.rows[-1] if self.rows else None)
            self._tail = (count, last, self.steps)
            self._source.append(item)
            self._mark = self.mark(item)
            self.extend(self.rows, item)
            changed = self.rows[count - 1 :] if count else self.rows
            self.steps += sum(1 for r in changed if r.role is Role.ASSISTANT)
            self.steps -= 1 if last is not None and last.role is Role.ASSISTANT else 0

    def _unchanged(self, item: S) -> bool:
        if self._mark is None:
            return False
        mark = self.mark(item)
        return mark is not None and bool(mark == self._mark)
