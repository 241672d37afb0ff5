"""The parsers of the inspecting and settling subcommands, and their dispatch."""

from __future__ import annotations

import argparse

from stopwise._cli._common import DEFAULT_DB

__all__ = ["COMMANDS", "add_commands", "dispatch"]

COMMANDS = frozenset(
    {"show", "report", "approve", "reject", "terminate", "resume", "retry", "fork", "expire", "serve", "gc"}
)


_REVIEWER = "who decides (free text), recorded with each decision in the log"


def _db(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--db", metavar="PATH", default=DEFAULT_DB, help=f"the SQLite log (default: {DEFAULT_DB} in this directory)"
    )


def add_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = commands.add_parser(
        "show",
        help="one run: its input, steps, tool calls, guardrail verdicts, stop-guard continues, guardian decisions",
        description=(
            "Print one run from a SQLite log: how it ended, its input, each step's reply, tool calls and results "
            "(collapsed to one line; --full prints them whole), the decision and every decider record (guardrail "
            "verdicts, stop-guard consultations, the guardian's probabilities against their thresholds, reviewer "
            "decisions, what prepare_step chose, which history rows the model was not sent), the pending calls "
            "with why, and the output. Exit code 0, or 2 when the run or the database cannot be found."
        ),
    )
    p.add_argument("run", metavar="RUN", help="a run id, or a session id (its last run)")
    _db(p)
    p.add_argument("--json", action="store_true", help="print the run as JSON (one document) instead")
    p.add_argument("--full", action="store_true", help="do not collapse long texts, arguments and results")

    p = commands.add_parser(
        "report",
        help="write one run as a self-contained HTML page (steps, tool calls, verdicts, guardian plots)",
        description=(
            "Write one run as a single HTML file that needs no network: the step timeline, tool calls and "
            "results (collapsed), verdicts and continues, and per guardian condition a plot of its probability "
            "per turn with the threshold, the uncertain band and the outcomes. Exit code 0, or 2."
        ),
    )
    p.add_argument("run", metavar="RUN", help="a run id, or a session id (its last run)")
    _db(p)
    p.add_argument("-o", "--output", metavar="FILE", default="run.html", help="the HTML file (default run.html)")

    for kind, what in (
        ("approve", "run the pending calls as they are"),
        ("reject", "answer the pending calls with an error the model reads (--message), without running them"),
        ("terminate", "end the suspended run (recorded as cancelled, approval_terminated)"),
    ):
        p = commands.add_parser(
            kind,
            help=f"{what}, and continue the run",
            description=(
                f"Settle pending calls of SESSION's suspended run: {what}. The run then continues with the agent "
                "of --agent, as `stopwise run` would, and its status is printed. Pending calls not named stay "
                "pending: the named ones run (or are answered) and the run stays suspended on the rest (use "
                "`stopwise resume` to give each call its own decision). Exit code 0 when "
                "the run completed, 1 when it did not (suspended again, failed, cancelled), 2 when the agent, "
                "the database or the decisions cannot be used."
            ),
        )
        p.add_argument("session", metavar="SESSION", help="the session of the suspended run")
        p.add_argument("calls", nargs="+", metavar="CALL", help="pending call ids (stopwise show SESSION lists them)")
        p.add_argument("--agent", required=True, metavar="FILE.py:NAME", help="the agent that runs the session")
        p.add_argument("--reviewer", metavar="NAME", help=_REVIEWER)
        _db(p)
        if kind != "approve":
            p.add_argument("--message", metavar="TEXT", help="the reviewer's message (reject) or reason (terminate)")

    p = commands.add_parser(
        "resume",
        help="settle a suspended run's pending calls, one decision each, and continue it",
        description=(
            "Load the Agent NAME from FILE.py, settle the pending calls of SESSION's suspended run named here with "
            "the decision given for each, and continue the run (it stays suspended on calls not named). Exit codes "
            "as for `stopwise approve`."
        ),
    )
    p.add_argument("target", metavar="FILE.py:NAME", help="a Python file and the name of an Agent defined in it")
    p.add_argument("session", metavar="SESSION", help="the session of the suspended run")
    p.add_argument("--approve", action="append", default=[], metavar="CALL", help="run this call (repeatable)")
    p.add_argument("--reject", action="append", default=[], metavar="CALL", help="do not run it (repeatable)")
    p.add_argument(
        "--modify", action="append", default=[], nargs=2, metavar=("CALL", "JSON"), help="run it with these arguments"
    )
    p.add_argument("--terminate", action="append", default=[], metavar="CALL", help="end the run (repeatable)")
    p.add_argument("--message", metavar="TEXT", help="the rejection's message or the termination's reason")
    p.add_argument("--reviewer", metavar="NAME", help=_REVIEWER)
    _db(p)

    p = commands.add_parser(
        "retry",
        help="continue a session's failed, cancelled or interrupted run from its last committed step",
        description=(
            "Load the Agent NAME from FILE.py and continue SESSION's last run from its log: after a failure or "
            "a cancellation with a fresh step budget, after a crash where it stopped. Exit code 0 when the run "
            "completed, 1 when it did not, 2 when there is nothing to retry or the agent cannot be loaded."
        ),
    )
    p.add_argument("target", metavar="FILE.py:NAME", help="a Python file and the name of an Agent defined in it")
    p.add_argument("session", metavar="SESSION", help="the session whose last run to continue")
    p.add_argument("--message", metavar="TEXT", help="a new user message to add before continuing")
    _db(p)

    p = commands.add_parser(
        "fork",
        help="continue a session's last run from an earlier committed step, in a new session",
        description=(
            "Load the Agent NAME from FILE.py and fork SESSION's last run at its committed step STEP (0: before "
            "its first model call): a new session starts with a copy of the log up to that step and a note of "
            "where it came from, and the forked run continues from there with a run id of its own. SESSION is "
            "not touched. The fork starts from SESSION's current state. Prints where it came from, the new run "
            "and how it ended. Exit code 0 when the forked run completed, 1 when it did not, 2 when the step, "
            "the session, --new-session, the agent or the database cannot be used (nothing is written then)."
        ),
    )
    p.add_argument("session", metavar="SESSION", help="the session whose last run to fork")
    p.add_argument("--at", required=True, metavar="STEP", help="the committed step to continue from (0 or more)")
    p.add_argument("--agent", required=True, metavar="FILE.py:NAME", help="the agent that runs the session")
    p.add_argument("--new-session", metavar="ID", help="the new session's id (default: a fresh one)")
    p.add_argument("--message", metavar="TEXT", help="a new user message to add before continuing")
    _db(p)

    p = commands.add_parser(
        "expire",
        help="end suspended runs whose approvals expired unanswered (approval_expired)",
        description=(
            "End SESSION's suspended run, or with --all every suspended run in the log, once an approval it waits "
            "for is past its approval_ttl: every call still without a result is answered 'not run', and the run "
            "fails with reason approval_expired (retry continues it); the session then takes new runs. No agent "
            "is needed. A run another worker holds (a resume in flight) is skipped with --all. Exit code 0, or 2 "
            "when SESSION's run is not suspended, none of its approvals has expired, or another worker holds it."
        ),
    )
    p.add_argument("session", nargs="?", metavar="SESSION", help="the session of the suspended run")
    p.add_argument("--all", action="store_true", help="every suspended run of the log whose approvals expired")
    p.add_argument("--now", type=float, metavar="UNIX", help="the time to judge expiry at (default: now)")
    _db(p)

    p = commands.add_parser(
        "serve",
        help="a local web page: the runs, each run's view, and pending approvals to settle",
        description=(
            "Serve a SQLite log as web pages until interrupted: the latest runs, each run as `stopwise report` "
            "draws it, and the pending calls of a suspended run with a form to approve, reject, modify or "
            "terminate them (the run then continues with its --agent). Listens on 127.0.0.1 unless --host says "
            "otherwise; beyond loopback it needs an access token (--token, or one it prints in the URL). Every "
            "form carries a CSRF token. Prints the URL; exit code 0 when interrupted, 2 when it cannot start."
        ),
    )
    p.add_argument("db", metavar="DB", help="an existing SQLite file written by stopwise")
    p.add_argument("--host", default="127.0.0.1", help="the address to listen on (default 127.0.0.1, loopback)")
    p.add_argument("--port", type=int, default=8765, help="the port (default 8765; 0 picks a free one)")
    p.add_argument(
        "--agent",
        action="append",
        default=[],
        metavar="FILE.py:NAME",
        help="an agent whose suspended runs can be settled from the page (repeatable; matched by agent name)",
    )
    p.add_argument("--token", metavar="TOKEN", help="the access token beyond loopback (default: a new one, printed)")

    p = commands.add_parser(
        "gc",
        help="remove sessions last written before a date (runs and log entries with them) and shrink the file",
        description=(
            "Remove from a SQLite log every session last written before --older-than, with its runs and log "
            "entries, in one transaction, then VACUUM the file so the space goes back to the disk (the file is "
            "rewritten: it takes about as long as reading it, needs free space up to its size, and other writers "
            "wait meanwhile). A session whose run a worker holds a live lease on is kept, and one suspended for "
            "approval unless --include-suspended; both are counted. Exit code 0, or 2."
        ),
    )
    _db(p)
    p.add_argument(
        "--older-than",
        required=True,
        metavar="AGE|DATE",
        help="an age (30d, 12h) or an ISO date or time (2026-11-01, UTC unless it says)",
    )
    p.add_argument("--dry-run", action="store_true", help="count what would be removed; remove nothing")
    p.add_argument(
        "--include-suspended", action="store_true", help="also remove sessions whose run waits for an approval"
    )


def dispatch(args: argparse.Namespace) -> int:
    """Run the subcommand ``args`` names (one of ``COMMANDS``); its exit code. Each command's module is imported
    here, when that command runs: building the parser (``stopwise --help``) imports none of them."""
    if args.command in ("show", "report"):
        from stopwise._cli import show

        if args.command == "report":
            return show.report(args.db, args.run, args.output)
        return show.show(args.db, args.run, as_json=args.json, full=args.full)
    if args.command == "gc":
        from stopwise._cli import gc

        return gc.gc(args.db, args.older_than, dry_run=args.dry_run, include_suspended=args.include_suspended)
    if args.command == "serve":
        from stopwise._cli import serve

        return serve.serve(args.db, args.host, args.port, args.agent, args.token)
    from stopwise._cli import control

    if args.command in ("approve", "reject", "terminate"):
        message = getattr(args, "message", None)
        return control.decide(args.command, args.db, args.agent, args.session, args.calls, message, args.reviewer)
    if args.command == "resume":
        return control.resume(
            args.db,
            args.target,
            args.session,
            approve=args.approve,
            reject=args.reject,
            modify=args.modify,
            terminate=args.terminate,
            message=args.message,
            reviewer=args.reviewer,
        )
    if args.command == "fork":
        return control.fork(args.db, args.agent, args.session, args.at, args.new_session, args.message)
    if args.command == "expire":
        return control.expire(args.db, args.session, every=args.all, now=args.now)
    return control.retry(args.db, args.target, args.session, args.message)
