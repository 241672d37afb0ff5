"""Docs that run: every ```python block of README.md, docs/*.md and docs/integrations/*.md runs as written,
pasted into a script of its own, unless its fence says ```python fragment (a piece that needs a key, a server or
names defined around it); a fragment must still parse, and what it imports from stopwise must exist. Also the one
exit-code table of the command line, checked against the code."""

from __future__ import annotations

import argparse
import ast
import os
import re
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = [
    ROOT / "README.md",
    *sorted((ROOT / "docs").glob("*.md")),
    *sorted((ROOT / "docs" / "integrations").glob("*.md")),
]
# A fence may be indented (a block inside a list item); its closing fence has the same indent.
_BLOCK = re.compile(r"^([ \t]*)```python( fragment)?[ \t]*\n(.*?)^\1```", re.DOTALL | re.MULTILINE)


@dataclass(frozen=True)
class Block:
    file: Path
    line: int
    code: str
    fragment: bool

    def __str__(self) -> str:
        return f"{self.file.relative_to(ROOT)}:{self.line}"


def blocks() -> list[Block]:
    found = []
    for file in DOCS:
        text = file.read_text(encoding="utf-8")
        for m in _BLOCK.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            found.append(Block(file, line, textwrap.dedent(m.group(3)), m.group(2) is not None))
    return found


def test_every_python_fence_is_found() -> None:
    """The extractor sees every ```python fence, so none escapes the runner by its layout."""
    fences = sum(len(re.findall(r"^[ \t]*```python", f.read_text(encoding="utf-8"), re.MULTILINE)) for f in DOCS)
    assert len(blocks()) == fences


def test_fragments_parse() -> None:
    for block in blocks():
        # top-level await is allowed in a fragment (it shows code that lives inside an async function)
        compile(block.code, str(block), "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT, dont_inherit=True)


_CHECKED_IMPORTS = ("stopwise", "pydantic_ai", "agents", "langgraph", "langchain_core", "mcp")
"""Packages whose names a fragment's imports must find: stopwise's own, and the peers its integrations pin (the
test extra installs them). Others (an exporter, a provider SDK's extras) are the reader's to install."""


def test_every_import_of_a_fragment_from_stopwise_or_a_pinned_peer_resolves() -> None:
    """A fragment cannot run, but the names it imports from stopwise (and from the frameworks the integration
    pages pin) exist: a renamed class or module fails here, not in a reader's editor."""
    failed = []
    for block in blocks():
        if not block.fragment:
            continue
        tree = ast.parse(block.code)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                modules = [node.module or ""]
            elif isinstance(node, ast.Import):
                modules = [a.name for a in node.names]
            else:
                continue
            if not any(m.split(".")[0] in _CHECKED_IMPORTS for m in modules):
                continue
            try:
                exec(compile(ast.Module([node], []), str(block), "exec"), {})
            except ImportError as exc:
                failed.append(f"{block}: {ast.unparse(node)}: {exc}")
    assert failed == []


@pytest.mark.slow
def test_every_python_block_of_the_docs_runs_as_written(tmp_path: Path) -> None:
    """Each runnable block in a fresh directory, as a script of its own (all at once, in parallel)."""
    runnable = [b for b in blocks() if not b.fragment]
    assert len(runnable) >= 20
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}  # offline, as a new user's shell
    procs = []
    for number, block in enumerate(runnable):
        cwd = tmp_path / f"block{number}"
        cwd.mkdir()
        (cwd / "sample.py").write_text(block.code, encoding="utf-8")
        procs.append(
            subprocess.Popen(
                [sys.executable, "sample.py"],
                cwd=cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    failed = []
    for block, proc in zip(runnable, procs, strict=True):
        _, stderr = proc.communicate(timeout=180)
        if proc.returncode != 0:
            failed.append(f"{block}:\n{block.code}\n{stderr}")
    assert not failed, "\n\n".join(failed)


def _command_section() -> str:
    return (ROOT / "README.md").read_text(encoding="utf-8").split("## Command line", 1)[1].split("\n## ", 1)[0]


def test_the_readme_command_table_lists_every_subcommand() -> None:
    from stopwise.cli import _parser

    commands = next(a for a in _parser()._actions if a.dest == "command")
    table = _command_section()
    for name in commands.choices:  # type: ignore[union-attr]
        assert re.search(rf"^\| `stopwise [^`]*\b{name}\b", table, re.MULTILINE), name


def _options(parser: argparse.ArgumentParser) -> set[str]:
    return {option for action in parser._actions for option in action.option_strings}


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    found = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(found[0].choices) if found else {}


def test_every_flag_of_the_readme_command_table_is_one_its_commands_take() -> None:
    """A flag the table's synopsis names for a command (each of ``approve|reject|terminate``) is one the command's
    parser accepts: a newcomer copying a synopsis never meets "unrecognized arguments"."""
    from stopwise.cli import _parser

    top = _parser()
    synopses = re.findall(r"^\| `stopwise ([^`]*)` \|", _command_section(), re.MULTILINE)
    assert len(synopses) >= 15
    for synopsis in synopses:
        words = synopsis.split()
        flags = set(re.findall(r"(?<![\w-])(--?[a-z][\w-]*)", synopsis))
        parsers = [top] if words[0].startswith("-") else [_subcommands(top)[n] for n in words[0].split("\\|")]
        for parser in parsers:
            if len(words) > 1 and words[1] in _subcommands(parser):  # `guardian stats`
                parser = _subcommands(parser)[words[1]]
            missing = flags - _options(parser)
            assert not missing, f"`stopwise {synopsis}`: {parser.prog} has no {sorted(missing)}"


def test_one_exit_code_table_names_the_codes_the_command_returns() -> None:
    from stopwise import cli

    rows = re.findall(r"^\| (\d+) \| ", _command_section(), re.MULTILINE)
    assert [int(r) for r in rows] == [cli.EXIT_OK, cli.EXIT_FAILED, cli.EXIT_USAGE, 130]


# `file.py::name` starts a cell's references; a bare `::name` after it names another test of the same file.
_PINNED = re.compile(r"`(test_\w+\.py)(?:::(test_\w+))?`|`::(test_\w+)`")


def _pinned_by(line: str) -> list[tuple[str, str]]:
    """The ``(file, test)`` pairs a row of docs/seed-rules.md cites, in order."""
    pairs: list[tuple[str, str]] = []
    current = ""
    for m in _PINNED.finditer(line):
        if m.group(1):
            current = m.group(1)
            if m.group(2):
                pairs.append((current, m.group(2)))
        elif current:
            pairs.append((current, m.group(3)))
    return pairs


def test_every_test_the_seed_rules_table_cites_exists() -> None:
    """A seed rule is pinned only by a test that runs: a renamed or removed test must not leave its rule citing it."""
    defined = {
        f.name: set(re.findall(r"def (test_\w+)", f.read_text(encoding="utf-8")))
        for f in (ROOT / "tests").glob("test_*.py")
    }
    cited = [
        p
        for line in (ROOT / "docs" / "seed-rules.md").read_text(encoding="utf-8").splitlines()
        for p in _pinned_by(line)
    ]
    assert len(cited) > 100  # the table's rows were read, not skipped by a pattern that matches nothing
    missing = [f"{file}::{name}" for file, name in cited if name not in defined.get(file, set())]
    assert missing == []


@pytest.mark.slow
@pytest.mark.parametrize("example", ["pydantic_ai_agent", "openai_agents_agent", "langgraph_agent", "mcp_notes"])
def test_the_example_an_integration_page_says_runs_offline_does(tmp_path: Path, example: str) -> None:
    """Each docs/integrations page shows fragments and names the example that runs them offline: it runs, with no
    API key, to the answer given once the reviewer approved the escalated call."""
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    pages = "".join(p.read_text(encoding="utf-8") for p in (ROOT / "docs" / "integrations").glob("*.md"))
    assert f"`examples/{example}.py` runs" in pages
    proc = subprocess.run(
        [sys.executable, str(ROOT / "examples" / f"{example}.py")],
        cwd=tmp_path,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr
    assert "after approval" in proc.stdout and "Traceback" not in proc.stderr
