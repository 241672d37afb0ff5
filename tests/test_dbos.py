"""DBOS runtime: runs are DBOS workflows on a queue shared by worker processes over one PostgreSQL.

The fault test: two workers take 50 runs from the queue; one is killed with SIGKILL inside a tool call (mid-run,
mid-step); it is restarted with the same executor id, as a supervisor would, and DBOS recovers its pending
workflows. Every run then completes exactly once, with no step lost or duplicated, and each transcript equals
an uninterrupted execution's.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from _fleet import AGENT, APP_VERSION, QUEUE, Fleet, dbos_url, wait_all
from _pgcluster import Server
from stopwise import Message, Runner
from stopwise.store.base import EntryKind

pytest.importorskip("dbos")
pytest.importorskip("psycopg")

RUNS = 50


def _shape(messages: tuple[Message, ...] | list[Message]) -> list[tuple[Any, ...]]:
    return [(m.role, m.content, m.tool_calls, m.tool_call_id, dict(m.metadata)) for m in messages]


@pytest.fixture
def fleet(pg_server: Server, tmp_path: Path) -> Iterator[Fleet]:
    f = Fleet(pg_server.new_database("fleet"), tmp_path)
    yield f
    f.stop()


@pytest.mark.slow
def test_two_workers_50_runs_one_killed_mid_run_every_run_completes_exactly_once(fleet: Fleet) -> None:
    from dbos import DBOSClient

    from stopwise.runtime.dbos import WORKFLOW_NAME, request_for
    from stopwise.store.postgres import PostgresStore

    reference = {
        i: asyncio.run(Runner().run(AGENT, f"job {i}", session_id=f"s{i}", state={"total": 0})) for i in range(RUNS)
    }
    assert all(r.status == "completed" and r.steps == 6 for r in reference.values())

    fleet.start("worker-a")
    victim = fleet.start("worker-b", kill_at=25)  # dies inside its 25th tool call
    client = DBOSClient(system_database_url=dbos_url(fleet.dsn))
    try:
        ids = [f"run-{i}" for i in range(RUNS)]
        for i, wf in enumerate(ids):
            options = {
                "workflow_name": WORKFLOW_NAME,
                "queue_name": QUEUE,
                "workflow_id": wf,
                "app_version": APP_VERSION,
            }
            client.enqueue(options, request_for(AGENT.name, f"job {i}", session_id=f"s{i}", state={"total": 0}))  # type: ignore[arg-type]
        assert victim.wait(60) == -9
        fleet.start("worker-b")  # restarted with the same executor id: DBOS recovers its pending workflows
        statuses = wait_all(client, ids, 120)
        assert set(statuses.values()) == {"SUCCESS"}, statuses
        # Which executor finished a run depends on who dequeued it after the recovery; both took part.
        assert {w.executor_id for w in client.list_workflows(workflow_ids=ids)} <= {"worker-a", "worker-b"}
        for wf in ids:  # one DBOS step per stopwise step, each step once
            steps = client.list_workflow_steps(wf)
            names = [s["function_name"] for s in steps]
            assert names == ["stopwise.begin"] + ["stopwise.advance"] * 6, (wf, names)
            assert [s["output"]["step"] for s in steps[1:]] == [1, 2, 3, 4, 5, 6]
    finally:
        client.destroy()

    rebuilt = {line for f in fleet.ready.glob("rebuilt-*") for line in f.read_text().split()}
    assert rebuilt, "no run was recovered from the log after the kill"

    async def check() -> None:
        async with PostgresStore(fleet.dsn) as store:
            for i in range(RUNS):
                snapshot = await store.load_session(f"s{i}")
                assert snapshot is not None
                runs = await store.list_runs(f"s{i}")
                assert len(runs) == 1 and runs[0].status == "completed", f"run {i}: {runs}"
                assert runs[0].run_id == f"run-{i}"  # a new run is named after its workflow
                assert [e.seq for e in snapshot.entries] == list(range(1, len(snapshot.entries) + 1))
                steps = [e.step for e in snapshot.entries if e.kind in (EntryKind.STEP, EntryKind.SETTLE)]
                assert steps == [1, 2, 3, 4, 5, 6], f"run {i}: a step was lost or duplicated: {steps}"
                assert _shape(snapshot.messages()) == _shape(reference[i].messages), f"run {i}: transcript differs"
                assert dict(snapshot.state) == dict(reference[i].state)
                assert runs[0].output == reference[i].output and runs[0].steps == 6

    asyncio.run(check())
