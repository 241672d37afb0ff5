"""The guardian's risk default on a real tool set: WorkBench's 27 workplace tools, declared nothing.

    python evals/evaluate_risk_workbench.py extract --mirror DIR   # writes TOOLS from the pinned commit
    python evals/evaluate_risk_workbench.py [--json evals/calibration/risk_workbench.json]

WorkBench (olly-styles/WorkBench, MIT; Styles et al. 2024) gives its agent 27 tools over a sandbox of pandas data
frames (mail, calendar, CRM, project tasks, web analytics, a company directory), in ``src/tools/*.py`` at
``_real_workbench.COMMIT``: each a function registered with LangChain's ``@tool("<toolkit>.<name>")``, its
docstring the description the model reads. ``extract`` keeps, per tool, that name, the function's name, its
parameters, its docstring, and:

- ``writes``: OUR label, read from the function's code (``write_evidence``), never from WorkBench's own list of
  tools with side effects (``src/tools/toolkits.py``, kept beside it as ``workbench_side_effects`` to compare): a
  tool writes when its body assigns to one of the module's data frames (rebinds it after ``global``, or assigns
  into it, ``FRAME.loc[...] = ...``), or calls the function of a tool that writes (``send_email.func``). Reading a
  frame under ``global`` (``company_directory.find_email_address``) is not a write.
- ``kind``: read, or the write's verb (create, update, delete, send) from the function's name.
- ``example``: the first call of the tool in WorkBench's recorded runs (every results file in file and row order,
  as ``_real_workbench`` reads them) that ran without the harness's "not a valid tool" answer: its arguments as
  the model sent them, the task it served, and where it was recorded.

The evaluation asks what a newcomer meets who ports these tools to stopwise without declaring a ``risk``:
``Guardian()`` as shipped, each tool's example call put through ``guardian.consult`` exactly as the loop's
pre-execution check does (``_step.guardian.consult_call``: the guardian's projection of the run with the call
pending and the agent's tools' risks, all ``unknown``; ``PolicyInputs({}, 0, 0)``; the call conditions), the task
as the run's first input. A call "suspends" when the decision is ``ESCALATE`` (the loop then waits for approval).
stopwise refuses a dotted tool name (``tools.check_tool_name``: what model APIs accept), so two names a port could
use are scored: the function's own name (``search_emails``: what ``@tool`` gives by default) and WorkBench's name
with the dot as an underscore (``email_search_emails``).

Beside it the trivial baseline: escalate a name holding a destructive verb (``evaluate_real.destructive_verb``).
Then per call across the recorded runs already read for the repeat limit (``evaluate_repeats.RUNS``: WorkBench's
graded draw of answered runs and every cut-off run): each call of one of the 27 tools through the same check, and
per run the share of its calls that would have suspended. Calls of tools WorkBench does not have (the harness
answered "not a valid tool") are counted and left out: stopwise answers an unknown tool with an error result
before the guardian is asked. Arguments longer than ``evaluate_repeats.ARG_CHARS`` are stored there as a digest:
the risk question reads the tool's name and declared class, not its arguments, so the outcome is the same.

No longer held out: this tool set's mail reads that suspended (``email`` was an irreversible name word) prompted
the rule that the name's verb decides (``risk.object_words``). No table was fitted on it and nothing here changes
the rules, but its figures since then are not independent evidence of them.
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import json
import statistics
import sys
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, get_args

from stopwise.guardian import GuardianOutcome
from stopwise.guardian.guardian import Guardian, consult
from stopwise.guardian.policy import PolicyInputs
from stopwise.messages import Message, Role, ToolCall
from stopwise.tools import check_tool_name

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import _real_workbench  # noqa: E402
import evaluate_repeats  # noqa: E402
from evaluate_real import destructive_verb  # noqa: E402

TOOLS = HERE / "third_party" / "workbench" / "tools.json"
TOOL_FILES = (
    "analytics",
    "calendar",
    "company_directory",
    "customer_relationship_manager",
    "email",
    "project_management",
)
WRITE_KINDS = {"create": "create", "add": "create", "update": "update", "delete": "delete"}
WRITE_KINDS |= {"send": "send", "forward": "send", "reply": "send"}
"""A writing tool's kind, by the first word of its function's name that names one."""
Naming = Literal["function", "prefixed"]
"""How a port names a tool: its function's name, or WorkBench's with ``_`` for the dot."""
NAMINGS: tuple[Naming, ...] = get_args(Naming)


# --------------------------------------------------------------------------------------------------------------
# Extraction: the tools' definitions and our read/write label, from the source at the pinned commit.


@dataclass(frozen=True)
class Defined:
    """One ``@tool`` function of a module: WorkBench's name, the function, its parameters and docstring."""

    name: str
    function: str
    parameters: tuple[tuple[str, Any], ...]
    description: str
    node: ast.FunctionDef


def defined_tools(source: str) -> list[Defined]:
    """The functions of ``source`` decorated ``@tool("<name>", ...)``, in source order."""
    found = []
    for node in ast.parse(source).body:
        if not isinstance(node, ast.FunctionDef):
            continue
        for d in node.decorator_list:
            if isinstance(d, ast.Call) and isinstance(d.func, ast.Name) and d.func.id == "tool" and d.args:
                name = ast.literal_eval(d.args[0])
                defaults = [None] * (len(node.args.args) - len(node.args.defaults)) + node.args.defaults
                params = tuple(
                    (a.arg, ast.literal_eval(v) if v is not None else None)
                    for a, v in zip(node.args.args, defaults, strict=True)
                )
                found.append(Defined(name, node.name, params, ast.get_docstring(node) or "", node))
    return found


def _frames(source: str) -> set[str]:
    """The names a module assigns at its top level (its data frames: ``EMAILS = pd.read_csv(...)``)."""
    names = set()
    for node in ast.parse(source).body:
        targets = node.targets if isinstance(node, ast.Assign) else []
        names |= {t.id for t in targets if isinstance(t, ast.Name)}
    return names


def _root(node: ast.expr) -> str | None:
    while isinstance(node, ast.Subscript | ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def direct_writes(fn: ast.FunctionDef, frames: set[str]) -> list[str]:
    """The statements of ``fn`` that change a module frame, as ``"<frame> <how> (line n)"``: a rebinding of a name
    declared ``global``, or an assignment into a frame (``FRAME.loc[...] = ...``) the function did not bind
    itself."""
    declared = {n for node in ast.walk(fn) if isinstance(node, ast.Global) for n in node.names}
    local = {a.arg for a in fn.args.args}
    found = []
    for node in ast.walk(fn):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AugAssign):
            targets = [node.target]
        for t in targets:
            if isinstance(t, ast.Name) and t.id in frames and t.id in declared:
                found.append(f"{t.id} rebound (line {t.lineno})")
            elif isinstance(t, ast.Subscript | ast.Attribute):
                root = _root(t)
                if root in frames and root not in local:
                    found.append(f"{root} assigned into (line {t.lineno})")
            elif isinstance(t, ast.Name):
                local.add(t.id)
    return found


def called_tools(fn: ast.FunctionDef) -> list[str]:
    """The functions of other tools ``fn`` calls through LangChain's ``<tool>.func(...)``."""
    return [
        node.func.value.id
        for node in ast.walk(fn)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "func"
        and isinstance(node.func.value, ast.Name)
    ]


def label_module(source: str) -> dict[str, list[str]]:
    """Per tool function of ``source``: the evidence that it writes (empty: it only reads), a call of a writing
    tool's function counting as that tool's writes."""
    frames = _frames(source)
    tools = defined_tools(source)
    evidence = {t.function: direct_writes(t.node, frames) for t in tools}
    for t in tools:
        evidence[t.function] += [f"calls {c}.func, which writes" for c in called_tools(t.node) if evidence.get(c)]
    return evidence


def kind_of(function: str, writes: bool) -> str:
    if not writes:
        return "read"
    return next((WRITE_KINDS[w] for w in function.split("_") if w in WRITE_KINDS), "write")


def _side_effects_list(toolkits: str) -> set[str]:
    """WorkBench's own list (``tools_with_side_effects``), as ``<module>.<function>``: kept to compare only."""
    for node in ast.parse(toolkits).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "tools_with_side_effects" for t in node.targets
        ):
            assert isinstance(node.value, ast.List)
            return {ast.unparse(e) for e in node.value.elts}
    raise ValueError("no tools_with_side_effects in toolkits.py")


def first_calls(show: _real_workbench.Show, files: list[str]) -> dict[str, dict[str, Any]]:
    """Per tool name, its first call in the finished runs that the harness did not refuse."""
    first: dict[str, dict[str, Any]] = {}
    for run in _real_workbench.finished_runs(show, files):
        for i, step in enumerate(run.steps):
            if step.tool not in first and not step.failed:
                first[step.tool] = {
                    "args": step.args,
                    "task": run.query,
                    "provenance": f"{_real_workbench.REPO}@{_real_workbench.COMMIT[:12]}:{run.path}#row={run.row}"
                    f",call={i}",
                }
    return first


def extract(git_dir: Path, out: Path) -> int:
    show, names = _real_workbench.git_show(git_dir)
    theirs = _side_effects_list(show("src/tools/toolkits.py"))
    examples = first_calls(show, _real_workbench.result_files(names))
    tools: list[dict[str, Any]] = []
    for module in TOOL_FILES:
        path = f"src/tools/{module}.py"
        source = show(path)
        evidence = label_module(source)
        for t in defined_tools(source):
            writes = bool(evidence[t.function])
            tools.append(
                {
                    "name": t.name,
                    "function": t.function,
                    "source": f"{path}:{t.node.lineno}",
                    "parameters": [{"name": n, "default": d} for n, d in t.parameters],
                    "description": t.description,
                    "writes": writes,
                    "write_evidence": evidence[t.function],
                    "kind": kind_of(t.function, writes),
                    "workbench_side_effects": f"{module}.{t.function}" in theirs,
                    "example": examples.get(t.name),
                }
            )
    data = {
        "source": f"{_real_workbench.REPO}@{_real_workbench.COMMIT}",
        "license": "MIT (LICENSE beside this file)",
        "labels": "writes/kind are ours, read from each tool's code (evals/evaluate_risk_workbench.py); "
        "workbench_side_effects is WorkBench's own list in src/tools/toolkits.py, kept to compare",
        "tools": tools,
    }
    out.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"{len(tools)} tools ({sum(t['writes'] for t in tools)} write) -> {out}", file=sys.stderr)
    return 0


# --------------------------------------------------------------------------------------------------------------
# Evaluation: each call through the loop's pre-execution check under Guardian().


@dataclass(frozen=True)
class Tool:
    name: str
    function: str
    writes: bool
    kind: str
    workbench_side_effects: bool
    example: dict[str, Any] | None

    def named(self, naming: Naming) -> str:
        """The tool's name in a stopwise port: its function's, or WorkBench's with the dot as an underscore."""
        name = self.function if naming == "function" else self.name.replace(".", "_")
        check_tool_name(name)
        return name


def read_tools(path: Path = TOOLS) -> list[Tool]:
    return [
        Tool(t["name"], t["function"], t["writes"], t["kind"], t["workbench_side_effects"], t["example"])
        for t in json.loads(path.read_text(encoding="utf-8"))["tools"]
    ]


@dataclass(frozen=True)
class Check:
    """One call's pre-execution decision under ``Guardian()``."""

    suspends: bool
    p_fires: float
    note: str


async def check_call(guardian: Guardian, names: Sequence[str], call: ToolCall, task: str) -> Check:
    """The decision the loop's pre-execution check makes on ``call`` in a run of ``task``, by an agent whose tools
    are ``names``, none declaring a risk."""
    projection = guardian.project(
        [Message(Role.USER, task)], goal=task, risks=dict.fromkeys(names, "unknown"), pending=call
    )
    decision = (
        await consult(
            guardian,
            projection,
            guardian.call_conditions,
            PolicyInputs({}, 0, 0),
            run_id="workbench",
            step=1,
            kind="pre_execution",
            call_id=call.id,
        )
    ).decision
    risk = next(c for c in guardian.call_conditions if c.name == "risk")
    answer = decision.answers["risk"]
    return Check(decision.outcome is GuardianOutcome.ESCALATE, answer.p(risk.fires_on), answer.note or "")


def _row(tools: list[Tool], escalates: list[bool]) -> dict[str, Any]:
    reads = [e for t, e in zip(tools, escalates, strict=True) if not t.writes]
    writes = [e for t, e in zip(tools, escalates, strict=True) if t.writes]
    return {
        "read_tools": len(reads),
        "read_escalated": sum(reads),
        "write_tools": len(writes),
        "write_escalated": sum(writes),
        "accuracy": sum(e == t.writes for t, e in zip(tools, escalates, strict=True)) / len(tools),
    }


async def per_tool(tools: list[Tool], naming: Naming) -> dict[str, Any]:
    """Per tool its example call's decision, and the counts per label and per kind, beside the baseline's."""
    guardian = Guardian()
    names = [t.named(naming) for t in tools]
    checks = []
    for t, name in zip(tools, names, strict=True):
        assert t.example is not None, f"{t.name}: no recorded call"
        call = ToolCall(name, t.example["args"], id="example")
        checks.append(await check_call(guardian, names, call, t.example["task"]))
    ours = [c.suspends for c in checks]
    baseline = [destructive_verb(n) for n in names]
    kinds: dict[str, dict[str, int]] = {}
    for t, c, b in zip(tools, checks, baseline, strict=True):
        k = kinds.setdefault(t.kind, {"tools": 0, "escalated": 0, "baseline_escalated": 0})
        k["tools"] += 1
        k["escalated"] += c.suspends
        k["baseline_escalated"] += b
    return {
        "guardian": _row(tools, ours),
        "baseline_destructive_verb": _row(tools, baseline),
        "per_kind": dict(sorted(kinds.items())),
        "read_tools_that_suspend": [n for t, n, e in zip(tools, names, ours, strict=True) if e and not t.writes],
        "write_tools_that_run": [n for t, n, e in zip(tools, names, ours, strict=True) if t.writes and not e],
        "tools": {
            n: {
                "writes": t.writes,
                "kind": t.kind,
                "suspends": c.suspends,
                "p_fires": round(c.p_fires, 4),
                "note": c.note,
            }
            for t, n, c in zip(tools, names, checks, strict=True)
        },
    }


def recorded_runs(path: Path = evaluate_repeats.RUNS) -> Iterator[dict[str, Any]]:
    for line in path.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        if row.get("source") == "workbench" and "calls" in row:
            yield row


async def per_call(tools: list[Tool], naming: Naming, runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Every call of a WorkBench tool in ``runs`` through the same check; per class of run (answered, cut off) the
    pooled share of calls that suspend, the mean and median of the per-run share, and the runs with one or more."""
    guardian = Guardian()
    by_name = {t.name: t for t in tools}
    names = [t.named(naming) for t in tools]
    table: dict[str, Any] = {}
    unknown = Counter[str]()
    for cls in ("answered", "cut_off"):
        shares, calls, suspended, touched, writing = [], 0, 0, 0, 0
        for run in (r for r in runs if r["cut_off"] == (cls == "cut_off")):
            known = [(by_name[n], a) for n, a in run["calls"] if n in by_name]
            unknown.update(n for n, _ in run["calls"] if n not in by_name)
            if not known:
                continue
            task = run["id"]  # the runs file keeps no task text; the risk question does not read it
            s = 0
            for i, (t, args) in enumerate(known):
                call = ToolCall(t.named(naming), args, id=f"c{i}")
                s += (await check_call(guardian, names, call, task)).suspends
            shares.append(s / len(known))
            calls += len(known)
            writing += sum(t.writes for t, _ in known)
            suspended += s
            touched += s > 0
        table[cls] = {
            "runs": len(shares),
            "calls": calls,
            "calls_suspended": suspended,
            "calls_of_write_tools": writing,
            "pooled_share": suspended / calls,
            "mean_run_share": statistics.fmean(shares),
            "median_run_share": statistics.median(shares),
            "runs_with_a_suspension": touched,
        }
    table["calls_of_unknown_tools_left_out"] = sum(unknown.values())
    return table


def evaluate(tools: list[Tool], runs: list[dict[str, Any]]) -> dict[str, Any]:
    async def both() -> dict[str, Any]:
        return {n: {**await per_tool(tools, n), "per_call": await per_call(tools, n, runs)} for n in NAMINGS}

    out = asyncio.run(both())
    out["labels"] = {
        "tools": len(tools),
        "write": sum(t.writes for t in tools),
        "agree_with_workbench_list": sum(t.writes == t.workbench_side_effects for t in tools),
    }
    return out


def report(table: dict[str, Any]) -> str:
    lab = table["labels"]
    lines = [
        f"WorkBench tools: {lab['tools']} ({lab['write']} write, by their code; our label agrees with WorkBench's "
        f"own side-effects list on {lab['agree_with_workbench_list']})"
    ]
    for naming in NAMINGS:
        t = table[naming]
        lines.append(f"\nnames: {naming}")
        for who in ("guardian", "baseline_destructive_verb"):
            r = t[who]
            lines.append(
                f"  {who:26} reads escalated {r['read_escalated']}/{r['read_tools']}  writes escalated "
                f"{r['write_escalated']}/{r['write_tools']}  accuracy {r['accuracy']:.2f}"
            )
        for kind, k in t["per_kind"].items():
            lines.append(f"    {kind:8} {k['escalated']}/{k['tools']} escalate (baseline {k['baseline_escalated']})")
        lines.append(f"  read tools that suspend: {', '.join(t['read_tools_that_suspend']) or '-'}")
        lines.append(f"  write tools that run:    {', '.join(t['write_tools_that_run']) or '-'}")
        for cls in ("answered", "cut_off"):
            c = t["per_call"][cls]
            lines.append(
                f"  {cls:8} runs {c['runs']}: {c['calls_suspended']}/{c['calls']} calls suspend "
                f"({c['pooled_share']:.1%}); per run mean {c['mean_run_share']:.1%}, median "
                f"{c['median_run_share']:.1%}; runs with one or more {c['runs_with_a_suspension']}; "
                f"calls of write tools {c['calls_of_write_tools']}"
            )
        lines.append(f"  calls of tools WorkBench lacks, left out: {t['per_call']['calls_of_unknown_tools_left_out']}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command")
    x = sub.add_parser("extract", help="write TOOLS from the pinned commit")
    x.add_argument("--mirror", type=Path, required=True, help="folder of bare clones (<owner>+<name>/repo)")
    x.add_argument("--out", type=Path, default=TOOLS)
    parser.add_argument("--json", type=Path, help="write the figures as JSON")
    args = parser.parse_args(argv)
    if args.command == "extract":
        return extract(args.mirror / _real_workbench.REPO.replace("/", "+") / "repo", args.out)
    table = evaluate(read_tools(), list(recorded_runs()))
    print(report(table))
    if args.json:
        args.json.write_text(json.dumps(table, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
