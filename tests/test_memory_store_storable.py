"""The storable-text rule on every store, where the in-memory store applies it when its log is read back (not on
each commit): a record or a row written straight to a store reads back with U+FFFD, with one log note per entry
however often the log is read, and an entry appended after a read is checked too."""

from __future__ import annotations

import logging

import pytest

from stopwise import Message, Role, Store
from stopwise.storable import REPLACEMENT
from stopwise.store.base import EntryKind, LogEntry, RunRecord

LONE = "\ud800"


def _entry(seq: int, text: str) -> LogEntry:
    row = Message(Role.TOOL, "ok", tool_call_id=f"c{seq}", metadata={"note": text})
    return LogEntry("s", seq, "r", seq, EntryKind.STEP, (row,), {"action": "continue"}, None, False, ({"x": text},))


async def test_unstorable_text_committed_to_any_store_reads_back_replaced_with_one_note_per_entry(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    await store.start_run(RunRecord("r", "s", "a"), None, {})
    with caplog.at_level(logging.WARNING, logger="stopwise"):
        await store.commit(_entry(1, f"bad{LONE}"), {})
        await store.commit(_entry(2, "fine"), {})
        first = await store.load_session("s")
        again = await store.load_session("s")
        await store.commit(_entry(3, f"late\x00{LONE}"), {})
        last = await store.load_session("s")
    assert first is not None and again is not None and last is not None
    for snapshot in (first, again):
        assert snapshot.entries[0].records == ({"x": f"bad{REPLACEMENT}"},)
        assert snapshot.entries[0].messages[0].metadata == {"note": f"bad{REPLACEMENT}"}
        assert snapshot.entries[1].records == ({"x": "fine"},)
    assert last.entries[2].records == ({"x": f"late{REPLACEMENT}{REPLACEMENT}"},)
    notes = [r.getMessage() for r in caplog.records if "U+FFFD" in r.getMessage()]
    assert len(notes) == 2, notes  # entry 1 once (not per read), entry 3 once; entry 2 never
    assert "entry 1" in notes[0] and "entry 3" in notes[1]
