"""A leg restored from its log (a resume, a retry) reads the guardian's repeat counts back from the newest row only
as far as the repetitions go (``Repeats.of``) instead of folding the whole history: the two must agree, on
histories drawn at random and on a guardian's real log, or a resume would decide on other counts than the run
that wrote the log."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from stopwise import Agent, Approve, Guardian, Reply, Risk, Runner, SQLiteStore, ToolCall, tool
from stopwise._leg import restore_leg
from stopwise._step.guardian import call_keys, run_repeats
from stopwise._suspended import read_suspended
from stopwise.messages import Message, Role
from stopwise.models import FunctionModel, ModelRequest
from stopwise.records import RunLog
from stopwise.stop.repeats import Repeats

CALLS: list[tuple[str, dict[str, Any]]] = [
    ("search", {"q": "oslo forecast"}),
    ("search", {"q": "  oslo   forecast "}),  # the same call, canonically
    ("open", {"url": "https://yr.no/oslo/forecast"}),
    ("read", {"section": "forecast", "n": 1}),
    ("read", {"section": "forecast", "n": 1.0}),
]


@st.composite
def histories(draw: st.DrawFn) -> tuple[list[Message], dict[str, str], int]:
    """Rows of steps of one to three calls (some ids redacted, as a guardrail's log has them), user rows and tool
    rows between them; and where the run starts."""
    rows: list[Message] = []
    keys: dict[str, str] = {}
    for i in range(draw(st.integers(0, 40))):
        kind = draw(st.sampled_from(["step", "step", "step", "user", "tool"]))
        if kind == "user":
            rows.append(Message(Role.USER, "go on"))
        elif kind == "tool":
            rows.append(Message(Role.TOOL, "a result", tool_call_id=f"c{i}.0"))
        else:
            picked = draw(st.lists(st.sampled_from(range(len(CALLS))), min_size=1, max_size=3))
            calls = tuple(ToolCall(CALLS[c][0], CALLS[c][1], id=f"c{i}.{j}") for j, c in enumerate(picked))
            for call in calls:
                if draw(st.integers(0, 9)) == 0:
                    keys[call.id] = draw(st.sampled_from(["redacted call x", "redacted args d1"]))
            rows.append(Message(Role.ASSISTANT, "", calls))
    return rows, keys, draw(st.integers(0, len(rows) + 2))


@settings(max_examples=400, deadline=None)
@given(histories(), st.lists(st.sampled_from(range(len(CALLS))), max_size=6))
def test_the_repeats_read_back_from_the_newest_row_equal_the_fold_from_the_runs_start_and_extend_alike(
    history: tuple[list[Message], dict[str, str], int], more: list[int]
) -> None:
    rows, keys, start = history
    read_back = Repeats.of(rows, keys, start)
    assert read_back == Repeats().then(rows[start:], keys)
    # What the loop then extends step by step stays equal too.
    after = [Message(Role.ASSISTANT, "", (ToolCall(*CALLS[c], id=f"m{k}"),)) for k, c in enumerate(more)]
    assert read_back.then(after, keys) == Repeats().then([*rows[start:], *after], keys)


# A script that repeats one call, spins between two and three calls and breaks off: the log then holds streaks and
# cycles that end at different distances from the newest row.
SCRIPT = [0, 0, 2, 3, 2, 3, 2, 1, 3, 2, 3, 3, 4, 0, 2, 0, 2]
FRESH = itertools.count()
"""Each output new (the guardian's stagnation question reads outputs that bring nothing new)."""


@tool(needs_approval=True, risk=Risk.REVERSIBLE)
async def search(q: str) -> str:
    """Search."""
    return f"results for {q}: {next(FRESH)}"


@tool(name="open", needs_approval=True, risk=Risk.REVERSIBLE)
async def open_page(url: str) -> str:
    """Open a page."""
    return f"page {url}: {next(FRESH)}"


@tool(needs_approval=True, risk=Risk.REVERSIBLE)
async def read(section: str, n: float) -> str:
    """Read a section."""
    return f"{section} part {n}: {next(FRESH)}"


def _reply(request: ModelRequest) -> Reply:
    k = sum(1 for m in request.messages if m.role is Role.ASSISTANT)
    if k < len(SCRIPT):
        name, args = CALLS[SCRIPT[k]]
        return Reply(tool_calls=[ToolCall(name, args)])
    return Reply(text="done")


async def test_a_resumed_guardian_leg_counts_the_repeats_the_whole_history_fold_counts(tmp_path: Path) -> None:
    agent = Agent(
        name="spinner",
        model=FunctionModel(_reply),
        tools=[search, open_page, read],
        max_steps=len(SCRIPT) + 5,
        guardian=Guardian(),
    )
    store = SQLiteStore(str(tmp_path / "log.db"))
    runner = Runner(store=store)
    result = await runner.run(agent, "search the oslo forecast, open it on yr.no and read the forecast", session_id="s")
    checked, streaks, cycles = 0, set(), 0
    while result.status.value == "suspended":
        snapshot = await store.load_session("s")
        assert snapshot is not None and snapshot.last_run is not None
        run = snapshot.last_run
        run_log = RunLog.of(e for e in snapshot.entries if e.run_id == run.run_id)
        read_suspended(snapshot, run, run_log)
        leg = restore_leg(agent, store, runner, snapshot, run, fresh_budget=False, run_log=run_log)
        whole = Repeats().then(leg.messages[leg.run_start :], call_keys(leg))
        streak, cycle = run_repeats(leg, [])
        assert (streak, cycle) == (whole.streak.count, whole.cycles.latest)
        assert leg.repeat_rows.value == whole  # what the leg's next steps extend
        checked += 1
        streaks.add(streak)
        cycles += cycle is not None
        result = await runner.resume(agent, "s", {p.call_id: Approve() for p in result.pending})
    await store.close()
    # The run was resumed along the script, and the logs checked held streaks and cycles, not only single calls.
    assert checked >= 10 and max(streaks) >= 2 and cycles >= 2
