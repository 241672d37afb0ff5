"""What a step costs on disk: bytes per step in a SQLite log, and the size of each record kind, before and after.

Scenarios, each a run on a fresh SQLite file (an instant scripted model, one call of an instant tool per step):
  guardian   Agent(guardian=Guardian()) (the offline rule evaluator, the default conditions), --steps tool steps;
  plain      the same agent without a guardian;
  approval   a tool that needs approval: the run suspends (an approval_request, the run's lease), a reviewer
             approves (an approval_decision) and the run completes;
  budgets    Agent(limits=Limits(tool_calls=...)): the budget is counted from the step entries' decisions.

For each scenario: bytes per step of the log table's columns (as stored: the JSON text of each), the total per
step, and the database file's size per step after a checkpoint; then, over all scenarios, the mean size of each
record kind (entry kind / record type), as written.

Target (issue 15): at most 1.5 KB per step with the guardian on.

``--src DIR`` (repeatable) measures each source tree in a subprocess and prints them side by side: ``--src
/work/main/src --src src`` compares a before and an after in one run.

Usage:
  python benchmarks/bench_log_size.py [--steps 50] [--src DIR ...] [--json PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
from collections import defaultdict
from typing import Any

TARGET = 1500
SCENARIOS = ("guardian", "plain", "approval", "budgets")


def _agent(scenario: str, steps: int) -> Any:
    from stopwise import Agent, FunctionModel, Reply, Risk, ToolCall, tool

    @tool(risk=Risk.READ_ONLY)
    async def bump(n: int) -> int:
        """Add one."""
        return n + 1

    @tool(needs_approval=True)
    async def pay(amount: int) -> str:
        """Pay."""
        return f"paid {amount}"

    calls = [0]

    def fn(request: Any) -> Any:
        calls[0] += 1
        if scenario == "approval":
            if calls[0] == 1:
                return Reply(tool_calls=[ToolCall("pay", {"amount": 5})])
            return Reply(text="done")
        if calls[0] < steps:
            return Reply(tool_calls=[ToolCall("bump", {"n": calls[0]})])
        return Reply(text="done")

    kwargs: dict[str, Any] = {}
    if scenario == "guardian":
        from stopwise import Guardian

        kwargs["guardian"] = Guardian()
    elif scenario == "budgets":
        from stopwise import Limits

        kwargs["limits"] = Limits(tool_calls=steps * 2)
    tools = [pay] if scenario == "approval" else [bump]
    return Agent(name=scenario, instructions="x", model=FunctionModel(fn), tools=tools, max_steps=None, **kwargs)


async def _run(scenario: str, steps: int, path: str) -> int:
    from stopwise import Runner, SQLiteStore
    from stopwise.approvals import Approve

    store = SQLiteStore(path)
    agent = _agent(scenario, steps)
    runner = Runner(store)
    result = await runner.run(agent, "go", session_id="s")
    if scenario == "approval":
        (pending,) = result.pending
        result = await runner.resume(agent, "s", {pending.call_id: Approve()})
    status = getattr(result.status, "value", result.status)
    if status != "completed":
        raise SystemExit(f"{scenario}: run ended {status!r}")
    await store.close()
    return int(result.steps)


def _measure(scenario: str, steps: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="stopwise-size-") as tmp:
        path = os.path.join(tmp, "log.db")
        taken = asyncio.run(_run(scenario, steps, path))
        conn = sqlite3.connect(path)
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        columns = [row[1] for row in conn.execute("PRAGMA table_info(log)")]
        per_column: dict[str, int] = defaultdict(int)
        kinds: dict[str, list[int]] = defaultdict(list)
        for row in conn.execute("SELECT * FROM log"):
            entry = dict(zip(columns, row, strict=True))
            for name, value in entry.items():
                per_column[name] += len(value.encode()) if isinstance(value, str) else 8 if value is not None else 0
            for record in json.loads(entry.get("records") or "[]"):
                text = json.dumps(record, separators=(",", ":"), ensure_ascii=False)
                kinds[f"{entry['kind']}/{record.get('type')}"].append(len(text.encode()))
        run_bytes = 0
        for row in conn.execute("SELECT * FROM runs"):
            run_bytes += sum(len(v.encode()) if isinstance(v, str) else 8 for v in row if v is not None)
        pages = conn.execute("PRAGMA page_count").fetchone()[0] * conn.execute("PRAGMA page_size").fetchone()[0]
        conn.close()
    log_bytes = sum(per_column.values())
    return {
        "steps": taken,
        "columns": {k: v / taken for k, v in per_column.items()},
        "log_per_step": log_bytes / taken,
        "run_record": run_bytes,
        "file_per_step": pages / taken,
        "kinds": {k: [len(v), sum(v) / len(v)] for k, v in kinds.items()},
    }


def measure(steps: int) -> dict[str, Any]:
    return {s: _measure(s, steps) for s in SCENARIOS}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--src", action="append", default=[], help="a source tree to measure (repeatable)")
    ap.add_argument("--json", help="write the figures here")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(measure(args.steps)))
        return
    trees = args.src or [os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")]
    results: dict[str, dict[str, Any]] = {}
    for tree in trees:
        print(f"measuring {tree}", file=sys.stderr, flush=True)
        cmd = [sys.executable, os.path.abspath(__file__), "--child", "--steps", str(args.steps)]
        env = {**os.environ, "PYTHONPATH": os.path.abspath(tree)}
        done = subprocess.run(cmd, env=env, check=True, stdout=subprocess.PIPE, text=True)
        results[tree] = json.loads(done.stdout)

    width = 34
    print(f"\nBytes per step in a SQLite log ({args.steps}-step runs; the log table's columns as stored)\n")
    print("".ljust(28) + "".join(t[-width + 2 :].ljust(width) for t in trees))
    for scenario in SCENARIOS:
        print(f"{scenario} ({results[trees[0]][scenario]['steps']} steps)")
        columns = sorted({c for t in trees for c in results[t][scenario]["columns"]})
        for column in columns:
            cells = [results[t][scenario]["columns"].get(column) for t in trees]
            print(f"  {column}".ljust(28) + "".join(("-" if c is None else f"{c:,.0f}").ljust(width) for c in cells))
        for key, label in (("log_per_step", "log row total"), ("file_per_step", "file size / step")):
            print(f"  {label}".ljust(28) + "".join(f"{results[t][scenario][key]:,.0f}".ljust(width) for t in trees))
    print("\nRecord kinds (entry kind / record type): count over all scenarios, mean bytes as written\n")
    kinds = sorted({k for t in trees for s in SCENARIOS for k in results[t][s]["kinds"]})
    print("".ljust(36) + "".join(t[-width + 2 :].ljust(width) for t in trees))
    for kind in kinds:
        cells = []
        for t in trees:
            found = [results[t][s]["kinds"][kind] for s in SCENARIOS if kind in results[t][s]["kinds"]]
            count = sum(c for c, _ in found)
            mean = sum(c * m for c, m in found) / count if count else 0
            cells.append(f"{count:>4} x {mean:>6,.0f} B" if count else "-")
        print(f"  {kind}".ljust(36) + "".join(c.ljust(width) for c in cells))
    print(
        "\nRun record (runs table row, bytes): " + ", ".join(f"{results[t]['approval']['run_record']}" for t in trees)
    )
    last = results[trees[-1]]["guardian"]["log_per_step"]
    verdict = "PASS" if last <= TARGET else "FAIL"
    print(f"\n[{verdict}] guardian log bytes per step of {trees[-1]}: {last:,.0f} (target <= {TARGET:,})")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
