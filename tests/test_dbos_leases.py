"""Leases and claims on the DBOS runtime, across real processes on PostgreSQL: a run is driven by one holder at a
time, whether DBOS workflows, local ``Runner``s or both drive it.

Each race starts worker and submitter processes (``tests/_fleet.py``) against one database. The race's effect
(``pay``, ``remit``, ``charge``) notes that it started and then holds until the test opens a gate, so the loser
is decided while the winner is inside the call: the outcomes do not depend on timing.
"""

from __future__ import annotations

import asyncio
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from _fleet import CHARGER, PAYER, Fleet, dbos_url, submit, wait_all
from _pgcluster import Server
from stopwise.approvals import Approve
from stopwise.errors import RunLeased
from stopwise.store.base import EntryKind

pytest.importorskip("dbos")
pytest.importorskip("psycopg")

from stopwise.runtime.dbos import decisions_to_data, lease_owner, request_for, request_for_resume

APPROVE = decisions_to_data({"c1": Approve()})
LEASE = 300.0  # DBOSRuntime's default, which the fleet's processes use
_WAIT = 60.0


@pytest.fixture
def fleet(pg_server: Server, tmp_path: Path) -> Iterator[Fleet]:
    f = Fleet(pg_server.new_database("leases"), tmp_path)
    f.hold()  # every process started from here holds inside the effect until the test opens the gate
    yield f
    f.stop()


@pytest.fixture
def client(fleet: Fleet) -> Iterator[Any]:
    from dbos import DBOSClient

    c = DBOSClient(system_database_url=dbos_url(fleet.dsn))
    yield c
    c.destroy()


def _suspend(client: Any, session_id: str, job: str) -> None:
    """A run of the payer suspended for approval of its one call, ``c1``."""
    submit(client, f"run-{session_id}", request_for(PAYER.name, job, session_id=session_id))
    assert wait_all(client, [f"run-{session_id}"], _WAIT) == {f"run-{session_id}": "SUCCESS"}


def _first_to_end(*procs: subprocess.Popen[str]) -> tuple[subprocess.Popen[str], subprocess.Popen[str]]:
    """The process that exits first while the other is held at the gate, then the other."""
    deadline = time.monotonic() + _WAIT
    while all(p.poll() is None for p in procs):
        assert time.monotonic() < deadline, "neither process ended"
        time.sleep(0.05)
    ended = next(p for p in procs if p.poll() is not None)
    return ended, next(p for p in procs if p is not ended)


def _ended_workflow(client: Any, ids: list[str]) -> Any:
    """The first of ``ids`` to end (its DBOS status), while the others are held at the gate."""
    deadline = time.monotonic() + _WAIT
    while True:
        ended = [w for w in client.list_workflows(workflow_ids=ids) if w.status not in ("PENDING", "ENQUEUED")]
        if ended:
            return ended[0]
        assert time.monotonic() < deadline, "no workflow ended"
        time.sleep(0.05)


def _log(dsn: str, session_id: str) -> tuple[list[tuple[EntryKind, int]], Any]:
    from stopwise.store.postgres import PostgresStore

    async def load() -> tuple[list[tuple[EntryKind, int]], Any]:
        async with PostgresStore(dsn) as store:
            snapshot = await store.load_session(session_id)
            assert snapshot is not None and snapshot.last_run is not None
            return [(e.kind, e.step) for e in snapshot.entries], snapshot.last_run

    return asyncio.run(load())


def _assert_leased(outcome: dict[str, Any], owner: str, before: float) -> None:
    assert outcome["error"] == "RunLeased" and outcome["owner"] == owner, outcome
    assert before + LEASE - 30 < outcome["until"] < time.time() + LEASE + 5, "it says until when the lease holds"


@pytest.mark.slow
def test_two_dbos_resumes_of_one_approval_at_once_run_the_approved_call_once(fleet: Fleet, client: Any) -> None:
    fleet.start("worker-a")
    _suspend(client, "p", "pay bob 50")
    before = time.time()
    clicks = [fleet.act(name, "dbos-resume", "payer", "p", APPROVE) for name in ("click", "double-click")]
    loser, winner = _first_to_end(*clicks)  # refused at submission, while the winner's workflow holds the run
    outcome = fleet.outcome(loser)
    assert outcome["error"] == "RunLeased" and outcome["owner"].startswith(lease_owner("stopwise-")), outcome
    _assert_leased(outcome, outcome["owner"], before)
    assert fleet.wait_payments(1) == ["start p bob 50"]

    fleet.open_gate()
    assert fleet.outcome(winner) == {"status": "completed", "output": "settled: paid 50 to bob", "steps": 2}
    assert fleet.payments() == ["start p bob 50", "done p bob 50"]
    entries, run = _log(fleet.dsn, "p")
    assert [k for k, _ in entries].count(EntryKind.SETTLE) == 1 and run.status == "completed"


@pytest.mark.slow
def test_two_resumes_submitted_by_a_dbos_client_at_once_settle_once_the_other_workflow_fails_before_any_effect(
    fleet: Fleet, client: Any
) -> None:
    """Submitted with ``request_for_resume`` nothing is claimed before the workflows run: the claim is made by
    the settle step, before the approved call."""
    fleet.start("worker-a")
    _suspend(client, "p", "pay bob 50")
    for wf in ("resume-1", "resume-2"):
        submit(client, wf, request_for_resume(PAYER.name, "p", {"c1": Approve()}))
    assert fleet.wait_payments(1) == ["start p bob 50"]
    loser = _ended_workflow(client, ["resume-1", "resume-2"])
    winner = "resume-2" if loser.workflow_id == "resume-1" else "resume-1"
    assert loser.status == "ERROR", loser.error
    with pytest.raises(RunLeased) as refused:  # the workflow's error, as DBOS recorded it
        client.retrieve_workflow(loser.workflow_id).get_result()
    assert refused.value.owner == lease_owner(winner)
    assert fleet.payments() == ["start p bob 50"], "the loser ran nothing"

    fleet.open_gate()
    assert wait_all(client, [winner], _WAIT) == {winner: "SUCCESS"}
    assert fleet.payments() == ["start p bob 50", "done p bob 50"]
    _, settle = client.list_workflow_steps(loser.workflow_id)  # its settle refused: the claim came first
    assert settle["function_name"] == "stopwise.settle" and isinstance(settle["error"], RunLeased)


@pytest.mark.slow
def test_a_dbos_resume_while_a_local_resume_runs_the_approved_call_is_refused_naming_the_local_runner(
    fleet: Fleet, client: Any
) -> None:
    fleet.start("worker-a")
    _suspend(client, "p", "pay bob 50")
    local = fleet.act("local-reviewer", "local-resume", "payer", "p", APPROVE)
    assert fleet.wait_payments(1) == ["start p bob 50"]  # inside the approved call: the run is claimed
    before = time.time()
    _assert_leased(
        fleet.outcome(fleet.act("dbos-reviewer", "dbos-resume", "payer", "p", APPROVE)), "local-reviewer", before
    )

    fleet.open_gate()
    assert fleet.outcome(local) == {"status": "completed", "output": "settled: paid 50 to bob", "steps": 2}
    assert fleet.payments() == ["start p bob 50", "done p bob 50"]


@pytest.mark.slow
def test_a_local_resume_or_expiry_while_a_dbos_resume_runs_the_approved_call_is_refused_naming_its_workflow(
    fleet: Fleet, client: Any
) -> None:
    fleet.start("worker-a")
    _suspend(client, "q", "remit bob 50")
    dbos = fleet.act("dbos-reviewer", "dbos-resume", "payer", "q", APPROVE)
    assert fleet.wait_payments(1) == ["start q bob 50"]  # the resume's workflow is inside the approved call
    (resume,) = [w for w in client.list_workflows() if w.workflow_id.startswith("stopwise-")]
    before = time.time()
    for action in ("local-resume", "local-expire"):
        _assert_leased(
            fleet.outcome(fleet.act("local", action, "payer", "q", APPROVE)), lease_owner(resume.workflow_id), before
        )

    fleet.open_gate()
    assert fleet.outcome(dbos) == {"status": "completed", "output": "settled: remitted 50 to bob", "steps": 2}
    assert fleet.payments() == ["start q bob 50", "done q bob 50"]


@pytest.mark.slow
def test_a_retry_of_a_run_live_in_a_dbos_workflow_is_refused_naming_the_workflow_and_the_run_finishes_alone(
    fleet: Fleet, client: Any
) -> None:
    fleet.start("worker-a")
    submit(client, "run-c", request_for(CHARGER.name, "charge bob 50", session_id="c"))
    assert fleet.wait_payments(1) == ["start c bob 50"]  # the run is live, inside its tool call
    before = time.time()
    for action in ("dbos-retry", "local-retry"):
        _assert_leased(fleet.outcome(fleet.act("intruder", action, "charger", "c")), lease_owner("run-c"), before)
    assert [w.workflow_id for w in client.list_workflows()] == ["run-c"], "the refused retry submitted nothing"

    fleet.open_gate()
    assert wait_all(client, ["run-c"], _WAIT) == {"run-c": "SUCCESS"}
    assert fleet.payments() == ["start c bob 50", "done c bob 50"]
    entries, run = _log(fleet.dsn, "c")
    assert entries == [(EntryKind.INPUT, 0), (EntryKind.INTENT, 1), (EntryKind.SETTLE, 1), (EntryKind.STEP, 2)]
    assert run.status == "completed"


@pytest.mark.slow
def test_a_crashed_workflow_keeps_its_run_from_retries_and_dbos_recovery_takes_its_lease_over_at_once(
    fleet: Fleet, client: Any
) -> None:
    """The lease's owner is the workflow: the crashed worker's lease refuses a retry, and the same workflow,
    recovered by a restarted executor, continues the run without waiting for the lease to lapse."""
    fleet.open_gate()
    worker = fleet.start("worker-a", kill="pay")  # dies inside the first charge, mid-step
    submit(client, "run-k", request_for(CHARGER.name, "charge bob 50", session_id="k"))
    assert worker.wait(_WAIT) == -9
    before = time.time()
    refused = fleet.outcome(fleet.act("intruder", "dbos-retry", "charger", "k"))
    _assert_leased(refused, lease_owner("run-k"), before - LEASE)  # taken before the crash

    fleet.start("worker-a")  # the same executor id: DBOS recovers run-k
    assert wait_all(client, ["run-k"], _WAIT) == {"run-k": "SUCCESS"}
    # The crashed step never committed, so its call runs again: the crash case, not a race.
    assert fleet.payments() == ["start k bob 50", "start k bob 50", "done k bob 50"]
    steps = [s["function_name"] for s in client.list_workflow_steps("run-k")]
    assert steps == ["stopwise.begin", "stopwise.advance", "stopwise.advance"]
    entries, run = _log(fleet.dsn, "k")
    assert entries == [(EntryKind.INPUT, 0), (EntryKind.INTENT, 1), (EntryKind.SETTLE, 1), (EntryKind.STEP, 2)]
    assert run.status == "completed"


@pytest.mark.slow
def test_a_dbos_retry_of_a_crashed_run_continues_it_once_the_crashed_workflows_lease_lapsed(
    fleet: Fleet, client: Any
) -> None:
    """The crash case without DBOS's recovery (the dead executor is never restarted): once the lease lapsed (a
    clock passed to the runtime), ``DBOSRuntime.retry`` takes the run and its workflow continues it."""
    fleet.open_gate()
    worker = fleet.start("worker-a", kill="pay")
    submit(client, "run-k", request_for(CHARGER.name, "charge bob 50", session_id="k"))
    assert worker.wait(_WAIT) == -9
    fleet.start("worker-b")
    early = fleet.outcome(fleet.act("early", "dbos-retry", "charger", "k"))
    assert early["error"] == "RunLeased" and early["owner"] == lease_owner("run-k"), early
    later = fleet.outcome(fleet.act("later", "dbos-retry", "charger", "k", clock_offset=LEASE + 1))
    assert later == {"status": "completed", "output": "settled: charged 50 to bob", "steps": 2}
    assert fleet.payments() == ["start k bob 50", "start k bob 50", "done k bob 50"]
    entries, run = _log(fleet.dsn, "k")
    assert entries == [(EntryKind.INPUT, 0), (EntryKind.INTENT, 1), (EntryKind.SETTLE, 1), (EntryKind.STEP, 2)]
    assert run.status == "completed"
