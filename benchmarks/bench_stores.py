"""Store throughput and commit latency: SQLite and PostgreSQL side by side, in one run.

Each round starts C concurrent runs (C = 1, 4, 16) of an agent whose model and tool cost nothing, so the time
is the loop plus the store. Every step is one ``Store.commit`` (one transaction: the log entry, the state and,
on the last step, the run record). Reported per store and concurrency:

- steps/s: committed steps of all runs / wall time of the round;
- commit latency: median and p99 of the time one ``Store.commit`` call takes, as the loop sees it (under
  concurrency this includes waiting for the database's lock or a pooled connection).

Then the writes at a leg's edges, once per leg rather than per step (median and p99 ms, sequential, one run each):
a claim (``Store.claim``, what ``retry`` and ``resume`` take a run with), a run record written alone under a
lease fence (``update_run`` with a ``Fence``: a leg that ends without a step) and, as the baseline, the same
record written without a fence. On PostgreSQL the claim and the fenced write lock the run's row in a statement of
their own first (``store/_sql.py``'s ``RUN_ROW``); the ratio to the baseline is what the fence costs.

Then what bounds them: this process's CPU time per step (``time.process_time``: the loop, the codec, the driver;
its inverse is the steps/s one core of Python allows, the ceiling when the store costs nothing), the share of that
ceiling reached, and for PostgreSQL the round trip of a bare ``SELECT 1`` on one connection (a commit is one
pipelined round trip, so at one run a step costs at least its commits' round trips). Where steps/s sits at the
CPU ceiling, Python is the bound; where it sits far below with idle CPU, the database's latency (or lock) is.

PostgreSQL: ``--dsn`` names a server (its user must be able to create a schema); without it the benchmark
starts a throwaway cluster the way the tests do (Debian's ``postgresql`` package, or ``STOPWISE_PG_BIN``).
The throwaway cluster runs with ``fsync=off`` and ``synchronous_commit=off``, like SQLite's default
``synchronous=NORMAL`` it does not wait for the disk on every commit; pass ``--durable`` to turn both on
(and SQLite to ``FULL``) and measure fsync-per-commit instead.

Usage:
  python benchmarks/bench_stores.py [--steps 50] [--concurrency 1 4 16] [--dsn DSN] [--durable] [--json PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Mapping
from contextlib import ExitStack
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))  # the tests' throwaway cluster

from stopwise import Agent, FunctionModel, Reply, Runner, SQLiteStore, Store, ToolCall, tool
from stopwise.messages import Message
from stopwise.models import ModelRequest
from stopwise.store.base import EntryKind, Fence, Lease, LogEntry, RunRecord


@tool
async def noop(i: int) -> str:
    """Does nothing."""
    return "ok"


def _agent(steps: int) -> Agent:
    def reply(request: ModelRequest) -> Reply:
        done = sum(1 for m in request.messages if m.role == "assistant")
        if done + 1 >= steps:
            return Reply("done")
        return Reply(tool_calls=[ToolCall("noop", {"i": done}, id=f"c{done}")])

    return Agent("bench", "", FunctionModel(reply), tools=[noop], max_steps=steps + 1)


class TimedStore:
    """Delegates to a store and records how long each ``commit`` takes."""

    def __init__(self, inner: Store) -> None:
        self.inner = inner
        self.commits: list[float] = []

    async def commit(self, entry: LogEntry, state: Mapping[str, Any], run: RunRecord | None = None) -> None:
        started = time.perf_counter()
        await self.inner.commit(entry, state, run)
        self.commits.append(time.perf_counter() - started)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def _pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(p / 100 * (len(ordered) - 1))))]


async def _round(store: Store, agent: Agent, concurrency: int, steps: int) -> dict[str, float]:
    timed = TimedStore(store)
    runner = Runner(timed)  # type: ignore[arg-type]  # TimedStore has the Store methods through __getattr__
    await runner.run(agent, "warm up", session_id=f"warm-{uuid.uuid4().hex}")
    timed.commits.clear()
    cpu = time.process_time()
    started = time.perf_counter()
    results = await asyncio.gather(
        *(runner.run(agent, "go", session_id=f"b-{uuid.uuid4().hex}") for _ in range(concurrency))
    )
    wall = time.perf_counter() - started
    cpu = time.process_time() - cpu
    assert all(r.status == "completed" and r.steps == steps for r in results), [r.error for r in results]
    return {
        "steps_per_s": concurrency * steps / wall,
        "commit_median_ms": _pct(timed.commits, 50) * 1000,
        "commit_p99_ms": _pct(timed.commits, 99) * 1000,
        "commits": len(timed.commits),
        "cpu_ms_per_step": cpu / (concurrency * steps) * 1000,
        "cpu_share": cpu / wall,
    }


async def _timed(samples: list[float], write: Awaitable[None]) -> None:
    started = time.perf_counter()
    await write
    samples.append(time.perf_counter() - started)


async def _leg_writes(store: Store, n: int = 300) -> dict[str, float]:
    """Median and p99 ms of a claim, a fenced ``update_run`` and a plain one, each on a run of its own session."""
    took: dict[str, list[float]] = {"claim": [], "fenced": [], "plain": []}
    tag = uuid.uuid4().hex[:8]
    for i in range(n):
        run = RunRecord(f"{tag}-{i}", f"{tag}-s{i}", "bench")
        entry = LogEntry(run.session_id, 1, run.run_id, 0, EntryKind.INPUT, (Message("user", "go"),))
        await store.start_run(run, entry, {}, Lease(run.run_id, "first", 10.0))
        lease = Lease(run.run_id, "second", 1e12)
        await _timed(took["claim"], store.claim(run, 1, lease, 100.0))
        await _timed(took["fenced"], store.update_run(run, Fence(lease, 1)))
        await _timed(took["plain"], store.update_run(run))
    out: dict[str, float] = {}
    for name, samples in took.items():
        out[f"{name}_median_ms"] = _pct(samples, 50) * 1000
        out[f"{name}_p99_ms"] = _pct(samples, 99) * 1000
    return out


async def _round_trip_ms(dsn: str, n: int = 200) -> float:
    """Median milliseconds of a bare ``SELECT 1`` on one connection: the floor of any PostgreSQL commit."""
    import psycopg

    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        samples = []
        for _ in range(n):
            started = time.perf_counter()
            await conn.execute("SELECT 1")
            samples.append(time.perf_counter() - started)
    return _pct(samples, 50) * 1000


async def _bench(args: argparse.Namespace, dsn: str | None, folder: Path) -> dict[str, dict[int, dict[str, float]]]:
    agent = _agent(args.steps)
    figures: dict[str, dict[int, dict[str, float]]] = {}
    sqlite = SQLiteStore(folder / "bench.db", synchronous="FULL" if args.durable else "NORMAL")
    figures["sqlite"] = {c: await _round(sqlite, agent, c, args.steps) for c in args.concurrency}
    figures["leg_writes"] = {0: await _leg_writes(sqlite)}
    await sqlite.close()
    if dsn is not None:
        from stopwise.store.postgres import PostgresStore

        async with PostgresStore(dsn, schema=f"bench_{uuid.uuid4().hex[:8]}", max_size=16) as pg:
            figures["postgres"] = {c: await _round(pg, agent, c, args.steps) for c in args.concurrency}
            figures["leg_writes"][1] = await _leg_writes(pg)
        figures["postgres_round_trip_ms"] = {0: {"median_ms": await _round_trip_ms(dsn)}}
    return figures


def _print(figures: dict[str, dict[int, dict[str, float]]], args: argparse.Namespace, why_no_pg: str) -> None:
    stores = [s for s in figures if s in ("sqlite", "postgres")]
    print(
        f"stopwise store benchmark: {args.steps} steps per run; Python {platform.python_version()}, "
        f"{os.cpu_count()} CPUs; {'durable (fsync per commit)' if args.durable else 'default durability'}"
    )
    if why_no_pg:
        print(f"PostgreSQL not measured: {why_no_pg}")
    header = f"{'runs':>5} | " + " | ".join(f"{s + ' steps/s':>16} {'median ms':>9} {'p99 ms':>7}" for s in stores)
    if len(stores) == 2:
        header += f" | {'pg/sqlite steps/s':>17}"
    print(header)
    print("-" * len(header))
    for c in args.concurrency:
        cells = [
            f"{figures[s][c]['steps_per_s']:>16.0f} {figures[s][c]['commit_median_ms']:>9.2f} "
            f"{figures[s][c]['commit_p99_ms']:>7.2f}"
            for s in stores
        ]
        line = f"{c:>5} | " + " | ".join(cells)
        if len(stores) == 2:
            ratio = figures["postgres"][c]["steps_per_s"] / figures["sqlite"][c]["steps_per_s"]
            line += f" | {ratio:>16.2f}x"
        print(line)
    print()
    print("writes at a leg's edge, ms (median / p99): claim, update_run fenced, update_run plain; fenced/plain")
    for at, s in enumerate(stores):
        w = figures["leg_writes"][at]
        cells = "  ".join(f"{w[k + '_median_ms']:.3f} / {w[k + '_p99_ms']:.3f}" for k in ("claim", "fenced", "plain"))
        print(f"{s:>8}: {cells}  {w['fenced_median_ms'] / w['plain_median_ms']:.2f}x")
    print()
    print("what bounds them: this process's CPU per step and the steps/s one core allows at that cost")
    for s in stores:
        for c in args.concurrency:
            f = figures[s][c]
            ceiling = 1000 / f["cpu_ms_per_step"]
            print(
                f"{s:>8} {c:>3} runs: {f['cpu_ms_per_step']:.3f} ms CPU/step -> ceiling {ceiling:,.0f} steps/s; "
                f"reached {f['cpu_share']:.0%} of it (the share of the wall time this process was on a CPU)"
            )
    if "postgres_round_trip_ms" in figures:
        rtt = figures["postgres_round_trip_ms"][0]["median_ms"]
        commits = figures["postgres"][args.concurrency[0]]["commits"] / (args.concurrency[0] * args.steps)
        print(
            f"postgres round trip (SELECT 1): {rtt:.2f} ms; {commits:.1f} commits a step -> at most "
            f"{1000 / (rtt * commits):,.0f} steps/s for one run from latency alone"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=50, help="steps per run (default 50)")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 4, 16])
    parser.add_argument("--dsn", help="PostgreSQL to use instead of a throwaway cluster")
    parser.add_argument("--durable", action="store_true", help="fsync every commit (SQLite FULL, PostgreSQL fsync)")
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args()

    with ExitStack() as stack, tempfile.TemporaryDirectory() as tmp:
        dsn, why = args.dsn, ""
        if dsn is None:
            try:
                from _pgcluster import cluster

                server = stack.enter_context(cluster(durable=args.durable))
                dsn = None if server is None else server.new_database("bench")
                why = "" if server is not None else "no PostgreSQL binaries (apt-get install postgresql, or --dsn)"
            except ImportError as exc:
                why = f"{exc} (pip install -e '.[postgres]')"
        figures = asyncio.run(_bench(args, dsn, Path(tmp)))
    _print(figures, args, why)
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
