"""Fork on the DBOS runtime: ``DBOSRuntime.fork`` continues a session's last run from an earlier committed step in a
new session, as ``Runner.fork`` does, driven as a DBOS workflow; its copy of the log is written once through
crashes (a worker SIGKILLed before the fork's copy, after it, and after the forked leg's start), and DBOS's
recovery of the workflow ends with the log an uninterrupted fork writes.

On SQLite files (development) and on PostgreSQL (the log and DBOS's system database in one database): the runtime
in this process, and the killed worker a process of its own on the same databases. ``python
tests/test_dbos_fork.py FOLDER DSN KILL`` is that worker (``DSN`` empty: SQLite files in ``FOLDER``): it submits the
fork of session ``s`` and kills itself with SIGKILL at ``KILL`` (``copy``: as the fork's copy and note are to be
committed, in one transaction; ``noted``: just after they are; ``started``: just after the forked leg's start
commits its message). DBOS recovers the workflow when a runtime with the same executor id launches. A copy cut
short part way, which an earlier stopwise could leave (it wrote entry by entry), is completed by the recovered
workflow too (the fork of a fork below).
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from _pgcluster import Server
from stopwise import Agent, FunctionModel, Message, Reply, RunContext, Runner, SQLiteStore, ToolCall, tool
from stopwise.approvals import Approve
from stopwise.errors import ForkNotAllowed, RetryNotAllowed
from stopwise.models import ModelRequest
from stopwise.records import ForkRecord, parse_log, parse_records
from stopwise.store.base import EntryKind, Fence, Lease, LogEntry, RunRecord, SessionSnapshot, Store

pytest.importorskip("dbos")

APP_VERSION = "fork-test-1"
EXECUTOR = "dev-fork"


@tool
async def tick(ctx: RunContext) -> int:
    """Count one tick in the session's state (async: a sync tool runs on the loop's default executor, which
    ``DBOS.destroy`` shuts down, and the reference runs on this loop after it)."""
    ctx.state["ticks"] = ctx.state.get("ticks", 0) + 1
    return int(ctx.state["ticks"])


def _ticks(request: ModelRequest) -> Reply:
    """Depends only on the messages, so a step run again (or in another process) gets the same reply."""
    done = sum(1 for m in request.messages if m.role == "tool")
    if done < 4:
        return Reply(tool_calls=[ToolCall("tick", {}, id=f"t{done}")])
    said = [m.content for m in request.messages if m.role == "user"][-1]
    return Reply(f"ticked {done}, last told {said!r}")


@tool(needs_approval=True)
async def pay(amount: int) -> str:
    """Pay an amount."""
    return f"paid {amount}"


def _pay(request: ModelRequest) -> Reply:
    if any(m.role == "tool" for m in request.messages):
        return Reply("paid")
    return Reply(tool_calls=[ToolCall("pay", {"amount": 5}, id="p1")])


def _ticks_on(request: ModelRequest) -> Reply:
    """Never answers: a run of it ends at its step cap."""
    done = sum(1 for m in request.messages if m.role == "tool")
    return Reply(tool_calls=[ToolCall("tick", {}, id=f"t{done}")])


TICKER = Agent("ticker", "Tick.", FunctionModel(_ticks), tools=[tick], max_steps=10)
PAYER = Agent("payer", "Pay.", FunctionModel(_pay), tools=[pay])
CAPPED = Agent("capped", "Tick.", FunctionModel(_ticks_on), tools=[tick], max_steps=3)


def _shape(messages: tuple[Message, ...] | list[Message]) -> list[tuple[Any, ...]]:
    return [(m.role, m.content, m.tool_calls, m.tool_call_id, dict(m.metadata)) for m in messages]


def _log(snapshot: SessionSnapshot) -> list[tuple[Any, ...]]:
    """The log as a reader compares two runs' logs: everything but the run ids."""
    return [(e.seq, e.kind, e.step, _shape(e.messages), e.decision, e.records) for e in snapshot.entries]


@dataclass(frozen=True)
class _Place:
    """Where a test's log and DBOS's system database live: SQLite files in ``folder`` (development), or one
    PostgreSQL database, ``dsn``, for both."""

    folder: Path
    dsn: str = ""

    def store(self, kill: str = "") -> Store:
        """The log's store; with ``kill``, one that SIGKILLs its process at that moment (``_KillAt``)."""
        base: type[Any] = SQLiteStore
        where: Any = self.folder / "log.db"
        if self.dsn:
            from stopwise.store.postgres import PostgresStore

            base, where = PostgresStore, self.dsn
        return _killing(base, where, kill) if kill else base(where)  # type: ignore[no-any-return]

    def system_database_url(self) -> str:
        if self.dsn:
            from _fleet import dbos_url

            return dbos_url(self.dsn)
        return f"sqlite:///{self.folder / 'dbos.sqlite'}"


def _place(request: pytest.FixtureRequest, tmp_path: Path, backend: str) -> _Place:
    if backend == "sqlite":
        return _Place(tmp_path)
    pytest.importorskip("psycopg")
    server: Server = request.getfixturevalue("pg_server")
    return _Place(tmp_path, server.new_database("fork"))


@pytest.fixture(params=["sqlite", "postgres"])
def place(request: pytest.FixtureRequest, tmp_path: Path) -> _Place:
    return _place(request, tmp_path, request.param)


@asynccontextmanager
async def _dev_runtime(place: _Place, kill: str = "") -> AsyncIterator[Any]:
    """A DBOS runtime on ``place`` (the same databases, and executor, each time: DBOS recovers the pending
    workflows of a killed one at launch)."""
    from dbos import DBOS

    from stopwise.runtime.dbos import DBOSRuntime

    DBOS(
        config={
            "name": "stopwise-fork",
            "system_database_url": place.system_database_url(),
            "executor_id": EXECUTOR,
            "application_version": APP_VERSION,
            "log_level": "WARNING",
        }
    )
    store = place.store(kill)
    runtime = DBOSRuntime(store, [TICKER, PAYER, CAPPED], polling_interval=0.05)
    try:
        await runtime.launch()
        yield runtime
    finally:
        DBOS.destroy()
        await store.close()


def _request(
    session_id: str, source_session_id: str, source_run_id: str, at_step: int, state: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """A fork's workflow input as ``DBOSRuntime.fork`` writes it after its checks, to submit one unchecked (as
    if it had waited in the queue while things changed, or an execution of it had died)."""
    return {
        "agent": TICKER.name,
        "session_id": session_id,
        "mode": "fork",
        "input": None,
        "state": dict(state or {}),
        "source_session_id": source_session_id,
        "source_run_id": source_run_id,
        "at_step": at_step,
    }


async def _step_names(workflow_id: str) -> list[str]:
    from dbos import DBOS

    return [s["function_name"] for s in await DBOS.list_workflow_steps_async(workflow_id)]


async def _reference(place: _Place, at_step: int, message: str | None) -> tuple[SessionSnapshot, Any]:
    """``Runner.fork`` of session ``s`` into session ``ref`` of the same log (the source is not touched by a
    fork): what the DBOS fork must write."""
    async with Runner(place.store()) as runner:
        result = await runner.fork(TICKER, "s", at_step, new_session_id="ref", message=message)
        snapshot = await runner.store.load_session("ref")
    assert snapshot is not None
    return snapshot, result


async def _source(place: _Place) -> SessionSnapshot:
    async with _dev_runtime(place) as runtime:
        done = await runtime.run(TICKER, "tick", session_id="s", workflow_id="run-s")
        assert done.status == "completed" and done.steps == 5
        await runtime.run(PAYER, "pay", session_id="p", workflow_id="run-p")  # suspends at step 1
        snapshot = await runtime.store.load_session("s")
    assert snapshot is not None
    return snapshot


@pytest.mark.slow
async def test_fork_runs_as_a_workflow_with_the_local_runners_semantics(place: _Place) -> None:
    source = await _source(place)
    expected, reference = await _reference(place, 2, "again")
    async with _dev_runtime(place) as runtime:
        unnamed = await runtime.fork(TICKER, "s", 2, message="again", workflow_id="fork-f")
        assert unnamed.session_id == "fork-f"  # without new_session_id, the session is named after the workflow
        assert (await runtime.result(unnamed)).output == reference.output
        handle = await runtime.fork(TICKER, "s", 2, new_session_id="f", message="again", workflow_id="fork-g")
        forked = await runtime.result(handle)
        assert forked.run_id == "fork-g" and forked.session_id == "f"  # the run is named after the workflow
        assert forked.status == "completed" and forked.output == reference.output == "ticked 4, last told 'again'"
        assert forked.steps == reference.steps == 5 and dict(forked.state) == dict(reference.state)
        snapshot = await runtime.store.load_session("f")
        assert snapshot is not None and _log(snapshot) == _log(expected)
        # One DBOS step writes the copy and starts the leg; one per stopwise step after the fork's step 2.
        assert await _step_names("fork-g") == ["stopwise.fork"] + ["stopwise.advance"] * 3
        after = await runtime.store.load_session("s")
        assert after is not None and after.entries == source.entries and after.last_run == source.last_run
        again = await runtime.fork(TICKER, "s", 2, new_session_id="f", message="again", workflow_id="fork-g")
        assert again == handle  # a workflow id DBOS has is returned, not checked or run again
        assert (await runtime.result(await runtime.fork(TICKER, "s", 0))).status == "completed"


@pytest.mark.slow
async def test_a_dbos_fork_counts_max_steps_from_the_leg_its_step_belongs_to(tmp_path: Path) -> None:
    async with _dev_runtime(_Place(tmp_path)) as runtime:
        cut = await runtime.run(CAPPED, "tick", session_id="s")
        assert cut.completion_reason == "max_steps" and cut.steps == 3
        retried = await runtime.result(await runtime.retry(CAPPED, "s"))
        assert retried.completion_reason == "max_steps" and retried.steps == 6
        first_leg = await runtime.result(await runtime.fork(CAPPED, "s", 1))
        retry_leg = await runtime.result(await runtime.fork(CAPPED, "s", 4))
    assert (first_leg.completion_reason, first_leg.steps) == ("max_steps", 3)
    assert (retry_leg.completion_reason, retry_leg.steps) == ("max_steps", 6)


@pytest.mark.slow
async def test_a_submission_again_under_its_workflow_id_names_the_session_that_workflow_runs(tmp_path: Path) -> None:
    async with _dev_runtime(_Place(tmp_path)) as runtime:
        first = await runtime.enqueue(TICKER, "tick", workflow_id="run-1")
        again = await runtime.enqueue(TICKER, "tick", workflow_id="run-1")  # no session id: a fresh one is drawn
        assert again == first
        named = await runtime.enqueue(TICKER, "tick", session_id="other", workflow_id="run-1")
        assert named == first  # DBOS runs the first submission's workflow; "other" is not written
        assert (await runtime.result(again)).session_id == first.session_id
        assert await runtime.store.load_session("other") is None

        fork = await runtime.fork(TICKER, first.session_id, 2, new_session_id="f", workflow_id="fork-1")
        unnamed = await runtime.fork(TICKER, first.session_id, 2, workflow_id="fork-1")
        assert unnamed == fork and unnamed.session_id == "f"
        assert (await runtime.result(unnamed)).session_id == "f"


@pytest.mark.slow
async def test_a_refused_fork_submits_nothing_and_writes_nothing(tmp_path: Path) -> None:
    from dbos import DBOS

    await _source(_Place(tmp_path))
    async with _dev_runtime(_Place(tmp_path)) as runtime:
        submitted = len(await DBOS.list_workflows_async())
        sessions = await runtime.store.list_sessions()
        refusals: list[tuple[Agent, str, int, Mapping[str, Any], type[Exception], str]] = [
            (TICKER, "s", 9, {}, ForkNotAllowed, "no committed step 9"),
            (PAYER, "p", 1, {}, ForkNotAllowed, "suspended for approval"),
            (TICKER, "s", 1, {"new_session_id": "p"}, ForkNotAllowed, "'p' exists"),
            (TICKER, "nobody", 1, {}, RetryNotAllowed, "has no run to continue"),
            (TICKER, "p", 0, {}, RetryNotAllowed, "belongs to agent 'payer'"),
        ]
        for agent, session, step, options, error, message in refusals:
            with pytest.raises(error, match=message):
                await runtime.fork(agent, session, step, **options)
        assert len(await DBOS.list_workflows_async()) == submitted
        assert await runtime.store.list_sessions() == sessions
        # A new session taken while the fork waited in the queue: its workflow is refused, that session untouched.
        from dbos import SetWorkflowID

        from stopwise.runtime import dbos as sw_dbos

        taken = await runtime.store.load_session("p")
        with SetWorkflowID("late-fork"):
            await DBOS.enqueue_workflow_async(runtime.queue, sw_dbos._run_workflow, _request("p", "s", "run-s", 1))
        with pytest.raises(ForkNotAllowed, match="'p' exists"):
            await runtime.result(sw_dbos.RunHandle("late-fork", "p"))
        assert await runtime.store.load_session("p") == taken
        # A suspended run's earlier step can be forked: the fork asks for the payment again, in its own session.
        suspended = await runtime.result(await runtime.fork(PAYER, "p", 0, new_session_id="p2"))
        assert suspended.status == "suspended" and [c.call_id for c in suspended.pending] == ["p1"]
        assert (await runtime.resume(PAYER, "p2", {"p1": Approve()})).output == "paid"


class _KillAt:
    """A store that SIGKILLs its process at one moment of the fork of ``s`` into ``f`` (see the module's
    docstring); mixed into a real store."""

    kill = ""

    async def start_run(
        self,
        run: RunRecord,
        entry: LogEntry | None,
        state: Mapping[str, Any],
        lease: Lease | None = None,
        fence: Fence | None = None,
    ) -> None:
        await super().start_run(run, entry, state, lease, fence)  # type: ignore[misc]
        if self.kill == "started" and run.session_id == "f" and entry is not None and entry.seq > 1:
            os.kill(os.getpid(), signal.SIGKILL)

    async def commit_many(
        self, entries: Sequence[LogEntry], state: Mapping[str, Any], run: RunRecord, lease: Lease | None = None
    ) -> None:
        last = entries[-1]
        copy = last.session_id == "f" and any(isinstance(r, ForkRecord) for r in parse_records(last.records))
        if copy and self.kill == "copy":
            os.kill(os.getpid(), signal.SIGKILL)
        await super().commit_many(entries, state, run, lease)  # type: ignore[misc]
        if copy and self.kill == "noted":
            os.kill(os.getpid(), signal.SIGKILL)


def _killing(base: type[Any], where: Any, kill: str) -> Store:
    """A ``base`` store on ``where`` that SIGKILLs its process at ``kill``."""

    class Killing(_KillAt, base):  # type: ignore[misc, valid-type]
        pass

    store = Killing(where)
    store.kill = kill
    return store  # type: ignore[no-any-return]


async def _killed_worker(place: _Place, kill: str) -> None:
    async with _dev_runtime(place, kill) as runtime:
        handle = await runtime.fork(TICKER, "s", 2, new_session_id="f", message="again", workflow_id="fork-f")
        await runtime.result(handle)
    raise SystemExit(f"the worker was to be killed at {kill}")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("backend", "kill"), [("sqlite", "copy"), ("sqlite", "noted"), ("sqlite", "started"), ("postgres", "copy")]
)
async def test_a_fork_recovered_after_its_worker_was_killed_writes_its_copy_once(
    request: pytest.FixtureRequest, tmp_path: Path, backend: str, kill: str
) -> None:
    place = _place(request, tmp_path, backend)
    await _source(place)
    expected, reference = await _reference(place, 2, "again")
    worker = await asyncio.create_subprocess_exec(
        sys.executable, __file__, str(tmp_path), place.dsn, kill, stderr=asyncio.subprocess.PIPE
    )
    _, err = await asyncio.wait_for(worker.communicate(), 120)
    assert worker.returncode == -signal.SIGKILL, err.decode()

    async with place.store() as store:
        cut_short = await store.load_session("f")
        if kill == "copy":  # the copy is written in one transaction: none of it, or all of it
            assert cut_short is None
        else:
            assert cut_short is not None
            notes = [r for _, rs in parse_log(cut_short.entries) for r in rs if isinstance(r, ForkRecord)]
            assert len(notes) == 1

    async with _dev_runtime(place) as runtime:  # the same executor: DBOS recovers the fork's workflow
        from stopwise.runtime.dbos import RunHandle

        forked = await runtime.result(RunHandle("fork-f", "f"))
        assert forked.status == "completed" and forked.output == reference.output
        assert forked.steps == 5 and dict(forked.state) == dict(reference.state)
        snapshot = await runtime.store.load_session("f")
        assert snapshot is not None
        # Each entry once, in order, the note once, the message once: the log an uninterrupted fork writes.
        assert _log(snapshot) == _log(expected)
        assert [r.run_id for r in await runtime.store.list_runs("f")] == ["fork-f"]
        assert await _step_names("fork-f") == ["stopwise.fork"] + ["stopwise.advance"] * 3


@pytest.mark.slow
async def test_the_fork_of_a_fork_cut_short_after_the_copied_note_is_completed_not_taken_as_written(
    tmp_path: Path,
) -> None:
    """The copy of a forked session holds that session's own note: a fork of it cut short after that note, but
    before its own, is still not completely written; recovered, its workflow writes the rest."""
    await _source(_Place(tmp_path))
    async with _dev_runtime(_Place(tmp_path)) as runtime:
        first = await runtime.result(await runtime.fork(TICKER, "s", 1, new_session_id="s1", message="one"))
        assert first.status == "completed"
        source = await runtime.store.load_session("s1")
        assert source is not None
        run = source.last_run
        assert run is not None

        # An earlier execution of workflow "fork-2" wrote the copy up to and past s1's own note, then died.
        from stopwise._fork import plan_fork

        planned = plan_fork(source, run, 3, "s2", "fork-2")
        inherited = next(i for i, e in enumerate(planned.entries) if e.kind is EntryKind.NOTE)
        assert inherited < len(planned.entries) - 1
        lease = Lease("fork-2", "dbos-workflow:fork-2", 0.0)  # lapsed: the recovered workflow takes it over
        await runtime.store.start_run(planned.run, planned.entries[0], source.state, lease)
        for entry in planned.entries[1 : inherited + 1]:
            await runtime.store.commit(entry, source.state)
        with pytest.raises(ForkNotAllowed, match="not completely written"):
            await Runner(runtime.store).retry(TICKER, "s2")

        from dbos import DBOS, SetWorkflowID

        from stopwise.runtime import dbos as sw_dbos

        request = _request("s2", "s1", run.run_id, 3, source.state)
        with SetWorkflowID("fork-2"):
            await DBOS.enqueue_workflow_async(runtime.queue, sw_dbos._run_workflow, request)
        second = await runtime.result(sw_dbos.RunHandle("fork-2", "s2"))
        assert second.status == "completed" and second.output == "ticked 4, last told 'one'"
        snapshot = await runtime.store.load_session("s2")
        assert snapshot is not None
        assert [e.seq for e in snapshot.entries] == list(range(1, len(snapshot.entries) + 1))
        origins = [
            (r.source_session_id, r.at_step)
            for _, rs in parse_log(snapshot.entries)
            for r in rs
            if isinstance(r, ForkRecord)
        ]
        assert origins == [("s", 1), ("s1", 3)]


if __name__ == "__main__":
    asyncio.run(_killed_worker(_Place(Path(sys.argv[1]), sys.argv[2]), sys.argv[3]))
