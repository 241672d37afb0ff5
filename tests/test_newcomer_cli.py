"""What a new user gets from the command line for input they plausibly give it: someone else's SQLite file, an
option the subcommand does not have, a directory where a file goes, a log they cannot write, an agent name the
file does not define, and Ctrl-C in the middle of a run. Each is one line naming the problem, a non-zero exit
code, no traceback, and nothing committed lost. The CLI runs as a real process."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from tests._cli_fixtures import stopwise_cmd

REPO = Path(__file__).resolve().parent.parent

# Interrupts itself once, as a user pressing Ctrl-C would, while the second step's tool runs: the first step is
# committed by then. The model answers from the history alone, so a retry in another process goes on from it.
INTERRUPTED = '''
import asyncio
import os
import signal
from pathlib import Path

from stopwise import Agent, FunctionModel, Reply, ToolCall, tool
from stopwise.messages import Role


@tool
async def look(page: int) -> str:
    """Read a page."""
    marker = Path("interrupted-once")
    if page == 2 and not marker.exists():
        marker.write_text("yes")
        os.kill(os.getpid(), signal.SIGINT)
        await asyncio.Event().wait()  # never set: the interrupt lands here, whatever the timing
    return f"page {page}: nothing"


def _reader(request):
    seen = sum(1 for m in request.messages if m.role is Role.TOOL)
    if seen >= 3:
        return "Read three pages."
    return Reply(tool_calls=(ToolCall("look", {"page": seen + 1}),))


reader = Agent(name="reader", model=FunctionModel(_reader), tools=(look,))
'''


def _one_error_line(proc: subprocess.CompletedProcess[str], command: str) -> str:
    """The single stderr line of a refused command; asserts it is that and no traceback."""
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith(f"stopwise {command}: error: ")
    return proc.stderr


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def agent_file(tmp_path: Path) -> Path:
    path = tmp_path / "agents.py"
    path.write_text(INTERRUPTED, encoding="utf-8")
    return path


@pytest.mark.parametrize("table", ["users", "sessions"])
@pytest.mark.parametrize(
    "command",
    [
        ["runs", "--db", "app.db"],
        ["show", "s1", "--db", "app.db"],
        ["report", "s1", "--db", "app.db"],
        ["run", "agents.py:reader", "hi", "--db", "app.db"],
        ["retry", "agents.py:reader", "s1", "--db", "app.db"],
        ["demo", "--db", "app.db"],
        ["replay", "app.db"],
        ["gc", "--older-than", "1d", "--db", "app.db"],
    ],
    ids=lambda c: c[0] if isinstance(c, list) else c,
)
def test_another_programs_sqlite_database_is_refused_and_left_byte_for_byte_untouched(
    tmp_path: Path, agent_file: Path, command: list[str], table: str
) -> None:
    # A table named like one of stopwise's (sessions) used to fail half-way through creating the schema, after the
    # file had been switched to WAL; any other table used to get stopwise's tables added beside it.
    db = tmp_path / "app.db"
    with sqlite3.connect(db) as conn:
        conn.execute(f"CREATE TABLE {table} (id INTEGER PRIMARY KEY, name TEXT)")
        conn.execute(f"INSERT INTO {table} (name) VALUES ('alice')")
    conn.close()
    before = _digest(db)

    err = _one_error_line(stopwise_cmd(*command, cwd=tmp_path), command[0])

    assert "app.db: not a stopwise log: an SQLite database of another program" in err
    assert f"(tables: {table})" in err
    assert _digest(db) == before
    assert not Path(f"{db}-wal").exists() and not Path(f"{db}-shm").exists()


@pytest.mark.parametrize("command", [["replay"], ["guardian", "stats"], ["serve"]])
def test_a_refused_positional_db_is_named_as_given_not_as_a_db_flag(tmp_path: Path, command: list[str]) -> None:
    with sqlite3.connect(tmp_path / "app.db") as conn:
        conn.execute("CREATE TABLE users (id INTEGER)")
    conn.close()
    for db, problem in (("missing.db", "no such file"), ("app.db", "not a stopwise log")):
        err = _one_error_line(stopwise_cmd(*command, db, cwd=tmp_path), command[0])
        assert err.startswith(f"stopwise {command[0]}: error: {db}: {problem}"), err


def test_expire_with_neither_a_session_nor_all_says_what_to_give(tmp_path: Path) -> None:
    (tmp_path / "log.db").touch()
    err = _one_error_line(stopwise_cmd("expire", "--db", "log.db", cwd=tmp_path), "expire")
    assert err == (
        "stopwise expire: error: name the SESSION whose suspended run to end, or give --all for every one in the log\n"
    )


def test_a_stopwise_log_and_an_empty_file_are_still_accepted(tmp_path: Path, agent_file: Path) -> None:
    (tmp_path / "interrupted-once").touch()  # the agent then runs to the end
    (tmp_path / "empty.db").touch()  # `touch log.db` first is a plausible habit: stopwise writes its schema there
    assert stopwise_cmd("run", "agents.py:reader", "Read.", "--db", "empty.db", cwd=tmp_path).returncode == 0
    assert stopwise_cmd("run", "agents.py:reader", "Again.", "--db", "empty.db", cwd=tmp_path).returncode == 0
    listed = stopwise_cmd("runs", "--db", "empty.db", cwd=tmp_path)
    assert listed.returncode == 0 and listed.stdout.count(" completed ") == 2


def test_an_option_the_subcommand_does_not_have_is_that_subcommands_usage_error(tmp_path: Path) -> None:
    proc = stopwise_cmd("runs", "--db", "x.db", "--bogus", cwd=tmp_path)
    assert proc.returncode == 2 and proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert lines[0].startswith("usage: stopwise runs ")
    assert lines[-1] == "stopwise runs: error: unrecognized arguments: --bogus"

    nested = stopwise_cmd("guardian", "stats", "x.db", "--since", "1d", cwd=tmp_path)
    assert nested.returncode == 2
    assert nested.stderr.splitlines()[-1] == "stopwise guardian stats: error: unrecognized arguments: --since 1d"


@pytest.mark.parametrize(("given", "problem"), [((), ""), (("--bogus",), "; unrecognized arguments: --bogus")])
def test_no_command_says_to_give_one_and_names_an_unknown_option(
    tmp_path: Path, given: tuple[str, ...], problem: str
) -> None:
    proc = stopwise_cmd(*given, cwd=tmp_path)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.splitlines()[-1] == f"stopwise: error: give a COMMAND (stopwise -h lists them){problem}"


def test_report_into_a_directory_names_the_flag_and_the_problem(tmp_path: Path, agent_file: Path) -> None:
    stopwise_cmd("run", "agents.py:reader", "Read.", "--db", "log.db", cwd=tmp_path)
    session = _sessions(tmp_path / "log.db")[0]
    (tmp_path / "out").mkdir()
    err = _one_error_line(stopwise_cmd("report", session, "--db", "log.db", "-o", "out", cwd=tmp_path), "report")
    assert err == "stopwise report: error: -o out: is a directory, expected a file path\n"


def test_a_missing_policy_file_is_named_without_an_errno(tmp_path: Path, agent_file: Path) -> None:
    stopwise_cmd("run", "agents.py:reader", "Read.", "--db", "log.db", cwd=tmp_path)
    err = _one_error_line(stopwise_cmd("replay", "log.db", "--policy", "nope.json", cwd=tmp_path), "replay")
    assert err == "stopwise replay: error: --policy nope.json: no such file or directory\n"


def test_an_agent_name_the_file_does_not_define_lists_the_agents_it_does(tmp_path: Path, agent_file: Path) -> None:
    err = _one_error_line(stopwise_cmd("run", "agents.py:agent", "hi", "--db", "log.db", cwd=tmp_path), "run")
    assert err == "stopwise run: error: agents.py has no attribute 'agent'; its Agents: reader\n"
    assert not (tmp_path / "log.db").exists()


def test_an_agent_built_inside_a_function_is_explained(tmp_path: Path) -> None:
    # examples/quickstart.py builds its agent inside main(): `stopwise run examples/quickstart.py:agent` is the
    # first thing a newcomer tries.
    example = REPO / "examples" / "quickstart.py"
    proc = stopwise_cmd("run", f"{example}:agent", "hi", "--db", "log.db", cwd=tmp_path)
    err = _one_error_line(proc, "run")
    assert err.endswith("it defines no Agent at module level (one made inside a function is not seen)\n")


def test_ctrl_c_mid_run_exits_130_keeps_the_committed_step_and_prints_the_command_that_continues_it(
    tmp_path: Path, agent_file: Path
) -> None:
    proc = stopwise_cmd("run", "agents.py:reader", "Read three pages.", "--db", "log.db", cwd=tmp_path)

    assert proc.returncode == 130 and "Traceback" not in proc.stderr
    match = re.fullmatch(
        r"stopwise run: interrupted; what was committed is kept; continue with: (stopwise retry .+)\n", proc.stderr
    )
    assert match is not None, proc.stderr
    session = _sessions(tmp_path / "log.db")[0]
    assert match.group(1) == f"stopwise retry agents.py:reader {session} --db log.db"
    listed = stopwise_cmd("runs", "--db", "log.db", "--session", session, cwd=tmp_path)
    assert re.search(r"\breader\s+cancelled\s+cancelled\s+1\s+cancelled$", listed.stdout, re.M), listed.stdout

    # The printed command, run as printed, continues from step 1: pages 2 and 3 are read once each, not again.
    again = stopwise_cmd(*shlex.split(match.group(1))[1:], cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert "output: Read three pages." in again.stdout
    shown = stopwise_cmd("show", session, "--db", "log.db", "--json", cwd=tmp_path).stdout
    assert [shown.count(f'"page {n}: nothing"') for n in (1, 2, 3)] == [1, 1, 1]


def _sessions(db: Path) -> list[str]:
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT DISTINCT session_id FROM runs").fetchall()
    conn.close()
    return [str(r[0]) for r in rows]


def _as_unprivileged() -> list[str]:
    """A prefix that runs a command without the power to bypass file permissions: nothing for a normal user;
    for root, setpriv dropping the two capabilities that override them. Skips where neither is possible."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    prefix = [setpriv, "--bounding-set", "-dac_override,-dac_read_search", "--"] if setpriv else []
    if not prefix or subprocess.run([*prefix, "true"], capture_output=True).returncode != 0:
        pytest.skip("running as root without setpriv able to drop CAP_DAC_OVERRIDE")
    return [p for p in prefix if p is not None]


def _read_only_shelf(tmp_path: Path) -> Path:
    """A copy of ``log.db`` (one interrupted run) as ``shelf/log.db``: the file and its directory read-only."""
    stopwise_cmd("run", "agents.py:reader", "Read.", "--db", "log.db", cwd=tmp_path)
    shelf = tmp_path / "shelf"
    shelf.mkdir()
    shutil.copy(tmp_path / "log.db", shelf / "log.db")
    (shelf / "log.db").chmod(0o444)
    shelf.chmod(0o555)
    return shelf


def _unprivileged_cli(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    command = [*_as_unprivileged(), sys.executable, "-m", "stopwise", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=cwd, stdin=subprocess.DEVNULL)


def test_a_log_or_directory_that_cannot_be_written_is_named_before_sqlite_fails_by_a_command_that_writes(
    tmp_path: Path, agent_file: Path
) -> None:
    shelf = _read_only_shelf(tmp_path)
    before = _digest(shelf / "log.db")
    try:
        new = _one_error_line(
            _unprivileged_cli(tmp_path, "run", "agents.py:reader", "hi", "--db", "shelf/new.db"), "run"
        )
        assert new == "stopwise run: error: --db shelf/new.db: cannot create it: directory 'shelf' is not writable\n"
        gc = _one_error_line(_unprivileged_cli(tmp_path, "gc", "--db", "shelf/log.db", "--older-than", "1d"), "gc")
        assert gc.startswith("stopwise gc: error: --db shelf/log.db: the file is not writable by this user")
        assert gc.endswith("copy it to a directory of your own\n")
        assert _digest(shelf / "log.db") == before
    finally:
        shelf.chmod(0o755)


def test_the_commands_that_only_read_work_on_a_log_in_a_read_only_file_and_directory_and_write_nothing(
    tmp_path: Path, agent_file: Path
) -> None:
    shelf = _read_only_shelf(tmp_path)
    before = _digest(shelf / "log.db")
    (session,) = _sessions(shelf / "log.db")
    try:
        listed = _unprivileged_cli(tmp_path, "runs", "--db", "shelf/log.db")
        assert listed.returncode == 0 and re.search(r"\breader\s+cancelled\b", listed.stdout), listed
        shown = _unprivileged_cli(tmp_path, "show", session, "--db", "shelf/log.db")
        assert shown.returncode == 0 and "page 1: nothing" in shown.stdout, shown
        reported = _unprivileged_cli(tmp_path, "report", session, "--db", "shelf/log.db", "-o", "run.html")
        assert reported.returncode == 0 and "page 1: nothing" in (tmp_path / "run.html").read_text(), reported
        replayed = _unprivileged_cli(tmp_path, "replay", "shelf/log.db")
        assert replayed.returncode == 1, replayed
        assert replayed.stderr == "stopwise replay: no guardian decisions in shelf/log.db\n"
        assert _digest(shelf / "log.db") == before
        assert sorted(p.name for p in shelf.iterdir()) == ["log.db"]
    finally:
        shelf.chmod(0o755)


def test_importing_an_example_runs_nothing_so_stopwise_run_can_load_its_agent(tmp_path: Path) -> None:
    # The scale examples used to run their whole demo (or parse sys.argv, or exit) when imported, so
    # `stopwise run examples/scale_sqlite.py:agent` first ran twenty runs. mcp_notes_server.py is a server process
    # that the MCP example starts: it is a script only.
    examples = sorted(p for p in (REPO / "examples").glob("*.py") if p.name != "mcp_notes_server.py")
    importer = (
        "import contextlib, io, runpy, sys\n"
        "for path in sys.argv[1:]:\n"
        "    out = io.StringIO()\n"
        "    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):\n"
        "        runpy.run_path(path, run_name='imported')\n"
        "    print(path, repr(out.getvalue()))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", importer, *map(str, examples)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [f"{path} ''" for path in examples]

    ran = stopwise_cmd("run", f"{REPO / 'examples' / 'scale_sqlite.py'}:agent", "Count.", "--db", "x.db", cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.splitlines()[:2] == ["step 1: continue", "step 2: continue"]
    assert "output: counted to 3" in ran.stdout


# Interrupts itself once, while the approved refund runs (after the approval, before its result is committed).
INTERRUPTED_APPROVAL = '''
import asyncio
import os
import signal
from pathlib import Path

from stopwise import Agent, FunctionModel, Reply, ToolCall, tool
from stopwise.messages import Role


@tool(needs_approval=True)
async def refund(order: str) -> str:
    """Refund an order."""
    marker = Path("interrupted-once")
    if not marker.exists():
        marker.write_text("yes")
        os.kill(os.getpid(), signal.SIGINT)
        await asyncio.Event().wait()  # never set: the interrupt lands here, whatever the timing
    return f"refunded {order}"


def _model(request):
    results = [m for m in request.messages if m.role is Role.TOOL]
    if not results:
        return Reply(tool_calls=(ToolCall("refund", {"order": "A-1"}, id="r1"),))
    return "Done: " + results[-1].content


refunder = Agent(name="refunder", model=FunctionModel(_model), tools=(refund,))
'''


def test_ctrl_c_during_an_approved_call_points_at_the_approval_the_run_still_waits_for(tmp_path: Path) -> None:
    # `stopwise retry` would refuse a suspended run: the hint follows what the log says, not the command's name.
    (tmp_path / "refunds.py").write_text(INTERRUPTED_APPROVAL, encoding="utf-8")
    assert stopwise_cmd("run", "refunds.py:refunder", "Refund A-1.", "--db", "log.db", cwd=tmp_path).returncode == 1
    session = _sessions(tmp_path / "log.db")[0]

    proc = stopwise_cmd("approve", session, "r1", "--agent", "refunds.py:refunder", "--db", "log.db", cwd=tmp_path)

    assert proc.returncode == 130 and "Traceback" not in proc.stderr
    assert proc.stderr == (
        "stopwise approve: interrupted; the run still waits for approval; settle it with: "
        f"stopwise approve|reject|terminate {session} CALL... --agent refunds.py:refunder --db log.db\n"
    )
    again = stopwise_cmd("approve", session, "r1", "--agent", "refunds.py:refunder", "--db", "log.db", cwd=tmp_path)
    assert again.returncode == 0 and "output: Done: refunded A-1" in again.stdout


def test_a_run_id_replay_lists_is_one_show_finds(tmp_path: Path) -> None:
    # replay printed the first 12 characters of each run id, which no other command accepts.
    assert stopwise_cmd("demo", "--db", "demo.db", cwd=tmp_path).returncode == 0
    (tmp_path / "strict.json").write_text('{"conditions": {"stagnation": {"threshold": 0.999}}}', encoding="utf-8")
    flips = stopwise_cmd("replay", "demo.db", "--policy", "strict.json", cwd=tmp_path)
    assert flips.returncode == 0 and "would flip" in flips.stdout, flips.stderr
    run_id = flips.stdout.splitlines()[3].split()[0]
    shown = stopwise_cmd("show", run_id, "--db", "demo.db", cwd=tmp_path)
    assert shown.returncode == 0 and shown.stdout.startswith(f"run {run_id} "), shown.stderr


def test_runs_reads_the_log_stopwise_run_writes_by_default(tmp_path: Path, agent_file: Path) -> None:
    # show, report, retry and the others default to stopwise.db; runs alone required --db.
    (tmp_path / "interrupted-once").touch()
    assert stopwise_cmd("run", "agents.py:reader", "Read.", cwd=tmp_path).returncode == 0
    listed = stopwise_cmd("runs", cwd=tmp_path)
    assert listed.returncode == 0 and re.search(r"\breader\s+completed\s+final_answer\s+4\b", listed.stdout), listed
    (tmp_path / "elsewhere").mkdir()
    err = _one_error_line(stopwise_cmd("runs", cwd=tmp_path / "elsewhere"), "runs")
    assert err == "stopwise runs: error: --db stopwise.db: no such file\n"


def test_show_and_report_list_the_call_of_a_step_interrupted_before_it_committed_under_that_steps_heading(
    tmp_path: Path, agent_file: Path
) -> None:
    # Ctrl-C while step 2's tool runs leaves step 2's write-ahead intent (the reply and its planned call) in the log
    # without its results. `show` used to print that call under step 1's heading, as if step 1 had made it.
    stopwise_cmd("run", "agents.py:reader", "Read.", "--db", "log.db", cwd=tmp_path)
    (session,) = _sessions(tmp_path / "log.db")

    shown = stopwise_cmd("show", session, "--db", "log.db", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    blocks = shown.stdout.split("\n\n")
    step1 = next(b for b in blocks if b.startswith("step 1 "))
    step2 = next(b for b in blocks if b.startswith("step 2 "))
    assert step1.splitlines() == ["step 1  continue", '  tool look({"page": 1}) -> page 1: nothing']
    assert step2.splitlines() == [
        "step 2  not committed",
        "  why: the run stopped before this step's results committed; a retry carries out its planned calls",
        '  tool look({"page": 2}) not run',
    ]

    assert stopwise_cmd("report", session, "--db", "log.db", "-o", "run.html", cwd=tmp_path).returncode == 0
    page = (tmp_path / "run.html").read_text(encoding="utf-8")
    steps = re.findall(r"<div class='step (\w+)' data-step='(\d)'>(.*?)(?=<div class='step |</section>)", page, re.S)
    assert [(css, n) for css, n, _ in steps] == [("continue", "1"), ("uncommitted", "2")]
    assert "page 2" not in steps[0][2] and "&quot;page&quot;: 2" in steps[1][2] and "not committed" in steps[1][2]


def test_show_json_says_of_every_step_whether_it_committed(tmp_path: Path, agent_file: Path) -> None:
    # The interrupted run: step 2's intent is in the log without its results. A program reading `show --json`
    # tells that step apart by `committed`, not by guessing from a null decision.
    stopwise_cmd("run", "agents.py:reader", "Read.", "--db", "log.db", cwd=tmp_path)
    (session,) = _sessions(tmp_path / "log.db")

    shown = stopwise_cmd("show", session, "--db", "log.db", "--json", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    steps = json.loads(shown.stdout)["steps"]
    assert [(s["step"], s["committed"]) for s in steps] == [(0, True), (1, True), (2, False)]


def test_the_ctrl_c_hint_reads_where_the_run_stands_from_a_log_this_process_cannot_write(
    tmp_path: Path, agent_file: Path
) -> None:
    # The hint reads the run's status back from the log; on a read-only copy it used to fail to open it for writing
    # and fall back to "see where the run stands" instead of naming the command that continues the cancelled run.
    shelf = _read_only_shelf(tmp_path)
    (session,) = _sessions(shelf / "log.db")
    code = (
        "import sys; from pathlib import Path; from stopwise._cli._common import interrupted; "
        "print(interrupted(sys.argv[1], 'agents.py:reader', Path('shelf/log.db')).hint)"
    )
    try:
        hint = subprocess.run(
            [*_as_unprivileged(), sys.executable, "-c", code, session],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=tmp_path,
            env={**os.environ, "PYTHONPATH": str(REPO / "src")},
        )
        assert hint.stdout == (
            f"what was committed is kept; continue with: stopwise retry agents.py:reader {session} --db shelf/log.db\n"
        ), hint.stderr
        assert sorted(p.name for p in shelf.iterdir()) == ["log.db"]
    finally:
        shelf.chmod(0o755)
