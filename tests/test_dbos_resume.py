"""Resume on the DBOS runtime: a run suspended for approval in one worker (process) is settled and continued as
a DBOS workflow from another, with ``Runner.resume``'s refusals, and its settle commits exactly once through
crashes (SIGKILL) before and after it commits.

On SQLite (development: two runtimes one after the other in this process, on the same files) and on
PostgreSQL (worker processes, killed and restarted as a supervisor would).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from _fleet import AGENTS, APP_VERSION, ASKER, PAYER, Fleet, dbos_url, submit, wait_all
from _pgcluster import Server
from stopwise import SQLiteStore
from stopwise.approvals import ApprovalError, Approve, Modify, Reject, Terminate
from stopwise.store.base import EntryKind

pytest.importorskip("dbos")

from stopwise.runtime.dbos import (
    DBOSRuntime,
    RunHandle,
    decisions_from_data,
    decisions_to_data,
    request_for,
    request_for_resume,
)


@asynccontextmanager
async def _dev_runtime(folder: Path, executor_id: str) -> AsyncIterator[DBOSRuntime]:
    """A DBOS runtime on SQLite files in ``folder`` (the same files each time: a fresh runtime, same data)."""
    from dbos import DBOS

    DBOS(
        config={
            "name": "stopwise-resume",
            "system_database_url": f"sqlite:///{folder / 'dbos.sqlite'}",
            "executor_id": executor_id,
            "application_version": APP_VERSION,
            "log_level": "WARNING",
        }
    )
    store = SQLiteStore(folder / "log.db")
    runtime = DBOSRuntime(store, list(AGENTS.values()), polling_interval=0.05)
    try:
        await runtime.launch()
        yield runtime
    finally:
        DBOS.destroy()
        await store.close()


def _payments(folder: Path) -> list[str]:
    path = folder / "payments"
    return path.read_text().splitlines() if path.exists() else []


async def _step_names(workflow_id: str) -> list[str]:
    from dbos import DBOS

    return [s["function_name"] for s in await DBOS.list_workflow_steps_async(workflow_id)]


def test_decisions_round_trip_as_json_data() -> None:
    decisions = {
        "a": Approve(),
        "b": Approve(args_hash="h"),
        "c": Reject("no"),
        "d": Modify({"to": "bob", "amount": 1}, args_hash="h"),
        "e": Terminate("stop"),
        "f": Reject("over budget", reviewer="ana"),
    }
    data = decisions_to_data(decisions)
    assert data["f"]["reviewer"] == "ana" and "reviewer" not in data["a"]
    assert data["d"] == {"decision": "modify", "args": {"to": "bob", "amount": 1}, "args_hash": "h"}
    assert decisions_from_data(data) == decisions
    with pytest.raises(ApprovalError, match="must be Approve, Reject, Modify or Terminate"):
        decisions_to_data({"a": "yes"})  # type: ignore[dict-item]
    with pytest.raises(ApprovalError, match="unknown kind"):
        decisions_from_data({"a": {"decision": "maybe"}})


@pytest.mark.slow
async def test_sqlite_run_suspended_in_one_runtime_is_resumed_from_a_fresh_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FLEET_READY_DIR", str(tmp_path))
    jobs = {"approve": "pay bob 50", "modify": "pay ann 80", "reject": "pay eve 70", "terminate": "pay tom 90"}
    async with _dev_runtime(tmp_path, "dev-a") as first:
        for session, job in [*jobs.items(), ("expire", "wire bob 10")]:
            handle = await first.enqueue(PAYER, job, session_id=session, workflow_id=f"run-{session}")
            suspended = await first.result(handle)
            assert suspended.status == "suspended" and suspended.completion_reason == "awaiting_approval"
            assert suspended.run_id == handle.workflow_id  # a new run is named after its workflow
            assert [p.call_id for p in suspended.pending] == ["c1"]
            assert await _step_names(handle.workflow_id) == ["stopwise.begin", "stopwise.advance"]
    assert _payments(tmp_path) == []
    pending_hash = suspended.pending[0].args_hash

    async with _dev_runtime(tmp_path, "dev-b") as second:
        from dbos import DBOS

        submitted = len(await DBOS.list_workflows_async())
        refusals: list[tuple[str, dict[str, Any], str]] = [
            ("approve", {"c9": Approve()}, "no pending call with id c9"),
            ("approve", {}, "no decision given; pending: c1"),
            ("approve", {"c1": Approve(args_hash=pending_hash)}, "the arguments changed"),
            ("expire", {"c1": Approve()}, "the approval expired"),
            ("nobody", {"c1": Approve()}, "has no run to continue"),
        ]
        for session, decisions, message in refusals:
            with pytest.raises(ApprovalError, match=message):
                await second.resume(PAYER, session, decisions)
        assert len(await DBOS.list_workflows_async()) == submitted  # refused before anything was submitted

        record = await second.store.get_run("run-approve")
        assert record is not None
        approve_hash = record.report["pending"][0]["args_hash"]
        handle = await second.enqueue_resume(PAYER, "approve", {"c1": Approve(args_hash=approve_hash)})
        done = await second.result(handle)
        assert done.status == "completed" and done.run_id == "run-approve" and done.steps == 2
        assert done.output == "settled: paid 50 to bob" and done.state["paid"] == 50
        assert _payments(tmp_path) == ["start approve bob 50", "done approve bob 50"]
        assert await _step_names(handle.workflow_id) == ["stopwise.probe", "stopwise.settle", "stopwise.advance"]
        with pytest.raises(ApprovalError, match="is completed, not suspended"):
            await second.resume(PAYER, "approve", {"c1": Approve()})

        modified = await second.resume(PAYER, "modify", {"c1": Modify({"to": "ann", "amount": 8})})
        assert modified.status == "completed" and modified.state["paid"] == 8
        assert _payments(tmp_path)[-1] == "done modify ann 8"

        rejected = await second.resume(PAYER, "reject", {"c1": Reject("Not today.")})
        assert rejected.status == "completed" and "Rejected by the reviewer: Not today." in rejected.output
        assert "paid" not in rejected.state

        terminated = await second.resume(PAYER, "terminate", {"c1": Terminate("Fraud.")})
        assert terminated.status == "cancelled" and terminated.steps == 1
        assert "paid" not in terminated.state
        assert not any("eve" in p or "tom" in p for p in _payments(tmp_path))

        entries = (await second.store.load_session("approve")).entries  # type: ignore[union-attr]
        assert [(e.kind, e.step) for e in entries] == [
            (EntryKind.INPUT, 0),
            (EntryKind.STEP, 1),
            (EntryKind.NOTE, 1),  # the approval, written ahead of the call it runs (a ``ResumeIntent``)
            (EntryKind.SETTLE, 1),
            (EntryKind.STEP, 2),
        ]


@pytest.mark.slow
async def test_sqlite_a_resume_refused_inside_its_workflow_raises_from_result(tmp_path: Path) -> None:
    """Submitted with ``request_for_resume`` (as a ``DBOSClient`` would), nothing is checked before the workflow:
    its settle refuses, and ``result`` raises the refusal. A settle found in the log is returned as done only to
    the workflow that made it (its decisions, dated when it was submitted): another resume's settle, with other
    decisions or the same ones, is refused."""
    from dbos import DBOS, SetWorkflowID

    from stopwise.runtime import dbos as sw_dbos

    async with _dev_runtime(tmp_path, "dev-a") as runtime:
        await runtime.run(PAYER, "pay bob 50", session_id="s")
        with SetWorkflowID("bad-resume"):
            await DBOS.enqueue_workflow_async(
                runtime.queue,
                sw_dbos._run_workflow,
                request_for_resume(PAYER.name, "s", {"c1": Reject(), "c2": Approve()}),
            )
        with pytest.raises(ApprovalError, match="no pending call with id c2"):
            await runtime.result(RunHandle("bad-resume", "s"))

        handle = await runtime.enqueue_resume(PAYER, "s", {"c1": Approve()}, workflow_id="good-resume")
        await runtime.result(handle)
        snapshot = await runtime.store.load_session("s")
        assert snapshot is not None
        settle = next(e for e in snapshot.entries if e.kind is EntryKind.SETTLE)
        (decided_at,) = {r["decided_at"] for r in settle.records if r.get("type") == "approval_decision"}
        ours, other = sw_dbos._holder(runtime, "good-resume"), sw_dbos._holder(runtime, "other-resume")
        assert await sw_dbos._own_settle(ours, snapshot, settle.seq, {"c1": Approve()}, decided_at) is not None
        for decisions in ({"c1": Approve()}, {"c1": Reject()}):
            with pytest.raises(ApprovalError, match="resumed by another submission"):
                await sw_dbos._own_settle(other, snapshot, settle.seq, decisions, decided_at + 1)


@pytest.mark.slow
async def test_sqlite_two_resumes_carrying_only_client_results_settle_once_and_the_other_is_refused(
    tmp_path: Path,
) -> None:
    """A settle of client results records no decision: the second resume used to be handed the first one's
    outcome as its own. Whichever settles, the other workflow is refused (the run's lease, or the settle it
    finds in the log is not its own), and the run is settled once."""
    from dbos import DBOS, SetWorkflowID

    from stopwise.errors import RunLeased
    from stopwise.runtime import dbos as sw_dbos

    async with _dev_runtime(tmp_path, "dev-a") as runtime:
        assert (await runtime.run(ASKER, "plan a trip", session_id="s")).status == "suspended"
        for wf in ("answer-1", "answer-2"):
            with SetWorkflowID(wf):
                request = request_for_resume(ASKER.name, "s", {}, results={"c1": "Oslo"})
                await DBOS.enqueue_workflow_async(runtime.queue, sw_dbos._run_workflow, request)
        outcomes: dict[str, str] = {}
        for wf in ("answer-1", "answer-2"):
            try:
                outcomes[wf] = (await runtime.result(RunHandle(wf, "s"))).output or ""
            except (ApprovalError, RunLeased) as exc:
                outcomes[wf] = type(exc).__name__
        assert sorted(outcomes.values())[1] == "answer: Oslo", outcomes
        assert sorted(outcomes.values())[0] in ("ApprovalError", "RunLeased"), outcomes
        snapshot = await runtime.store.load_session("s")
        assert snapshot is not None
        (settle,) = [e for e in snapshot.entries if e.kind is EntryKind.SETTLE]

        # The settle as a resume that probed before it committed finds it: not its own, so refused.
        other = sw_dbos._holder(runtime, "answer-3")
        with pytest.raises(ApprovalError, match="resumed by another submission"):
            await sw_dbos._own_settle(other, snapshot, settle.seq, {}, 0.0)


@pytest.fixture
def fleet(pg_server: Server, tmp_path: Path) -> Iterator[Fleet]:
    pytest.importorskip("psycopg")
    f = Fleet(pg_server.new_database("resume"), tmp_path)
    yield f
    f.stop()


def _load(dsn: str, session_id: str) -> Any:
    from stopwise.store.postgres import PostgresStore

    async def load() -> Any:
        async with PostgresStore(dsn) as store:
            return await store.load_session(session_id), await store.list_runs(session_id)

    return asyncio.run(load())


@pytest.mark.slow
def test_postgres_run_suspended_in_one_worker_is_resumed_from_another_process(fleet: Fleet) -> None:
    from dbos import DBOSClient

    worker = fleet.start("worker-a")
    client = DBOSClient(system_database_url=dbos_url(fleet.dsn))
    try:
        submit(client, "pay-p", request_for(PAYER.name, "pay bob 50", session_id="p"))
        assert wait_all(client, ["pay-p"], 30) == {"pay-p": "SUCCESS"}
    finally:
        client.destroy()
    _, runs = _load(fleet.dsn, "p")
    assert [(r.run_id, r.status) for r in runs] == [("pay-p", "suspended")]
    worker.kill()  # the worker that suspended the run is gone; another process resumes it
    worker.wait()

    result = fleet.resume("worker-c", "p", decisions_to_data({"c1": Approve()}))
    assert result == {"status": "completed", "output": "settled: paid 50 to bob", "steps": 2}
    assert fleet.payments() == ["start p bob 50", "done p bob 50"]
    refused = fleet.resume("worker-c", "p", decisions_to_data({"c1": Approve()}))
    assert refused["error"] == "ApprovalError" and "not suspended" in refused["message"]
    snapshot, runs = _load(fleet.dsn, "p")
    assert [(r.run_id, r.status) for r in runs] == [("pay-p", "completed")]
    assert dict(snapshot.state) == {"paid": 50}


@pytest.mark.slow
def test_postgres_kills_after_the_start_inside_the_approved_tool_and_after_the_settle_pay_once(fleet: Fleet) -> None:
    """A run's start commits and its worker dies before DBOS records it; recovered, the run is not started twice
    and suspends. Its resume dies inside the approved tool (before the settle commits): recovered, the tool runs
    again and the settle commits; the worker dies right after that commit: recovered, the settle is found in
    the log and not run again (the restarted worker would die if the tool were called), and the run completes."""
    from dbos import DBOSClient

    client = DBOSClient(system_database_url=dbos_url(fleet.dsn))
    try:
        worker = fleet.start("worker-a", kill="start_run")
        submit(client, "run-k", request_for(PAYER.name, "pay bob 50", session_id="k"))
        assert worker.wait(30) == -9
        _, runs = _load(fleet.dsn, "k")
        assert [(r.run_id, r.status) for r in runs] == [("run-k", "running")]

        worker = fleet.start("worker-a", kill="pay")  # recovers the run: it suspends
        assert wait_all(client, ["run-k"], 30) == {"run-k": "SUCCESS"}
        submit(client, "resume-k", request_for_resume(PAYER.name, "k", {"c1": Approve()}))
        assert worker.wait(30) == -9
        assert fleet.payments() == ["start k bob 50"]

        worker = fleet.start("worker-a", kill="settle")  # recovers the resume: the tool runs, the settle commits
        assert worker.wait(30) == -9
        assert fleet.payments() == ["start k bob 50", "start k bob 50", "done k bob 50"]

        fleet.start("worker-a", kill="pay")  # recovers the resume again: the settle is in the log
        assert wait_all(client, ["run-k", "resume-k"], 30) == {"run-k": "SUCCESS", "resume-k": "SUCCESS"}
        assert [s["function_name"] for s in client.list_workflow_steps("run-k")] == [
            "stopwise.begin",
            "stopwise.advance",
        ]
        assert [s["function_name"] for s in client.list_workflow_steps("resume-k")] == [
            "stopwise.probe",
            "stopwise.settle",
            "stopwise.advance",
        ]
    finally:
        client.destroy()
    assert fleet.payments() == ["start k bob 50", "start k bob 50", "done k bob 50"]
    snapshot, runs = _load(fleet.dsn, "k")
    assert [(r.run_id, r.status, r.steps) for r in runs] == [("run-k", "completed", 2)]
    assert [(e.kind, e.step) for e in snapshot.entries] == [
        (EntryKind.INPUT, 0),
        (EntryKind.STEP, 1),
        (EntryKind.NOTE, 1),  # the approval, written ahead of the call once, however often the settle step ran
        (EntryKind.SETTLE, 1),
        (EntryKind.STEP, 2),
    ]
    assert dict(snapshot.state) == {"paid": 50}
    assert runs[0].output == "settled: paid 50 to bob"


async def test_a_resumed_leg_cancelled_before_its_settle_commits_leaves_the_run_suspended(tmp_path: Path) -> None:
    """A worker that shuts down mid-settle cancels the leg: the run must stay suspended (not be recorded
    cancelled), so that the recovered workflow can still settle it."""
    from stopwise import Agent, FunctionModel, Reply, Runner, ToolCall, tool
    from stopwise._loop import drive
    from stopwise.models import ModelRequest
    from stopwise.runtime import dbos as sw_dbos

    entered, release = asyncio.Event(), asyncio.Event()

    @tool(needs_approval=True)
    async def slow(x: int) -> str:
        """Takes its time."""
        entered.set()
        await release.wait()
        return "ok"

    def model(request: ModelRequest) -> Reply:
        if any(m.role == "tool" for m in request.messages):
            return Reply("done")
        return Reply(tool_calls=[ToolCall("slow", {"x": 1}, id="c1")])

    agent = Agent("slowpoke", "", FunctionModel(model), tools=[slow])
    store = SQLiteStore(tmp_path / "log.db")
    runner = Runner(store)
    try:
        assert (await runner.run(agent, "go", session_id="s")).status == "suspended"
        leg = await runner.open_leg(agent, "resume", session_id="s", decisions={"c1": Approve()})
        sw_dbos._keep_suspended(leg)

        async def settle() -> None:
            async for _ in drive(leg):
                pass

        task = asyncio.create_task(settle())
        await entered.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        record = await store.get_run((await store.list_runs("s"))[0].run_id)
        assert record is not None and record.status == "suspended" and record.report["pending"]
        release.set()
        assert (await runner.resume(agent, "s", {"c1": Approve()})).status == "completed"
    finally:
        await store.close()
