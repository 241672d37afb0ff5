"""What the write-ahead step costs: per-step time with and without the intent commit, in one run.

The scripted conversation of ``bench_step_overhead.py`` (an instant model asks for one call of an instant tool
on every step but the last), so a run's time is stopwise's own overhead. Each tool step commits its intent (the
reply and planned call) before the tool runs, then its results: one more store commit per tool step. The
"without" arm replaces ``stopwise._loop._write_intent`` with a no-op, which is the loop as it was before the
write-ahead step (the step then commits as one STEP entry). The arms run in interleaved rounds, order swapped
every round, on the in-memory store and on SQLite (a file in a temporary directory, the store's default
``synchronous=NORMAL`` WAL settings).

Prints per-step medians for each store and arm, the added cost per step (median of the per-round difference),
and checks the SQLite step against the performance target of ``bench_step_overhead.py`` (SQLite adds at most
1 ms per step over memory). Each round also times a raw two-row WAL commit (``sqlite3``, the store's pragmas: an
insert of a log row of a step's size and an update of the session row, one transaction), the floor any SQLite
store pays per commit; issue 15's target is SQLite's addition per step at most 3x that commit (a tool step
makes two commits: its intent and its results). What a SQLite commit costs is split in two: the time the loop
awaits ``SQLiteStore.commit`` and the time its transaction takes (``_run_ops``, the SQL alone, on the loop's
thread or, when the connection or the write lock was busy, the store's worker thread); the difference is the
encoding of the entry and any hand-off to the worker thread and back.

Usage:
  python benchmarks/bench_write_ahead.py [--steps 200] [--runs 7] [--json PATH] [--strict]
"""

import argparse
import asyncio
import gc
import json
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _frameworks import Adapter, StopwiseMemory, StopwiseSQLite, median, raw_commit_ms

import stopwise._loop as loop
from stopwise.store.sqlite import SQLiteStore

SQLITE_TARGET_MS = 1.0
RAW_RATIO_TARGET = 3.0


@contextmanager
def commit_split(awaited: list[float], in_thread: list[float]) -> Iterator[None]:
    """Record the seconds each ``SQLiteStore.commit`` is awaited, and those its SQL takes on the database thread."""
    commit, run_ops = SQLiteStore.commit, SQLiteStore._run_ops

    async def timed_commit(self: SQLiteStore, *args: Any, **kwargs: Any) -> None:
        started = time.perf_counter()
        await commit(self, *args, **kwargs)
        awaited.append(time.perf_counter() - started)

    def timed_ops(self: SQLiteStore, ops: Any) -> None:
        started = time.perf_counter()
        run_ops(self, ops)
        in_thread.append(time.perf_counter() - started)

    SQLiteStore.commit, SQLiteStore._run_ops = timed_commit, timed_ops  # type: ignore[method-assign]
    try:
        yield
    finally:
        SQLiteStore.commit, SQLiteStore._run_ops = commit, run_ops  # type: ignore[method-assign]


@contextmanager
def without_intent() -> Iterator[None]:
    """The loop as it was before the write-ahead step: no intent commit, the step commits in one entry."""
    original = loop._write_intent

    async def skip(leg: Any, step: Any) -> None:
        return None

    loop._write_intent = skip  # type: ignore[assignment]
    try:
        yield
    finally:
        loop._write_intent = original  # type: ignore[assignment]


async def timed(adapter: Adapter, write_ahead: bool) -> float:
    """Seconds per step of one run."""
    gc.collect()
    if write_ahead:
        start = time.perf_counter()
        await adapter.run_once()
    else:
        with without_intent():
            start = time.perf_counter()
            await adapter.run_once()
    return (time.perf_counter() - start) / adapter.steps


async def main(args: argparse.Namespace) -> tuple[bool, dict[str, Any]]:
    """Whether the SQLite target was met, and the figures."""
    stores: dict[str, Adapter] = {"memory": StopwiseMemory(args.steps), "sqlite": StopwiseSQLite(args.steps)}
    samples: dict[tuple[str, bool], list[float]] = {(s, w): [] for s in stores for w in (False, True)}
    raw: list[float] = []
    raw_dir = tempfile.TemporaryDirectory(prefix="stopwise-raw-")
    raw_path = os.path.join(raw_dir.name, "raw.db")
    for adapter in stores.values():
        await adapter.build()
        await adapter.run_once()  # warm-up
        with without_intent():
            await adapter.run_once()
    awaited: list[float] = []
    in_thread: list[float] = []
    for r in range(args.runs):
        for name, adapter in stores.items():
            for write_ahead in (True, False) if r % 2 else (False, True):
                if name == "sqlite" and write_ahead:
                    with commit_split(awaited, in_thread):
                        samples[(name, write_ahead)].append(await timed(adapter, write_ahead))
                else:
                    samples[(name, write_ahead)].append(await timed(adapter, write_ahead))
        raw.append(raw_commit_ms(raw_path, args.steps))
    raw_dir.cleanup()
    for adapter in stores.values():
        await adapter.aclose()

    ms = {k: [x * 1000 for x in v] for k, v in samples.items()}
    print(f"write-ahead cost: {args.steps} steps/run ({args.steps - 1} with a tool call), {args.runs} rounds")
    print(f"{'store':<8} {'without intent':>15} {'with intent':>12} {'added/step':>11} {'added':>7}")
    figures: dict[str, Any] = {"steps": args.steps, "runs": args.runs}
    for name in stores:
        before, after = ms[(name, False)], ms[(name, True)]
        added = median([a - b for a, b in zip(after, before, strict=True)])
        rel = added / median(before) * 100
        print(f"{name:<8} {median(before):>12.3f} ms {median(after):>9.3f} ms {added:>8.3f} ms {rel:>6.1f}%")
        figures[name] = {"without_ms": median(before), "with_ms": median(after), "added_ms": added}
    sqlite_over = median([s - m for s, m in zip(ms[("sqlite", True)], ms[("memory", True)], strict=True)])
    met = sqlite_over <= SQLITE_TARGET_MS
    print(
        f"SQLite over memory, with intent: {sqlite_over:.3f} ms/step "
        f"(target <= {SQLITE_TARGET_MS} ms: {'met' if met else 'MISSED'})"
    )
    figures["sqlite_over_memory_ms"] = sqlite_over
    commit = median(raw)
    ratio = sqlite_over / commit
    print(
        f"raw two-row WAL commit: {commit:.3f} ms; SQLite's addition per step is {ratio:.1f}x it "
        f"(target <= {RAW_RATIO_TARGET:.0f}x: {'met' if ratio <= RAW_RATIO_TARGET else 'MISSED'})"
    )
    figures["raw_commit_ms"], figures["sqlite_over_raw_commit"] = commit, ratio
    waited, sql = median(awaited) * 1000, median(in_thread) * 1000
    print(
        f"a SQLite commit, with intent: awaited {waited:.3f} ms, of which its SQL {sql:.3f} ms; "
        f"encoding and any hand-off to the worker thread {waited - sql:.3f} ms"
    )
    figures["commit_awaited_ms"], figures["commit_sql_ms"] = waited, sql
    return met, figures


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--json")
    parser.add_argument("--strict", action="store_true")
    arguments = parser.parse_args()
    target_met, measured = asyncio.run(main(arguments))
    if arguments.json:
        with open(arguments.json, "w") as f:
            json.dump(measured, f, indent=2)
    sys.exit(1 if arguments.strict and not target_met else 0)
