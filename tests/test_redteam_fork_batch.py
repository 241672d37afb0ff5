"""Red team of the fork's one-transaction write (``commit_many``): exactly once under races and deletions.

Two runners forking into one new session at once, a fork racing retention deleting its source, a fork of a run a
live worker holds, a batch naming a run deleted meanwhile, and a store of a user's own without ``commit_many``.
Every store is real (SQLite on disk, PostgreSQL in a schema of its own); the races are forced at the one moment
that matters (after a fork found its new session free, before it writes) by a store subclass that waits there.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import signal
import sys
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast

import pytest

from _pgcluster import HOW_TO_ENABLE
from stopwise import MemoryStore, Runner, SQLiteStore, Store
from stopwise.errors import ForkNotAllowed, RunLeased, StepConflict
from stopwise.records import ForkRecord, parse_records
from stopwise.store.base import SessionSnapshot
from test_fork import Ticker, _OwnStore, ticker


def _store_class(kind: str) -> type[Any]:
    if kind == "sqlite":
        return SQLiteStore
    from stopwise.store.postgres import PostgresStore

    return PostgresStore


def _open(kind: str, where: Any, cls: type[Any] | None = None) -> Store:
    """A new store object (of ``cls``, a subclass of the kind's store) on the same database (``where``: a path,
    or a PostgreSQL (dsn, schema))."""
    cls = cls or _store_class(kind)
    if kind == "sqlite":
        return cast(Store, cls(where))
    dsn, schema = where
    return cast(Store, cls(dsn, schema=schema, max_size=2))


def _where(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    if kind == "sqlite":
        return tmp_path / "log.db"
    dsn = request.getfixturevalue("pg_dsn")
    if dsn is None:
        pytest.skip(HOW_TO_ENABLE)
    return (dsn, f"t_{uuid.uuid4().hex[:12]}")


def _gated(kind: str, where: Any, new_session_id: str, gate: Any) -> Store:
    """A real store whose ``load_session`` of ``new_session_id`` (the fork's is-it-free check) awaits ``gate()``
    once, after reading: the moment between a fork's check and its write."""
    base = _store_class(kind)

    class Gated(base):  # type: ignore[misc, valid-type]
        waited = False

        async def load_session(self, session_id: str) -> SessionSnapshot | None:
            snapshot = await super().load_session(session_id)
            if session_id == new_session_id and not self.waited:
                self.waited = True
                await gate()
            return cast("SessionSnapshot | None", snapshot)

    return _open(kind, where, Gated)


def _fork_notes(snapshot: SessionSnapshot) -> list[ForkRecord]:
    return [r for e in snapshot.entries for r in parse_records(e.records) if isinstance(r, ForkRecord)]


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
async def test_two_runners_forking_into_one_new_session_at_once_one_wins_the_other_is_refused(
    request: pytest.FixtureRequest, tmp_path: Path, kind: str
) -> None:
    where = _where(kind, request, tmp_path)
    setup = Runner(_open(kind, where))
    await setup.run(ticker(Ticker(3)), "go", session_id="s")
    await setup.close()
    # Both runners have found 'dup' free before either writes.
    barrier = asyncio.Barrier(2)
    runners = [Runner(_gated(kind, where, "dup", barrier.wait)) for _ in range(2)]
    results = await asyncio.gather(
        *(
            r.fork(ticker(Ticker(3)), "s", at_step=step, new_session_id="dup")
            for r, step in zip(runners, (1, 2), strict=True)
        ),
        return_exceptions=True,
    )
    won = [x for x in results if not isinstance(x, BaseException)]
    lost = [x for x in results if isinstance(x, BaseException)]
    assert len(won) == 1 and len(lost) == 1, results
    assert isinstance(lost[0], ForkNotAllowed) and "'dup' exists" in str(lost[0])
    winner = won[0]
    assert winner.status == "completed" and winner.output == "ticked 3"
    check = _open(kind, where)
    dup = await check.load_session("dup")
    assert dup is not None
    # One whole copy: the winner's note only, one run, every seq in order with no gap.
    (note,) = _fork_notes(dup)
    assert {e.run_id for e in dup.entries if e.seq > note.source_seq} == {winner.run_id}
    assert [e.seq for e in dup.entries] == list(range(1, len(dup.entries) + 1))
    assert [run.run_id for run in await check.list_runs("dup")] == [winner.run_id]
    for r in runners:
        await r.close()
    await check.close()


async def test_two_tasks_forking_into_one_new_session_of_one_memory_store_one_wins() -> None:
    barrier = asyncio.Barrier(2)

    class Gated(MemoryStore):
        async def load_session(self, session_id: str) -> SessionSnapshot | None:
            snapshot = await super().load_session(session_id)
            if session_id == "dup" and snapshot is None:
                await barrier.wait()  # both forks found 'dup' free before either writes
            return snapshot

    store = Gated()
    await Runner(store).run(ticker(Ticker(3)), "go", session_id="s")
    results = await asyncio.gather(
        *(Runner(store).fork(ticker(Ticker(3)), "s", at_step=s, new_session_id="dup") for s in (1, 2)),
        return_exceptions=True,
    )
    won = [x for x in results if not isinstance(x, BaseException)]
    lost = [x for x in results if isinstance(x, BaseException)]
    assert len(won) == 1 and len(lost) == 1, results
    assert isinstance(lost[0], ForkNotAllowed) and "'dup' exists" in str(lost[0])
    dup = await store.load_session("dup")
    assert dup is not None and len(_fork_notes(dup)) == 1
    assert [r.run_id for r in await store.list_runs("dup")] == [won[0].run_id]


def _racing_fork(kind: str, where: Any, at_step: int, barrier: Any, outcomes: Any) -> None:
    """A process forking session 's' into 'dup' once every racing process found 'dup' free (``barrier``, a
    multiprocessing one, waited on off the event loop); puts its outcome on ``outcomes``."""

    async def fork() -> str:
        runner = Runner(_gated(kind, where, "dup", lambda: asyncio.to_thread(barrier.wait, 60)))
        try:
            done = await runner.fork(ticker(Ticker(3)), "s", at_step=at_step, new_session_id="dup")
            return f"won {done.run_id}"
        except ForkNotAllowed as e:
            return f"refused {e}"
        finally:
            await runner.close()

    outcomes.put(asyncio.run(fork()))


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
async def test_two_processes_forking_into_one_new_session_at_once_one_wins_the_other_is_refused(
    request: pytest.FixtureRequest, tmp_path: Path, kind: str
) -> None:
    where = _where(kind, request, tmp_path)
    setup = Runner(_open(kind, where))
    await setup.run(ticker(Ticker(3)), "go", session_id="s")
    ctx = multiprocessing.get_context("forkserver")
    barrier, outcomes = ctx.Barrier(2), ctx.Queue()
    children = [ctx.Process(target=_racing_fork, args=(kind, where, step, barrier, outcomes)) for step in (1, 2)]
    for child in children:
        child.start()
    got = sorted(outcomes.get(timeout=120) for _ in children)
    for child in children:
        child.join(60)
        assert child.exitcode == 0
    assert got[0].startswith("refused") and "'dup' exists" in got[0] and got[1].startswith("won "), got
    dup = await setup.store.load_session("dup")
    assert dup is not None and len(_fork_notes(dup)) == 1
    assert [e.seq for e in dup.entries] == list(range(1, len(dup.entries) + 1))
    assert [r.run_id for r in await setup.store.list_runs("dup")] == [got[1].removeprefix("won ")]
    await setup.close()


@pytest.mark.parametrize("how", ["delete_session", "expire_sessions"])
@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
async def test_a_fork_whose_source_retention_deletes_meanwhile_writes_the_whole_copy_it_read(
    request: pytest.FixtureRequest, tmp_path: Path, kind: str, how: str
) -> None:
    where = _where(kind, request, tmp_path)
    janitor = _open(kind, where)

    async def delete_source() -> None:
        if how == "delete_session":
            assert await janitor.delete_session("s")
        else:  # the sweep: every session last written before now + a day, 's' the only one (SQLite vacuums too)
            swept = await janitor.expire_sessions(datetime.now(UTC) + timedelta(days=1))
            assert swept.sessions == 1 and swept.kept_leased == 0

    runner = Runner(_gated(kind, where, "f", delete_source))
    await runner.run(ticker(Ticker(3)), "go", session_id="s")
    source = await runner.store.load_session("s")
    assert source is not None
    forked = await runner.fork(ticker(Ticker(3)), "s", at_step=2, new_session_id="f")
    # The fork copied what it read, whole: the source is gone, the copy stands on its own.
    assert forked.status == "completed" and forked.output == "ticked 3"
    assert await runner.store.load_session("s") is None
    copy = await runner.store.load_session("f")
    assert copy is not None
    (note,) = _fork_notes(copy)
    assert [e.messages for e in copy.entries[: note.source_seq]] == [
        e.messages for e in source.entries[: note.source_seq]
    ]
    await runner.close()
    await janitor.close()


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
async def test_retention_cannot_delete_a_new_fork_between_its_write_and_its_first_step(
    request: pytest.FixtureRequest, tmp_path: Path, kind: str
) -> None:
    """The forked run holds the runner's lease from the transaction that wrote it: a sweep or a delete right
    after the write (before the fork reads its session back to drive it) is refused, and the fork runs."""
    where = _where(kind, request, tmp_path)
    janitor = _open(kind, where)
    refused: list[BaseException] = []
    base = _store_class(kind)

    class SweptAfterTheWrite(base):  # type: ignore[misc, valid-type]
        async def load_session(self, session_id: str) -> SessionSnapshot | None:
            snapshot = await super().load_session(session_id)
            if session_id == "f" and snapshot is not None and not refused:
                swept = await janitor.expire_sessions(datetime.now(UTC) + timedelta(days=1))
                assert swept.kept_leased == 1 and swept.sessions == 1  # 's' went, 'f' was kept
                with pytest.raises(RunLeased) as e:
                    await janitor.delete_session("f")
                refused.append(e.value)
            return cast("SessionSnapshot | None", snapshot)

    runner = Runner(_open(kind, where, SweptAfterTheWrite))
    await runner.run(ticker(Ticker(3)), "go", session_id="s")
    forked = await runner.fork(ticker(Ticker(3)), "s", at_step=1, new_session_id="f")
    assert refused and forked.status == "completed" and forked.output == "ticked 3"
    assert await runner.store.load_session("s") is None
    await runner.close()
    await janitor.close()


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
async def test_a_fork_keeping_an_earlier_run_that_retention_deleted_meanwhile_writes_nothing_and_names_it(
    request: pytest.FixtureRequest, tmp_path: Path, kind: str
) -> None:
    where = _where(kind, request, tmp_path)
    janitor = _open(kind, where)

    async def delete_source() -> None:
        assert await janitor.delete_session("s")

    runner = Runner(_gated(kind, where, "f", delete_source))
    first = await runner.run(ticker(Ticker(1)), "go", session_id="s")
    second = await runner.run(ticker(Ticker(1)), "again", session_id="s")
    assert first.run_id != second.run_id
    # The fork of the second run keeps the first run's entries under its run id: that run is gone by the write.
    with pytest.raises(StepConflict, match=first.run_id):
        await runner.fork(ticker(Ticker(1)), "s", at_step=1, new_session_id="f")
    assert await runner.store.load_session("f") is None
    assert await runner.store.list_runs("f") == []
    await runner.close()
    await janitor.close()


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
async def test_a_fork_of_a_run_a_live_worker_holds_leaves_that_run_and_its_lease_alone(
    request: pytest.FixtureRequest, tmp_path: Path, kind: str
) -> None:
    where = _where(kind, request, tmp_path)
    forker = Runner(_open(kind, where))
    forked: list[Any] = []

    class ForksMidRun(Ticker):
        """At step 3 of the source run (its lease live, held by the other runner), another runner forks it."""

        async def __call__(self, req: Any) -> Any:  # type: ignore[override]
            if req.step == 3 and not forked:
                forked.append(await forker.fork(ticker(Ticker(4)), "s", at_step=1, new_session_id="f"))
            return super().__call__(req)

    worker = Runner(_open(kind, where))
    done = await worker.run(ticker(ForksMidRun(4)), "go", session_id="s")
    assert done.status == "completed" and done.output == "ticked 4" and done.steps == 5
    (fork,) = forked
    assert fork.status == "completed" and fork.output == "ticked 4" and fork.run_id != done.run_id
    source = await worker.store.load_session("s")
    assert source is not None and not _fork_notes(source)
    assert {e.run_id for e in source.entries} == {done.run_id}
    copy = await worker.store.load_session("f")
    assert copy is not None and _fork_notes(copy) == [ForkRecord("s", done.run_id, 1, _fork_notes(copy)[0].source_seq)]
    await worker.close()
    await forker.close()


async def test_a_fork_racing_a_live_lease_on_its_new_session_is_refused_not_overwritten(tmp_path: Path) -> None:
    """The other writer of the new session is a run still going (its lease live) when the fork writes."""
    path = tmp_path / "log.db"
    holder_done: list[Any] = []

    async def start_a_run_there() -> None:
        async with Runner(SQLiteStore(path)) as other:
            holder_done.append(await other.run(ticker(Ticker(1)), "go", session_id="f"))

    runner = Runner(_gated("sqlite", path, "f", start_a_run_there))
    await runner.run(ticker(Ticker(2)), "go", session_id="s")
    with pytest.raises(ForkNotAllowed, match="'f' exists"):
        await runner.fork(ticker(Ticker(2)), "s", at_step=1, new_session_id="f")
    taken = await runner.store.load_session("f")
    assert taken is not None and not _fork_notes(taken)
    assert [r.run_id for r in await runner.store.list_runs("f")] == [holder_done[0].run_id]
    await runner.close()


async def test_a_store_without_commit_many_forks_a_session_of_several_runs(tmp_path: Path) -> None:
    own = _OwnStore(SQLiteStore(tmp_path / "log.db"))
    runner = Runner(cast(Store, own))
    first = await runner.run(ticker(Ticker(1)), "go", session_id="s")
    await runner.run(ticker(Ticker(2)), "again", session_id="s")
    forked = await runner.fork(ticker(Ticker(2)), "s", at_step=1, new_session_id="f")
    assert forked.status == "completed" and forked.output == "ticked 2"
    copy = await own.inner.load_session("f")
    assert copy is not None
    (note,) = _fork_notes(copy)
    assert first.run_id in {e.run_id for e in copy.entries[: note.source_seq]}
    await runner.close()


async def test_a_store_without_commit_many_cut_short_mid_copy_is_refused_by_retry(tmp_path: Path) -> None:
    """The copy is cut after its second entry (not at the note): it reads as incomplete, and stays refused."""
    path = tmp_path / "log.db"

    class CutMidCopy(_OwnStore):
        commits = 0

        async def commit(self, entry: Any, state: Any, run: Any = None) -> None:
            if entry.session_id == "f":
                self.commits += 1
                if self.commits == 2:
                    raise KeyboardInterrupt  # the process stopping, not a store error the runner may handle
            await self.inner.commit(entry, state, run)

    own = CutMidCopy(SQLiteStore(path))
    runner = Runner(cast(Store, own))
    await runner.run(ticker(Ticker(3)), "go", session_id="s")
    with pytest.raises(KeyboardInterrupt):
        await runner.fork(ticker(Ticker(3)), "s", at_step=2, new_session_id="f")
    await own.inner.close()
    reopened = Runner(SQLiteStore(path), lease_seconds=1e-9)
    half = await reopened.store.load_session("f")
    assert half is not None and len(half.entries) == 2 and not _fork_notes(half)
    for _ in range(2):
        with pytest.raises(ForkNotAllowed, match="fork of session 's' at step 2 was not completely written"):
            await reopened.retry(ticker(Ticker(3)), "f")
    await reopened.close()


class _GatedOwn(_OwnStore):
    """A store of a user's own without ``commit_many`` whose check of session 'f' awaits ``gate()`` once."""

    def __init__(self, inner: SQLiteStore, gate: Any) -> None:
        super().__init__(inner)
        self.gate = gate
        self.waited = False

    async def load_session(self, session_id: str) -> SessionSnapshot | None:
        snapshot = await self.inner.load_session(session_id)
        if session_id == "f" and not self.waited:
            self.waited = True
            await self.gate()
        return snapshot


async def test_two_runners_on_stores_without_commit_many_forking_into_one_session_one_wins(tmp_path: Path) -> None:
    path = tmp_path / "log.db"
    await Runner(SQLiteStore(path)).run(ticker(Ticker(3)), "go", session_id="s")
    barrier = asyncio.Barrier(2)
    owns = [_GatedOwn(SQLiteStore(path), barrier.wait) for _ in range(2)]
    results = await asyncio.gather(
        *(Runner(cast(Store, own)).fork(ticker(Ticker(3)), "s", at_step=2, new_session_id="f") for own in owns),
        return_exceptions=True,
    )
    won = [x for x in results if not isinstance(x, BaseException)]
    lost = [x for x in results if isinstance(x, BaseException)]
    assert len(won) == 1 and len(lost) == 1, results
    assert isinstance(lost[0], ForkNotAllowed)
    copy = await owns[0].inner.load_session("f")
    assert copy is not None and len(_fork_notes(copy)) == 1
    assert [e.seq for e in copy.entries] == list(range(1, len(copy.entries) + 1))
    assert [r.run_id for r in await owns[0].inner.list_runs("f")] == [won[0].run_id]
    for own in owns:
        await own.inner.close()


async def test_a_store_without_commit_many_forking_an_earlier_run_deleted_meanwhile_writes_nothing_and_names_it(
    tmp_path: Path,
) -> None:
    path = tmp_path / "log.db"
    janitor = SQLiteStore(path)

    async def delete_source() -> None:
        assert await janitor.delete_session("s")

    own = _GatedOwn(SQLiteStore(path), delete_source)
    runner = Runner(cast(Store, own))
    first = await runner.run(ticker(Ticker(1)), "go", session_id="s")
    await runner.run(ticker(Ticker(1)), "again", session_id="s")
    with pytest.raises(StepConflict, match=first.run_id):
        await runner.fork(ticker(Ticker(1)), "s", at_step=1, new_session_id="f")
    # Entry by entry too: the copy's first entry is the deleted run's, so ``start_run`` refuses it, nothing in.
    assert await janitor.load_session("f") is None
    assert await janitor.list_runs("f") == []
    await own.inner.close()
    await janitor.close()


async def _old_partial_copy(folder: Path, copied: int) -> None:
    """What an earlier stopwise's execution of workflow 'fork-f' left when it died mid-copy: the fork of 's' at
    step 2 into 'f' written entry by entry (``start_run``, then ``commit``), ``copied`` entries, no note, its
    lease lapsed."""
    from stopwise._fork import plan_fork
    from stopwise.store.base import Lease

    async with SQLiteStore(folder / "log.db") as store:
        source = await store.load_session("s")
        assert source is not None and source.last_run is not None
        planned = plan_fork(source, source.last_run, 2, "f", "fork-f")
        assert copied < len(planned.entries) - 1  # the note is not among them
        await store.start_run(planned.run, planned.entries[0], source.state, Lease("fork-f", "old", 0.0))
        for entry in planned.entries[1:copied]:
            await store.commit(entry, source.state)


async def _recovering_worker(folder: Path, kill: str) -> None:
    """Submits workflow 'fork-f' over the old partial copy with a store that SIGKILLs this process at ``kill``
    (before the fork's one transaction, or right after it)."""
    from dbos import DBOS, SetWorkflowID

    from stopwise.runtime import dbos as sw_dbos
    from test_dbos_fork import _dev_runtime, _Place, _request

    place = _Place(folder)
    async with _dev_runtime(place, kill) as runtime:
        source = await runtime.store.load_session("s")
        assert source is not None and source.last_run is not None
        with SetWorkflowID("fork-f"):
            await DBOS.enqueue_workflow_async(
                runtime.queue, sw_dbos._run_workflow, _request("f", "s", source.last_run.run_id, 2, source.state)
            )
        await runtime.result(sw_dbos.RunHandle("fork-f", "f"))
    raise SystemExit(f"the worker was to be killed at {kill}")


@pytest.mark.slow
@pytest.mark.parametrize("kill", ["copy", "noted"])
async def test_the_dbos_fork_step_over_an_old_partial_copy_killed_around_its_transaction_completes_once(
    tmp_path: Path, kill: str
) -> None:
    from stopwise.runtime.dbos import RunHandle
    from test_dbos_fork import _dev_runtime, _log, _Place, _reference, _source

    place = _Place(tmp_path)
    await _source(place)
    expected, reference = await _reference(place, 2, None)
    await _old_partial_copy(tmp_path, 3)
    worker = await asyncio.create_subprocess_exec(
        sys.executable, __file__, str(tmp_path), kill, stderr=asyncio.subprocess.PIPE
    )
    _, err = await asyncio.wait_for(worker.communicate(), 120)
    assert worker.returncode == -signal.SIGKILL, err.decode()
    async with SQLiteStore(tmp_path / "log.db") as store:
        cut = await store.load_session("f")
        assert cut is not None
        # Killed before the transaction: the old three entries and nothing more; after it: the whole copy.
        (note,) = _fork_notes(expected)
        assert len(cut.entries) == (3 if kill == "copy" else note.source_seq + 1)
        assert bool(_fork_notes(cut)) is (kill == "noted")

    async with _dev_runtime(place) as runtime:  # the same executor: DBOS recovers workflow 'fork-f'
        forked = await runtime.result(RunHandle("fork-f", "f"))
        assert forked.status == "completed" and forked.output == reference.output and forked.steps == reference.steps
        snapshot = await runtime.store.load_session("f")
        assert snapshot is not None
        assert _log(snapshot) == _log(expected)
        assert len(_fork_notes(snapshot)) == 1
        assert [r.run_id for r in await runtime.store.list_runs("f")] == ["fork-f"]


if __name__ == "__main__":
    asyncio.run(_recovering_worker(Path(sys.argv[1]), sys.argv[2]))
