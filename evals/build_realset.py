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
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stopwise.evals.traces import TraceRecord, projection_to_data
from stopwise.guardian.projection import Projection
from stopwise.messages import ToolCall

HERE = Path(__file__).resolve().parent
OUT = HERE / "data" / "realset.jsonl"


@dataclass(frozen=True)
class Source:
    name: str
    repo: str
    commit: str
    license: str
    split: str


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
            "mcp/reference-servers",
            "modelcontextprotocol/servers",
            "76d64c822f5125032f89eb71dbdb94e42b434821",
            "MIT",
            "test",
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


RISK_READERS = {"mcp/github-mcp-server": _github_tools, "mcp/reference-servers": _reference_tools}


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


def build(mirror: Path, only: set[str] | None = None) -> list[TraceRecord]:
    records: list[TraceRecord] = []
    for source in SOURCES.values():
        if only and source.name not in only:
            continue
        repo = Repo(mirror, source)
        if source.name in RISK_READERS:
            records.extend(risk_records(source, repo))
    return records


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mirror", type=Path, required=True, help="folder of bare clones (<owner>+<name>/repo)")
    parser.add_argument("--only", action="append", help="build only this source (repeatable)")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    records = build(args.mirror, set(args.only) if args.only else None)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w", encoding="utf-8") as f:
        for r in records:
            f.write(json.dumps(_data(r), sort_keys=True, ensure_ascii=False) + "\n")
    counts = Counter((r.source, r.condition, r.split, str(r.label)) for r in records)
    for key, n in sorted(counts.items()):
        print(*key, n, sep="\t")
    print(f"{len(records)} records -> {args.out}", file=sys.stderr)
    return 0


def _data(record: TraceRecord) -> dict[str, Any]:
    data = record.to_data()
    data.pop("text", None)  # rebuilt from the projection on reading: no need to ship it twice
    return data


if __name__ == "__main__":
    raise SystemExit(main())
