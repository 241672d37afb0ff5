"""A fork: a run continued from an explicit earlier step of its log, in a new session (seeds 000, 002).

The log is append-only, so a fork never rewrites it: the new session's log starts as a copy of the source
session's entries up to the commit of the chosen step, then a ``note`` entry carrying a ``ForkRecord``, and the
forked run continues from there under a run id of its own. What a budget counts from the log (steps, usage, the
stop guard's continues, the guardian's replans) is counted from the copy, so a rewind refunds exactly what it
removes. Planning a fork is pure; ``Runner.fork`` writes it, in one transaction (``store.base.commit_many``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from stopwise.errors import ForkNotAllowed
from stopwise.records import ForkRecord, parse_log, to_data
from stopwise.stop.decision import Action
from stopwise.store.base import EntryKind, LogEntry, RunRecord, SessionSnapshot

__all__ = ["Fork", "incomplete_fork", "plan_fork"]

_FORK_MARK = "fork"
"""The forked run record's report key until its first leg begins: the fork it comes from."""

_COMMITS = (EntryKind.STEP, EntryKind.SETTLE)
"""The entries that commit a step (a step's ``intent`` is not committed until its ``settle``)."""

_LEG_ENDS = (Action.FAIL, Action.TERMINATE)
"""Step decisions that end a run as failed or cancelled: a ``retry()`` after one counts a fresh step budget."""


@dataclass(frozen=True, slots=True)
class Fork:
    """What ``Runner.fork`` writes: the new session's entries (the copies, then the fork note) and the forked
    run's record (``running``, so the first leg continues it from its log as after a crash)."""

    entries: tuple[LogEntry, ...]
    run: RunRecord


def plan_fork(snapshot: SessionSnapshot, run: RunRecord, at_step: int, new_session_id: str, new_run_id: str) -> Fork:
    """The fork of ``run`` (the last run of ``snapshot``) at ``at_step``: every entry of the session up to the one
    that commits that step (for ``at_step=0``, the run's entries before its first step), the run's own entries
    given ``new_run_id``, earlier runs' entries kept as written.

    The forked run's ``max_steps`` budget counts from the start of the leg ``at_step`` belongs to (``_budget_base``).

    Raises ``ForkNotAllowed`` when ``at_step`` is not an int in ``0..`` the run's committed steps, or when that
    step suspended for approval (a fork cannot continue a run that waits for a reviewer: resume it instead), and
    ``UnreadableEntry`` naming the source session's entry when a record to copy cannot be read.
    """
    if isinstance(at_step, bool) or not isinstance(at_step, int) or at_step < 0:
        raise ForkNotAllowed(f"at_step must be an int >= 0, got {at_step!r}")
    own = [e for e in snapshot.entries if e.run_id == run.run_id]
    cut = _cut(own, at_step, run)
    # What is copied is read first: a record the source's log holds that cannot be read is named there (an
    # ``UnreadableEntry`` of the source session) before anything is written, never found later in the copy.
    parse_log(e for e in snapshot.entries if e.seq <= cut)
    copies = tuple(
        replace(e, session_id=new_session_id, run_id=new_run_id if e.run_id == run.run_id else e.run_id)
        for e in snapshot.entries
        if e.seq <= cut
    )
    record = ForkRecord(run.session_id, run.run_id, at_step, cut)
    note = LogEntry(new_session_id, cut + 1, new_run_id, at_step, EntryKind.NOTE, (), records=to_data([record]))
    # A new record reads running, as a run's start does (only apply_decision moves a status on).
    forked = RunRecord(
        new_run_id,
        new_session_id,
        run.agent,
        steps=at_step,
        budget_base=_budget_base(own, at_step, run),
        report={_FORK_MARK: record.to_data()},
    )
    return Fork((*copies, note), forked)


def _budget_base(own: list[LogEntry], at_step: int, run: RunRecord) -> int:
    """The step ``max_steps`` counts from for a fork at ``at_step``: that of the leg the step belongs to.

    The run record keeps only its last leg's base. The others are read from the log: a leg ends at a step whose
    decision failed or ended the run (``fail``, a reviewer's ``terminate``), and ``retry()`` then counts a fresh
    budget from that step. A fork at the very step a leg ended on starts afresh, as ``retry()`` from there
    would. A leg that ended outside any step (the model failed, a cancellation) leaves no entry; its retry's
    base is known only while it is the run's last leg (``run.budget_base``), so a fork into such a leg that is
    not the last counts from the leg before it: fewer steps, never more.
    """
    ends = [e.step for e in own if e.kind in _COMMITS and (e.decision or {}).get("action") in _LEG_ENDS]
    return max((b for b in (0, run.budget_base, *ends) if b <= at_step), default=0)


def _cut(own: list[LogEntry], at_step: int, run: RunRecord) -> int:
    """The seq of the last entry a fork of ``run`` at ``at_step`` keeps."""
    first_step = next((e.seq for e in own if e.kind in (*_COMMITS, EntryKind.INTENT)), None)
    if at_step == 0:
        leading = [e.seq for e in own if first_step is None or e.seq < first_step]
        if not leading:
            raise ForkNotAllowed(f"session {run.session_id!r}: run {run.run_id} has no entry to fork from")
        return leading[-1]
    commit = next((e for e in reversed(own) if e.kind in _COMMITS and e.step == at_step), None)
    if commit is None:
        committed = max((e.step for e in own if e.kind in _COMMITS), default=0)
        raise ForkNotAllowed(
            f"session {run.session_id!r}: run {run.run_id} has no committed step {at_step} "
            f"(its committed steps are 0..{committed})"
        )
    if (commit.decision or {}).get("action") == Action.SUSPEND:
        raise ForkNotAllowed(
            f"session {run.session_id!r}: step {at_step} of run {run.run_id} suspended for approval; "
            "fork at an earlier step, or resume() the run"
        )
    return commit.seq


def incomplete_fork(snapshot: SessionSnapshot, run: RunRecord) -> ForkRecord | None:
    """The fork ``run`` was to be, when its session's copy was not completely written (the process stopped
    between the fork's first write and its note: a fork written entry by entry, as an earlier stopwise wrote every
    fork and ``commit_many`` still writes one on a store without it); None for a run that is not such a fork."""
    mark = run.report.get(_FORK_MARK)
    if mark is None:
        return None
    fork = ForkRecord.from_data(mark)
    # Its own note, not any: the copy of a forked session holds that session's note too.
    noted = any(r == fork for _, rs in parse_log(snapshot.entries) for r in rs)
    return None if noted else fork
