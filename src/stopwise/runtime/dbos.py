"""``DBOSRuntime``: runs as DBOS durable workflows, shared by worker processes through a DBOS queue (extra ``dbos``).

Import this module only when you use it: it imports ``dbos`` (the rest of stopwise never does).

How a run maps onto DBOS:

- a run leg (``run`` or ``retry``) is one workflow, ``stopwise.run``;
- its first DBOS step, ``stopwise.probe``, records where the session's log ended; the second, ``stopwise.begin``,
  starts the leg (the run record and the input entry, in the store's transaction);
- every stopwise step is one DBOS step, ``stopwise.advance``: the model call, the tools and the store commit of
  that step. It is keyed by ``(session, step)``: before acting it looks in the log, and a step that is already
  committed (the process died after the commit but before DBOS recorded the step) is returned from the log,
  not run again. Two executors that race on one step meet on the log's ``(session_id, seq)`` key: one commits,
  the other gets ``StepConflict`` and returns what the winner committed. So a step's effects on the log commit
  exactly once, together with the run's log, in the store's database.

Recovery after a crash is DBOS's: a pending workflow is re-enqueued (``DBOS.launch`` does it for the
executor's own workflows; for a dead executor's, restart it with the same ``executor_id``, or call DBOS's
recovery for that executor id from a live one). Its recorded steps replay from DBOS's record; the first
unrecorded step rebuilds the leg from the log (as ``Runner.retry`` does after a crash) and carries on.

The steps of one leg share a live ``loop.drive`` generator inside the process that runs them; only a leg that
moved to another process (or survived a crash) is rebuilt from the log.
"""

from __future__ import annotations

import asyncio
import inspect
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dbos import DBOS

from stopwise.agent import Agent
from stopwise.errors import ConfigError, RetryNotAllowed, StepConflict, StopwiseError
from stopwise.events import Event, RunFinished, StepCommitted, StepStarted
from stopwise.loop import drive
from stopwise.messages import Message, dump_messages, load_messages
from stopwise.result import CompletionReason, RunResult, RunStatus
from stopwise.runtime.local import Input, Runner, _input_messages
from stopwise.store.base import EntryKind, SessionSnapshot, Store

__all__ = ["DEFAULT_QUEUE", "WORKFLOW_NAME", "DBOSRuntime", "RunHandle", "request_for"]

WORKFLOW_NAME = "stopwise.run"
DEFAULT_QUEUE = "stopwise"


@dataclass(frozen=True, slots=True)
class RunHandle:
    """A run leg submitted to the queue. ``workflow_id`` is its DBOS workflow; wait with ``DBOSRuntime.result``."""

    workflow_id: str
    session_id: str


@dataclass(slots=True)
class _Live:
    """A leg being driven in this process: the events generator, parked between two DBOS steps."""

    run_id: str
    events: AsyncIterator[Event]


_active: DBOSRuntime | None = None
_live: dict[str, _Live] = {}
"""Per workflow id. A leg parked here is resumed by the workflow's next step in this process."""


def _runtime() -> DBOSRuntime:
    if _active is None:
        raise StopwiseError(
            "a stopwise workflow ran in a process with no DBOSRuntime: build DBOSRuntime(store, agents) "
            "before DBOS.launch() in every worker"
        )
    return _active


class DBOSRuntime:
    """Runs agents as DBOS workflows against ``store`` (a ``PostgresStore`` across processes, or a
    ``SQLiteStore`` for development), on the DBOS queue ``queue``.

    Every worker process builds one with the same ``agents`` (a recovered run finds its agent by name), the
    application configures DBOS itself (``DBOS(config=...)``: system database, ``executor_id``,
    ``application_version``), then calls ``launch()`` inside the event loop that will run the workflows.
    ``worker_concurrency`` caps the runs one process executes at once (``None``: no cap); ``polling_interval``
    is how often (seconds) the process looks for queued runs; ``queue_options`` go to
    ``DBOS.register_queue_async`` as they are (``global_concurrency``, ``limiter``, ...).
    """

    def __init__(
        self,
        store: Store,
        agents: Sequence[Agent],
        *,
        queue: str = DEFAULT_QUEUE,
        worker_concurrency: int | None = None,
        polling_interval: float = 1.0,
        queue_options: Mapping[str, Any] | None = None,
    ) -> None:
        global _active
        names = [a.name for a in agents]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ConfigError("agents", f"agent names must be unique; repeated: {', '.join(duplicates)}")
        self.store = store
        self.agents: dict[str, Agent] = {a.name: a for a in agents}
        self.queue = queue
        self.worker_concurrency = worker_concurrency
        self.polling_interval = polling_interval
        self.queue_options = dict(queue_options or {})
        _active = self

    async def launch(self) -> None:
        """``DBOS.launch()`` and register the queue. Call it from inside the running event loop (DBOS then runs
        the workflows on that loop, which is the one the store's connections belong to)."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            raise StopwiseError("DBOSRuntime.launch() must be called inside a running event loop") from None
        DBOS.launch()
        await DBOS.register_queue_async(
            self.queue,
            worker_concurrency=self.worker_concurrency,
            polling_interval_sec=self.polling_interval,
            **self.queue_options,
        )

    def agent(self, name: str) -> Agent:
        try:
            return self.agents[name]
        except KeyError:
            raise ConfigError(
                "agents", f"no agent named {name!r} in this worker's DBOSRuntime; known: {', '.join(self.agents)}"
            ) from None

    async def enqueue(
        self,
        agent: Agent,
        input: Input,
        *,
        session_id: str | None = None,
        state: Mapping[str, Any] | None = None,
        workflow_id: str | None = None,
    ) -> RunHandle:
        """Put a new run on the queue; any worker listening to it runs it.

        ``workflow_id`` makes the submission idempotent: submitting the same id again returns the same run
        (DBOS deduplicates workflows by id), so a caller that is unsure whether its submission landed can
        simply submit again.
        """
        self._check_agent(agent)
        return await self._submit(request_for(agent.name, input, session_id=session_id, state=state), workflow_id)

    async def retry(
        self,
        agent: Agent,
        session_id: str,
        message: str | Message | None = None,
        *,
        workflow_id: str | None = None,
    ) -> RunHandle:
        """Put a retry of the session's last run on the queue (``Runner.retry``'s rules and budget).

        A run whose workflow is still pending needs no retry: DBOS recovers it. This is for runs that ended
        failed or cancelled, and for runs left ``running`` by a workflow that ended in error (for example a
        database outage that outlasted the step): the retry continues from the last committed step.
        """
        self._check_agent(agent)
        snapshot = await self.store.load_session(session_id)
        last = None if snapshot is None else snapshot.last_run
        if last is None:
            raise RetryNotAllowed(f"session {session_id!r} has no run to retry")
        if last.status is RunStatus.COMPLETED:
            raise RetryNotAllowed(f"session {session_id!r}: run {last.run_id} completed; start a new run instead")
        if last.status is RunStatus.SUSPENDED:
            raise RetryNotAllowed(f"session {session_id!r}: run {last.run_id} is suspended for approval")
        request = {
            "agent": agent.name,
            "session_id": session_id,
            "mode": "retry",
            "input": None if message is None else dump_messages(_input_messages(message)).decode(),
            "state": None,
        }
        return await self._submit(request, workflow_id)

    async def run(
        self,
        agent: Agent,
        input: Input,
        *,
        session_id: str | None = None,
        state: Mapping[str, Any] | None = None,
        workflow_id: str | None = None,
    ) -> RunResult:
        """``enqueue`` and wait for the result (the run may execute in another worker)."""
        handle = await self.enqueue(agent, input, session_id=session_id, state=state, workflow_id=workflow_id)
        return await self.result(handle)

    async def result(self, handle: RunHandle) -> RunResult:
        """Wait for the leg's workflow to end, then read its run from the store. A workflow that ended in error
        (for example the store was unreachable for longer than a step) raises that error here; the run stays
        ``running`` in the store and ``retry`` continues it."""
        outcome: dict[str, Any] = await (await DBOS.retrieve_workflow_async(handle.workflow_id)).get_result()
        return await self.read_result(handle.session_id, outcome["run_id"])

    async def read_result(self, session_id: str, run_id: str) -> RunResult:
        """A run's ``RunResult`` as the store has it (its record, the session's log and state)."""
        snapshot = await self.store.load_session(session_id)
        run = next((r for r in await self.store.list_runs(session_id) if r.run_id == run_id), None)
        if snapshot is None or run is None:
            raise StopwiseError(f"session {session_id!r} has no run {run_id!r}")
        output = run.output
        agent = self.agents.get(run.agent)
        structured = run.status is RunStatus.COMPLETED and run.completion_reason is CompletionReason.OUTPUT
        if agent is not None and agent.output_type is not None and output is not None and structured:
            output = agent.output_type.model_validate(output)
        return RunResult(
            status=run.status,
            completion_reason=run.completion_reason,
            error=run.error,
            output=output,
            text=run.text,
            usage=run.usage,
            steps=run.steps,
            session_id=session_id,
            run_id=run_id,
            state=dict(snapshot.state),
            messages=tuple(snapshot.messages()),
            detail=run.detail,
        )

    def _check_agent(self, agent: Agent) -> None:
        if self.agents.get(agent.name) is not agent:
            raise ConfigError("agent", f"agent {agent.name!r} is not one of this DBOSRuntime's agents")

    async def _submit(self, request: dict[str, Any], workflow_id: str | None) -> RunHandle:
        from dbos import SetWorkflowID

        wf = workflow_id or f"stopwise-{uuid.uuid4().hex}"
        with SetWorkflowID(wf):
            await DBOS.enqueue_workflow_async(self.queue, _run_workflow, request)
        return RunHandle(wf, request["session_id"])


def request_for(
    agent_name: str,
    input: Input,
    *,
    session_id: str | None = None,
    state: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The workflow argument of a new run, for submitting with a ``DBOSClient`` from a process that runs no
    workers: ``client.enqueue({"workflow_name": WORKFLOW_NAME, "queue_name": ..., "workflow_id": ...},
    request_for(...))``. The session id is ``request["session_id"]``."""
    return {
        "agent": agent_name,
        "session_id": session_id or uuid.uuid4().hex,
        "mode": "run",
        "input": dump_messages(_input_messages(input)).decode(),
        "state": dict(state) if state is not None else None,
    }


# --- the workflow and its steps --------------------------------------------------------------------------------


@DBOS.workflow(name=WORKFLOW_NAME)
async def _run_workflow(request: dict[str, Any]) -> dict[str, Any]:
    """One run leg. Returns ``{"run_id", "step", "finished", "status"}`` of its last step."""
    next_seq = await _probe(request["session_id"])
    outcome = await _begin(request, next_seq)
    while not outcome["finished"]:
        outcome = await _advance(request, outcome["run_id"], outcome["step"] + 1)
    return outcome


@DBOS.step(name="stopwise.probe")
async def _probe(session_id: str) -> int:
    """Where the session's log ends before this leg: recorded, so a re-run ``begin`` can tell its own start."""
    snapshot = await _runtime().store.load_session(session_id)
    return 1 if snapshot is None else snapshot.next_seq


@DBOS.step(name="stopwise.begin")
async def _begin(request: dict[str, Any], next_seq: int) -> dict[str, Any]:
    """Start the leg: its start commit (run record, input entry) happens here, its first model call does not."""
    rt = _runtime()
    wf = _workflow_id()
    session_id = request["session_id"]
    agent = rt.agent(request["agent"])
    snapshot = await rt.store.load_session(session_id)
    if snapshot is not None and snapshot.next_seq > next_seq:
        # This step ran before and its start committed (the input entry is at next_seq), but the process died
        # before DBOS recorded the step. (A retry without a message appends nothing; running it again is harmless.)
        ours = next(e for e in snapshot.entries if e.seq == next_seq)
        return _outcome_from_log(snapshot, ours.run_id, 0)
    runner = Runner(rt.store)
    rows = None if request["input"] is None else load_messages(request["input"])
    if request["mode"] == "run":
        assert rows is not None
        events: AsyncIterator[Event] = runner.stream(agent, rows, session_id=session_id, state=request["state"])
    else:
        message = rows[0] if rows else None
        events = drive(await _retry_leg(runner, agent, session_id, message))
    async for event in events:
        if isinstance(event, RunFinished):  # ended before any step (an input guardrail's block)
            return _outcome(event.run_id, event.step, event.result.status)
        if isinstance(event, StepStarted):  # the start is committed; the model call comes in the next step
            _live[wf] = _Live(event.run_id, events)
            return _outcome(event.run_id, event.step - 1, RunStatus.RUNNING)
    raise StopwiseError("the run leg ended without finishing")  # pragma: no cover - drive always finishes


@DBOS.step(name="stopwise.advance")
async def _advance(request: dict[str, Any], run_id: str, step: int) -> dict[str, Any]:
    """Make sure stopwise step ``step`` of the run is committed (or the run has ended) and return the outcome."""
    rt = _runtime()
    wf = _workflow_id()
    live = _live.get(wf)
    if live is None or live.run_id != run_id:
        snapshot = await rt.store.load_session(request["session_id"])
        if snapshot is None:
            raise StopwiseError(f"session {request['session_id']!r} vanished from the store")
        done = _outcome_if_done(snapshot, run_id, step)
        if done is not None:
            return done
        # Interrupted (a crash, or a worker that stopped): continue the leg from the log.
        runner = Runner(rt.store)
        live = _Live(run_id, drive(await _retry_leg(runner, rt.agent(request["agent"]), request["session_id"], None)))
        _live[wf] = live
    try:
        async for event in live.events:
            if isinstance(event, RunFinished):
                _live.pop(wf, None)
                return _outcome(run_id, event.step, event.result.status)
            if isinstance(event, StepCommitted) and not getattr(event.decision, "ends_run", False):
                return _outcome(run_id, event.step, RunStatus.RUNNING)
            # A step that ends the run is followed at once by RunFinished: take it in this DBOS step.
    except StepConflict:
        # Another executor committed this step first (it was recovered while we still ran it): theirs stands.
        _live.pop(wf, None)
        snapshot = await rt.store.load_session(request["session_id"])
        done = None if snapshot is None else _outcome_if_done(snapshot, run_id, step)
        if done is None:
            raise
        return done
    except BaseException:
        _live.pop(wf, None)
        raise
    _live.pop(wf, None)
    raise StopwiseError("the run leg ended without finishing")  # pragma: no cover - drive always finishes


def _workflow_id() -> str:
    wf = DBOS.workflow_id
    if wf is None:  # pragma: no cover - the steps are only called from the workflow
        raise StopwiseError("a stopwise DBOS step ran outside its workflow")
    return wf


def _outcome(run_id: str, step: int, status: RunStatus) -> dict[str, Any]:
    return {
        "run_id": run_id,
        "step": step,
        "status": status.value,
        "finished": status is not RunStatus.RUNNING,
    }


def _outcome_if_done(snapshot: SessionSnapshot, run_id: str, step: int) -> dict[str, Any] | None:
    """The outcome of ``step`` from the log when it is committed or the run has ended; None when it still has
    to run. A run recorded ``cancelled`` by a worker that shut down mid-step is not done: its workflow is still
    pending, so it continues (a caller cancels a DBOS run with ``DBOS.cancel_workflow``, which stops the
    workflow itself)."""
    outcome = _outcome_from_log(snapshot, run_id, step)
    if outcome["step"] >= step:
        return outcome
    last = snapshot.last_run
    interrupted = last is not None and last.status is RunStatus.CANCELLED
    return outcome if outcome["finished"] and not interrupted else None


def _outcome_from_log(snapshot: SessionSnapshot, run_id: str, step: int) -> dict[str, Any]:
    committed = max(
        (e.step for e in snapshot.entries if e.run_id == run_id and e.kind is not EntryKind.INPUT), default=0
    )
    last = snapshot.last_run
    status = last.status if last is not None and last.run_id == run_id else RunStatus.RUNNING
    return _outcome(run_id, committed, status)


async def _retry_leg(runner: Runner, agent: Agent, session_id: str, message: Message | None) -> Any:
    # TODO(loop hook): Runner has no public way to open a retry leg as an event stream; this uses the private
    # Runner._retry (whose signature is gaining a runtime_context argument). See docs/scaling.md.
    params = inspect.signature(runner._retry).parameters
    if "runtime_context" in params:
        return await runner._retry(agent, session_id, message, None)  # type: ignore[call-arg,unused-ignore]
    return await runner._retry(agent, session_id, message)  # type: ignore[call-arg,unused-ignore]
