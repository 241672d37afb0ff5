"""What starting the ``stopwise`` command costs: importing ``stopwise.cli`` and building its parser (all that
``stopwise --help`` does) imports no command's own modules. Each command imports what it needs when it runs, so
``stopwise approve`` from a script, or ``stopwise runs``, does not pay for the demo, the web server or the eval
harness. Checked in a fresh interpreter, where nothing else has imported them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src"

HEAVY = (
    "stopwise.demo",  # the bundled scenarios: `stopwise demo` only
    "stopwise._cli.serve",  # the web page and its HTTP server: `stopwise serve` only
    "http.server",
    "stopwise._cli.show",  # `show` and `report`
    "stopwise._view.timeline",
    "stopwise._view.html",  # the HTML page: `report` and `serve`
    "stopwise._cli.control",  # settling and continuing runs: approve, reject, terminate, resume, retry, fork
    "stopwise._cli.gc",
    "stopwise._load",  # the agent loader: commands that run an agent
    "stopwise.guardian.audit",  # `replay` and `guardian stats`
    "stopwise.evals",  # the eval harness (numpy, scikit-learn): `eval` only
    "numpy",
    "stopwise.store.sqlite",  # the store: opened by the command that reads a log, never by the parser
    "sqlite3",
    "stopwise.guardrails.builtins",  # the demo's guardrails
)


def _imported_by(code: str) -> set[str]:
    probe = f"import sys, json\n{code}\nprint(json.dumps(sorted(sys.modules)))"
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, env={"PYTHONPATH": str(SRC)}
    )
    return set(json.loads(done.stdout))


def test_importing_the_cli_and_building_its_parser_imports_no_commands_own_modules() -> None:
    loaded = _imported_by("import stopwise.cli\nstopwise.cli._parser()")
    assert "stopwise.cli" in loaded and "argparse" in loaded
    assert sorted(m for m in HEAVY if m in loaded) == []


def test_a_command_imports_what_it_needs_when_it_runs() -> None:
    # The other side of the rule: the modules are imported on demand, not lost. `demo --help` writes the
    # description that names the scenarios, so it imports the demo, and nothing else of HEAVY but the store the
    # demo runs on.
    loaded = _imported_by(
        "import contextlib, io, stopwise.cli\n"
        "with contextlib.suppress(SystemExit), contextlib.redirect_stdout(io.StringIO()):\n"
        "    stopwise.cli.main(['demo', '--help'])"
    )
    assert "stopwise.demo" in loaded
    assert "stopwise._cli.serve" not in loaded and "stopwise.evals" not in loaded
