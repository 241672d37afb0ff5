"""``stopwise runs``' filters (status, completion reason, since) and paging over sessions."""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

from stopwise._cli._common import UsageError
from stopwise.result import CompletionReason, RunStatus
from stopwise.store.base import RunRecord

__all__ = ["RunFilter", "add_filters", "parse_since"]

_AGO = re.compile(r"^(\d+)([smhd])$")
_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def add_filters(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--status",
        action="append",
        choices=[s.value for s in RunStatus],
        help="only runs with this status (repeatable)",
    )
    parser.add_argument(
        "--reason",
        action="append",
        choices=[r.value for r in CompletionReason],
        metavar="REASON",
        help="only runs that ended for this completion reason (repeatable)",
    )
    parser.add_argument(
        "--since",
        metavar="WHEN",
        help="only runs started since WHEN: an ISO date or time (2026-12-01, 2026-12-01T14:00, UTC unless it "
        "says), or an age: 30m, 6h, 2d",
    )
    parser.add_argument(
        "--page", type=int, default=1, metavar="P", help="without --session: page P of --limit sessions (default 1)"
    )


@dataclass(frozen=True, slots=True)
class RunFilter:
    """Which runs ``stopwise runs`` lists."""

    statuses: frozenset[RunStatus] = frozenset()
    reasons: frozenset[CompletionReason] = frozenset()
    since: float | None = None
    """Unix time; a run the store did not date is left out when set."""
    page: int = 1

    @classmethod
    def from_args(cls, args: argparse.Namespace, now: float) -> RunFilter:
        if args.page < 1:
            raise UsageError(f"--page must be at least 1, got {args.page}")
        return cls(
            frozenset(RunStatus(s) for s in args.status or ()),
            frozenset(CompletionReason(r) for r in args.reason or ()),
            None if args.since is None else parse_since(args.since, now),
            args.page,
        )

    def apply(self, runs: Iterable[RunRecord]) -> list[RunRecord]:
        return [r for r in runs if self._keeps(r)]

    def _keeps(self, run: RunRecord) -> bool:
        if self.statuses and run.status not in self.statuses:
            return False
        if self.reasons and run.completion_reason not in self.reasons:
            return False
        return self.since is None or (run.started_at is not None and run.started_at >= self.since)


def parse_since(text: str, now: float, flag: str = "--since") -> float:
    """Unix time for ``--since`` (or another ``flag`` that takes the same): an age (``30m``, ``6h``, ``2d``)
    before ``now``, or an ISO date or date-time (UTC when it has no offset). ``UsageError`` for anything else."""
    ago = _AGO.match(text.strip())
    if ago:
        return now - int(ago.group(1)) * _SECONDS[ago.group(2)]
    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError:
        raise UsageError(
            f"{flag} {text!r}: expected an ISO date or time (2026-12-01T14:00) or an age (30m, 6h, 2d)"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.timestamp()
