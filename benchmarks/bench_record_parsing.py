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

``--pydantic`` also times, on the same parsed records, ``_record_check.check_record`` against a strict
``pydantic.TypeAdapter`` of each record class. For a stdlib dataclass pydantic passes an instance through
unchecked unless the class (and each record class it nests) says ``revalidate_instances="always"``, so the
comparison sets that ``__pydantic_config__`` on them in the child process (nothing is written back).

Usage:
  python benchmarks/bench_record_parsing.py [--steps 1000] [--repeat 20] [--src DIR ...] [--pydantic]
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


def _versus_pydantic(records: list[Any], repeat: int) -> dict[str, float]:
    """Median ms of ``check_record`` and of a strict, revalidating ``TypeAdapter`` over ``records``."""
    import dataclasses
    import typing

    from pydantic import ConfigDict, TypeAdapter

    from stopwise._record_check import check_record

    def revalidated(cls: Any, seen: set[Any]) -> None:
        if cls in seen or not dataclasses.is_dataclass(cls):
            return
        seen.add(cls)
        cls.__pydantic_config__ = ConfigDict(strict=True, revalidate_instances="always")
        for hint in typing.get_type_hints(cls).values():
            for a in (hint, *typing.get_args(hint)):
                for b in (a, *typing.get_args(a)):
                    if isinstance(b, type):
                        revalidated(b, seen)

    seen: set[Any] = set()
    for cls in {type(r) for r in records}:
        revalidated(cls, seen)
    adapters = {cls: TypeAdapter(cls) for cls in {type(r) for r in records}}
    ours, theirs = [], []
    for _ in range(repeat):
        t0 = time.process_time()
        for r in records:
            check_record(r)
        t1 = time.process_time()
        for r in records:
            adapters[type(r)].validate_python(r, strict=True)
        t2 = time.process_time()
        ours.append(t1 - t0)
        theirs.append(t2 - t1)
    return {"check_record_ms": statistics.median(ours) * 1e3, "type_adapter_ms": statistics.median(theirs) * 1e3}


async def _measure(steps: int, repeat: int, pydantic: bool = False) -> dict[str, float]:
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
    out = {
        "records": records,
        "parse_ms": statistics.median(parse) * 1e3,
        "result_ms": statistics.median(result) * 1e3,
        "us_per_record": statistics.median(parse) * 1e6 / records,
    }
    if pydantic:
        out |= _versus_pydantic([r for _, rs in parse_log(snapshot.entries) for r in rs], repeat)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--src", action="append", default=[])
    ap.add_argument("--pydantic", action="store_true", help="also time a strict pydantic TypeAdapter")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(asyncio.run(_measure(args.steps, args.repeat, args.pydantic))))
        return
    trees = args.src or [os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")]
    print(f"a run of {args.steps} tool steps with the guardian on; medians of {args.repeat} reads")
    for tree in trees:
        cmd = [sys.executable, os.path.abspath(__file__), "--child", "--steps", str(args.steps)]
        cmd += ["--repeat", str(args.repeat)] + (["--pydantic"] if args.pydantic else [])
        env = {**os.environ, "PYTHONPATH": os.path.abspath(tree)}
        out = json.loads(subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout)
        print(
            f"{tree}\n  {out['records']} records: parse_log {out['parse_ms']:.1f} ms ({out['us_per_record']:.1f} µs a "
            f"record), result_from_log {out['result_ms']:.1f} ms"
        )
        if args.pydantic:
            print(
                f"  every parsed record checked again: check_record {out['check_record_ms']:.1f} ms, strict "
                f"pydantic.TypeAdapter {out['type_adapter_ms']:.1f} ms "
                f"({out['type_adapter_ms'] / out['check_record_ms']:.2f}x)"
            )


if __name__ == "__main__":
    main()
