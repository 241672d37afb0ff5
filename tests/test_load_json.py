"""A session reads back the same whichever JSON parser decodes its rows.

``stopwise.store._codec.load_json`` decodes every stored JSON text (an entry's decision, usage and records, the
session's state, a run's output, report and error) with pydantic's parser, and with ``json.loads`` (the parser
every earlier version used) when that one refuses the text. These tests hold it to ``json.loads``: the same value
(compared by ``repr`` too, so ``1`` and ``1.0`` or ``0.0`` and ``-0.0`` differ), the same error for a text neither
reads, and whole sessions (every store, the old fixture logs) equal to what ``json.loads`` alone reads.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from stopwise import Agent, Approve, FunctionModel, Guardian, Reply, Runner, SQLiteStore, Store, ToolCall, tool
from stopwise.errors import UnreadableEntry
from stopwise.models import ModelRequest
from stopwise.store import _codec
from stopwise.store.base import SessionSnapshot

FIXTURES = sorted((Path(__file__).parent / "fixtures").glob("log_v*.db"))

TEXTS = [
    "null",
    "{}",
    '{"a":1,"a":2}',  # the last of duplicate keys
    "123456789012345678901234567890",
    "-123456789012345678901234567890",
    "1.0",
    "-0.0",
    "1E2",
    "0.1",
    "5e-324",
    "1e-400",
    "1e400",
    "1.7976931348623157e308",
    "NaN",
    "Infinity",
    "-Infinity",
    '"\\ud83d\\ude00"',  # an escaped surrogate pair
    '"\\ud800"',  # a lone surrogate escape: pydantic's parser refuses it, json.loads reads it
    '"caf\\u00e9 \\/ \\u0000"',
    ' [1, "x", true, false, null, {"k": [2.5]}] ',
    "[" * 500 + "]" * 500,  # deeper than pydantic's parser goes
]

PROMPT = "send_email a note to every user, one email each"
"""A task the calls do not drift from: the guardian lets the run reach its last step."""

REFUSED = ["", " ", "[1,]", "{'a': 1}", "1 2", "00", '"\t"', '{"a" 1}', "\ufeff1", "[" * 5 + "]" * 4, "tru"]


@pytest.mark.parametrize("text", TEXTS, ids=range(len(TEXTS)))
def test_load_json_reads_the_value_json_loads_reads(text: str) -> None:
    expected = json.loads(text)
    got = _codec.load_json(text)
    assert repr(got) == repr(expected)
    assert _codec.load_json(text.encode("utf-8", "surrogatepass")) == expected or text == "NaN"


def test_load_json_reads_floats_to_the_last_bit() -> None:
    import random
    import struct

    rng = random.Random(7)
    for _ in range(20_000):
        (x,) = struct.unpack("d", struct.pack("Q", rng.getrandbits(64)))
        if x != x or x in (float("inf"), float("-inf")):
            continue
        text = json.dumps([x, x * 1e-10, round(x, 3)])
        assert repr(_codec.load_json(text)) == repr(json.loads(text)), text


@pytest.mark.parametrize("text", REFUSED, ids=range(len(REFUSED)))
def test_a_text_json_loads_refuses_raises_its_error(text: str) -> None:
    with pytest.raises(json.JSONDecodeError) as expected:
        json.loads(text)
    with pytest.raises(json.JSONDecodeError) as got:
        _codec.load_json(text)
    assert str(got.value) == str(expected.value)


def test_a_value_of_another_type_raises_json_loads_type_error() -> None:
    # SQLite's type affinity lets a damaged TEXT column hold an integer: it fails as it did.
    with pytest.raises(TypeError, match="must be str, bytes or bytearray, not int"):
        _codec.load_json(5)  # type: ignore[arg-type]


def test_a_string_holding_a_lone_surrogate_reads_as_json_loads_reads_it() -> None:
    assert _codec.load_json('["\ud800"]') == ["\ud800"]


def _json_loads_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """``load_json`` as every earlier version had it: ``json.loads`` for every text."""

    def refuse(*_: Any, **__: Any) -> Any:
        raise ValueError("refused for the test")

    monkeypatch.setattr(_codec, "from_json", refuse)


def _assert_same(new: SessionSnapshot | None, old: SessionSnapshot | None) -> None:
    assert new is not None and old is not None
    assert new == old
    assert repr(new) == repr(old)  # a value equal but of another type (1 and 1.0, True and 1) differs here


@tool(needs_approval=True)
def send_email(to: str, body: str) -> str:
    """Send an email."""
    return "sent to " + to


def _mailer(steps: int) -> Agent:
    def reply(request: ModelRequest) -> Reply:
        k = sum(1 for m in request.messages if m.role.value == "assistant") + 1
        if k < steps:
            return Reply(tool_calls=[ToolCall("send_email", {"to": f"u{k}@example.com", "body": f"note {k} é"})])
        return Reply(text="done")

    return Agent(
        name="mailer", model=FunctionModel(reply), tools=[send_email], max_steps=steps + 5, guardian=Guardian()
    )


async def test_a_session_approved_at_every_step_loads_the_same_as_json_loads_reads_it(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent = _mailer(6)
    runner = Runner(store=store)
    result = await runner.run(agent, PROMPT, session_id="s", state={"n": 1.0, "big": 2**70, "z": -0.0})
    while result.status.value == "suspended":
        result = await runner.resume(agent, "s", {p.call_id: Approve() for p in result.pending})
    assert result.status.value == "completed", result.error
    new = await store.load_session("s")
    assert new is not None and len(new.entries) > 10
    assert any(r.get("type") == "guardian_config" for e in new.entries for r in e.records)
    _json_loads_only(monkeypatch)
    _assert_same(new, await store.load_session("s"))


@pytest.mark.parametrize("fixture", FIXTURES, ids=lambda p: p.stem)
async def test_every_session_of_an_old_log_loads_the_same_as_json_loads_reads_it(
    fixture: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / fixture.name
    shutil.copyfile(fixture, db)
    store = SQLiteStore(db)
    try:
        sessions = await store.list_sessions(limit=1000)
        assert len(sessions) >= 14
        new = {s: await store.load_session(s) for s in sessions}
        with monkeypatch.context() as patched:
            _json_loads_only(patched)
            for session in sessions:
                _assert_same(new[session], await store.load_session(session))
    finally:
        await store.close()


@pytest.mark.parametrize("column", ["records", "decision", "usage"])
async def test_a_corrupt_json_column_still_raises_unreadable_entry_naming_the_entry(
    column: str, tmp_path: Path
) -> None:
    store = SQLiteStore(tmp_path / "log.db")
    agent = _mailer(2)
    await Runner(store=store).run(agent, PROMPT, session_id="s")
    await store.close()
    with sqlite3.connect(tmp_path / "log.db") as conn:
        conn.execute(f"UPDATE log SET {column} = '[1,' WHERE session_id = 's' AND seq = 2")
    store = SQLiteStore(tmp_path / "log.db")
    try:
        with pytest.raises(UnreadableEntry) as err:
            await store.load_session("s")
        assert (err.value.session_id, err.value.seq) == ("s", 2)
        assert "JSONDecodeError" in str(err.value)
    finally:
        await store.close()
