"""A run approved at every step: what each approval costs as the run's log grows.

An instant scripted model asks, on every step but the last, for one call of ``send_email`` (``@tool(
needs_approval=True)``, arguments differing every step). Every step therefore suspends the run, and the caller
settles it with ``Runner.resume(agent, session, {call: Approve()})``: the resume restores the run from the log,
runs the approved call, asks the model again and suspends on the next call. ``--cli`` approvals of them go through
``stopwise approve SESSION CALL --agent FILE.py:agent --db PATH`` in a second process instead (SQLite only: the
command line keeps its log there), timed from the command's start to its exit (an interpreter's start included).

Printed per store (SQLite on a file; PostgreSQL on the tests' throwaway cluster, ``tests/_pgcluster.py``, with
``--postgres``), per configuration (``plain``: the agent above; ``guardian``: the same with ``Guardian()``, whose
decisions and config the log then holds) and per run length (``--steps``, default 2000; one run gives every
point up to its length):
  approved           the median ``resume()`` call (restore, the step it runs, the next suspension) over the ten
                     approvals before each of steps 100 / 500 / 1,000 / 2,000 the run reaches, ms;
  plain              the same agent with ``needs_approval=False``: its median step (the gap between two model
                     calls) at the same points, ms. The ratio approval / plain step is what an approval adds to the
                     step it settles; a per-approval time that stays flat means a resume does not grow with the log;
  appro s / plain s  the seconds of all the steps before each point: what a run of that length costs in all.
  stopwise approve   (``--cli N``, SQLite) N approvals of the first configuration's longest run through the command
                     line in a second process, ms, the interpreter's start included.
``--parts`` then times, on the finished run's whole log, each piece a resume reads before its step runs (median of
five, ms): reading the session from the store, reading the run's records (``RunLog.of``: every record typed before
the lazy ``RunLog``, their tags since), folding the leg (``restore_leg`` on a fresh ``RunLog``: since the lazy one,
it types the records the leg keeps), the suspended step, the history's rows. What is left of a resume is its step:
the model call, the tool, the guardian, the commit, and the result (``result_of``, which copies the history).
``--langgraph`` also times a peer's interrupt/resume on a SQLite checkpointer when ``langgraph-checkpoint-sqlite``
is installed (it is not in the project's extras; the figure is left out otherwise).

Nothing is asserted. ``--src DIR`` (repeatable) runs the benchmark once per source tree in a subprocess and prints
the trees side by side: ``--src /work/main/src --src src`` compares a before and an after in one run, interleaved
(each configuration on every tree in turn, so that the trees meet about the same load), with the per-approval
ratio of the first tree to each other one at every point.

Usage:
  python benchmarks/bench_approvals.py [--steps 2000 ...] [--only plain guardian] [--postgres | --dsn DSN]
                                       [--cli 3] [--parts] [--langgraph] [--src DIR ...] [--json PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import itertools
import json
import operator
import os
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from typing import Annotated, Any, TypedDict

from _postgres import throwaway_dsn

POINTS = (100, 500, 1000, 2000)
WINDOW = 10
"""Approvals (or plain steps) before each point whose median is that point's figure."""
REPEAT_PARTS = 5
CONFIGS = ("plain", "guardian")
PROMPT = "send_email a note to every user, one email each"
"""The task (with ``Guardian()``, a prompt the calls do not drift from: the run reaches its last step)."""

AGENT_FILE = '''
from stopwise import Agent, FunctionModel, Guardian, Reply, Risk, ToolCall, tool

STEPS = {steps}


@tool(needs_approval={approval}, risk=Risk.REVERSIBLE)
async def send_email(to: str, body: str) -> str:
    """Send an email."""
    return "sent to " + to


def reply(request):
    # The step from the history the model is sent, not from a counter: a second process (``stopwise approve``)
    # continues the same script.
    k = sum(1 for m in request.messages if m.role.value == "assistant") + 1
    if k < STEPS:
        return Reply(tool_calls=[ToolCall("send_email", {{"to": "user%d@example.com" % k, "body": "note %d" % k}})])
    return Reply(text="done")


agent = Agent(
    name="mailer", model=FunctionModel(reply), tools=[send_email], max_steps=STEPS + 10, guardian={guardian}
)
'''


def _agent_file(folder: str, steps: int, approval: bool, guardian: bool) -> str:
    path = os.path.join(folder, f"mailer_{steps}_{int(approval)}_{int(guardian)}.py")
    with open(path, "w") as f:
        f.write(AGENT_FILE.format(steps=steps, approval=approval, guardian="Guardian()" if guardian else None))
    return path


def _store(folder: str, kind: str, dsn: str | None) -> Any:
    if kind == "memory":
        from stopwise import MemoryStore

        return MemoryStore()
    if kind == "postgres":
        from stopwise.store.postgres import PostgresStore

        return PostgresStore(dsn)
    from stopwise import SQLiteStore

    return SQLiteStore(os.path.join(folder, "approvals.db"))


def _windows(times: list[float], offset: int) -> dict[str, float]:
    """Median ms of the ``WINDOW`` times before each point (``times[i]`` is step ``i + offset``'s), and the seconds
    of all the times before it: a run of that many steps' total, less its first step."""
    out = {}
    for p in POINTS:
        end = p - offset
        if end <= len(times):
            out[f"at_{p}"] = statistics.median(times[max(0, end - WINDOW) : end]) * 1e3
            out[f"sum_{p}"] = sum(times[:end])
    return out


async def _approved(kind: str, steps: int, guardian: bool, dsn: str | None, cli: int, parts: bool) -> dict[str, Any]:
    """Per-approval ms at each point, the total s, and (``cli``) the ms of approvals through ``stopwise approve``."""
    from stopwise import Approve, Runner
    from stopwise._load import load_agent
    from stopwise.runtime import result_from_log

    with tempfile.TemporaryDirectory(prefix="stopwise-approvals-") as tmp:
        target = _agent_file(tmp, steps, True, guardian) + ":agent"
        agent = load_agent(target)
        store = _store(tmp, kind, dsn)
        session = f"s{steps}-{os.getpid()}-{time.monotonic_ns()}"
        # The command line's approvals, spread over the run: the first at a tenth of it, the last near its end.
        by_cli = {steps * (i + 1) // (cli + 1) for i in range(cli)} if kind == "sqlite" else set()
        times: list[float] = []
        cli_ms: dict[int, float] = {}
        runner = Runner(store=store)
        gc.collect()
        t0 = time.perf_counter()
        result = await runner.run(agent, PROMPT, session_id=session)
        while result.status.value == "suspended":
            step = result.steps
            calls = [p.call_id for p in result.pending]
            if step in by_cli:
                await store.close()  # the second process writes the file; this one opens it afresh after
                db = os.path.join(tmp, "approvals.db")
                cmd = [sys.executable, "-m", "stopwise", "approve", session, *calls, "--agent", target, "--db", db]
                t = time.perf_counter()
                # Blocking on purpose: nothing else runs meanwhile, the second process has the database alone.
                done = subprocess.run(cmd, capture_output=True, text=True)  # noqa: ASYNC221
                cli_ms[step] = (time.perf_counter() - t) * 1e3
                if done.returncode not in (0, 1):
                    raise SystemExit(f"stopwise approve failed ({done.returncode}): {done.stderr}")
                store = _store(tmp, kind, dsn)
                runner = Runner(store=store)
                loaded = await store.load_session(session)
                assert loaded is not None and loaded.last_run is not None
                result = result_from_log(agent, loaded, loaded.last_run)
                times.append(times[-1] if times else 0.0)  # a placeholder: the CLI's figure is reported apart
                continue
            t = time.perf_counter()
            result = await runner.resume(agent, session, dict.fromkeys(calls, Approve()))
            times.append(time.perf_counter() - t)
        total = time.perf_counter() - t0
        if result.status.value != "completed" or result.steps != steps:
            raise SystemExit(f"approved run ended {result.status.value} at step {result.steps}, expected {steps}")
        read = await _parts(store, agent, runner, session) if parts else None
        await store.close()
    out: dict[str, Any] = {"total_s": total, **_windows(times, 1)}
    if cli_ms:
        out["cli_ms"] = cli_ms
    if read is not None:
        out["parts"] = read
    return out


async def _plain(kind: str, steps: int, guardian: bool, dsn: str | None) -> dict[str, Any]:
    """The same run without approvals: its median step (ms) at each point, and its total."""
    from stopwise import Runner
    from stopwise._load import load_agent
    from stopwise.models.testing import FunctionModel

    with tempfile.TemporaryDirectory(prefix="stopwise-approvals-") as tmp:
        agent = load_agent(_agent_file(tmp, steps, False, guardian) + ":agent")
        stamps: list[float] = []
        inner = agent.model

        async def stamped(request: Any) -> Any:
            stamps.append(time.perf_counter())
            return await inner.generate(request)

        import dataclasses

        agent = dataclasses.replace(agent, model=FunctionModel(stamped))
        store = _store(tmp, kind, dsn)
        runner = Runner(store=store)
        gc.collect()
        t0 = time.perf_counter()
        result = await runner.run(agent, PROMPT, session_id=f"p{steps}-{time.monotonic_ns()}")
        total = time.perf_counter() - t0
        await store.close()
        if result.status.value != "completed" or result.steps != steps:
            raise SystemExit(f"plain run ended {result.status.value} at step {result.steps}, expected {steps}")
    gaps = [b - a for a, b in itertools.pairwise(stamps)]
    return {"total_s": total, **_windows(gaps, 1)}


_PARTS = (
    ("load", "store.load_session: read and decode the session's rows"),
    ("parse", "RunLog.of: read the records (main: typed; now: tags)"),
    ("fold", "restore_leg: fold into a leg (now: types the kept ones)"),
    ("suspended", "read_suspended: the step the run waits on"),
    ("history", "SessionSnapshot.messages: the history's rows"),
)


async def _parts(store: Any, agent: Any, runner: Any, session: str) -> dict[str, float]:
    """Median ms (of ``REPEAT_PARTS``) of each part of what a resume reads, on the finished run's whole log: the
    pieces ``Runner.resume`` does before its step runs."""
    from stopwise._loop import restore_leg
    from stopwise._suspended import read_suspended
    from stopwise.records import RunLog

    snapshot = await store.load_session(session)
    run = snapshot.last_run
    entries = [e for e in snapshot.entries if e.run_id == run.run_id]
    run_log = RunLog.of(entries)
    parts: dict[str, list[float]] = {}

    async def timed(name: str, fn: Any) -> None:
        for _ in range(REPEAT_PARTS):
            t = time.perf_counter()
            got = fn()
            if asyncio.iscoroutine(got):
                await got
            parts.setdefault(name, []).append(time.perf_counter() - t)

    await timed("load", lambda: store.load_session(session))
    await timed("parse", lambda: RunLog.of(entries))
    # Each fold reads a fresh RunLog (built outside the timing): a RunLog types its records when first read, once.
    logs = iter([RunLog.of(entries) for _ in range(REPEAT_PARTS)])
    await timed(
        "fold", lambda: restore_leg(agent, store, runner, snapshot, run, fresh_budget=False, run_log=next(logs))
    )
    with contextlib.suppress(Exception):  # the finished run waits on nothing: read the last suspension's step
        await timed("suspended", lambda: read_suspended(snapshot, run, run_log))
    await timed("history", snapshot.messages)
    return {k: statistics.median(v) * 1e3 for k, v in parts.items()}


def measure(
    steps_list: list[int], stores: list[str], configs: list[str], dsn: str | None, cli: int, parts: bool
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kind in stores:
        for config in configs:
            guardian = config == "guardian"
            for steps in steps_list:
                print(f"  {kind} {config} {steps} ...", file=sys.stderr, flush=True)
                longest = steps == max(steps_list)
                cli_here = cli if longest and config == configs[0] else 0
                out[f"{kind} {config} {steps}"] = {
                    "approved": asyncio.run(_approved(kind, steps, guardian, dsn, cli_here, parts and longest)),
                    "plain": asyncio.run(_plain(kind, steps, guardian, dsn)),
                }
    return out


class LgState(TypedDict):
    """The peer graph's state: the conversation, appended to (LangGraph reads the annotations at module level)."""

    log: Annotated[list[dict[str, Any]], operator.add]


def _langgraph(steps: int) -> dict[str, Any] | None:
    """A LangGraph graph interrupted before every tool call and resumed with ``Command(resume=True)``: ms per
    resume at the same points, on its SQLite checkpointer (``langgraph-checkpoint-sqlite``) or, without it, its
    in-memory one (``saver`` says which). None without LangGraph."""
    try:
        import sqlite3

        from langgraph.graph import END, START, StateGraph
        from langgraph.types import Command, interrupt
    except ImportError:
        return None
    try:
        from langgraph.checkpoint.sqlite import SqliteSaver  # type: ignore[import-not-found]
    except ImportError:
        SqliteSaver = None

    def model(state: LgState) -> dict[str, Any]:
        k = sum(1 for m in state["log"] if m["role"] == "assistant") + 1
        call = {"to": f"user{k}@example.com", "body": f"note {k}"} if k < steps else None
        return {"log": [{"role": "assistant", "call": call}]}

    def tools(state: LgState) -> dict[str, Any]:
        interrupt({"approve": state["log"][-1]["call"]})
        return {"log": [{"role": "tool", "content": "sent to " + state["log"][-1]["call"]["to"]}]}

    def route(state: LgState) -> str:
        return "tools" if state["log"][-1]["call"] else END

    graph = StateGraph(LgState)
    graph.add_node("model", model)
    graph.add_node("tools", tools)
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", route)
    graph.add_edge("tools", "model")
    with tempfile.TemporaryDirectory(prefix="stopwise-lg-") as tmp:
        conn = sqlite3.connect(os.path.join(tmp, "lg.db"), check_same_thread=False)
        if SqliteSaver is not None:
            saver, saver_name = SqliteSaver(conn), "sqlite"
        else:
            from langgraph.checkpoint.memory import InMemorySaver

            saver, saver_name = InMemorySaver(), "memory"
        app = graph.compile(checkpointer=saver)
        config = {"configurable": {"thread_id": "t"}, "recursion_limit": 10 * steps}
        t0 = time.perf_counter()
        app.invoke({"log": []}, config)
        times = []
        for _ in range(steps - 1):
            t = time.perf_counter()
            app.invoke(Command(resume=True), config)
            times.append(time.perf_counter() - t)
        total = time.perf_counter() - t0
        conn.close()
    return {"total_s": total, "saver": saver_name, **_windows(times, 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, nargs="+", default=[2000])
    ap.add_argument("--postgres", action="store_true", help="also on PostgreSQL (the tests' throwaway cluster)")
    ap.add_argument("--dsn", help="the PostgreSQL to use instead of a throwaway cluster (implies --postgres)")
    ap.add_argument("--cli", type=int, default=3, help="approvals through `stopwise approve` in the longest run")
    ap.add_argument("--parts", action="store_true", help="what a resume reads, piece by piece, on the longest run")
    ap.add_argument("--langgraph", action="store_true", help="also LangGraph's interrupt/resume (its SQLite saver)")
    ap.add_argument("--memory", action="store_true", help="also stopwise's MemoryStore")
    ap.add_argument("--only", nargs="+", choices=CONFIGS, default=list(CONFIGS))
    ap.add_argument("--src", action="append", default=[])
    ap.add_argument("--json")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()

    if args.child:
        stores = (["memory"] if args.memory else []) + ["sqlite"] + (["postgres"] if args.dsn else [])
        print(json.dumps(measure(args.steps, stores, args.only, args.dsn, args.cli, args.parts)))
        return
    with ExitStack() as stack:
        dsn = args.dsn
        if args.postgres and dsn is None:
            dsn = throwaway_dsn(stack, "approvals")
        _compare(args, dsn)


def _compare(args: argparse.Namespace, dsn: str | None) -> None:
    trees = args.src or [os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")]
    results: dict[str, dict[str, Any]] = {tree: {} for tree in trees}
    # Interleaved: each configuration on every tree in turn, so the trees compared meet about the same load.
    for config in args.only:
        for tree in trees:
            print(f"measuring {tree} {config}", file=sys.stderr, flush=True)
            cmd = [sys.executable, os.path.abspath(__file__), "--child", "--steps", *map(str, args.steps)]
            cli = args.cli if config == args.only[0] else 0
            cmd += (
                ["--only", config, "--cli", str(cli)]
                + (["--memory"] if args.memory else [])
                + (["--parts"] if args.parts else [])
                + (["--dsn", dsn] if dsn else [])
            )
            env = {**os.environ, "PYTHONPATH": os.path.abspath(tree)}
            done = subprocess.run(cmd, env=env, check=True, stdout=subprocess.PIPE, text=True)
            results[tree].update(json.loads(done.stdout))
    peer = _langgraph(max(args.steps)) if args.langgraph else None

    print()
    print(f"approved: median resume() over the {WINDOW} approvals before each step, ms; plain: the same agent")
    print("without approvals, median step (gap between model calls), ms; 'appro s' / 'plain s': seconds of all the")
    print(f"steps before each point (a run of that length); Python {sys.version.split()[0]}, {os.cpu_count()} CPUs")
    for tree in trees:
        print()
        print(f"{tree}")
        heads = "".join(f"{'@' + format(p, ','):>16}" for p in POINTS)
        print(f"{'run':<22}{'':<10}{heads}{'total s':>10}")
        for key, r in results[tree].items():
            for what in ("approved", "plain"):
                row = r[what]
                cells = "".join(f"{row[f'at_{p}']:>16.2f}" if f"at_{p}" in row else f"{'-':>16}" for p in POINTS)
                print(f"{key:<22}{what:<10}{cells}{row['total_s']:>10.1f}")
            approved, plain = r["approved"], r["plain"]
            ratios = "".join(
                f"{approved[f'at_{p}'] / plain[f'at_{p}']:>15.0f}x" if f"at_{p}" in approved else f"{'-':>16}"
                for p in POINTS
            )
            print(f"{key:<22}{'ratio':<10}{ratios}{approved['total_s'] / plain['total_s']:>9.0f}x")
            for what in ("approved", "plain"):
                row = r[what]
                cells = "".join(f"{row[f'sum_{p}']:>16.2f}" if f"sum_{p}" in row else f"{'-':>16}" for p in POINTS)
                print(f"{key:<22}{what[:5] + ' s':<10}{cells}")
            for step, ms in sorted(approved.get("cli_ms", {}).items(), key=lambda kv: int(kv[0])):
                print(f"{key:<22}stopwise approve at step {step}: {ms:.0f} ms (a second process, its start included)")
            if "parts" in approved:
                parts = approved["parts"]
                print(f"{key:<22}what a resume reads at the run's end (all {key.split()[-1]} steps), ms:")
                for part, label in _PARTS:
                    if part in parts:
                        print(f"{'':<24}{label:<60}{parts[part]:>9.2f}")
    for tree in trees[1:]:
        print()
        print(f"per approval, {trees[0]} / {tree} (paired, interleaved):")
        for key, r in results[tree].items():
            before = results[trees[0]].get(key)
            if before is None:
                continue
            ratios = "".join(
                f"{before['approved'][f'at_{p}'] / r['approved'][f'at_{p}']:>15.2f}x"
                if f"at_{p}" in r["approved"]
                else f"{'-':>16}"
                for p in POINTS
            )
            total = before["approved"]["total_s"] / r["approved"]["total_s"]
            print(f"{key:<22}{'speedup':<10}{ratios}{total:>9.2f}x")
    if peer is not None:
        print()
        cells = "".join(f"{peer[f'at_{p}']:>16.2f}" if f"at_{p}" in peer else f"{'-':>16}" for p in POINTS)
        print(f"{'langgraph ' + peer['saver']:<22}{'resume':<10}{cells}{peer['total_s']:>10.1f}")
    elif args.langgraph:
        print("\nlanggraph: not installed; no peer figure")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"stopwise": results, "langgraph": peer}, f, indent=2)


if __name__ == "__main__":
    main()
