"""The repeat limit (a call, or a cycle of two to four steps, made ``repeat_limit`` times in a row) on real runs, as
a detector of a stuck run: does it fire on the runs that were cut off at their step limit, and not on the runs that
ended on an answer?

    python evals/evaluate_repeats.py extract --mirror DIR   # writes RUNS from the pinned commits (see below)
    python evals/evaluate_repeats.py [--limit 3] [--json evals/calibration/repeats_real.json]

A run's calls are replayed as the rows a stopwise run logs (``build_realset.rows_of``) and folded row by row with
the library's own ``Repeats`` (what the native loop keeps on its leg and the guardian's policy reads): the streak
fires at the first step where one call was made ``--limit`` times in a row, a cycle at the first step where
``Cycles.latest`` has ``--limit`` whole repetitions, as ``ThresholdPolicy`` compares them. Nothing here is fitted:
the figures describe the shipped rule, they do not choose it.

Positive ("stuck"): the run was cut off by its harness (WorkBench: LangChain's "Agent stopped due to iteration limit
or time limit"; HotpotQA ReAct: HALTED at its 6-step cap or its prompt budget; AutoGPT: ``reached_cutoff``).
Negative: the run ended on an answer. Per source: the firing rate on each class (streak only, cycle only, streak or
cycle), precision / recall of "fires" as a detector of a stuck run, the median step of the first firing on the
cut-off runs against their length (the steps it would have saved), two trivial baselines (fire when the run reaches
step N: N the detector's own median firing step, so both save as many steps; N the cut-off runs' median length),
and the false stops: runs that ended on a correct answer where it would have fired.

Sources (``RUNS``, one line a run: its calls, the outcome, provenance; no tool results):

- ``workbench``: every cut-off run of WorkBench's results files (olly-styles/WorkBench, MIT) and, as answered runs,
  the graded draw ``_real_workbench.sample`` (correct / incorrect by the benchmark's check: ``GRADES``). The draw is
  a sample of the answered runs, so precision is also given at the population's prevalence (``population``).
- ``hotpotqa``: ReAct on HotpotQA, the first trial of 100 questions (noahshinn/reflexion, MIT): correct, incorrect,
  halted.
- ``swe``: mini-SWE-agent (Gemini 3 Pro) on SWE-bench Verified, the realset's draw of 150 runs (gruckion/mini-swe-
  agent, MIT): every one of the 500 runs submitted, none was cut off, so only the answered class (resolved or not).
- ``autogpt``: AutoGPT's benchmark attempts transcribed in ``third_party/autogpt_benchmark`` (MIT): only attempts that
  ended on ``finish`` were transcribed (the cut-off ones are in report files too large to read here), so only the
  answered class; their string arguments are cut at 300 characters there.

Who&When is left out: none of its runs is labelled as cut off, and its converted calls carry no arguments (the code
a speaker ran is in the chat text), so a "same call" would be the same speaker running any code.

An argument whose canonical text (``canonical_args``) is longer than ``ARG_CHARS`` is stored as ``{"sha256": ...,
"head": ...}`` of that text: two calls are the same call exactly when the stored forms are equal.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import statistics
import sys
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stopwise.stop.repeats import Repeats, canonical_args

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import _real_workbench  # noqa: E402
import build_realset  # noqa: E402

RUNS = HERE / "third_party" / "repeat_runs" / "runs.jsonl"
ARG_CHARS = 120
FALSE_STOPS_SHOWN = 8
SHOWN_CALLS = 6
"""A false stop is shown with its last calls up to the firing (its spin), not its whole run."""
CORRECT = {"correct", "resolved", "success"}
STEP_LIMITS = {"workbench": 20, "hotpotqa": 6}
"""The harnesses' step caps (WorkBench: LangChain's ``max_iterations=20``, with a 120 s time limit that cuts some runs
sooner; reflexion's ReAct: ``max_steps=6``, or its prompt outgrowing 3,896 tokens). AutoGPT's cut-off is a time
limit; mini-SWE-agent's runs all ended on a submission."""


@dataclass(frozen=True)
class Run:
    """One recorded run: its calls in order (one call a step in every source here), how it ended."""

    source: str
    id: str
    cut_off: bool
    outcome: str
    calls: tuple[tuple[str, dict[str, Any]], ...]
    provenance: str


@dataclass(frozen=True)
class Firing:
    """Where the repeat limit first fired in a run (1-based step; None: never), and on what."""

    streak: int | None
    cycle: int | None
    reason: str | None

    @property
    def either(self) -> int | None:
        steps = [s for s in (self.streak, self.cycle) if s is not None]
        return min(steps) if steps else None


def fire(run: Run, limit: int) -> Firing:
    """Fold the run's rows with ``Repeats`` and note the first step at which each of the policy's two tests holds."""
    rows = build_realset.rows_of("", [("", tool, args, "", False) for tool, args in run.calls])
    repeats, step = Repeats(), 0
    streak_at = cycle_at = None
    reason = None
    for row in rows:
        repeats = repeats.then([row])
        if not row.tool_calls:
            continue
        step += 1
        if streak_at is None and repeats.streak.count >= limit:
            streak_at = step
            assert repeats.streak.key is not None
            reason = reason or f"the call {repeats.streak.key[0]} was made {repeats.streak.count} times in a row"
        cycle = repeats.cycles.latest
        if cycle_at is None and cycle is not None and cycle.count >= limit:
            cycle_at = step
            reason = reason or cycle.reason
    return Firing(streak_at, cycle_at, reason)


# --------------------------------------------------------------------------------------------------------------
# Figures


def _rate(k: int, n: int) -> float | None:
    return round(k / n, 3) if n else None


def _median(values: Sequence[int]) -> float | None:
    return float(statistics.median(values)) if values else None


def detector(fired: Sequence[bool], cut_off: Sequence[bool], answered_population: int | None) -> dict[str, Any]:
    """Firing rates per class, precision and recall of "fires" as "the run was cut off"."""
    tp = sum(f and c for f, c in zip(fired, cut_off, strict=True))
    fp = sum(f and not c for f, c in zip(fired, cut_off, strict=True))
    n_cut = sum(cut_off)
    n_ans = len(cut_off) - n_cut
    out: dict[str, Any] = {
        "fires_on_cut_off": _rate(tp, n_cut),
        "fires_on_answered": _rate(fp, n_ans),
        "precision": _rate(tp, tp + fp),
        "recall": _rate(tp, n_cut),
    }
    if answered_population is not None and n_ans and tp:
        # The answered runs are a draw: scale their false firings to every answered run of the source.
        out["precision_at_population"] = round(tp / (tp + fp / n_ans * answered_population), 3)
    return out


def figures(runs: Sequence[Run], limit: int, population: dict[str, int]) -> dict[str, Any]:
    firings = {r.id: fire(r, limit) for r in runs}
    table: dict[str, Any] = {}
    for source in sorted({r.source for r in runs}):
        mine = [r for r in runs if r.source == source]
        cut = [r.cut_off for r in mine]
        pop = population.get(source)
        cut_runs = [r for r in mine if r.cut_off]
        first = [(firings[r.id].either, len(r.calls)) for r in cut_runs if firings[r.id].either is not None]
        row: dict[str, Any] = {
            "n_cut_off": sum(cut),
            "n_answered": len(mine) - sum(cut),
            "answered_population": pop,
            "step_limit": STEP_LIMITS.get(source),
            "cut_off_length_median": _median([len(r.calls) for r in cut_runs]),
            "cut_off_length_max": max((len(r.calls) for r in cut_runs), default=None),
            "answered_length_median": _median([len(r.calls) for r in mine if not r.cut_off]),
            "streak": detector([firings[r.id].streak is not None for r in mine], cut, pop),
            "cycle": detector([firings[r.id].cycle is not None for r in mine], cut, pop),
            "streak_or_cycle": detector([firings[r.id].either is not None for r in mine], cut, pop),
            "cut_off_first_firing_median": _median([at for at, _ in first]),
            "cut_off_steps_saved_median": _median([length - at for at, length in first]),
        }
        # Trivial detectors: "the run reached step N", at the step this one fires (saving as many steps) and at the
        # cut-off runs' median length.
        for name, at in (
            ("baseline_step_reached", row["cut_off_first_firing_median"]),
            ("baseline_median_cut_off_length", row["cut_off_length_median"]),
        ):
            if at is not None:
                n = int(at)
                row[name] = {"step": n, **detector([len(r.calls) >= n for r in mine], cut, pop)}
        row["false_stops"] = _false_stops(mine, firings)
        table[source] = row
    return {"repeat_limit": limit, "sources": table}


def _false_stops(runs: Sequence[Run], firings: dict[str, Firing]) -> dict[str, Any]:
    """Answered runs whose answer was correct and where the limit fired: how many, and a few with their spin."""
    correct = [r for r in runs if not r.cut_off and r.outcome in CORRECT]
    hit = [r for r in correct if firings[r.id].either is not None]
    fired_answered = [r for r in runs if not r.cut_off and firings[r.id].either is not None]
    return {
        "answered_fired_by_outcome": dict(sorted(Counter(r.outcome for r in fired_answered).items())),
        "correct_answered": len(correct),
        "fired": len(hit),
        "rate": _rate(len(hit), len(correct)),
        "examples": [
            {
                "id": r.id,
                "at_step": firings[r.id].either,
                "of_steps": len(r.calls),
                "reason": firings[r.id].reason,
                "last_calls": [
                    f"{tool} {canonical_args(args)[:100]}"
                    for tool, args in r.calls[: firings[r.id].either][-SHOWN_CALLS:]
                ],
            }
            for r in hit[:FALSE_STOPS_SHOWN]
        ],
    }


# --------------------------------------------------------------------------------------------------------------
# The runs: read from the excerpt, or extracted from the pinned commits


def read_runs(path: Path = RUNS) -> tuple[list[Run], dict[str, int]]:
    """The runs of the excerpt and, per source whose answered runs are a draw, how many answered runs it has."""
    runs, population = [], {}
    for line in path.read_text(encoding="utf-8").splitlines():
        d = json.loads(line)
        if "population" in d:
            population[d["source"]] = d["population"]
            continue
        calls = tuple((tool, args) for tool, args in d["calls"])
        runs.append(Run(d["source"], d["id"], d["cut_off"], d["outcome"], calls, d["provenance"]))
    return runs, population


def _stored(args: dict[str, Any]) -> dict[str, Any]:
    text = canonical_args(args)
    if len(text) <= ARG_CHARS:
        return args
    return {"sha256": hashlib.sha256(text.encode()).hexdigest()[:16], "head": text[:40]}


def _workbench(mirror: Path) -> Iterator[Run]:
    show, names = _real_workbench.git_show(mirror / "olly-styles+WorkBench" / "repo")
    files = _real_workbench.result_files(names)
    grades = _real_workbench.read_grades()
    where = f"{_real_workbench.REPO}@{_real_workbench.COMMIT[:12]}"
    for run in _real_workbench.sample(list(_real_workbench.finished_runs(show, files))):
        outcome = "correct" if grades[(run.path, run.row)] else "incorrect"
        calls = tuple((s.tool, s.args) for s in run.steps)
        yield Run("workbench", run.key, False, outcome, calls, f"{where}:{run.path}#row={run.row}")
    for run in _real_workbench.cut_off_runs(show, files):
        calls = tuple((s.tool, s.args) for s in run.steps)
        yield Run("workbench", run.key, True, "cut_off", calls, f"{where}:{run.path}#row={run.row}")


def workbench_population(mirror: Path) -> int:
    show, names = _real_workbench.git_show(mirror / "olly-styles+WorkBench" / "repo")
    return sum(1 for _ in _real_workbench.finished_runs(show, _real_workbench.result_files(names)))


def _hotpotqa(mirror: Path) -> Iterator[Run]:
    source = build_realset.SOURCES["hotpotqa/react"]
    repo = build_realset.Repo(mirror, source)
    where = f"{source.repo}@{source.commit[:12]}:{build_realset.REACT_LOG}"
    for n, (outcome, _question, steps) in enumerate(build_realset._react_episodes(repo.read(build_realset.REACT_LOG))):
        calls = []
        for _thought, action, _observation in steps:
            m = build_realset._ACTION.match(action.strip())
            tool, arg = (m.group(1).lower(), m.group(2)) if m else ("invalid_action", action)
            if tool == "finish":
                break
            calls.append((tool, {"query": arg}))
        yield Run("hotpotqa", f"t1-{n:03d}", outcome == "halted", outcome, tuple(calls), where)


def _swe(mirror: Path) -> Iterator[Run]:
    source = build_realset.SOURCES["swe/mini-swe-agent"]
    repo = build_realset.Repo(mirror, source)
    run_dir = build_realset.SWE_RUN
    summary = json.loads(repo.read(f"{run_dir}/results_summary.json"))
    resolved = {r["instance_id"]: bool(r["resolved"]) for r in summary["instances"]}
    for iid in sorted(random.Random(20261201).sample(sorted(resolved), build_realset.SWE_SAMPLE)):
        where = f"{run_dir}/trajs/{iid}/{iid}.traj.json"
        traj = json.loads(repo.read(where))
        _goal, turns, _final = build_realset._swe_turns(traj["messages"])
        calls = tuple((tool, args) for _text, tool, args, _r, _f in turns if tool)
        cut_off = traj["info"]["exit_status"] != "Submitted"
        outcome = "cut_off" if cut_off else ("resolved" if resolved[iid] else "unresolved")
        yield Run("swe", iid, cut_off, outcome, calls, f"{source.repo}@{source.commit[:12]}:{where}")


def _autogpt() -> Iterator[Run]:
    where = "Significant-Gravitas/AutoGPT (evals/third_party/autogpt_benchmark/attempts.jsonl)"
    lines = (build_realset.AUTOGPT / "attempts.jsonl").read_text(encoding="utf-8").splitlines()
    for a in map(json.loads, lines):
        calls = tuple((command, args) for _speak, command, args, _r, _s in a["steps"] if command != "finish")
        outcome = "success" if a["success"] else "failed"
        yield Run("autogpt", f"{a['report']}/{a['test']}/{a['attempt']}", a["reached_cutoff"], outcome, calls, where)


def extract(mirror: Path, out: Path = RUNS) -> int:
    runs = [*_workbench(mirror), *_hotpotqa(mirror), *_swe(mirror), *_autogpt()]
    lines = [json.dumps({"source": "workbench", "population": workbench_population(mirror)}) + "\n"]
    for r in runs:
        calls = [[tool, _stored(args)] for tool, args in r.calls]
        record = {"source": r.source, "id": r.id, "cut_off": r.cut_off, "outcome": r.outcome}
        lines.append(json.dumps({**record, "provenance": r.provenance, "calls": calls}, ensure_ascii=False) + "\n")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("".join(lines), encoding="utf-8")
    print(f"{len(lines) - 1} runs -> {out}", file=sys.stderr)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command")
    ex = sub.add_parser("extract", help="write the runs' excerpt from the pinned commits")
    ex.add_argument("--mirror", type=Path, required=True, help="folder of bare clones (<owner>+<name>/repo)")
    parser.add_argument("--limit", type=int, default=3, help="the repeat limit (the policy's default: 3)")
    parser.add_argument("--runs", type=Path, default=RUNS)
    parser.add_argument("--json", type=Path, help="write the figures here (e.g. evals/calibration/repeats_real.json)")
    args = parser.parse_args(argv)
    if args.command == "extract":
        return extract(args.mirror, args.runs)
    runs, population = read_runs(args.runs)
    table = figures(runs, args.limit, population)
    text = json.dumps(table, indent=2, ensure_ascii=False) + "\n"
    if args.json:
        args.json.write_text(text, encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
