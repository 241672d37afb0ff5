"""Growth of the per-step cost with the run's length: the gap between model calls, last 50 vs first 50 steps.

An instant scripted model asks for one call of an instant tool on every step but the last (the arguments differ
every step, so no repeat fires). The gap between two consecutive model calls is stopwise's own work for one
step: planning, the tool call, guardrails, the guardian's consultation, the stop guard, the commit. If that work
walks the whole run, the last steps are slower than the first; flat cost means a ratio near 1.

Configurations, each in memory and on SQLite:
  plain      Agent with one tool;
  guardian   Agent(guardian=Guardian()) (the offline rule evaluator, the six default conditions);
  guarded    a stop guard (accepting the finish) and a guardrail on every hook;
  looping    stop_when=is_looping(3), which never fires here (the arguments differ every step): its reads of the
             step's view, each a copy of the row read, on every step;
  wholelog   stop_when=a predicate counting every call of the whole log (the README's ``drafted_three_times``),
             which never fires here: it reads every row of the log on every step.
  readall    the model reads every call's arguments and every row's metadata of its request on every step, as a
             provider adapter converts the whole history for each call: the model's own walk grows with the run,
             so this configuration has no target; it prices the copies the model is sent (``Leg.model_history``)
             against the same walk of the log's own rows (compare it across ``--src`` trees).

Target (issue 15): last-50 / first-50 median gap <= 1.3 for every configuration but readall.

Each cell is the median of ``--repeat`` runs (default 3). A 50-step window is short: on this shared 2-core
machine one 20,000-step `guarded` run's medians per 2,000-step block stayed within 250-320 us with no trend,
while its first-50 / last-50 ratio read anywhere from 0.86 to 1.53 from one run to the next.

``--src DIR`` (repeatable) runs the whole benchmark once per source tree in a subprocess and prints the trees
side by side: ``--src /work/main/src --src src`` compares a before and an after in one run.

Usage:
  python benchmarks/bench_long_runs.py [--steps 1000 ...] [--only plain guardian guarded] [--memory-only]
                                       [--repeat 3] [--src DIR ...] [--json PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

EDGE = 50  # steps in each of the first / last windows
TARGET = 1.3
CONFIGS = ("plain", "guardian", "guarded", "looping", "wholelog", "readall")
UNTARGETED = frozenset({"readall"})
"""Configurations whose per-step cost grows by design (the model's own walk of the history): no ratio target."""


def _agent(config: str, script: list[float], steps: int) -> Any:
    from stopwise import Agent, FunctionModel, Guardrails, Reply, Risk, StopGuard, ToolCall, tool

    @tool(risk=Risk.READ_ONLY)  # a declared read: the guardian's risk gate lets it run
    async def bump(n: int) -> int:
        """Add one."""
        return n + 1

    def fn(request: Any) -> Any:
        if config == "readall":
            for m in request.messages:
                for c in m.tool_calls:
                    c.args.get("n")
                m.metadata.get("content_encoding")
        script.append(time.perf_counter())
        k = len(script)
        if k < steps:
            return Reply(tool_calls=[ToolCall("bump", {"n": k})])
        return Reply(text="done")

    kwargs: dict[str, Any] = {}
    if config == "guardian":
        from stopwise import Guardian

        kwargs["guardian"] = Guardian()
    elif config == "guarded":

        def accept(ctx: Any) -> None:
            return None

        def allow(ctx: Any) -> None:
            return None

        kwargs["stop_guard"] = StopGuard(accept)
        kwargs["guardrails"] = Guardrails(on_input=allow, on_tool_call=allow, on_tool_result=allow, on_output=allow)
    elif config == "looping":
        from stopwise import is_looping

        kwargs["stop_when"] = is_looping(3)
    elif config == "wholelog":

        def drafted_three_times(step: Any) -> str | None:
            drafts = [c for m in step.messages for c in m.tool_calls if c.name == "draft"]
            return "three drafts written" if len(drafts) >= 3 else None

        kwargs["stop_when"] = drafted_three_times
    return Agent(name="long", instructions="x", model=FunctionModel(fn), tools=[bump], max_steps=None, **kwargs)


async def _one(config: str, steps: int, sqlite: bool) -> dict[str, float]:
    from stopwise import Runner, SQLiteStore

    script: list[float] = []
    agent = _agent(config, script, steps)
    with tempfile.TemporaryDirectory(prefix="stopwise-long-") as tmp:
        store = SQLiteStore(os.path.join(tmp, "long.db")) if sqlite else None
        runner = Runner(store=store) if store is not None else Runner()
        gc.collect()
        t0 = time.perf_counter()
        result = await runner.run(agent, "go")
        total = time.perf_counter() - t0
        status = getattr(result.status, "value", result.status)
        if status != "completed" or len(script) != steps:
            raise SystemExit(f"{config}: run ended {status!r} after {len(script)} model calls, expected {steps}")
        if store is not None:
            close = getattr(store, "aclose", None) or getattr(store, "close", None)
            if close is not None:
                out = close()
                if asyncio.iscoroutine(out):
                    await out
    gaps = [b - a for a, b in itertools.pairwise(script)]
    first = statistics.median(gaps[:EDGE])
    last = statistics.median(gaps[-EDGE:])
    out = {"first_us": first * 1e6, "last_us": last * 1e6, "ratio": last / first, "total_s": total}
    # The latency the guardian records for its turn decisions, first and last steps: it should cover the
    # whole consultation, so it tracks the gap rather than staying flat while the gap grows.
    turns = [d.latency_ms for d in getattr(result, "decisions", ()) if d.kind == "turn"]
    if turns:
        out["turn_latency_first_us"] = statistics.median(turns[:EDGE]) * 1e3
        out["turn_latency_last_us"] = statistics.median(turns[-EDGE:]) * 1e3
    return out


def measure(
    steps_list: list[int], configs: list[str], memory_only: bool, repeat: int = 1
) -> dict[str, dict[str, float]]:
    """Each cell run ``repeat`` times: every figure is the median over the runs (the ratio too, taken per run)."""
    out: dict[str, dict[str, float]] = {}
    for steps in steps_list:
        for config in configs:
            for sqlite in (False,) if memory_only else (False, True):
                key = f"{config:<8} {'sqlite' if sqlite else 'memory'} {steps:>5}"
                print(f"  {key} ...", file=sys.stderr, flush=True)
                runs = [asyncio.run(_one(config, steps, sqlite)) for _ in range(repeat)]
                out[key] = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    return out


def _cell(r: dict[str, float] | None) -> str:
    if r is None:
        return "-"
    return f"{r['first_us']:>7,.0f} -> {r['last_us']:>7,.0f} us  x{r['ratio']:.2f}  ({r['total_s']:.1f} s)"


def _latency(r: dict[str, float] | None) -> str:
    if r is None or "turn_latency_first_us" not in r:
        return "-"
    return f"{r['turn_latency_first_us']:>7,.0f} -> {r['turn_latency_last_us']:>7,.0f} us recorded"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, nargs="+", default=[1000, 5000])
    ap.add_argument("--only", nargs="+", choices=CONFIGS, default=list(CONFIGS))
    ap.add_argument("--memory-only", action="store_true")
    ap.add_argument("--repeat", type=int, default=3, help="runs per cell; each figure is their median (default 3)")
    ap.add_argument("--src", action="append", default=[], help="a source tree to measure (repeatable)")
    ap.add_argument("--json", help="write the figures here")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()

    if args.child:
        print(json.dumps(measure(args.steps, args.only, args.memory_only, args.repeat)))
        return

    trees = args.src or [os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")]
    results: dict[str, dict[str, dict[str, float]]] = {}
    for tree in trees:
        print(f"measuring {tree}", file=sys.stderr, flush=True)
        cmd = [sys.executable, os.path.abspath(__file__), "--child", "--steps", *map(str, args.steps), "--only"]
        cmd += args.only + (["--memory-only"] if args.memory_only else []) + ["--repeat", str(args.repeat)]
        env = {**os.environ, "PYTHONPATH": os.path.abspath(tree)}
        done = subprocess.run(cmd, env=env, check=True, stdout=subprocess.PIPE, text=True)
        results[tree] = json.loads(done.stdout)

    print()
    print(f"Gap between model calls, median of the first {EDGE} vs the last {EDGE} steps (instant model and tool),")
    print(f"each cell the median of {args.repeat} runs")
    print(f"Python {sys.version.split()[0]}, {os.cpu_count()} CPUs; target: every ratio <= {TARGET}")
    print()
    keys = list(next(iter(results.values())))
    print("run".ljust(22) + "".join(t[-40:].ljust(46) for t in trees))
    for key in keys:
        print(key.ljust(22) + "".join(_cell(results[t].get(key)).ljust(46) for t in trees))
    print()
    print("guardian turn decisions: recorded latency_ms, median of the first vs the last steps")
    for key in keys:
        if any("turn_latency_first_us" in results[t].get(key, {}) for t in trees):
            print(key.ljust(22) + "".join(_latency(results[t].get(key)).ljust(46) for t in trees))
    last = results[trees[-1]]
    worst = max((r["ratio"] for key, r in last.items() if key.split()[0] not in UNTARGETED), default=0.0)
    print()
    verdict = "PASS" if worst <= TARGET else "FAIL"
    print(f"[{verdict}] worst last/first ratio of {trees[-1]}: {worst:.2f} (target <= {TARGET})")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
