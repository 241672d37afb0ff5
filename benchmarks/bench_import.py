"""What ``import stopwise`` costs: wall and CPU time of the import in fresh processes, and where it goes.

Each round starts one fresh interpreter per source tree (interleaved, so a busy machine slows every tree alike)
and times ``import stopwise`` inside it (``time.perf_counter`` and ``time.process_time`` around the import only:
Python's own start-up is left out); the figure is the median over the rounds, with the best beside it. One
more run per tree under ``python -X importtime`` splits the import by package (self time summed per top-level
package, the smallest of ``--importtime-runs`` runs each, so load spikes fall out) and counts the modules loaded.

Target (issue 15): ``import stopwise`` under 0.3 s.

``--cli`` times the ``stopwise`` command instead, as a user or a script meets it: the whole process (start-up,
imports, the command, exit) of ``stopwise --help``, ``stopwise runs`` and ``stopwise show RUN`` on a small log
(one ``stopwise demo``, written once by the last tree), each command run in every tree in turn per round (paired
and interleaved), with the median per tree and the median of the paired ratios against the first tree.

Usage:
  python benchmarks/bench_import.py [--src DIR ...] [--rounds 15] [--importtime-runs 5] [--top 12]
  python benchmarks/bench_import.py --cli --src OLD/src --src NEW/src [--rounds 15]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time

TARGET_S = 0.3

_TIMED = (
    "import time\n"
    "t, c = time.perf_counter(), time.process_time()\n"
    "import stopwise\n"
    "print(time.perf_counter() - t, time.process_time() - c)\n"
)


def _env(tree: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.path.abspath(tree)}


def timed(tree: str) -> tuple[float, float]:
    done = subprocess.run([sys.executable, "-c", _TIMED], env=_env(tree), capture_output=True, text=True, check=True)
    wall, cpu = done.stdout.split()
    return float(wall), float(cpu)


def importtime(tree: str, runs: int) -> tuple[int, dict[str, float]]:
    """Modules loaded, and seconds of self time per top-level package (``stopwise.x`` kept apart)."""
    best: dict[str, int] = {}
    for _ in range(runs):
        cmd = [sys.executable, "-X", "importtime", "-c", "import stopwise"]
        err = subprocess.run(cmd, env=_env(tree), capture_output=True, text=True, check=True).stderr
        for line in err.splitlines():
            if not line.startswith("import time:") or "self [us]" in line:
                continue
            self_us, _, name = line[len("import time:") :].split("|")
            best[name.strip()] = min(best.get(name.strip(), 10**12), int(self_us))
    groups: collections.Counter[str] = collections.Counter()
    for name, us in best.items():
        parts = name.split(".")
        groups[".".join(parts[:2]) if parts[0] == "stopwise" else parts[0]] += us
    return len(best), {k: v / 1e6 for k, v in groups.items()}


def _command(tree: str, args: list[str], cwd: str) -> float:
    """Seconds the whole ``stopwise ARGS`` process took (it must exit 0)."""
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "stopwise", *args], env=_env(tree), cwd=cwd, capture_output=True, check=True)
    return time.perf_counter() - start


def cli(trees: list[str], rounds: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        db = os.path.join(tmp, "demo.db")
        _command(trees[-1], ["demo", "--db", db], tmp)
        with sqlite3.connect(db) as conn:
            (run_id,) = conn.execute("SELECT run_id FROM runs ORDER BY rowid LIMIT 1").fetchone()
        conn.close()
        commands = {
            "stopwise --help": ["--help"],
            "stopwise runs": ["runs", "--db", db],
            "stopwise show RUN": ["show", run_id, "--db", db],
        }
        samples = {(name, t): list[float]() for name in commands for t in trees}
        for _ in range(rounds):
            for name, args in commands.items():
                for tree in trees:
                    samples[name, tree].append(_command(tree, args, tmp))
    width = 30
    print(f"the stopwise command, whole process, {rounds} paired rounds (median, best in brackets)")
    print(f"load average at the end: {os.getloadavg()[0]:.1f}\n")
    print("".ljust(22) + "".join(t[-width:].rjust(width + 2) for t in trees) + "  ratio (paired median)")
    for name in commands:
        cells = "".join(
            f"{statistics.median(samples[name, t]) * 1e3:,.0f} ms ({min(samples[name, t]) * 1e3:,.0f})".rjust(width + 2)
            for t in trees
        )
        ratio = statistics.median(b / a for a, b in zip(samples[name, trees[0]], samples[name, trees[-1]], strict=True))
        print(name.ljust(22) + cells + f"  {ratio:.2f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--src", action="append", default=[], help="a source tree (repeatable); default: ./src")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--importtime-runs", type=int, default=5)
    ap.add_argument("--top", type=int, default=12)
    ap.add_argument("--json", metavar="PATH")
    ap.add_argument("--cli", action="store_true", help="time the stopwise command (see above) instead")
    args = ap.parse_args()
    trees = args.src or [os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")]
    if args.cli:
        cli(trees, args.rounds)
        return

    samples: dict[str, list[tuple[float, float]]] = {t: [] for t in trees}
    for _ in range(args.rounds):
        for tree in trees:
            samples[tree].append(timed(tree))
    split = {tree: importtime(tree, args.importtime_runs) for tree in trees}

    width = 30
    print(f"import stopwise, {args.rounds} fresh processes per tree (median, best in brackets)\n")
    print("".ljust(30) + "".join(t[-width:].rjust(width + 2) for t in trees))
    for i, what in enumerate(("wall", "CPU")):
        cells = []
        for tree in trees:
            xs = [s[i] for s in samples[tree]]
            cells.append(f"{statistics.median(xs) * 1e3:,.0f} ms ({min(xs) * 1e3:,.0f})".rjust(width + 2))
        print(what.ljust(30) + "".join(cells))
    print("modules loaded".ljust(30) + "".join(str(split[t][0]).rjust(width + 2) for t in trees))
    totals = collections.Counter[str]()
    for tree in trees:
        totals.update(split[tree][1])
    print("\nself time by package (-X importtime, smallest of each module's runs):")
    for name, _ in totals.most_common(args.top):
        print(
            f"  {name}".ljust(30)
            + "".join(f"{split[t][1].get(name, 0.0) * 1e3:,.1f} ms".rjust(width + 2) for t in trees)
        )
    print("  total".ljust(30) + "".join(f"{sum(split[t][1].values()) * 1e3:,.1f} ms".rjust(width + 2) for t in trees))
    last = statistics.median(s[0] for s in samples[trees[-1]])
    print(
        f"\n[{'PASS' if last < TARGET_S else 'FAIL'}] import stopwise {last * 1e3:,.0f} ms (median wall) < {TARGET_S} s"
    )
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({t: {"samples": samples[t], "modules": split[t][0], "by_package": split[t][1]} for t in trees}, f)


if __name__ == "__main__":
    main()
