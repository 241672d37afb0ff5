"""A throwaway PostgreSQL database for the benchmarks that compare stores: the tests' own cluster on loopback."""

from __future__ import annotations

import sys
from contextlib import ExitStack
from pathlib import Path


def throwaway_dsn(stack: ExitStack, name: str) -> str:
    """The DSN of a new database ``name`` on a cluster started for this process and stopped when ``stack`` closes.
    Exits with the install line when this machine has no PostgreSQL binaries."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    from _pgcluster import cluster

    server = stack.enter_context(cluster())
    if server is None:
        raise SystemExit("no PostgreSQL binaries (apt-get install postgresql, or --dsn)")
    return str(server.new_database(name))
