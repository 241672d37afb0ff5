"""Stored logs never break: a database written by an older stopwise opens, migrates, replays and continues.

``fixtures/log_v3.db`` was written by the code of schema version 3, ``fixtures/log_v5.db`` by the code of schema
version 5 (before the lean log: whole guardian decision records, messages with every field), both by
``fixtures/make_log_v3.py`` (it says which commits and what each session holds); every test runs on both. Every
test works on a copy, so the fixtures themselves stay as they were written.
The assertions are about what a user sees (statuses, reasons, outputs, transcripts, the command line), never
about the shape of the stored records, which later versions are free to change as long as old logs still read.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from stopwise import (
    Agent,
    FunctionModel,
    Reply,
    RetryNotAllowed,
    Role,
    Runner,
    SQLiteStore,
    ToolCall,
    decode_tool_result,
    tool,
    transcript,
)
from stopwise.approvals import Approve
from stopwise.guardian import Guardian
from stopwise.models import ModelRequest

FIXTURES = {3: Path(__file__).parent / "fixtures" / "log_v3.db", 5: Path(__file__).parent / "fixtures" / "log_v5.db"}
"""The stored logs, by the schema version of the code that wrote them."""

# How every run of the fixture ended: (session, agent, status, completion reason, steps), oldest session first.
RUNS = [
    ("completed", "helper", "completed", "final_answer", 2),
    ("cutoff", "looper", "failed", "max_steps", 2),
    ("suspended", "banker", "suspended", "awaiting_approval", 1),
    ("approved", "banker", "completed", "final_answer", 2),
    ("rejected", "banker", "completed", "final_answer", 2),
    ("terminated", "banker", "cancelled", "approval_terminated", 1),
    ("guardian", "watched", "completed", "final_answer", 5),
    ("guardian_escalated", "watched_risky", "suspended", "awaiting_approval", 1),
    ("stop_guard", "cited", "completed", "final_answer", 2),
    ("guardrails", "railed", "completed", "final_answer", 3),
    ("input_blocked", "railed_input", "completed", "guardrail_input", 0),
    ("forced", "structured", "completed", "output", 2),
    ("parent/c-child", "researcher", "completed", "final_answer", 2),
    ("parent", "lead", "completed", "final_answer", 2),
]

# Where the schema-5 log differs: by then the rule evaluator's risk gate let the lookup of undeclared risk run, so
# the same code added a session whose undeclared tool looks destructive, and that one escalated.
RUNS_V5 = {"guardian_escalated": ("guardian_escalated", "watched_risky", "completed", "final_answer", 3)}
ESCALATED_V5 = ("guardian_escalated_destructive", "watched_destructive", "suspended", "awaiting_approval", 1)


def runs(db: Path) -> list[tuple[str, str, str, str, int]]:
    """How every run of the log at ``db`` (a copy of a fixture, named for its version) ended."""
    if db.name != "log_v5.db":
        return RUNS
    return [*(RUNS_V5.get(run[0], run) for run in RUNS), ESCALATED_V5]


# The final answer each completed run returned to its caller.
OUTPUTS = {
    "completed": "Answer: found item 1",
    "approved": "Done: sent 50 to bob",
    "rejected": "Done: {'error': 'Rejected by the reviewer: Not today.'}",
    "guardian": "Answer: results for item 1; results for item 2; results for item 3; results for item 4",
    "stop_guard": "Paris, per the atlas (sources: atlas).",
    "forced": {"answer": "42", "confidence": 0.9},
    "parent/c-child": "Answer: found item 1",
    "parent": "The researcher said: Answer: found item 1",
}


# The agents of the fixture, redefined here as a user would (same names, same tools, same behaviour): the
# script that wrote the log is never imported, it belongs to the commit that made it.
@tool
def lookup(q: str) -> str:
    """Look something up."""
    return f"found {q}"


@tool
def delete_item(q: str) -> str:
    """Delete an item."""
    return f"deleted {q}"


@tool(needs_approval=True)
def transfer(to: str, amount: int) -> str:
    """Move money."""
    return f"sent {amount} to {to}"


def _tool_rows(request: ModelRequest) -> list[str]:
    return [str(decode_tool_result(m)) for m in request.messages if m.role == "tool"]


def looking_up(until: int, tool_name: str = "lookup") -> FunctionModel:
    def reply(request: ModelRequest) -> Reply:
        rows = _tool_rows(request)
        if len(rows) < until:
            call = ToolCall(tool_name, {"q": f"item {len(rows) + 1}"}, id=f"c{len(rows) + 1}")
            return Reply(tool_calls=[call])
        return Reply("Answer: " + "; ".join(rows))

    return FunctionModel(reply)


def paying(request: ModelRequest) -> Reply:
    rows = _tool_rows(request)
    if not rows:
        return Reply(tool_calls=[ToolCall("transfer", {"to": "bob", "amount": 50}, id="c-transfer")])
    return Reply("Done: " + "; ".join(rows))


BANKER = Agent("banker", "Move money carefully.", FunctionModel(paying), tools=[transfer])


@pytest.fixture(params=sorted(FIXTURES), ids=lambda v: f"v{v}")
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    """A copy of an old log: migrations write to it, the fixture stays as the old code wrote it."""
    copy = tmp_path / f"log_v{request.param}.db"
    shutil.copyfile(FIXTURES[request.param], copy)
    return copy


@pytest.fixture
async def store(db: Path) -> AsyncIterator[SQLiteStore]:
    s = SQLiteStore(db)
    yield s
    await s.close()


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "stopwise", *args], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("version", sorted(FIXTURES))
def test_each_fixture_is_an_unmigrated_log_of_its_schema_version(version: int) -> None:
    # Read from the file's header (user_version, bytes 60-63): opening it with SQLite, even read-only, would
    # leave WAL files beside it.
    assert int.from_bytes(FIXTURES[version].read_bytes()[60:64], "big") == version


async def test_an_old_log_opens_migrates_and_opens_again(db: Path) -> None:
    first = SQLiteStore(db)
    assert first.schema_version >= 3
    await first.close()
    again = SQLiteStore(db)  # a migrated log opens like any other
    assert again.schema_version == first.schema_version
    await again.close()


async def test_every_old_run_reads_back_with_its_status_reason_and_output(db: Path, store: SQLiteStore) -> None:
    sessions = await store.list_sessions(limit=1000)
    assert sorted(sessions) == sorted(s for s, *_ in runs(db))
    for session, agent, status, reason, steps in runs(db):
        (run,) = await store.list_runs(session)
        assert (run.agent, run.status, run.completion_reason, run.steps) == (agent, status, reason, steps), session
        if session in OUTPUTS:
            assert run.output == OUTPUTS[session], session
    cutoff = (await store.list_runs("cutoff"))[0]
    assert cutoff.error is not None and cutoff.error.code == "max_steps_exhausted"
    terminated = (await store.list_runs("terminated"))[0]
    assert terminated.error is not None and "fraud suspected" in terminated.error.message


async def test_every_old_session_loads_with_its_transcript(store: SQLiteStore) -> None:
    for session, *_ in RUNS:
        snapshot = await store.load_session(session)
        assert snapshot is not None and snapshot.last_run is not None, session
        rows = snapshot.messages()
        if session == "input_blocked":
            assert rows == []  # a blocked input never reaches the log
        else:
            assert rows[0].role is Role.USER, session
    shown = transcript((await store.load_session("completed")).messages())  # type: ignore[union-attr]
    assert [(m.role, m.content) for m in shown if m.content] == [
        (Role.USER, "what is 1?"),
        (Role.TOOL, "found item 1"),
        (Role.ASSISTANT, "Answer: found item 1"),
    ]


async def test_old_guardrail_and_stop_guard_effects_show_in_the_transcripts(store: SQLiteStore) -> None:
    rails = (await store.load_session("guardrails")).messages()  # type: ignore[union-attr]
    results = [decode_tool_result(m) for m in rails if m.role is Role.TOOL]
    assert results[0] == "found item 1 (safe)"  # the tool-call rewrite ran the call with the new args
    assert "no_secrets" in str(results[1]) and "result mentions a secret" in str(results[1])  # the block
    guarded = (await store.load_session("stop_guard")).messages()  # type: ignore[union-attr]
    feedback = [m for m in guarded if m.metadata.get("hidden")]
    assert len(feedback) == 1 and "Cite your sources." in feedback[0].content
    assert [m.content for m in transcript(guarded) if m.role is Role.ASSISTANT] == [
        "Paris.",
        "Paris, per the atlas (sources: atlas).",
    ]
    (blocked,) = await store.list_runs("input_blocked")
    assert blocked.detail == "asks for a password"


def test_stopwise_runs_lists_every_old_run(db: Path) -> None:
    result = cli("runs", "--db", str(db), "--limit", "100")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()[2:]
    seen = {(line.split()[1], line.split()[3]) for line in lines}
    assert seen == {(session, status) for session, _, status, *_ in runs(db)}


def test_replay_agrees_with_every_old_guardian_decision(db: Path) -> None:
    result = cli("replay", str(db))
    assert result.returncode == 0, result.stderr
    count = 15 if db.name == "log_v5.db" else 10
    assert result.stdout.strip() == f"replayed {count} decisions: every outcome agrees with the log"


def test_guardian_stats_reads_an_old_log(db: Path) -> None:
    result = cli("guardian", "stats", str(db))
    assert result.returncode == 0, result.stderr
    risk = next(line for line in result.stdout.splitlines() if line.startswith("risk"))
    if db.name == "log_v5.db":
        assert result.stdout.splitlines()[0] == "15 decisions: continue 14, escalate 1"
        assert risk.split()[1:5] == ["7", "0", "1", "1"]  # asked 7 times, held and escalated once
    else:
        assert result.stdout.splitlines()[0] == "10 decisions: continue 9, escalate 1"
        assert risk.split()[1:5] == ["5", "0", "1", "1"]  # asked 5 times, held and escalated once


async def test_retry_continues_an_old_cut_off_run_to_completion(store: SQLiteStore) -> None:
    looper = Agent("looper", "Look up three items.", looking_up(3), tools=[lookup], max_steps=2)
    result = await Runner(store).retry(looper, "cutoff")
    assert result.status == "completed" and result.completion_reason == "final_answer"
    assert result.output == "Answer: found item 1; found item 2; found item 3"
    assert result.steps == 4  # the two steps of the old leg, then two more with a fresh budget
    (run,) = await store.list_runs("cutoff")
    assert run.run_id == result.run_id and run.status == "completed"


async def test_resume_approves_an_old_suspended_call_and_the_run_completes(store: SQLiteStore) -> None:
    (run,) = await store.list_runs("suspended")
    result = await Runner(store).resume(BANKER, "suspended", {"c-transfer": Approve()})
    assert result.run_id == run.run_id
    assert result.status == "completed" and result.output == "Done: sent 50 to bob"
    rows = [decode_tool_result(m) for m in result.messages if m.role is Role.TOOL]
    assert rows == ["sent 50 to bob"]


async def test_resume_settles_an_old_guardian_escalation(db: Path, store: SQLiteStore) -> None:
    # The code of schema 5 let an undeclared read-like tool run, so its log's escalation is on a destructive one.
    if db.name == "log_v5.db":
        name, session, tool_, found = "watched_destructive", "guardian_escalated_destructive", delete_item, "deleted"
    else:
        name, session, tool_, found = "watched_risky", "guardian_escalated", lookup, "found"
    watched = Agent(name, "Look up two items.", looking_up(2, tool_.name), tools=[tool_], guardian=Guardian())
    result = await Runner(store).resume(watched, session, {"c1": Approve()})
    # The risk gate held call c1 for a human; approved, it ran and the run went on (the next call asks again).
    assert result.steps >= 2
    assert decode_tool_result(next(m for m in result.messages if m.role is Role.TOOL)) == f"{found} item 1"


async def test_replay_agrees_over_old_and_new_decisions_in_one_log(db: Path) -> None:
    store = SQLiteStore(db)
    watched = Agent("watched", "Search.", looking_up(1), tools=[lookup], guardian=Guardian())
    await Runner(store).run(watched, "look one item up", session_id="fresh")
    await store.close()
    result = cli("replay", str(db))
    assert result.returncode == 0, result.stderr
    assert "every outcome agrees with the log" in result.stdout
    assert int(result.stdout.split()[1]) > 10  # the old decisions and the new ones


async def test_a_new_run_on_an_old_session_sees_its_history(store: SQLiteStore) -> None:
    seen: list[str] = []

    def recall(request: ModelRequest) -> Reply:
        seen.extend(m.content for m in request.messages if m.role is Role.USER)
        return Reply("You asked about 1 before.")

    result = await Runner(store).run(
        Agent("helper", "Answer.", FunctionModel(recall)), "and 2?", session_id="completed"
    )
    assert result.status == "completed" and result.output == "You asked about 1 before."
    assert seen == ["what is 1?", "and 2?"]
    assert [r.status for r in await store.list_runs("completed")] == ["completed", "completed"]


async def test_an_old_completed_run_still_refuses_retry(store: SQLiteStore) -> None:
    with pytest.raises(RetryNotAllowed, match="completed"):
        await Runner(store).retry(Agent("helper", "Answer.", looking_up(1), tools=[lookup]), "completed")
