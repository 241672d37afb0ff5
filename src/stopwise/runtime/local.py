"""``Runner``: runs agents in this process on asyncio, against a store."""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import socket
import time
import uuid
import weakref
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal, TypeVar

from stopwise._checks import check_function, check_seconds, check_store, is_async_function
from stopwise._fork import incomplete_fork, plan_fork
from stopwise._loop import CallPlan, Leg, Settle, drive, restore_leg
from stopwise._results import read_pending, result_from_log
from stopwise._step.guardian import released
from stopwise._suspended import SuspendedStep, expiry, read_suspended
from stopwise.agent import Agent
from stopwise.approvals import (
    ApprovalDecision,
    ApprovalError,
    ApprovalRecord,
    Approve,
    Escalation,
    Modify,
    PendingApproval,
    PlannedCall,
    Reject,
    Terminate,
    args_problem,
    expired,
)
from stopwise.context import RunContext
from stopwise.errors import (
    ConfigError,
    ForkNotAllowed,
    RetryNotAllowed,
    RunLeased,
    StepConflict,
    StopwiseError,
    StoreError,
    UnreadableEntry,
)
from stopwise.events import Event, RunFinished, StepCommitted
from stopwise.goal import Goal
from stopwise.guardian.guardian import label
from stopwise.guardian.records import GuardianDecision
from stopwise.guardrails.hooks import for_sub_agent
from stopwise.messages import (
    ORIGIN,
    Message,
    Reply,
    automated_feedback,
    encode_tool_result,
    error_tool_result,
)
from stopwise.records import LogRecord, RunLog, ToolReceipt
from stopwise.result import RunResult, RunStatus
from stopwise.storable import is_storable
from stopwise.store.base import Lease, RunRecord, SessionSnapshot, Store, commit_many
from stopwise.store.memory import MemoryStore
from stopwise.tools import ToolError, ToolUnavailable

__all__ = ["ExpirySweep", "Runner", "SessionBusy", "SkippedExpiry"]

Input = str | Message | Sequence[Message]
T = TypeVar("T")


class SessionBusy(StopwiseError):
    """A new run was asked for on a session whose last run is running, interrupted or suspended."""


@dataclass(frozen=True, slots=True)
class SkippedExpiry:
    """A run ``Runner.expire_all`` found expired but left alone: another worker held or moved it (``why``)."""

    session_id: str
    run_id: str
    why: str


@dataclass(frozen=True, slots=True)
class ExpirySweep:
    """What one ``Runner.expire_all`` did: the runs it ended, and the expired ones it skipped."""

    expired: tuple[RunResult, ...] = ()
    skipped: tuple[SkippedExpiry, ...] = ()


def _check_session_args(field: str, session_id: object, state: object) -> None:
    """A session id a caller names is a non-empty string (None: a new one), and a state is a mapping."""
    if session_id is not None and (not isinstance(session_id, str) or not session_id):
        raise ConfigError(field, f"must be a non-empty string or None (a new session), got {session_id!r}")
    if state is not None and not isinstance(state, Mapping):
        raise TypeError(f"state must be a mapping of names to JSON values, got {type(state).__name__}")


def _check_now(now: object) -> None:
    """``now`` is Unix seconds (a finite number) or None (the runner's clock)."""
    if now is not None and (isinstance(now, bool) or not isinstance(now, int | float) or not math.isfinite(now)):
        raise ConfigError("now", f"must be Unix seconds (a finite number) or None, got {now!r}")


def _input_messages(input: Input) -> tuple[Message, ...]:
    if isinstance(input, str):
        if not input.strip():
            # Nothing for the model to act on (and some providers refuse an empty message).
            raise ConfigError("input", "is empty: give the model something to do")
        return (Message.user(input),)
    if isinstance(input, Message):
        return (input,)
    if not isinstance(input, Sequence):
        raise TypeError(f"input must be a str, a Message or a list of Messages, got {type(input).__name__}")
    messages: list[Message] = []
    for m in input:
        if not isinstance(m, Message):
            raise TypeError(f"input must be a str, a Message or a list of Messages; found {type(m).__name__}")
        messages.append(m)
    return tuple(messages)


class Runner:
    """Runs agents against a store (in memory when none is given).

    ``run`` starts a run on a new or existing session; ``retry`` continues a session whose last run failed,
    was cancelled, or was interrupted by a crash; ``resume`` settles a run suspended for approval;
    ``stream`` yields the typed events of a run as it goes. ``runtime_context`` is handed to every tool and
    guardrail of the run and is never persisted. ``clock`` (Unix seconds) dates approvals.

    ``on_event``, if given, is called with the agent and each event of every run leg this runner drives (``run``,
    ``retry``, ``resume`` and ``stream``), in order, as it happens: an observer (``stopwise.telemetry`` turns the
    events into OpenTelemetry spans). It should not raise: an exception it raises propagates to the caller and the
    run is recorded as cancelled, as when a stream is left early (``retry`` continues it). None (the default)
    costs nothing: the events reach the caller as they did without it.

    Leases: while this runner drives a run it holds a lease on it in the store, naming ``owner`` (by default
    host, process id and a random tag) until ``clock() + lease_seconds``. It takes the lease with the run's
    record (``run``), or claims it atomically before anything executes (``retry``, ``resume``), renews it after a
    step commits once half of it is spent, and drops it when the leg ends. Another runner's ``retry`` or ``resume``
    of that run is refused with ``RunLeased`` until the lease lapses: after a crash, the run is continued once
    ``lease_seconds`` have passed. A step longer than ``lease_seconds`` (a slow model call or tool) lets another
    worker take the run over; that worker's commit or this one's then fails with ``StepConflict``.
    """

    def __init__(
        self,
        store: Store | None = None,
        *,
        clock: Callable[[], float] = time.time,
        on_event: Callable[[Agent, Event], None] | None = None,
        lease_seconds: float = 300.0,
        owner: str | None = None,
    ) -> None:
        check_seconds("lease_seconds", lease_seconds, optional=False)
        if store is not None:
            check_store("store", store)
        if not callable(clock) or is_async_function(clock):
            raise ConfigError("clock", f"must be a plain function returning Unix seconds, got {clock!r}")
        if on_event is not None:
            check_function("on_event", on_event, "agent", "event")
            if is_async_function(on_event):
                # It is called, not awaited, in order with the events: an async one would never run.
                raise ConfigError(
                    "on_event", "must be a plain function (not async): it is called as each event happens"
                )
        if owner is not None and (not isinstance(owner, str) or not owner):
            raise ConfigError("owner", f"must be a non-empty string or None, got {owner!r}")
        self.store: Store = store if store is not None else MemoryStore()
        self.clock = clock
        self.on_event = on_event
        self.lease_seconds = float(lease_seconds)
        if owner is not None and not (isinstance(owner, str) and owner and is_storable(owner)):
            # The owner is written with every lease and compared on every renewal: a key, kept as it is.
            raise ConfigError("owner", f"must be a non-empty string without NUL or lone surrogates, got {owner!r}")
        self.owner = owner if owner is not None else f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._companion_locks: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()

    async def run(
        self,
        agent: Agent,
        input: Input,
        *,
        session_id: str | None = None,
        state: Mapping[str, Any] | None = None,
        runtime_context: Any = None,
        goal: Goal | str | None = None,
    ) -> RunResult:
        """Run ``agent`` on ``input`` until the stop decision ends (or suspends) the run.

        ``goal`` is what the run is for and, as a ``Goal``, the acceptance criteria its result must meet: the
        guardian judges this run against it (by default its own ``Guardian(goal=, criteria=)``, else the input).
        It is committed with the run's first entry, so a resume, a retry or an audit reads it from the log."""
        leg = await self._start(agent, input, session_id, state, runtime_context, goal=goal)
        leg.lease = self._lease(leg.run.run_id)
        return await self._driven(agent, leg)

    async def retry(
        self,
        agent: Agent,
        session_id: str,
        message: str | Message | None = None,
        *,
        runtime_context: Any = None,
    ) -> RunResult:
        """Continue the session's last run from its last committed step (log and state).

        After a failure or a cancellation the budget starts afresh; after a crash (the run still reads
        ``running``) the run resumes where its log ends, with the budget it had. ``message``, if given, is
        appended as new input. Raises ``RetryNotAllowed`` when the last run completed, is suspended, or there
        is none; ``RunLeased`` (who holds it, until when) while another worker's lease on the run is live, and
        ``StepConflict`` when another worker continued it since it was read. Either way nothing ran.
        """
        leg = await self._retry(agent, session_id, message, runtime_context, claim=True)
        return await self._driven(agent, leg)

    async def fork(
        self,
        agent: Agent,
        session_id: str,
        at_step: int,
        *,
        new_session_id: str | None = None,
        state: Mapping[str, Any] | None = None,
        message: str | Message | None = None,
        runtime_context: Any = None,
    ) -> RunResult:
        """Continue the session's last run from its committed step ``at_step``, in a new session; the source
        session is not touched (the log is append-only). A rewind is a fork at an earlier step.

        The new session (``new_session_id``, else a fresh id) starts with a copy of the source's log up to that
        step's commit and a note recording the fork (``stopwise.records.ForkRecord``); the forked run has a run
        id of its own and continues as a run restored after a crash: its steps, usage, phase and decision
        records (the stop guard's continues among them) are the log's at that step, so what the dropped steps
        used is refunded. The log keeps no state per step: the fork starts from ``state``, else the source
        session's current state. ``message``, if given, is appended as new input. The forked run holds this
        runner's lease from its first write.

        The copy, the note and the forked run's record are written in one transaction (``commit_many``): a fork cut
        short (the process killed, the store failing) leaves no new session at all, never part of one; the
        model's first call comes after it committed. On a ``Store`` of your own without ``commit_many`` they are
        written entry by entry, the note last, and a copy cut short is refused by ``retry()`` as incomplete.

        Raises ``RetryNotAllowed`` as ``retry()`` does for a session with no run of this agent, and
        ``ForkNotAllowed`` for a step that is not committed or that suspended for approval, or a
        ``new_session_id`` that exists. Either way nothing was written.
        """
        _check_session_args("new_session_id", new_session_id, state)
        snapshot, last = await self._last_run(agent, session_id)
        new_session_id = _session_key(new_session_id, "new_session_id") if new_session_id else uuid.uuid4().hex
        planned = plan_fork(snapshot, last, at_step, new_session_id, uuid.uuid4().hex)
        if await self.store.load_session(new_session_id) is not None:
            raise ForkNotAllowed(f"session {new_session_id!r} exists: a fork writes a new session")
        fork_state = dict(snapshot.state if state is None else state)
        lease = self._lease(planned.run.run_id)
        # One transaction: the new session is written whole or not at all. (A store of the caller's own without
        # ``commit_many`` writes entry by entry, the note last: a copy cut short there reads as incomplete.)
        try:
            await commit_many(self.store, planned.entries, fork_state, planned.run, lease)
        except StepConflict as e:
            # Another writer created the session between the check above and this write: the same refusal.
            if await self.store.load_session(new_session_id) is not None:
                raise ForkNotAllowed(f"session {new_session_id!r} exists: a fork writes a new session") from e
            raise
        forked = await self.store.load_session(new_session_id)
        assert forked is not None and forked.last_run is not None
        new_input = _input_messages(message) if message is not None else ()
        leg = restore_leg(agent, self.store, self, forked, forked.last_run, fresh_budget=False, new_input=new_input)
        leg.lease = lease
        return await self._driven(agent, self._leg(leg, runtime_context))

    async def resume(
        self,
        agent: Agent,
        session_id: str,
        decisions: Mapping[str, ApprovalDecision] | None = None,
        *,
        results: Mapping[str, Any] | None = None,
        runtime_context: Any = None,
    ) -> RunResult:
        """Settle a suspended run's pending tool calls and continue it.

        ``decisions`` maps every pending call id to ``Approve()``, ``Reject(message)``, ``Modify(args)`` or
        ``Terminate(reason)``; ``results`` maps a pending client-side tool call (``@tool(client=True)``) to the
        result the caller got by running it (a ``ToolError`` instance for a failure), or such a call takes a
        ``Reject`` or ``Terminate``. Raises ``ApprovalError`` for an unknown or missing call, a decision whose
        ``args_hash`` no longer matches, an ``Approve`` or ``Modify`` past the call's ``approval_ttl`` (``Reject``
        and ``Terminate`` are still accepted then), a result for a call that is not a client tool's, or
        a run that is not suspended. Any ``Runner`` on the same store can resume a run, whichever process
        suspended it. The run is claimed atomically before any call runs: of two resumes at once, one goes on and
        the other raises ``RunLeased`` (or ``StepConflict`` when the first already moved the run on).
        """
        for given, what in ((decisions, "decisions"), (results, "results")):
            if given is not None and not isinstance(given, Mapping):
                raise ApprovalError(
                    f"{what} must be a mapping of call id to its {what[:-1]}, got {type(given).__name__}"
                )
        leg = await self._resume(agent, session_id, decisions or {}, runtime_context, results or {}, claim=True)
        return await self._driven(agent, leg)

    async def expire(self, session_id: str, *, now: float | None = None) -> RunResult:
        """End the session's suspended run because approvals of its pending calls expired unanswered.

        A run is expired once any pending call is past its ``expires_at`` (``approval_ttl``) at ``now`` (Unix
        seconds; the runner's clock when not given): its batch can no longer run as the model asked. Every call
        still without a result gets one the model can read ("Not run: its approval expired ..."), each pending call
        an ``ApprovalRecord`` with decision ``expired``, and the run fails with reason and code
        ``approval_expired`` (retryable: ``retry()`` lets the model ask again). Then the session takes new runs. No
        agent is needed: nothing runs. Raises ``ApprovalError`` when the last run is not suspended or none of its
        approvals has expired, and, like ``resume``, ``RunLeased`` or ``StepConflict`` when another worker holds
        the run or moved it on; nothing was written then.
        """
        _check_now(now)
        now = self.clock() if now is None else now
        snapshot = await self.store.load_session(_session_key(session_id))
        last = None if snapshot is None else snapshot.last_run
        if snapshot is None or last is None or last.status is not RunStatus.SUSPENDED:
            what = "has no run" if last is None else f"run {last.run_id} is {last.status.value}"
            raise ApprovalError(f"session {session_id!r}: {what}, not suspended; there is nothing to expire")
        return await self._expire(snapshot, last, now)

    async def expire_all(self, *, now: float | None = None) -> ExpirySweep:
        """``expire`` every suspended run of the store whose approvals expired at ``now``: a sweep for a cron job.

        A run another worker holds (a resume in flight) or moved on since the sweep read it, or whose session's log
        this version cannot read (``UnreadableEntry``, ``UnreadableSuspension`` among them), is skipped, with why;
        the sweep goes on. Runs whose approvals have not expired (or never do) are left as they are."""
        _check_now(now)
        now = self.clock() if now is None else now
        ended: list[RunResult] = []
        skipped: list[SkippedExpiry] = []
        for run in await self.store.suspended_runs():
            try:
                if not expired(read_pending(run), now):
                    continue
                snapshot = await self.store.load_session(run.session_id)
                last = None if snapshot is None else snapshot.last_run
                if snapshot is None or last is None or last.run_id != run.run_id:
                    continue  # the session moved on since the runs were listed
                ended.append(await self._expire(snapshot, last, now))
            except (RunLeased, StepConflict, ApprovalError, UnreadableEntry) as exc:
                skipped.append(SkippedExpiry(run.session_id, run.run_id, str(exc)))
        return ExpirySweep(tuple(ended), tuple(skipped))

    async def _expire(self, snapshot: SessionSnapshot, last: RunRecord, now: float) -> RunResult:
        pending = list(read_pending(last))
        gone = expired(pending, now)
        if not gone:
            dates = sorted(p.expires_at for p in pending if p.expires_at is not None)
            when = f"the first expires at {dates[0]:.0f}" if dates else "none of them expires"
            raise ApprovalError(
                f"session {last.session_id!r}: no approval of run {last.run_id} has expired at {now:.0f} ({when})"
            )
        entry, run = expiry(read_suspended(snapshot, last), last, pending, now, snapshot.next_seq)
        # Claimed like a resume: of an expiry and a resume at once, one settles the step and the other is refused.
        lease = self._lease(last.run_id)
        await self.store.claim(last, snapshot.next_seq - 1, lease, self.clock())
        try:
            await self.store.commit(entry, snapshot.state, run)
        finally:
            await self.store.release(lease)
        after = await self.store.load_session(last.session_id)
        assert after is not None
        return result_from_log(None, after, run)

    async def stream(
        self,
        agent: Agent,
        input: Input,
        *,
        session_id: str | None = None,
        state: Mapping[str, Any] | None = None,
        runtime_context: Any = None,
        goal: Goal | str | None = None,
    ) -> AsyncIterator[Event]:
        """Yield the run's typed events as they happen; the last is ``RunFinished`` with the result.

        A model that can stream (``StreamingModel``) sends its text as ``TextDelta`` events before each
        ``ModelReplied`` (middleware wraps ``generate`` only, so an agent with middleware sends none). Leaving
        the iteration early cancels the run (recorded as cancelled; ``retry`` continues it).
        """
        leg = await self._start(agent, input, session_id, state, runtime_context, goal=goal)
        leg.stream_text = True
        leg.lease = self._lease(leg.run.run_id)
        events = self._observed(agent, self._leased(leg))
        try:
            async for event in events:
                yield event
        finally:
            await events.aclose()

    def run_sync(
        self,
        agent: Agent,
        input: Input,
        *,
        session_id: str | None = None,
        state: Mapping[str, Any] | None = None,
        runtime_context: Any = None,
        goal: Goal | str | None = None,
    ) -> RunResult:
        """``run`` for scripts: starts an event loop. Use ``await run(...)`` inside async code."""
        return _sync(
            lambda: self.run(
                agent, input, session_id=session_id, state=state, runtime_context=runtime_context, goal=goal
            ),
            "run_sync() was called inside a running event loop; use 'await runner.run(...)'",
        )

    def retry_sync(
        self,
        agent: Agent,
        session_id: str,
        message: str | Message | None = None,
        *,
        runtime_context: Any = None,
    ) -> RunResult:
        """``retry`` for scripts: starts an event loop. Use ``await retry(...)`` inside async code."""
        return _sync(
            lambda: self.retry(agent, session_id, message, runtime_context=runtime_context),
            "retry_sync() was called inside a running event loop; use 'await runner.retry(...)'",
        )

    def resume_sync(
        self,
        agent: Agent,
        session_id: str,
        decisions: Mapping[str, ApprovalDecision] | None = None,
        *,
        results: Mapping[str, Any] | None = None,
        runtime_context: Any = None,
    ) -> RunResult:
        """``resume`` for scripts: starts an event loop. Use ``await resume(...)`` inside async code."""
        return _sync(
            lambda: self.resume(agent, session_id, decisions, results=results, runtime_context=runtime_context),
            "resume_sync() was called inside a running event loop; use 'await runner.resume(...)'",
        )

    def expire_sync(self, session_id: str, *, now: float | None = None) -> RunResult:
        """``expire`` for scripts: starts an event loop. Use ``await expire(...)`` inside async code."""
        return _sync(
            lambda: self.expire(session_id, now=now),
            "expire_sync() was called inside a running event loop; use 'await runner.expire(...)'",
        )

    def expire_all_sync(self, *, now: float | None = None) -> ExpirySweep:
        """``expire_all`` for scripts: starts an event loop. Use ``await expire_all(...)`` inside async code."""
        return _sync(
            lambda: self.expire_all(now=now),
            "expire_all_sync() was called inside a running event loop; use 'await runner.expire_all(...)'",
        )

    def _lease(self, run_id: str) -> Lease:
        return Lease(run_id, self.owner, self.clock() + self.lease_seconds)

    async def _claim(self, leg: Leg, last: RunRecord, snapshot: SessionSnapshot) -> None:
        """Claim ``last`` for this runner as of ``snapshot`` (the log the leg was restored from): the leg holds the
        lease. Raises ``RunLeased`` or ``StepConflict`` before anything ran."""
        lease = self._lease(last.run_id)
        await self.store.claim(last, snapshot.next_seq - 1, lease, self.clock())
        leg.lease = lease

    async def _leased(self, leg: Leg) -> AsyncGenerator[Event, None]:
        """``drive(leg)``, renewing the leg's lease as events pass and dropping it when the leg ends."""
        lease = leg.lease
        assert lease is not None, "a runner's leg holds a lease"
        events = drive(leg)
        released = False
        try:
            async for event in events:
                if isinstance(event, StepCommitted):  # the clock is read once a step, not once an event
                    now = self.clock()
                    if now >= lease.expires_at - self.lease_seconds / 2:  # half of it spent: renew it
                        lease = await self._renewed(lease, now)
                if isinstance(event, RunFinished):
                    # Before the caller sees the result: once a run is over, another worker may continue it.
                    await self.store.release(lease)
                    released = True
                yield event
        finally:
            await events.aclose()
            if not released:
                # The leg is ending early (an error, a cancellation): a store failure here must not hide why. A
                # lease that could not be dropped lapses after lease_seconds.
                with contextlib.suppress(StoreError):
                    await self.store.release(lease)

    def drive_leased(self, leg: Leg) -> AsyncGenerator[Event, None]:
        """``stopwise._loop.drive(leg)`` for a leg from ``open_leg`` whose ``leg.lease`` (this runner's ``owner``)
        the caller took: written with a new run's start, or claimed in the store. As for this runner's own legs,
        the lease is renewed after a step commits once half of it is spent, and dropped when the leg ends."""
        return self._leased(leg)

    async def _renewed(self, lease: Lease, now: float) -> Lease:
        """The lease, renewed in the store as of ``now``."""
        renewed = Lease(lease.run_id, lease.owner, now + self.lease_seconds)
        # A lost lease (another worker took the run over after it lapsed) is not raised here: ending this leg
        # would write over that worker's run record. Its next commit conflicts instead.
        await self.store.renew(renewed)
        return renewed

    async def _driven(self, agent: Agent, leg: Leg) -> RunResult:
        """The leg driven to its end under its lease, its events shown to ``on_event``; without an observer the
        loop does not make the events that only report progress (nobody would read them)."""
        leg.progress_events = self.on_event is not None
        return await _finish(self._observed(agent, self._leased(leg)))

    def _observed(self, agent: Agent, events: AsyncGenerator[Event, None]) -> AsyncGenerator[Event, None]:
        """``events``, each shown to ``on_event`` first; ``events`` itself when there is no observer."""
        on_event = self.on_event
        if on_event is None:
            return events

        async def observed() -> AsyncGenerator[Event, None]:
            try:
                async for event in events:
                    on_event(agent, event)
                    yield event
            finally:
                await events.aclose()

        return observed()

    async def close(self) -> None:
        """Close the runner's store (the one it was given, or the ``MemoryStore`` it made)."""
        await self.store.close()

    async def __aenter__(self) -> Runner:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def __enter__(self) -> Runner:
        """``with Runner(store) as runner:`` for scripts that use the ``*_sync`` methods; closes the store."""
        return self

    def __exit__(self, *exc: object) -> None:
        _sync(self.close, "'with Runner(...)' inside a running event loop; use 'async with Runner(...)'")

    async def run_child(
        self,
        agent: Agent,
        input: str,
        ctx: RunContext,
        *,
        inherit_guardrails: bool = True,
        companion: str | None = None,
    ) -> Any:
        """Run a sub-agent for a tool call of a parent run (see ``Agent.as_tool``).

        The child session is keyed on the parent's session and call, so when the parent's step is re-run
        after a crash, a child that already finished is not run again and an interrupted one is resumed. The
        child's loop has the parent's ``runtime_context``, the sub-agent path ``ctx.agent_path + (agent.name,)``
        and, with ``inherit_guardrails``, its guardrails under the parent loop's.

        With ``companion`` (a name: ``as_tool(persistent=True)`` passes the tool's) the child is a persistent
        companion: each call is a new run in the companion's one session, so it remembers earlier rounds, and the
        call's run is keyed on the parent's call (``ctx.idempotency_key``), so a re-run parent step finds it. A
        companion whose last run did not complete (a cut-off fails it) is not continued: the next call re-spawns
        it in a fresh session, without its memory (seed 002).
        """
        if companion is not None:
            # Calls of one batch to one companion take turns: each is a run of the companion's one session.
            lock = self._companion_locks.setdefault(f"{ctx.session_id}/{companion}", asyncio.Lock())
            async with lock:
                session_id, run_id, last = await self._companion(companion, ctx)
                return await self._child(agent, input, ctx, inherit_guardrails, session_id, run_id, last)
        session_id = f"{ctx.session_id}/{ctx.tool_call_id}"
        snapshot = await self.store.load_session(session_id)
        last = None if snapshot is None else snapshot.last_run
        return await self._child(agent, input, ctx, inherit_guardrails, session_id, None, last)

    async def _child(
        self,
        agent: Agent,
        input: str,
        ctx: RunContext,
        inherit_guardrails: bool,
        session_id: str,
        run_id: str | None,
        last: RunRecord | None,
    ) -> Any:
        """The sub-agent's call in ``session_id``: a new run (``last`` None), its crashed run continued, or the
        finished run's output."""
        if last is None or last.status is RunStatus.RUNNING:
            if last is None:
                leg = await self._start(agent, input, session_id, None, ctx.runtime_context, run_id)
                leg.lease = self._lease(leg.run.run_id)
            else:
                try:
                    leg = await self._retry(agent, session_id, None, ctx.runtime_context, claim=True)
                except (RunLeased, StepConflict) as exc:
                    # Another worker drives the child run, or its crashed worker's lease has not lapsed yet. Not a
                    # failure of the call (the model would ask again under a new call id, and a new child run would
                    # repeat this one's effects) but the parent run's: it fails retryably, the call still open.
                    raise ToolUnavailable(
                        f"sub-agent {agent.name!r} cannot continue its run in session {session_id!r} now: {exc}"
                    ) from exc
            leg.agent_path = (*ctx.agent_path, agent.name)
            leg.guardrails = for_sub_agent(agent.guardrails, ctx.guardrails if inherit_guardrails else None)
            result = await self._driven(agent, leg)
        else:
            snapshot = await self.store.load_session(session_id)
            assert snapshot is not None
            result = result_from_log(agent, snapshot, last)
        status, output, error, usage = result.status, result.output, result.error, result.total_usage
        # The parent's step records this, so its budgets and its report count the child's model calls.
        ctx.sub_usage = ctx.sub_usage + usage
        if status is RunStatus.COMPLETED:
            return output
        raise ToolError(error.message if error is not None else f"sub-agent {agent.name!r} ended {status}")

    async def _companion(self, name: str, ctx: RunContext) -> tuple[str, str, RunRecord | None]:
        """Where a persistent companion's call runs: its session, its run id, and its run when the parent's step
        is re-run (None: start it). The companion's session is ``"{parent_session}/companion:{name}"``; once its
        last run did not complete, the call goes to the next generation's (``...#2``, ``#3``): a fresh one."""
        run_id = uuid.uuid5(uuid.NAMESPACE_URL, f"stopwise-companion:{ctx.idempotency_key}").hex
        own = await self.store.get_run(run_id)
        if own is not None:
            return own.session_id, run_id, own
        base = f"{ctx.session_id}/companion:{name}"
        generation = 1
        while True:
            session_id = base if generation == 1 else f"{base}#{generation}"
            snapshot = await self.store.load_session(session_id)
            last = None if snapshot is None else snapshot.last_run
            if last is None or last.status is RunStatus.COMPLETED:
                return session_id, run_id, None
            generation += 1

    async def open_leg(
        self,
        agent: Agent,
        mode: Literal["run", "retry", "resume"],
        *,
        session_id: str | None = None,
        input: Input | None = None,
        state: Mapping[str, Any] | None = None,
        message: str | Message | None = None,
        decisions: Mapping[str, ApprovalDecision] | None = None,
        runtime_context: Any = None,
        run_id: str | None = None,
        results: Mapping[str, Any] | None = None,
        goal: Goal | str | None = None,
    ) -> Leg:
        """Open a run leg without driving it, for a runtime that drives ``stopwise._loop.drive(leg)`` itself
        (the DBOS runtime does, one durable step per stopwise step).

        ``mode`` is what ``run``, ``retry`` or ``resume`` would do, with the same checks and errors; nothing is
        written until the leg is driven. ``run_id`` names a new run (``mode="run"``), e.g. after a workflow id.
        """
        if mode == "run":
            if input is None:
                raise TypeError("open_leg(mode='run') needs input")
            return await self._start(agent, input, session_id, state, runtime_context, run_id, goal)
        if session_id is None:
            raise TypeError(f"open_leg(mode={mode!r}) needs a session_id")
        if mode == "retry":
            return await self._retry(agent, session_id, message, runtime_context)
        if mode == "resume":
            return await self._resume(agent, session_id, decisions or {}, runtime_context, results or {})
        raise ValueError(f"mode must be 'run', 'retry' or 'resume', got {mode!r}")

    def _leg(self, leg: Leg, runtime_context: Any) -> Leg:
        leg.runtime_context = runtime_context
        leg.clock = self.clock
        return leg

    async def _start(
        self,
        agent: Agent,
        input: Input,
        session_id: str | None,
        state: Mapping[str, Any] | None,
        runtime_context: Any,
        run_id: str | None = None,
        goal: Goal | str | None = None,
    ) -> Leg:
        if not isinstance(agent, Agent):
            raise TypeError(f"agent must be an Agent, got {type(agent).__name__}")
        rows = _input_messages(input)
        _check_session_args("session_id", session_id, state)
        stated = Goal.of(goal)
        if stated is None and agent.guardian is not None:
            # Logged even when it says only "the input is the goal", so no later configuration can change it.
            stated = agent.guardian.default_goal or Goal()
        session_id = _session_key(session_id) if session_id else uuid.uuid4().hex
        snapshot = await self.store.load_session(session_id)
        if snapshot is not None and snapshot.last_run is not None:
            last = snapshot.last_run
            if last.status in (RunStatus.RUNNING, RunStatus.SUSPENDED):
                action = "resume()" if last.status is RunStatus.SUSPENDED else "retry()"
                raise SessionBusy(
                    f"session {session_id!r}: run {last.run_id} is {last.status.value}; "
                    f"call {action} to continue it before starting a new run"
                )
        messages = snapshot.messages() if snapshot is not None else []
        if not rows and not messages:
            # ``[]`` adds nothing: it may continue a session's log, but on a new session the model would get no
            # message at all (as for "", which _input_messages refuses).
            raise ConfigError("input", "is empty and the session has no messages: give the model something to do")
        session_state = dict(snapshot.state) if snapshot is not None else {}
        if state is not None:
            session_state.update(state)
        next_seq = snapshot.next_seq if snapshot is not None else 1
        run = RunRecord(run_id or uuid.uuid4().hex, session_id, agent.name)
        leg = Leg(
            agent,
            self.store,
            self,
            run,
            messages,
            session_state,
            next_seq,
            run_start=len(messages),
            new_input=rows,
            goal=stated,
            log_goal=stated is not None,
        )
        return self._leg(leg, runtime_context)

    async def _last_run(self, agent: Agent, session_id: str) -> tuple[SessionSnapshot, RunRecord]:
        snapshot = await self.store.load_session(_session_key(session_id))
        last = None if snapshot is None else snapshot.last_run
        if snapshot is None or last is None:
            raise RetryNotAllowed(f"session {session_id!r} has no run to continue")
        if last.agent != agent.name:
            raise RetryNotAllowed(
                f"session {session_id!r}: run {last.run_id} belongs to agent {last.agent!r}, not {agent.name!r}"
            )
        return snapshot, last

    async def _retry(
        self, agent: Agent, session_id: str, message: str | Message | None, runtime_context: Any, claim: bool = False
    ) -> Leg:
        snapshot, last = await self._last_run(agent, session_id)
        if last.status is RunStatus.COMPLETED:
            raise RetryNotAllowed(
                f"session {session_id!r}: run {last.run_id} completed ({last.completion_reason}); "
                "there is nothing to retry; start a new run with run()"
            )
        if last.status is RunStatus.SUSPENDED:
            raise RetryNotAllowed(
                f"session {session_id!r}: run {last.run_id} is suspended for approval; call resume() instead"
            )
        fork = incomplete_fork(snapshot, last)
        if fork is not None:
            raise ForkNotAllowed(
                f"session {session_id!r}: the fork of session {fork.source_session_id!r} at step {fork.at_step} "
                "was not completely written; fork again into a new session"
            )
        new_input = _input_messages(message) if message is not None else ()
        # A crash (the record still reads running) resumes with the budget it had; a failure or a cancellation
        # gets a fresh one.
        leg = restore_leg(
            agent,
            self.store,
            self,
            snapshot,
            last,
            fresh_budget=last.status is not RunStatus.RUNNING,
            new_input=new_input,
        )
        if claim:
            await self._claim(leg, last, snapshot)
        return self._leg(leg, runtime_context)

    async def _resume(
        self,
        agent: Agent,
        session_id: str,
        decisions: Mapping[str, ApprovalDecision],
        runtime_context: Any,
        results: Mapping[str, Any] | None = None,
        claim: bool = False,
    ) -> Leg:
        try:
            snapshot, last = await self._last_run(agent, session_id)
        except RetryNotAllowed as exc:
            raise ApprovalError(str(exc)) from None
        if last.status is not RunStatus.SUSPENDED:
            raise ApprovalError(f"session {session_id!r}: run {last.run_id} is {last.status.value}, not suspended")
        pending = {p.call_id: p for p in read_pending(last)}
        run_log = RunLog.of(e for e in snapshot.entries if e.run_id == last.run_id)
        suspended = read_suspended(snapshot, last, run_log)
        results = dict(results or {})
        decisions = _with_results(pending, decisions, results)
        _check_decisions(pending, decisions, self.clock(), suspended.decided, suspended.begun)
        step, reply, records, request = suspended.step, suspended.reply, suspended.records, suspended.request
        terminate = next((d for d in decisions.values() if isinstance(d, Terminate)), None)
        leg = restore_leg(agent, self.store, self, snapshot, last, fresh_budget=False, run_log=run_log)
        leg.write_start = False  # the run stays suspended until its step is settled
        if request.escalation is not None:
            leg.settle = _settle_review(step, reply, records, request.escalation, decisions, last.run_id, self.clock())
        else:
            # Calls left undecided wait on (unless a Terminate ends the run): the step suspends again on them.
            left = {} if terminate is not None else {k: p for k, p in pending.items() if k not in decisions}
            hold = bool(left) and not agent.run_unapproved_siblings
            plans, made = _settle_plans(agent, reply, request.calls, decisions, results, self.clock(), suspended, hold)
            ended = terminate.reason if terminate else None
            # The decisions of the calls this resume runs are written ahead of them (the loop commits them before
            # any call runs), so a resume that dies mid-call leaves them on record: see ``SuspendedStep.begun``.
            runs = {p.call.id for p in plans if p.row is None and not p.needs_approval}
            runs -= set(suspended.settled)
            ahead = tuple(
                r
                for r in made
                if isinstance(r, ApprovalRecord) and r.call_id in runs and r.call_id not in suspended.begun
            )
            leg.settle = Settle(step, reply, plans, made, ended, settled=suspended.settled, pending=left, ahead=ahead)
        if claim:
            await self._claim(leg, last, snapshot)
        return self._leg(leg, runtime_context)


def _session_key(session_id: object, name: str = "session_id") -> str:
    """``session_id`` as the key of a session, or ``ConfigError`` naming ``name``. A key must be a string every
    store keeps as it is: the storable-text rule would turn a NUL or a lone surrogate into U+FFFD on disk (and the
    database stores cannot look such a key up), so the session would be written under another key than the one
    its caller loads, and would share it with a session named with the U+FFFD."""
    if not isinstance(session_id, str):
        raise ConfigError(name, f"must be a string, got {type(session_id).__name__}")
    if not is_storable(session_id):
        raise ConfigError(name, f"{session_id!r} holds a NUL or a lone surrogate, which no store keeps as it is")
    return session_id


def _with_results(
    pending: Mapping[str, PendingApproval], decisions: Mapping[str, ApprovalDecision], results: Mapping[str, Any]
) -> dict[str, ApprovalDecision]:
    """The decisions with each client tool's result standing for an approval of its call. A client call needs a
    result, a ``Reject`` or a ``Terminate``; a result for any other call is an ``ApprovalError``."""
    for call_id in results:
        p = pending.get(call_id)
        if p is None or p.source != "client":
            raise ApprovalError(f"call {call_id} is not a pending client tool call: results are for those only")
        if call_id in decisions:
            raise ApprovalError(f"call {call_id} has both a result and a decision: give one")
    for call_id, p in pending.items():
        decision = decisions.get(call_id)
        if p.source == "client" and call_id not in results and not isinstance(decision, Reject | Terminate | None):
            raise ApprovalError(f"client tool call {call_id} ({p.tool}) needs its result: resume(..., results=...)")
    return {**decisions, **{call_id: Approve() for call_id in results}}


def _client_row(value: Any, call_id: str) -> Message:
    """A client tool's result as its tool row: a ``ToolError`` is a failed call the model reads."""
    if isinstance(value, ToolError):
        return error_tool_result(str(value), tool_call_id=call_id, origin="client")
    try:
        row = encode_tool_result(value, tool_call_id=call_id)
    except Exception as exc:
        raise ApprovalError(f"the result for call {call_id} cannot be serialised to JSON: {exc}") from exc
    return replace(row, metadata={**row.metadata, ORIGIN: "client"})


def _check_decisions(
    pending: Mapping[str, PendingApproval],
    decisions: Mapping[str, ApprovalDecision],
    now: float,
    decided: Mapping[str, ApprovalRecord],
    begun: Mapping[str, ApprovalRecord],
) -> None:
    """Decisions for some or all of the pending calls; ``ApprovalError`` names what is wrong with them. A call an
    interrupted resume began (``begun``: it may have run) takes only the decision it began with, and no
    ``Terminate`` is taken while one waits for its result: either would record as not run a call that may have."""
    again = sorted(set(decisions) & set(decided))
    if again:
        earlier = decided[again[0]]
        by = f" by {earlier.reviewer}" if earlier.reviewer else ""
        raise ApprovalError(
            f"call {again[0]} was already decided ({earlier.decision}{by}) by an earlier resume; "
            f"pending: {', '.join(pending) or 'none'}"
        )
    unknown = sorted(set(decisions) - set(pending))
    if unknown:
        raise ApprovalError(f"no pending call with id {', '.join(unknown)}; pending: {', '.join(pending) or 'none'}")
    if not decisions:
        raise ApprovalError(f"no decision given; pending: {', '.join(pending) or 'none'}")
    for call_id, decision in decisions.items():
        p = pending[call_id]
        if not isinstance(decision, (Approve, Reject, Modify, Terminate)):
            raise ApprovalError(
                f"decision for {call_id} must be Approve, Reject, Modify or Terminate, got {type(decision).__name__}"
            )
        if decision.args_hash is not None and decision.args_hash != p.args_hash:
            raise ApprovalError(
                f"call {call_id} ({p.tool}): the arguments changed since they were reviewed "
                f"(args_hash {decision.args_hash} != {p.args_hash})"
            )
        # Past its expiry a call may no longer run, but it can still be turned down, so the session never strands.
        # A call an interrupted resume began was approved in time (its approval is on record): it may be carried out.
        late = p.expires_at is not None and now > p.expires_at and call_id not in begun
        if late and isinstance(decision, Approve | Modify):
            raise ApprovalError(
                f"call {call_id} ({p.tool}): the approval expired at {p.expires_at:.0f} (now {now:.0f}); "
                "it can still be rejected or terminated"
            )
        if isinstance(decision, Modify):
            if not isinstance(decision.args, Mapping):
                raise ApprovalError(f"Modify for {call_id} needs a mapping of arguments")
            # Checked here, not at the commit: arguments the log cannot keep would fail the resume halfway.
            problem = args_problem(decision.args)
            if problem is not None:
                raise ApprovalError(
                    f"Modify for {call_id} ({p.tool}): the arguments cannot be logged as JSON: {problem}"
                )
    terminates = any(isinstance(d, Terminate) for d in decisions.values())
    for call_id, earlier in sorted(begun.items()):
        given = decisions.get(call_id)
        if given is None and not terminates:
            continue  # it waits on, as any call left undecided
        made = None if given is None else ApprovalRecord.of(call_id, earlier.tool, given)
        if made is None or (made.decision, made.args) != (earlier.decision, earlier.args):
            how = f" with arguments {dict(earlier.args)!r}" if earlier.args is not None else ""
            raise ApprovalError(
                f"call {call_id} ({earlier.tool}) was decided {earlier.decision}{how} by a resume that stopped while "
                "it ran, before its result was recorded: it may have run, so it takes only that decision again "
                "(which carries it out once more with the same idempotency key)"
            )


def _settle_review(
    step: int,
    reply: Reply,
    records: Sequence[LogRecord],
    escalation: Escalation,
    decisions: Mapping[str, ApprovalDecision],
    run_id: str,
    now: float,
) -> Settle:
    """A guardian escalation's review: released outputs, the reviewer's word, and labelled examples."""
    (decision,) = decisions.values()
    if isinstance(decision, Modify):
        raise ApprovalError("a guardian escalation takes Approve, Reject or Terminate, not Modify")
    turn = next(r for r in records if isinstance(r, GuardianDecision) and r.kind == "turn")
    held = not isinstance(decision, Approve)
    made: list[LogRecord] = [
        ApprovalRecord.of(f"guardian:{step}", "guardian", decision, now),
        *(
            label(name, held, turn.state or "", turn.state_hash, "human", run_id, step, reviewer=decision.reviewer)
            for name in escalation.conditions
        ),
    ]
    rows: list[Message] = []
    if isinstance(decision, Approve):
        receipts = {r.tool_call_id: r for r in records if isinstance(r, ToolReceipt) and r.quarantined}
        for call_id in escalation.quarantined:
            raw = receipts[call_id].raw
            rows.append(automated_feedback(released(call_id, raw), source="guardian_release"))
    rejected = decision.message if isinstance(decision, Reject) else None
    terminated = decision.reason if isinstance(decision, Terminate) else None
    return Settle(step, reply, [], made, terminated, escalation=True, rows=tuple(rows), rejected=rejected)


def _settle_plans(
    agent: Agent,
    reply: Reply,
    calls: Sequence[PlannedCall],
    decisions: Mapping[str, ApprovalDecision],
    results: Mapping[str, Any],
    now: float,
    suspended: SuspendedStep,
    hold: bool,
) -> tuple[list[CallPlan], list[LogRecord]]:
    """The suspended step's calls with the reviewer's decisions and the client tools' results applied, and the
    decisions as records (a client tool's result is its tool row). A call settled before (it needed no approval,
    or an earlier resume decided it) keeps its committed row; a pending call with no decision here waits on, and
    so, with ``hold`` (calls are left undecided and the agent does not run unapproved siblings), does a call that
    needed no approval."""
    by_id = {c.call_id: c for c in calls}
    terminate = next((d for d in decisions.values() if isinstance(d, Terminate)), None)
    plans: list[CallPlan] = []
    made: list[LogRecord] = []
    for call in reply.tool_calls:
        planned = by_id[call.id]
        args = planned.args
        decision = decisions.get(call.id)
        tool = agent.tool_map.get(call.name)
        row = planned.answer  # answered when planned (unknown tool, bad arguments, a block): nothing can run
        if call.id in suspended.settled:
            plans.append(CallPlan(call, tool, args))  # its row is in the log; the loop does not run it again
            continue
        if row is None and decision is None and terminate is None and (planned.needs_approval or hold):
            plans.append(CallPlan(call, tool, args, needs_approval=True))
            continue
        if row is None and terminate is not None:
            message = f"Terminated by the reviewer: {terminate.reason}"
            row = error_tool_result(message, tool_call_id=call.id, origin="stopwise", denied=True)
        elif row is None and isinstance(decision, Reject):
            message = f"Rejected by the reviewer: {decision.message}"
            row = error_tool_result(message, tool_call_id=call.id, origin="stopwise", denied=True)
        elif row is None and isinstance(decision, Modify):
            args = dict(decision.args)
        elif row is None and call.id in results:
            row = _client_row(results[call.id], call.id)
        if decision is not None and call.id not in results:
            made.append(ApprovalRecord.of(call.id, call.name, decision, now))
        plans.append(CallPlan(call, tool, args, row))
    return plans, made


def _sync(call: Callable[[], Coroutine[Any, Any, T]], misuse: str) -> T:
    """Run ``call()`` on a new event loop. Inside a running loop it raises ``RuntimeError(misuse)`` without
    creating the coroutine (blocking that loop to wait for it would deadlock)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(call())
    raise RuntimeError(misuse)


async def _finish(events: AsyncIterator[Event]) -> RunResult:
    async for event in events:
        if isinstance(event, RunFinished):
            return event.result
    raise RuntimeError("the run ended without a result")  # pragma: no cover - drive always finishes
