"""WorkBench's recorded runs: real models acting for a user with workplace tools (mail, calendar, CRM, project
tasks, web analytics), each run graded by the benchmark's own outcome check.

    python evals/_real_workbench.py grade --mirror DIR [--draw heldout2|heldout3]   # with a Python that has pandas

WorkBench (olly-styles/WorkBench, MIT; Styles et al. 2024, "WorkBench: a Benchmark Dataset for Agents in a
Realistic Workplace Setting") ships, under ``data/results/<domain>/<model>_<variant>_<date>.csv``, every run of five
models (GPT-4, GPT-3.5, Claude 2, Llama 2 70B, Mixtral 8x7B) of a LangChain agent on its tasks: per row the task
(``query``), the calls it made (``function_calls``), the agent's whole response (``full_response``: the final
``output`` and every ``intermediate_steps`` pair of the call, as LangChain's ``AgentAction``, and the tool's result)
and ``error``. The grade is not in the files: the benchmark computes it by running the predicted calls and the
task's ground-truth calls on its sandbox databases and comparing the end states (``src/evals/utils.py``:
``is_correct``, as ``calculate_metrics`` applies it). ``grade`` runs that check at the pinned commit (its tools and
databases taken from the same commit; LangChain, which the grader imports for inference only, replaced by a
stand-in that keeps a tool's function) and keeps the verdict of each sampled run in ``GRADES``, so building the
real set needs neither pandas nor the grader.

Only this module's reading of the format decides a record; the grades are read as labels and nothing else.
"""

from __future__ import annotations

import argparse
import ast
import csv
import io
import json
import os
import random
import re
import subprocess
import sys
import tarfile
import tempfile
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = "olly-styles/WorkBench"
COMMIT = "42f1b6dc18986f47701ca83de2d63dd4f95c59a0"
RESULTS = "data/results"
GRADES = HERE / "third_party" / "workbench" / "grades.jsonl"
SAMPLE = 300
"""Runs drawn (fixed seed, before any grade was read) from the finished runs of every results file."""
SEED = 20261202
HELD_OUT_DOMAINS = ("customer_relationship_manager", "project_management")
"""The domains scored only (the rules were never written or fitted on them); the others are the dev domains. Tasks
do not cross domains, so a split by domain is a split by task family, never by record."""
HELD_OUT_RUNS = 80
"""Runs per held-out domain: the first draw gave them 36 and 35, too few to read a calibration on, so a second draw
(``GROW_SEED``, before any grade of it was read) adds runs of those domains only, keeping the first 300."""
GROW_SEED = 20261203
FRESH_RUNS = 80
"""Runs per held-out domain of the fresh draw (``workbench/heldout2``): after the first two draws were read while
choosing a rule, a third (``FRESH_SEED``, fixed and committed with its ship rule before any grade of it was read)
takes runs of those domains that neither earlier draw took, to score a rule once."""
FRESH_SEED = 20261212
GRADES_FRESH = HERE / "third_party" / "workbench" / "grades_heldout2.jsonl"
THIRD_RUNS = 80
"""Runs per held-out domain of the third draw (``workbench/heldout3``): after ``workbench/heldout2`` was read, a
fourth seed (``THIRD_SEED``, fixed and committed with its ship rule before any grade of it was read) takes runs of
those domains that no earlier draw took, to score the picked-object rule once."""
THIRD_SEED = 20261214
GRADES_THIRD = HERE / "third_party" / "workbench" / "grades_heldout3.jsonl"
CUT_OFF = "Agent stopped due to iteration limit or time limit."
"""What LangChain's agent answers when it ran out of steps: a cut-off, not a finished run."""
_INVALID_TOOL = re.compile(r"is not a valid tool, try one of")
"""The harness's answer to a call of a tool that does not exist: the one result that is an error of the call."""


@dataclass(frozen=True)
class Step:
    """One call of a run: the agent's words before it, the tool, its arguments, what the tool returned."""

    thought: str
    tool: str
    args: dict[str, Any]
    result: str
    failed: bool


@dataclass(frozen=True)
class WorkBenchRun:
    path: str
    row: int
    query: str
    steps: tuple[Step, ...]
    final: str

    @property
    def key(self) -> str:
        """``<domain>/<model>_<variant>/<row>``: the results file without its date, and the row."""
        domain, name = self.path.removeprefix(f"{RESULTS}/").split("/")
        return f"{domain}/{name.split('_20')[0]}/{self.row}"

    @property
    def domain(self) -> str:
        return self.key.split("/")[0]

    @property
    def model(self) -> str:
        return self.key.split("/")[1].rsplit("_", 1)[0]


# --------------------------------------------------------------------------------------------------------------
# Reading a response: the repr of LangChain's agent output (a dict holding AgentAction(...) calls, numpy arrays,
# nan), read node by node without evaluating anything.


class ResponseError(ValueError):
    """A ``full_response`` that is not the repr of an agent output."""


def _value(node: ast.AST, source: str) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Dict):
        return {
            _value(k, source) if k else None: _value(v, source) for k, v in zip(node.keys, node.values, strict=True)
        }
    if isinstance(node, ast.List | ast.Tuple | ast.Set):
        return [_value(e, source) for e in node.elts]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_value(node.operand, source)
    if isinstance(node, ast.Name):
        return {"nan": None, "None": None, "True": True, "False": False}.get(node.id, node.id)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        if node.func.id == "AgentAction":
            return {kw.arg: _value(kw.value, source) for kw in node.keywords}
        if node.func.id == "array" and node.args:
            return _value(node.args[0], source)
    return ast.get_source_segment(source, node) or ""  # anything else (a Timestamp, a dtype) as it was written


def parse_response(text: str) -> tuple[str, list[Step]]:
    """The final output and the calls of one ``full_response``.

    Raises:
        ResponseError: the text is not a dict with ``output`` and ``intermediate_steps``.
    """
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as e:
        raise ResponseError(f"not a Python repr: {e}") from e
    data = _value(tree.body, text.strip())
    if not isinstance(data, dict) or "output" not in data or "intermediate_steps" not in data:
        raise ResponseError("no output and intermediate_steps")
    steps = []
    for pair in data["intermediate_steps"]:
        action, observation = pair
        log = str(action.get("log", ""))
        thought = re.split(r"Action:|```", log, maxsplit=1)[0].removeprefix("Thought:").strip()
        args = action.get("tool_input")
        result = (
            observation if isinstance(observation, str) else json.dumps(observation, ensure_ascii=False, default=str)
        )
        steps.append(
            Step(
                thought,
                str(action.get("tool", "")),
                args if isinstance(args, dict) else {"input": args},
                result,
                bool(_INVALID_TOOL.search(result)),
            )
        )
    return str(data["output"] or ""), steps


# --------------------------------------------------------------------------------------------------------------
# The runs: every results file's rows that ended on a final answer, and the fixed-seed sample of them.

Show = Callable[[str], str]
"""Reads a file of the pinned commit."""


def result_files(names: list[str]) -> list[str]:
    return sorted(n for n in names if n.startswith(f"{RESULTS}/") and n.endswith(".csv"))


def _parsed_rows(show: Show, files: list[str]) -> Iterator[tuple[str, int, dict[str, str], str, list[Step]]]:
    """Every row whose response parses: (file, row number, the row, its final output, its calls)."""
    csv.field_size_limit(sys.maxsize)
    for path in files:
        for n, row in enumerate(csv.DictReader(io.StringIO(show(path)))):
            try:
                final, steps = parse_response(row["full_response"])
            except ResponseError:
                continue
            yield path, n, row, final, steps


def finished_runs(show: Show, files: list[str]) -> Iterator[WorkBenchRun]:
    """Every row that ended on an answer: no harness error, a response that parses, not LangChain's cut-off."""
    for path, n, row, final, steps in _parsed_rows(show, files):
        if (row.get("error") or "").strip() or not final.strip() or final.strip() == CUT_OFF:
            continue
        yield WorkBenchRun(path, n, row["query"], tuple(steps), final)


def cut_off_runs(show: Show, files: list[str]) -> Iterator[WorkBenchRun]:
    """Every row LangChain cut off at its iteration or time limit (``max_iterations=20``, ``max_execution_time=120``
    in WorkBench's ``src/evals/utils.py``): the harness records it as the row's ``error``, and ``final`` is
    ``CUT_OFF``."""
    for path, n, row, final, steps in _parsed_rows(show, files):
        if (row.get("error") or "").strip() == CUT_OFF:
            yield WorkBenchRun(path, n, row["query"], tuple(steps), final)


def sample(runs: list[WorkBenchRun]) -> list[WorkBenchRun]:
    """``SAMPLE`` runs drawn with ``SEED``, then runs of each held-out domain drawn with ``GROW_SEED`` from those not
    drawn yet until it holds ``HELD_OUT_RUNS``; in file and row order (neither draw reads a grade)."""
    chosen = random.Random(SEED).sample(runs, min(SAMPLE, len(runs)))
    grow = random.Random(GROW_SEED)
    drawn = {(r.path, r.row) for r in chosen}
    for domain in HELD_OUT_DOMAINS:
        have = sum(r.domain == domain for r in chosen)
        left = [r for r in runs if r.domain == domain and (r.path, r.row) not in drawn]
        chosen += grow.sample(left, max(0, min(HELD_OUT_RUNS - have, len(left))))
    return sorted(chosen, key=lambda r: (r.path, r.row))


def _held_out_draw(
    runs: list[WorkBenchRun], drawn: list[WorkBenchRun], seed: int, per_domain: int
) -> list[WorkBenchRun]:
    """``per_domain`` runs of each held-out domain drawn with ``seed`` from those not in ``drawn``; in file and row
    order (the draw reads no grade)."""
    taken = {(r.path, r.row) for r in drawn}
    rng = random.Random(seed)
    chosen: list[WorkBenchRun] = []
    for domain in HELD_OUT_DOMAINS:
        left = [r for r in runs if r.domain == domain and (r.path, r.row) not in taken]
        chosen += rng.sample(left, min(per_domain, len(left)))
    return sorted(chosen, key=lambda r: (r.path, r.row))


def fresh_sample(runs: list[WorkBenchRun]) -> list[WorkBenchRun]:
    """``FRESH_RUNS`` runs of each held-out domain drawn with ``FRESH_SEED`` from those ``sample`` did not draw."""
    return _held_out_draw(runs, sample(runs), FRESH_SEED, FRESH_RUNS)


def third_sample(runs: list[WorkBenchRun]) -> list[WorkBenchRun]:
    """``THIRD_RUNS`` runs of each held-out domain drawn with ``THIRD_SEED`` from those neither ``sample`` nor
    ``fresh_sample`` drew."""
    return _held_out_draw(runs, [*sample(runs), *fresh_sample(runs)], THIRD_SEED, THIRD_RUNS)


STUCK_SEED = 20261216
ANSWERED_PER_CUT_OFF = 3
"""The stagnation records: per side of the domain split, every cut-off run and this many times as many answered runs
(a quarter of the states cut off: enough of each class to read a calibration)."""


def stagnation_runs(
    cut_off: list[WorkBenchRun], finished: list[WorkBenchRun], held_out: bool
) -> tuple[list[WorkBenchRun], list[WorkBenchRun]]:
    """The runs of the stagnation records of one side of the domain split (the held-out domains, or the others):
    every cut-off run with a call, and ``ANSWERED_PER_CUT_OFF`` times as many runs that ended on an answer after at
    least one call, drawn with ``STUCK_SEED`` from those no goal_reached draw took; each list in file and row order
    (the draw reads no grade)."""

    def side(runs: list[WorkBenchRun]) -> list[WorkBenchRun]:
        return [r for r in runs if (r.domain in HELD_OUT_DOMAINS) == held_out and r.steps]

    stuck = sorted(side(cut_off), key=lambda r: (r.path, r.row))
    drawn = {(r.path, r.row) for r in (*sample(finished), *fresh_sample(finished), *third_sample(finished))}
    left = sorted((r for r in side(finished) if (r.path, r.row) not in drawn), key=lambda r: (r.path, r.row))
    answered = random.Random(STUCK_SEED).sample(left, min(ANSWERED_PER_CUT_OFF * len(stuck), len(left)))
    return stuck, sorted(answered, key=lambda r: (r.path, r.row))


DRAWS: dict[str, tuple[Callable[[list[WorkBenchRun]], list[WorkBenchRun]], Path]] = {
    "first": (sample, GRADES),
    "heldout2": (fresh_sample, GRADES_FRESH),
    "heldout3": (third_sample, GRADES_THIRD),
}
"""Each draw: how its runs are chosen, and where their grades are kept."""


def git_show(git_dir: Path) -> tuple[Show, list[str]]:
    """A reader of the pinned commit's files and the results files' names, for ``grade``: ``build_realset.Repo``
    reads the same way, but importing it imports stopwise, and ``grade`` runs under any Python that has pandas."""

    def show(path: str) -> str:
        return subprocess.run(
            ["git", "--git-dir", str(git_dir), "show", f"{COMMIT}:{path}"], check=True, capture_output=True, text=True
        ).stdout

    names = subprocess.run(
        ["git", "--git-dir", str(git_dir), "ls-tree", "-r", "--name-only", COMMIT, "--", RESULTS],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    return show, names


def read_grades(path: Path = GRADES) -> dict[tuple[str, int], bool]:
    grades = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        g = json.loads(line)
        grades[(g["path"], g["row"])] = bool(g["correct"])
    return grades


# --------------------------------------------------------------------------------------------------------------
# Grading: the benchmark's own check, run at the pinned commit.


def _stand_in_langchain() -> None:
    """LangChain as far as WorkBench's tools and grader import it: ``@tool(name)`` keeps the function (as ``.func``)
    and its name; the model classes are never called by the grader."""

    class Tool:
        def __init__(self, name: str, func: Callable[..., Any]) -> None:
            self.name, self.func = name, func

    def tool(name: str, **_: Any) -> Callable[[Callable[..., Any]], Tool]:
        return lambda func: Tool(name, func)

    def module(name: str, **attrs: Any) -> None:
        m = types.ModuleType(name)
        m.__dict__.update(attrs)
        sys.modules[name] = m

    unused = object
    module("langchain")
    module("langchain.tools", tool=tool)
    module("langchain.agents", initialize_agent=unused, AgentType=unused)
    module("langchain_openai", ChatOpenAI=unused, OpenAI=unused)
    module("langchain_community")
    module("langchain_community.chat_models")
    module("langchain_community.chat_models.anthropic", ChatAnthropic=unused)
    module("langchain_community.chat_models.anyscale", ChatAnyscale=unused)


def grade(git_dir: Path, out: Path, draw: Callable[[list[WorkBenchRun]], list[WorkBenchRun]] = sample) -> int:
    """Grade the runs of one draw (``sample``, ``fresh_sample`` or ``third_sample``) with WorkBench's check (needs
    pandas) and write ``out``: per run, its ``is_correct`` on the row as ``calculate_metrics`` prepares it (empty
    cells as "", newlines in a call escaped), against the task's ground-truth calls."""
    show, names = git_show(git_dir)
    chosen = draw(list(finished_runs(show, result_files(names))))
    archive = subprocess.run(
        ["git", "--git-dir", str(git_dir), "archive", COMMIT, "src", "data/processed", "data/raw"],
        check=True,
        capture_output=True,
    ).stdout
    lines = []
    with tempfile.TemporaryDirectory() as tree:
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(tree, filter="data")
        os.chdir(tree)  # the tools read their databases from data/processed, relative to the repository root
        sys.path.insert(0, tree)
        _stand_in_langchain()
        import pandas as pd  # type: ignore[import-untyped]
        from src.evals.utils import is_correct  # type: ignore[import-not-found]

        for path in sorted({r.path for r in chosen}):
            domain = path.removeprefix(f"{RESULTS}/").split("/")[0]
            truth = pd.read_csv(f"data/processed/queries_and_answers/{domain}_queries_and_answers.csv", dtype=str)
            answers = dict(zip(truth["query"], truth["answer"].apply(ast.literal_eval), strict=True))
            predictions = pd.read_csv(io.StringIO(show(path)), dtype=str).fillna("")
            for run in (r for r in chosen if r.path == path):
                row = predictions.iloc[run.row]
                assert row["query"] == run.query, (path, run.row)  # pandas and csv read the same row
                # As calculate_metrics prepares a row before is_correct: newlines escaped in every call.
                predicted = [a.replace("\n", "\\n") for a in ast.literal_eval(row["function_calls"])]
                expected = [a.replace("\n", "\\n") for a in answers[row["query"]]]
                correct = bool(is_correct(predicted, expected, row["error"]))
                lines.append(json.dumps({"path": path, "row": run.row, "correct": correct}) + "\n")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("".join(lines), encoding="utf-8")
    print(f"{len(lines)} graded runs ({sum('true' in x for x in lines)} correct) -> {out}", file=sys.stderr)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    g = sub.add_parser("grade", help="grade the sampled runs with the benchmark's check (needs pandas)")
    g.add_argument("--mirror", type=Path, required=True, help="folder of bare clones (<owner>+<name>/repo)")
    g.add_argument("--draw", choices=sorted(DRAWS), default="first", help="which draw's runs (default: first)")
    g.add_argument("--out", type=Path, help="default: the draw's grades file")
    args = parser.parse_args(argv)
    choose, grades = DRAWS[args.draw]
    return grade(args.mirror / REPO.replace("/", "+") / "repo", args.out or grades, choose)


if __name__ == "__main__":
    raise SystemExit(main())
