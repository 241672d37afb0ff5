"""A history processor that trims a long run costs the rows it keeps: the built-in processors read the tail of the
history, not all of it, and each step's record of what was not sent stays a few numbers (runs of positions), so
neither a step's work nor its log entry grows with the run. What is sent and recorded is what a walk of the whole
history gives."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any, overload

import pytest

from stopwise import Agent, Runner, SQLiteStore, tool
from stopwise.history import HistoryRecord, Positions, keep_last_steps, token_budget
from stopwise.messages import Message, Reply, Role, ToolCall
from stopwise.models import FunctionModel, ModelRequest
from stopwise.records import parse_records


@tool
def bump(n: int) -> int:
    """Add one."""
    return n + 1


class CountedReads(Sequence[Message]):
    """A history that counts the rows read from it."""

    def __init__(self, rows: list[Message]) -> None:
        self.rows = rows
        self.reads = 0

    def __len__(self) -> int:
        return len(self.rows)

    @overload
    def __getitem__(self, index: int) -> Message: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[Message]: ...

    def __getitem__(self, index: int | slice) -> Message | Sequence[Message]:
        got = self.rows[index]
        self.reads += len(got) if isinstance(got, list) else 1
        return got


def history(steps: int) -> list[Message]:
    rows = [Message(Role.SYSTEM, "rules"), Message(Role.USER, "go")]
    for k in range(steps):
        call = ToolCall("bump", {"n": k}, f"c{k}")
        rows += [Message(Role.ASSISTANT, "", (call,)), Message(Role.TOOL, str(k + 1), tool_call_id=f"c{k}")]
    return rows


def whole_walk_keep(messages: Sequence[Message], n: int) -> list[Message]:
    """keep_last_steps as a walk of every row: the opening, then every reply with the rows after it."""
    opening: list[Message] = []
    steps: list[list[Message]] = []
    for m in messages:
        if m.role is Role.ASSISTANT:
            steps.append([m])
        elif steps:
            steps[-1].append(m)
        else:
            opening.append(m)
    return [*opening, *(m for step in steps[-n:] for m in step)]


@pytest.mark.parametrize("steps", [0, 1, 3, 4, 50])
def test_keep_last_steps_keeps_the_opening_and_the_last_steps_as_a_whole_walk_does(steps: int) -> None:
    rows = history(steps)
    assert keep_last_steps(3)(rows) == whole_walk_keep(rows, 3)


def test_keep_last_steps_reads_the_opening_and_the_kept_steps_not_the_whole_run() -> None:
    short, long = CountedReads(history(10)), CountedReads(history(5_000))
    keep_last_steps(3)(short)
    keep_last_steps(3)(long)
    assert long.reads == short.reads


def test_token_budget_reads_the_steps_that_fit_not_the_whole_run() -> None:
    short, long = CountedReads(history(10)), CountedReads(history(5_000))
    kept = token_budget(60)(long)
    assert kept[:2] == long.rows[:2] and kept[2:] == long.rows[len(long.rows) - len(kept) + 2 :]
    token_budget(60)(short)
    assert long.reads == short.reads


def test_token_budget_keeps_the_latest_step_even_when_it_alone_is_over() -> None:
    rows = history(3)
    assert token_budget(1)(rows) == [*rows[:2], *rows[-2:]]


def test_positions_read_as_the_tuple_of_the_positions_they_hold() -> None:
    held = Positions.of([1, 2, 3, 7, 9, 10])
    assert held.runs == ((1, 4), (7, 8), (9, 11))
    assert held == (1, 2, 3, 7, 9, 10) and list(held) == [1, 2, 3, 7, 9, 10] and len(held) == 6
    assert (held[0], held[3], held[-1], held[1:3]) == (1, 7, 10, (2, 3))
    assert Positions.missing(12, [0, 4, 5, 6, 8, 11]) == held
    with pytest.raises(IndexError):
        held[6]


def test_positions_equal_to_a_tuple_hash_as_that_tuple() -> None:
    # Equal objects must hash alike: a set or a dict key may mix records read back with tuples a caller made.
    held = Positions.of([1, 2, 3, 7])
    assert hash(held) == hash((1, 2, 3, 7))
    assert {held, (1, 2, 3, 7)} == {held}


@pytest.mark.parametrize("runs", [[(3, 1.5)], [("a", "b")], [(-1, 2)], [(5, 8), (2, 3)]])
def test_positions_refuse_runs_that_are_not_ascending_integer_positions(runs: Any) -> None:
    with pytest.raises(ValueError):
        Positions(runs)


def test_a_history_record_reads_back_from_its_runs_and_from_the_list_older_logs_kept() -> None:
    record = HistoryRecord(9, (1, 2, 3, 4, 8), added=1, sent=5)
    assert record.to_data()["dropped_runs"] == [[1, 5], [8, 9]]
    assert HistoryRecord.from_data(record.to_data()) == record
    older = {"type": "history", "step": 9, "dropped": [1, 2, 3, 4, 8], "added": 1, "sent": 5}
    assert HistoryRecord.from_data(older) == record
    assert record.to_view()["dropped"] == [1, 2, 3, 4, 8]


async def test_a_trimmed_long_run_logs_each_step_s_history_record_in_a_few_bytes(tmp_path: Path) -> None:
    calls: list[int] = []

    def fn(request: ModelRequest) -> Reply:
        calls.append(len(request.messages))
        k = len(calls)
        return Reply(tool_calls=[ToolCall("bump", {"n": k})]) if k <= 300 else Reply(text="done")

    async with SQLiteStore(tmp_path / "log.db") as store:
        agent = Agent("a", "", FunctionModel(fn), tools=[bump], history_processors=[keep_last_steps(2)], max_steps=None)
        result = await Runner(store).run(agent, "go", session_id="s")
        snapshot = await store.load_session("s")
    assert result.status == "completed" and snapshot is not None
    histories = [r for e in snapshot.entries for r in parse_records(e.records) if isinstance(r, HistoryRecord)]
    assert len(histories) == 301
    # The opening (the input) is kept, the last two steps are kept; every step between is one run of positions.
    assert histories[-1].dropped.runs == ((1, len(result.messages) - 1 - 4),)
    with sqlite3.connect(tmp_path / "log.db") as db:
        logged = [json.loads(r) for (r,) in db.execute("SELECT records FROM log WHERE records IS NOT NULL")]
    sizes = [len(json.dumps(r)) for rs in logged for r in rs if r["type"] == "history"]
    # From step 3 on (something dropped) the record holds one run: only its numbers' digits grow.
    assert len(sizes) == 301 and max(sizes[3:]) - min(sizes[3:]) <= 4


async def test_rows_a_processor_repeats_or_reorders_are_recorded_as_a_whole_history_comparison_records_them(
    tmp_path: Path,
) -> None:
    seen: list[list[Message]] = []

    def odd(messages: Sequence[Message]) -> list[Message]:
        rows = list(messages)
        # The newest row twice, the oldest last, every third row left out, a row of its own.
        return [rows[-1], *rows[1::3], rows[-1], rows[0], Message(Role.USER, "note")]

    def fn(request: ModelRequest) -> Reply:
        seen.append(list(request.messages))
        k = len(seen)
        return Reply(tool_calls=[ToolCall("bump", {"n": k})]) if k < 6 else Reply(text="done")

    async with SQLiteStore(tmp_path / "log.db") as store:
        agent = Agent("a", "", FunctionModel(fn), tools=[bump], history_processors=[odd])
        result = await Runner(store).run(agent, "go", session_id="s")
        snapshot = await store.load_session("s")
    assert result.status == "completed" and snapshot is not None
    histories = [r for e in snapshot.entries for r in parse_records(e.records) if isinstance(r, HistoryRecord)]
    logged = list(result.messages)
    for record, sent in zip(histories, seen, strict=True):
        length = 1 + 2 * (record.step - 1)  # the input, then a reply and its result per step before
        kept = {0, length - 1, *range(1, length, 3)}
        assert record.dropped == tuple(i for i in range(length) if i not in kept)
        assert (record.added, record.sent) == (1, len(sent))
        assert sent[0] == logged[length - 1] and sent[-1] == Message(Role.USER, "note")
