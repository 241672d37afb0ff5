"""Damaged and foreign log records on the core's read paths: a record a damaged log holds, or one a newer version
wrote (a field missing, a field of another type, a record that is not an object, an entry whose records are not a
list), is an ``UnreadableEntry`` naming the session and the entry wherever the core reads it (a run's result,
``run()`` continuing a session, ``retry()``, ``resume()``, ``fork()``), never a ``KeyError`` or ``TypeError``,
and never a record read with a field misread (a text read as the tuple of its letters, ``"false"`` read as true).

The records fuzzed are real: a log the current code writes on SQLite on disk (a guardian's configs and decisions,
a goal, a stop guard's records and tool switches, what ``prepare_step`` chose and the history it kept, the
write-ahead intents, an approval request and decision) and the logs earlier versions wrote
(``fixtures/log_v3.db``, ``fixtures/log_v5.db``: whole guardian decisions, guardrail records, receipts). Every
field of every record is deleted, and replaced by a value of another JSON type, one at a time. A guardian policy's
settings are checked too (a setting of another type names itself); a peer's run reading its session, and a log on
a real PostgreSQL, are read the same way.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import sqlite3
import uuid
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from _pgcluster import HOW_TO_ENABLE
from _switching_agent import search
from stopwise import (
    Agent,
    Continue,
    FunctionModel,
    Goal,
    Reply,
    Runner,
    SQLiteStore,
    StopGuard,
    ToolCall,
    decode_tool_result,
    tool,
)
from stopwise.approvals import Approve
from stopwise.cli import main
from stopwise.errors import ConfigError, UnreadableEntry, UnreadableRecord, UnreadableRun, UnreadableSuspension
from stopwise.guardian import Guardian
from stopwise.guardian.audit import PolicyOverride, replay_all
from stopwise.guardian.policy import ThresholdPolicy
from stopwise.guardian.records import GuardianDecision, replay
from stopwise.history import keep_last_steps
from stopwise.integrations._base import Deciders, PeerRun
from stopwise.models import ModelRequest
from stopwise.records import UnknownRecord, parse_entry, parse_log, parse_record, parse_records, to_data
from stopwise.runtime import result_from_log
from stopwise.step_plan import StepContext, StepPlan
from stopwise.stop.guard import StopGuardContext
from stopwise.store.base import LogEntry, Store
from stopwise.tool_switches import ToolSwitch

FIXTURES = Path(__file__).parent / "fixtures"


@tool
def lookup(q: str) -> str:
    """Look something up."""
    return f"found {q}"


@tool(needs_approval=True)
def transfer(to: str, amount: int) -> str:
    """Move money."""
    return f"sent {amount} to {to}"


def _tool_rows(request: ModelRequest) -> list[str]:
    return [str(decode_tool_result(m)) for m in request.messages if m.role == "tool"]


def _searching(request: ModelRequest) -> Reply:
    if not _tool_rows(request):
        return Reply(tool_calls=[ToolCall("search", {"q": "a"}, id="s1")])
    return Reply(f"answer {request.step}")


def _guard(ctx: StopGuardContext) -> Continue | None:
    return None if ctx.continues_used else Continue("Search again.", context=[ToolSwitch(on=["search"])])


def _plan(ctx: StepContext) -> StepPlan | None:
    return StepPlan(tools=[search], instructions="Search first.") if ctx.step == 1 else None


def rich_agent() -> Agent:
    """Every kind of record a run of the current code commits: the guardian's config and decisions, the goal, the
    stop guard's records and a tool switch, the step plan, the history kept, the write-ahead intent."""
    return Agent(
        "rich",
        "Search.",
        FunctionModel(_searching),
        tools=[search],
        stop_guard=StopGuard(_guard),
        guardian=Guardian(),
        prepare_step=_plan,
        history_processors=[keep_last_steps(1)],
    )


def looping_agent(until: int = 3) -> Agent:
    def reply(request: ModelRequest) -> Reply:
        rows = _tool_rows(request)
        if len(rows) < until:
            return Reply(tool_calls=[ToolCall("lookup", {"q": f"item {len(rows) + 1}"}, id=f"c{len(rows) + 1}")])
        return Reply("Answer: " + "; ".join(rows))

    return Agent("looper", "Look up three items.", FunctionModel(reply), tools=[lookup], max_steps=2)


def paying(request: ModelRequest) -> Reply:
    if not _tool_rows(request):
        return Reply(tool_calls=[ToolCall("transfer", {"to": "bob", "amount": 50}, id="c-transfer")])
    return Reply("Done: " + "; ".join(_tool_rows(request)))


BANKER = Agent("banker", "Move money carefully.", FunctionModel(paying), tools=[transfer])


async def _record(db: Path) -> None:
    store = SQLiteStore(db)
    try:
        runner = Runner(store)
        done = await runner.run(rich_agent(), "find it", session_id="done", goal=Goal("find it", ("cite",)))
        assert done.status == "completed", done.error
        cut = await runner.run(looping_agent(), "look up", session_id="cut")
        assert cut.completion_reason == "max_steps"
        waiting = await runner.run(BANKER, "pay bob", session_id="waiting")
        assert waiting.status == "suspended"
        paid = await runner.run(BANKER, "pay bob", session_id="paid")
        paid = await runner.resume(BANKER, "paid", {"c-transfer": Approve()})
        assert paid.status == "completed"
    finally:
        await store.close()


@pytest.fixture(scope="module")
def current_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("records") / "log.db"
    asyncio.run(_record(db))
    return db


def _logs(db: Path) -> list[list[LogEntry]]:
    """The entries of each session of a log, read as the store reads them (the schema is migrated on a copy)."""

    async def read() -> list[list[LogEntry]]:
        store = SQLiteStore(db)
        try:
            sessions = [s async for batch in store.iter_sessions() for s in batch]
            out: list[list[LogEntry]] = []
            for session_id in sessions:
                snapshot = await store.load_session(session_id)
                assert snapshot is not None
                out.append(list(snapshot.entries))
            return out
        finally:
            await store.close()

    return asyncio.run(read())


def _wrong(value: object) -> list[object]:
    """Values of other JSON types than ``value``'s (a text that reads as a list, or as a true flag, among them)."""
    if isinstance(value, bool):
        return ["false", 0]
    if isinstance(value, (int, float)):
        return ["7", True]
    if isinstance(value, str):
        return [7, ["x"]]
    if isinstance(value, list):
        return ["ab", {"a": 1}]
    if isinstance(value, dict):
        return ["ab", [1]]
    return [[], {"a": 1}]


_DELETED = object()


@dataclass(frozen=True)
class Mutant:
    """One record of one entry with one field deleted or replaced (``path``: the keys and indexes to it)."""

    entry: LogEntry
    index: int
    path: tuple[str | int, ...]
    value: object
    records: tuple[Any, ...]

    def __str__(self) -> str:
        what = "deleted" if self.value is _DELETED else f"= {self.value!r}"
        kind = self.entry.records[self.index].get("type")
        return f"{self.entry.session_id}#{self.entry.seq} {kind}{list(self.path)} {what}"


def _paths(value: object, prefix: tuple[str | int, ...] = (), depth: int = 3) -> Iterator[tuple[str | int, ...]]:
    """The paths to every field of a record's data, nested objects and the first item of lists included."""
    if depth == 0:
        return
    if isinstance(value, dict):
        for k, v in value.items():
            if not prefix and k == "type":
                continue
            yield (*prefix, k)
            yield from _paths(v, (*prefix, k), depth - 1)
    elif isinstance(value, list) and value:
        yield (*prefix, 0)
        yield from _paths(value[0], (*prefix, 0), depth - 1)


def _get(data: Any, path: tuple[str | int, ...]) -> Any:
    for p in path:
        data = data[p]
    return data


def _with(data: Any, path: tuple[str | int, ...], value: object) -> Any:
    copy = json.loads(json.dumps(data))
    parent = _get(copy, path[:-1])
    if value is _DELETED:
        del parent[path[-1]]
    else:
        parent[path[-1]] = value
    return copy


def mutants(log: list[LogEntry]) -> Iterator[Mutant]:
    for entry in log:
        for i, record in enumerate(entry.records):
            for path in _paths(record):
                for value in [_DELETED, *_wrong(_get(record, path))]:
                    records = (*entry.records[:i], _with(record, path, value), *entry.records[i + 1 :])
                    yield Mutant(entry, i, path, value, records)


def _log_copy(src: Path, dst: Path) -> Path:
    shutil.copyfile(src, dst)
    return dst


@pytest.fixture(scope="module")
def every_log(current_log: Path, tmp_path_factory: pytest.TempPathFactory) -> list[list[LogEntry]]:
    """Each session's entries, of the current code's log and of the earlier versions' logs."""
    tmp = tmp_path_factory.mktemp("old")
    logs = _logs(current_log)
    for version in (3, 5):
        logs += _logs(_log_copy(FIXTURES / f"log_v{version}.db", tmp / f"log_v{version}.db"))
    return logs


def test_the_fuzzed_logs_hold_every_kind_of_record_the_core_reads(every_log: list[list[LogEntry]]) -> None:
    kinds = {r.get("type") for log in every_log for e in log for r in e.records}
    assert kinds >= {
        "approval_request",
        "approval_decision",
        "guardian_config",
        "guardian",
        "guardrail",
        "tool_receipt",
        "stop_guard",
        "step_intent",
        "step_plan",
        "history",
        "tool_switch",
        "run_goal",
    }, kinds


def test_every_record_with_a_field_deleted_or_of_another_type_reads_typed_or_is_unreadable_never_misread(
    every_log: list[list[LogEntry]],
) -> None:
    crashes: list[str] = []
    misreads: list[str] = []
    unreadable = 0
    total = 0
    for original, m in ((log, m) for log in every_log for m in mutants(log)):
        total += 1
        try:
            parsed = parse_log([e if e is not m.entry else _replaced(e, m.records) for e in original])
        except UnreadableEntry as exc:
            unreadable += 1
            if (exc.session_id, exc.seq) != (m.entry.session_id, m.entry.seq):
                crashes.append(f"{m}: names {exc.session_id}#{exc.seq}")
            continue
        except Exception as exc:
            crashes.append(f"{m}: {type(exc).__name__}: {exc}")
            continue
        if m.value is None or m.value is _DELETED:
            continue  # a field absent or null reads as its default
        record = _read_back(parsed, m)
        if record is None:
            continue
        written = to_data([record])[0]
        try:
            back = _get(written, m.path)
        except (LookupError, TypeError):
            continue  # written without the field (at its default, or in another form)
        if back != m.value or (type(back) is not type(m.value) and not _numbers(back, m.value)):
            misreads.append(f"{m}: read back as {back!r}")  # converted: a text as its letters, "false" as true
        elif m.path[0] not in FREE_FORM and _other_type(back, _get(m.entry.records[m.index], m.path)):
            misreads.append(f"{m}: kept as {type(back).__name__}")  # passed through where another type is
    assert not crashes, "\n".join(crashes[:20])
    assert not misreads, "\n".join(misreads[:20])
    assert total > 1000 and unreadable > total // 2  # most mutants are damage, and were refused


FREE_FORM = frozenset({"args", "metadata"})
"""Fields whose values are the caller's own JSON (a call's arguments, a receipt's metadata): any JSON value is a
value there. A guardian policy's settings are not: ``ThresholdPolicy.from_data`` reads them where the record is."""


def _other_type(value: object, original: object) -> bool:
    return original is not None and type(value) is not type(original) and not _numbers(value, original)


def _numbers(a: object, b: object) -> bool:
    return all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in (a, b))


def _replaced(entry: LogEntry, records: tuple[Any, ...]) -> LogEntry:
    return replace(entry, records=records)


def _read_back(parsed: list[tuple[LogEntry, tuple[Any, ...]]], m: Mutant) -> Any:
    """The mutated record as it was read (None for a guardian config, which is not returned, or a record read in
    another form than it is written: a guardian decision in its log form)."""
    kind = m.entry.records[m.index].get("type")
    if kind in ("guardian_config",) or "config" in m.entry.records[m.index]:
        return None
    (records,) = [rs for e, rs in parsed if e.seq == m.entry.seq]
    ahead = [r for r in m.entry.records[: m.index] if r.get("type") != "guardian_config"]
    return records[len(ahead)]


@pytest.mark.parametrize(
    ("data", "why"),
    [
        ("not a record", "a record is str, not an object"),
        ({"type": "run_goal", "text": "g", "criteria": "abc"}, "field criteria holds str"),
        (
            {"type": "step_intent", "calls": [{"call_id": "c", "tool": "t", "needs_approval": "false"}]},
            "needs_approval",
        ),
        ({"type": "stop_guard", "event": 7, "guard": "g", "step": 1}, "field event holds int"),
        ({"type": "history", "step": "1"}, "field step holds str, not an integer"),
        ({"type": "guardrail", "hook": "input", "action": "allow"}, "field 'name' is missing"),
        ({"type": "fork", "source_session_id": 1, "source_run_id": "r", "at_step": 1, "source_seq": 2}, "source_sess"),
    ],
    ids=["not an object", "text as a tuple", "text as a flag", "number as text", "text as number", "missing", "fork"],
)
def test_a_record_that_cannot_be_read_is_unreadable_record_naming_its_type_and_field(data: Any, why: str) -> None:
    with pytest.raises(UnreadableRecord, match=why):
        parse_records([data])


def test_a_record_of_a_type_this_version_does_not_know_is_kept_as_written() -> None:
    data = {"type": "from_the_future", "anything": [1, {"x": None}]}
    record = parse_record(data)
    assert isinstance(record, UnknownRecord) and to_data([record]) == (data,)


def test_an_entry_whose_records_are_not_a_list_is_unreadable_entry_naming_it(every_log: list[list[LogEntry]]) -> None:
    entry = _replaced(every_log[0][0], {"type": "run_goal"})  # type: ignore[arg-type]
    with pytest.raises(UnreadableEntry, match=f"log entry {entry.seq} cannot be read: the records are dict"):
        parse_entry(entry)


# The core's entry points, on a copy of a real log on disk with one record damaged.

Call = Callable[[Runner, SQLiteStore], Awaitable[object]]


async def _result(runner: Runner, store: Store, session: str) -> object:
    snapshot = await store.load_session(session)
    assert snapshot is not None and snapshot.last_run is not None
    return result_from_log(None, snapshot, snapshot.last_run)


ENTRY_POINTS: dict[str, tuple[str, Call]] = {
    "result": ("done", lambda r, s: _result(r, s, "done")),
    "run continuing the session": ("done", lambda r, s: r.run(rich_agent(), "again", session_id="done")),
    "fork": ("done", lambda r, s: r.fork(rich_agent(), "done", at_step=1, new_session_id="forked")),
    "retry": ("cut", lambda r, s: r.retry(looping_agent(), "cut")),
    "resume": ("waiting", lambda r, s: r.resume(BANKER, "waiting", {"c-transfer": Approve()})),
    "result of a resumed run": ("paid", lambda r, s: _result(r, s, "paid")),
}


def _sampled(entries: list[LogEntry], session: str) -> list[Mutant]:
    """Per record of the session: each top-level field deleted, and replaced by one value of another type, and
    the record replaced by a text."""
    out: list[Mutant] = []
    for entry in (e for e in entries if e.session_id == session):
        for i, record in enumerate(entry.records):
            out.append(Mutant(entry, i, (), "x", (*entry.records[:i], "x", *entry.records[i + 1 :])))
            for key in (k for k in record if k != "type"):
                for value in (_DELETED, _wrong(record[key])[0]):
                    changed = _with(record, (key,), value)
                    out.append(Mutant(entry, i, (key,), value, (*entry.records[:i], changed, *entry.records[i + 1 :])))
    return out


@pytest.mark.parametrize("entry_point", sorted(ENTRY_POINTS))
def test_the_core_reading_a_damaged_record_raises_unreadable_entry_naming_it_or_reads_it_never_crashes(
    current_log: Path, tmp_path: Path, entry_point: str
) -> None:
    session, call = ENTRY_POINTS[entry_point]
    entries = [e for log in _logs(_log_copy(current_log, tmp_path / "read.db")) for e in log]
    sampled = _sampled(entries, session)
    assert sampled
    crashes: list[str] = []

    async def attempt(m: Mutant, db: Path) -> None:
        with sqlite3.connect(db) as conn:
            conn.execute(
                "UPDATE log SET records = ? WHERE session_id = ? AND seq = ?",
                (json.dumps(list(m.records)), m.entry.session_id, m.entry.seq),
            )
        conn.close()
        store = SQLiteStore(db)
        try:
            await call(Runner(store), store)
        except UnreadableSuspension as exc:
            if exc.session_id != session:
                crashes.append(f"{m}: names session {exc.session_id!r}")
        except UnreadableEntry as exc:
            if (exc.session_id, exc.seq) != (session, m.entry.seq):
                crashes.append(f"{m}: names {exc.session_id}#{exc.seq}")
        except Exception as exc:
            crashes.append(f"{m}: {type(exc).__name__}: {exc}")
        finally:
            await store.close()

    async def every() -> None:
        for n, m in enumerate(sampled):
            await attempt(m, _log_copy(current_log, tmp_path / f"{n}.db"))

    asyncio.run(every())
    assert not crashes, "\n".join(crashes[:20])


@pytest.mark.parametrize(
    "pending",
    [[{"tool": "transfer"}], [{"call_id": "c-transfer", "tool": 5, "args": {}, "args_hash": "h"}], "c-transfer"],
    ids=["a field missing", "a field of another type", "not a list"],
)
def test_a_suspended_runs_damaged_pending_calls_are_unreadable_run_for_result_resume_and_expiry(
    current_log: Path, tmp_path: Path, pending: object
) -> None:
    db = _log_copy(current_log, tmp_path / "log.db")
    with sqlite3.connect(db) as conn:
        (run_id, report) = conn.execute("SELECT run_id, report FROM runs WHERE session_id = 'waiting'").fetchone()
        conn.execute(
            "UPDATE runs SET report = ? WHERE run_id = ?",
            (json.dumps({**json.loads(report), "pending": pending}), run_id),
        )
    conn.close()

    async def read() -> None:
        store = SQLiteStore(db)
        try:
            for call in (
                lambda: _result(Runner(store), store, "waiting"),
                lambda: Runner(store).resume(BANKER, "waiting", {"c-transfer": Approve()}),
                lambda: Runner(store).expire("waiting", now=2e9),
            ):
                with pytest.raises(UnreadableRun) as caught:
                    await call()
                assert (caught.value.session_id, caught.value.run_id) == ("waiting", run_id)
                assert "pending call" in caught.value.why
            sweep = await Runner(store).expire_all(now=2e9)
            assert [(s.session_id, s.run_id) for s in sweep.skipped] == [("waiting", run_id)]
        finally:
            await store.close()

    asyncio.run(read())


def test_the_dbos_runtimes_settle_check_reads_a_damaged_approval_record_as_unreadable_entry(
    current_log: Path, tmp_path: Path
) -> None:
    pytest.importorskip("dbos")
    from stopwise.runtime.dbos import _own_settle

    db = _log_copy(current_log, tmp_path / "log.db")

    async def read() -> None:
        store = SQLiteStore(db)
        try:
            snapshot = await store.load_session("paid")
            assert snapshot is not None
            settle = next(e for e in snapshot.entries if e.kind.value == "settle")
            decision = next(r for r in settle.records if r["type"] == "approval_decision")
            for damage in ({"type": "approval_decision", "tool": "transfer"}, {**decision, "decided_at": "now"}):
                damaged = _replaced(settle, (*settle.records, damage))
                log = replace(snapshot, entries=tuple(damaged if e is settle else e for e in snapshot.entries))
                with pytest.raises(UnreadableEntry) as caught:
                    await _own_settle(Runner(store), log, settle.seq, {"c-transfer": Approve()}, 0.0)
                assert (caught.value.session_id, caught.value.seq) == ("paid", settle.seq)
        finally:
            await store.close()

    asyncio.run(read())


# A guardian policy's settings, read where its record is read.

WRONG_SETTINGS = [("max_replans", "7"), ("max_replans", True), ("repeat_limit", 2.5), ("on_unavailable", 7)]
WRONG_SETTINGS += [("budget_nearly_spent", "0.9"), ("budget_nearly_spent", False), ("on_unavailable", ["stop"])]


Change = Callable[[dict[str, Any]], dict[str, Any] | str | None]
"""A record damaged, or None for a record left alone."""


def _first_damaged(rows: list[tuple[int, str | None]], change: Change) -> tuple[int, str]:
    """Of a session's log rows (seq, records JSON), the first whose records ``change`` damages: its seq and its
    records' JSON with the first record it changes replaced."""
    for seq, text in rows:
        records = json.loads(text or "[]")
        for i, record in enumerate(records):
            damaged = change(record)
            if damaged is not None:
                records[i] = damaged
                return seq, json.dumps(records)
    raise AssertionError("no record to damage")


def _damage(db: Path, session: str, change: Change) -> int:
    """The first record of ``session``'s log ``change`` damages, damaged in the SQLite file ``db``; its entry's seq."""
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT seq, records FROM log WHERE session_id = ? ORDER BY seq", (session,)).fetchall()
        seq, records = _first_damaged(rows, change)
        conn.execute("UPDATE log SET records = ? WHERE session_id = ? AND seq = ?", (records, session, seq))
    conn.close()
    return seq


def _setting(name: str, value: object) -> Callable[[dict[str, Any]], dict[str, Any] | None]:
    def change(record: dict[str, Any]) -> dict[str, Any] | None:
        if record.get("type") != "guardian_config":
            return None
        return {**record, "policy": {**record["policy"], name: value}}

    return change


async def _resume_and_fork_refuse(store: Store, seq: int, setting: str) -> None:
    """Reading session ``done`` to resume it, and to fork it, each raise ``UnreadableEntry`` naming the damaged
    entry ``seq`` and the policy setting."""
    for call in (
        lambda: _result(Runner(store), store, "done"),
        lambda: Runner(store).fork(rich_agent(), "done", at_step=2, new_session_id="forked"),
    ):
        with pytest.raises(UnreadableEntry) as caught:
            await call()
        assert (caught.value.session_id, caught.value.seq) == ("done", seq)
        assert f"ThresholdPolicy.{setting}" in caught.value.why, caught.value.why


@pytest.mark.parametrize(("setting", "value"), WRONG_SETTINGS, ids=[f"{s}={v!r}" for s, v in WRONG_SETTINGS])
def test_a_guardian_policy_setting_of_another_type_is_unreadable_entry_naming_the_session_entry_and_setting(
    current_log: Path, tmp_path: Path, setting: str, value: object
) -> None:
    db = _log_copy(current_log, tmp_path / "log.db")
    seq = _damage(db, "done", _setting(setting, value))

    async def read() -> None:
        store = SQLiteStore(db)
        try:
            await _resume_and_fork_refuse(store, seq, setting)
        finally:
            await store.close()

    asyncio.run(read())


def _whole_decision(every_log: list[list[LogEntry]]) -> dict[str, Any]:
    """A guardian decision an earlier version wrote whole, its policy inline (``fixtures/log_v3.db``)."""
    return next(r for log in every_log for e in log for r in e.records if r.get("type") == "guardian" and "policy" in r)


@pytest.mark.parametrize(("setting", "value"), WRONG_SETTINGS, ids=[f"{s}={v!r}" for s, v in WRONG_SETTINGS])
def test_a_whole_guardian_decisions_policy_setting_of_another_type_is_unreadable_record_naming_it(
    every_log: list[list[LogEntry]], setting: str, value: object
) -> None:
    decision = _whole_decision(every_log)
    with pytest.raises(UnreadableRecord, match=f"a 'guardian' record: ThresholdPolicy.{setting}: must be"):
        parse_records([{**decision, "policy": {**decision["policy"], setting: value}}])


def test_a_policy_setting_a_newer_version_wrote_is_kept_when_read_and_refused_at_replay(
    every_log: list[list[LogEntry]],
) -> None:
    decision = _whole_decision(every_log)
    (read,) = parse_records([{**decision, "policy": {**decision["policy"], "from_the_future": "x"}}])
    assert isinstance(read, GuardianDecision) and read.policy["from_the_future"] == "x"
    assert to_data([read])[0]["policy"]["from_the_future"] == "x"  # a copy (fork) keeps it
    with pytest.raises(ConfigError, match="settings this stopwise does not know: \\['from_the_future'\\]"):
        replay(read)


def test_a_policy_input_a_newer_version_wrote_is_kept_when_read_and_refused_at_replay_under_any_policy(
    every_log: list[list[LogEntry]],
) -> None:
    decision = _whole_decision(every_log)
    (read,) = parse_records([{**decision, "inputs": {**decision["inputs"], "from_the_future": {"n": 2}}}])
    assert isinstance(read, GuardianDecision) and read.inputs.newer == {"from_the_future": {"n": 2}}
    assert to_data([read])[0]["inputs"]["from_the_future"] == {"n": 2}  # a copy (fork) keeps it
    refused = r"run .*policy inputs have fields this stopwise does not know: \['from_the_future'\].*newer stopwise"
    with pytest.raises(ConfigError, match=refused):
        replay(read)
    # Another policy would decide without the input too: the what-if path refuses it the same way.
    with pytest.raises(ConfigError, match=refused):
        replay(read, ThresholdPolicy(max_replans=5))
    with pytest.raises(ConfigError, match=refused):
        replay_all([read], PolicyOverride.from_data({"policy": {"max_replans": 3}}))
    # Without it the same record replays as it was decided, the input an earlier version wrote and this one
    # retired (``budget_exhausted``, never set) included; set, it would have decided, and is refused.
    assert decision["inputs"]["budget_exhausted"] is None
    (known,) = parse_records([decision])
    assert isinstance(known, GuardianDecision) and known.inputs.newer == {}
    assert replay(known).outcome is known.outcome
    (spent,) = parse_records([{**decision, "inputs": {**decision["inputs"], "budget_exhausted": "cost"}}])
    assert isinstance(spent, GuardianDecision)
    with pytest.raises(ConfigError, match=r"\['budget_exhausted'\]"):
        replay(spent)


def _input(name: str, value: object) -> Callable[[dict[str, Any]], dict[str, Any] | None]:
    """A change adding policy input ``name`` to the first guardian decision (the log's form, naming its config)."""

    def change(record: dict[str, Any]) -> dict[str, Any] | None:
        if record.get("type") != "guardian" or "config" not in record:
            return None
        return {**record, "inputs": {**record.get("inputs", {}), name: value}}

    return change


def test_a_log_with_a_policy_input_a_newer_version_wrote_shows_and_reports_but_replay_refuses_naming_it(
    current_log: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = _log_copy(current_log, tmp_path / "log.db")
    _damage(db, "done", _input("from_the_future", [1, 2]))

    async def runs() -> list[str]:
        store = SQLiteStore(db)
        try:
            return [r.run_id for r in await store.list_runs("done")]
        finally:
            await store.close()

    (run_id,) = asyncio.run(runs())
    assert main(["show", run_id, "--db", str(db)]) == 0
    assert main(["report", run_id, "--db", str(db), "-o", str(tmp_path / "run.html")]) == 0
    assert (tmp_path / "run.html").stat().st_size > 0
    capsys.readouterr()
    assert main(["replay", str(db)]) == 2
    err = capsys.readouterr().err
    assert "['from_the_future']" in err and "a newer stopwise wrote it" in err, err


# A peer's run (the integrations) reading its session's earlier stop guard records.


DAMAGE: dict[str, tuple[str, Callable[[dict[str, Any]], dict[str, Any] | str]]] = {
    "a field of another type": ("stop_guard", lambda r: {**r, "event": 7}),
    "not an object": ("stop_guard", lambda r: "not a record"),
    "another kind, damaged": ("guardian_config", lambda r: {"type": "guardian_config"}),
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_peer_run_starting_on_a_damaged_session_raises_unreadable_entry_naming_it(
    current_log: Path, tmp_path: Path, damage: str
) -> None:
    db = _log_copy(current_log, tmp_path / "log.db")
    kind, damaged = DAMAGE[damage]

    def change(record: dict[str, Any]) -> dict[str, Any] | str | None:
        return damaged(record) if record.get("type") == kind else None

    seq = _damage(db, "done", change)

    async def start() -> None:
        store = SQLiteStore(db)
        try:
            with pytest.raises(UnreadableEntry) as caught:
                await PeerRun(Deciders(store=store), "done", "peer-run").start()
            assert (caught.value.session_id, caught.value.seq) == ("done", seq)
        finally:
            await store.close()

    asyncio.run(start())


# PostgreSQL: the same read path (``parse_entry`` on what ``load_session`` returns) as SQLite's.


def test_on_postgresql_a_damaged_record_is_refused_with_unreadable_entry_naming_the_session_entry_and_field(
    request: pytest.FixtureRequest,
) -> None:
    psycopg = pytest.importorskip("psycopg")
    dsn = request.getfixturevalue("pg_dsn")
    if dsn is None:
        pytest.skip(HOW_TO_ENABLE)
    from stopwise.store.postgres import PostgresStore

    schema = f"r_{uuid.uuid4().hex[:12]}"

    async def record() -> None:
        store = PostgresStore(dsn, schema=schema, max_size=2)
        try:
            done = await Runner(store).run(rich_agent(), "find it", session_id="done")
            assert done.status == "completed", done.error
        finally:
            await store.close()

    asyncio.run(record())
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"SET search_path TO {schema}")
        rows = conn.execute("SELECT seq, records FROM log WHERE session_id = 'done' ORDER BY seq").fetchall()
        seq, damaged = _first_damaged(rows, _setting("max_replans", "7"))
        conn.execute("UPDATE log SET records = %s WHERE session_id = 'done' AND seq = %s", (damaged, seq))

    async def read() -> None:
        store = PostgresStore(dsn, schema=schema, max_size=2)
        try:
            await _resume_and_fork_refuse(store, seq, "max_replans")
            assert (
                await store.load_session("forked") is None
            )  # the damaged source was named before anything was written
        finally:
            await store.close()

    asyncio.run(read())
