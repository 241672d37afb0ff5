"""retry() (seed 002 §3): continue a cut-off with a fresh budget from the last committed step."""

from __future__ import annotations

from pathlib import Path

import pytest

from stopwise import (
    Agent,
    FunctionModel,
    Reply,
    RetryNotAllowed,
    RunContext,
    Runner,
    SessionBusy,
    SQLiteStore,
    Store,
    ToolCall,
    tool,
)
from stopwise.models import ModelRequest
from stopwise.result import RunStatus
from stopwise.store.base import RunRecord


@tool
def tick(ctx: RunContext) -> int:
    """Count ticks in state."""
    ctx.state["ticks"] = ctx.state.get("ticks", 0) + 1
    return int(ctx.state["ticks"])


def until(n_tools: int) -> FunctionModel:
    """Calls tick until the log holds n_tools tool results, then answers."""

    def fn(req: ModelRequest) -> Reply:
        done = sum(1 for m in req.messages if m.role == "tool")
        if done < n_tools:
            return Reply(tool_calls=[ToolCall("tick", {}, id=f"c{done}")])
        return Reply(f"ticked {done}")

    return FunctionModel(fn)


def ticker(n_tools: int, max_steps: int = 3) -> Agent:
    return Agent("ticker", "Tick.", until(n_tools), tools=[tick], max_steps=max_steps)


async def test_retry_after_cut_off_continues_with_a_fresh_budget_and_no_message(store: Store) -> None:
    runner = Runner(store)
    a = ticker(5, max_steps=3)
    cut = await runner.run(a, "go", session_id="s")
    assert cut.completion_reason == "max_steps" and cut.state["ticks"] == 3
    done = await runner.retry(a, "s")
    assert done.status == "completed" and done.completion_reason == "final_answer"
    assert done.output == "ticked 5"
    assert done.run_id == cut.run_id
    assert done.steps == 6
    assert done.state["ticks"] == 5
    # The kept log ends in the last tool results; no new user row was needed.
    assert [m.role for m in done.messages].count("user") == 1


def test_retry_sync_continues_a_cut_off_run_from_a_script(tmp_path: Path) -> None:
    with Runner(SQLiteStore(tmp_path / "log.db")) as runner:
        a = ticker(4, max_steps=3)
        cut = runner.run_sync(a, "go", session_id="s")
        done = runner.retry_sync(a, "s")
    assert cut.completion_reason == "max_steps"
    assert done.status == "completed" and done.output == "ticked 4" and done.run_id == cut.run_id


async def test_retry_sync_inside_a_loop_raises_a_clear_error() -> None:
    with pytest.raises(RuntimeError, match=r"await runner\.retry"):
        Runner().retry_sync(ticker(1), "s")


async def test_retry_gets_the_full_budget_again_each_time(store: Store) -> None:
    runner = Runner(store)
    a = ticker(100, max_steps=3)
    first = await runner.run(a, "go", session_id="s")
    second = await runner.retry(a, "s")
    assert second.completion_reason == "max_steps" and second.steps == first.steps + 3
    third = await runner.retry(a, "s")
    assert third.steps == 9 and third.state["ticks"] == 9


async def test_retry_appends_a_message_when_given(store: Store) -> None:
    runner = Runner(store)
    a = ticker(4, max_steps=3)
    await runner.run(a, "go", session_id="s")
    done = await runner.retry(a, "s", message="Focus on ticking.")
    users = [m.content for m in done.messages if m.role == "user"]
    assert users == ["go", "Focus on ticking."]
    assert done.status == "completed"


async def test_retry_restores_the_last_committed_state_not_later_mutations(store: Store) -> None:
    runner = Runner(store)
    a = ticker(4, max_steps=2)
    cut = await runner.run(a, "go", session_id="s", state={"ticks": 0})
    assert cut.state["ticks"] == 2
    done = await runner.retry(a, "s")
    assert done.state["ticks"] == 4


async def test_retrying_a_completed_session_raises_a_clear_error(store: Store) -> None:
    runner = Runner(store)
    a = ticker(1, max_steps=5)
    await runner.run(a, "go", session_id="s")
    with pytest.raises(RetryNotAllowed, match="completed"):
        await runner.retry(a, "s")


async def test_retrying_an_unknown_session_raises(store: Store) -> None:
    with pytest.raises(RetryNotAllowed, match="no run"):
        await Runner(store).retry(ticker(1), "missing")


async def test_retry_with_another_agent_is_refused(store: Store) -> None:
    runner = Runner(store)
    await runner.run(ticker(9, max_steps=1), "go", session_id="s")
    other = Agent("other", "", until(1), tools=[tick])
    with pytest.raises(RetryNotAllowed, match="ticker"):
        await runner.retry(other, "s")


async def test_retry_after_a_model_error_continues_from_the_committed_steps(store: Store) -> None:
    failing = {"on": True}

    def fn(req: ModelRequest) -> Reply:
        done = sum(1 for m in req.messages if m.role == "tool")
        if done == 2 and failing["on"]:
            raise TimeoutError("upstream timeout")
        return Reply(tool_calls=[ToolCall("tick", {})]) if done < 3 else Reply("ok")

    a = Agent("ticker", "", FunctionModel(fn), tools=[tick])
    runner = Runner(store)
    failed = await runner.run(a, "go", session_id="s")
    assert failed.error is not None and failed.error.code == "model_error" and failed.error.retryable
    failing["on"] = False
    done = await runner.retry(a, "s")
    assert done.status == "completed" and done.state["ticks"] == 3 and done.steps == 4


async def test_retry_of_an_interrupted_run_keeps_its_budget(store: Store) -> None:
    """A run whose record still reads running was interrupted: retry resumes it without a fresh budget."""
    runner = Runner(store)
    a = ticker(10, max_steps=4)
    cut = await runner.run(a, "go", session_id="s")
    record = await store.get_run(cut.run_id)
    assert record is not None
    # Simulate the record a crash leaves: running, two steps into a leg that started at step 2.
    await store.update_run(
        RunRecord(record.run_id, "s", "ticker", RunStatus.RUNNING, steps=record.steps, budget_base=2)
    )
    resumed = await runner.retry(a, "s")
    assert resumed.completion_reason == "max_steps"
    assert resumed.steps == 6  # 2 more steps: 4 allowed from base 2


async def test_a_new_run_on_a_session_with_an_interrupted_run_is_refused(store: Store) -> None:
    runner = Runner(store)
    cut = await runner.run(ticker(10, max_steps=1), "go", session_id="s")
    await store.update_run(RunRecord(cut.run_id, "s", "ticker", RunStatus.RUNNING, steps=1))
    with pytest.raises(SessionBusy, match="retry"):
        await runner.run(ticker(10), "again", session_id="s")


async def test_open_leg_opens_run_retry_and_resume_legs_for_a_runtime_to_drive(store: Store) -> None:
    from stopwise._loop import drive

    runner = Runner(store)
    a = ticker(5, max_steps=3)
    leg = await runner.open_leg(a, "run", session_id="s", input="go", run_id="wf-1")
    assert leg.run.run_id == "wf-1" and await store.get_run("wf-1") is None  # nothing written before driving
    events = [e async for e in drive(leg)]
    assert events[-1].result.completion_reason == "max_steps"  # type: ignore[attr-defined]
    retry_leg = await runner.open_leg(a, "retry", session_id="s")
    done = [e async for e in drive(retry_leg)][-1].result  # type: ignore[attr-defined]
    assert done.status == "completed" and done.run_id == "wf-1"
    with pytest.raises(TypeError, match="needs input"):
        await runner.open_leg(a, "run", session_id="t")
    with pytest.raises(RetryNotAllowed):
        await runner.open_leg(a, "retry", session_id="s")


@tool(client=True)
def ask_user(question: str) -> str:
    """Ask the user (the application answers; the body never runs)."""
    raise AssertionError("a client tool's body never runs")


def _ask_on_the_last_step(req: ModelRequest) -> Reply:
    """Step 1 ticks, step 2 (the last allowed) asks the user, then it answers with what the user said."""
    results = [m.content for m in req.messages if m.role == "tool"]
    if not results:
        return Reply(tool_calls=[ToolCall("tick", {}, id="t1")])
    if len(results) == 1:
        return Reply(tool_calls=[ToolCall("ask_user", {"question": "where to?"}, id="q1")])
    return Reply(f"going to {results[-1]}")


async def test_a_retried_resume_cut_off_before_a_model_call_keeps_the_client_tools_result(store: Store) -> None:
    """Seed 002 §3: a client tool called on the last allowed step suspends the run; the resume enters at the cap
    and is cut off before it calls the model; ``retry()`` keeps the resume's entry, the submitted result
    included, and continues from it."""
    agent = Agent("asker", "Plan.", FunctionModel(_ask_on_the_last_step), tools=[tick, ask_user], max_steps=2)
    suspended = await Runner(store).run(agent, "plan a trip", session_id="s")
    assert (suspended.status, suspended.steps, [p.call_id for p in suspended.pending]) == ("suspended", 2, ["q1"])
    cut = await Runner(store).resume(agent, "s", results={"q1": "Oslo"})
    assert cut.completion_reason == "max_steps" and cut.steps == 2  # no model call after the result
    done = await Runner(store).retry(agent, "s")
    assert done.status == "completed" and done.output == "going to Oslo"
    assert done.run_id == suspended.run_id and done.steps == 3
