"""``stopwise approve|reject|terminate|resume|retry|fork``: settle a suspended run, continue a cut-off one, or
fork one at an earlier step, from the command line, through ``Runner.resume``, ``Runner.retry`` and
``Runner.fork`` on the SQLite log."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TextIO

from stopwise._cli._common import UsageError, existing_db, interrupted, settle_command
from stopwise._load import LoadError, load_agent
from stopwise._terminal import terminal_safe
from stopwise.agent import Agent
from stopwise.approvals import ApprovalDecision, ApprovalError, Approve, Modify, Reject, Terminate
from stopwise.errors import ConfigError, RetryNotAllowed, RunLeased, StepConflict
from stopwise.records import ForkRecord, parse_log
from stopwise.result import RunResult, RunStatus
from stopwise.runtime import ExpirySweep, Runner, SessionBusy
from stopwise.store.base import Store
from stopwise.store.sqlite import SQLiteStore

__all__ = ["decide", "expire", "fork", "print_outcome", "print_pending", "resume", "retry"]


def decide(
    kind: str,
    db: str,
    target: str,
    session: str,
    calls: Sequence[str],
    message: str | None,
    reviewer: str | None = None,
) -> int:
    """``approve``, ``reject`` or ``terminate`` every call in ``calls`` of the session's suspended run, as
    ``reviewer`` (recorded with each decision)."""
    decision: ApprovalDecision
    if kind == "approve":
        decision = Approve(reviewer=reviewer)
    elif kind == "reject":
        decision = Reject(message, reviewer=reviewer) if message is not None else Reject(reviewer=reviewer)
    else:
        decision = Terminate(message, reviewer=reviewer) if message is not None else Terminate(reviewer=reviewer)
    return _settle(db, target, session, dict.fromkeys(calls, decision))


def resume(
    db: str,
    target: str,
    session: str,
    *,
    approve: Sequence[str],
    reject: Sequence[str],
    modify: Sequence[Sequence[str]],
    terminate: Sequence[str],
    message: str | None,
    reviewer: str | None = None,
) -> int:
    """Settle the pending calls with one decision each (``--approve``, ``--reject``, ``--modify``,
    ``--terminate``) and continue the run."""
    decisions: dict[str, ApprovalDecision] = {}

    def put(call: str, decision: ApprovalDecision) -> None:
        if call in decisions:
            raise UsageError(f"call {call!r} is given two decisions")
        decisions[call] = decision

    for call in approve:
        put(call, Approve(reviewer=reviewer))
    for call in reject:
        put(call, Reject(message, reviewer=reviewer) if message is not None else Reject(reviewer=reviewer))
    for call, raw in modify:
        try:
            args = json.loads(raw)
        except ValueError as exc:
            raise UsageError(f"--modify {call}: the arguments are not JSON ({exc})") from None
        if not isinstance(args, dict):
            raise UsageError(f"--modify {call}: the arguments must be a JSON object")
        put(call, Modify(args, reviewer=reviewer))
    for call in terminate:
        put(call, Terminate(message, reviewer=reviewer) if message is not None else Terminate(reviewer=reviewer))
    if not decisions:
        raise UsageError("give a decision for each pending call: --approve, --reject, --modify or --terminate CALL")
    return _settle(db, target, session, decisions)


def retry(db: str, target: str, session: str, message: str | None) -> int:
    """Continue the session's last run (failed, cancelled or interrupted) from its last committed step."""
    agent = _agent(target)
    path = existing_db(db)

    async def go() -> RunResult:
        async with Runner(SQLiteStore(path)) as runner:
            return await runner.retry(agent, session, message)

    try:
        result = asyncio.run(go())
    except (RetryNotAllowed, SessionBusy) as exc:
        raise UsageError(str(exc)) from None
    except KeyboardInterrupt:
        raise interrupted(session, target, path) from None
    return print_outcome(result, path, target, sys.stdout)


def fork(db: str, target: str, session: str, at: str, new_session: str | None, message: str | None) -> int:
    """Fork the session's last run at its committed step ``at`` into a new session and drive the fork; where it
    came from, its run id, then the outcome as ``retry`` prints it. Every refusal is a ``UsageError``, raised
    before anything is written."""
    step = _step_number(at)
    agent = _agent(target)
    path = existing_db(db)

    async def go() -> tuple[RunResult, ForkRecord]:
        async with Runner(SQLiteStore(path)) as runner:
            result = await runner.fork(agent, session, step, new_session_id=new_session, message=message)
            return result, await _origin(runner.store, result.session_id)

    try:
        result, origin = asyncio.run(go())
    except RetryNotAllowed as exc:  # ForkNotAllowed among them: a step, a session, an agent that does not fit
        raise UsageError(str(exc)) from None
    where = f"session {origin.source_session_id}, run {origin.source_run_id}, step {origin.at_step}"
    print(terminal_safe(f"forked from: {where}"))
    print(terminal_safe(f"run: {result.run_id}"))
    return print_outcome(result, path, target, sys.stdout)


def _step_number(at: str) -> int:
    """``--at``'s step: a whole number >= 0 (0 forks before the run's first model call)."""
    try:
        step = int(at)
    except ValueError:
        step = -1
    if step < 0 or at.strip() != str(step):
        raise UsageError(f"--at {at}: not a step number (a whole number, 0 or more)")
    return step


async def _origin(store: Store, session_id: str) -> ForkRecord:
    """Where the forked session ``session_id`` came from: its fork note."""
    snapshot = await store.load_session(session_id)
    entries = () if snapshot is None else snapshot.entries
    return next(r for _, rs in parse_log(entries) for r in rs if isinstance(r, ForkRecord))


def expire(db: str, session: str | None, *, every: bool, now: float | None) -> int:
    """End ``session``'s suspended run (or, with ``every``, each one in the log) whose approvals expired; one line
    per run ended or skipped."""
    if every and session is not None:
        raise UsageError("name a SESSION or give --all, not both")
    if not every and session is None:
        raise UsageError("name the SESSION whose suspended run to end, or give --all for every one in the log")
    path = existing_db(db)

    async def go() -> ExpirySweep:
        async with Runner(SQLiteStore(path)) as runner:
            if session is None:
                return await runner.expire_all(now=now)
            return ExpirySweep((await runner.expire(session, now=now),))

    try:
        sweep = asyncio.run(go())
    except (ApprovalError, RunLeased, StepConflict) as exc:
        raise UsageError(str(exc)) from None
    for result in sweep.expired:
        detail = " ".join(result.detail.split())
        print(terminal_safe(f"expired: {result.session_id}  run {result.run_id}  {detail}"))
    for skipped in sweep.skipped:
        print(terminal_safe(f"skipped: {skipped.session_id}  run {skipped.run_id}  {skipped.why}"))
    if every:
        print(f"{len(sweep.expired)} expired, {len(sweep.skipped)} skipped")
    return 0


def _settle(db: str, target: str, session: str, decisions: Mapping[str, ApprovalDecision]) -> int:
    agent = _agent(target)
    path = existing_db(db)

    async def go() -> RunResult:
        async with Runner(SQLiteStore(path)) as runner:
            return await runner.resume(agent, session, decisions)

    try:
        result = asyncio.run(go())
    except (ApprovalError, SessionBusy) as exc:
        raise UsageError(str(exc)) from None
    except KeyboardInterrupt:
        raise interrupted(session, target, path) from None
    return print_outcome(result, path, target, sys.stdout)


def _agent(target: str) -> Agent:
    try:
        return load_agent(target)
    except (LoadError, ConfigError) as exc:
        raise UsageError(str(exc)) from None


def print_outcome(result: RunResult, path: Path, target: str, out: TextIO) -> int:
    """How the run stands now, what is pending and why, and how to go on; the exit code ``stopwise`` returns
    for it (0 completed, 1 otherwise)."""
    reason = "" if result.completion_reason is None else result.completion_reason.value

    def say(text: str) -> None:
        print(text, file=out)

    say(f"status: {result.status.value}")
    say(f"completion reason: {reason}")
    if result.error is not None:
        say(terminal_safe(f"error: {result.error.code}: {' '.join(result.error.message.split())}"))
    print_pending(result, out, path, target)
    if result.status is RunStatus.COMPLETED:
        output = result.output if isinstance(result.output, str) else json.dumps(result.output, ensure_ascii=False)
        say(f"output: {terminal_safe(str(output))}")
    session = terminal_safe(result.session_id)
    say(f"session: {session} (stopwise show {session} --db {path})")
    return 0 if result.status is RunStatus.COMPLETED else 1


def print_pending(result: RunResult, out: TextIO, path: Path, target: str) -> None:
    """One line per pending call of a suspended run: its id, its tool and why it waits; then how to settle it, as a
    command that works as printed once CALL is filled in (the agent ``target`` and the log ``path`` it ran with)."""
    for p in result.pending:
        print(terminal_safe(f"pending: {p.call_id}  {p.tool}  {p.describe()}"), file=out)
    if result.pending:
        print(terminal_safe(f"settle: {settle_command(result.session_id, target, path)}"), file=out)
