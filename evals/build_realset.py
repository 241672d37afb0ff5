"""Build the guardian's real development set: labelled states taken from public recordings of real systems.

    python evals/build_realset.py --mirror DIR [--only SOURCE ...]   # writes evals/data/realset.jsonl

``--mirror`` is a folder holding bare git clones named ``<owner>+<name>/repo`` (the layout the project's search
tool writes; ``git clone --bare https://github.com/<owner>/<name> DIR/<owner>+<name>/repo`` gives the same). Every
file is read from the pinned commit in ``SOURCES`` with ``git show``, so a rebuild gives the same file. Each
record carries its ``source``, ``license`` and ``split`` (a whole source in one split; see ``evals/SOURCES.md``)
and is written with the library's own projection (``stopwise.evals.traces.projection_to_data``).

Sources, by condition:

- ``risk``: tools of public MCP servers whose authors annotated them (``readOnlyHint`` / ``destructiveHint``):
  the proposed call is the tool's name with no declared risk, the label what its author declared.
- ``goal_reached``: the finished state of recorded runs of real models (the last step and the final answer, as
  the guardian sees them at a natural finish), labelled by the run's graded outcome: mini-SWE-agent on SWE-bench
  Verified (resolved by the hidden tests), ReAct on HotpotQA (the answer graded correct), Who&When's
  algorithm-generated multi-agent logs (every one a failed run), AutoGPT's benchmark reports of two dates (the
  grader's ``success``; read from the transcribed excerpt in ``evals/third_party/autogpt_benchmark/``, since the
  repository is too large to clone: see ``compact_report``), and (never fitted) WorkBench's runs of five models on
  workplace tasks, split by domain into a dev source and held-out draws (the benchmark's own check of the end
  state; ``_real_workbench``), and (held out, scored once) ReAct with GPT-3 shopping on WebShop (the store's reward
  of the purchase, 1.0 being success; ``_real_webshop``).
- ``stagnation`` (a proxy, said so in the records' ``kind``): ReAct on HotpotQA, the last state of an episode cut
  off at the step cap ("halted": searching in circles) against the state before a finished episode's answer; the
  same agent's other runs the same way (``hotpotqa/reflexion``, held out: the base agent's later trials and the
  Reflexion agent's, episodes ``hotpotqa/react`` does not hold; scored once, see docs/evals.md); and
  (never fitted) WorkBench's runs the same way, split by domain as its goal_reached sources are (``workbench/dev``,
  and the held-out domains' ``workbench/heldout-cutoffs``): the last state of a run LangChain cut off at its
  iteration or time limit against the state before the answer of a drawn run that ended on one; and ReAct on
  WebShop (``webshop/react``, held out, every run): the last state of a run cut off at the 15-action cap against
  the state before a run's purchase; and (held out, built for the stagnation refit before any map scored it)
  ABP + Claude on Online-Mind2Web (``abp/online-mind2web``, every run): the last state of a browser run cut off at
  its turn limit against the state before a run's answer (``_real_abp``).

Runs are converted to the rows a stopwise run logs (a user goal, assistant rows with tool calls, tool results) and
projected with the guardian's defaults (``Guardian().history_steps``, ``result_chars``, ``max_chars``), so a
record is what the guardian would have read at that point of the run.
"""

from __future__ import annotations

import argparse
import ast
import json
import random
import re
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stopwise.evals.traces import TraceRecord, projection_to_data
from stopwise.guardian.evaluators.scripted import ScriptedEvaluator
from stopwise.guardian.guardian import Guardian
from stopwise.guardian.projection import Projection, project
from stopwise.messages import Message, ToolCall

HERE = Path(__file__).resolve().parent
OUT = HERE / "data" / "realset.jsonl"
sys.path.insert(0, str(HERE))

import _real_abp  # noqa: E402
import _real_webshop  # noqa: E402
import _real_workbench  # noqa: E402
from build_devset import messages_of  # noqa: E402


@dataclass(frozen=True)
class Source:
    name: str
    repo: str
    commit: str
    license: str
    split: str
    excerpt: str = ""
    """For a repository too large to clone here: the report file whose excerpt (its attempts in compact form,
    ``evals/third_party/autogpt_benchmark/``) is read instead of a clone."""


SOURCES = {
    s.name: s
    for s in (
        Source(
            "mcp/github-mcp-server",
            "github/github-mcp-server",
            "64a49f34d076b6f5917dae1424521d43c7bcae84",
            "MIT",
            "train",
        ),
        Source(
            "swe/mini-swe-agent",
            "gruckion/mini-swe-agent",
            "d12a71affd95403b036b2bdbd827349b77bfffb9",
            "MIT",
            "train",
        ),
        Source(
            "hotpotqa/react",
            "noahshinn/reflexion",
            "218cf0ef1df84b05ce379dd4a8e47f17766733a0",
            "MIT",
            "train",
        ),
        Source(
            "hotpotqa/reflexion",
            "noahshinn/reflexion",
            "218cf0ef1df84b05ce379dd4a8e47f17766733a0",
            "MIT",
            "test",  # stagnation's fresh source: scored once, after the candidate map's ship rule was committed
        ),
        Source(
            "whowhen/algorithm-generated",
            "mingyin1/Agents_Failure_Attribution",
            "3d9d568840f004b389638f97adf3e0ab8b5a9514",
            "MIT",
            "train",
        ),
        Source(
            "autogpt/2024-04-01",
            "Significant-Gravitas/AutoGPT",
            "54f37f601fabd32180d37553b867cef2396deaa2",
            "MIT",
            "train",
            "benchmark/reports/autogpt/20240401T021500_full_run/report.json",
        ),
        Source(
            "autogpt/2024-03-05",
            "Significant-Gravitas/AutoGPT",
            "e5810eb74a0551e3759ac15ee49396c12c823f28",
            "MIT",
            "test",
            "benchmark/reports/autogpt/20240305T020814_full_run/report.json",
        ),
        Source(
            "autogpt/2024-03-20",
            "Significant-Gravitas/AutoGPT",
            "2e3a3b51b12789fac703646e1a0395f526a535a0",
            "MIT",
            "train",
            "benchmark/reports/autogpt/20240320T020832_full_run/report.md",
        ),
        Source(
            "autogpt/2024-03-25",
            "Significant-Gravitas/AutoGPT",
            "0c1db1735e89c24fc872eb73dcd69715b70ba624",
            "MIT",
            "test",
            "benchmark/reports/autogpt/20240325T021042_full_run/report.md",
        ),
        Source(
            "autogpt/2024-03-10",
            "Significant-Gravitas/AutoGPT",
            "71a107db306d1c8d8e175e4c1d707fd7241b0f58",
            "MIT",
            "test",
            "benchmark/reports/autogpt/20240310T021156_full_run/report.md",
        ),
        Source(
            "autogpt/2024-04-02",
            "Significant-Gravitas/AutoGPT",
            "166a1f2eacde0827e572100dc770b6d75ec58a21",
            "MIT",
            "test",
            "benchmark/reports/autogpt/20240402T021135_full_run/report.md",
        ),
        Source(
            "autogpt/2024-04-10",
            "Significant-Gravitas/AutoGPT",
            "058bfc37f2e1c52179369ac0f3efe1e6d26a95f2",
            "MIT",
            "test",
            "benchmark/reports/autogpt/20240410T021006_full_run/report.md",
        ),
        Source(
            "mcp/reference-servers",
            "modelcontextprotocol/servers",
            "76d64c822f5125032f89eb71dbdb94e42b434821",
            "MIT",
            "test",
        ),
        Source(
            "mcp/kubernetes-mcp-server",
            "containers/kubernetes-mcp-server",
            "55749981693f71c9f9a573bfab229eccd4f124ea",
            "Apache-2.0",
            "train",
        ),
        Source(
            "mcp/mcp-grafana",
            "grafana/mcp-grafana",
            "c6e492b39f493f7e5856eb4ab419bc918b083716",
            "Apache-2.0",
            "train",
        ),
        Source(
            "mcp/supabase-mcp",
            "supabase-community/supabase-mcp",
            "17fb90f8655ad1ce7ee320614d22eb68bb26e510",
            "Apache-2.0",
            "test",
        ),
        Source(
            "workbench/dev",
            "olly-styles/WorkBench",
            "42f1b6dc18986f47701ca83de2d63dd4f95c59a0",
            "MIT",
            "dev",  # read while choosing the rule, never fitted on (see docs/evals.md)
        ),
        Source(
            "workbench/heldout",
            "olly-styles/WorkBench",
            "42f1b6dc18986f47701ca83de2d63dd4f95c59a0",
            "MIT",
            "test",
        ),
        Source(
            "workbench/heldout2",
            "olly-styles/WorkBench",
            "42f1b6dc18986f47701ca83de2d63dd4f95c59a0",
            "MIT",
            "test",  # the fresh draw: scored once, after its ship rule was committed (see docs/evals.md)
        ),
        Source(
            "workbench/heldout3",
            "olly-styles/WorkBench",
            "42f1b6dc18986f47701ca83de2d63dd4f95c59a0",
            "MIT",
            "test",  # the third draw: scored once, after the picked-object rule's ship rule was committed
        ),
        Source(
            "workbench/heldout-cutoffs",
            "olly-styles/WorkBench",
            "42f1b6dc18986f47701ca83de2d63dd4f95c59a0",
            "MIT",
            "test",  # stagnation on the held-out domains: scored once, after its pass rule was committed
        ),
        Source(
            "mcp/mcp-server-neon",
            "neondatabase/mcp-server-neon",
            "94928121944167d82d9b2b865bcdc5469631557d",
            "MIT",
            "test",
        ),
        Source(
            "webshop/react",
            _real_webshop.REPO,
            _real_webshop.COMMIT,
            "MIT",
            "test",  # held out: added after every rule was chosen, scored once (see docs/evals.md)
        ),
        Source(
            "abp/online-mind2web",
            _real_abp.REPO,
            _real_abp.COMMIT,
            "MIT",
            "test",  # stagnation only: the refit candidate's fresh source, built before any map scored it
        ),
    )
}


class Repo:
    """One bare clone, read at one commit."""

    def __init__(self, mirror: Path, source: Source) -> None:
        self.git = mirror / source.repo.replace("/", "+") / "repo"
        self.commit = source.commit
        if not self.git.is_dir():
            raise SystemExit(f"{source.name}: no clone of {source.repo} at {self.git}")

    def files(self, prefix: str) -> list[str]:
        out = subprocess.run(
            ["git", "--git-dir", str(self.git), "ls-tree", "-r", "--name-only", self.commit, "--", prefix],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        return out.split()

    def read(self, path: str) -> str:
        return subprocess.run(
            ["git", "--git-dir", str(self.git), "show", f"{self.commit}:{path}"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout


# --------------------------------------------------------------------------------------------------------------
# risk: annotated MCP tools


def _risk_label(read_only: bool, destructive: bool | None) -> str:
    """The MCP annotations as a risk class: a read-only tool is ``read_only``; a write its author marked
    destructive is ``irreversible``; any other write ``reversible`` (the annotations do not say more)."""
    if read_only:
        return "read_only"
    return "irreversible" if destructive else "reversible"


def _github_tools(repo: Repo) -> Iterator[tuple[str, str, str]]:
    for path in repo.files("pkg/github/__toolsnaps__"):
        if path.endswith(".snap"):
            snap = json.loads(repo.read(path))
            notes = snap.get("annotations") or {}
            yield snap["name"], _risk_label(bool(notes.get("readOnlyHint")), notes.get("destructiveHint")), path


_TS_TOOL = re.compile(r'registerTool\(\s*"([\w-]+)"')
_PY_TOOL = re.compile(r"name=(?:GitTools\.(\w+)|TimeTools\.(\w+)|\"([\w-]+)\")")
_HINT = re.compile(r"(readOnlyHint|destructiveHint)\s*[:=]\s*(true|false|True|False)")


def _blocks(text: str, starts: list[tuple[int, str]]) -> Iterator[tuple[str, str]]:
    for i, (at, name) in enumerate(starts):
        end = starts[i + 1][0] if i + 1 < len(starts) else len(text)
        yield name, text[at:end]


def _reference_tools(repo: Repo) -> Iterator[tuple[str, str, str]]:
    # The servers meant for use (the "everything" server is a protocol demo: its tools are not real actions).
    for path in ("src/filesystem/index.ts", "src/memory/index.ts"):
        text = repo.read(path)
        starts = [(m.start(), m.group(1)) for m in _TS_TOOL.finditer(text)]
        yield from _annotated(_blocks(text, starts), path)
    for path, enum in (
        ("src/git/src/mcp_server_git/server.py", "GitTools"),
        ("src/time/src/mcp_server_time/server.py", "TimeTools"),
    ):
        text = repo.read(path)
        values = dict(re.findall(r"^\s+(\w+) = \"([\w-]+)\"", text, flags=re.M))
        starts = [
            (m.start(), values.get(m.group(1) or m.group(2) or "", m.group(3) or ""))
            for m in _PY_TOOL.finditer(text)
            if f"{enum}." in m.group(0) or m.group(3)
        ]
        yield from _annotated(_blocks(text, [s for s in starts if s[1]]), path)


def _annotated(blocks: Iterator[tuple[str, str]], path: str) -> Iterator[tuple[str, str, str]]:
    for name, block in blocks:
        hints = {k: v.lower() == "true" for k, v in _HINT.findall(block)}
        if "readOnlyHint" in hints:
            yield name, _risk_label(hints["readOnlyHint"], hints.get("destructiveHint")), path


def _kubernetes_tools(repo: Repo) -> Iterator[tuple[str, str, str]]:
    # The server's tests pin the tool list it publishes, one JSON file per toolset (annotations included).
    for path in repo.files("pkg/mcp/testdata"):
        if re.fullmatch(r"pkg/mcp/testdata/toolsets-[\w-]+-tools(?:-[\w-]+)?\.json", path):
            for tool in json.loads(repo.read(path)):
                notes = tool.get("annotations") or {}
                if "readOnlyHint" in notes:
                    label = _risk_label(bool(notes["readOnlyHint"]), notes.get("destructiveHint"))
                    yield tool["name"], label, path


_GO_TOOL = re.compile(r'MustTool\(\s*"([\w-]+)"')
_GO_HINT = re.compile(r"With(ReadOnly|Destructive)HintAnnotation\((true|false)\)")


def _grafana_tools(repo: Repo) -> Iterator[tuple[str, str, str]]:
    for path in repo.files("tools"):
        if not path.endswith(".go") or path.endswith("_test.go"):
            continue
        text = repo.read(path)
        for name, block in _blocks(text, [(m.start(), m.group(1)) for m in _GO_TOOL.finditer(text)]):
            block = block[: block.find("\n)")]  # the MustTool call alone
            hints = {f"{k[0].lower()}{k[1:]}Hint": v == "true" for k, v in _GO_HINT.findall(block)}
            if "readOnlyHint" in hints:
                yield name, _risk_label(hints["readOnlyHint"], hints.get("destructiveHint")), path


_TS_KEYED = re.compile(r"^  ([a-z][a-z0-9_]*): \{$", re.M)
"""A tool definition keyed by its name in an exported object (``list_tables: {``)."""
_TS_NAMED = re.compile(r"name: '([\w-]+)'")


def _supabase_tools(repo: Repo) -> Iterator[tuple[str, str, str]]:
    folder = "packages/mcp-server-supabase/src/tools"
    for path in repo.files(folder):
        if path.endswith("-tools.ts"):
            text = repo.read(path)
            yield from _annotated(_blocks(text, [(m.start(), m.group(1)) for m in _TS_KEYED.finditer(text)]), path)


def _neon_tools(repo: Repo) -> Iterator[tuple[str, str, str]]:
    path = "mcp/tools/definitions.ts"
    text = repo.read(path)
    yield from _annotated(_blocks(text, [(m.start(), m.group(1)) for m in _TS_NAMED.finditer(text)]), path)


RISK_READERS = {
    "mcp/github-mcp-server": _github_tools,
    "mcp/reference-servers": _reference_tools,
    "mcp/kubernetes-mcp-server": _kubernetes_tools,
    "mcp/mcp-grafana": _grafana_tools,
    "mcp/supabase-mcp": _supabase_tools,
    "mcp/mcp-server-neon": _neon_tools,
}


def risk_records(source: Source, repo: Repo) -> Iterator[TraceRecord]:
    seen: set[str] = set()
    for name, label, path in RISK_READERS[source.name](repo):
        if name in seen:
            continue
        seen.add(name)
        projection = Projection("", (), (), pending=ToolCall(name, {}, id="pending"), pending_risk="unknown")
        yield TraceRecord(
            f"risk/{source.name}/{name}",
            "risk",
            label,
            source.split,
            source.name,
            projection_to_data(projection),
            license=source.license,
            kind="annotated_tool",
            extra={"provenance": f"{source.repo}@{source.commit[:12]}:{path}"},
        )


# --------------------------------------------------------------------------------------------------------------
# Runs: the rows a stopwise run would log, projected as the guardian sees them

_GUARDIAN = Guardian(evaluator=ScriptedEvaluator([]))  # only its projection limits are read
Turn = tuple[str, str | None, dict[str, Any], str, bool]
"""One step of a run: the assistant's text, the tool it called (None: none), the arguments, the result, whether
the result is an error."""


def rows_of(goal: str, turns: list[Turn]) -> list[Message]:
    """The rows a stopwise run logs for ``turns`` (the scripted builder's, which marks a failure by ``ERROR: ``)."""
    return messages_of(
        goal, [(text, tool or "", args, f"ERROR: {r}" if failed else r) for text, tool, args, r, failed in turns]
    )


def state_of(goal: str, turns: list[Turn], final: str | None) -> dict[str, Any]:
    """The projection the guardian builds at this point of the run (its default limits)."""
    g = _GUARDIAN
    projection = project(
        rows_of(goal, turns),
        goal=goal,
        last_k=g.history_steps,
        result_chars=g.result_chars,
        final=final,
        max_chars=g.max_chars,
    )
    return projection_to_data(projection)


def run_record(
    source: Source,
    key: str,
    condition: str,
    label: bool,
    kind: str,
    projection: dict[str, Any],
    where: str,
    **extra: Any,
) -> TraceRecord:
    return TraceRecord(
        f"{condition}/{source.name}/{key}",
        condition,
        label,
        source.split,
        source.name,
        projection,
        license=source.license,
        kind=kind,
        extra={"provenance": f"{source.repo}@{source.commit[:12]}:{where}", **extra},
    )


# mini-SWE-agent: THOUGHT + one bash command per turn; the environment's reply holds the return code and output.

SWE_RUN = "swebench_results/20251118_gemini-3-pro-74pct"
SWE_SAMPLE = 150
"""Runs sampled (fixed seed) of the 500: enough for the figures, small enough to ship."""
_BASH = re.compile(r"```bash\s*\n(.*?)```", re.S)
_RETURNCODE = re.compile(r"<returncode>(-?\d+)</returncode>")


def _swe_turns(messages: list[dict[str, Any]]) -> tuple[str, list[Turn], str | None]:
    goal = next(str(m["content"]) for m in messages if m["role"] == "user")
    goal = goal.split("</pr_description>")[0].replace("<pr_description>", "").strip()
    turns: list[Turn] = []
    final = None
    for i, m in enumerate(messages):
        if m["role"] != "assistant":
            continue
        content = str(m["content"])
        command = _BASH.search(content)
        thought = content[: command.start()].strip() if command else content.strip()
        thought = thought.removeprefix("THOUGHT:").strip()
        reply = str(messages[i + 1]["content"]) if i + 1 < len(messages) else ""
        if command is None:
            turns.append((thought, None, {}, "", False))
            continue
        code = _RETURNCODE.search(reply)
        failed = code is not None and code.group(1) != "0"
        output = _RETURNCODE.sub("", reply)
        output = re.sub(r"</?(output|output_head|output_tail|warning|elided_chars)>", "", output).strip()
        turns.append((thought, "bash", {"command": command.group(1).strip()}, output, failed))
        if "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT" in command.group(1):
            final = thought  # the reply the run ends on: the agent's last word, with its patch in the result
            break
    return goal, turns, final


def swe_records(source: Source, repo: Repo) -> Iterator[TraceRecord]:
    summary = json.loads(repo.read(f"{SWE_RUN}/results_summary.json"))
    resolved = {r["instance_id"]: bool(r["resolved"]) for r in summary["instances"]}
    ids = sorted(resolved)
    for iid in sorted(random.Random(20261201).sample(ids, SWE_SAMPLE)):
        where = f"{SWE_RUN}/trajs/{iid}/{iid}.traj.json"
        traj = json.loads(repo.read(where))
        goal, turns, final = _swe_turns(traj["messages"])
        if final is None:
            continue  # ended without submitting (a cut-off): no finished state to judge
        yield run_record(
            source,
            iid,
            "goal_reached",
            resolved[iid],
            "finished_run",
            state_of(goal, turns, final),
            where,
            outcome="resolved" if resolved[iid] else "unresolved",
        )


# ReAct on HotpotQA: Thought / Action / Observation lines; Finish[answer] ends an episode.

REACT_LOG = "hotpotqa_runs/root/ReAct/base/100_questions_5_trials.txt"
_STEP = re.compile(r"^(Thought|Action|Observation) (\d+): ?(.*)$")
_ACTION = re.compile(r"^(\w+)\[(.*)\]$", re.S)


def _react_trials(text: str) -> int:
    """How many trials the log holds (``BEGIN TRIAL n`` sections)."""
    return text.count("BEGIN TRIAL ")


def _react_episodes(text: str, trial: int = 1) -> Iterator[tuple[str, str, list[tuple[str, str, str]]]]:
    """(outcome, question, [(thought, action, observation)]) of one trial's episodes (the first by default). A
    Reflexion trial's question carries its reflection prompt ("You have attempted to answer...") and reflections:
    the question alone is kept (the reflections are lines before the first step, which are not read)."""
    trial_text = text.split(f"BEGIN TRIAL {trial}\n")[-1].split(f"BEGIN TRIAL {trial + 1}\n")[0]
    for section, outcome in (("CORRECT", "correct"), ("INCORRECT", "incorrect"), ("HALTED", "halted")):
        if f"BEGIN {section} AGENTS" not in trial_text:
            continue  # a trial cut short (the log's last, or a test's excerpt)
        body = trial_text.split(f"BEGIN {section} AGENTS")[1].split("------------- BEGIN")[0]
        for chunk in body.split("\nQuestion: ")[1:]:
            lines = chunk.split("\n")
            question = lines[0].split("You have attempted to answer")[0].strip()
            steps: dict[int, dict[str, str]] = {}
            last: tuple[int, str] | None = None
            for line in lines[1:]:
                m = _STEP.match(line)
                if m:
                    last = (int(m.group(2)), m.group(1))
                    steps.setdefault(last[0], {})[last[1]] = m.group(3)
                elif last is not None and not line.startswith("Correct answer:") and line.strip():
                    steps[last[0]][last[1]] += "\n" + line
            yield (
                outcome,
                question,
                [
                    (s.get("Thought", ""), s.get("Action", ""), s.get("Observation", ""))
                    for _, s in sorted(steps.items())
                ],
            )


def _react_turns(steps: list[tuple[str, str, str]]) -> tuple[list[Turn], str | None]:
    """The calls of an episode up to its ``Finish[...]`` (the final answer: None when it never came)."""
    turns: list[Turn] = []
    for thought, action, observation in steps:
        m = _ACTION.match(action.strip())
        tool, arg = (m.group(1).lower(), m.group(2)) if m else ("invalid_action", action)
        if tool == "finish":
            return turns, f"{thought}\nAnswer: {arg}".strip()
        turns.append((thought, tool, {"query": arg}, observation.strip(), False))
    return turns, None


def _react_stagnation(
    source: Source, key: str, outcome: str, question: str, turns: list[Turn], final: str | None, where: str
) -> Iterator[TraceRecord]:
    """An episode's stagnation record: the state before a finished episode's answer (false), the last state of one
    halted at the step cap (true); none for an episode with no call."""
    if not turns or (final is None and outcome != "halted"):
        return
    stuck = final is None
    yield run_record(
        source,
        key,
        "stagnation",
        stuck,
        "proxy_halted_at_cap" if stuck else "proxy_before_answer",
        state_of(question, turns, None),
        where,
        outcome=outcome,
    )


def react_records(source: Source, repo: Repo) -> Iterator[TraceRecord]:
    """The first trial of the base agent (later trials re-run the questions it missed: ``reflexion_records``)."""
    for n, (outcome, question, steps) in enumerate(_react_episodes(repo.read(REACT_LOG))):
        turns, final = _react_turns(steps)
        key = f"t1-{n:03d}"
        if final is not None:
            yield run_record(
                source,
                key,
                "goal_reached",
                outcome == "correct",
                "finished_run",
                state_of(question, turns, final),
                REACT_LOG,
                outcome=outcome,
            )
        yield from _react_stagnation(source, key, outcome, question, turns, final, REACT_LOG)


REFLEXION_LOG = "hotpotqa_runs/root/ReAct/reflexion/100_questions_7_trials.txt"


def reflexion_episodes(
    base: str, reflexion: str
) -> Iterator[tuple[str, int, int, str, str, list[tuple[str, str, str]]]]:
    """(log, trial, index, outcome, question, steps) of every episode of the same ReAct agent on the same 100
    HotpotQA questions that ``hotpotqa/react`` does not hold: the base agent's trials 2-5 (the questions it had
    missed, run again) and the Reflexion agent's trials 1-7 (a reflection on the failed attempt in the prompt from
    trial 2 on), in that order. An episode whose question and steps equal one read before (trial 1 of the base log,
    a carried-over correct episode, a deterministic re-run) is dropped: each kept episode is a distinct run."""
    seen = {(q, repr(s)) for _, q, s in _react_episodes(base)}
    for log, text, first in ((REACT_LOG, base, 2), (REFLEXION_LOG, reflexion, 1)):
        for t in range(first, _react_trials(text) + 1):
            for n, (outcome, question, steps) in enumerate(_react_episodes(text, t)):
                if (question, repr(steps)) in seen:
                    continue
                seen.add((question, repr(steps)))
                yield log, t, n, outcome, question, steps


def reflexion_records(source: Source, repo: Repo) -> Iterator[TraceRecord]:
    """Stagnation only, as ``hotpotqa/react``'s (a proxy, said so in ``kind``), on the episodes of
    ``reflexion_episodes``: the fresh source of the stagnation map's candidate, scored once (docs/evals.md)."""
    for log, t, n, outcome, question, steps in reflexion_episodes(repo.read(REACT_LOG), repo.read(REFLEXION_LOG)):
        turns, final = _react_turns(steps)
        key = f"{'base' if log == REACT_LOG else 'reflexion'}-t{t}-{n:03d}"
        yield from _react_stagnation(source, key, outcome, question, turns, final, f"{log}#trial={t}")


# Who&When, algorithm-generated: multi-agent (AutoGen group chat) logs of failed GAIA / AssistantBench runs.


def _unquote(value: Any) -> str:
    """The logs keep Python reprs of strings ("'text'"): their text."""
    text = str(value)
    try:
        parsed = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text
    return parsed if isinstance(parsed, str) else text


def whowhen_records(source: Source, repo: Repo) -> Iterator[TraceRecord]:
    folder = "Who&When/Algorithm-Generated"
    for path in sorted(repo.files(folder), key=lambda p: int(Path(p).stem) if Path(p).stem.isdigit() else 0):
        log = json.loads(repo.read(path))
        history = [(_unquote(h.get("name", h.get("role", ""))), _unquote(h["content"])) for h in log["history"]]
        history = [(who, text) for who, text in history if text.strip() and text.strip() != "TERMINATE"]
        if not history:
            continue
        turns: list[Turn] = []
        for who, text in history[:-1]:
            if who == "Computer_terminal":
                failed = "exitcode: 0" not in text[:40]
                if turns and turns[-1][1] is None:
                    # The code a speaker wrote ran: its output is that speaker's tool result.
                    prev = turns[-1]
                    turns[-1] = (prev[0], "execute_code", {"by": prev[2].get("by", "")}, text, failed)
                else:
                    turns.append(("", "execute_code", {}, text, failed))
            else:
                turns.append((f"{who}: {text}", None, {"by": who}, "", False))
        who, last = history[-1]
        yield run_record(
            source,
            Path(path).stem,
            "goal_reached",
            bool(log.get("is_correct")),
            "finished_run",
            state_of(_unquote(log["question"]), turns, f"{who}: {last}"),
            path,
            outcome="failed",
        )


# AutoGPT's benchmark reports (agbenchmark "full runs"): per task and attempt the graded outcome (`success`) and
# every step: the agent's words (`thoughts.speak`), the command it chose, and in the next step that command's
# result. The repository is too large to clone here; the attempts were transcribed from the pinned report files
# into a compact form (the same form `compact_report` makes of a whole report.json), cut as below.

AUTOGPT = HERE / "third_party" / "autogpt_benchmark"
TEXT_CHARS = 600
"""What the excerpt keeps of an agent's words and of a command's result (the rule evaluator reads 600 characters of
a result; the guardian keeps 2,000)."""
ARG_CHARS = 300
"""What it keeps of a string argument (the rule evaluator reads 300 characters of a call's arguments)."""


def _cut(value: Any, limit: int) -> Any:
    if isinstance(value, str):
        return value[:limit]
    if isinstance(value, list):
        return [_cut(v, limit) for v in value]
    if isinstance(value, dict):
        return {k: _cut(v, limit) for k, v in value.items()}
    return value


def _outcome_text(result: dict[str, Any]) -> tuple[str, str]:
    """A command's result as (text, status): an error's reason, or the outputs (a list as JSON)."""
    if "error" in result:
        return str(result.get("reason") or result["error"]), "error"
    out = result.get("outputs", "")
    return (out if isinstance(out, str) else json.dumps(out, ensure_ascii=False)), str(result.get("status", ""))


def compact_report(report: dict[str, Any], report_id: str) -> Iterator[dict[str, Any]]:
    """The attempts of an agbenchmark report that end on ``finish``, in the excerpt's compact form: per step
    ``[speak, command, args, result, status]`` (the result is the one the next step reports; ``finish`` has
    none). An attempt cut off before ``finish`` has no finished state to judge and is left out."""
    for test, body in report["tests"].items():
        for n, attempt in enumerate(body.get("results") or []):
            raw = [s.get("additional_output") or {} for s in attempt.get("steps") or []]
            steps: list[list[Any]] = []
            for i, out in enumerate(raw):
                command = out.get("command")
                if not command:
                    continue
                speak = _cut(str((out.get("thoughts") or {}).get("speak", "")), TEXT_CHARS)
                args = _cut(command.get("args") or {}, ARG_CHARS)
                if command["name"] == "finish":
                    steps.append([speak, "finish", args, None, None])
                    break
                later = raw[i + 1].get("last_action") if i + 1 < len(raw) else None
                if not later:
                    break
                text, status = _outcome_text(later.get("result") or {})
                steps.append([speak, command["name"], args, _cut(text, TEXT_CHARS), status])
            if steps and steps[-1][1] == "finish":
                yield {
                    "report": report_id,
                    "test": test,
                    "attempt": n,
                    "success": bool(attempt["success"]),
                    "reached_cutoff": bool(attempt.get("reached_cutoff")),
                    "n_steps": attempt.get("n_steps"),
                    "steps": steps,
                }


def _report_id(source: Source) -> str:
    return Path(source.excerpt).parent.name.removesuffix("_full_run")


def autogpt_records(source: Source, repo: Repo | None) -> Iterator[TraceRecord]:
    """One finished state per attempt: the task as the goal, each command with its result (an error as a failed
    call), the ``finish`` reason as the final answer; labelled by the benchmark's grader (``success``)."""
    tasks = json.loads((AUTOGPT / "tasks.json").read_text(encoding="utf-8"))
    report = _report_id(source)
    for line in (AUTOGPT / "attempts.jsonl").read_text(encoding="utf-8").splitlines():
        attempt = json.loads(line)
        if attempt["report"] != report:
            continue
        turns: list[Turn] = [
            (_cut(speak, TEXT_CHARS), command, _cut(args, ARG_CHARS), _cut(result, TEXT_CHARS), status == "error")
            for speak, command, args, result, status in attempt["steps"][:-1]
        ]
        final = str(attempt["steps"][-1][2].get("reason", ""))
        test = attempt["test"]
        yield run_record(
            source,
            f"{test}/{attempt['attempt']}",
            "goal_reached",
            attempt["success"],
            "finished_run",
            state_of(tasks[test]["task"], turns, final),
            f"{source.excerpt}#tests/{test}/results/{attempt['attempt']}",
            outcome="success" if attempt["success"] else "failed",
            family=tasks[test]["category"][0],
        )


# WorkBench: a LangChain agent of five models on workplace tasks (mail, calendar, CRM, project tasks, analytics);
# the runs are read by _real_workbench, the labels are the benchmark's own outcome check (GRADES).


STUCK_SOURCE = "workbench/heldout-cutoffs"
"""The held-out domains' stagnation records (the dev domains' are in ``workbench/dev``, beside its goal_reached)."""


def workbench_records(source: Source, repo: Repo) -> Iterator[TraceRecord]:
    """One finished state per drawn run of the source's domains (``workbench/heldout``: the held-out domains of the
    first draws, read while choosing a rule, never fitted; ``workbench/heldout2`` and ``workbench/heldout3``: later
    draws of those domains, each scored once; ``workbench/dev``: the other domains, read while choosing rules, never
    fitted): the task as the goal, each call with what the tool returned, the agent's final output as the final
    answer; labelled by WorkBench's check of the end state. ``workbench/dev`` and ``STUCK_SOURCE`` also hold their
    domains' stagnation records (``workbench_stagnation_records``)."""
    assert source.commit == _real_workbench.COMMIT
    files = _real_workbench.result_files(repo.files(_real_workbench.RESULTS))
    runs = list(_real_workbench.finished_runs(repo.read, files))
    if source.name != STUCK_SOURCE:
        draw = source.name.removeprefix("workbench/")
        choose, graded = _real_workbench.DRAWS[draw if draw in _real_workbench.DRAWS else "first"]
        held_out = source.name != "workbench/dev"
        grades = _real_workbench.read_grades(graded)
        for run in choose(runs):
            if (run.domain in _real_workbench.HELD_OUT_DOMAINS) != held_out:
                continue
            correct = grades[(run.path, run.row)]
            yield run_record(
                source,
                run.key,
                "goal_reached",
                correct,
                "finished_run",
                state_of(run.query, _workbench_turns(run), run.final),
                f"{run.path}#row={run.row}",
                outcome="correct" if correct else "incorrect",
                family=run.domain,
                model=run.model,
            )
    if source.name in ("workbench/dev", STUCK_SOURCE):
        yield from workbench_stagnation_records(source, list(_real_workbench.cut_off_runs(repo.read, files)), runs)


def workbench_stagnation_records(
    source: Source, cut_off: list[_real_workbench.WorkBenchRun], finished: list[_real_workbench.WorkBenchRun]
) -> Iterator[TraceRecord]:
    """Stagnation on the source's side of the domain split, as ``hotpotqa/react``'s: the last state of each run
    LangChain cut off at its iteration or time limit (stuck: true), and the state before the final answer of runs
    that ended on one (``_real_workbench.stagnation_runs``: false). A proxy, said so in ``kind``: cut off against
    about to answer, not a judgment of each state."""
    stuck, answered = _real_workbench.stagnation_runs(cut_off, finished, held_out=source.name == STUCK_SOURCE)
    for label, kind, outcome, chosen in (
        (True, "proxy_halted_at_cap", "halted", stuck),
        (False, "proxy_before_answer", "answered", answered),
    ):
        for run in chosen:
            yield run_record(
                source,
                run.key,
                "stagnation",
                label,
                kind,
                state_of(run.query, _workbench_turns(run), None),
                f"{run.path}#row={run.row}",
                outcome=outcome,
                family=run.domain,
                model=run.model,
            )


def _workbench_turns(run: _real_workbench.WorkBenchRun) -> list[Turn]:
    return [(s.thought, s.tool, s.args, s.result, s.failed) for s in run.steps]


# ReAct on WebShop: GPT-3 shopping for a user on a web store; the printed run is read by _real_webshop, the label is
# the store's reward of the purchase (1.0: WebShop's success).

_WEBSHOP_ARG = {"search": "query", "click": "button"}


def _webshop_turns(episode: _real_webshop.Episode) -> list[Turn]:
    return [(s.thought, s.tool, {_WEBSHOP_ARG.get(s.tool, "text"): s.arg}, s.result, s.failed) for s in episode.steps]


def webshop_records(source: Source, repo: Repo) -> Iterator[TraceRecord]:
    """The drawn runs' finished states (``webshop_goal_records``), then every run's stagnation state
    (``webshop_stagnation_records``)."""
    assert source.commit == _real_webshop.COMMIT
    found = _real_webshop.episodes(_real_webshop.run_output(repo.read(_real_webshop.NOTEBOOK)))
    yield from webshop_goal_records(source, found)
    yield from webshop_stagnation_records(source, found)


def webshop_stagnation_records(source: Source, found: list[_real_webshop.Episode]) -> Iterator[TraceRecord]:
    """Stagnation (a proxy, as ``hotpotqa/react``'s, said so in ``kind``) on all 500 runs, none drawn: the last
    state of a run the harness cut off at its 15-action cap without buying (true: shopping in circles), the state
    before ``Buy Now`` of a run that bought (false), whatever the purchase's reward; none for a run with no call.
    Held out: the stagnation candidate's second fresh source, scored once (docs/evals.md)."""
    for episode in found:
        turns = _webshop_turns(episode)
        if not turns:
            continue
        stuck = not episode.finished
        yield run_record(
            source,
            f"fixed_{episode.index}",
            "stagnation",
            stuck,
            "proxy_halted_at_cap" if stuck else "proxy_before_answer",
            state_of(episode.instruction, turns, None),
            f"{_real_webshop.NOTEBOOK}#episode={episode.index}",
            outcome="cut_off" if stuck else "bought",
        )


def webshop_goal_records(source: Source, found: list[_real_webshop.Episode]) -> Iterator[TraceRecord]:
    """One finished state per drawn run (``_real_webshop.sample``): the instruction as the goal, each search and
    click with the page the store returned (the agent's ``think[...]`` its words before the call), the thoughts
    since the last call and ``click[Buy Now]`` as the final answer; labelled by whether the store's reward is 1.0
    (partial matches, rewards between 0 and 1, are failures, as WebShop counts its success rate)."""
    for episode in _real_webshop.sample(found):
        turns = _webshop_turns(episode)
        reward = episode.reward or 0.0
        yield run_record(
            source,
            f"fixed_{episode.index}",
            "goal_reached",
            episode.success,
            "finished_run",
            state_of(episode.instruction, turns, episode.final),
            f"{_real_webshop.NOTEBOOK}#episode={episode.index}",
            outcome="success" if episode.success else ("partial" if reward > 0 else "failed"),
            reward=reward,
        )


# ABP + Claude on Online-Mind2Web: a browser agent on live websites; _real_abp reads each task's result.json. Its
# actions returned screenshots only, so every call's result is empty.


def abp_records(source: Source, repo: Repo) -> Iterator[TraceRecord]:
    """Stagnation only (a proxy, as ``hotpotqa/react``'s, said so in ``kind``), every run, no draw: the last
    state of a run the harness cut off at its turn limit (``error_max_turns``: true) against the state before the
    answer of a run that submitted one (``success``: false, whatever a grader later said of the answer); none for a
    run with no action. The task is the goal. Held out: fresh for the stagnation refit (docs/evals.md)."""
    assert source.commit == _real_abp.COMMIT
    for path in sorted(p for p in repo.files(_real_abp.RUNS) if p.endswith("/result.json")):
        run = _real_abp.run_of(repo.read(path))
        if not run.actions:
            continue
        turns: list[Turn] = [(a.thought, a.tool, a.args, "", False) for a in run.actions]
        yield run_record(
            source,
            run.task_id,
            "stagnation",
            run.cut_off,
            "proxy_halted_at_cap" if run.cut_off else "proxy_before_answer",
            state_of(run.task, turns, None),
            path,
            outcome="cut_off" if run.cut_off else "answered",
        )


RUN_READERS = {
    "swe/mini-swe-agent": swe_records,
    "hotpotqa/react": react_records,
    "hotpotqa/reflexion": reflexion_records,
    "whowhen/algorithm-generated": whowhen_records,
    "autogpt/2024-04-01": autogpt_records,
    "autogpt/2024-03-05": autogpt_records,
    "autogpt/2024-03-20": autogpt_records,
    "autogpt/2024-03-25": autogpt_records,
    "autogpt/2024-03-10": autogpt_records,
    "autogpt/2024-04-02": autogpt_records,
    "autogpt/2024-04-10": autogpt_records,
    "workbench/dev": workbench_records,
    "workbench/heldout": workbench_records,
    "workbench/heldout2": workbench_records,
    "workbench/heldout3": workbench_records,
    STUCK_SOURCE: workbench_records,
    "webshop/react": webshop_records,
    "abp/online-mind2web": abp_records,
}


# --------------------------------------------------------------------------------------------------------------


def build(mirror: Path, only: set[str] | None = None) -> list[TraceRecord]:
    records: list[TraceRecord] = []
    for source in SOURCES.values():
        if only and source.name not in only:
            continue
        if source.excerpt:
            records.extend(RUN_READERS[source.name](source, None))
            continue
        repo = Repo(mirror, source)
        if source.name in RISK_READERS:
            records.extend(risk_records(source, repo))
        if source.name in RUN_READERS:
            records.extend(RUN_READERS[source.name](source, repo))
    return records


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mirror", type=Path, required=True, help="folder of bare clones (<owner>+<name>/repo)")
    parser.add_argument("--only", action="append", help="build only this source (repeatable)")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument(
        "--keep-others",
        action="store_true",
        help="with --only: keep every other source's lines of --out as they are (no clone of those needed)",
    )
    args = parser.parse_args(argv)
    if args.keep_others and not args.only:
        parser.error("--keep-others needs --only")
    records = build(args.mirror, set(args.only) if args.only else None)
    lines = _other_lines(args.out, set(args.only)) if args.keep_others else {}
    for r in records:
        lines.setdefault(r.source, []).append(json.dumps(_data(r), sort_keys=True, ensure_ascii=False) + "\n")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w", encoding="utf-8") as f:
        for name in SOURCES:  # the order a full build writes
            f.writelines(lines.get(name, []))
    counts = Counter((r.source, r.condition, r.split, str(r.label)) for r in records)
    for key, n in sorted(counts.items()):
        print(*key, n, sep="\t")
    print(f"{len(records)} records -> {args.out}", file=sys.stderr)
    return 0


def _other_lines(path: Path, rebuilt: set[str]) -> dict[str, list[str]]:
    """Per source not being rebuilt, its lines of ``path`` in their order, byte for byte."""
    kept: dict[str, list[str]] = {}
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines(keepends=True):
            source = json.loads(line)["source"]
            if source not in rebuilt:
                kept.setdefault(source, []).append(line)
    return kept


def _data(record: TraceRecord) -> dict[str, Any]:
    data = record.to_data()
    data.pop("text", None)  # rebuilt from the projection on reading: no need to ship it twice
    return data


if __name__ == "__main__":
    raise SystemExit(main())
