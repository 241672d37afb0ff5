"""What ``stopwise eval`` costs on a large trace file: 100,000 records through the ``RuleEvaluator``, every metric.

Two files are made from the development set (``evals/data/devset.jsonl``), then timed phase by phase as the
command runs them (``read_traces``, ``predict``, ``build_report``):

- **cycled**: the dev set repeated to N records. Records with the same state are asked in one evaluator call,
  so this measures the harness (reading, grouping, metrics) with the evaluator out of the way;
- **distinct**: every record a state of its own (the goal, the tool results and the final answer carry a case
  number, the text is rendered again), so the evaluator answers all N: the worst case, evaluator-bound.

Target: evaluating 100,000 records and computing every metric in under 10 s (per file).

``--src DIR`` (repeatable) times each source tree in a fresh interpreter of its own on the same files, one tree
after the other per file, and prints them side by side (before and after a change, in one run).

Usage:
  python benchmarks/bench_evals.py [--records 100000] [--only cycled|distinct] [--src DIR ...] [--json PATH]
                                   [--strict]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from stopwise.evals import predict_sync, read_traces
from stopwise.evals.report import build_report
from stopwise.evals.traces import projection_from_data
from stopwise.guardian import DEFAULT_CONDITIONS
from stopwise.guardian.evaluators.rule import RuleEvaluator

ROOT = Path(__file__).resolve().parent.parent
DEVSET = ROOT / "evals" / "data" / "devset.jsonl"
TARGET_S = 10.0


def _distinct(record: dict[str, Any], case: int) -> dict[str, Any]:
    """The record with a state of its own: a case number in the goal, each tool result and the final answer."""
    p = json.loads(json.dumps(record["projection"]))
    tag = f" [case {case}]"
    p["goal"] += tag
    for step in p["steps"]:
        for call in step["calls"]:
            call["result"] += tag
    if p.get("final") is not None:
        p["final"] += tag
    out = dict(record, id=f"{record['id']}#{case}", projection=p)
    out["text"] = projection_from_data(p).text
    return out


def _write(path: Path, n: int, distinct: bool) -> None:
    lines = DEVSET.read_text(encoding="utf-8").splitlines()
    base = [json.loads(line) for line in lines]
    with path.open("w", encoding="utf-8") as f:
        for i in range(n):
            if distinct:
                f.write(json.dumps(_distinct(base[i % len(base)], i // len(base)), ensure_ascii=False) + "\n")
            else:
                f.write(lines[i % len(lines)] + "\n")


def _cpu() -> float:
    """CPU seconds of this process and of its children that have ended (the forked workers, once shut down)."""
    own, ended = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + ended.ru_utime + ended.ru_stime


def _run(path: Path) -> dict[str, Any]:
    # As stopwise eval does (the library leaves the collector alone; the command, owning its process, pauses it
    # while it reads and answers, and freezes the records once read).
    cpu0 = _cpu()
    t0 = time.perf_counter()
    gc.disable()
    traces = read_traces(path)
    gc.enable()
    gc.freeze()
    t1 = time.perf_counter()
    gc.disable()
    predictions = predict_sync(RuleEvaluator(), traces.records)
    gc.enable()
    t2 = time.perf_counter()
    report = build_report(predictions, DEFAULT_CONDITIONS, split="all", traces=[str(path)])
    t3 = time.perf_counter()
    figures = {
        "records": len(traces.records),
        "calls": predictions.calls,
        "read_s": t1 - t0,
        "evaluate_s": t2 - t1,
        "metrics_s": t3 - t2,
        "total_s": t3 - t0,
        "cpu_s": _cpu() - cpu0,
        "model_version": predictions.model_version,
        "conditions": len(report.conditions),
    }
    del traces, predictions, report
    gc.unfreeze()  # the next file starts from a clean heap
    gc.collect()
    return figures


def _run_in(tree: str, path: Path, out: Path) -> dict[str, Any]:
    """``_run`` in a fresh interpreter importing stopwise from ``tree``."""
    env = {**os.environ, "PYTHONPATH": tree}
    cmd = [sys.executable, __file__, "--traces", str(path), "--json", str(out)]
    subprocess.run(cmd, env=env, check=True)
    figures: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--only", choices=("cycled", "distinct"))
    parser.add_argument("--json", metavar="PATH", help="write the figures as JSON")
    parser.add_argument("--strict", action="store_true", help="exit 1 when a file misses the target")
    parser.add_argument("--src", action="append", default=[], help="a source tree to time (repeatable)")
    parser.add_argument("--traces", metavar="PATH", help=argparse.SUPPRESS)  # a child of --src: time this file
    args = parser.parse_args(argv)
    if args.traces:
        figures = _run(Path(args.traces))
        Path(args.json).write_text(json.dumps(figures) + "\n", encoding="utf-8")
        return 0
    modes = [args.only] if args.only else ["cycled", "distinct"]
    trees = [os.path.abspath(t) for t in args.src] or [""]
    print(
        f"bench_evals: {args.records:,} records per file, RuleEvaluator, Python {platform.python_version()}, "
        f"{os.cpu_count()} CPUs; target < {TARGET_S:g} s per file (read + evaluate + every metric)"
    )
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for mode in modes:
            path = Path(tmp) / f"{mode}.jsonl"
            started = time.perf_counter()
            _write(path, args.records, mode == "distinct")
            made = time.perf_counter() - started
            for tree in trees:
                figures = _run_in(tree, path, Path(tmp) / "figures.json") if tree else _run(path)
                results[f"{mode} {tree}".strip()] = figures | {"file_mb": path.stat().st_size / 1e6, "made_in_s": made}
    header = [
        "file",
        "records",
        "evaluator calls",
        "read s",
        "evaluate s",
        "metrics s",
        "total s",
        "us/record",
        "CPU s (all processes)",
    ]
    rows = []
    missed = []
    for mode, r in results.items():
        rows.append(
            [
                mode,
                f"{r['records']:,}",
                f"{r['calls']:,}",
                f"{r['read_s']:.2f}",
                f"{r['evaluate_s']:.2f}",
                f"{r['metrics_s']:.2f}",
                f"{r['total_s']:.2f}",
                f"{1e6 * r['total_s'] / r['records']:.0f}",
                f"{r['cpu_s']:.2f}",
            ]
        )
        if r["total_s"] >= TARGET_S:
            missed.append(mode)
    widths = [max(len(x) for x in col) for col in zip(header, *rows, strict=True)]
    for row in (header, ["-" * w for w in widths], *rows):
        print("  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True))))
    first = next(iter(results.values()))
    print(
        f"model version: {first['model_version']}; file sizes: "
        + ", ".join(f"{m} {r['file_mb']:.0f} MB" for m, r in results.items())
    )
    for mode, r in results.items():
        print(f"{mode}: {'OK' if r['total_s'] < TARGET_S else 'MISSED'} ({r['total_s']:.2f} s against {TARGET_S:g} s)")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    return 1 if args.strict and missed else 0


if __name__ == "__main__":
    sys.exit(main())
