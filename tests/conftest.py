from __future__ import annotations

import multiprocessing
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from _pgcluster import HOW_TO_ENABLE, Server, cluster
from provider_server import ProviderServer, serve
from stopwise import MemoryStore, SQLiteStore, Store


def pytest_configure(config: pytest.Config) -> None:
    # The tests that kill real child processes start them from a fork server. Imported once there, stopwise and
    # pytest (which the tests' modules import) are already loaded in every child it forks, instead of being
    # imported again by each: the crash tests start a child per kill point, well over a hundred of them.
    multiprocessing.set_forkserver_preload(["stopwise", "pytest"])


@pytest.fixture
def server() -> Iterator[ProviderServer]:
    """A local server speaking the providers' wire formats (``tests/provider_server.py``), for the adapters' tests."""
    yield from serve()


@pytest.fixture(scope="session")
def _pg_cluster() -> Iterator[Server | None]:
    """One throwaway PostgreSQL cluster for the whole test session, started on first use."""
    try:
        import psycopg  # noqa: F401
    except ImportError:  # the tests that need it skip with HOW_TO_ENABLE, which names the test extra
        yield None
        return
    with cluster() as server:
        yield server


@pytest.fixture
def pg_server(_pg_cluster: Server | None) -> Server:
    """The test PostgreSQL server; skips the test, saying how to enable it, when there is none."""
    if _pg_cluster is None:
        pytest.skip(HOW_TO_ENABLE)
    return _pg_cluster


@pytest.fixture(scope="session")
def pg_dsn(_pg_cluster: Server | None) -> str | None:
    """DSN of one database shared by the store tests; each test gets a schema of its own in it."""
    return None if _pg_cluster is None else _pg_cluster.new_database("stores")


@pytest.fixture(params=["memory", "sqlite", "postgres"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    """Every store backend, each fresh: SQLite on a real file on disk, PostgreSQL in a new schema."""
    s: Store
    if request.param == "memory":
        s = MemoryStore()
    elif request.param == "sqlite":
        s = SQLiteStore(tmp_path / "log.db")
    else:
        dsn = request.getfixturevalue("pg_dsn")
        if dsn is None:
            pytest.skip(HOW_TO_ENABLE)
        from stopwise.store.postgres import PostgresStore

        s = PostgresStore(dsn, schema=f"t_{uuid.uuid4().hex[:12]}", max_size=4)
    yield s
    await s.close()
