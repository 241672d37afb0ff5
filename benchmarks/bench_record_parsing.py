"""What reading a run's records back costs: the resume path (``retry``, ``resume``, a takeover, a run's result
from the store) parses every record of the run's log, and since every field is type-checked as it is read
(``stopwise._record_check``) that check is on this path.

A real run is recorded on a SQLite file: an instant scripted model asks for one call of an instant tool on each
of ``--steps`` steps with ``Agent(guardian=Guardian())`` (so the log holds the guardian's config and decisions,
write-ahead intents and history records), then ends. Then, loaded once, its entries are parsed
(``stopwise.records.parse_log``) and its result is read (``stopwise.runtime.result_from_log``) ``--repeat`` times;
the figures are the medians of CPU time (``time.process_time``: on a shared machine, other processes' load does
not count), per run and per record. Nothing is asserted.

``--src DIR`` (repeatable) measures each source tree in a child process (``PYTHONPATH=DIR``) and prints them side by
side: ``--src <before>/src --src src`` is a before/after in one run.

Usage:
  python benchmarks/bench_record_parsing.py [--steps 1000] [--repeat 20] [--src DIR ...]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any


async def _measure(steps: int, repeat: int) -> dict[str, float]:
    from stopwise import Agent, FunctionModel, Reply, Risk, Runner, SQLiteStore, ToolCall, tool
    from stopwise.guardian import Guardian
    from stopwise.records import parse_log
    from stopwise.runtime import result_from_log

    @tool(risk=Risk.READ_ONLY)  # a declared read: the guardian's risk gate lets it run
    async def bump(n: int) -> int:
        """Add one."""
        return n + 1

    def fn(request: Any) -> Reply:
        if request.step <= steps:
            return Reply(tool_calls=[ToolCall("bump", {"n": request.step}, id=f"c{request.step}")])
        return Reply("done")

    agent = Agent("a", "x", FunctionModel(fn), tools=[bump], guardian=Guardian(), max_steps=None)
    with tempfile.TemporaryDirectory() as tmp:
        store = SQLiteStore(os.path.join(tmp, "log.db"))
        try:
            result = await Runner(store).run(agent, "go", session_id="s")
            snapshot = await store.load_session("s")
        finally:
            await store.close()
    assert snapshot is not None and snapshot.last_run is not None
    assert result.status == "completed" and result.steps == steps + 1, (result.status, result.steps)
    records = sum(len(e.records) for e in snapshot.entries)
    parse, result = [], []
    for _ in range(repeat):
        t0 = time.process_time()
        parse_log(snapshot.entries)
        t1 = time.process_time()
        result_from_log(agent, snapshot, snapshot.last_run)
        t2 = time.process_time()
        parse.append(t1 - t0)
        result.append(t2 - t1)
    return {
        "records": records,
        "parse_ms": statistics.median(parse) * 1e3,
        "result_ms": statistics.median(result) * 1e3,
        "us_per_record": statistics.median(parse) * 1e6 / records,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--src", action="append", default=[])
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(asyncio.run(_measure(args.steps, args.repeat))))
        return
    trees = args.src or [os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")]
    print(f"a run of {args.steps} tool steps with the guardian on; medians of {args.repeat} reads")
    for tree in trees:
        cmd = [sys.executable, os.path.abspath(__file__), "--child", "--steps", str(args.steps)]
        cmd += ["--repeat", str(args.repeat)]
        env = {**os.environ, "PYTHONPATH": os.path.abspath(tree)}
        out = json.loads(subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout)
        print(
            f"{tree}\n  {out['records']} records: parse_log {out['parse_ms']:.1f} ms ({out['us_per_record']:.1f} µs a "
            f"record), result_from_log {out['result_ms']:.1f} ms"
        )


if __name__ == "__main__":
    main()
