"""The CLI and the store on a large database: one run's commands must not read the other runs; whole-database
commands must read it in constant memory; retention must give the space back.

The database is generated here: one real run of a guardian agent (3 steps, its decision records) is written by
the SQLite store, then copied under fresh session and run ids until the file holds ``--runs`` runs (rows copied
with SQL, the run id inside each record rewritten too, so every copy is a run of its own; copy i is dated i
seconds after the first). Then, timed in this process (the CLI's own work, not Python's start-up, which
``--subprocess`` adds):

  guardian stats --run R     the decisions of one run (a run in the middle of the file)
  replay --run R             the same run replayed
  show R                     the run as `stopwise show` prints it
  runs                       the runs of the 20 most recent sessions
  list_sessions(20)          the 20 most recent sessions

With ``--whole``: ``guardian stats DB`` (every session) in a process of its own per tree, its time and peak RSS,
on this file and on one of ``--small`` runs (generated too), so the two sizes show whether memory grows with the
database. With ``--gc``: ``expire_sessions`` removing the older half of the runs (the last tree only), its time
and the file's size before and after (the write-ahead log included). The gc comes last: it changes the file.

Targets (issue 15, at 100,000 runs): the one-run commands under 0.5 s each; ``list_sessions(20)`` under 5 ms;
whole-database stats in the same memory at 10,000 and 100,000 runs.

``--src DIR`` (repeatable) times each source tree on the same file in a subprocess, side by side.

Usage:
  python benchmarks/bench_big_db.py [--runs 100000] [--db PATH] [--src DIR ...] [--subprocess]
                                    [--whole [--small 10000]] [--gc]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from typing import Any

TARGET_CLI_S = 0.5
TARGET_LIST_MS = 5.0


async def _template(path: str) -> None:
    from stopwise import Agent, FunctionModel, Guardian, Reply, Risk, Runner, SQLiteStore, ToolCall, tool

    @tool(risk=Risk.READ_ONLY)
    def lookup(q: str) -> str:
        """Look something up."""
        return f"result for {q}"

    model = FunctionModel(
        lambda r: Reply(tool_calls=[ToolCall("lookup", {"q": f"q{r.step}"})]) if r.step < 3 else Reply("done")
    )
    store = SQLiteStore(path)
    agent = Agent("big", "Answer.", model, tools=[lookup], guardian=Guardian())
    await Runner(store).run(agent, "find it", session_id="template")
    await store.close()


def generate(path: str, runs: int) -> None:
    """A database of ``runs`` runs: the template run and its copies."""
    asyncio.run(_template(path))
    conn = sqlite3.connect(path)
    session = conn.execute("SELECT * FROM sessions WHERE session_id='template'").fetchone()
    s_cols = [d[0] for d in conn.execute("SELECT * FROM sessions LIMIT 0").description]
    run = conn.execute("SELECT * FROM runs WHERE session_id='template'").fetchone()
    r_cols = [d[0] for d in conn.execute("SELECT * FROM runs LIMIT 0").description]
    log = conn.execute("SELECT * FROM log WHERE session_id='template'").fetchall()
    l_cols = [d[0] for d in conn.execute("SELECT * FROM log LIMIT 0").description]
    old_run = run[r_cols.index("run_id")]
    sql = {
        name: f"INSERT INTO {name} ({', '.join(cols)}) VALUES ({', '.join('?' for _ in cols)})"
        for name, cols in (("sessions", s_cols), ("runs", r_cols), ("log", l_cols))
    }

    def rows(i: int) -> tuple[tuple[Any, ...], tuple[Any, ...], list[tuple[Any, ...]]]:
        sid, rid = f"s{i:07d}", f"r{i:07d}".ljust(len(old_run), "0")
        t = 1_700_000_000.0 + i
        s = dict(zip(s_cols, session, strict=True)) | {"session_id": sid, "created_at": t, "updated_at": t}
        r = dict(zip(r_cols, run, strict=True)) | {"session_id": sid, "run_id": rid, "created_at": t, "updated_at": t}
        entries = []
        for row in log:
            e = dict(zip(l_cols, row, strict=True)) | {"session_id": sid, "run_id": rid, "created_at": t}
            if e.get("records"):
                e["records"] = e["records"].replace(old_run, rid)
            entries.append(tuple(e[c] for c in l_cols))
        return tuple(s[c] for c in s_cols), tuple(r[c] for c in r_cols), entries

    batch = 5000
    for start in range(1, runs, batch):
        made = [rows(i) for i in range(start, min(runs, start + batch))]
        conn.executemany(sql["sessions"], [m[0] for m in made])
        conn.executemany(sql["runs"], [m[1] for m in made])
        conn.executemany(sql["log"], [e for m in made for e in m[2]])
        conn.commit()
    conn.close()


def _cli(argv: list[str]) -> tuple[float, int]:
    from stopwise.cli import main

    out = io.StringIO()
    t0 = time.perf_counter()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = main(argv)
    return time.perf_counter() - t0, code


def measure(path: str, run_id: str, subproc: bool) -> dict[str, Any]:
    from stopwise import SQLiteStore

    out: dict[str, Any] = {}
    for name, argv in (
        ("guardian stats --run", ["guardian", "stats", path, "--run", run_id]),
        ("replay --run", ["replay", path, "--run", run_id]),
        ("show RUN", ["show", run_id, "--db", path]),
        ("runs (20 sessions)", ["runs", "--db", path]),
    ):
        if subproc:
            t0 = time.perf_counter()
            done = subprocess.run([sys.executable, "-m", "stopwise", *argv], capture_output=True, text=True)
            out[name] = {"s": time.perf_counter() - t0, "exit": done.returncode}
        else:
            _cli(argv)  # warm: imports, the file's pages in the OS cache
            seconds, code = _cli(argv)
            out[name] = {"s": seconds, "exit": code}

    async def listing() -> float:
        store = SQLiteStore(path)
        await store.list_sessions(20)
        t0 = time.perf_counter()
        for _ in range(20):
            await store.list_sessions(20)
        elapsed = (time.perf_counter() - t0) / 20
        await store.close()
        return elapsed

    out["list_sessions(20)"] = {"s": asyncio.run(listing()), "exit": 0}
    return out


def whole(path: str, tree: str) -> dict[str, Any]:
    """``stopwise guardian stats DB`` over every session, in a process of its own: seconds and peak RSS."""
    env = {**os.environ, "PYTHONPATH": os.path.abspath(tree)}
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "stopwise", "guardian", "stats", path],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return {"s": time.perf_counter() - t0, "rss_mb": usage.ru_maxrss / 1024, "exit": proc.returncode}


def collect(path: str, tree: str) -> dict[str, Any]:
    """Expire the older half of the generated runs (the last tree only: older trees have no retention)."""
    code = (
        "import asyncio, json, os, sys, time\n"
        "from datetime import UTC, datetime\n"
        "from stopwise.store.sqlite import SQLiteStore\n"
        "path, cutoff = sys.argv[1], float(sys.argv[2])\n"
        "size = lambda: sum(os.path.getsize(p) for p in (path, path + '-wal') if os.path.exists(p))\n"
        "async def main():\n"
        "    store = SQLiteStore(path)\n"
        "    before = size()\n"
        "    t0 = time.perf_counter()\n"
        "    e = await store.expire_sessions(datetime.fromtimestamp(cutoff, UTC))\n"
        "    s = time.perf_counter() - t0\n"
        "    await store.close()\n"
        "    out = {'s': s, 'sessions': e.sessions, 'entries': e.entries, 'before': before, 'after': size()}\n"
        "    print(json.dumps(out))\n"
        "asyncio.run(main())\n"
    )
    conn = sqlite3.connect(path)
    n = conn.execute("SELECT count(*) FROM sessions").fetchone()[0]
    conn.close()
    cutoff = 1_700_000_000.0 + n // 2
    env = {**os.environ, "PYTHONPATH": os.path.abspath(tree)}
    done = subprocess.run([sys.executable, "-c", code, path, str(cutoff)], env=env, check=True, capture_output=True)
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def _generate(path: str, runs: int, tree: str) -> None:
    print(f"generating {runs:,} runs in {path} ...", file=sys.stderr, flush=True)
    t0 = time.perf_counter()
    # Written by the first (oldest) tree: a newer one migrates the file when it opens it, never the reverse.
    env = {**os.environ, "PYTHONPATH": os.path.abspath(tree)}
    code = "import sys; sys.path.insert(0, sys.argv[1]); import bench_big_db as b; "
    code += "b.generate(sys.argv[2], int(sys.argv[3]))"
    here = os.path.dirname(os.path.abspath(__file__))
    subprocess.run([sys.executable, "-c", code, here, path, str(runs)], env=env, check=True)
    print(f"  {time.perf_counter() - t0:.0f} s, {os.path.getsize(path) / 1e6:,.0f} MB", file=sys.stderr)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=100_000)
    ap.add_argument("--db", help="use (or create) this file instead of a temporary one")
    ap.add_argument("--src", action="append", default=[])
    ap.add_argument("--subprocess", action="store_true", help="time the commands as separate processes")
    ap.add_argument("--whole", action="store_true", help="also whole-database stats: time and peak RSS")
    ap.add_argument("--small", type=int, default=10_000, help="with --whole: the smaller database's runs")
    ap.add_argument("--gc", action="store_true", help="last, expire the older half of the runs (last tree)")
    ap.add_argument("--child", nargs=2, metavar=("DB", "RUN"), help=argparse.SUPPRESS)
    args = ap.parse_args()

    if args.child:
        print(json.dumps(measure(args.child[0], args.child[1], args.subprocess)))
        return

    with tempfile.TemporaryDirectory(prefix="stopwise-big-") as tmp:
        path = args.db or os.path.join(tmp, "big.db")
        if not os.path.exists(path):
            _generate(path, args.runs, (args.src or ["src"])[0])
        conn = sqlite3.connect(path)
        total = conn.execute("SELECT count(*) FROM runs").fetchone()[0]
        run_id = conn.execute("SELECT run_id FROM runs ORDER BY run_id LIMIT 1 OFFSET ?", (total // 2,)).fetchone()[0]
        conn.close()
        trees = args.src or [os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")]
        results = {}
        for tree in trees:
            print(f"timing {tree} ...", file=sys.stderr, flush=True)
            cmd = [sys.executable, os.path.abspath(__file__), "--child", path, run_id]
            cmd += ["--subprocess"] if args.subprocess else []
            env = {**os.environ, "PYTHONPATH": os.path.abspath(tree)}
            done = subprocess.run(cmd, env=env, check=True, stdout=subprocess.PIPE, text=True)
            results[tree] = json.loads(done.stdout)
        wholes: dict[str, dict[str, dict[str, Any]]] = {}
        if args.whole:
            small = os.path.join(tmp, "small.db")
            _generate(small, args.small, (args.src or ["src"])[0])
            for tree in trees:
                print(f"whole-database stats, {tree} ...", file=sys.stderr, flush=True)
                wholes[tree] = {"small": whole(small, tree), "big": whole(path, tree)}
        gc_result = collect(path, trees[-1]) if args.gc else None

    print()
    how = "separate processes (Python start-up included)" if args.subprocess else "in process, after one warm call"
    print(f"A database of {total:,} runs; one run's commands timed {how}")
    print()
    print("operation".ljust(24) + "".join(t[-40:].rjust(42) for t in trees))
    for op in next(iter(results.values())):
        cells = []
        for t in trees:
            r = results[t][op]
            s = r["s"]
            figure = f"{s * 1e3:,.2f} ms" if s < 1 else f"{s:,.2f} s"
            cells.append((figure + ("" if r["exit"] == 0 else f" (exit {r['exit']})")).rjust(42))
        print(op.ljust(24) + "".join(cells))
    if wholes:
        print()
        print("guardian stats DB (every session)".ljust(36) + "".join(t[-40:].rjust(42) for t in trees))
        for size, label in (("small", f"{args.small:,} runs"), ("big", f"{total:,} runs")):
            cells = []
            for t in trees:
                w = wholes[t][size]
                tail = "" if w["exit"] == 0 else f" (exit {w['exit']})"
                cells.append(f"{w['s']:,.1f} s, peak RSS {w['rss_mb']:,.0f} MB{tail}".rjust(42))
            print(f"  {label}".ljust(36) + "".join(cells))
    if gc_result is not None:
        g = gc_result
        print()
        print(
            f"gc of the older half ({trees[-1][-40:]}): {g['sessions']:,} sessions, {g['entries']:,} entries removed "
            f"in {g['s']:,.1f} s (VACUUM included); file {g['before'] / 1e6:,.0f} MB -> {g['after'] / 1e6:,.0f} MB"
        )
    last = results[trees[-1]]
    ok = all(last[op]["s"] <= TARGET_CLI_S for op in ("guardian stats --run", "replay --run"))
    ok = ok and last["list_sessions(20)"]["s"] * 1e3 <= TARGET_LIST_MS
    print()
    print(f"[{'PASS' if ok else 'FAIL'}] commands <= {TARGET_CLI_S} s each, list_sessions(20) <= {TARGET_LIST_MS} ms")


if __name__ == "__main__":
    main()
