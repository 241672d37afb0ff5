"""PostgreSQL store: what the shared store suite cannot show. Bad input fails fast and says where, a newer
schema is refused untouched, an older one is migrated, racing writers cannot both append at one seq, and
200 concurrent runs on one store keep every log whole."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator

import pytest

from _pgcluster import Server
from stopwise import Agent, FunctionModel, Message, Reply, RunContext, Runner, StoreError, ToolCall, tool
from stopwise.errors import ConfigError, SchemaTooNew, StepConflict
from stopwise.models import ModelRequest
from stopwise.result import RunStatus
from stopwise.store._schema import LATEST, MIGRATIONS
from stopwise.store.base import EntryKind, LogEntry, RunRecord

psycopg = pytest.importorskip("psycopg")
from stopwise.store.postgres import PostgresStore, _ddl  # noqa: E402


def _schema() -> str:
    return f"t_{uuid.uuid4().hex[:12]}"


def test_core_imports_without_psycopg_or_dbos() -> None:
    code = (
        "import sys, stopwise, stopwise.store, stopwise.store.postgres, stopwise.runtime\n"
        "bad = [m for m in ('psycopg', 'psycopg_pool', 'dbos', 'sqlalchemy') if m in sys.modules]\n"
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_a_malformed_dsn_is_refused_at_construction() -> None:
    with pytest.raises(ConfigError, match="dsn"):
        PostgresStore("host=127.0.0.1 port")


async def test_a_server_that_refuses_the_connection_fails_fast_naming_host_and_port() -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    store = PostgresStore(f"host=127.0.0.1 port={port} dbname=x user=x", connect_timeout=2)
    started = time.monotonic()
    with pytest.raises(StoreError, match=rf"127\.0\.0\.1:{port}"):
        await store.load_session("s")
    assert time.monotonic() - started < 5


@pytest.fixture
def silent_server() -> Iterator[int]:
    """A loopback port that accepts connections and never answers: a hung or firewalled server."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(8)
        yield s.getsockname()[1]


@pytest.mark.slow
async def test_a_server_that_never_answers_fails_within_connect_timeout(silent_server: int) -> None:
    store = PostgresStore(f"host=127.0.0.1 port={silent_server} dbname=x user=x", connect_timeout=2)
    started = time.monotonic()
    with pytest.raises(StoreError, match=rf"cannot connect to PostgreSQL at 127\.0\.0\.1:{silent_server}"):
        await store.open()
    assert time.monotonic() - started < 6


async def test_a_wrong_database_name_names_the_server(pg_server: Server) -> None:
    host, port = pg_server.host_port
    store = PostgresStore(pg_server.dsn("no_such_database"))
    with pytest.raises(StoreError, match=rf"{host}:{port}/no_such_database"):
        await store.open()


async def test_a_closed_store_refuses_work(pg_server: Server) -> None:
    store = PostgresStore(pg_server.new_database())
    await store.open()
    await store.close()
    with pytest.raises(StoreError, match="closed"):
        await store.load_session("s")


def test_bad_settings_name_the_field() -> None:
    with pytest.raises(ConfigError, match="schema"):
        PostgresStore("dbname=x", schema="Robert'); DROP TABLE")
    with pytest.raises(ConfigError, match="max_size"):
        PostgresStore("dbname=x", min_size=3, max_size=2)


async def test_a_schema_newer_than_the_code_is_refused_untouched(pg_server: Server) -> None:
    dsn = pg_server.new_database()
    schema = _schema()
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
        conn.execute(f"CREATE TABLE {schema}.schema_version (version INTEGER NOT NULL)")
        conn.execute(f"INSERT INTO {schema}.schema_version VALUES ({LATEST + 1})")
    store = PostgresStore(dsn, schema=schema)
    with pytest.raises(SchemaTooNew, match="upgrade stopwise"):
        await store.open()
    with psycopg.connect(dsn) as conn:
        tables = conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s", (schema,)
        ).fetchall()
    assert tables == [("schema_version",)]  # nothing created, nothing written


async def test_a_schema_at_version_1_is_migrated_and_keeps_its_rows(pg_server: Server) -> None:
    dsn = pg_server.new_database()
    schema = _schema()
    _, statements = MIGRATIONS[0]
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
        conn.execute(f"SET search_path TO {schema}")
        for sql in statements:
            conn.execute(_ddl(sql))
        conn.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
        conn.execute("INSERT INTO schema_version VALUES (1)")
        conn.execute("INSERT INTO sessions (session_id, state, created_at, updated_at) VALUES ('old', '{}', 0, 0)")
        conn.execute(
            "INSERT INTO runs (run_id, session_id, agent, status, text, steps, budget_base, created_at, updated_at) "
            "VALUES ('r-old', 'old', 'a', 'completed', 'hi', 1, 0, 0, 0)"
        )
    async with PostgresStore(dsn, schema=schema) as store:
        assert store.schema_version == LATEST
        run = await store.get_run("r-old")
        assert run is not None and run.completion_reason is None and run.detail == "" and run.report == {}
    async with PostgresStore(dsn, schema=schema) as again:  # a second open finds nothing to do
        assert again.schema_version == LATEST


async def test_two_stores_opening_a_fresh_database_at_once_migrate_it_once(pg_server: Server) -> None:
    dsn = pg_server.new_database()
    stores = [PostgresStore(dsn) for _ in range(4)]
    await asyncio.gather(*(s.open() for s in stores))
    assert {s.schema_version for s in stores} == {LATEST}
    for s in stores:
        await s.close()


async def test_racing_writers_on_one_seq_commit_exactly_once(pg_server: Server) -> None:
    dsn = pg_server.new_database()
    stores = [PostgresStore(dsn) for _ in range(4)]  # separate pools: separate connections, real races
    try:
        await stores[0].start_run(
            RunRecord("r", "s", "a", RunStatus.RUNNING), LogEntry("s", 1, "r", 0, EntryKind.INPUT, ()), {}
        )
        for seq in range(2, 12):
            attempts = [
                s.commit(LogEntry("s", seq, "r", seq, EntryKind.STEP, (Message("assistant", f"w{i}"),)), {"by": i})
                for i, s in enumerate(stores)
            ]
            outcomes = await asyncio.gather(*attempts, return_exceptions=True)
            winners = [i for i, o in enumerate(outcomes) if o is None]
            assert len(winners) == 1, outcomes
            assert all(isinstance(o, StepConflict) for o in outcomes if o is not None)
            snapshot = await stores[0].load_session("s")
            assert snapshot is not None and snapshot.state == {"by": winners[0]}
            assert snapshot.entries[-1].messages[0].content == f"w{winners[0]}"
        snapshot = await stores[0].load_session("s")
        assert snapshot is not None and [e.seq for e in snapshot.entries] == list(range(1, 12))
    finally:
        for s in stores:
            await s.close()


@tool
def bump(n: int, ctx: RunContext) -> str:
    """Count calls in state."""
    ctx.state["calls"] = ctx.state.get("calls", 0) + 1
    return f"bumped {n}"


def _counting(request: ModelRequest) -> Reply:
    """Depends only on the messages: 4 tool steps, then an answer naming the session's input."""
    steps = sum(1 for m in request.messages if m.role == "assistant")
    first = next(m.content for m in request.messages if m.role == "user")
    if steps >= 4:
        return Reply(f"done with {first}")
    return Reply(tool_calls=[ToolCall("bump", {"n": steps}, id=f"c{steps}")])


@pytest.mark.slow
async def test_200_concurrent_runs_on_one_store_keep_every_log_whole(pg_server: Server) -> None:
    agent = Agent("counter", "Count.", FunctionModel(_counting), tools=[bump], max_steps=10)
    async with PostgresStore(pg_server.new_database(), max_size=10) as store:
        runner = Runner(store)
        results = await asyncio.gather(*(runner.run(agent, f"job {i}", session_id=f"s{i}") for i in range(200)))
        assert all(r.status == "completed" and r.steps == 5 for r in results)
        for i, result in enumerate(results):
            snapshot = await store.load_session(f"s{i}")
            assert snapshot is not None
            # Each tool step is its write-ahead intent and its results; the answer is one step entry.
            assert [e.seq for e in snapshot.entries] == list(range(1, 11))
            assert [(e.step, e.kind) for e in snapshot.entries] == [
                (0, EntryKind.INPUT),
                *((n, kind) for n in (1, 2, 3, 4) for kind in (EntryKind.INTENT, EntryKind.SETTLE)),
                (5, EntryKind.STEP),
            ]
            assert {e.run_id for e in snapshot.entries} == {result.run_id}  # nothing from another run
            assert snapshot.messages()[0].content == f"job {i}"
            assert snapshot.messages()[-1].content == f"done with job {i}"
            assert snapshot.state == {"calls": 4}
            run = snapshot.last_run
            assert run is not None and run.run_id == result.run_id and run.status == "completed"
            assert run.steps == 5 and run.output == f"done with job {i}"
        assert len(await store.list_sessions(limit=1000)) == 200
