"""What a ``MemoryStore`` read costs now that it hands out copies, on one session of ``--entries`` step entries of
two rows each (default 5,000: 10,000 rows, each call with a nested argument, each row with metadata, each entry
with a decision and a record), against the same session read from a SQLite file.

Printed, each the best and the median of ``--repeat`` reads: ``load_session`` in memory and on SQLite; ``get_run``
in memory; and the two ways the memory store could hand out entries that share nothing with its log: copying each
entry on the way out (what it does) or keeping each entry encoded as the SQL stores write it (``entry_row``, paid
on every commit) and decoding it on every read (``entry_from``). The whole log's copy and its decode are timed
directly, outside any store, so the two compare like for like.

Usage:
  python benchmarks/bench_memory_reads.py [--entries 5000] [--repeat 7]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from stopwise import MemoryStore, SQLiteStore, Store
from stopwise.messages import Message, Role, ToolCall
from stopwise.store._sql import ENTRY_COLUMNS, entry_from, entry_row
from stopwise.store.base import EntryKind, LogEntry, RunRecord
from stopwise.store.memory import _own_entry


def entries(n: int) -> list[LogEntry]:
    made = []
    for seq in range(1, n + 1):
        call = ToolCall("tagged_draft", {"topic": f"take {seq}", "tags": ["a", "b"]}, id=f"c{seq}")
        rows = (
            Message(Role.ASSISTANT, "", (call,), metadata={"model": "m"}),
            Message(Role.TOOL, f"Draft {seq}", (), f"c{seq}", {"elapsed": 0.1}),
        )
        decision = {"action": "continue", "reason": "tool_calls", "detail": ""}
        record = {"type": "guardrail", "hook": "tool_call", "action": "rewrite", "name": "tag"}
        made.append(LogEntry("s", seq, "r", seq, EntryKind.STEP, rows, decision, records=(record,)))
    return made


async def fill(store: Store, log: list[LogEntry]) -> None:
    await store.start_run(RunRecord("r", "s", "a", report={"stop_guard": {"checks": [1, 2]}}), None, {})
    for entry in log:
        await store.commit(entry, {})


def timed(fn: Callable[[], Any], repeat: int) -> tuple[float, float]:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times) * 1e3, statistics.median(times) * 1e3


async def timed_async(fn: Callable[[], Awaitable[Any]], repeat: int) -> tuple[float, float]:
    await fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        await fn()
        times.append(time.perf_counter() - start)
    return min(times) * 1e3, statistics.median(times) * 1e3


def show(what: str, figures: tuple[float, float], unit: str = "ms") -> None:
    print(f"{what:<58} best {figures[0]:9.3f} {unit}   median {figures[1]:9.3f} {unit}")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    log = entries(args.entries)
    rows = args.entries * 2
    print(f"one session of {args.entries:,} entries ({rows:,} rows)")
    memory = MemoryStore()
    await fill(memory, log)
    show("MemoryStore.load_session", await timed_async(lambda: memory.load_session("s"), args.repeat))
    get = await timed_async(lambda: memory.get_run("r"), args.repeat * 100)
    show("MemoryStore.get_run", (get[0] * 1e3, get[1] * 1e3), "us")
    with tempfile.TemporaryDirectory() as folder:
        async with SQLiteStore(Path(folder) / "log.db") as sqlite:
            await fill(sqlite, log)
            show(
                "SQLiteStore.load_session (baseline)", await timed_async(lambda: sqlite.load_session("s"), args.repeat)
            )
    show("copy of every entry (what a memory read does)", timed(lambda: [_own_entry(e) for e in log], args.repeat))
    encoded = [dict(zip(ENTRY_COLUMNS, entry_row(e, 0.0), strict=True)) for e in log]
    show(
        "alternative: decode of every encoded entry, per read",
        timed(lambda: [entry_from(r) for r in encoded], args.repeat),
    )
    show(
        "alternative: encode of every entry, over the commits",
        timed(lambda: [entry_row(e, 0.0) for e in log], args.repeat),
    )


if __name__ == "__main__":
    asyncio.run(main())
