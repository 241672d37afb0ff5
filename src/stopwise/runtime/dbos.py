"""``DBOSRuntime``: runs as DBOS durable workflows, shared by worker processes through a DBOS queue (extra ``dbos``).

Import this module only when you use it: it imports ``dbos`` (the rest of stopwise never does).

How a run maps onto DBOS:

- a run leg (``run``, ``retry`` or ``resume``) is one workflow, ``stopwise.run``; its legs are opened with
  ``Runner.open_leg`` and driven with ``Runner.drive_leased`` (``loop.drive`` holding the run's lease), one DBOS
  step per stopwise step;
- a new run's first DBOS step, ``stopwise.begin``, starts the leg (the run record and the input entry, in the
  store's transaction). The run's id is the workflow's id, so a ``begin`` run again after a crash finds its own
  run in the store and returns it instead of starting it twice;
- a retry first records where the session's log ended (``stopwise.probe``), so that its ``begin`` can tell its
  own input entry from the log;
- a resume records where the log ended (``stopwise.probe``), then settles the suspended step
  (``stopwise.settle``: the reviewer's decisions applied, the approved tools run, the settle committed); a settle
  that committed before a crash is found at that position and returned, not run again;
- a fork's first DBOS step, ``stopwise.fork``, writes the new session's copy of the source log and its fork note
  in one transaction (``Runner.fork``'s, under a run named after the workflow) and starts the forked leg; a step
  run again after a crash writes only what of the copy is missing, and finds a leg start that committed (see
  ``DBOSRuntime.fork``);
- every further stopwise step is one DBOS step, ``stopwise.advance``: the model call, the tools and the store
  commit of that step. It is keyed by ``(session, step)``: before acting it looks in the log, and a step that is
  already committed (the process died after the commit but before DBOS recorded the step) is returned from the
  log, not run again. Two executors that race on one step meet on the log's ``(session_id, seq)`` key: one
  commits, the other gets ``StepConflict`` and returns what the winner committed. So a step's effects on the log
  commit exactly once, together with the run's log, in the store's database.

Leases (``docs/durability.md``): a run leg holds the run's store lease, as ``Runner`` does, with the
workflow as its owner (``lease_owner(workflow_id)``) for ``DBOSRuntime(lease_seconds=...)``. A new run writes it
with its start; ``retry`` and ``enqueue_resume`` claim the run for the workflow they submit before submitting it
(``RunLeased`` or ``StepConflict`` there, before anything is submitted), and a leg submitted without that claim
(a ``DBOSClient``) claims it in its first step, before anything executes. The lease is renewed as steps commit
and dropped when the leg ends. Every step that picks a leg up (a recovered or moved workflow) takes the lease
over when its workflow holds it, whichever executor that workflow ran on, and claims it otherwise.

Recovery after a crash is DBOS's: a pending workflow is re-enqueued (``DBOS.launch`` does it for the
executor's own workflows; for a dead executor's, restart it with the same ``executor_id``, or call DBOS's
recovery for that executor id from a live one). Its recorded steps replay from DBOS's record; the first
unrecorded step rebuilds the leg from the log (as ``Runner.retry`` does after a crash) and carries on.

The steps of one leg share a live ``loop.drive`` generator inside the process that runs them; only a leg that
moved to another process (or survived a crash) is rebuilt from the log.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

try:
    from dbos import DBOS, WorkflowHandleAsync
except ImportError as exc:  # a ModuleNotFoundError that says what to install, not just "no module named 'dbos'"
    raise ModuleNotFoundError(
        f"stopwise.runtime.dbos needs the dbos extra: pip install 'stopwise[dbos]' ({exc})", name="dbos"
    ) from exc

from stopwise._fork import Fork, incomplete_fork, plan_fork
from stopwise._loop import Leg
from stopwise._results import result_from_log
from stopwise.agent import Agent
from stopwise.approvals import (
    ApprovalDecision,
    ApprovalError,
    ApprovalRecord,
    Approve,
    Modify,
    Reject,
    Terminate,
)
from stopwise.errors import ConfigError, ForkNotAllowed, StepConflict, StopwiseError, StoreError
from stopwise.events import Event, RunFinished, StepCommitted, StepStarted
from stopwise.goal import Goal
from stopwise.messages import Message, decode_tool_result, dump_messages, load_messages
from stopwise.records import ForkRecord, parse_entry
from stopwise.result import CompletionReason, RunResult, RunStatus
from stopwise.runtime.local import Input, Runner, _client_row, _input_messages
from stopwise.stop.decision import Action, StopDecision, apply_decision
from stopwise.store.base import EntryKind, Lease, LogEntry, RunRecord, SessionSnapshot, Store, commit_many
from stopwise.tools import ToolError

__all__ = [
    "DEFAULT_QUEUE",
    "WORKFLOW_NAME",
    "DBOSRuntime",
    "RunHandle",
    "decisions_from_data",
    "decisions_to_data",
    "lease_owner",
    "request_for",
    "request_for_resume",
    "results_from_data",
    "results_to_data",
]

WORKFLOW_NAME = "stopwise.run"
DEFAULT_QUEUE = "stopwise"


def lease_owner(workflow_id: str) -> str:
    """The lease owner of a run leg driven by the DBOS workflow ``workflow_id`` (what ``RunLeased.owner`` names).
    It is the workflow, not its executor: DBOS recovering the workflow on any executor is the same holder."""
    return f"dbos-workflow:{workflow_id}"


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
    is how often (seconds) the process looks for queued runs, and ``result`` for a submitted leg's end;
    ``queue_options`` go to ``DBOS.register_queue_async`` as they are (``global_concurrency``, ``limiter``, ...).

    ``lease_seconds`` is the lease a leg holds on its run, as ``Runner(lease_seconds=...)``: while it is live,
    another workflow's or runner's ``retry`` or ``resume`` of the run is refused with ``RunLeased``. A queued leg
    holds it from its submission, so pick it longer than a leg may wait in the queue plus its longest step.
    ``clock`` (Unix seconds) dates the leases this process takes and judges others' expiry, as ``Runner``'s does.
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
        lease_seconds: float = 300.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        global _active
        if not lease_seconds > 0:
            raise ConfigError("lease_seconds", f"must be a positive number of seconds, got {lease_seconds!r}")
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
        self.lease_seconds = float(lease_seconds)
        self.clock = clock
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
        goal: Goal | str | None = None,
    ) -> RunHandle:
        """Put a new run on the queue; any worker listening to it runs it. The run's id is the workflow's id.
        ``goal`` is the run's goal, as ``Runner.run`` takes it.

        ``workflow_id`` makes the submission idempotent: submitting the same id again returns the same run
        (DBOS deduplicates workflows by id), so a caller that is unsure whether its submission landed can
        simply submit again: the handle names the session that workflow runs, as DBOS recorded it, even when this
        submission named another or (no ``session_id``) drew a fresh one.
        """
        self._check_agent(agent)
        request = request_for(agent.name, input, session_id=session_id, state=state, goal=goal)
        return await self._submit(request, workflow_id)

    async def retry(
        self,
        agent: Agent,
        session_id: str,
        message: str | Message | None = None,
        *,
        workflow_id: str | None = None,
    ) -> RunHandle:
        """Put a retry of the session's last run on the queue (``Runner.retry``'s rules, refusals and budget).

        A run whose workflow is still pending needs no retry: DBOS recovers it. This is for runs that ended
        failed or cancelled, and for runs left ``running`` by a workflow that ended in error (for example a
        database outage that outlasted the step): the retry continues from the last committed step.

        The run is claimed for the submitted workflow before it is submitted: ``RunLeased`` (who holds it, until
        when) while another workflow or runner holds a live lease on it (a live run, or one whose worker crashed
        less than its lease ago), ``StepConflict`` when it moved on since it was read; nothing is submitted then.
        """
        self._check_agent(agent)
        snapshot = await self.store.load_session(session_id)
        await Runner(self.store).open_leg(agent, "retry", session_id=session_id, message=message)  # checks only
        request = {
            "agent": agent.name,
            "session_id": session_id,
            "mode": "retry",
            "input": None if message is None else dump_messages(_input_messages(message)).decode(),
            "state": None,
        }
        return await self._submit_holding(request, workflow_id, snapshot)

    async def fork(
        self,
        agent: Agent,
        session_id: str,
        at_step: int,
        *,
        new_session_id: str | None = None,
        state: Mapping[str, Any] | None = None,
        message: str | Message | None = None,
        workflow_id: str | None = None,
    ) -> RunHandle:
        """Put a fork of the session's last run at its committed step ``at_step`` on the queue: ``Runner.fork``'s
        semantics (a new session whose log is a copy of the source's up to that step's commit and a note holding
        a ``ForkRecord``; the forked run continues from there as a run restored after a crash; ``state``, else
        the source session's state as of this call; ``message`` appended as new input), driven as a DBOS
        workflow. The forked run's id is the workflow's id, and so is the new session's unless ``new_session_id``
        names it. The source session is not touched.

        Refused before anything is submitted, as ``Runner.fork`` refuses: ``RetryNotAllowed`` for a session with
        no run of this agent, ``ForkNotAllowed`` for a step that is not committed or that suspended for
        approval, or a new session that exists. ``workflow_id`` makes the submission idempotent: a workflow id
        DBOS already has is not checked or submitted again, its handle is returned (naming the session it forks
        into, as DBOS recorded it).

        Exactly once: the copy is written by the workflow's first step, ``stopwise.fork``, in one transaction
        (``commit_many``: the entries, each keyed by ``(new session, seq)`` like every log entry, the note last,
        the run record holding the workflow's lease). A step that runs again after a crash finds no copy or the
        whole one an earlier execution of this workflow wrote (its run is named after the workflow), checks it
        against the plan and writes only what is missing: no entry is written twice, and the note once. A partial
        copy (written entry by entry by an earlier stopwise, or by a store without ``commit_many``) reads as a
        fork not completely written until its note is (``retry()`` refuses it, a new ``run()`` finds it busy),
        so only this workflow completes it. A leg start that committed (the ``message``) is found after the
        note and not written again. The plan is made from the source run named at submission, whose entries up
        to that step an append-only log keeps as they were; a source session removed meanwhile fails the
        workflow with ``ForkNotAllowed`` (a partial copy then stays refused: fork again into another session).
        """
        self._check_agent(agent)
        wf = workflow_id or f"stopwise-{uuid.uuid4().hex}"
        new_session_id = new_session_id or wf
        if workflow_id is not None and (recorded := await _recorded_session(wf)) is not None:
            return RunHandle(wf, recorded)
        source, last = await Runner(self.store)._last_run(agent, session_id)
        plan_fork(source, last, at_step, new_session_id, wf)  # checks only: the workflow writes its own plan
        if await self.store.load_session(new_session_id) is not None:
            raise ForkNotAllowed(f"session {new_session_id!r} exists: a fork writes a new session")
        request = {
            "agent": agent.name,
            "session_id": new_session_id,
            "mode": "fork",
            "input": None if message is None else dump_messages(_input_messages(message)).decode(),
            "state": dict(source.state if state is None else state),
            "source_session_id": session_id,
            "source_run_id": last.run_id,
            "at_step": at_step,
        }
        return await self._submit(request, wf, fresh=workflow_id is None)

    async def enqueue_resume(
        self,
        agent: Agent,
        session_id: str,
        decisions: Mapping[str, ApprovalDecision] | None = None,
        *,
        results: Mapping[str, Any] | None = None,
        workflow_id: str | None = None,
    ) -> RunHandle:
        """Put the settle of a run suspended for approval on the queue; any worker continues the run from there.

        ``decisions`` maps every pending call id to ``Approve()``, ``Reject(message)``, ``Modify(args)`` or
        ``Terminate(reason)``, as for ``Runner.resume``, and the same refusals (``ApprovalError``: an unknown or
        missing call, an ``args_hash`` that no longer matches, an expired approval, a run that is not suspended)
        are raised here, before anything is submitted. An approval's expiry is judged at this moment: a resume
        that waits in the queue past ``expires_at`` still settles. The run suspended in whichever process; any
        runtime on the same store and DBOS database resumes it. ``workflow_id`` makes the submission idempotent
        (see ``enqueue``). ``results`` maps a pending client-side tool call to its result, as for
        ``Runner.resume``: it travels in the workflow's input (as JSON data, see ``results_to_data``), so a
        recovered workflow settles with the same result.

        The suspended run is claimed for the submitted workflow before it is submitted, as in ``retry``: of two
        resumes at once (from any processes, or a ``Runner.resume`` or ``Runner.expire`` racing this one), one goes
        on and the other gets ``RunLeased`` (or ``StepConflict``, or ``ApprovalError`` once the run is no longer
        suspended) before anything ran.
        """
        self._check_agent(agent)
        now = time.time()
        decisions = decisions or {}
        snapshot = await self.store.load_session(session_id)
        runner = Runner(self.store, clock=lambda: now)
        # Checks only; the results go through the request's JSON form first, so what is checked is what settles.
        settled = results_from_data(results_to_data(results or {}))
        await runner.open_leg(agent, "resume", session_id=session_id, decisions=decisions, results=settled)
        request = request_for_resume(agent.name, session_id, decisions, results=results, decided_at=now)
        return await self._submit_holding(request, workflow_id, snapshot)

    async def resume(
        self,
        agent: Agent,
        session_id: str,
        decisions: Mapping[str, ApprovalDecision] | None = None,
        *,
        results: Mapping[str, Any] | None = None,
        workflow_id: str | None = None,
    ) -> RunResult:
        """``enqueue_resume`` and wait for the result: the run as it ended (or suspended again)."""
        handle = await self.enqueue_resume(agent, session_id, decisions, results=results, workflow_id=workflow_id)
        return await self.result(handle)

    async def run(
        self,
        agent: Agent,
        input: Input,
        *,
        session_id: str | None = None,
        state: Mapping[str, Any] | None = None,
        workflow_id: str | None = None,
        goal: Goal | str | None = None,
    ) -> RunResult:
        """``enqueue`` and wait for the result (the run may execute in another worker)."""
        handle = await self.enqueue(
            agent, input, session_id=session_id, state=state, workflow_id=workflow_id, goal=goal
        )
        return await self.result(handle)

    async def result(self, handle: RunHandle) -> RunResult:
        """Wait for the leg's workflow to end, then read its run from the store. A workflow that ended in error
        (for example the store was unreachable for longer than a step) raises that error here; the run stays
        ``running`` in the store and ``retry`` continues it (once the leg's lease is dropped, which it is as the
        workflow fails unless the store is unreachable then too; else once it lapses)."""
        workflow: WorkflowHandleAsync[dict[str, Any]] = await DBOS.retrieve_workflow_async(handle.workflow_id)
        outcome: dict[str, Any] = await workflow.get_result(polling_interval_sec=self.polling_interval)
        return await self.read_result(handle.session_id, outcome["run_id"])

    async def read_result(self, session_id: str, run_id: str) -> RunResult:
        """A run's ``RunResult`` as the store has it, built as the local runner builds it (the run record, its
        records in the log, the session's log and state)."""
        snapshot = await self.store.load_session(session_id)
        run = None if snapshot is None else await _find_run(self.store, snapshot, run_id)
        if snapshot is None or run is None:
            raise StopwiseError(f"session {session_id!r} has no run {run_id!r}")
        return result_from_log(self.agents.get(run.agent), snapshot, run)

    def _check_agent(self, agent: Agent) -> None:
        if self.agents.get(agent.name) is not agent:
            raise ConfigError("agent", f"agent {agent.name!r} is not one of this DBOSRuntime's agents")

    async def _submit(self, request: dict[str, Any], workflow_id: str | None, *, fresh: bool = False) -> RunHandle:
        """Enqueue ``request`` as workflow ``workflow_id`` (a fresh id when None). DBOS keeps one workflow per id:
        submitted again, the id names the workflow first submitted, so the handle names the session that workflow
        runs (its recorded input), not this request's. ``fresh``: the caller made ``workflow_id`` up just now, so
        no workflow can have it yet (nothing to read back)."""
        from dbos import SetWorkflowID

        wf = workflow_id or f"stopwise-{uuid.uuid4().hex}"
        with SetWorkflowID(wf):
            await DBOS.enqueue_workflow_async(self.queue, _run_workflow, request)
        if workflow_id is None or fresh:
            return RunHandle(wf, request["session_id"])
        return RunHandle(wf, await _recorded_session(wf) or request["session_id"])

    async def _submit_holding(
        self, request: dict[str, Any], workflow_id: str | None, snapshot: SessionSnapshot | None
    ) -> RunHandle:
        """Claim the session's last run (as of ``snapshot``, which the caller checked) for the workflow, then
        submit it; a submission that fails drops the claim. A workflow id that DBOS already has is submitted
        again as it is (DBOS returns that workflow, which holds or held the run)."""
        wf = workflow_id or f"stopwise-{uuid.uuid4().hex}"
        if snapshot is None or await DBOS.get_workflow_status_async(wf) is not None:
            return await self._submit(request, wf, fresh=workflow_id is None)
        lease = await _hold(_holder(self, wf), snapshot)
        try:
            return await self._submit(request, wf, fresh=workflow_id is None)
        except BaseException:
            with contextlib.suppress(StoreError):  # the error that stopped the submission is the one to see
                await self.store.release(lease)
            raise


async def _recorded_session(workflow_id: str) -> str | None:
    """The session the DBOS workflow ``workflow_id`` runs, as its recorded input names it; None when DBOS has no
    such workflow (or its input is not a stopwise request)."""
    status = await DBOS.get_workflow_status_async(workflow_id)
    if status is None or status.input is None:
        return None
    args = status.input.get("args") or ()
    request = args[0] if args else None
    session = request.get("session_id") if isinstance(request, dict) else None
    return session if isinstance(session, str) else None


def request_for(
    agent_name: str,
    input: Input,
    *,
    session_id: str | None = None,
    state: Mapping[str, Any] | None = None,
    goal: Goal | str | None = None,
) -> dict[str, Any]:
    """The workflow argument of a new run, for submitting with a ``DBOSClient`` from a process that runs no
    workers: ``client.enqueue({"workflow_name": WORKFLOW_NAME, "queue_name": ..., "workflow_id": ...},
    request_for(...))``. The session id is ``request["session_id"]``; the run's id will be the workflow id."""
    stated = Goal.of(goal)
    return {
        "agent": agent_name,
        "session_id": session_id or uuid.uuid4().hex,
        "mode": "run",
        "input": dump_messages(_input_messages(input)).decode(),
        "state": dict(state) if state is not None else None,
        "goal": None if stated is None else stated.to_data(),
    }


def request_for_resume(
    agent_name: str,
    session_id: str,
    decisions: Mapping[str, ApprovalDecision],
    *,
    results: Mapping[str, Any] | None = None,
    decided_at: float | None = None,
) -> dict[str, Any]:
    """The workflow argument of a resume, for a ``DBOSClient`` (see ``request_for``). Nothing is checked here:
    a refused resume ends its workflow with ``ApprovalError`` (to check first, ``await
    Runner(store).open_leg(agent, "resume", session_id=..., decisions=...)`` raises the same errors and writes
    nothing). ``decided_at`` (Unix seconds, default now) is the moment an approval's expiry is judged at.
    ``results``: client-side tool calls' results, as for ``Runner.resume`` (kept as ``results_to_data`` writes
    them)."""
    request = {
        "agent": agent_name,
        "session_id": session_id,
        "mode": "resume",
        "input": None,
        "state": None,
        "decisions": decisions_to_data(decisions),
        "decided_at": time.time() if decided_at is None else decided_at,
    }
    if results:
        request["results"] = results_to_data(results)
    return request


_DECISIONS: dict[str, type[Approve | Reject | Modify | Terminate]] = {
    "approve": Approve,
    "reject": Reject,
    "modify": Modify,
    "terminate": Terminate,
}


def decisions_to_data(decisions: Mapping[str, ApprovalDecision]) -> dict[str, dict[str, Any]]:
    """Decisions as JSON-able data (a workflow's input): ``{call_id: {"decision": "approve", ...fields}}``."""
    data: dict[str, dict[str, Any]] = {}
    for call_id, d in decisions.items():
        if isinstance(d, Approve):
            data[call_id] = {"decision": "approve", "args_hash": d.args_hash}
        elif isinstance(d, Reject):
            data[call_id] = {
                "decision": "reject",
                "message": d.message,
                "args_hash": d.args_hash,
            }
        elif isinstance(d, Modify):
            if not isinstance(d.args, Mapping):
                raise ApprovalError(f"Modify for {call_id} needs a mapping of arguments")
            data[call_id] = {
                "decision": "modify",
                "args": dict(d.args),
                "args_hash": d.args_hash,
            }
        elif isinstance(d, Terminate):
            data[call_id] = {
                "decision": "terminate",
                "reason": d.reason,
                "args_hash": d.args_hash,
            }
        else:
            raise ApprovalError(
                f"decision for {call_id} must be Approve, Reject, Modify or Terminate, got {type(d).__name__}"
            )
        if d.reviewer is not None:
            data[call_id]["reviewer"] = d.reviewer
    return data


def results_to_data(results: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Client tools' results as JSON-able data (a resume workflow's ``"results"``): ``{call_id: {"value": data}}``
    with the value as its tool row will carry it (a pydantic model as its JSON), or ``{call_id: {"error":
    message}}`` for a ``ToolError``. Raises ``ApprovalError`` for a value that cannot be serialised to JSON."""
    data: dict[str, dict[str, Any]] = {}
    for call_id, value in results.items():
        if isinstance(value, ToolError):
            data[call_id] = {"error": str(value)}
            continue
        data[call_id] = {"value": decode_tool_result(_client_row(value, call_id))}
    return data


def results_from_data(data: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """The results ``results_to_data`` wrote (a failure as a ``ToolError``)."""
    return {call_id: ToolError(r["error"]) if "error" in r else r["value"] for call_id, r in data.items()}


def decisions_from_data(data: Mapping[str, Mapping[str, Any]]) -> dict[str, ApprovalDecision]:
    """The decisions ``decisions_to_data`` wrote."""
    decisions: dict[str, ApprovalDecision] = {}
    for call_id, fields in data.items():
        kind = _DECISIONS.get(str(fields.get("decision")))
        if kind is None:
            raise ApprovalError(f"decision for {call_id}: unknown kind {fields.get('decision')!r}")
        decisions[call_id] = kind(**{k: v for k, v in fields.items() if k != "decision"})
    return decisions


# --- the workflow and its steps --------------------------------------------------------------------------------


@DBOS.workflow(name=WORKFLOW_NAME)
async def _run_workflow(request: dict[str, Any]) -> dict[str, Any]:
    """One run leg. Returns ``{"run_id", "step", "finished", "status"}`` of its last step."""
    mode = request["mode"]
    if mode == "resume":
        outcome = await _settle(request, await _probe(request["session_id"]))
    elif mode == "fork":
        outcome = await _fork(request)
    else:
        outcome = await _begin(request, await _probe(request["session_id"]) if mode == "retry" else 0)
    while not outcome["finished"]:
        outcome = await _advance(request, outcome["run_id"], outcome["step"] + 1)
    return outcome


@DBOS.step(name="stopwise.probe")
async def _probe(session_id: str) -> int:
    """Where the session's log ends before this leg: recorded, so a re-run step can tell its own entry."""
    snapshot = await _runtime().store.load_session(session_id)
    return 1 if snapshot is None else snapshot.next_seq


@DBOS.step(name="stopwise.begin")
async def _begin(request: dict[str, Any], next_seq: int) -> dict[str, Any]:
    """Start a run or retry leg: its start commit (run record, input entry) happens here, its first model call
    does not. ``next_seq`` is the probe's (a retry), else 0."""
    rt = _runtime()
    wf = _workflow_id()
    session_id = request["session_id"]
    agent = rt.agent(request["agent"])
    snapshot = await rt.store.load_session(session_id)
    holder = _holder(rt, wf)
    rows = None if request["input"] is None else load_messages(request["input"])
    if request["mode"] == "run":
        # The run is named after this workflow: if it is in the store, this step ran before and its start
        # committed, but the process died before DBOS recorded the step.
        ours = None if snapshot is None else await _find_run(rt.store, snapshot, wf)
        if snapshot is not None and ours is not None:
            return _outcome_of(snapshot, ours)
        goal = Goal.from_data(request["goal"]) if request.get("goal") else None
        leg = await holder.open_leg(
            agent, "run", session_id=session_id, input=rows, state=request["state"], run_id=wf, goal=goal
        )
        leg.lease = Lease(wf, holder.owner, holder.clock() + holder.lease_seconds)  # written with the start
    else:
        if snapshot is not None and snapshot.next_seq > next_seq:
            # As above, for a retry that wrote an entry (its message, or an input guardrail's rewrite): it is
            # the entry where the log ended before this leg. (A retry that writes only its run record is
            # simply started again.)
            entry = _entry_at(snapshot, next_seq)
            return _outcome_from_log(snapshot, entry.run_id, 0)
        message = rows[0] if rows else None
        leg = await holder.open_leg(agent, "retry", session_id=session_id, message=message)
        assert snapshot is not None  # open_leg refused a session with no run
        leg.lease = await _hold(holder, snapshot)
    return await _started(holder, leg, wf)


async def _started(holder: Runner, leg: Leg, wf: str) -> dict[str, Any]:
    """Drive ``leg`` through its start commit and park it for the workflow's next step (its first model call)."""
    events = holder.drive_leased(leg)
    async for event in events:
        if isinstance(event, RunFinished):  # ended before any step (an input guardrail's block)
            return _outcome(event.run_id, event.step, event.result.status)
        if isinstance(event, StepStarted):  # the start is committed; the model call comes in the next step
            _live[wf] = _Live(event.run_id, events)
            return _outcome(event.run_id, event.step - 1, RunStatus.RUNNING)
    raise StopwiseError("the run leg ended without finishing")  # pragma: no cover - drive always finishes


@DBOS.step(name="stopwise.fork")
async def _fork(request: dict[str, Any]) -> dict[str, Any]:
    """Write the fork's copy of the source log (what of it is not written yet) and start the forked leg, as
    ``Runner.fork`` does; the model's first call comes in the next step. See ``DBOSRuntime.fork`` for what holds
    when this step runs again after a crash."""
    rt = _runtime()
    wf = _workflow_id()
    holder = _holder(rt, wf)
    session_id = request["session_id"]
    snapshot = await rt.store.load_session(session_id)
    if snapshot is None or not _fork_written(snapshot, wf):
        planned = await _fork_plan(rt.store, request, wf)
        lease = Lease(wf, holder.owner, holder.clock() + holder.lease_seconds)
        snapshot = await _write_fork(rt.store, planned, request["state"], lease)
    note = next(e for e in reversed(snapshot.entries) if any(_is_fork(r) for r in e.records))
    if snapshot.next_seq > note.seq + 1:
        # This step ran before and its leg's start committed (its message), then the process died before DBOS
        # recorded the step: the next step continues the leg from the log.
        return _outcome_from_log(snapshot, wf, 0)
    rows = None if request["input"] is None else load_messages(request["input"])
    # The copy is a running run with its note: a retry of it restores the leg exactly as ``Runner.fork`` does
    # (the budget it had at that step, the message as new input).
    leg = await holder.open_leg(
        rt.agent(request["agent"]), "retry", session_id=session_id, message=rows[0] if rows else None
    )
    leg.lease = await _hold(holder, snapshot)
    return await _started(holder, leg, wf)


def _fork_written(snapshot: SessionSnapshot, wf: str) -> bool:
    """The session holds the whole copy of the fork the workflow ``wf`` writes (its note, or its leg began)."""
    last = snapshot.last_run
    return last is not None and last.run_id == wf and incomplete_fork(snapshot, last) is None


async def _fork_plan(store: Store, request: dict[str, Any], wf: str) -> Fork:
    """The fork the request asks for, planned from the source run named at submission."""
    source_id, run_id = request["source_session_id"], request["source_run_id"]
    source = await store.load_session(source_id)
    run = None if source is None else await _find_run(store, source, run_id)
    if source is None or run is None:
        raise ForkNotAllowed(f"session {source_id!r} has no run {run_id!r} to fork any more")
    return plan_fork(source, run, int(request["at_step"]), request["session_id"], wf)


async def _write_fork(store: Store, planned: Fork, state: Mapping[str, Any], lease: Lease) -> SessionSnapshot:
    """Write what of ``planned`` the store does not hold yet, in one ``commit_many``, and return the session as
    written. An earlier (or concurrent) execution of the same workflow may have written it all, or a part (an
    earlier stopwise wrote entry by entry, as a store without ``commit_many`` still does): each round reads what
    is there, and a ``StepConflict`` means another execution wrote first, so the next round reads again."""
    session_id, entries = planned.run.session_id, planned.entries
    for _ in range(len(entries) + 1):
        snapshot = await store.load_session(session_id)
        written = 0 if snapshot is None else _copied(snapshot, planned)
        if snapshot is not None and written == len(entries):
            return snapshot
        # The record as first written: a re-plan may read a source run record that moved on since.
        record = planned.run if snapshot is None or snapshot.last_run is None else snapshot.last_run
        try:
            await commit_many(store, entries[written:], state, record, lease if written == 0 else None)
        except StepConflict:
            continue
    raise StopwiseError(f"session {session_id!r}: the fork's copy could not be written")  # pragma: no cover


def _copied(snapshot: SessionSnapshot, planned: Fork) -> int:
    """How many of the planned entries the session holds: ``ForkNotAllowed`` when it is another run's session,
    ``StopwiseError`` when what it holds is not the plan's beginning."""
    last = snapshot.last_run
    if last is None or last.run_id != planned.run.run_id:
        raise ForkNotAllowed(f"session {snapshot.session_id!r} exists: a fork writes a new session")
    have = [(e.seq, e.kind, e.step, e.run_id) for e in snapshot.entries]
    want = [(e.seq, e.kind, e.step, e.run_id) for e in planned.entries]
    if have != want[: len(have)]:
        raise StopwiseError(f"session {snapshot.session_id!r}: the fork's copy in the store is not its plan's")
    return len(have)


@DBOS.step(name="stopwise.settle")
async def _settle(request: dict[str, Any], next_seq: int) -> dict[str, Any]:
    """Settle a suspended step with the reviewer's decisions (the approved tools run) and commit it, as
    ``Runner.resume`` does; the model's next call comes in the next step. ``next_seq`` is where the log ended
    before this leg (the probe's): the settle commits there (after an input guardrail's rewrite, if any)."""
    rt = _runtime()
    wf = _workflow_id()
    holder = _holder(rt, wf)
    session_id = request["session_id"]
    decisions = decisions_from_data(request["decisions"])
    decided_at = float(request["decided_at"])
    snapshot = await rt.store.load_session(session_id)
    if snapshot is not None and snapshot.next_seq > next_seq:
        done = await _own_settle(holder, snapshot, next_seq, decisions, decided_at)
        if done is not None:  # this step ran before and its settle committed; the process died before DBOS knew
            return done
    # The expiry of an approval is judged when it was submitted (``decided_at``), also when a recovered
    # workflow settles later; the leg itself dates any new approvals by the wall clock.
    leg = await Runner(rt.store, clock=lambda: decided_at).open_leg(
        rt.agent(request["agent"]),
        "resume",
        session_id=session_id,
        decisions=decisions,
        results=results_from_data(request.get("results", {})),
    )
    assert snapshot is not None  # open_leg refused a session with no run
    leg.lease = await _hold(holder, snapshot)  # before any call runs: a second resume is refused here
    leg.clock = time.time
    _keep_suspended(leg)
    run_id = leg.run.run_id
    live = _Live(run_id, holder.drive_leased(leg))
    _live[wf] = live
    try:
        return await _drive_step(wf, live)
    except StepConflict:
        # Another execution of this workflow settled the step first (DBOS recovered it while this one still
        # ran): its settle stands.
        _live.pop(wf, None)
        snapshot = await rt.store.load_session(session_id)
        done = None if snapshot is None else await _own_settle(holder, snapshot, next_seq, decisions, decided_at)
        if done is None:
            raise
        return done


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
        # Interrupted (a crash, or a worker that stopped): continue the leg from the log, holding the run.
        agent = rt.agent(request["agent"])
        holder = _holder(rt, wf)
        leg = await holder.open_leg(agent, "retry", session_id=request["session_id"])
        leg.lease = await _hold(holder, snapshot)
        live = _Live(run_id, holder.drive_leased(leg))
        _live[wf] = live
    try:
        return await _drive_step(wf, live)
    except StepConflict:
        # Another executor committed this step first (it was recovered while we still ran it): theirs stands.
        _live.pop(wf, None)
        snapshot = await rt.store.load_session(request["session_id"])
        done = None if snapshot is None else _outcome_if_done(snapshot, run_id, step)
        if done is None:
            raise
        return done


async def _drive_step(wf: str, live: _Live) -> dict[str, Any]:
    """Drive the leg to its next commit and return that step's outcome; a step that ends or suspends the run is
    followed at once by ``RunFinished``, which is taken in the same DBOS step."""
    try:
        async for event in live.events:
            if isinstance(event, RunFinished):
                _live.pop(wf, None)
                return _outcome(live.run_id, event.step, event.result.status)
            if isinstance(event, StepCommitted) and not _ends_leg(event.decision):
                return _outcome(live.run_id, event.step, RunStatus.RUNNING)
    except BaseException:
        _live.pop(wf, None)
        raise
    _live.pop(wf, None)
    raise StopwiseError("the run leg ended without finishing")  # pragma: no cover - drive always finishes


def _ends_leg(decision: Any) -> bool:
    return bool(getattr(decision, "ends_run", False)) or getattr(decision, "action", None) is Action.SUSPEND


def _keep_suspended(leg: Leg) -> None:
    """Until its settle commits, a resumed leg's run is still suspended: a leg cancelled before that (a worker
    shutting down mid-settle) then leaves the record suspended, for its recovered workflow to settle, rather
    than recording the run cancelled."""
    leg.run = apply_decision(leg.run, StopDecision(Action.SUSPEND, CompletionReason.AWAITING_APPROVAL))


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


async def _find_run(store: Store, snapshot: SessionSnapshot, run_id: str) -> RunRecord | None:
    if snapshot.last_run is not None and snapshot.last_run.run_id == run_id:
        return snapshot.last_run
    return next((r for r in await store.list_runs(snapshot.session_id) if r.run_id == run_id), None)


def _outcome_of(snapshot: SessionSnapshot, run: RunRecord) -> dict[str, Any]:
    last = snapshot.last_run
    if last is not None and last.run_id == run.run_id:
        return _outcome_from_log(snapshot, run.run_id, 0)
    return _outcome(run.run_id, run.steps, run.status)  # it ended, and the session moved on


def _entry_at(snapshot: SessionSnapshot, seq: int) -> LogEntry:
    return next(e for e in snapshot.entries if e.seq == seq)


def _holder(rt: DBOSRuntime, workflow_id: str) -> Runner:
    """The runner that holds a run's lease for the workflow ``workflow_id`` (its owner, the runtime's lease)."""
    return Runner(rt.store, clock=rt.clock, owner=lease_owner(workflow_id), lease_seconds=rt.lease_seconds)


async def _hold(holder: Runner, snapshot: SessionSnapshot) -> Lease:
    """Take the session's last run for ``holder``'s workflow before anything of the leg runs. The workflow takes
    its own lease over (it took it at submission, or an earlier execution of it crashed, or DBOS recovered it
    elsewhere): the lease is renewed. Otherwise the run is claimed as of ``snapshot`` (``Store.claim``):
    ``RunLeased`` while another owner's lease is live, ``StepConflict`` when the run moved on since."""
    last = snapshot.last_run
    assert last is not None, "a leg is opened on a session with a run"
    lease = Lease(last.run_id, holder.owner, holder.clock() + holder.lease_seconds)
    if not await holder.store.renew(lease):
        await holder.store.claim(last, snapshot.next_seq - 1, lease, holder.clock())
    return lease


def _is_fork(record: object) -> bool:
    """Whether a record's data is a fork's note (a damaged record is not: it is read, and named, where it is)."""
    return isinstance(record, Mapping) and record.get("type") == ForkRecord.TYPE


async def _own_settle(
    holder: Runner,
    snapshot: SessionSnapshot,
    seq: int,
    decisions: Mapping[str, ApprovalDecision],
    decided_at: float,
) -> dict[str, Any] | None:
    """The outcome of the settle committed from ``seq`` on when ``holder``'s workflow made it (an execution of it
    committed the settle, then died before DBOS recorded the step); None when there is no settle. Its own settle
    is told by its decisions' records, dated with its ``decided_at``, or (a settle of client results only, which
    records no decision) by the run's lease, which the workflow still holds. A settle it did not make (another
    resume of the same suspension won, with any decisions or results) is refused with ``ApprovalError``:
    nothing of this resume ran."""
    entry = next((e for e in snapshot.entries if e.seq >= seq and e.kind is EntryKind.SETTLE), None)
    if entry is None:
        return None
    # Its approval records only: its guardian decisions may name a config an earlier entry holds.
    approvals = tuple(d for d in entry.records if isinstance(d, Mapping) and d.get("type") == ApprovalRecord.TYPE)
    made = {r.call_id: r for r in parse_entry(replace(entry, records=approvals)) if isinstance(r, ApprovalRecord)}
    dated = (
        bool(made)
        and set(made) == set(decisions)
        and all(made[c].decided_at == decided_at and made[c].matches(d) for c, d in decisions.items())
    )
    if not dated:
        lease = Lease(entry.run_id, holder.owner, holder.clock() + holder.lease_seconds)
        if not await holder.store.renew(lease):
            raise ApprovalError(
                f"session {snapshot.session_id!r}: run {entry.run_id} was resumed by another submission while "
                "this one waited; nothing of this one ran"
            )
    return _outcome_from_log(snapshot, entry.run_id, entry.step)


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
    # An intent is not a committed step: the step commits with its results.
    done = (EntryKind.STEP, EntryKind.SETTLE)
    committed = max((e.step for e in snapshot.entries if e.run_id == run_id and e.kind in done), default=0)
    last = snapshot.last_run
    status = last.status if last is not None and last.run_id == run_id else RunStatus.RUNNING
    return _outcome(run_id, committed, status)
