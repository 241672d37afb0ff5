"""Runner.fork: a run continued from an explicit earlier step of its log, in a new session (seed 002.16), the
source log untouched; a rewind (a fork at an earlier step) refunds the stop guard's continues it removes
(seed 000.22)."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path
from typing import Any, cast

import pytest

from stopwise import (
    Agent,
    Continue,
    FunctionModel,
    Reply,
    RetryNotAllowed,
    RunContext,
    Runner,
    SQLiteStore,
    StopGuard,
    StopGuardContext,
    StopGuardReport,
    Store,
    ToolCall,
    tool,
)
from stopwise.errors import ForkNotAllowed, RunLeased, StoreError
from stopwise.models import ModelRequest
from stopwise.records import ForkRecord, parse_records
from stopwise.store.base import CommitsMany, EntryKind, LogEntry, RunRecord
from test_stored_logs import FIXTURES, looking_up, lookup


@tool
def tick(ctx: RunContext) -> int:
    """Count ticks in state."""
    ctx.state["ticks"] = ctx.state.get("ticks", 0) + 1
    return int(ctx.state["ticks"])


class Ticker:
    """Calls tick until the history holds ``n`` tool results, then answers; keeps every request."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.requests: list[ModelRequest] = []

    def __call__(self, req: ModelRequest) -> Reply:
        self.requests.append(req)
        done = sum(1 for m in req.messages if m.role == "tool")
        if done < self.n:
            return Reply(tool_calls=[ToolCall("tick", {}, id=f"c{done}")])
        return Reply(f"ticked {done}")


def ticker(model: Ticker, max_steps: int = 10) -> Agent:
    return Agent("ticker", "Tick.", FunctionModel(model), tools=[tick], max_steps=max_steps)


async def test_fork_continues_the_run_from_an_explicit_earlier_step_in_a_new_session(store: Store) -> None:
    runner = Runner(store)
    model = Ticker(4)
    source = await runner.run(ticker(model), "go", session_id="s")
    assert source.status == "completed" and source.steps == 5
    before = await store.load_session("s")
    assert before is not None
    model.requests.clear()

    forked = await runner.fork(ticker(model), "s", at_step=2, new_session_id="s-fork")

    # The forked run's first model call is step 3, and it sees the history through step 2's tool result only.
    first = model.requests[0]
    assert first.step == 3
    assert [m.content for m in first.messages if m.role == "tool"] == ["1", "2"]
    assert forked.session_id == "s-fork" and forked.run_id != source.run_id
    assert forked.status == "completed" and forked.output == "ticked 4" and forked.steps == 5
    # The source session is untouched: same entries, same run record.
    after = await store.load_session("s")
    assert after is not None and after.entries == before.entries and after.last_run == before.last_run
    # The fork's log: the source's entries through step 2's commit, then the note recording where it came from.
    fork_log = await store.load_session("s-fork")
    assert fork_log is not None
    # A tool step commits as its write-ahead intent, then its settle: the cut is step 2's settle.
    cut = next(e.seq for e in before.entries if e.kind is EntryKind.SETTLE and e.step == 2)
    assert cut == 5
    copied = [(e.seq, e.kind, e.step, e.messages, e.records) for e in before.entries if e.seq <= cut]
    assert [(e.seq, e.kind, e.step, e.messages, e.records) for e in fork_log.entries[:cut]] == copied
    note = fork_log.entries[cut]
    assert note.kind is EntryKind.NOTE
    assert parse_records(note.records) == (ForkRecord("s", source.run_id, 2, cut),)
    assert {e.run_id for e in fork_log.entries} == {forked.run_id}
    assert [r.run_id for r in await store.list_runs("s-fork")] == [forked.run_id]


async def test_a_rewind_refunds_the_continues_it_removes(store: Store) -> None:
    seen: list[tuple[int, int, int]] = []

    def guard(ctx: StopGuardContext) -> Continue:
        seen.append((ctx.step, ctx.continues_used, ctx.continues_left))
        return Continue("try again")

    a = Agent("g", "", FunctionModel(lambda r: Reply(f"answer {r.step}")), stop_guard=StopGuard(guard, max_continues=2))
    runner = Runner(store)
    source = await runner.run(a, "q", session_id="s")
    assert source.completion_reason == "stop_guard_exhausted"
    assert source.stop_guard == StopGuardReport(continues_used=2, exhausted=True)
    assert seen == [(1, 0, 2), (2, 1, 1), (3, 2, 0)]
    seen.clear()

    # Rewind to step 1: step 2's continue is removed and refunded; step 1's stays counted.
    rewound = await runner.fork(a, "s", at_step=1)
    assert seen == [(2, 1, 1), (3, 2, 0)]
    assert rewound.completion_reason == "stop_guard_exhausted"
    assert rewound.stop_guard == StopGuardReport(continues_used=2, exhausted=True)


async def test_a_fork_keeps_the_step_budget_it_had_at_that_step(store: Store) -> None:
    runner = Runner(store)
    model = Ticker(10)
    cut = await runner.run(ticker(model, max_steps=3), "go", session_id="s")
    assert cut.completion_reason == "max_steps" and cut.steps == 3
    forked = await runner.fork(ticker(model, max_steps=3), "s", at_step=1)
    # Restored as given: one step was used at step 1, so two more are left before the cap.
    assert forked.completion_reason == "max_steps" and forked.steps == 3
    assert [r.step for r in model.requests[-2:]] == [2, 3]


async def test_a_fork_counts_max_steps_from_the_leg_its_step_belongs_to_across_retries(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "log.db")
    runner = Runner(store)
    model = Ticker(100)
    agent = ticker(model, max_steps=3)
    cut = await runner.run(agent, "go", session_id="s")
    assert cut.completion_reason == "max_steps" and cut.steps == 3
    retried = await runner.retry(agent, "s")
    assert retried.completion_reason == "max_steps" and retried.steps == 6
    reopened = Runner(SQLiteStore(tmp_path / "log.db"))  # what a later process reads from the file

    # Step 1 belongs to the first leg (budget from 0): two more steps, cut at 3 as the source was.
    first_leg = await reopened.fork(agent, "s", at_step=1)
    assert first_leg.completion_reason == "max_steps" and first_leg.steps == 3
    # Step 4 belongs to the retry leg (budget from 3): cut at 6.
    retry_leg = await reopened.fork(agent, "s", at_step=4)
    assert retry_leg.completion_reason == "max_steps" and retry_leg.steps == 6
    # At the step a leg was cut on, a fork starts afresh, as retry() from there does.
    at_cut = await reopened.fork(agent, "s", at_step=3)
    assert at_cut.completion_reason == "max_steps" and at_cut.steps == 6
    at_last_cut = await reopened.fork(agent, "s", at_step=6)
    assert at_last_cut.completion_reason == "max_steps" and at_last_cut.steps == 9
    # The forked run records the base its budget counts from.
    records = {r.session_id: r for s in (first_leg, retry_leg) for r in await store.list_runs(s.session_id)}
    assert records[first_leg.session_id].budget_base == 0 and records[retry_leg.session_id].budget_base == 3


async def test_a_fork_of_a_cut_run_that_was_not_retried_keeps_its_first_legs_budget(store: Store) -> None:
    runner = Runner(store)
    agent = ticker(Ticker(100), max_steps=3)
    await runner.run(agent, "go", session_id="s")
    assert (await runner.fork(agent, "s", at_step=2)).steps == 3
    assert (await runner.fork(agent, "s", at_step=3)).steps == 6


async def test_a_fork_into_the_last_leg_after_a_failure_outside_any_step_counts_from_that_retry(
    tmp_path: Path,
) -> None:
    store = SQLiteStore(tmp_path / "log.db")
    runner = Runner(store)
    ticks = Ticker(100)
    calls = 0

    def fails_once_at_step_2(req: ModelRequest) -> Reply:
        nonlocal calls
        calls += 1
        if req.step == 2 and calls == 2:
            raise RuntimeError("provider down")
        return ticks(req)

    agent = Agent("ticker", "Tick.", FunctionModel(fails_once_at_step_2), tools=[tick], max_steps=3)
    failed = await runner.run(agent, "go", session_id="s")
    assert failed.status == "failed" and failed.steps == 1  # no step entry records this leg's end
    retried = await runner.retry(agent, "s")
    assert retried.completion_reason == "max_steps" and retried.steps == 4
    # Step 2 is in the retry leg, which the run record names: its budget counts from step 1.
    forked = await runner.fork(agent, "s", at_step=2)
    assert forked.completion_reason == "max_steps" and forked.steps == 4


async def test_a_fork_starts_from_the_state_given_else_the_sources_current_state(store: Store) -> None:
    runner = Runner(store)
    await runner.run(ticker(Ticker(3)), "go", session_id="s")
    kept = await runner.fork(ticker(Ticker(3)), "s", at_step=1)
    assert kept.state["ticks"] == 3 + 2  # the source's current state, then the fork's two ticks
    given = await runner.fork(ticker(Ticker(3)), "s", at_step=1, state={"ticks": 1})
    assert given.state["ticks"] == 3


async def test_a_fork_appends_a_message_as_new_input(store: Store) -> None:
    runner = Runner(store)
    model = Ticker(2)
    await runner.run(ticker(model), "go", session_id="s")
    model.requests.clear()
    await runner.fork(ticker(model), "s", at_step=1, message="Tick once more.")
    assert model.requests[0].messages[-1].content == "Tick once more."


async def test_a_fork_is_refused_at_a_step_the_run_has_not_committed(store: Store) -> None:
    runner = Runner(store)
    await runner.run(ticker(Ticker(2)), "go", session_id="s")
    with pytest.raises(ForkNotAllowed, match=r"no committed step 7 \(its committed steps are 0\.\.3\)"):
        await runner.fork(ticker(Ticker(2)), "s", at_step=7, new_session_id="f")
    with pytest.raises(ForkNotAllowed, match="at_step must be an int >= 0"):
        await runner.fork(ticker(Ticker(2)), "s", at_step=-1, new_session_id="f")
    assert await store.load_session("f") is None


async def test_a_fork_is_refused_at_a_step_that_suspended_for_approval(store: Store) -> None:
    @tool(needs_approval=True)
    def deploy() -> str:
        """Deploy."""
        return "deployed"

    model = FunctionModel(lambda r: Reply(tool_calls=[ToolCall("deploy", {})]) if r.step == 1 else Reply("ok"))
    a = Agent("d", "", model, tools=[deploy])
    runner = Runner(store)
    suspended = await runner.run(a, "go", session_id="s")
    assert suspended.status == "suspended"
    with pytest.raises(ForkNotAllowed, match=r"step 1 .* suspended for approval"):
        await runner.fork(a, "s", at_step=1)
    # Step 0 (before the first model call) can be forked: the fork asks the model again.
    again = await runner.fork(a, "s", at_step=0)
    assert again.status == "suspended" and again.session_id != "s"


async def test_a_fork_into_an_existing_session_or_of_another_agents_run_is_refused(store: Store) -> None:
    runner = Runner(store)
    await runner.run(ticker(Ticker(1)), "go", session_id="s")
    await runner.run(ticker(Ticker(1)), "go", session_id="taken")
    with pytest.raises(ForkNotAllowed, match="'taken' exists"):
        await runner.fork(ticker(Ticker(1)), "s", at_step=1, new_session_id="taken")
    other = Agent("other", "", FunctionModel(lambda r: Reply("x")))
    with pytest.raises(RetryNotAllowed, match="belongs to agent 'ticker'"):
        await runner.fork(other, "s", at_step=1)


class _Racing(SQLiteStore):
    """A real SQLite store where another runner starts session 'taken' just after the fork found it free (the
    moment between ``Runner.fork``'s check and its write, as a second process would)."""

    raced = False

    async def load_session(self, session_id: str) -> Any:
        snapshot = await super().load_session(session_id)
        if session_id == "taken" and not self.raced:
            self.raced = True
            async with Runner(SQLiteStore(self.path)) as other:
                await other.run(ticker(Ticker(1)), "go", session_id="taken")
        return snapshot


async def test_a_fork_into_a_session_another_writer_created_meanwhile_is_refused_as_existing(tmp_path: Path) -> None:
    runner = Runner(_Racing(tmp_path / "log.db"))
    await runner.run(ticker(Ticker(1)), "go", session_id="s")
    with pytest.raises(ForkNotAllowed, match="'taken' exists"):
        await runner.fork(ticker(Ticker(1)), "s", at_step=1, new_session_id="taken")
    taken = await runner.store.load_session("taken")
    # The other run's session, untouched: none of the fork's copy went in.
    assert taken is not None and taken.last_run is not None and taken.last_run.status == "completed"
    assert not any(isinstance(r, ForkRecord) for e in taken.entries for r in parse_records(e.records))
    await runner.close()


def _refuse_entries_after_the_first(path: Path) -> None:
    """A trigger in the SQLite file that fails the insert of session 'f''s second entry and of every later one,
    inside the fork's own transaction (a real database failure, not a store method overridden)."""
    with sqlite3.connect(path) as db:
        db.execute(
            "CREATE TRIGGER refuse BEFORE INSERT ON log WHEN NEW.session_id = 'f' AND NEW.seq > 1 "
            "BEGIN SELECT RAISE(ABORT, 'disk full'); END"
        )


async def test_a_fork_whose_write_fails_midway_leaves_no_new_session(tmp_path: Path) -> None:
    path = tmp_path / "log.db"
    runner = Runner(SQLiteStore(path))
    await runner.run(ticker(Ticker(3)), "go", session_id="s")
    before = await runner.store.load_session("s")
    _refuse_entries_after_the_first(path)
    with pytest.raises(StoreError, match="disk full"):
        await runner.fork(ticker(Ticker(3)), "s", at_step=2, new_session_id="f")
    # The first entry went in before the failure, in the same transaction: rolled back with it.
    assert await runner.store.load_session("f") is None
    assert await runner.store.load_session("s") == before
    with sqlite3.connect(path) as db:
        db.execute("DROP TRIGGER refuse")
    again = await runner.fork(ticker(Ticker(3)), "s", at_step=2, new_session_id="f")
    assert again.status == "completed" and again.output == "ticked 3"
    await runner.close()


class _OwnStore:
    """A ``Store`` of a user's own that has no ``commit_many`` (it forwards every other method to a real SQLite
    store); with ``fail_on_note`` its disk 'fills up' when a fork's note is committed."""

    def __init__(self, inner: SQLiteStore, *, fail_on_note: bool = False) -> None:
        self.inner = inner
        self.fail_on_note = fail_on_note

    def __getattr__(self, name: str) -> Any:
        if name == "commit_many":
            raise AttributeError(name)
        return getattr(self.inner, name)

    async def commit(self, entry: LogEntry, state: Any, run: RunRecord | None = None) -> None:
        if self.fail_on_note and any(isinstance(r, ForkRecord) for r in parse_records(entry.records)):
            raise StoreError("disk full")
        await self.inner.commit(entry, state, run)


async def test_a_store_without_commit_many_forks_entry_by_entry(tmp_path: Path) -> None:
    own = _OwnStore(SQLiteStore(tmp_path / "log.db"))
    assert not isinstance(own, CommitsMany)
    runner = Runner(cast(Store, own))
    await runner.run(ticker(Ticker(3)), "go", session_id="s")
    forked = await runner.fork(ticker(Ticker(3)), "s", at_step=1, new_session_id="f")
    assert forked.status == "completed" and forked.output == "ticked 3"
    source = await own.inner.load_session("s")
    copy = await own.inner.load_session("f")
    assert source is not None and copy is not None
    # The copy through step 1, the note, then the forked run's own steps.
    (record,) = [r for e in copy.entries for r in parse_records(e.records) if isinstance(r, ForkRecord)]
    assert record == ForkRecord("s", source.entries[0].run_id, 1, record.source_seq)
    copied = copy.entries[: record.source_seq]
    assert [e.messages for e in copied] == [e.messages for e in source.entries[: record.source_seq]]
    await runner.close()


async def test_a_half_fork_written_entry_by_entry_is_refused_by_retry(tmp_path: Path) -> None:
    """What an earlier stopwise left when a fork was cut short (it wrote entry by entry, as a store without
    ``commit_many`` still does): the copy without its note. It reads as incomplete and stays refused."""
    path = tmp_path / "log.db"
    own = _OwnStore(SQLiteStore(path), fail_on_note=True)
    runner = Runner(cast(Store, own))
    await runner.run(ticker(Ticker(3)), "go", session_id="s")
    with pytest.raises(StoreError, match="disk full"):
        await runner.fork(ticker(Ticker(3)), "s", at_step=2, new_session_id="f")
    await runner.close()
    reopened = Runner(SQLiteStore(path), lease_seconds=1e-9)
    half = await reopened.store.load_session("f")
    assert half is not None and half.entries  # the copy through step 2, and no note
    assert not any(isinstance(r, ForkRecord) for e in half.entries for r in parse_records(e.records))
    with pytest.raises(ForkNotAllowed, match="fork of session 's' at step 2 was not completely written"):
        await reopened.retry(ticker(Ticker(3)), "f")
    await reopened.close()


class _LostAfterTheFork(SQLiteStore):
    """A real SQLite store whose connection drops once, right after the fork was written."""

    lost = False

    async def load_session(self, session_id: str) -> Any:
        if session_id == "f" and not self.lost and await super().load_session(session_id) is not None:
            self.lost = True
            raise StoreError("connection lost")
        return await super().load_session(session_id)


async def test_a_fork_written_but_never_driven_is_continued_by_retry_once_its_lease_lapsed(tmp_path: Path) -> None:
    clock = {"now": 1000.0}
    store = _LostAfterTheFork(tmp_path / "log.db")
    runner = Runner(store, clock=lambda: clock["now"], lease_seconds=10)
    await runner.run(ticker(Ticker(3)), "go", session_id="s")
    with pytest.raises(StoreError, match="connection lost"):
        await runner.fork(ticker(Ticker(3)), "s", at_step=1, new_session_id="f")
    model = Ticker(3)
    with pytest.raises(RunLeased):
        await runner.retry(ticker(model), "f")
    clock["now"] += 60
    done = await runner.retry(ticker(model), "f")
    assert done.status == "completed" and done.output == "ticked 3"
    assert model.requests[0].step == 2
    await runner.close()


@pytest.mark.parametrize("version", sorted(FIXTURES))
async def test_a_session_an_earlier_version_wrote_forks_as_before(tmp_path: Path, version: int) -> None:
    db = tmp_path / "old.db"
    shutil.copyfile(FIXTURES[version], db)
    runner = Runner(SQLiteStore(db))
    before = await runner.store.load_session("cutoff")
    looper = Agent("looper", "Look up three items.", looking_up(3), tools=[lookup], max_steps=5)
    forked = await runner.fork(looper, "cutoff", at_step=1, new_session_id="again")
    assert forked.status == "completed" and forked.output == "Answer: found item 1; found item 2; found item 3"
    assert forked.steps == 4  # step 1 copied, then two more lookups and the answer
    assert await runner.store.load_session("cutoff") == before
    await runner.close()
