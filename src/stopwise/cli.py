"""The ``stopwise`` command: parses arguments, calls the library, renders the result. Nothing else.

Exit codes: 0 success; 1 the command ran but what it found is not good (a demo scenario that did not end as
expected, a session with no runs, a run that did not complete); 2 a usage error, an agent file that cannot be
loaded or a database that cannot be opened, as one line on stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
import uuid
from collections.abc import AsyncIterator, Callable, Collection, Sequence
from typing import TYPE_CHECKING, Any, TextIO

from stopwise import __version__
from stopwise._cli._common import DEFAULT_DB, Interrupted, UsageError, interrupted, reading_store, writable_db
from stopwise._cli._common import existing_db as _existing_db
from stopwise._cli.commands import COMMANDS, add_commands, dispatch
from stopwise._cli.runs import RunFilter, add_filters
from stopwise._lazy import lazy
from stopwise._terminal import terminal_safe
from stopwise.errors import ConfigError, StoreError, UnreadableEntry, UnreadableRun
from stopwise.goal import Goal
from stopwise.guardian.records import GuardianDecision
from stopwise.records import parse_log
from stopwise.result import RunStatus
from stopwise.store.base import EntryKind

# What only one command needs is imported when that command runs (the demo's scenarios, the agent loader, the
# SQLite store, the guardian's audit), so ``stopwise --help`` or ``stopwise approve`` from a script pays for none
# of the others. docs/scaling.md has the figures.
if TYPE_CHECKING:
    from pathlib import Path

    from stopwise.agent import Agent
    from stopwise.demo import DemoReport
    from stopwise.demo import run_demo as run_demo
    from stopwise.guardian.audit import Flip, PolicyOverride, Tally
    from stopwise.result import RunResult
    from stopwise.store.base import LogEntry, RunRecord, SessionSnapshot

__getattr__ = lazy(__name__, {"run_demo": "stopwise.demo"})
"""``run_demo`` is an attribute of this module (``stopwise demo`` calls it through the module, so a test may
replace it) imported on first use."""

__all__ = ["main"]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
_DETAIL_WIDTH = 64
_COLUMN_CAP = 64
DEFAULT_RUN_DB = DEFAULT_DB
"""Where ``stopwise run`` keeps its log without ``--db``: a file in the current directory, kept between runs."""


class _UsageError(Exception):
    """A problem with what the user asked for; shown as one line, exit code 2."""


class _Parser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose description may be written when its help is printed (``describe``), so that
    building the parser imports nothing a description names (the demo's scenarios)."""

    def __init__(self, *args: Any, describe: Callable[[], str] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._describe = describe

    def format_help(self) -> str:
        if self._describe is not None:
            self.description = self._describe()
        return super().format_help()


def _demo_description() -> str:
    from stopwise.demo import SCENARIOS

    return (
        f"Run the {len(SCENARIOS)} bundled scenarios ({', '.join(s.name for s in SCENARIOS)}) with scripted "
        "models, offline, on a SQLite file, and print how each one ended. Exit code 0 when every scenario "
        "ended as expected, 1 when one did not, 2 when the database cannot be used."
    )


def _parser() -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = _Parser(
        prog="stopwise",
        description="Run LLM agents that know when to stop.",
    )
    parser.add_argument("--version", action="version", version=f"stopwise {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    demo = commands.add_parser(
        "demo",
        help="run the bundled scripted scenarios offline and check how each one ends",
        describe=_demo_description,
    )
    demo.add_argument(
        "--db",
        metavar="PATH",
        help="SQLite file to write the log to (created if missing; default: a new temporary file)",
    )

    runs = commands.add_parser(
        "runs",
        help="list run records in a SQLite file",
        description=(
            "List run records (oldest first within a session) from a SQLite file written by stopwise: one "
            "session's with --session, else those of the most recently written sessions. "
            "Exit code 1 when there are no runs."
        ),
    )
    runs.add_argument(
        "--db",
        metavar="PATH",
        default=DEFAULT_DB,
        help=f"an existing SQLite file written by stopwise (default: {DEFAULT_DB} in this directory, where "
        "stopwise run writes)",
    )
    runs.add_argument(
        "--session",
        metavar="ID",
        help="one session id (stopwise demo prints the ids it used); default: the latest sessions",
    )
    runs.add_argument(
        "--limit", type=int, default=20, metavar="N", help="sessions to list without --session (default 20)"
    )
    add_filters(runs)

    run = commands.add_parser(
        "run",
        help="run an agent defined in a Python file on a prompt",
        description=(
            "Import FILE.py, take its Agent named NAME, run it on PROMPT with the log in a SQLite file, and print "
            "the decision of each step, then the status, completion reason, error and output. Exit code 0 when "
            "the run completed, 1 when it did not, 2 when the agent or the database cannot be loaded."
        ),
    )
    run.add_argument("target", metavar="FILE.py:NAME", help="a Python file and the name of an Agent defined in it")
    run.add_argument("prompt", metavar="PROMPT", help="the user's input")
    run.add_argument(
        "--model",
        metavar="MODEL",
        help="replace the agent's model: openai:MODEL, anthropic:MODEL or openai-compatible:BASE_URL#MODEL",
    )
    run.add_argument(
        "--db",
        metavar="PATH",
        default=DEFAULT_RUN_DB,
        help=f"SQLite file for the log (created if missing; default: {DEFAULT_RUN_DB} in the current directory)",
    )
    run.add_argument(
        "--goal", metavar="TEXT", help="the run's goal, logged with it (default: the guardian's, else PROMPT)"
    )
    run.add_argument(
        "--criterion", action="append", metavar="TEXT", help="an acceptance criterion of the goal (repeatable)"
    )
    replay = commands.add_parser(
        "replay",
        help="recompute every guardian decision in a SQLite file from its record",
        description=(
            "Recompute each guardian decision recorded in a SQLite log from its probabilities, thresholds and "
            "policy inputs, without calling any model. Exit code 1 listing any decision whose outcome disagrees "
            'with the log. With --policy FILE (JSON: {"policy": {...}, "conditions": {name: {"threshold" | '
            '"cost_false_stop" | "cost_false_continue" | "delta": number}}}) list what those thresholds '
            "would flip instead."
        ),
    )
    replay.add_argument("db", metavar="DB", help="an existing SQLite file written by stopwise")
    replay.add_argument("--run", metavar="ID", help="only this run's decisions")
    replay.add_argument("--policy", metavar="FILE", help="replay under other thresholds (JSON) and list the flips")

    guardian = commands.add_parser("guardian", help="inspect the guardian's decisions")
    guardian_commands = guardian.add_subparsers(dest="guardian_command", metavar="COMMAND", required=True)
    stats_parser = guardian_commands.add_parser(
        "stats",
        help="per condition: counts, a probability histogram and the escalation rate",
        description="Summarise the guardian decisions of a SQLite log, per condition.",
    )
    stats_parser.add_argument("db", metavar="DB", help="an existing SQLite file written by stopwise")
    stats_parser.add_argument("--run", metavar="ID", help="only this run's decisions")
    _eval_parser(commands)
    add_commands(commands)
    return parser


def _eval_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    ev = commands.add_parser(
        "eval",
        help="measure an evaluator on labelled traces: calibration, AUROC, thresholds, regression gate",
        description=(
            "Run a guardian evaluator over labelled traces (JSONL, or a SQLite log whose escalation resolutions "
            "are read as labels) and print per condition: counts, a 10-bin reliability curve, ECE, MCE, Brier "
            "score, AUROC, and the cost-minimising threshold next to t*. Needs the eval extra "
            "(pip install 'stopwise[eval]'). Exit code 1 when --baseline finds a regression, 2 for a usage error "
            "(an unknown condition or evaluator, a malformed file with --strict). See docs/evals.md."
        ),
    )
    ev.add_argument("traces", nargs="+", metavar="TRACES", help="JSONL trace files, or SQLite logs written by stopwise")
    ev.add_argument("--evaluator", choices=("rule", "systemone", "judge"), default="rule", help="default: rule")
    ev.add_argument("--condition", action="append", metavar="NAME", help="only this condition (repeatable)")
    ev.add_argument("--split", choices=("train", "test", "all"), default="all", help="this split only (default: all)")
    ev.add_argument("--json", metavar="OUT", help="write the report as JSON (what --baseline reads)")
    ev.add_argument("--html", metavar="OUT", help="write a self-contained HTML page with the reliability diagrams")
    ev.add_argument(
        "--calibrate",
        metavar="OUT",
        help="fit a calibration map per condition on the train split, report ECE before and after on the test "
        "split, and write the maps to OUT (JSON)",
    )
    ev.add_argument(
        "--method", choices=("platt", "isotonic", "auto"), default="platt", help="with --calibrate (default platt)"
    )
    ev.add_argument("--calibration", metavar="FILE", help="evaluate through this calibration file")
    ev.add_argument("--baseline", metavar="FILE", help="exit 1 when a condition's ECE or AUROC is worse than in FILE")
    ev.add_argument("--tolerance", type=float, default=0.01, help="allowed worsening for --baseline (default 0.01)")
    ev.add_argument("--strict", action="store_true", help="a malformed trace line fails the run instead of a skip")
    ev.add_argument("--export", metavar="OUT", help="write the records read (e.g. from a SQLite log) as JSONL; stop")
    ev.add_argument(
        "--probe", action="store_true", help="counterfactual probing: vary each state, report how the probability moves"
    )
    ev.add_argument(
        "--errors", action="store_true", help="correlated errors: the guardian's errors beside the actor's own verdict"
    )
    ev.add_argument("--near-misses", action="store_true", help="the near misses among the records, per condition")
    ev.add_argument("--rule-coefficients", metavar="FILE", help="rule evaluator: coefficients file to use")
    ev.add_argument("--base-url", metavar="URL", help="systemone: a compatible server; judge: an OpenAI-compatible one")
    ev.add_argument("--model", metavar="MODEL", help="systemone: model name; judge: a model string")
    ev.add_argument("--path", default="/v1/systemone", help="systemone with --base-url: the endpoint path")
    ev.add_argument("--api-key-env", metavar="VAR", help="systemone with --base-url: the API key's variable")
    ev.add_argument("--timeout", type=float, default=30.0, help="seconds per evaluator call (default 30)")
    ev.add_argument("--concurrency", type=int, default=8, help="evaluator calls in flight at once (default 8)")
    ev.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="a progress bar on stderr (default: when stderr is a terminal)",
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``stopwise`` console script and of ``python -m stopwise``."""
    args = _parse(argv)
    _tolerant_streams()
    import sqlite3  # after parsing: for the error below, which ``--help`` never meets

    try:
        if args.command == "demo":
            return _demo(args.db)
        if args.command == "run":
            given = args.goal is not None or args.criterion
            goal = Goal(args.goal, args.criterion or ()) if given else None
            return _run(args.target, args.prompt, args.model, args.db, goal)
        if args.command == "replay":
            return _replay(args.db, args.run, args.policy)
        if args.command == "guardian":
            return _guardian_stats(args.db, args.run)
        if args.command == "eval":
            # Imported here: the harness brings numpy and scikit-learn, which no other command needs.
            from stopwise.evals._command import run as run_eval

            return run_eval(args)
        if args.command in COMMANDS:
            return dispatch(args)
        return _runs(args.db, args.session, args.limit, RunFilter.from_args(args, time.time()))
    except BrokenPipeError:
        # The reader went away (``stopwise demo | head``): not an error of ours; stop writing quietly.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except OSError as exc:
        print(f"stopwise {args.command}: error: {terminal_safe(_os_problem(exc))}", file=sys.stderr)
        return EXIT_USAGE
    except (_UsageError, UsageError, StoreError) as exc:
        print(f"stopwise {args.command}: error: {terminal_safe(str(exc))}", file=sys.stderr)
        return EXIT_USAGE
    except ConfigError as exc:
        print(f"stopwise {args.command}: error: {terminal_safe(str(exc))}", file=sys.stderr)
        return EXIT_USAGE
    except sqlite3.Error as exc:  # e.g. a file that is not a SQLite database
        print(f"stopwise {args.command}: error: {terminal_safe(f'{args.db}: {exc}')}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt as exc:
        hint = f"; {exc.hint}" if isinstance(exc, Interrupted) else ""
        print(f"stopwise {args.command}: interrupted{terminal_safe(hint)}", file=sys.stderr)
        return 130


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    """The arguments; an option the subcommand does not know is a usage error of that subcommand (its usage line
    and its name), not of ``stopwise`` as a whole."""
    parser = _parser()
    given = list(sys.argv[1:] if argv is None else argv)
    if not any(not arg.startswith("-") for arg in given) and not {"-h", "--help", "--version"} & set(given):
        # argparse would only say that COMMAND is required, never which option it did not know
        named = f"; unrecognized arguments: {' '.join(given)}" if given else ""
        parser.error(f"give a COMMAND (stopwise -h lists them){named}")
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        sub = _subparser(parser, args.command)
        if args.command == "guardian":
            sub = _subparser(sub, args.guardian_command)
        sub.error(f"unrecognized arguments: {' '.join(unknown)}")
    return args


def _subparser(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            found: argparse.ArgumentParser = action.choices[name]
            return found
    raise AssertionError(f"{parser.prog} has no subcommands")  # the parsers above all have them


def _os_problem(exc: OSError) -> str:
    """An operating-system error as a user reads it: the path and what is wrong with it, without an errno."""
    return str(exc) if exc.filename is None else f"{exc.filename}: {_os_reason(exc)}"


def _os_reason(exc: OSError) -> str:
    """What the operating system said is wrong (``no such file or directory``), without the errno and path."""
    return f"{exc.strerror[:1].lower()}{exc.strerror[1:]}" if exc.strerror else str(exc)


def _tolerant_streams() -> None:
    """Let stdout and stderr write any text: a character the stream's encoding lacks (a non-ASCII answer under
    ``PYTHONIOENCODING=ascii`` or a C locale) is printed as a backslash escape instead of ending the command
    with a traceback. What the commands print is escaped already (``terminal_safe``); this is the backstop."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)  # a captured stream (a test's StringIO) has none
        if reconfigure is not None:
            reconfigure(errors="backslashreplace")


# --- demo -------------------------------------------------------------------------------------------------


def _demo(db: str | None) -> int:
    from stopwise.demo import new_db_path

    path = new_db_path() if db is None else writable_db(db)
    # Through the module: ``run_demo`` is one of its attributes, imported on first use (``__getattr__``).
    report: DemoReport = asyncio.run(sys.modules[__name__].run_demo(path))
    _render_demo(report, fresh=db is None, out=sys.stdout, err=sys.stderr)
    return EXIT_OK if report.ok else EXIT_FAILED


def _render_demo(report: DemoReport, *, fresh: bool, out: TextIO, err: TextIO) -> None:
    where = f"{report.db_path} (new temporary file)" if fresh else report.db_path
    print(f"stopwise demo: {len(report.outcomes)} scenarios, log in {where}\n", file=out)
    rows = [[o.scenario, str(o.steps), o.status, o.completion_reason, _shorten(o.detail)] for o in report.outcomes]
    _table(["scenario", "steps", "status", "completion reason", "detail"], rows, out, right={1})
    print(file=out)
    failed = [o for o in report.outcomes if not o.ok]
    if failed:
        print(f"FAILED: {len(failed)} of {len(report.outcomes)} scenarios did not end as expected:", file=err)
        for o in failed:
            for problem in o.problems:
                print(f"  {o.scenario}: {terminal_safe(problem)}", file=err)
        return
    print(f"OK: all {len(report.outcomes)} scenarios ended as expected.", file=out)
    sessions = list(dict.fromkeys(o.session_id for o in report.outcomes))
    print(f"Sessions: {terminal_safe(', '.join(sessions))}", file=out)
    retried = next((o.session_id for o in report.outcomes if o.scenario == "retry"), sessions[-1])
    print(f"See a session's runs: stopwise runs --db {report.db_path} --session {terminal_safe(retried)}", file=out)


# --- runs -------------------------------------------------------------------------------------------------


def _runs(db: str, session_id: str | None, limit: int, only: RunFilter) -> int:
    if limit < 1:
        raise _UsageError(f"--limit must be at least 1, got {limit}")
    path = _existing_db(db, reading=True)
    unreadable: list[UnreadableRun] = []
    records = only.apply(asyncio.run(_list_runs(path, session_id, limit, only.page, unreadable.append)))
    # A record this version cannot read is left out with one line naming it, and the listing of the others goes
    # on; the exit code is then 1 (partial output), whatever the others are.
    for exc in unreadable:
        print(f"stopwise runs: error: {terminal_safe(str(exc))}; left out", file=sys.stderr)
    if not records:
        if not unreadable:
            where = f"session {session_id!r} of {path}" if session_id is not None else str(path)
            print(f"stopwise runs: no runs in {terminal_safe(where)}", file=sys.stderr)
        return EXIT_FAILED
    rows = [
        [
            r.run_id,
            r.session_id,
            r.agent,
            r.status.value,
            "" if r.completion_reason is None else r.completion_reason.value,
            str(r.steps),
            "" if r.error is None else str(r.error.code),
        ]
        for r in records
    ]
    headers = ["run_id", "session", "agent", "status", "completion_reason", "steps", "error"]
    _table(headers, rows, sys.stdout, right={5})
    return EXIT_FAILED if unreadable else EXIT_OK


async def _list_runs(
    path: Path, session_id: str | None, limit: int, page: int, on_unreadable: Callable[[UnreadableRun], None]
) -> list[RunRecord]:
    store = reading_store(path)
    try:
        # Paging over sessions, most recently written first: page P is sessions (P-1)*limit+1 .. P*limit.
        if session_id is not None:
            sessions = [session_id]
        else:
            sessions = (await store.list_sessions(limit * page))[(page - 1) * limit :]
        return [run for s in sessions for run in await store.list_runs(s, on_unreadable=on_unreadable)]
    finally:
        await store.close()


def _skipped(exc: UnreadableEntry) -> None:
    """Tell the user a session was left out because one of its entries cannot be read; the command goes on."""
    print(f"stopwise: notice: {terminal_safe(str(exc))}; the session is skipped", file=sys.stderr)


# --- run --------------------------------------------------------------------------------------------------


def _run(target: str, prompt: str, model: str | None, db: str, goal: Goal | None = None) -> int:
    from stopwise._cli.control import print_pending
    from stopwise._load import LoadError, load_agent, with_model

    try:
        agent = load_agent(target)
        if model is not None:
            agent = with_model(agent, model)
    except (LoadError, ConfigError) as exc:
        raise _UsageError(str(exc)) from None
    path = writable_db(db)
    # The session id is chosen here, so that a Ctrl-C can say which session to continue.
    session_id = uuid.uuid4().hex
    try:
        result, entries = asyncio.run(_run_on_sqlite(agent, prompt, path, session_id, goal))
    except KeyboardInterrupt:
        raise interrupted(session_id, target, path) from None
    for entry in entries:
        print(_decision_line(entry))
    print(f"status: {result.status.value}")
    print(f"completion reason: {'' if result.completion_reason is None else result.completion_reason.value}")
    if result.error is not None:
        details = "".join(f" {key}={value}" for key, value in result.error.details.items() if value is not None)
        message = " ".join(result.error.message.split())
        print(f"error: {terminal_safe(f'{result.error.code}: {message}{details}')}")
    if result.status is RunStatus.COMPLETED:
        output = result.output if isinstance(result.output, str) else _json(result.output)
        print(f"output: {terminal_safe(output)}")
    print_pending(result, sys.stdout, path, target)
    session = terminal_safe(result.session_id)
    print(f"session: {session} (stopwise runs --db {path} --session {session})")
    return EXIT_OK if result.status is RunStatus.COMPLETED else EXIT_FAILED


_DECIDED = (EntryKind.STEP, EntryKind.SETTLE)
"""The entries that carry a step's decision (a write-ahead intent has none: its results entry does)."""


async def _run_on_sqlite(
    agent: Agent, prompt: str, path: Path, session_id: str, goal: Goal | None = None
) -> tuple[RunResult, list[LogEntry]]:
    """Run the agent, then read back the run's step entries: their recorded decisions are what is printed."""
    from stopwise.runtime import Runner
    from stopwise.store.sqlite import SQLiteStore

    store = SQLiteStore(path)
    try:
        result = await Runner(store).run(agent, prompt, session_id=session_id, goal=goal)
        snapshot = await store.load_session(result.session_id)
        entries = [] if snapshot is None else list(snapshot.entries)
        return result, [e for e in entries if e.run_id == result.run_id and e.kind in _DECIDED]
    finally:
        await store.close()


def _decision_line(entry: LogEntry) -> str:
    decision = entry.decision or {}
    line = f"step {entry.step}: {decision.get('action', '?')}"
    if decision.get("reason"):
        line += f" ({decision['reason']})"
    if decision.get("detail"):
        line += f": {_shorten(str(decision['detail']), 100)}"
    return terminal_safe(line)


def _json(value: object) -> str:
    return json.dumps(value, ensure_ascii=False)


# --- helpers ----------------------------------------------------------------------------------------------


def _shorten(text: str, width: int = _DETAIL_WIDTH) -> str:
    line = " ".join(text.split())
    return line if len(line) <= width else line[: width - 3] + "..."


def _table(headers: list[str], rows: list[list[str]], out: TextIO, *, right: Collection[int] = ()) -> None:
    """Aligned columns; every cell is escaped (``terminal_safe``), so a stored value stays in its row and cell."""
    rows = [[terminal_safe(cell) for cell in row] for row in rows]
    # A column is as wide as its widest cell up to _COLUMN_CAP; a longer cell (a session id a caller chose, of
    # any length) runs past it on its own row instead of padding every row to its length.
    widths = [min(_COLUMN_CAP, max(len(cell) for cell in column)) for column in zip(headers, *rows, strict=False)]

    def line(cells: list[str]) -> str:
        padded = [
            cell.rjust(w) if i in right else cell.ljust(w)
            for i, (cell, w) in enumerate(zip(cells, widths, strict=True))
        ]
        return "  ".join(padded).rstrip()

    print(line(headers), file=out)
    print(line(["-" * w for w in widths]), file=out)
    for row in rows:
        print(line(row), file=out)


# --- replay and guardian stats --------------------------------------------------------------------------------


async def _decisions_by_session(path: Path, run_id: str | None) -> AsyncIterator[list[GuardianDecision]]:
    """The guardian decisions of one run (read from its own session only, found by the run's key), or of every
    session in the database, one session at a time (so a whole database is read in constant memory, with a
    progress bar on a terminal's stderr); a session that cannot be read is named on stderr and skipped."""
    from stopwise._progress import ProgressBar
    from stopwise.store.walk import every_session, sessions_named

    store = reading_store(path)
    try:
        if run_id is not None:
            run = await store.get_run(run_id)
            async for snapshot in sessions_named(
                store, [] if run is None else [run.session_id], on_unreadable=_skipped
            ):
                decisions = _guardian_records(snapshot, run_id)
                if decisions is not None:
                    yield decisions
            return
        bar = ProgressBar("reading sessions")
        try:
            async for snapshot in every_session(store, progress=bar, on_unreadable=_skipped):
                decisions = _guardian_records(snapshot, None)
                if decisions is not None:
                    yield decisions
        finally:
            bar.close()
    finally:
        await store.close()


def _guardian_records(snapshot: SessionSnapshot, run_id: str | None) -> list[GuardianDecision] | None:
    """The session's guardian decisions (of one run, when ``run_id``); None, with a notice, when one of its
    records cannot be read: the session is skipped as one whose entry cannot be read is."""
    entries = (e for e in snapshot.entries if run_id is None or e.run_id == run_id)
    try:
        return [r for _, records in parse_log(entries) for r in records if isinstance(r, GuardianDecision)]
    except UnreadableEntry as exc:
        _skipped(exc)
        return None


async def _replay_db(
    path: Path, run_id: str | None, override: PolicyOverride | None
) -> tuple[int, list[Flip], set[str]]:
    """How many decisions were replayed, the flips, and the condition names the decisions have."""
    from stopwise.guardian.audit import Flip, replay_all

    count, flips, known = 0, list[Flip](), set[str]()
    async for decisions in _decisions_by_session(path, run_id):
        replayed, flipped = replay_all(decisions, override)
        count += replayed
        flips.extend(flipped)
        known.update(c.name for d in decisions for c in d.conditions)
    return count, flips, known


async def _tally_db(path: Path, run_id: str | None) -> Tally:
    from stopwise.guardian.audit import Tally

    tally = Tally()
    async for decisions in _decisions_by_session(path, run_id):
        tally.add(decisions)
    return tally


def _replay(db: str, run_id: str | None, policy_file: str | None) -> int:
    from pathlib import Path

    from stopwise.guardian.audit import PolicyOverride

    path = _existing_db(db, positional=True, reading=True)
    override = None
    if policy_file is not None:
        try:
            override = PolicyOverride.from_data(json.loads(Path(policy_file).read_text(encoding="utf-8")))
        except OSError as exc:
            raise _UsageError(f"--policy {policy_file}: {_os_reason(exc)}") from exc
        except ValueError as exc:
            raise _UsageError(f"--policy {policy_file}: {exc}") from exc
    count, flips, known = asyncio.run(_replay_db(path, run_id, override))
    unknown = [] if override is None else sorted(set(override.conditions) - known)
    if unknown:
        names = ", ".join(unknown)
        raise _UsageError(f"--policy {policy_file}: no condition named {names} in the log (it has {sorted(known)})")
    if not count:
        where = f"run {run_id}" if run_id else str(path)
        print(f"stopwise replay: no guardian decisions in {terminal_safe(where)}", file=sys.stderr)
        return EXIT_FAILED
    if override is None:
        if not flips:
            print(f"replayed {count} decisions: every outcome agrees with the log")
            return EXIT_OK
        print(f"replayed {count} decisions: {len(flips)} disagree with the log", file=sys.stderr)
    else:
        print(f"replayed {count} decisions under {policy_file}: {len(flips)} would flip")
    rows = [
        [f.run_id, str(f.step), f.kind, f.call_id or "", f.recorded.value, f.replayed.value, _shorten(f.reason)]
        for f in flips
    ]
    if rows:
        _table(["run", "step", "kind", "call", "recorded", "replayed", "reason"], rows, sys.stdout, right={1})
    return EXIT_FAILED if override is None and flips else EXIT_OK


def _guardian_stats(db: str, run_id: str | None) -> int:
    path = _existing_db(db, positional=True, reading=True)
    tally = asyncio.run(_tally_db(path, run_id))
    count = sum(tally.outcomes.values())
    if not count:
        print(f"stopwise guardian stats: no guardian decisions in {path}", file=sys.stderr)
        return EXIT_FAILED
    rows, outcomes = tally.rows(), tally.outcomes
    print(f"{count} decisions: " + terminal_safe(", ".join(f"{k} {v}" for k, v in sorted(outcomes.items()))))
    print()
    bars = " ▁▂▃▄▅▆▇█"
    table = []
    for r in rows:
        top = max(r.histogram) or 1
        spark = "".join(bars[round(8 * n / top)] for n in r.histogram)
        table.append(
            [r.name, str(r.asked), str(r.uncertain), str(r.held), str(r.escalated), f"{r.escalation_rate:.1%}", spark]
        )
    headers = ["condition", "asked", "uncertain", "held", "escalated", "escalation rate", "p histogram 0..1"]
    _table(headers, table, sys.stdout, right={1, 2, 3, 4, 5})
    return EXIT_OK
