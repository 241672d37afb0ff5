"""Many concurrent agent runs in one process: wall time, throughput and peak memory.

By default: 1,000 concurrent 20-step stopwise runs (19 tool steps + 1 final answer each)
in memory, started together with ``asyncio.gather`` on one event loop, with the same
instant fake model and instant async tool as ``bench_step_overhead.py``.

Each framework is measured in a fresh child process that imports only that framework,
so the peak RSS figure (``getrusage(RUSAGE_SELF).ru_maxrss``) belongs to it alone.
The child builds the agent and makes one warm-up run before the clock starts.

Target: stopwise in memory stays under 300 MB peak RSS for 1,000 concurrent 20-step runs.

Usage:
  python benchmarks/bench_concurrency.py [--runs 1000] [--steps 20] [--peers] [--only NAME ...]
"""

import argparse
import asyncio
import gc
import json
import os
import platform
import resource
import subprocess
import sys
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _frameworks import (
    ADAPTERS,
    ADAPTERS_BY_KEY,
    NotInstalled,
    StopwiseMemory,
    describe_error,
)

RSS_TARGET_MB = 300.0  # decimal megabytes (10**6 bytes)
PEERS = ("pydantic-ai", "openai-agents", "langgraph")
RESULT_PREFIX = "BENCH_RESULT "


def peak_rss_bytes() -> int:
    """Peak resident set size of this process (ru_maxrss is KiB on Linux, bytes on macOS)."""
    maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return maxrss if sys.platform == "darwin" else maxrss * 1024


def vm_hwm_bytes() -> int | None:
    """Linux's per-address-space peak (VmHWM), which does not count the pre-exec parent image."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def current_rss_bytes() -> int | None:
    try:
        import psutil
    except ImportError:
        return None
    return int(psutil.Process().memory_info().rss)


def mb(n: int | None) -> str:
    return "-" if n is None else f"{n / 1e6:,.1f}"


# --------------------------------------------------------------------------------------
# Child: measure one framework in this process
# --------------------------------------------------------------------------------------


async def _child(key: str, runs: int, steps: int, yield_per_step: bool) -> dict[str, Any]:
    adapter = ADAPTERS_BY_KEY[key](steps, yield_per_step=yield_per_step)
    out: dict[str, Any] = {"key": key, "label": adapter.label}
    try:
        await adapter.build()
    except NotInstalled as exc:
        return out | {"status": str(exc)}
    except Exception as exc:
        return out | {"status": f"error while building: {describe_error(exc)}"}
    out["version"] = adapter.version
    try:
        await adapter.run_once()  # warm-up
    except Exception as exc:
        await adapter.aclose()
        return out | {"status": f"error in warm-up run: {describe_error(exc)}"}
    try:
        gc.collect()
        out["rss_before_bytes"] = peak_rss_bytes()
        in_flight = 0
        max_in_flight = 0

        async def tracked() -> None:
            nonlocal in_flight, max_in_flight
            in_flight += 1
            max_in_flight = max(max_in_flight, in_flight)
            try:
                await adapter.run_once()
            finally:
                in_flight -= 1

        t0 = time.perf_counter()
        outcomes = await asyncio.gather(*(tracked() for _ in range(runs)), return_exceptions=True)
        wall = time.perf_counter() - t0
        out["rss_after_bytes"] = current_rss_bytes()
        out["peak_rss_bytes"] = peak_rss_bytes()
        out["vm_hwm_bytes"] = vm_hwm_bytes()
    finally:
        try:
            await adapter.aclose()
        except Exception as exc:
            out["close_error"] = describe_error(exc)
    failures = [o for o in outcomes if isinstance(o, BaseException)]
    out |= {
        "status": "ok" if not failures else f"{len(failures)}/{runs} runs failed: {describe_error(failures[0])}",
        "runs": runs,
        "steps": steps,
        "wall_s": wall,
        "max_in_flight": max_in_flight,
        "yield_per_step": yield_per_step,
        "steps_per_s": runs * steps / wall,
    }
    return out


def child_main(key: str, runs: int, steps: int, yield_per_step: bool) -> int:
    result = asyncio.run(_child(key, runs, steps, yield_per_step))
    print(RESULT_PREFIX + json.dumps(result), flush=True)
    return 0


# --------------------------------------------------------------------------------------
# Parent: one child per framework, then the table
# --------------------------------------------------------------------------------------


def run_child(key: str, runs: int, steps: int, yield_per_step: bool, timeout: float) -> dict[str, Any]:
    label = ADAPTERS_BY_KEY[key].label
    cmd = [sys.executable, os.path.abspath(__file__), "--child", key, "--runs", str(runs), "--steps", str(steps)]
    if not yield_per_step:
        cmd.append("--no-yield")
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return {"key": key, "label": label, "status": f"timed out after {timeout:g} s"}
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith(RESULT_PREFIX):
            return dict(json.loads(line[len(RESULT_PREFIX) :]))
    tail = " ".join((proc.stderr or proc.stdout).strip().splitlines()[-3:])
    return {"key": key, "label": label, "status": f"child exited {proc.returncode}: {tail[-200:]}"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=1000, help="concurrent runs (default 1000)")
    parser.add_argument("--steps", type=int, default=20, help="steps per run (default 20)")
    parser.add_argument("--peers", action="store_true", help=f"also measure the peers ({', '.join(PEERS)})")
    parser.add_argument(
        "--only", nargs="+", metavar="NAME", help=f"frameworks to run: {', '.join(a.key for a in ADAPTERS)}"
    )
    parser.add_argument(
        "--no-yield",
        action="store_true",
        help="fake model does not yield to the event loop (runs may then not overlap)",
    )
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds allowed per framework")
    parser.add_argument("--json", metavar="PATH", help="also write the figures as JSON")
    parser.add_argument("--strict", action="store_true", help="exit with status 1 when the target fails")
    parser.add_argument("--child", metavar="NAME", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.runs < 1 or args.steps < 1:
        parser.error("--runs and --steps must be >= 1")
    if args.child:
        return child_main(args.child, args.runs, args.steps, not args.no_yield)

    if args.only:
        unknown = [k for k in args.only if k not in ADAPTERS_BY_KEY]
        if unknown:
            parser.error(f"unknown framework(s) {unknown}; choose from {sorted(ADAPTERS_BY_KEY)}")
        keys = list(args.only)
    else:
        keys = [StopwiseMemory.key, *(PEERS if args.peers else ())]

    print(
        f"Concurrency: {args.runs:,} concurrent runs x {args.steps} steps "
        f"({args.steps - 1} tool steps + 1 final), one event loop, instant model and tool"
        + ("" if args.no_yield else " (the model yields to the loop once per step)")
    )
    print(
        f"Python {platform.python_version()} on {platform.system()} {platform.machine()}, "
        f"{os.cpu_count()} CPUs; each framework in its own child process"
    )
    print()
    results = []
    for key in keys:
        print(f"  running {key} ...", file=sys.stderr, flush=True)
        results.append(run_child(key, args.runs, args.steps, not args.no_yield, args.timeout))

    headers = (
        "framework",
        "version",
        "wall s",
        "steps/s",
        "max in flight",
        "peak RSS MB",
        "RSS before MB",
        "RSS after MB",
    )
    rows = []
    notes = []
    for r in results:
        if r.get("status") == "ok":
            rows.append(
                (
                    r["label"],
                    r.get("version", "?"),
                    f"{r['wall_s']:,.2f}",
                    f"{r['steps_per_s']:,.0f}",
                    f"{r['max_in_flight']:,}",
                    mb(r["peak_rss_bytes"]),
                    mb(r["rss_before_bytes"]),
                    mb(r.get("rss_after_bytes")),
                )
            )
        else:
            notes.append((r["label"], r.get("status", "?")))
    widths = [len(h) for h in headers]
    for row in rows:
        widths = [max(w, len(c)) for w, c in zip(widths, row, strict=True)]
    for label, _ in notes:
        widths[0] = max(widths[0], len(label))

    def fmt(cells: tuple[str, ...]) -> str:
        return "  ".join(
            c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        )

    print(fmt(headers))
    print("  ".join("-" * w for w in widths))
    for row in rows:
        print(fmt(row))
    for label, status in notes:
        print(f"{label.ljust(widths[0])}  {status}")
    print()
    print("peak RSS = getrusage(RUSAGE_SELF).ru_maxrss of the child; RSS before = the same high-water mark")
    print("after imports, build and one warm-up run; RSS after = current RSS (psutil) once all runs finished.")
    print("max in flight = most runs started and not yet finished at one time (should equal the run count).")
    print("MB = 10**6 bytes.")
    print()

    verdict: dict[str, Any] = {"result": "n/a"}
    sw = next((r for r in results if r["key"] == StopwiseMemory.key), None)
    name = f"stopwise (memory) peak RSS <= {RSS_TARGET_MB:g} MB for {args.runs:,} concurrent {args.steps}-step runs"
    if sw is None:
        print(f"[N/A ] {name}: not measured")
    elif sw.get("status") != "ok":
        print(f"[N/A ] {name}: {sw.get('status')}")
        verdict = {"result": "n/a", "why": sw.get("status")}
    else:
        peak_mb = sw["peak_rss_bytes"] / 1e6
        ok = peak_mb <= RSS_TARGET_MB
        verdict = {"result": "pass" if ok else "fail", "peak_rss_mb": peak_mb}
        print(
            f"[{'PASS' if ok else 'FAIL'}] {name}: {peak_mb:,.1f} MB peak, "
            f"{sw['wall_s']:,.2f} s wall, {sw['steps_per_s']:,.0f} steps/s"
        )

    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(
                {
                    "benchmark": "concurrency",
                    "runs": args.runs,
                    "steps": args.steps,
                    "python": platform.python_version(),
                    "cpus": os.cpu_count(),
                    "frameworks": results,
                    "verdict": verdict,
                },
                fh,
                indent=2,
            )
    return 1 if (args.strict and verdict["result"] == "fail") else 0


if __name__ == "__main__":
    sys.exit(main())
