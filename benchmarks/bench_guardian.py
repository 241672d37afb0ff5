"""Per-turn cost of the guardian's offline path: RuleEvaluator (and the threshold policy) on a 50-step history.

Target: policy + RuleEvaluator with a 50-step history under 0.5 ms per turn (median).

A synthetic run of realistic steps (searches, reads, writes, some errors, results of 100 to 600 characters) is
logged as messages and projected with ``project(..., last_k=50)``, exactly as the guardian does. Projections are
built before timing; only the evaluator and the policy are timed, with ``time.perf_counter`` around each call.

Four figures, each the median (and p90) over many turns; the turns are timed in several rounds and the round
whose median is the median of the rounds is reported, so a burst of load from another process skews one round,
not the figure:
- turn, steady state: one evaluator per run, as the guardian holds it; each turn the window slides by one new
  step, so the integrity scores of results already seen come from its cache. This is the per-turn cost of a run.
- turn, cold: a fresh evaluator for every turn (its data already loaded), so nothing is remembered from earlier
  turns: the cost of the first turn of a resumed run with a long history, the worst case.
- turn, wordless run: the steady state on a computer-use run (calls with coordinates only, empty results), the
  window the stagnation and drift checks for textless steps answer with a constant.
- pre-execution risk: the risk question on a pending call.
Each turn figure covers the five turn conditions plus ``ThresholdPolicy.decide``.
- turn, whole consultation in a run: the ``latency_ms`` the guardian recorded for its turn decisions past step
  ``--steps`` of a real run (``Agent(guardian=Guardian())``, an instant scripted model and tool): the projection,
  the policy inputs, the evaluator and the policy, as a run pays them. This one is not covered by the target.
- wide step (``--wide``, default 50 and 500 calls): one step whose calls each return an 8,000-character result,
  projected as the guardian does and answered by a fresh evaluator (each result arrives once): the default
  ``Guardian().step_chars`` budget beside no budget (``step_chars=None``, every result read whole, as before the
  budget), with the characters of results the evaluator read; and a real run whose one reply makes that many
  calls: the recorded latency of the risk question per call (a reply's calls share one projection of the run).
- repeat streak (``--streak``, default 2,000): a real run that makes the same call every step under a policy whose
  ``repeat_limit`` never fires, and one that cycles three calls; the recorded turn latency of their first and last
  100 steps (the repeat counts must not walk back the whole spin every step).

``--src DIR`` (twice or more) compares source trees instead: the four turn figures above, measured by this file in
one subprocess per tree (``PYTHONPATH=DIR``, no wide step, no streak), ``--pairs`` times with the trees' order
alternating, so that a burst of load from another process falls on both sides of a pair; it prints each tree's
median over the pairs and the median of the per-pair ratios against the first tree. ``--src <old>/src --src src``
is a before and an after.

Usage:
    python benchmarks/bench_guardian.py [--steps 50] [--turns 400] [--wide 50 500] [--streak 2000] [--json PATH]
                                        [--strict] [--src DIR --src DIR ... [--pairs 5]]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

from stopwise.guardian import DEFAULT_CONDITIONS, Guardian, Projection, project
from stopwise.guardian.evaluators.rule import RuleEvaluator
from stopwise.guardian.policy import PolicyInputs, ThresholdPolicy
from stopwise.messages import Message, Role, ToolCall, encode_tool_result, error_tool_result

TARGET_MS = 0.5

GOAL = "Reconcile the March bank statement with the ledger and post the unmatched transactions to #finance."
CRITERIA = ("statement matched against the ledger", "unmatched transactions listed", "report posted to #finance")
TOOLS = ("search_docs", "get_ledger", "get_statement", "match_transactions", "read_file", "post_message")
_WORD_TEXT = (
    "invoice ledger statement balance march transfer vendor payment card fee interest account entry matched "
    "unmatched report total currency receipt journal posted cleared pending approved reference customer batch"
)
WORDS = _WORD_TEXT.split()


def _result(rng: random.Random, n: int) -> str:
    size = rng.randrange(100, 600)
    parts: list[str] = []
    while sum(len(p) + 1 for p in parts) < size:
        parts.append(f"{rng.choice(WORDS)} {rng.randrange(10, 99999)}")
    return f"batch {n}: " + " ".join(parts)


def history(steps: int, seed: int = 7) -> list[Message]:
    """A run's rows: the goal, then per step an assistant row with one call and its result (every 9th fails)."""
    rng = random.Random(seed)
    rows = [Message.user(GOAL)]
    for n in range(steps):
        tool = TOOLS[n % len(TOOLS)]
        call = ToolCall(tool, {"query": f"{rng.choice(WORDS)} {n}", "page": n % 4}, id=f"c{n}")
        rows.append(Message(Role.ASSISTANT, f"Step {n}: checking the {rng.choice(WORDS)} entries.", (call,)))
        if n % 9 == 8:
            rows.append(error_tool_result("permission denied for table ledger", tool_call_id=call.id))
        else:
            rows.append(encode_tool_result(_result(rng, n), tool_call_id=call.id))
    return rows


def wordless_history(steps: int, seed: int = 7) -> list[Message]:
    """A computer-use run's rows: the goal, then per step a call with coordinates only and an empty result (a
    window the stagnation and drift checks read as textless and wordless)."""
    rng = random.Random(seed)
    rows = [Message.user(GOAL)]
    for n in range(steps):
        args = {"action": "left_click", "coordinate": [rng.randrange(1280), rng.randrange(800)]}
        call = ToolCall("computer", args, id=f"c{n}")
        rows.append(Message(Role.ASSISTANT, "", (call,)))
        rows.append(encode_tool_result("", tool_call_id=call.id))
    return rows


def projections(steps: int, turns: int, wordless: bool = False) -> list[Projection]:
    """One projection per turn of a run that already has ``steps`` steps: the window slides by one each turn."""
    rows = wordless_history(steps + turns) if wordless else history(steps + turns)
    out = []
    for t in range(turns):
        upto = 1 + 2 * (steps + t)  # the goal row, then two rows per step
        out.append(project(rows[:upto], goal=GOAL, criteria=CRITERIA, last_k=steps))
    return out


def _time_turns(evaluator: RuleEvaluator, ps: list[Projection]) -> list[float]:
    policy = ThresholdPolicy()
    turn = DEFAULT_CONDITIONS.turn()
    inputs = PolicyInputs({})
    samples = []
    for p in ps:
        start = time.perf_counter()
        answers = evaluator.answer_all(p, turn)
        policy.decide(answers.answers, turn, inputs)
        samples.append((time.perf_counter() - start) * 1000.0)
    return samples


def _time_risk(evaluator: RuleEvaluator, ps: list[Projection]) -> list[float]:
    risk = DEFAULT_CONDITIONS.pre_execution()
    samples = []
    for p in ps:
        call = ToolCall("post_message", {"channel": "#finance"})
        pending = Projection(p.goal, p.criteria, p.steps, call, "irreversible")
        start = time.perf_counter()
        evaluator.answer_all(pending, risk)
        samples.append((time.perf_counter() - start) * 1000.0)
    return samples


def _recorded_turns(steps: int, turns: int) -> list[float]:
    """The recorded ``latency_ms`` of the turn decisions past step ``steps`` of a real guardian run."""
    from stopwise import Agent, FunctionModel, Guardian, Reply, Risk, Runner, tool

    @tool(risk=Risk.READ_ONLY)  # the tool of bench_long_runs.py: its runs go the whole way
    async def bump(n: int) -> int:
        """Add one."""
        return n + 1

    total = steps + turns
    calls = [0]

    def fn(request: Any) -> Reply:
        calls[0] += 1
        if calls[0] < total:
            return Reply(tool_calls=[ToolCall("bump", {"n": calls[0]})])
        return Reply(text="done")

    agent = Agent(
        name="b", instructions="x", model=FunctionModel(fn), tools=[bump], guardian=Guardian(), max_steps=None
    )
    result = asyncio.run(Runner().run(agent, "go"))
    if result.status != "completed":
        raise SystemExit(f"the guardian run ended {result.status} ({result.completion_reason}) at step {result.steps}")
    return [d.latency_ms for d in result.decisions if d.kind == "turn" and d.step > steps]


def _page(rng: random.Random, n: int, size: int = 8000) -> str:
    text = f"page {n}:"
    while len(text) < size:
        text += f" {rng.choice(WORDS)} {rng.randrange(10, 99999)}"
    return text[:size]


def wide_step(calls: int, step_chars: int | None, reps: int = 3) -> dict[str, float]:
    """One step of ``calls`` calls, each returning 8,000 characters: the median whole turn (projection, fresh
    evaluator, policy) over ``reps``, and the characters of results the projection kept."""
    rng = random.Random(calls)
    tool_calls = tuple(ToolCall("read_file", {"path": f"statements/{n}.txt"}, id=f"c{n}") for n in range(calls))
    rows = [Message.user(GOAL), Message(Role.ASSISTANT, "Reading every statement.", tool_calls)]
    rows += [encode_tool_result(_page(rng, n), tool_call_id=f"c{n}") for n in range(calls)]
    base = RuleEvaluator()
    turn = DEFAULT_CONDITIONS.turn()
    samples, kept = [], 0
    for _ in range(reps):
        evaluator = RuleEvaluator(coefficients=base.coefficients, integrity_model=base.integrity_model)
        start = time.perf_counter()
        p = project(rows, goal=GOAL, criteria=CRITERIA, result_chars=8000, step_chars=step_chars)
        answers = evaluator.answer_all(p, turn)
        ThresholdPolicy().decide(answers.answers, turn, PolicyInputs({}))
        samples.append((time.perf_counter() - start) * 1000.0)
        kept = sum(len(c.result) for c in p.steps[-1].calls)
    return {"median_ms": statistics.median(samples), "result_chars_read": kept, "n": reps}


def wide_reply(calls: int) -> dict[str, float]:
    """A real run whose one reply makes ``calls`` calls of an instant tool: the recorded latency of the risk
    question per call (median, and of the last 10 calls), and the run's wall time."""
    from stopwise import Agent, Guardian, Reply, Risk, Runner, ScriptedModel, tool

    @tool(risk=Risk.READ_ONLY)
    async def fetch(n: int) -> str:
        """Fetch a statement line."""
        return f"Statement line {n}: balance 12.00 EUR, cleared."

    reply = Reply(tool_calls=tuple(ToolCall("fetch", {"n": n}, id=f"c{n}") for n in range(calls)))
    agent = Agent(name="b", instructions="x", model=ScriptedModel([reply, "done"]), tools=[fetch], guardian=Guardian())
    start = time.perf_counter()
    result = asyncio.run(Runner().run(agent, "go"))
    wall = time.perf_counter() - start
    pre = [d.latency_ms for d in result.decisions if d.kind == "pre_execution"]
    return {"pre_median_ms": statistics.median(pre), "pre_last_10_ms": statistics.median(pre[-10:]), "wall_s": wall}


def repeat_streak(steps: int, period: int = 1) -> dict[str, float]:
    """The recorded turn latency of the first and last 100 steps of a run that repeats one call every step (with
    ``period`` > 1: a cycle of that many calls, ``bump(0)``, ``bump(1)``..., made again and again)."""
    from stopwise import Agent, FunctionModel, Guardian, Reply, Risk, Runner, tool

    @tool(risk=Risk.READ_ONLY)
    async def bump(n: int) -> int:
        """Add one."""
        return n + 1

    def fn(request: Any) -> Reply:
        if request.step >= steps:
            return Reply(text="done")
        return Reply(tool_calls=[ToolCall("bump", {"n": request.step % period})])

    guardian = Guardian(
        conditions=DEFAULT_CONDITIONS.only(["risk", "integrity"]), policy=ThresholdPolicy(repeat_limit=10**9)
    )
    agent = Agent(name="b", instructions="x", model=FunctionModel(fn), tools=[bump], guardian=guardian, max_steps=None)
    result = asyncio.run(Runner().run(agent, "go"))
    turns = [d.latency_ms for d in result.decisions if d.kind == "turn"]
    return {
        "first_100_median_ms": statistics.median(turns[:100]),
        "last_100_median_ms": statistics.median(turns[-100:]),
    }


def summary(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "median_ms": statistics.median(ordered),
        "p90_ms": ordered[int(0.9 * (len(ordered) - 1))],
        "n": len(ordered),
    }


_PAIRED = ("turn_steady_state", "turn_cold_cache", "pre_execution_risk", "turn_wordless", "turn_recorded_in_run")


def paired(trees: list[str], pairs: int, steps: int, turns: int, rounds: int) -> dict[str, dict[str, list[float]]]:
    """Each tree's turn medians (ms), one list per figure, from ``pairs`` runs of this file per tree.

    The trees run in turn, their order reversed every other pair, each in a fresh interpreter that imports
    stopwise from that tree only."""
    out: dict[str, dict[str, list[float]]] = {tree: {key: [] for key in _PAIRED} for tree in trees}
    for i in range(pairs):
        for tree in trees if i % 2 == 0 else trees[::-1]:
            print(f"pair {i + 1}/{pairs}: {tree}", file=sys.stderr, flush=True)
            with tempfile.TemporaryDirectory() as tmp:
                path = os.path.join(tmp, "figures.json")
                cmd = [sys.executable, os.path.abspath(__file__), "--steps", str(steps), "--turns", str(turns)]
                cmd += ["--rounds", str(rounds), "--wide", "--streak", "0", "--json", path]
                env = {**os.environ, "PYTHONPATH": os.path.abspath(tree)}
                subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL)
                with open(path, encoding="utf-8") as f:
                    figures = json.load(f)
            for key in _PAIRED:
                out[tree][key].append(figures[key]["median_ms"])
    return out


def print_paired(results: dict[str, dict[str, list[float]]], steps: int, turns: int, rounds: int) -> None:
    trees = list(results)
    first = results[trees[0]]
    pairs = len(first[_PAIRED[0]])
    print(f"stopwise guardian, {steps}-step history, {rounds} rounds of {turns} turns per run, {pairs} pairs")
    print(f"python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} CPUs")
    print("median ms over the pairs; x: the median of the per-pair ratios against the first tree")
    print("figure".ljust(22) + "".join(t[-30:].rjust(34) for t in trees))
    for key in _PAIRED:
        cells = []
        for tree in trees:
            ms = results[tree][key]
            ratio = statistics.median(a / b for a, b in zip(ms, first[key], strict=True))
            cells.append(f"{statistics.median(ms):.3f}" + ("" if tree == trees[0] else f" ({ratio:.3f}x)"))
        print(key.ljust(22) + "".join(c.rjust(34) for c in cells))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=50, help="steps in the history the guardian sees (default 50)")
    parser.add_argument("--turns", type=int, default=400, help="timed turns per round (default 400)")
    parser.add_argument("--rounds", type=int, default=5, help="rounds per figure (default 5)")
    parser.add_argument("--wide", type=int, nargs="*", default=[50, 500], help="calls in a wide step (default 50 500)")
    parser.add_argument(
        "--streak", type=int, default=2000, help="steps of the repeat-streak run (default 2000; 0: skip)"
    )
    parser.add_argument("--json", help="write the figures to this file")
    parser.add_argument("--strict", action="store_true", help=f"exit 1 when the steady-state median >= {TARGET_MS} ms")
    parser.add_argument("--src", action="append", default=[], help="a source tree to compare (repeatable)")
    parser.add_argument("--pairs", type=int, default=5, help="runs per tree with --src, order alternating (default 5)")
    args = parser.parse_args(argv)
    if args.src:
        results = paired(args.src, args.pairs, args.steps, args.turns, args.rounds)
        print_paired(results, args.steps, args.turns, args.rounds)
        if args.json:
            with open(args.json, "w", encoding="utf-8") as f:
                json.dump(results, f, indent=2)
        return 0

    ps = projections(args.steps, args.turns)
    assert all(len(p.steps) == args.steps for p in ps)
    # The async entry point, once, to show it is the same work; timings use the synchronous body.
    warm = RuleEvaluator()
    asyncio.run(warm.evaluate(ps[0], DEFAULT_CONDITIONS.only(c.name for c in DEFAULT_CONDITIONS.turn())))
    for _ in range(3):
        _time_turns(warm, ps[:20])

    coefficients, model = warm.coefficients, warm.integrity_model
    wordless = projections(args.steps, args.turns, wordless=True)
    rounds: dict[str, list[list[float]]] = {
        "turn_steady_state": [],
        "turn_cold_cache": [],
        "pre_execution_risk": [],
        "turn_wordless": [],
    }
    for _ in range(args.rounds):
        gc.collect()
        gc.disable()
        try:
            rounds["turn_steady_state"].append(_time_turns(RuleEvaluator(), ps))
            rounds["turn_cold_cache"].append(
                [_time_turns(RuleEvaluator(coefficients=coefficients, integrity_model=model), [p])[0] for p in ps]
            )
            rounds["pre_execution_risk"].append(_time_risk(RuleEvaluator(), ps))
            rounds["turn_wordless"].append(_time_turns(RuleEvaluator(), wordless))
        finally:
            gc.enable()
    figures = {}
    for key, samples in rounds.items():
        by_median = sorted(samples, key=statistics.median)
        figures[key] = summary(by_median[len(by_median) // 2])
    figures["turn_recorded_in_run"] = summary(_recorded_turns(args.steps, args.turns))
    print(
        f"stopwise guardian: RuleEvaluator {warm.model_version}, {args.steps}-step history, "
        f"{args.rounds} rounds of {args.turns} turns"
    )
    print(f"python {platform.python_version()} on {platform.machine()}")
    print(f"{'figure':42} {'median ms':>10} {'p90 ms':>8}")
    labels = {
        "turn_steady_state": "turn: 5 conditions + policy (steady state)",
        "turn_cold_cache": "turn: 5 conditions + policy (cold cache)",
        "pre_execution_risk": "pre-execution risk question",
        "turn_wordless": "turn: steady state, a wordless run",
        "turn_recorded_in_run": "turn: whole consultation, recorded in a run",
    }
    for key, f in figures.items():
        print(f"{labels[key]:42} {f['median_ms']:10.3f} {f['p90_ms']:8.3f}")
    budget = Guardian().step_chars
    wide: dict[str, Any] = {}
    for calls in args.wide:
        bounded, unbounded = wide_step(calls, budget), wide_step(calls, None)
        wide[str(calls)] = {"step_chars": bounded, "unbounded": unbounded}
        print(
            f"wide step, {calls} calls x 8,000 chars: {bounded['median_ms']:.1f} ms reading "
            f"{bounded['result_chars_read']:,} chars (step_chars={budget:,}); without a budget "
            f"{unbounded['median_ms']:.1f} ms reading {unbounded['result_chars_read']:,} "
            f"({unbounded['median_ms'] / bounded['median_ms']:.1f}x)"
        )
    replies = {str(calls): wide_reply(calls) for calls in args.wide}
    for calls, r in replies.items():
        print(
            f"one reply of {calls} calls in a run: risk question {r['pre_median_ms']:.3f} ms per call (median; last "
            f"10: {r['pre_last_10_ms']:.3f} ms), run {r['wall_s']:.2f} s"
        )
    streak = repeat_streak(args.streak) if args.streak else None
    cycle = repeat_streak(args.streak, period=3) if args.streak else None
    for name, spin in (("repeat streak", streak), ("cycle of 3 calls", cycle)):
        if spin is not None:
            print(
                f"{name} over {args.streak} steps: turn median {spin['first_100_median_ms']:.3f} ms (first 100), "
                f"{spin['last_100_median_ms']:.3f} ms (last 100)"
            )
    median = figures["turn_steady_state"]["median_ms"]
    verdict = "meets" if median < TARGET_MS else "MISSES"
    print(f"target: turn median < {TARGET_MS} ms -> {verdict} ({median:.3f} ms)")
    if args.json:
        payload: dict[str, Any] = {
            "steps": args.steps,
            "turns": args.turns,
            "rounds": args.rounds,
            "target_ms": TARGET_MS,
            **figures,
            "wide_step": wide,
            "wide_reply": replies,
            "repeat_streak": streak,
            "repeat_cycle": cycle,
        }
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(payload, f, indent=2)
    return 1 if args.strict and median >= TARGET_MS else 0


if __name__ == "__main__":
    sys.exit(main())
