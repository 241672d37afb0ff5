"""A runner keeps the parse of the run it resumed last (``stopwise._parsed_runs``): resuming it again parses only
the entries committed since. The rules: the kept parse is the whole log's parse, whatever wrote the entries since
(this runner, another process, a hand edit); a resume with it restores the same leg a fresh runner restores; an
entry that cannot be read raises every time; exactly-once holds across processes."""

from __future__ import annotations

import asyncio
import dataclasses
import subprocess
import sys
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import stopwise._parsed_runs as parsed_runs
from _cli_fixtures import stopwise_cmd
from _pgcluster import HOW_TO_ENABLE
from stopwise import Approve, Runner, SQLiteStore, Store
from stopwise._leg import Leg
from stopwise._load import load_agent
from stopwise._parsed_runs import ParsedRuns
from stopwise.errors import UnreadableEntry
from stopwise.records import RunLog
from stopwise.runtime import result_from_log
from stopwise.store.base import LogEntry

STEPS = 10

AGENT = '''
import os

from stopwise import Agent, FunctionModel, Guardian, Reply, Risk, ToolCall, tool

EFFECTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "effects.log")


@tool(needs_approval=True, risk=Risk.REVERSIBLE)
def send_email(to: str, body: str) -> str:
    """Send an email."""
    with open(EFFECTS, "a") as f:
        f.write(to + "\\n")
    return "sent to " + to


def reply(request):
    k = sum(1 for m in request.messages if m.role.value == "assistant") + 1
    if k < {steps}:
        return Reply(tool_calls=[ToolCall("send_email", {{"to": "user%d@example.com" % k, "body": "note %d" % k}})])
    return Reply(text="done")


agent = Agent(name="mailer", model=FunctionModel(reply), tools=[send_email], max_steps=50, guardian=Guardian())
'''

PROMPT = "send_email a note to every user, one email each"


def _clock() -> float:
    """One fixed time for every runner: the legs compared hold the decisions' ``decided_at``."""
    return 1_900_000_000.0


# What a resume restores, as a runner without a kept parse restores it (the leg's caches and hooks' copies aside).
_LEG_FIELDS = (
    "run",
    "messages",
    "state",
    "next_seq",
    "phase",
    "forced_attempts",
    "carried_reason",
    "records",
    "run_start",
    "settle",
    "goal",
    "replans",
    "guardian_configs",
    "tool_streaks",
    "budget_usage",
    "budget_tool_calls",
    "output_retries",
    "budget_judge_usage",
)


def _agent_file(folder: Path) -> str:
    path = folder / "mailer.py"
    path.write_text(AGENT.format(steps=STEPS))
    return f"{path}:agent"


def _leg_view(leg: Leg) -> dict[str, Any]:
    return {name: getattr(leg, name) for name in _LEG_FIELDS}


def _effects(folder: Path) -> Counter[str]:
    return Counter((folder / "effects.log").read_text().split())


async def test_a_resume_with_the_kept_parse_restores_the_leg_a_fresh_runner_restores(
    store: Store, tmp_path: Path
) -> None:
    agent = load_agent(_agent_file(tmp_path))
    runner = Runner(store, clock=_clock)
    result = await runner.run(agent, PROMPT, session_id="s")
    compared = 0
    while result.status.value == "suspended":
        decisions = {p.call_id: Approve() for p in result.pending}
        kept = await runner.open_leg(agent, "resume", session_id="s", decisions=decisions)
        fresh = await Runner(store, clock=_clock).open_leg(agent, "resume", session_id="s", decisions=decisions)
        assert _leg_view(kept) == _leg_view(fresh)
        compared += 1
        result = await runner.resume(agent, "s", decisions)
    assert (result.status.value, result.steps, compared) == ("completed", STEPS, STEPS - 1)
    # The legs held the guardian's records (decisions naming a config kept from an earlier entry).
    assert kept.records and kept.guardian_configs


async def test_the_kept_parse_equals_parsing_the_whole_log_after_the_log_grew(store: Store, tmp_path: Path) -> None:
    agent = load_agent(_agent_file(tmp_path))
    runner = Runner(store)
    result = await runner.run(agent, PROMPT, session_id="s")
    kept = ParsedRuns()
    for _ in range(4):
        snapshot = await store.load_session("s")
        assert snapshot is not None and snapshot.last_run is not None
        entries = [e for e in snapshot.entries if e.run_id == snapshot.last_run.run_id]
        assert kept.run_log("s", snapshot.last_run.run_id, entries) == RunLog.of(entries)
        result = await runner.resume(agent, "s", {p.call_id: Approve() for p in result.pending})


def _entries(session: str = "s", run: str = "r") -> list[LogEntry]:
    from stopwise.approvals import ApprovalRecord
    from stopwise.records import to_data
    from stopwise.store.base import EntryKind

    return [
        LogEntry(
            session, seq, run, seq, EntryKind.SETTLE, (), records=to_data([ApprovalRecord(f"c{seq}", "t", "approve")])
        )
        for seq in range(1, 6)
    ]


def _spy(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The seqs of the entries ``ParsedRuns`` parses (a spy on the parser it calls, which still parses)."""
    seen: list[int] = []
    real = parsed_runs.parse_entry

    def counted(entry: LogEntry, configs: Any = None) -> Any:
        seen.append(entry.seq)
        return real(entry, configs)

    monkeypatch.setattr(parsed_runs, "parse_entry", counted)
    return seen


def test_a_run_read_again_parses_only_the_entries_committed_since(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _spy(monkeypatch)
    entries = _entries()
    kept = ParsedRuns()
    kept.run_log("s", "r", entries[:3])
    # The store returns new objects each time: the kept parse is matched on the records, not on identity.
    again = [dataclasses.replace(e, records=tuple(dict(r) for r in e.records)) for e in entries]
    assert kept.run_log("s", "r", again) == RunLog.of(again)
    assert seen == [1, 2, 3, 4, 5]


def test_an_entry_changed_since_it_was_kept_is_parsed_again(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _spy(monkeypatch)
    entries = _entries()
    kept = ParsedRuns()
    kept.run_log("s", "r", entries)
    edited = list(entries)
    edited[1] = dataclasses.replace(entries[1], records=entries[4].records)  # a hand edit of the log
    assert kept.run_log("s", "r", edited) == RunLog.of(edited)
    assert seen == [1, 2, 3, 4, 5, 1, 2, 3, 4, 5]
    # Another run of the session (or the session written again under a new run) shares nothing either.
    del seen[:]
    other = _entries(run="r2")
    assert kept.run_log("s", "r2", other) == RunLog.of(other)
    assert seen == [1, 2, 3, 4, 5]


def test_an_unreadable_entry_raises_each_time_even_once_its_run_was_kept() -> None:
    entries = _entries()
    kept = ParsedRuns()
    kept.run_log("s", "r", entries[:3])
    broken = [*entries[:3], dataclasses.replace(entries[3], records=({"type": "approval_decision", "call_id": 7},))]
    for _ in range(2):
        with pytest.raises(UnreadableEntry) as caught:
            kept.run_log("s", "r", broken)
        assert caught.value.seq == 4
    broken[1] = dataclasses.replace(entries[1], records=({"type": "approval_decision"},))
    with pytest.raises(UnreadableEntry) as caught:
        kept.run_log("s", "r", broken)
    assert caught.value.seq == 2


def test_the_kept_parses_are_bounded_by_sessions_least_recently_read_dropped(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _spy(monkeypatch)
    kept = ParsedRuns(sessions=2)
    for session in ("a", "b", "a", "c"):  # "b" is the least recently read when "c" comes
        kept.run_log(session, "r", _entries(session))
    del seen[:]
    kept.run_log("a", "r", _entries("a"))
    kept.run_log("c", "r", _entries("c"))
    assert seen == []
    kept.run_log("b", "r", _entries("b"))
    assert seen == [1, 2, 3, 4, 5]


def test_the_kept_parses_are_bounded_by_entries_but_the_last_run_read_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _spy(monkeypatch)
    kept = ParsedRuns(sessions=10, entries=8)  # five entries a run: two runs are over the bound
    kept.run_log("a", "r", _entries("a"))
    kept.run_log("b", "r", _entries("b"))  # "a" dropped
    del seen[:]
    kept.run_log("b", "r", _entries("b"))
    assert seen == []
    kept.run_log("a", "r", _entries("a"))
    assert seen == [1, 2, 3, 4, 5]
    alone = ParsedRuns(entries=3)  # one run over the bound alone is still kept: a resume holds that much anyway
    alone.run_log("a", "r", _entries("a"))
    del seen[:]
    alone.run_log("a", "r", _entries("a"))
    assert seen == []


def test_a_completed_run_drops_its_kept_parse(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _spy(monkeypatch)
    agent = load_agent(_agent_file(tmp_path))
    runner = Runner(clock=_clock)
    result = runner.run_sync(agent, PROMPT, session_id="s")
    while result.status.value == "suspended":
        result = runner.resume_sync(agent, "s", {p.call_id: Approve() for p in result.pending})
    assert result.status.value == "completed"
    # Kept until the last resume; dropped once it completed: a fresh read parses the whole run again.
    loaded = asyncio.run(runner.store.load_session("s"))  # the runner's own memory store
    assert loaded is not None and loaded.last_run is not None
    del seen[:]
    entries = [e for e in loaded.entries if e.run_id == loaded.last_run.run_id]
    runner._parsed_runs.run_log("s", loaded.last_run.run_id, entries)
    assert len(seen) == len(entries)


def _second_process(kind: str, where: str, target: str, session: str, calls: list[str], cwd: Path) -> None:
    """Approve ``calls`` of the session's suspended run in another process: ``stopwise approve`` on SQLite, a
    script with its own ``Runner`` on PostgreSQL (the command line keeps its log in SQLite only)."""
    if kind == "sqlite":
        done = stopwise_cmd("approve", session, *calls, "--agent", target, "--db", where, cwd=cwd)
    else:
        dsn, schema = where.rsplit("|", 1)
        script = (
            "import asyncio, sys\n"
            "from stopwise import Approve, Runner\n"
            "from stopwise._load import load_agent\n"
            "from stopwise.store.postgres import PostgresStore\n"
            "async def main():\n"
            f"    agent = load_agent({target!r})\n"
            f"    async with Runner(PostgresStore({dsn!r}, schema={schema!r}, max_size=2)) as runner:\n"
            f"        await runner.resume(agent, {session!r}, {{c: Approve() for c in {calls!r}}})\n"
            "asyncio.run(main())\n"
        )
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=cwd, timeout=120)
    assert done.returncode in (0, 1), done.stderr  # 1: the run suspended again (the next step's call)


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
async def test_a_run_resumed_in_turn_here_and_in_a_second_process_runs_each_call_once_with_the_same_legs(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    target = _agent_file(tmp_path)
    agent = load_agent(target)
    store: Store
    if kind == "sqlite":
        where = str(tmp_path / "log.db")
        store = SQLiteStore(where)
    else:
        dsn = request.getfixturevalue("pg_dsn")
        if dsn is None:
            pytest.skip(HOW_TO_ENABLE)
        from stopwise.store.postgres import PostgresStore

        schema = f"t_{uuid.uuid4().hex[:12]}"
        where = f"{dsn}|{schema}"
        store = PostgresStore(dsn, schema=schema, max_size=2)
    runner = Runner(store, clock=_clock)  # keeps its parse of the run from one resume to the next
    try:
        result = await runner.run(agent, PROMPT, session_id="s")
        turn = 0
        while result.status.value == "suspended":
            turn += 1
            decisions = {p.call_id: Approve() for p in result.pending}
            if turn % 3 == 0:
                # Another process settles this step: the log grows past what this runner parsed.
                _second_process(kind, where, target, "s", list(decisions), tmp_path)
                snapshot = await store.load_session("s")
                assert snapshot is not None and snapshot.last_run is not None
                result = result_from_log(agent, snapshot, snapshot.last_run)
                continue
            kept = await runner.open_leg(agent, "resume", session_id="s", decisions=decisions)
            fresh = await Runner(store, clock=_clock).open_leg(agent, "resume", session_id="s", decisions=decisions)
            assert _leg_view(kept) == _leg_view(fresh)
            result = await runner.resume(agent, "s", decisions)
    finally:
        await store.close()
    assert (result.status.value, result.steps) == ("completed", STEPS)
    assert _effects(tmp_path) == Counter(f"user{k}@example.com" for k in range(1, STEPS))


async def test_a_retry_with_the_kept_parse_restores_the_leg_a_fresh_runner_restores(store: Store) -> None:
    from stopwise import Agent, FunctionModel, Guardian, Reply, Risk, ToolCall, tool

    @tool(risk=Risk.READ_ONLY)
    def look(page: int) -> str:
        """Read a page."""
        return f"page {page}"

    def reply(request: Any) -> Reply:
        k = sum(1 for m in request.messages if m.role.value == "assistant") + 1
        return Reply(tool_calls=[ToolCall("look", {"page": k})]) if k < STEPS else Reply(text="read them all")

    # Cut off every 3 steps: each retry continues the same run, whose log grows.
    agent = Agent(name="reader", model=FunctionModel(reply), tools=[look], max_steps=3, guardian=Guardian())
    runner = Runner(store, clock=_clock)
    result = await runner.run(agent, "look at every page, one by one", session_id="s")
    retries = 0
    while result.status.value == "failed":
        kept = await runner.open_leg(agent, "retry", session_id="s")
        fresh = await Runner(store, clock=_clock).open_leg(agent, "retry", session_id="s")
        assert _leg_view(kept) == _leg_view(fresh)
        retries += 1
        result = await runner.retry(agent, "s")
    # (Its last step may wait on the guardian's review of the answer: the legs compared are the point.)
    assert (result.steps, retries) == (STEPS, 3)
