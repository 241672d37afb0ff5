"""``commit_many``: many entries, the state after them and a run record written in one transaction, every entry
or none (what a fork's copy is written with), on every store; entry by entry on a store of your own without it."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any, cast

import pytest

from _pgcluster import HOW_TO_ENABLE
from stopwise import Message, SQLiteStore, Store
from stopwise.errors import RunLeased, StepConflict, StoreError
from stopwise.store.base import CommitsMany, EntryKind, Lease, LogEntry, RunRecord, commit_many


def _run(session_id: str = "s") -> RunRecord:
    return RunRecord("r1", session_id, "agent")


def _entries(first: int, last: int, session_id: str = "s") -> list[LogEntry]:
    return [
        LogEntry(session_id, seq, "r1", seq, EntryKind.INPUT, (Message.user(f"m{seq}"),))
        for seq in range(first, last + 1)
    ]


async def test_commit_many_creates_the_session_with_every_entry_its_state_and_the_run_holding_its_lease(
    store: Store,
) -> None:
    assert isinstance(store, CommitsMany)
    run = _run()
    await commit_many(store, _entries(1, 5), {"k": 1}, run, Lease("r1", "me", 1e12))
    snapshot = await store.load_session("s")
    assert snapshot is not None
    assert snapshot.entries == tuple(_entries(1, 5))
    assert snapshot.state == {"k": 1} and snapshot.last_run == run
    with pytest.raises(RunLeased):
        await store.claim(run, 5, Lease("r1", "other", 1e12 + 1), now=1e9)


async def test_commit_many_appends_at_the_sessions_next_free_seq(store: Store) -> None:
    run = _run()
    await store.start_run(run, _entries(1, 1)[0], {})
    await commit_many(store, _entries(2, 4), {"k": 2}, run)
    snapshot = await store.load_session("s")
    assert snapshot is not None and snapshot.entries == tuple(_entries(1, 4)) and snapshot.state == {"k": 2}


async def test_commit_many_at_a_taken_seq_writes_nothing(store: Store) -> None:
    run = _run()
    await store.start_run(run, _entries(1, 1)[0], {"k": 0})
    await store.commit(_entries(2, 2)[0], {"k": 0})
    before = await store.load_session("s")
    # Seq 2 is taken, 3.. would be free after it: the batch still goes in whole or not at all.
    with pytest.raises(StepConflict, match="next free"):
        await commit_many(store, _entries(2, 6), {"k": 9}, RunRecord("r1", "s", "agent", steps=9))
    assert await store.load_session("s") == before


async def test_commit_many_past_a_new_sessions_first_seq_writes_nothing(store: Store) -> None:
    with pytest.raises(StepConflict):
        await commit_many(store, _entries(2, 3), {}, _run())
    assert await store.load_session("s") is None


@pytest.mark.parametrize(
    "entries",
    [[], [*_entries(1, 2), *_entries(4, 4)], [*_entries(1, 1), *_entries(2, 2, session_id="other")]],
    ids=["empty", "a gap", "two sessions"],
)
async def test_commit_many_refuses_a_batch_that_is_not_one_sessions_consecutive_entries(
    store: Store, entries: list[LogEntry]
) -> None:
    with pytest.raises(ValueError, match="commit_many"):
        await cast(CommitsMany, store).commit_many(entries, {}, _run())
    assert await store.load_session("s") is None


async def test_commit_many_refuses_an_entry_of_a_run_that_is_not_on_record(store: Store) -> None:
    # Every store applies the append rule's run check to the batch, the memory store as the SQL ones.
    ghost = LogEntry("s", 2, "gone", 2, EntryKind.INPUT, (Message.user("m2"),))
    with pytest.raises(StepConflict, match="gone"):
        await commit_many(store, [*_entries(1, 1), ghost], {}, _run())
    assert await store.load_session("s") is None and await store.get_run("r1") is None


async def test_commit_many_refuses_a_lease_of_another_run(store: Store) -> None:
    with pytest.raises(ValueError, match="lease is run other's"):
        await commit_many(store, _entries(1, 2), {}, _run(), Lease("other", "me", 1e12))
    assert await store.load_session("s") is None


async def _fail_at_seq(store: Store, seq: int) -> None:
    """A trigger in the database that fails the insert of session 's''s entry ``seq``: a real database failure
    in the middle of the batch's transaction."""
    if isinstance(store, SQLiteStore):
        store._conn.execute(
            f"CREATE TRIGGER refuse BEFORE INSERT ON log WHEN NEW.session_id = 's' AND NEW.seq = {seq} "
            "BEGIN SELECT RAISE(ABORT, 'disk full'); END"
        )
        return
    import psycopg

    from stopwise.store.postgres import PostgresStore

    assert isinstance(store, PostgresStore)
    await store.open()
    async with await psycopg.AsyncConnection.connect(store.dsn, autocommit=True) as conn:
        await conn.execute(
            f"CREATE FUNCTION {store.schema}.refuse() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN RAISE EXCEPTION 'disk full'; END $$"
        )
        await conn.execute(
            f"CREATE TRIGGER refuse BEFORE INSERT ON {store.schema}.log FOR EACH ROW "
            f"WHEN (NEW.session_id = 's' AND NEW.seq = {seq}) EXECUTE FUNCTION {store.schema}.refuse()"
        )


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
async def test_a_database_failure_midway_through_commit_many_rolls_back_every_entry(
    request: pytest.FixtureRequest, tmp_path: Path, kind: str
) -> None:
    store: Store
    if kind == "sqlite":
        store = SQLiteStore(tmp_path / "log.db")
    else:
        dsn = request.getfixturevalue("pg_dsn")
        if dsn is None:
            pytest.skip(HOW_TO_ENABLE)
        from stopwise.store.postgres import PostgresStore

        store = PostgresStore(dsn, schema=f"t_{uuid.uuid4().hex[:12]}", max_size=2)
    try:
        await _fail_at_seq(store, 50)
        with pytest.raises(StoreError, match="disk full"):
            await commit_many(store, _entries(1, 100), {}, _run())
        assert await store.load_session("s") is None
        assert await store.get_run("r1") is None
    finally:
        await store.close()


class _OwnStore:
    """A ``Store`` of a user's own without ``commit_many``: every other method forwarded to a real SQLite store,
    every call's name noted."""

    def __init__(self, inner: SQLiteStore) -> None:
        self.inner = inner
        self.calls: list[str] = []

    def __getattr__(self, name: str) -> Any:
        if name == "commit_many":
            raise AttributeError(name)
        self.calls.append(name)
        return getattr(self.inner, name)


async def test_commit_many_on_a_store_without_it_starts_the_run_then_commits_entry_by_entry(tmp_path: Path) -> None:
    own = _OwnStore(SQLiteStore(tmp_path / "log.db"))
    run = RunRecord("r1", "s", "agent", steps=3)
    await commit_many(cast(Store, own), _entries(1, 3), {"k": 1}, run, Lease("r1", "me", 1e12))
    assert own.calls == ["start_run", "commit", "commit"]
    snapshot = await own.inner.load_session("s")
    assert snapshot is not None and snapshot.entries == tuple(_entries(1, 3)) and snapshot.last_run == run
    await own.inner.close()
