"""The repeat limit measured on real runs (``evals/evaluate_repeats.py``): where it first fires in a run, the figures
it writes from the shipped excerpt, and the pinned counts of a small slice run through the command line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "evals"))

import evaluate_repeats  # noqa: E402
from evaluate_repeats import Run, fire  # noqa: E402

FIGURES = ROOT / "evals" / "calibration" / "repeats_real.json"


def _run(*calls: tuple[str, dict[str, object]], cut_off: bool = False) -> Run:
    return Run("s", "r", cut_off, "cut_off" if cut_off else "correct", calls, "here")


def test_the_streak_fires_at_the_step_that_makes_the_same_call_the_limits_time() -> None:
    run = _run(("open", {"p": 1}), ("read", {"q": "a"}), ("read", {"q": " a "}), ("read", {"q": "a"}), ("x", {}))
    firing = fire(run, 3)
    assert (firing.streak, firing.cycle, firing.either) == (4, None, 4)
    assert firing.reason == "the call read was made 3 times in a row"


def test_a_cycle_fires_once_its_steps_were_made_the_limits_time_in_order() -> None:
    search, page = ("search", {"q": "x"}), ("open", {"url": "u"})
    firing = fire(_run(search, page, search, page, search, page), 3)
    assert (firing.streak, firing.cycle) == (None, 6)
    assert firing.reason == "the calls search, open were made in the same order 3 times in a row"
    assert fire(_run(search, page, search, page, search), 3).either is None


def test_the_committed_figures_are_what_the_script_computes_from_the_shipped_runs() -> None:
    runs, population = evaluate_repeats.read_runs()
    assert evaluate_repeats.figures(runs, 3, population) == json.loads(FIGURES.read_text(encoding="utf-8"))


def test_a_slice_through_the_command_line_gives_the_pinned_counts(tmp_path: Path) -> None:
    lines = evaluate_repeats.RUNS.read_text(encoding="utf-8").splitlines()
    kept: dict[tuple[str, bool], int] = {}
    chosen = []
    for line in lines:
        d = json.loads(line)
        if "population" in d:
            chosen.append(line)
            continue
        group = (d["source"], d["cut_off"])
        if d["source"] in ("workbench", "hotpotqa") and kept.get(group, 0) < 20:
            kept[group] = kept.get(group, 0) + 1
            chosen.append(line)
    part = tmp_path / "runs.jsonl"
    part.write_text("\n".join(chosen) + "\n", encoding="utf-8")
    out = tmp_path / "figures.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    subprocess.run(
        [sys.executable, str(ROOT / "evals" / "evaluate_repeats.py"), "--runs", str(part), "--json", str(out)],
        check=True,
        capture_output=True,
        env=env,
    )
    table = json.loads(out.read_text(encoding="utf-8"))["sources"]
    wb, hq = table["workbench"], table["hotpotqa"]
    assert (wb["n_cut_off"], wb["n_answered"], hq["n_cut_off"], hq["n_answered"]) == (20, 20, 13, 20)
    got = {
        name: (
            row["streak"]["fires_on_cut_off"],
            row["streak_or_cycle"]["fires_on_cut_off"],
            row["streak_or_cycle"]["fires_on_answered"],
            row["false_stops"]["fired"],
        )
        for name, row in table.items()
    }
    # 20 WorkBench cut-offs all fire, 2 of 20 answered runs (both wrong answers); 3 of HotpotQA's 13 halted runs.
    assert got == {"hotpotqa": (0.231, 0.231, 0.0, 0), "workbench": (1.0, 1.0, 0.1, 0)}
