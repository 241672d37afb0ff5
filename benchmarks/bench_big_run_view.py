"""`stopwise show`, `show --json`, `report` and `serve`'s run page on one big run: time, peak RSS and how much they
print or write.

Two runs are generated here with a scripted agent on a SQLite file (real runs of the loop, nothing copied):

  steps     a run of ``--steps`` steps (default 10,000), each a tool call with a short result
  result    a run of 2 steps whose one tool returns ``--mb`` MB (default 10) of text

Each command runs in a process of its own per source tree (``--src DIR``, repeatable: the tree first on
``PYTHONPATH``), its peak RSS read as it exits (``getrusage(RUSAGE_SELF)``; the runs are generated in another
child, so what a command inherits from this small process is at most about 20 MB of it); serve's run page is
``Viewer.run_page`` in that process, what the server answers a GET with. The bytes printed or written are what
reaches the terminal or the browser. Nothing is asserted: the figures are for docs/cli.md.

Usage:
  python benchmarks/bench_big_run_view.py [--steps 10000] [--mb 10] [--src DIR ...] [--db-dir DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_SERVE_PAGE = """
import sys
from pathlib import Path
from stopwise._cli.serve import Viewer
page = Viewer(Path(sys.argv[1]), {}, "csrf").run_page(sys.argv[2])
Path(sys.argv[3]).write_text(page, encoding="utf-8")
"""


async def _generate(path: Path, steps: int, mb: int) -> dict[str, str]:
    from stopwise import Agent, FunctionModel, Reply, Role, SQLiteStore, ToolCall, tool
    from stopwise.runtime import Runner

    @tool
    def page(n: int) -> str:
        """Read a page.

        Args:
            n: The page number.
        """
        return f"page {n}: " + "lorem ipsum " * 4

    @tool
    def download(url: str) -> str:
        """Download a document.

        Args:
            url: Where.
        """
        line = "<p>\x1b[31m a hostile web page line \u202e with controls</p>\n"
        return line * (mb * 1_000_000 // len(line))

    def pager(request: object) -> Reply | str:
        seen = sum(1 for m in request.messages if m.role is Role.TOOL)  # type: ignore[attr-defined]
        if seen >= steps - 1:
            return "read them all"
        return Reply(tool_calls=(ToolCall("page", {"n": seen + 1}),))

    def downloader(request: object) -> Reply | str:
        seen = sum(1 for m in request.messages if m.role is Role.TOOL)  # type: ignore[attr-defined]
        if seen:
            return "downloaded"
        return Reply(tool_calls=(ToolCall("download", {"url": "https://example.org/big"}),))

    agents = {
        "steps": Agent(name="pager", model=FunctionModel(pager), tools=(page,), max_steps=steps + 1),
        "result": Agent(name="downloader", model=FunctionModel(downloader), tools=(download,)),
    }
    runs = {}
    async with Runner(SQLiteStore(path)) as runner:
        for name, agent in agents.items():
            started = time.perf_counter()
            result = await runner.run(agent, "go")
            print(f"generated {name}: {result.status.value}, {time.perf_counter() - started:.1f} s", file=sys.stderr)
            runs[name] = result.run_id
    return runs


_WRAP = """
import atexit, resource, runpy, sys
atexit.register(lambda: sys.stderr.write(f"\\npeak-rss-kb {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}\\n"))
what, sys.argv = sys.argv[1], sys.argv[1:]
if what == "-m":
    sys.argv = ["stopwise", *sys.argv[1:]]
    runpy.run_module("stopwise", run_name="__main__", alter_sys=True)
else:
    exec(compile(what, "<bench>", "exec"))
"""


def _measure(src: str, argv: list[str], out: Path) -> tuple[float, float, int]:
    """Seconds, peak RSS (MB, the process's own) and stdout bytes of ``python ARGV`` with ``src`` first on the
    path. ``ARGV`` starts with ``-m`` (the command line) or the code to run."""
    env = {**os.environ, "PYTHONPATH": os.path.abspath(src)}
    started = time.perf_counter()
    with out.open("w", encoding="utf-8") as f:
        done = subprocess.run(
            [sys.executable, "-c", _WRAP, *argv], stdout=f, stderr=subprocess.PIPE, env=env, text=True
        )
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{argv[:4]}: exit {done.returncode}: {done.stderr[-500:]}")
    peak_kb = int(done.stderr.rsplit("peak-rss-kb ", 1)[1].split()[0])
    return seconds, peak_kb / 1024, out.stat().st_size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--mb", type=int, default=10)
    parser.add_argument("--src", action="append", default=[], help="a source tree to time (default: src)")
    parser.add_argument("--db-dir", help="where to write the database (default: a temporary folder)")
    parser.add_argument("--generate", metavar="DB", help=argparse.SUPPRESS)  # the child that writes the runs
    args = parser.parse_args()
    if args.generate:
        print(json.dumps(asyncio.run(_generate(Path(args.generate), args.steps, args.mb))))
        return
    trees = args.src or ["src"]
    folder = Path(args.db_dir or tempfile.mkdtemp(prefix="stopwise-bench-view-"))
    folder.mkdir(parents=True, exist_ok=True)
    db = folder / "big.db"
    if db.exists():
        db.unlink()
    # Generated in a process of its own: a child's peak RSS counts what it inherited when forked, so this process
    # must stay small (it is about 20 MB; every figure below includes at most that).
    env = {**os.environ, "PYTHONPATH": os.path.abspath(trees[-1])}
    argv = [sys.executable, __file__, "--generate", str(db), "--steps", str(args.steps), "--mb", str(args.mb)]
    made = subprocess.run(argv, env=env, capture_output=True, text=True, check=True)
    print(made.stderr, end="")
    runs = json.loads(made.stdout.splitlines()[-1])
    print(f"database: {db} ({db.stat().st_size / 1e6:.1f} MB)\n")
    print(f"{'tree':<28} {'run':<7} {'command':<12} {'seconds':>8} {'peak RSS MB':>12} {'output':>12}")
    for tree in trees:
        for name, run_id in runs.items():
            commands = {
                "show": ["-m", "show", run_id, "--db", str(db)],
                "show --json": ["-m", "show", run_id, "--db", str(db), "--json"],
                "report": ["-m", "report", run_id, "--db", str(db), "-o", str(folder / "r.html")],
                "serve page": [_SERVE_PAGE, str(db), run_id, str(folder / "page.html")],
            }
            for label, argv in commands.items():
                out = folder / "out.txt"
                seconds, peak, size = _measure(tree, argv, out)
                written = {"report": folder / "r.html", "serve page": folder / "page.html"}.get(label)
                if written is not None:
                    size = written.stat().st_size
                print(f"{tree[-28:]:<28} {name:<7} {label:<12} {seconds:>8.2f} {peak:>12.0f} {size:>12,}", flush=True)


if __name__ == "__main__":
    main()
