"""``stopwise gc``: remove the sessions last written before a date from the SQLite log, and shrink the file."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime
from pathlib import Path

from stopwise._cli._common import existing_db
from stopwise._cli.runs import parse_since
from stopwise._terminal import terminal_safe
from stopwise.store.retention import Expired
from stopwise.store.sqlite import SQLiteStore

__all__ = ["gc"]


def gc(db: str, older_than: str, *, dry_run: bool, include_suspended: bool) -> int:
    """Expire the sessions older than ``older_than`` (an age, ``30d``, or an ISO date) and print what went, what
    was kept and the file's size before and after. Exit code 0 (also when nothing was old enough)."""
    path = existing_db(db)
    cutoff = datetime.fromtimestamp(parse_since(older_than, time.time(), flag="--older-than"), UTC)
    before = _size(path)
    expired = asyncio.run(_expire(path, cutoff, dry_run=dry_run, include_suspended=include_suspended))
    print(_summary(expired, cutoff))
    if expired.kept_leased or expired.kept_suspended:
        print(_kept(expired))
    if not dry_run:
        print(f"{terminal_safe(str(path))}: {_human(before)} -> {_human(_size(path))}")
    return 0


async def _expire(path: Path, cutoff: datetime, *, dry_run: bool, include_suspended: bool) -> Expired:
    store = SQLiteStore(path)
    try:
        return await store.expire_sessions(cutoff, dry_run=dry_run, include_suspended=include_suspended)
    finally:
        await store.close()


def _summary(e: Expired, cutoff: datetime) -> str:
    verb = "would remove" if e.dry_run else "removed"
    when = cutoff.isoformat(timespec="seconds").replace("+00:00", "Z")
    return f"{verb} {e.sessions:,} sessions ({e.runs:,} runs, {e.entries:,} log entries) last written before {when}" + (
        " (dry run: nothing removed)" if e.dry_run else ""
    )


def _kept(e: Expired) -> str:
    parts = []
    if e.kept_leased:
        parts.append(f"{e.kept_leased:,} with a run a worker holds a live lease on")
    if e.kept_suspended:
        parts.append(f"{e.kept_suspended:,} with a run suspended for approval (--include-suspended removes them)")
    return "kept, though old enough: " + "; ".join(parts)


def _size(path: Path) -> int:
    """The database's bytes on disk, its write-ahead log and shared-memory files included."""
    return sum(p.stat().st_size for p in (path, Path(f"{path}-wal"), Path(f"{path}-shm")) if p.exists())


def _human(n: int) -> str:
    size = float(n)
    if size < 1000:
        return f"{n} B"
    for unit in ("KB", "MB"):
        size /= 1000
        if size < 1000:
            return f"{size:.1f} {unit}"
    return f"{size / 1000:,.1f} GB"
