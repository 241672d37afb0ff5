"""Per-step overhead of an agent loop: stopwise versus its peers, side by side.

Each framework runs the same scripted conversation (see ``_frameworks.py``): an instant
fake model asks for one call of an instant async tool on every step but the last, and the
last step returns the final text.  With ``--steps 200`` (the default) that is 199 tool
steps and one final step per run.  Since the model and the tool cost nothing, the time a
run takes is the framework's own overhead; per-step time is run time / steps.

Method: every framework is built and warmed up with one full run, then the frameworks are
timed in interleaved rounds (one run each per round, order rotated every round) so that
drift in machine load hits them alike, and stopwise-in-memory and stopwise-on-SQLite
runs of the same round form a pair for the SQLite overhead figure.  Each round also times
a raw two-row WAL commit (``_frameworks.raw_commit_ms``: plain ``sqlite3``, the store's
pragmas; on one file kept across rounds, two commits per step like the store's), the floor any SQLite store
pays per commit.  The SQLite store runs twice: as it
is (a step's writes on the event loop's thread) and with ``offload=True`` (every statement
on its worker thread, as before), so the hop's cost is measured before/after in one run.

Targets:
  1. stopwise in memory is at least 20x faster per step than the fastest peer (issue 15);
  2. the SQLite store adds at most 1 ms per step (median of the per-round difference);
  3. the SQLite store adds at most 3x a raw two-row WAL commit per step (issue 15: a tool
     step makes two commits, its write-ahead intent and its results).

``--src DIR`` (repeatable) measures source trees side by side: each of ``--runs`` rounds runs this benchmark in a
child process per tree (``PYTHONPATH=DIR``; its own warm-up, then ``CHILD_RUNS`` timed runs), the trees' order
rotated every round; the summary gives each tree's medians over all the timed runs: ``--src <before>/src --src
src`` is a before/after in one run.

``--cpu`` times this process's CPU (``time.process_time``: every thread, system calls included) instead of
the wall clock, the raw commit too: on a shared machine, other processes' load and I/O stalls then do not count.

Usage:
  python benchmarks/bench_step_overhead.py [--steps 200] [--runs N] [--quick] [--cpu]
                                           [--only NAME ...] [--json PATH] [--strict] [--src DIR ...]
"""

import argparse
import asyncio
import gc
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _frameworks import (
    ADAPTERS,
    Adapter,
    NotInstalled,
    StopwiseMemory,
    StopwiseSQLite,
    StopwiseSQLiteOffload,
    describe_error,
    median,
    percentile,
    raw_commit_ms,
    select_adapters,
)

SPEED_TARGET = 20.0  # stopwise-memory must be >= this many times faster per step than the fastest peer
SQLITE_TARGET_MS = 1.0  # SQLite may add at most this many ms per step (median)
RAW_RATIO_TARGET = 3.0  # SQLite's addition per step, at most this many raw two-row WAL commits
DEFAULT_RUNS = 5
QUICK_RUNS = 2
CHILD_RUNS = 3  # timed runs per child process with --src
CLOCK: list[Callable[[], float]] = [time.perf_counter]  # --cpu: time.process_time


@dataclass
class Entry:
    adapter: Adapter
    status: str = "ok"  # "ok", or a reason it was skipped
    samples: list[float] = field(default_factory=list)  # seconds per step, one per timed run
    rounds: list[int] = field(default_factory=list)  # round index of each sample

    @property
    def ok(self) -> bool:
        return self.status == "ok"


async def _prepare(entry: Entry) -> None:
    adapter = entry.adapter
    try:
        await adapter.build()
    except NotInstalled as exc:
        entry.status = str(exc)
        return
    except Exception as exc:
        entry.status = f"error while building: {describe_error(exc)}"
        return
    try:
        await adapter.run_once()  # warm-up: imports, caches, schema generation, first-run paths
    except Exception as exc:
        entry.status = f"error in warm-up run: {describe_error(exc)}"


async def _time_one(entry: Entry, round_index: int) -> None:
    gc.collect()
    t0 = CLOCK[0]()
    try:
        await entry.adapter.run_once()
    except Exception as exc:
        entry.status = f"error in timed run: {describe_error(exc)}"
        return
    elapsed = CLOCK[0]() - t0
    entry.samples.append(elapsed / entry.adapter.steps)
    entry.rounds.append(round_index)


async def measure(entries: list[Entry], runs: int, progress: bool, raw: list[float]) -> None:
    """Time ``entries`` in ``runs`` interleaved rounds; each round appends a raw commit's ms to ``raw``."""
    for entry in entries:
        if progress:
            print(f"  building + warm-up: {entry.adapter.label} ...", file=sys.stderr, flush=True)
        await _prepare(entry)
    # The raw commits go to one file kept across rounds and make as many commits per round as a SQLite run does
    # (two per tool step), as the store's file is kept across its runs: both then pay WAL checkpoints at the
    # rate their commits write pages (a fresh file's first ~1,000 pages never checkpoint).
    raw_dir = tempfile.TemporaryDirectory(prefix="stopwise-raw-")
    raw_path = os.path.join(raw_dir.name, "raw.db")
    for r in range(runs):
        live = [e for e in entries if e.ok]
        if not live:
            break
        shift = r % len(live)
        order = live[shift:] + live[:shift]
        if progress:
            print(f"  round {r + 1}/{runs}", file=sys.stderr, flush=True)
        for entry in order:
            await _time_one(entry, r)
        raw.append(raw_commit_ms(raw_path, 2 * entries[0].adapter.steps, CLOCK[0]))
    raw_dir.cleanup()
    for entry in entries:
        try:
            await entry.adapter.aclose()
        except Exception as exc:  # closing must never hide the figures
            print(f"  warning: closing {entry.adapter.label} failed: {describe_error(exc)}", file=sys.stderr)


def _us(seconds: float) -> str:
    us = seconds * 1e6
    return f"{us:,.1f}" if us < 1000 else f"{us:,.0f}"


def _find(entries: list[Entry], cls: type[Adapter]) -> Entry | None:
    for e in entries:
        if type(e.adapter) is cls:
            return e
    return None


def report(entries: list[Entry], args: argparse.Namespace, raw: list[float]) -> dict[str, Any]:
    mem = _find(entries, StopwiseMemory)
    base = median(mem.samples) if mem is not None and mem.ok and mem.samples else None

    print()
    print(
        f"Per-step overhead: {args.steps} steps/run ({args.steps - 1} tool steps + 1 final), "
        f"{args.runs} timed runs after 1 warm-up, instant model and tool"
        + (" (model yields once per step)" if args.yield_per_step else "")
        + (", CPU time of this process" if args.cpu else "")
    )
    print(f"Python {platform.python_version()} on {platform.system()} {platform.machine()}, {os.cpu_count()} CPUs")
    print()
    headers = ("framework", "version", "median µs/step", "p90 µs/step", "vs stopwise-memory")
    rows: list[tuple[str, ...]] = []
    notes: list[tuple[str, str, str]] = []
    results: dict[str, Any] = {}
    for e in entries:
        a = e.adapter
        rec: dict[str, Any] = {"label": a.label, "version": a.version if e.ok else None, "status": e.status}
        if e.ok and e.samples:
            med = median(e.samples)
            p90 = percentile(e.samples, 90)
            if base is None:
                ratio = "n/a"
            elif a is mem.adapter:  # type: ignore[union-attr]
                ratio = "1.00x (baseline)"
            else:
                ratio = f"{med / base:,.2f}x"
            rows.append((a.label, a.version, _us(med), _us(p90), ratio))
            rec.update(
                median_us_per_step=med * 1e6,
                p90_us_per_step=p90 * 1e6,
                samples_us_per_step=[s * 1e6 for s in e.samples],
                ratio_vs_stopwise_memory=(med / base) if base else None,
            )
        else:
            notes.append((a.label, "-", e.status))
        results[a.key] = rec

    widths = [len(h) for h in headers]
    for row in rows:
        widths = [max(w, len(c)) for w, c in zip(widths, row, strict=True)]
    for label, version, _ in notes:
        widths[0] = max(widths[0], len(label))
        widths[1] = max(widths[1], len(version))
    align_right = (False, False, True, True, True)

    def fmt(cells: tuple[str, ...]) -> str:
        out = []
        for cell, width, right in zip(cells, widths, align_right, strict=True):
            out.append(cell.rjust(width) if right else cell.ljust(width))
        return "  ".join(out).rstrip()

    print(fmt(headers))
    print("  ".join("-" * w for w in widths))
    for row in rows:
        print(fmt(row))
    for label, version, status in notes:
        print(f"{label.ljust(widths[0])}  {version.ljust(widths[1])}  {status}")
    print()
    print("ratio = framework's median per-step time / stopwise-memory's (above 1 means stopwise is faster)")
    print()

    verdicts: dict[str, Any] = {}
    # Target 1: speed versus the fastest peer.
    peers = [e for e in entries if e.adapter.is_peer and e.ok and e.samples]
    name1 = f"stopwise (memory) >= {SPEED_TARGET:g}x faster per step than the fastest peer"
    if base is None:
        verdicts["speed"] = {"result": "n/a", "why": "stopwise (memory) was not measured"}
        print(f"[N/A ] {name1}: stopwise (memory) was not measured")
    elif not peers:
        verdicts["speed"] = {"result": "n/a", "why": "no peer measured"}
        print(f"[N/A ] {name1}: no peer was measured")
    else:
        fastest = min(peers, key=lambda e: median(e.samples))
        speedup = median(fastest.samples) / base
        ok = speedup >= SPEED_TARGET
        verdicts["speed"] = {
            "result": "pass" if ok else "fail",
            "fastest_peer": fastest.adapter.key,
            "speedup": speedup,
        }
        print(
            f"[{'PASS' if ok else 'FAIL'}] {name1}: fastest peer is {fastest.adapter.label} at "
            f"{_us(median(fastest.samples))} µs/step, {speedup:,.2f}x stopwise's {_us(base)} µs/step"
        )

    # Targets 2 and 3: SQLite's addition per step (paired by round), and against a raw commit.
    commit_ms = median(raw) if raw else None
    if commit_ms is not None:
        print(f"raw two-row WAL commit: {commit_ms:.3f} ms (median of {len(raw)} rounds)")
    for cls in (StopwiseSQLite, StopwiseSQLiteOffload):
        sql = _find(entries, cls)
        if sql is None:
            continue
        name2 = f"{sql.adapter.label} adds <= {SQLITE_TARGET_MS:g} ms/step (median)"
        if mem is None or not (mem.ok and sql.ok and mem.samples and sql.samples):
            why = f"stopwise (memory) and {sql.adapter.label} were not both measured"
            verdicts[sql.adapter.key] = {"result": "n/a", "why": why}
            print(f"[N/A ] {name2}: {why}")
            continue
        by_round = dict(zip(mem.rounds, mem.samples, strict=True))
        diffs = [s - by_round[r] for r, s in zip(sql.rounds, sql.samples, strict=True) if r in by_round]
        extra_ms = median(diffs) * 1e3
        ok = extra_ms <= SQLITE_TARGET_MS
        verdict: dict[str, Any] = {
            "result": "pass" if ok else "fail",
            "extra_ms_per_step": extra_ms,
            "diffs_ms": [d * 1e3 for d in diffs],
        }
        print(
            f"[{'PASS' if ok else 'FAIL'}] {name2}: +{extra_ms:.3f} ms/step "
            f"(median of {len(diffs)} paired runs; memory {_us(median(mem.samples))} µs/step, "
            f"SQLite {_us(median(sql.samples))} µs/step)"
        )
        if commit_ms is not None:
            ratio = extra_ms / commit_ms
            met = ratio <= RAW_RATIO_TARGET
            verdict |= {"raw_commit_ms": commit_ms, "over_raw_commit": ratio, "raw_result": "pass" if met else "fail"}
            print(
                f"[{'PASS' if met else 'FAIL'}] {sql.adapter.label} adds <= {RAW_RATIO_TARGET:g}x a raw commit "
                f"per step: {ratio:.1f}x ({extra_ms:.3f} ms / {commit_ms:.3f} ms)"
            )
        verdicts[sql.adapter.key] = verdict

    return {
        "benchmark": "step_overhead",
        "steps": args.steps,
        "runs": args.runs,
        "yield_per_step": args.yield_per_step,
        "python": platform.python_version(),
        "platform": f"{platform.system()} {platform.machine()}",
        "cpus": os.cpu_count(),
        "frameworks": results,
        "verdicts": verdicts,
    }


def _raw_of(child: dict[str, Any]) -> float | None:
    """A child run's raw commit (ms), which each of its SQLite verdicts repeats."""
    return next((v["raw_commit_ms"] for v in child["verdicts"].values() if "raw_commit_ms" in v), None)


def compare_trees(args: argparse.Namespace) -> dict[str, Any]:
    """``--src``: rounds of one child run per tree (order rotated), then each tree's medians side by side."""
    trees = [os.path.abspath(t) for t in args.src]
    rounds: dict[str, list[dict[str, Any]]] = {t: [] for t in trees}
    for r in range(args.runs):
        shift = r % len(trees)
        for tree in trees[shift:] + trees[:shift]:
            if not args.no_progress:
                print(f"  round {r + 1}/{args.runs}: {tree}", file=sys.stderr, flush=True)
            with tempfile.TemporaryDirectory(prefix="stopwise-bench-") as tmp:
                out = os.path.join(tmp, "round.json")
                cmd = [sys.executable, os.path.abspath(__file__), "--runs", str(CHILD_RUNS), "--steps", str(args.steps)]
                cmd += ["-q", "--json", out, *(["--only", *args.only] if args.only else [])]
                cmd += ["--yield-per-step"] if args.yield_per_step else []
                cmd += ["--cpu"] if args.cpu else []
                env = {**os.environ, "PYTHONPATH": tree}
                subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL)
                with open(out, encoding="utf-8") as fh:
                    rounds[tree].append(json.load(fh))
    print()
    print(
        f"Per-step time by source tree: {args.steps} steps/run, {args.runs} rounds of a child process per tree, "
        f"{CHILD_RUNS} timed runs each" + (", CPU time of each child" if args.cpu else "")
    )
    # The raw commit does not depend on the tree: every child's figure counts, so the trees share one baseline.
    raw_ms = [_raw_of(d) for data in rounds.values() for d in data]
    raw_ms = [x for x in raw_ms if x is not None]
    raw = median(raw_ms) if raw_ms else None
    if raw:
        print(f"raw two-row WAL commit: {raw:.3f} ms (median of {len(raw_ms)} children's medians, all trees)")
    print()
    summary: dict[str, Any] = {}
    for tree, data in rounds.items():
        keys = [k for k, rec in data[0]["frameworks"].items() if rec.get("samples_us_per_step")]
        per_step = {k: median([x for d in data for x in d["frameworks"][k]["samples_us_per_step"]]) for k in keys}
        added: dict[str, float] = {}
        for k in keys:
            if "diffs_ms" in data[0]["verdicts"].get(k, {}):
                added[k] = median([x for d in data for x in d["verdicts"][k]["diffs_ms"]])
        print(tree)
        for k in keys:
            line = f"  {k:<24} {per_step[k]:>9,.1f} µs/step"
            if k in added:
                line += f"   adds {added[k]:.3f} ms/step"
                if raw:
                    line += f" = {added[k] / raw:.1f}x a raw commit"
            print(line)
        summary[tree] = {"median_us_per_step": per_step, "added_ms_per_step": added, "raw_commit_ms": raw}
    return {"benchmark": "step_overhead", "steps": args.steps, "runs": args.runs, "trees": summary}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=200, help="steps per run (default 200)")
    parser.add_argument(
        "--runs",
        type=int,
        default=None,
        help=f"timed runs per framework (default {DEFAULT_RUNS}, {QUICK_RUNS} with --quick)",
    )
    parser.add_argument("--quick", action="store_true", help=f"fewer timed runs ({QUICK_RUNS})")
    parser.add_argument(
        "--only", nargs="+", metavar="NAME", help=f"frameworks to run: {', '.join(a.key for a in ADAPTERS)}"
    )
    parser.add_argument(
        "--yield-per-step",
        action="store_true",
        help="fake model yields to the event loop once per step, as a real model call would",
    )
    parser.add_argument("--json", metavar="PATH", help="also write the figures as JSON")
    parser.add_argument(
        "--cpu",
        action="store_true",
        help="time this process's CPU (time.process_time, all its threads) instead of the wall clock: on a shared "
        "machine other processes' load and I/O stalls do not count",
    )
    parser.add_argument("--strict", action="store_true", help="exit with status 1 when a target fails")
    parser.add_argument("-q", "--no-progress", action="store_true", help="no progress lines on stderr")
    parser.add_argument(
        "--src", action="append", default=[], metavar="DIR", help="a source tree to measure (repeatable), side by side"
    )
    args = parser.parse_args(argv)
    if args.steps < 1:
        parser.error("--steps must be >= 1")
    if args.runs is None:
        args.runs = QUICK_RUNS if args.quick else DEFAULT_RUNS
    if args.runs < 1:
        parser.error("--runs must be >= 1")

    if args.cpu:
        CLOCK[0] = time.process_time
    if args.src:
        data = compare_trees(args)
        if args.json:
            with open(args.json, "w", encoding="utf-8") as fh:
                json.dump(data, fh, indent=2)
        return 0
    entries = [Entry(cls(args.steps, yield_per_step=args.yield_per_step)) for cls in select_adapters(args.only)]
    raw: list[float] = []
    asyncio.run(measure(entries, args.runs, progress=not args.no_progress, raw=raw))
    data = report(entries, args, raw)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(data, fh, indent=2)
    failed = any("fail" in (v.get("result"), v.get("raw_result")) for v in data["verdicts"].values())
    return 1 if (args.strict and failed) else 0


if __name__ == "__main__":
    sys.exit(main())
