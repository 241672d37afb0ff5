"""Seed 000, stop guards: a guard's rows commit with the reply's step whatever it decides; a guard's message is
always labelled as automated feedback; a sync guard that timed out cannot change the run afterwards."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from stopwise import (
    Agent,
    Continue,
    Fail,
    Message,
    Runner,
    ScriptedModel,
    Stop,
    StopGuard,
    StopGuardContext,
    Store,
    finish_nudge,
)
from stopwise.errors import StopGuardExpired
from stopwise.messages import AUTOMATED_LABEL


def agent(model: Any, guard: Any) -> Agent:
    return Agent("a", "Answer.", model, stop_guard=guard if isinstance(guard, StopGuard) else StopGuard(guard))


def guard_rows(messages: list[Message]) -> list[str]:
    return [m.content for m in messages if m.metadata.get("source") == "stop_guard"]


@pytest.mark.parametrize("verdict", [Stop(), None, Fail("the answer cites nothing")])
async def test_rows_added_with_add_context_commit_whatever_the_guard_decides(verdict: Any, store: Store) -> None:
    def check(ctx: StopGuardContext) -> Any:
        ctx.add_context(["Audit: the answer was accepted as is."])
        return verdict

    runner = Runner(store)
    result = await runner.run(agent(ScriptedModel(["answer", "next"]), check), "q", session_id="s")
    assert result.status == ("failed" if isinstance(verdict, Fail) else "completed")
    assert guard_rows(result.messages) == [AUTOMATED_LABEL + "Audit: the answer was accepted as is."]
    snapshot = await store.load_session("s")
    assert snapshot is not None
    assert guard_rows([m for e in snapshot.entries for m in e.messages]) == guard_rows(result.messages)


async def test_a_continue_refused_for_budget_drops_its_rows_as_documented() -> None:
    def check(ctx: StopGuardContext) -> Any:
        ctx.add_context(["nobody would act on this"])
        return Continue("again")

    result = await Runner().run(agent(ScriptedModel(["answer"]), StopGuard(check, max_continues=0)), "q")
    assert result.completion_reason == "stop_guard_exhausted" and guard_rows(result.messages) == []


async def test_a_user_message_as_guard_context_reaches_the_model_behind_the_automated_label() -> None:
    def check(ctx: StopGuardContext) -> Any:
        if ctx.continues_used == 0:
            ctx.add_context([Message("user", "Check the totals again.")])
            return Continue(context=[Message("user", "Then answer.")])
        return None

    model = ScriptedModel(["first", "second"])
    result = await Runner().run(agent(model, check), "q")
    assert result.output == "second"
    seen = [m.content for m in model.requests[-1].messages if m.metadata.get("source") == "stop_guard"]
    assert seen == [AUTOMATED_LABEL + "Check the totals again.", AUTOMATED_LABEL + "Then answer."]


async def test_a_sync_guard_that_timed_out_has_its_late_writes_discarded(store: Store) -> None:
    release, finished = threading.Event(), threading.Event()
    late: list[BaseException] = []

    def slow(ctx: StopGuardContext) -> Any:
        release.wait(10)
        for write in (
            lambda: ctx.update_state(lambda d: d.update(late=True)),
            lambda: ctx.add_context(["late row"]),
        ):
            try:
                write()
            except StopGuardExpired as exc:
                late.append(exc)
        finished.set()
        return Continue("too late")

    runner = Runner(store)
    result = await runner.run(agent(ScriptedModel(["answer"]), StopGuard(slow, timeout=0.05)), "q", session_id="s")
    assert result.completion_reason == "stop_guard_error"
    release.set()
    assert finished.wait(10)
    assert len(late) == 2
    snapshot = await store.load_session("s")
    assert snapshot is not None and "late" not in snapshot.state
    assert guard_rows([m for e in snapshot.entries for m in e.messages]) == []


async def test_a_finish_nudge_with_no_function_accepts_every_finish() -> None:
    guard = finish_nudge(None)
    result = await Runner().run(agent(ScriptedModel(["answer"]), guard), "q")
    assert (result.status, result.completion_reason, result.output) == ("completed", "final_answer", "answer")
    assert result.stop_guard is not None and result.stop_guard.continues_used == 0
