"""One resume of a long run approved at every step, timed on fresh copies of the same log, per source tree.

``bench_approvals.py`` times every approval of a run as it grows, which costs O(steps^2) in all: at 2,000 steps
with ``Guardian()`` that is most of an hour on a loaded machine, per tree. This times only the last approval: the
log is built once (``--db``: reused when it exists; built with the first ``--src`` tree), then each round runs, per
tree in turn (the order alternating between rounds), a fresh process that resumes the run on a copy of the log
(after one untimed resume on another copy: imports, the guardian's first-use set-up) and reports the ``resume()``
call's wall and CPU time (the process's, its store thread's included). Printed: the median per tree, ms, and the
ratio of the first tree's to each other's. Nothing is asserted.

Usage:
  python benchmarks/bench_resume_once.py --steps 2000 [--guardian] --db /tmp/g2000.db --rounds 5 \\
      --src /work/main/src --src src
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from bench_approvals import PROMPT, _agent_file

SESSION = "s"


async def _build(db: str, target: str, steps: int) -> None:
    from stopwise import Approve, Runner, SQLiteStore
    from stopwise._load import load_agent

    agent = load_agent(target)
    store = SQLiteStore(db)
    runner = Runner(store=store)
    result = await runner.run(agent, PROMPT, session_id=SESSION)
    while result.steps < steps:
        result = await runner.resume(agent, SESSION, {p.call_id: Approve() for p in result.pending})
    await store.close()
    if result.status.value != "suspended":
        raise SystemExit(f"the run ended {result.status.value} at step {result.steps}, expected a suspension")


def _copy(db: str, folder: str, name: str) -> str:
    path = os.path.join(folder, name)
    for ext in ("", "-wal", "-shm"):
        if os.path.exists(db + ext):
            shutil.copy(db + ext, path + ext)
    return path


async def _resume_once(db: str, target: str) -> dict[str, float]:
    from stopwise import Approve, Runner, SQLiteStore
    from stopwise._load import load_agent

    agent = load_agent(target)
    out: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="stopwise-resume-once-") as tmp:
        for name in ("warm", "timed"):
            store = SQLiteStore(_copy(db, tmp, name + ".db"))
            snapshot = await store.load_session(SESSION)
            assert snapshot is not None and snapshot.last_run is not None
            calls = [p["call_id"] for p in snapshot.last_run.report["pending"]]
            await store.close()
            store = SQLiteStore(os.path.join(tmp, name + ".db"))
            runner = Runner(store=store)
            wall, cpu = time.perf_counter(), time.process_time()
            result = await runner.resume(agent, SESSION, dict.fromkeys(calls, Approve()))
            out = {"wall_ms": (time.perf_counter() - wall) * 1e3, "cpu_ms": (time.process_time() - cpu) * 1e3}
            await store.close()
            if result.status.value != "suspended":
                raise SystemExit(f"the resume ended {result.status.value}")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--guardian", action="store_true", help="the agent with Guardian()")
    ap.add_argument("--db", help="the log: reused when it exists, built otherwise (required)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--src", action="append", default=[])
    ap.add_argument("--child", nargs=2, metavar=("DB", "TARGET"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(asyncio.run(_resume_once(*args.child))))
        return
    if args.db is None:
        ap.error("--db is required")
    trees = [os.path.abspath(t) for t in args.src or [os.path.join(os.path.dirname(__file__), "..", "src")]]
    folder = os.path.dirname(os.path.abspath(args.db))
    # An agent that goes on past ``--steps``: the log ends suspended there.
    target = _agent_file(folder, args.steps + 1000, True, args.guardian) + ":agent"
    if not os.path.exists(args.db):
        print(f"building {args.db} ({args.steps} steps) with {trees[0]}", file=sys.stderr, flush=True)
        cmd = [sys.executable, "-c", f"import asyncio, bench_resume_once as b; asyncio.run(b._build({args.db!r}, "]
        cmd[-1] += f"{target!r}, {args.steps}))"
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([trees[0], os.path.dirname(os.path.abspath(__file__))])}
        subprocess.run(cmd, env=env, check=True)
    times: dict[str, list[dict[str, float]]] = {t: [] for t in trees}
    for r in range(args.rounds):
        for tree in trees if r % 2 == 0 else trees[::-1]:
            env = {**os.environ, "PYTHONPATH": tree}
            cmd = [sys.executable, os.path.abspath(__file__), "--child", args.db, target]
            done = subprocess.run(cmd, env=env, check=True, stdout=subprocess.PIPE, text=True)
            times[tree].append(json.loads(done.stdout))
            print(f"  round {r + 1} {tree}: {times[tree][-1]}", file=sys.stderr, flush=True)
    config = "guardian" if args.guardian else "plain"
    print(f"one resume at step {args.steps} ({config}, SQLite), median of {args.rounds} fresh copies, ms:")
    medians = {t: {k: statistics.median(x[k] for x in times[t]) for k in ("wall_ms", "cpu_ms")} for t in trees}
    for tree in trees:
        m = medians[tree]
        print(f"  {tree:<40} wall {m['wall_ms']:>9.1f}  cpu {m['cpu_ms']:>9.1f}")
    for tree in trees[1:]:
        wall = medians[trees[0]]["wall_ms"] / medians[tree]["wall_ms"]
        cpu = medians[trees[0]]["cpu_ms"] / medians[tree]["cpu_ms"]
        print(f"  {trees[0]} / {tree}: wall {wall:.2f}x, cpu {cpu:.2f}x")


if __name__ == "__main__":
    main()
