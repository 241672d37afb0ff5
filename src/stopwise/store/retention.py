"""Retention: which sessions a deletion may remove, and what an expiry removed. Shared by every store.

The rules, the same on every store:

- A session whose run holds a **live lease** (a worker is driving it) is never removed: ``delete_session``
  raises ``RunLeased``; ``expire_sessions`` keeps it and counts it in ``Expired.kept_leased``.
- A **suspended** run waits for a person's decision. ``delete_session`` removes it with its session (asking to
  delete one session is explicit; the pending approval goes with it). ``expire_sessions`` keeps it unless
  ``include_suspended=True`` (age alone does not say nobody will decide), and counts it in
  ``Expired.kept_suspended``.
- A run left ``running`` without a live lease (its worker crashed and nobody retried it) is removed like any other.
- ``delete_session(s)`` removes the sessions of ``s``'s sub-agents with it: every session whose id starts with
  ``s + "/"`` (``Agent.as_tool`` runs a sub-agent in ``"{s}/{call id}"``, a persistent companion in
  ``"{s}/companion:{name}"``, and theirs under those). Left behind, they would outlive a deletion asked for their
  data, and a new session started under the same id would find them: a sub-agent call whose provider repeats an
  old call id (servers that number calls from 0) would be handed the deleted run's output instead of running.
  Any of them holding a live lease refuses the whole deletion.

A session's age is the time of its last write (``sessions.updated_at``; the memory store keeps the same). SQLite
keeps it to within a second while the state stays the same (``_sql.TOUCH_SECONDS``), which no age counted in
days notices.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from stopwise.errors import ConfigError, RunLeased
from stopwise.result import RunStatus

__all__ = ["Expired", "RunHold", "cutoff_of", "expiry_plan", "refuse_if_leased", "sub_session_range"]


@dataclass(frozen=True, slots=True)
class RunHold:
    """What of one run can keep its session from being removed: its status and its lease."""

    session_id: str
    run_id: str
    status: RunStatus
    lease_owner: str | None
    lease_expires: float | None

    def leased_at(self, now: float) -> bool:
        """A worker holds a lease on the run that is live at ``now``."""
        return self.lease_owner is not None and self.lease_expires is not None and self.lease_expires > now


@dataclass(frozen=True, slots=True)
class Expired:
    """What ``Store.expire_sessions`` removed (or, with ``dry_run``, would remove)."""

    sessions: int
    """Sessions removed, with every run and log entry of theirs."""
    runs: int
    entries: int
    """Log entries removed."""
    kept_leased: int
    """Old enough, but a run of theirs holds a live lease: kept."""
    kept_suspended: int
    """Old enough, but a run of theirs is suspended for approval: kept (``include_suspended=False``)."""
    dry_run: bool = False


def cutoff_of(older_than: datetime) -> float:
    """Unix time of ``older_than``; ``ConfigError`` for a naive datetime (whose moment is a guess)."""
    if older_than.tzinfo is None or older_than.utcoffset() is None:
        raise ConfigError(
            "older_than", f"needs a timezone (e.g. datetime.now(UTC) - timedelta(days=30)), got {older_than!r}"
        )
    return older_than.timestamp()


def sub_session_range(session_id: str) -> tuple[str, str]:
    """The ids of ``session_id``'s sub-agent sessions as a range in code-point (and UTF-8 byte) order: every id
    ``low <= id < high`` starts with ``session_id + "/"``, and every such id is in it (``"0"`` follows ``"/"``)."""
    return session_id + "/", session_id + "0"


def refuse_if_leased(holds: Iterable[RunHold], now: float) -> None:
    """Raise ``RunLeased`` for the first run that holds a live lease at ``now`` (``delete_session``'s refusal)."""
    for h in holds:
        if h.leased_at(now):
            assert h.lease_owner is not None and h.lease_expires is not None
            raise RunLeased(h.run_id, h.lease_owner, h.lease_expires)


def expiry_plan(
    candidates: Iterable[str], holds: Iterable[RunHold], now: float, *, include_suspended: bool
) -> tuple[list[str], int, int]:
    """Of the sessions old enough (``candidates``), those to remove, and how many are kept for a live lease and
    for a suspended run. ``holds`` are the candidates' runs (any others are ignored); a session kept for both
    reasons counts as leased."""
    old = list(candidates)
    wanted = set(old)
    leased: set[str] = set()
    suspended: set[str] = set()
    for h in holds:
        if h.session_id not in wanted:
            continue
        if h.leased_at(now):
            leased.add(h.session_id)
        elif h.status is RunStatus.SUSPENDED and not include_suspended:
            suspended.add(h.session_id)
    suspended -= leased
    doomed = [s for s in old if s not in leased and s not in suspended]
    return doomed, len(leased), len(suspended)
