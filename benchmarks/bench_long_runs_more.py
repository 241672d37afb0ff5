"""Long runs beyond ``bench_long_runs.py``: what else grows with the run as a production user meets it.

The same instant scripted model and tool as ``bench_long_runs.py`` (one call a step, arguments differing every
step). Every figure is "small -> large" and their ratio; flat cost means a ratio near 1.

Per-step configurations (gap between model calls, median of the first 50 vs the last 50 steps):
  plain      an agent with one tool (``bench_long_runs.py``'s, for the PostgreSQL store);
  stream     ``Runner.stream()`` consumed to the end: the events of every step;
  trimmed    ``history_processors=[keep_last_steps(5)]``: the model is sent the last 5 steps; the step's
             ``HistoryRecord`` (what was not sent) is logged every step. Also the bytes of the last step's log
             entry vs the first's (SQLite: the bytes of its records) and the database's size;
  bigresult  ``Guardian()`` with a 20 KB tool result every step (integrity and the projection read them);
  approvals  a tool that needs approval every 50th step; the cost of each ``resume()`` (from the call until the
             model's next call), the first 5 resumes vs the last 5.
Per-run configurations (the same work after a short and after a long run, ``--small`` vs each ``--steps``):
  retry      a run failed by its step cap after N steps, then ``retry()``: time from the call to the first
             new model call;
  fork       ``fork()`` at the last step of an N-step run: time from the call to the forked run's first model
             call. Each tool step is two log entries (intent, settle), so an N-step fork copies about 2N
             entries: ``--only fork copy --small 500 --steps 5000`` is a fork of 1k and of 10k entries;
  copy       the write alone of that fork's copy, two rows: ``copy`` in one transaction
             (``store.base.commit_many``), ``copyeach`` entry by entry (``start_run``, then one ``commit`` per
             entry: how stopwise wrote a fork before ``commit_many``, and how it still writes on a store of your
             own without it). The two alternate on the same source session, each the median of 3 writes, so
             the machine's load falls on both alike;
  rss        tracemalloc's peak over an N-step run, per step (what a step leaves held: copies, caches, events).

``--src DIR`` (repeatable) runs everything once per source tree in a subprocess and prints them side by side.
Each configuration runs in memory and on SQLite, and with ``--postgres`` (or ``--dsn``) on PostgreSQL too (the
tests' throwaway cluster, ``tests/_pgcluster.py``). Each cell is the median of ``--repeat`` runs (default 3).
Noise: on this shared 2-core machine a 50-step window moves by up to 1.5x between runs (see
``bench_long_runs.py``); read ratios far above that.

Usage:
  python benchmarks/bench_long_runs_more.py [--steps 5000] [--small 500] [--only stream trimmed ...]
                                            [--memory-only] [--postgres | --dsn DSN] [--repeat 3] [--src DIR ...]
                                            [--json PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import itertools
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from contextlib import ExitStack
from typing import Any

from _postgres import throwaway_dsn

EDGE = 50
APPROVE_EVERY = 50
RESUMES_EDGE = 5
RESULT_BYTES = 20_000
PER_STEP = ("plain", "stream", "trimmed", "bigresult", "approvals")
PER_RUN = ("retry", "fork", "copy", "rss")
COPY_ROUNDS = 3
CONFIGS = PER_STEP + PER_RUN


def _agent(config: str, script: list[float], steps: int, fail_at: int | None = None) -> Any:
    from stopwise import Agent, FunctionModel, Guardian, Reply, Risk, ToolCall, tool
    from stopwise.history import keep_last_steps

    @tool(risk=Risk.READ_ONLY)
    async def bump(n: int) -> str:
        """Add one."""
        return str(n + 1) if config != "bigresult" else f"{n + 1} " + "x" * RESULT_BYTES

    @tool(risk=Risk.READ_ONLY, needs_approval=True)
    async def publish(n: int) -> int:
        """Publish."""
        return n

    def fn(request: Any) -> Any:
        script.append(time.perf_counter())
        k = len(script)
        if k < steps:
            name = "publish" if config == "approvals" and k % APPROVE_EVERY == 0 else "bump"
            return Reply(tool_calls=[ToolCall(name, {"n": k})])
        return Reply(text="done")

    kwargs: dict[str, Any] = {}
    if config == "trimmed":
        kwargs["history_processors"] = [keep_last_steps(5)]
    elif config == "bigresult":
        kwargs["guardian"] = Guardian()
    tools = [bump, publish] if config == "approvals" else [bump]
    return Agent(name="long", instructions="x", model=FunctionModel(fn), tools=tools, max_steps=fail_at, **kwargs)


async def _close(store: Any) -> None:
    close = getattr(store, "aclose", None) or getattr(store, "close", None)
    if close is not None:
        out = close()
        if asyncio.iscoroutine(out):
            await out


def _store(tmp: str, kind: str, dsn: str | None) -> Any:
    from stopwise import SQLiteStore

    if kind == "postgres":
        from stopwise.store.postgres import PostgresStore

        return PostgresStore(dsn)
    return SQLiteStore(os.path.join(tmp, "long.db")) if kind == "sqlite" else None


def _edges(gaps: list[float]) -> dict[str, float]:
    first, last = statistics.median(gaps[:EDGE]), statistics.median(gaps[-EDGE:])
    return {"first_us": first * 1e6, "last_us": last * 1e6, "ratio": last / first}


def _entry_sizes(path: str) -> tuple[int, int, float]:
    """The records (the history record among them) of the first and the last step entries, and the file's MB."""
    with sqlite3.connect(path) as db:
        query = "SELECT coalesce(length(records), 0) FROM log WHERE kind IN ('intent', 'step') ORDER BY seq"
        sizes = [n for (n,) in db.execute(query)]
    return sizes[0], sizes[-2], os.path.getsize(path) / 1e6


async def _per_step(config: str, steps: int, kind: str, dsn: str | None) -> dict[str, float]:
    from stopwise import Approve, Runner

    script: list[float] = []
    agent = _agent(config, script, steps)
    with tempfile.TemporaryDirectory(prefix="stopwise-long-") as tmp:
        store = _store(tmp, kind, dsn)
        runner = Runner(store=store) if store is not None else Runner()
        gc.collect()
        t0 = time.perf_counter()
        resumes: list[float] = []
        if config == "stream":
            result = None
            async for event in runner.stream(agent, "go"):
                result = getattr(event, "result", result)
        else:
            result = await runner.run(agent, "go")
            while config == "approvals" and result.status.value == "suspended":
                decisions = {p.call_id: Approve() for p in result.pending}
                calls = len(script)
                t = time.perf_counter()
                result = await runner.resume(agent, result.session_id, decisions)
                if len(script) > calls:
                    resumes.append(script[calls] - t)
        total = time.perf_counter() - t0
        status = getattr(getattr(result, "status", None), "value", None)
        if status != "completed" or len(script) != steps:
            raise SystemExit(f"{config}: run ended {status!r} after {len(script)} model calls, expected {steps}")
        out: dict[str, float] = {"total_s": total}
        if config == "approvals":
            first = statistics.median(resumes[:RESUMES_EDGE])
            last = statistics.median(resumes[-RESUMES_EDGE:])
            out |= {"first_us": first * 1e6, "last_us": last * 1e6, "ratio": last / first}
        else:
            out |= _edges([b - a for a, b in itertools.pairwise(script)])
        if kind == "sqlite" and config == "trimmed":
            await _close(store)
            out["entry_first_b"], out["entry_last_b"], out["db_mb"] = _entry_sizes(os.path.join(tmp, "long.db"))
        elif store is not None:
            await _close(store)
    return out


async def _after_run(config: str, steps: int, kind: str, dsn: str | None) -> float:
    """Seconds from ``retry()`` / ``fork()`` of an N-step run to its first new model call; for ``rss``,
    tracemalloc's peak bytes over an N-step run."""
    from stopwise import Runner

    script: list[float] = []
    with tempfile.TemporaryDirectory(prefix="stopwise-long-") as tmp:
        store = _store(tmp, kind, dsn)
        runner = Runner(store=store) if store is not None else Runner()
        try:
            if config == "rss":
                agent = _agent(config, script, steps)
                gc.collect()
                tracemalloc.start()
                await runner.run(agent, "go")
                peak = tracemalloc.get_traced_memory()[1]
                tracemalloc.stop()
                return float(peak)
            agent = _agent(config, script, steps + 10, fail_at=steps if config == "retry" else None)
            if config != "retry":
                agent = _agent(config, script, steps)
            first = await runner.run(agent, "go")
            expected = "failed" if config == "retry" else "completed"
            if first.status.value != expected:
                raise SystemExit(f"{config}: the {steps}-step run ended {first.status.value}, expected {expected}")
            gc.collect()
            calls = len(script)
            t = time.perf_counter()
            if config == "retry":
                await runner.retry(agent, first.session_id)
            else:
                await runner.fork(agent, first.session_id, first.steps)
            if len(script) <= calls:
                raise SystemExit(f"{config}: no model call after the {config}")
            return script[calls] - t
        finally:
            if store is not None:
                await _close(store)


class _EntryByEntry:
    """A store without ``commit_many`` (every other method its inner store's): ``commit_many`` the function then
    writes entry by entry."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        if name == "commit_many":
            raise AttributeError(name)
        return getattr(self.inner, name)


async def _copies(steps: int, kind: str, dsn: str | None) -> tuple[float, float]:
    """Seconds to write the copy (and note) of a fork at the last step of an N-step run: in one transaction, and
    entry by entry; each the median of ``COPY_ROUNDS`` writes, the two alternating (each into a new session)."""
    import uuid

    from stopwise import Runner
    from stopwise._fork import plan_fork
    from stopwise.store.base import commit_many

    script: list[float] = []
    with tempfile.TemporaryDirectory(prefix="stopwise-long-") as tmp:
        store = _store(tmp, kind, dsn)
        runner = Runner(store=store) if store is not None else Runner()
        try:
            first = await runner.run(_agent("copy", script, steps), "go")
            snapshot = await runner.store.load_session(first.session_id)
            assert snapshot is not None and snapshot.last_run is not None
            times: dict[bool, list[float]] = {False: [], True: []}
            for _ in range(COPY_ROUNDS):
                for each in (False, True):
                    planned = plan_fork(snapshot, snapshot.last_run, first.steps, uuid.uuid4().hex, uuid.uuid4().hex)
                    target = _EntryByEntry(runner.store) if each else runner.store
                    gc.collect()
                    t = time.perf_counter()
                    await commit_many(target, planned.entries, snapshot.state, planned.run)
                    times[each].append(time.perf_counter() - t)
            return statistics.median(times[False]), statistics.median(times[True])
        finally:
            if store is not None:
                await _close(store)


def _pairs(pairs: list[tuple[float, float]], unit: float) -> dict[str, float]:
    return {
        "first_us": statistics.median(a for a, _ in pairs) * unit,
        "last_us": statistics.median(b for _, b in pairs) * unit,
        "ratio": statistics.median(b / a for a, b in pairs),
    }


def measure(
    steps_list: list[int], small: int, configs: list[str], stores: list[str], repeat: int, dsn: str | None
) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for steps in steps_list:
        for config in configs:
            for kind in stores:
                if kind == "postgres" and config == "rss":
                    continue  # the server's memory is not this process's
                key = f"{config:<9} {kind:<8} {steps:>5}"
                print(f"  {key} ...", file=sys.stderr, flush=True)
                if config in PER_STEP:
                    runs = [asyncio.run(_per_step(config, steps, kind, dsn)) for _ in range(repeat)]
                    out[key] = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
                    continue
                if config == "copy":
                    runs = [
                        (asyncio.run(_copies(small, kind, dsn)), asyncio.run(_copies(steps, kind, dsn)))
                        for _ in range(repeat)
                    ]
                    for i, name in enumerate(("copy", "copyeach")):
                        out[f"{name:<9} {kind:<8} {steps:>5}"] = _pairs([(a[i], b[i]) for a, b in runs], 1e6)
                    continue
                pairs = []
                for _ in range(repeat):
                    a = asyncio.run(_after_run(config, small, kind, dsn))
                    b = asyncio.run(_after_run(config, steps, kind, dsn))
                    if config == "rss":
                        a, b = a / small, b / steps
                    pairs.append((a, b))
                out[key] = _pairs(pairs, 1e6 if config != "rss" else 1.0)
    return out


def _cell(key: str, r: dict[str, float] | None) -> str:
    if r is None:
        return "-"
    unit = "B/step" if key.startswith("rss") else "us"
    text = f"{r['first_us']:>9,.0f} -> {r['last_us']:>9,.0f} {unit}  x{r['ratio']:.2f}"
    if "total_s" in r:
        text += f"  ({r['total_s']:.1f} s)"
    return text


def _sizes(r: dict[str, float] | None) -> str:
    if r is None or "entry_first_b" not in r:
        return "-"
    return f"{r['entry_first_b']:>7,.0f} -> {r['entry_last_b']:>9,.0f} B/entry, db {r['db_mb']:.1f} MB"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, nargs="+", default=[5000])
    ap.add_argument("--small", type=int, default=500, help="the short run the per-run figures compare with")
    ap.add_argument("--only", nargs="+", choices=CONFIGS, default=list(CONFIGS))
    ap.add_argument("--memory-only", action="store_true")
    ap.add_argument("--postgres", action="store_true", help="also on PostgreSQL (the tests' throwaway cluster)")
    ap.add_argument("--dsn", help="the PostgreSQL to use instead of a throwaway cluster (implies --postgres)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--src", action="append", default=[])
    ap.add_argument("--json")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()

    stores = ["memory"] if args.memory_only else ["memory", "sqlite"]
    if args.child:
        stores += ["postgres"] if args.dsn else []
        print(json.dumps(measure(args.steps, args.small, args.only, stores, args.repeat, args.dsn)))
        return

    with ExitStack() as stack:
        dsn = args.dsn
        if args.postgres and dsn is None:
            dsn = throwaway_dsn(stack, "long")
        _compare(args, dsn)


def _compare(args: argparse.Namespace, dsn: str | None) -> None:
    trees = args.src or [os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")]
    results: dict[str, dict[str, dict[str, float]]] = {}
    for tree in trees:
        print(f"measuring {tree}", file=sys.stderr, flush=True)
        cmd = [sys.executable, os.path.abspath(__file__), "--child", "--steps", *map(str, args.steps)]
        cmd += ["--small", str(args.small), "--only", *args.only, "--repeat", str(args.repeat)]
        cmd += ["--memory-only"] if args.memory_only else []
        cmd += ["--dsn", dsn] if dsn else []
        env = {**os.environ, "PYTHONPATH": os.path.abspath(tree)}
        done = subprocess.run(cmd, env=env, check=True, stdout=subprocess.PIPE, text=True)
        results[tree] = json.loads(done.stdout)

    print()
    print(f"per step: median gap between model calls, first {EDGE} -> last {EDGE} steps (approvals: each resume,")
    print(f"first {RESUMES_EDGE} -> last {RESUMES_EDGE}); per run: after a {args.small}-step run -> after the")
    print("longer run (retry, fork: time to the first new model call; rss: tracemalloc peak per step)")
    print(f"each cell the median of {args.repeat} runs; Python {sys.version.split()[0]}, {os.cpu_count()} CPUs")
    print()
    keys = list(next(iter(results.values())))
    print("run".ljust(24) + "".join(t[-44:].ljust(52) for t in trees))
    for key in keys:
        print(key.ljust(24) + "".join(_cell(key, results[t].get(key)).ljust(52) for t in trees))
    sized = [k for k in keys if any("entry_first_b" in results[t].get(k, {}) for t in trees)]
    if sized:
        print()
        print("trimmed: the records of the first step's log entry -> of the last step's, and the database's size")
        for key in sized:
            print(key.ljust(24) + "".join(_sizes(results[t].get(key)).ljust(52) for t in trees))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
