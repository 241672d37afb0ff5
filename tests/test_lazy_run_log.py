"""A resume types only the records it acts on (``records.RunLog``), and reads them as the whole log's parse does.

``RunLog.of`` reads each entry's record tags and the run's guardian configs; an entry's records are typed when a
reader first asks for them (``records``), or only those of the types asked for (``typed``: the restored leg's kept
records). These tests hold the lazy reading equal to the eager one (``parse_log``) on the stored logs of older
versions and on a guardian's approval log, and pin where a damaged record is refused: a record the resume reads,
before anything runs; a record of a type no resume reads (an old step's approval request), by every view of the
whole log, not by the resume (docs/durability.md).
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import sqlite3
from collections import defaultdict
from pathlib import Path

import pytest

from stopwise import Agent, Approve, FunctionModel, Reply, Risk, Runner, RunResult, SQLiteStore, ToolCall, tool
from stopwise._leg import KEPT
from stopwise._record_check import FieldMismatch, check_record
from stopwise.errors import UnreadableEntry
from stopwise.goal import Goal
from stopwise.guardian import Guardian
from stopwise.guardian.records import GuardianConfig, GuardianDecision
from stopwise.models import ModelRequest
from stopwise.records import RunLog, parse_log, parse_records
from stopwise.store import _sql
from stopwise.store.base import LogEntry

FIXTURES = Path(__file__).parent / "fixtures"
STEPS = 6


def _approval_agent(sent: list[str]) -> Agent:
    """An agent whose every step asks for one approved call of ``send_email`` (its calls land in ``sent``), with
    the guardian consulted on every turn and call."""

    @tool(needs_approval=True, risk=Risk.REVERSIBLE)
    def send_email(to: str) -> str:
        """Send an email."""
        sent.append(to)
        return "sent to " + to

    def reply(request: ModelRequest) -> Reply:
        k = sum(1 for m in request.messages if m.role.value == "assistant") + 1
        if k < STEPS:
            return Reply(tool_calls=[ToolCall("send_email", {"to": f"user{k}@example.com"})])
        return Reply(text="done")

    return Agent(name="mailer", model=FunctionModel(reply), tools=[send_email], max_steps=20, guardian=Guardian())


async def _suspended_at(store: SQLiteStore, agent: Agent, step: int) -> None:
    """Session ``s`` run and approved until it waits on the approval of step ``step``'s call."""
    runner = Runner(store)
    result = await runner.run(agent, "send_email a note to every user, one email each", session_id="s")
    while result.steps < step:
        assert result.status == "suspended"
        result = await runner.resume(agent, "s", {p.call_id: Approve() for p in result.pending})
    assert result.status == "suspended" and result.steps == step


def _runs(entries: tuple[LogEntry, ...]) -> list[list[LogEntry]]:
    by_run: dict[str, list[LogEntry]] = defaultdict(list)
    for e in entries:
        by_run[e.run_id].append(e)
    return list(by_run.values())


def _assert_lazy_equals_eager(entries: list[LogEntry]) -> None:
    eager = parse_log(entries)
    configs: dict[str, GuardianConfig] = {}
    for e in entries:
        parse_records(e.records, configs)
    kept = [r for _, rs in eager for r in rs if isinstance(r, KEPT)]
    goals = [r for _, rs in eager for r in rs if isinstance(r, Goal)]
    # ``typed`` first, on a log no reader typed yet: it types records one by one, not whole entries.
    run_log = RunLog.of(entries)
    assert run_log.typed(*KEPT) == kept
    assert run_log.typed(Goal) == goals
    assert dict(run_log.configs) == configs
    assert [run_log.records(i) for i in range(len(entries))] == [rs for _, rs in eager]
    assert run_log.typed(*KEPT) == kept  # and the same from the entries typed whole


async def _fixture_sessions(tmp_path: Path, name: str) -> list[tuple[LogEntry, ...]]:
    path = tmp_path / name
    shutil.copy(FIXTURES / name, path)
    store = SQLiteStore(path)  # migrates the copy
    try:
        out = []
        for session_id in await store.list_sessions(limit=1000):
            snapshot = await store.load_session(session_id)
            assert snapshot is not None
            out.append(snapshot.entries)
        return out
    finally:
        await store.close()


@pytest.mark.parametrize("name", ["log_v3.db", "log_v5.db"])
async def test_a_lazily_typed_run_log_reads_every_record_as_the_whole_log_parse_on_the_stored_logs(
    tmp_path: Path, name: str
) -> None:
    sessions = await _fixture_sessions(tmp_path, name)
    assert len(sessions) >= 14
    kinds = set()
    for entries in sessions:
        for run in _runs(entries):
            _assert_lazy_equals_eager(run)
            kinds |= {type(r) for _, rs in parse_log(run) for r in rs}
    # The logs hold the kept types and the suspended step's: the comparison covered them.
    assert GuardianDecision in kinds and len(kinds & set(KEPT)) >= 3


async def test_a_lazily_typed_run_log_reads_a_guardian_approval_log_as_the_whole_log_parse(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "log.db")
    await _suspended_at(store, _approval_agent([]), STEPS - 1)
    snapshot = await store.load_session("s")
    await store.close()
    assert snapshot is not None
    (run,) = _runs(snapshot.entries)
    decisions = [r for _, rs in parse_log(run) for r in rs if isinstance(r, GuardianDecision)]
    assert len(decisions) >= 2 * (STEPS - 2)  # a turn decision and a call's each step
    _assert_lazy_equals_eager(run)


async def test_a_decision_read_from_its_config_equals_the_whole_record_read_from_its_expansion(
    tmp_path: Path,
) -> None:
    """``GuardianConfig.decision`` builds the decision from the config's typed fields; the whole record's reading
    (``expand``, then ``GuardianDecision.from_data``) is the reference, also for inputs naming a budget without its
    use (the whole record drops that name)."""
    store = SQLiteStore(tmp_path / "log.db")
    await _suspended_at(store, _approval_agent([]), 3)
    snapshot = await store.load_session("s")
    await store.close()
    assert snapshot is not None
    configs: dict[str, GuardianConfig] = {}
    logged = []
    for e in snapshot.entries:
        parse_records(e.records, configs)
        logged += [d for d in e.records if d["type"] == GuardianDecision.TYPE]
    assert logged and all("config" in d for d in logged)
    for d in logged:
        config = configs[d["config"]]
        assert config.decision(d) == GuardianDecision.from_data(config.expand(d))
        odd = {**d, "inputs": {**d.get("inputs", {}), "budget": "cost"}}
        assert config.decision(odd) == GuardianDecision.from_data(config.expand(odd))
        assert config.decision(odd).inputs.budget is None


def _damage(path: Path, where: str, change: dict[str, object], nth: int = 0) -> int:
    """Overwrite fields of the ``nth`` record of type ``where`` in session ``s``'s log (in log order, from the end
    when ``nth`` is negative); the seq of its entry."""
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT seq, records FROM log WHERE session_id = 's' ORDER BY seq").fetchall()
        found = [(seq, json.loads(text)) for seq, text in rows if text and f'"type":"{where}"' in text]
        seq, records = found[nth]
        for r in records:
            if r["type"] == where:
                r.update(change)
        conn.execute("UPDATE log SET records = ? WHERE seq = ?", (json.dumps(records), seq))
    return int(seq)


@pytest.mark.parametrize(
    ("where", "nth", "change"),
    [
        ("approval_request", -1, {"calls": 5}),  # the request the run waits on
        ("guardian", 0, {"step": "one"}),  # the first step's decision: a record the restored leg keeps
    ],
)
async def test_a_damaged_record_a_resume_reads_is_refused_before_the_approved_call_runs(
    tmp_path: Path, where: str, nth: int, change: dict[str, object]
) -> None:
    sent: list[str] = []
    store, agent, seq = await _damaged_at_step_3(tmp_path, sent, where, change, nth)
    ran = list(sent)
    with pytest.raises(UnreadableEntry) as caught:
        await _approve_pending(store, agent)
    await store.close()
    assert caught.value.seq == seq
    assert sent == ran  # the approved call did not run


async def _damaged_at_step_3(
    tmp_path: Path, sent: list[str], where: str, change: dict[str, object], nth: int
) -> tuple[SQLiteStore, Agent, int]:
    """A run suspended at step 3, one of its records then damaged (``_damage``): the store reopened, the agent, the
    damaged entry's seq."""
    path = tmp_path / "log.db"
    store = SQLiteStore(path)
    agent = _approval_agent(sent)
    await _suspended_at(store, agent, 3)
    await store.close()
    seq = _damage(path, where, change, nth)
    return SQLiteStore(path), agent, seq


async def _approve_pending(store: SQLiteStore, agent: Agent) -> RunResult:
    snapshot = await store.load_session("s")
    assert snapshot is not None and snapshot.last_run is not None
    report = snapshot.last_run.report
    return await Runner(store).resume(agent, "s", {p["call_id"]: Approve() for p in report["pending"]})


async def test_a_damaged_record_of_a_type_no_resume_reads_is_refused_by_the_whole_log_views_not_by_the_resume(
    tmp_path: Path,
) -> None:
    """An old step's approval request is read by no resume (its step is settled): the resume goes on, and every
    reading of the whole log (``parse_log``: the result read back, the history, the views) refuses the entry."""
    sent: list[str] = []
    store, agent, seq = await _damaged_at_step_3(tmp_path, sent, "approval_request", {"calls": 5}, 0)
    result = await _approve_pending(store, agent)
    assert result.status == "suspended" and result.steps == 4 and len(sent) == 3
    after = await store.load_session("s")
    await store.close()
    assert after is not None
    with pytest.raises(UnreadableEntry) as caught:
        parse_log(after.entries)
    assert caught.value.seq == seq


def test_log_rows_read_by_position_are_the_entries_read_by_column_name(tmp_path: Path) -> None:
    path = tmp_path / "log_v5.db"
    shutil.copy(FIXTURES / "log_v5.db", path)
    with sqlite3.connect(path) as conn:
        rows = conn.execute(_sql.SESSION_LOG.replace("session_id = :session_id", "1")).fetchall()
        conn.row_factory = sqlite3.Row
        named = conn.execute(_sql.SESSION_LOG.replace("session_id = :session_id", "1")).fetchall()
    assert len(rows) > 50
    assert _sql.entries_from(rows) == tuple(_sql.entry_from(r) for r in named)


def test_log_rows_read_by_position_refuse_an_unreadable_row_naming_its_session_and_seq() -> None:
    row = ("s", 7, "r", 1, "step", "[]", None, '{"requests": 1}', 0, "not json")
    with pytest.raises(UnreadableEntry) as caught:
        _sql.entries_from([("s", 6, *row[2:9], "[]"), row])
    assert caught.value.seq == 7 and caught.value.session_id == "s"


async def test_the_record_check_still_refuses_a_bool_for_an_integer_and_a_text_for_a_probability(
    tmp_path: Path,
) -> None:
    """The check passes a scalar field by its type alone (``_record_check``'s fast path); a value of a near type
    still goes to the full check and is refused, naming the field."""
    store = SQLiteStore(tmp_path / "log.db")
    await _suspended_at(store, _approval_agent([]), 2)
    snapshot = await store.load_session("s")
    await store.close()
    assert snapshot is not None
    decision = RunLog.of(snapshot.entries).typed(GuardianDecision)[0]
    check_record(decision)
    with pytest.raises(FieldMismatch, match="step holds bool, not an integer"):
        check_record(dataclasses.replace(decision, step=True))
    name, answer = next(iter(decision.answers.items()))
    bad = dataclasses.replace(answer, distribution={"yes": "0.5"})
    with pytest.raises(FieldMismatch, match=rf"answers\['{name}'\]\.distribution\['yes'\] holds str, not a number"):
        check_record(dataclasses.replace(decision, answers={**decision.answers, name: bad}))
    with pytest.raises(FieldMismatch, match="escalated"):
        check_record(dataclasses.replace(decision, escalated=("risk", 3)))  # type: ignore[arg-type]
