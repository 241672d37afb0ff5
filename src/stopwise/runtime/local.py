"""``Runner``: runs agents in this process on asyncio, against a store."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

from stopwise.agent import Agent
from stopwise.context import RunContext
from stopwise.errors import RetryNotAllowed, StopwiseError
from stopwise.events import Event, RunFinished
from stopwise.loop import Leg, drive, restore_leg
from stopwise.messages import Message
from stopwise.result import RunResult, RunStatus
from stopwise.store.base import EntryKind, LogEntry, RunRecord, Store
from stopwise.store.memory import MemoryStore
from stopwise.tools import ToolError

__all__ = ["Runner", "SessionBusy"]

Input = str | Message | Sequence[Message]


class SessionBusy(StopwiseError):
    """A new run was asked for on a session whose last run is still running or was interrupted."""


def _input_messages(input: Input) -> tuple[Message, ...]:
    if isinstance(input, str):
        return (Message.user(input),)
    if isinstance(input, Message):
        return (input,)
    messages = tuple(input)
    for m in messages:
        if not isinstance(m, Message):
            raise TypeError(f"input must be a str, a Message or a list of Messages; found {type(m).__name__}")
    return messages


class Runner:
    """Runs agents against a store (in memory when none is given).

    ``run`` starts a run on a new or existing session; ``retry`` continues a session whose last run failed,
    was cancelled, or was interrupted by a crash; ``stream`` yields the typed events of a run as it goes.
    """

    def __init__(self, store: Store | None = None) -> None:
        self.store: Store = store if store is not None else MemoryStore()

    async def run(
        self,
        agent: Agent,
        input: Input,
        *,
        session_id: str | None = None,
        state: Mapping[str, Any] | None = None,
    ) -> RunResult:
        """Run ``agent`` on ``input`` until the stop decision ends the run."""
        return await _finish(drive(await self._start(agent, input, session_id, state)))

    async def retry(self, agent: Agent, session_id: str, message: str | Message | None = None) -> RunResult:
        """Continue the session's last run from its last committed step (log and state).

        After a failure or a cancellation the budget starts afresh; after a crash (the run still reads
        ``running``) the run resumes where its log ends, with the budget it had. ``message``, if given, is
        appended as new input. Raises ``RetryNotAllowed`` when the last run completed or there is none.
        """
        return await _finish(drive(await self._retry(agent, session_id, message)))

    async def stream(
        self,
        agent: Agent,
        input: Input,
        *,
        session_id: str | None = None,
        state: Mapping[str, Any] | None = None,
    ) -> AsyncIterator[Event]:
        """Yield the run's typed events as they happen; the last is ``RunFinished`` with the result.

        Leaving the iteration early cancels the run (recorded as cancelled; ``retry`` continues it).
        """
        events = drive(await self._start(agent, input, session_id, state))
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
    ) -> RunResult:
        """``run`` for scripts: starts an event loop. Use ``await run(...)`` inside async code."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self.run(agent, input, session_id=session_id, state=state))
        raise RuntimeError("run_sync() was called inside a running event loop; use 'await runner.run(...)'")

    async def close(self) -> None:
        await self.store.close()

    async def run_child(self, agent: Agent, input: str, ctx: RunContext) -> Any:
        """Run a sub-agent for a tool call of a parent run (see ``Agent.as_tool``).

        The child session is keyed on the parent's session and call, so when the parent's step is re-run
        after a crash, a child that already finished is not run again and an interrupted one is resumed.
        """
        session_id = f"{ctx.session_id}/{ctx.tool_call_id}"
        snapshot = await self.store.load_session(session_id)
        last = None if snapshot is None else snapshot.last_run
        if last is None:
            result = await self.run(agent, input, session_id=session_id)
            status, output, error = result.status, result.output, result.error
        elif last.status is RunStatus.RUNNING:
            result = await self.retry(agent, session_id)
            status, output, error = result.status, result.output, result.error
        else:
            status, output, error = last.status, last.output, last.error
        if status is RunStatus.COMPLETED:
            return output
        raise ToolError(error.message if error is not None else f"sub-agent {agent.name!r} ended {status}")

    async def _start(self, agent: Agent, input: Input, session_id: str | None, state: Mapping[str, Any] | None) -> Leg:
        if not isinstance(agent, Agent):
            raise TypeError(f"agent must be an Agent, got {type(agent).__name__}")
        rows = _input_messages(input)
        session_id = session_id or uuid.uuid4().hex
        snapshot = await self.store.load_session(session_id)
        if snapshot is not None and snapshot.last_run is not None:
            last = snapshot.last_run
            if last.status in (RunStatus.RUNNING, RunStatus.SUSPENDED):
                raise SessionBusy(
                    f"session {session_id!r}: run {last.run_id} is {last.status.value}; "
                    "call retry() to continue it before starting a new run"
                )
        session_state = dict(snapshot.state) if snapshot is not None else {}
        if state is not None:
            session_state.update(state)
        messages = snapshot.messages() if snapshot is not None else []
        next_seq = snapshot.next_seq if snapshot is not None else 1
        run = RunRecord(uuid.uuid4().hex, session_id, agent.name, RunStatus.RUNNING)
        entry = LogEntry(session_id, next_seq, run.run_id, 0, EntryKind.INPUT, rows)
        await self.store.start_run(run, entry, session_state)
        run_start = len(messages)
        messages.extend(rows)
        return Leg(agent, self.store, self, run, messages, session_state, next_seq + 1, run_start=run_start)

    async def _retry(self, agent: Agent, session_id: str, message: str | Message | None) -> Leg:
        snapshot = await self.store.load_session(session_id)
        last = None if snapshot is None else snapshot.last_run
        if snapshot is None or last is None:
            raise RetryNotAllowed(f"session {session_id!r} has no run to retry")
        if last.status is RunStatus.COMPLETED:
            raise RetryNotAllowed(
                f"session {session_id!r}: run {last.run_id} completed ({last.completion_reason}); "
                "there is nothing to retry; start a new run with run()"
            )
        if last.status is RunStatus.SUSPENDED:
            raise RetryNotAllowed(f"session {session_id!r}: run {last.run_id} is suspended; resume it instead")
        if last.agent != agent.name:
            raise RetryNotAllowed(
                f"session {session_id!r}: run {last.run_id} belongs to agent {last.agent!r}, not {agent.name!r}"
            )
        messages = snapshot.messages()
        next_seq = snapshot.next_seq
        entry = None
        if message is not None:
            entry = LogEntry(session_id, next_seq, last.run_id, 0, EntryKind.INPUT, _input_messages(message))
            messages.extend(entry.messages)
            next_seq += 1
        # A crash (the record still reads running) resumes with the budget it had; a failure or a
        # cancellation gets a fresh one.
        crashed = last.status is RunStatus.RUNNING
        leg = restore_leg(
            agent, self.store, self, snapshot, last, crashed=crashed, messages=messages, next_seq=next_seq
        )
        await self.store.start_run(leg.record(), entry, leg.state)
        return leg


async def _finish(events: AsyncIterator[Event]) -> RunResult:
    async for event in events:
        if isinstance(event, RunFinished):
            return event.result
    raise RuntimeError("the run ended without a result")  # pragma: no cover - drive always finishes
