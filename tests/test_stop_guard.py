"""Stop guards (seed 000) and finish nudges (seed 004): one test per rule."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pydantic import BaseModel

from stopwise import (
    Agent,
    ConfigError,
    Continue,
    Fail,
    FinishEvidence,
    FunctionModel,
    Message,
    Reply,
    RunContext,
    Runner,
    ScriptedModel,
    Stop,
    StopGuard,
    StopGuardContext,
    StopGuardEvent,
    StopGuardReport,
    StopReason,
    Store,
    ToolCall,
    finish_nudge,
    has_tool_call,
    tool,
    transcript,
)
from stopwise.messages import AUTOMATED_LABEL
from stopwise.models import ModelRequest

LABEL = AUTOMATED_LABEL


@tool
def lookup(q: str) -> str:
    """Look something up."""
    return f"found {q}"


@tool
def note(ctx: RunContext) -> str:
    """Count notes in state."""
    ctx.state["notes"] = ctx.state.get("notes", 0) + 1
    return "noted"


class Calls:
    """A guard that records every consultation and answers from a list (the last answer repeats)."""

    def __init__(self, *verdicts: Any) -> None:
        self.verdicts = list(verdicts)
        self.contexts: list[StopGuardContext] = []

    def __call__(self, ctx: StopGuardContext) -> Any:
        self.contexts.append(ctx)
        verdict = self.verdicts[min(len(self.contexts), len(self.verdicts)) - 1]
        return verdict(ctx) if callable(verdict) else verdict


def agent(model: Any, guard: Any = None, **kw: Any) -> Agent:
    sg = guard if isinstance(guard, StopGuard) or guard is None else StopGuard(guard)
    return Agent("g", "Answer with sources.", model, tools=[lookup, note], stop_guard=sg, **kw)


def lookup_call() -> Reply:
    return Reply(tool_calls=[ToolCall("lookup", {"q": "x"})])


# 1. configuration


def test_stop_guard_defaults_match_the_spec() -> None:
    g = StopGuard(lambda ctx: None)
    assert (g.max_continues, g.timeout, g.on_error) == (3, 30.0, "stop")


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"max_continues": -1}, "max_continues"),
        ({"max_continues": True}, "max_continues"),
        ({"timeout": 0}, "timeout"),
        ({"on_error": "explode"}, "on_error"),
    ],
)
def test_invalid_stop_guard_configuration_names_the_field(kwargs: dict[str, Any], field: str) -> None:
    with pytest.raises(ConfigError) as info:
        StopGuard(lambda ctx: None, **kwargs)
    assert field in info.value.field


def test_agent_refuses_a_stop_guard_that_is_not_one() -> None:
    with pytest.raises(ConfigError, match="stop_guard"):
        Agent("g", "", ScriptedModel([]), stop_guard=lambda ctx: None)  # type: ignore[arg-type]


async def test_async_guard_is_awaited() -> None:
    async def check(ctx: StopGuardContext) -> Any:
        await asyncio.sleep(0)
        return Fail("async says no")

    result = await Runner().run(agent(ScriptedModel(["answer"]), check), "q")
    assert result.error is not None and result.error.message == "async says no"


# 2. when it runs


@pytest.mark.parametrize("stop_reason", [StopReason.END_TURN, StopReason.STOP_SEQUENCE])
async def test_guard_runs_on_a_natural_finish(stop_reason: StopReason) -> None:
    guard = Calls(None)
    result = await Runner().run(agent(ScriptedModel([Reply("done", stop_reason=stop_reason)]), guard), "q")
    assert len(guard.contexts) == 1 and result.completion_reason == "final_answer"


async def test_guard_never_runs_on_a_stop_when_stop_or_finishing_tool() -> None:
    guard = Calls(Fail("should not run"))
    a = agent(ScriptedModel([lookup_call()]), guard, stop_when=has_tool_call("lookup"))
    result = await Runner().run(a, "q")
    assert guard.contexts == [] and result.completion_reason == "stop_when"


async def test_guard_never_runs_on_a_forced_completion_call() -> None:
    class Out(BaseModel):
        answer: str

    guard = Calls(Fail("should not run"))
    model = ScriptedModel([lookup_call(), '{"answer": "forced"}'])
    result = await Runner().run(agent(model, guard, output_type=Out, max_steps=1), "q")
    assert guard.contexts == [] and result.output == Out(answer="forced")


@pytest.mark.parametrize(
    "stop_reason", [StopReason.MAX_TOKENS, StopReason.CONTENT_FILTER, StopReason.REFUSAL, StopReason.ERROR]
)
async def test_guard_never_runs_on_a_cut_filtered_refused_or_errored_reply(stop_reason: StopReason) -> None:
    guard = Calls(Fail("should not run"))
    result = await Runner().run(agent(ScriptedModel([Reply("partial", stop_reason=stop_reason)]), guard), "q")
    assert guard.contexts == [] and result.completion_reason == stop_reason.value


async def test_guard_never_runs_on_the_step_that_reaches_max_steps() -> None:
    guard = Calls(Continue("again"))
    result = await Runner().run(agent(ScriptedModel([lookup_call(), "final"]), guard, max_steps=2), "q")
    assert guard.contexts == [] and result.completion_reason == "final_answer"


async def test_guard_never_runs_on_a_cancelled_run() -> None:
    guard = Calls(Fail("should not run"))
    entered, never = asyncio.Event(), asyncio.Event()

    async def slow(req: ModelRequest) -> Reply:
        entered.set()
        await never.wait()
        return Reply("unreachable")

    task = asyncio.create_task(Runner().run(agent(FunctionModel(slow), guard), "q"))
    await entered.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert guard.contexts == []


# 3. the context


async def test_context_carries_ids_reply_messages_state_and_budget() -> None:
    guard = Calls(None)
    model = ScriptedModel([Reply(tool_calls=[ToolCall("note", {})]), "the answer"])
    result = await Runner().run(agent(model, guard), "q", session_id="sess", state={"user": "ann"})
    ctx = guard.contexts[0]
    assert ctx.session_id == "sess" and ctx.run_id == result.run_id and ctx.step == 2
    assert ctx.guard_key == f"{result.run_id}:2:1"
    assert (ctx.reply.text, ctx.reply.stop_reason) == ("the answer", "end_turn")
    assert ctx.messages[-1].role == "assistant" and ctx.messages[-1].content == "the answer"
    assert dict(ctx.state) == {"user": "ann", "notes": 1}
    assert (ctx.continues_used, ctx.continues_left) == (0, 3)
    with pytest.raises(TypeError):
        ctx.state["x"] = 1  # type: ignore[index]


async def test_guard_key_changes_with_each_consultation() -> None:
    guard = Calls(Continue("more"), None)
    result = await Runner().run(agent(ScriptedModel(["a", "b"]), guard), "q")
    assert [c.guard_key for c in guard.contexts] == [f"{result.run_id}:1:1", f"{result.run_id}:2:2"]


async def test_update_state_and_add_context_commit_with_the_step(store: Store) -> None:
    def check(ctx: StopGuardContext) -> Any:
        if ctx.continues_used == 0:
            ctx.update_state(lambda d: d.update(checked=True))
            ctx.add_context(["Policy: cite [source: ...]."])
            return Continue()
        return None

    result = await Runner(store).run(agent(ScriptedModel(["no source", "ok [source: x]"]), check), "q")
    assert result.state["checked"] is True
    rows = [m for m in result.messages if m.metadata.get("source") == "stop_guard"]
    assert [m.content for m in rows] == [LABEL + "Policy: cite [source: ...]."]
    snapshot = await store.load_session(result.session_id)
    assert snapshot is not None and snapshot.state["checked"] is True


async def test_guard_call_is_cancelled_at_its_timeout() -> None:
    cancelled = asyncio.Event()

    async def hang(ctx: StopGuardContext) -> Any:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    a = agent(ScriptedModel(["answer"]), StopGuard(hang, timeout=0.05))
    result = await Runner().run(a, "q")
    assert cancelled.is_set()
    assert result.completion_reason == "stop_guard_error"
    assert result.stop_guard is not None and "timed out" in (result.stop_guard.error or "")


# 4. verdicts


@pytest.mark.parametrize("verdict", [None, Stop()])
async def test_none_or_stop_ends_the_run_as_without_a_guard(verdict: Any) -> None:
    result = await Runner().run(agent(ScriptedModel(["done"]), Calls(verdict)), "q")
    assert result.status == "completed" and result.completion_reason == "final_answer" and result.output == "done"


async def test_continue_takes_one_more_step_with_feedback() -> None:
    model = ScriptedModel(["no source", "with [source: a]"])
    guard = Calls(lambda ctx: None if "[source:" in ctx.reply.text else Continue("Cite a source."))
    result = await Runner().run(agent(model, guard), "q")
    assert result.output == "with [source: a]" and result.steps == 2
    assert model.requests[1].messages[-1].content == LABEL + "Cite a source."


async def test_fail_fails_the_run_with_stop_guard_rejected_not_retryable(store: Store) -> None:
    result = await Runner(store).run(agent(ScriptedModel(["answer"]), Calls(Fail("Order not confirmed"))), "q")
    assert result.status == "failed"
    assert result.error is not None
    assert (result.error.code, result.error.message, result.error.retryable) == (
        "stop_guard_rejected",
        "Order not confirmed",
        False,
    )
    snapshot = await store.load_session(result.session_id)
    assert snapshot is not None and snapshot.messages()[-1].content == "answer"  # the reply is committed


@pytest.mark.parametrize(
    ("verdict", "fragment"),
    [
        (Continue(), "needs feedback or at least one context item"),
        (Continue(feedback="   "), "needs feedback"),
        (Fail(""), "Fail needs a non-empty message"),
        ("stop", "expected None, Stop(), Continue(...) or Fail(...)"),
        (Continue(context=[Message("system", "sneaky")]), "role 'user'"),
    ],
)
async def test_invalid_verdict_is_a_guard_error_naming_the_problem(verdict: Any, fragment: str) -> None:
    result = await Runner().run(agent(ScriptedModel(["answer"]), Calls(verdict)), "q")
    assert result.completion_reason == "stop_guard_error"
    assert result.stop_guard is not None and fragment in (result.stop_guard.error or "")


# 5. feedback rows


async def test_feedback_is_one_labelled_hidden_user_row_never_a_system_message() -> None:
    result = await Runner().run(agent(ScriptedModel(["a", "b"]), Calls(Continue("Try again."), None)), "q")
    rows = [m for m in result.messages if m.metadata.get("source") == "stop_guard"]
    assert len(rows) == 1
    row = rows[0]
    assert row.role == "user" and row.content == LABEL + "Try again."
    assert row.metadata["automated"] is True and row.metadata["hidden"] is True
    assert row not in transcript(result.messages)
    assert all(m.role != "system" for m in result.messages)


# 6. the budget


async def test_each_continue_costs_a_step_of_max_steps() -> None:
    guard = Calls(Continue("again"))
    result = await Runner().run(agent(FunctionModel(lambda r: Reply("try")), guard, max_steps=3), "q")
    # steps 1 and 2 continue; step 3 reaches the cap, where the guard does not run and the answer stands
    assert result.steps == 3 and len(guard.contexts) == 2
    assert result.completion_reason == "final_answer"


async def test_max_continues_zero_never_continues() -> None:
    guard = Calls(Continue("again"))
    result = await Runner().run(agent(ScriptedModel(["only"]), StopGuard(guard, max_continues=0)), "q")
    assert result.steps == 1 and result.completion_reason == "stop_guard_exhausted"
    assert result.stop_guard == StopGuardReport(continues_used=0, exhausted=True, error=None)


async def test_spent_budget_still_calls_the_guard_and_a_continue_ends_exhausted_rows_dropped_writes_kept() -> None:
    def check(ctx: StopGuardContext) -> Any:
        ctx.update_state(lambda d: d.update(seen=d.get("seen", 0) + 1))
        return Continue(f"nudge {ctx.continues_used}")

    result = await Runner().run(agent(FunctionModel(lambda r: Reply("x")), StopGuard(check, max_continues=2)), "q")
    assert result.steps == 3 and result.status == "completed"
    assert result.completion_reason == "stop_guard_exhausted"
    assert result.state["seen"] == 3  # the exhausted call's write is kept
    nudges = [m.content for m in result.messages if m.metadata.get("source") == "stop_guard"]
    assert nudges == [LABEL + "nudge 0", LABEL + "nudge 1"]  # the third is dropped
    assert result.stop_guard == StopGuardReport(continues_used=2, exhausted=True)


async def test_a_spent_guard_may_still_fail_the_run() -> None:
    guard = Calls(lambda c: Continue("x") if c.continues_left else Fail("gave up"))
    result = await Runner().run(agent(FunctionModel(lambda r: Reply("x")), StopGuard(guard, max_continues=1)), "q")
    assert result.error is not None and result.error.code == "stop_guard_rejected"


async def test_continues_are_counted_from_the_log_across_a_retry(store: Store) -> None:
    calls = {"n": 0}

    def fn(req: ModelRequest) -> Reply:
        calls["n"] += 1
        if calls["n"] == 2:
            raise ConnectionError("flaky")
        return Reply("x")

    guard = Calls(Continue("again"))
    runner = Runner(store)
    a = agent(FunctionModel(fn), StopGuard(guard, max_continues=2))
    failed = await runner.run(a, "q", session_id="s")
    assert failed.error is not None and failed.stop_guard == StopGuardReport(continues_used=1)
    done = await runner.retry(a, "s")
    assert [c.continues_used for c in guard.contexts] == [0, 1, 2]
    assert done.completion_reason == "stop_guard_exhausted"
    assert done.stop_guard == StopGuardReport(continues_used=2, exhausted=True)


async def test_a_new_run_starts_the_budget_at_zero(store: Store) -> None:
    guard = Calls(Continue("again"))
    runner = Runner(store)
    a = agent(FunctionModel(lambda r: Reply("x")), StopGuard(guard, max_continues=1))
    await runner.run(a, "first", session_id="s")
    second = await runner.run(a, "second", session_id="s")
    assert second.stop_guard == StopGuardReport(continues_used=1, exhausted=True)
    assert [c.continues_used for c in guard.contexts] == [0, 1, 0, 1]


# 7. guard errors


async def test_a_raising_guard_commits_nothing_of_itself_and_stops_by_default(store: Store) -> None:
    def boom(ctx: StopGuardContext) -> Any:
        ctx.update_state(lambda d: d.update(poisoned=True))
        ctx.add_context(["never shown"])
        raise RuntimeError("guard bug")

    result = await Runner(store).run(agent(ScriptedModel(["answer"]), boom), "q")
    assert result.status == "completed" and result.completion_reason == "stop_guard_error"
    assert result.output == "answer"
    assert "poisoned" not in result.state
    assert not any(m.metadata.get("source") == "stop_guard" for m in result.messages)
    assert result.stop_guard is not None and "RuntimeError: guard bug" in (result.stop_guard.error or "")
    snapshot = await store.load_session(result.session_id)
    assert snapshot is not None
    records = [r for e in snapshot.entries for r in e.records]
    assert records[-1]["event"] == "error" and "guard bug" in records[-1]["message"]


async def test_on_error_fail_fails_with_stop_guard_failed() -> None:
    def boom(ctx: StopGuardContext) -> Any:
        raise ValueError("bad")

    result = await Runner().run(agent(ScriptedModel(["answer"]), StopGuard(boom, on_error="fail")), "q")
    assert result.status == "failed" and result.error is not None
    assert result.error.code == "stop_guard_failed" and not result.error.retryable


# 8. hook order: model -> guard -> commit


async def test_hook_order_is_model_then_guard_then_commit(store: Store) -> None:
    seen: dict[str, Any] = {}

    async def check(ctx: StopGuardContext) -> Any:
        snapshot = await store.load_session(ctx.session_id)
        assert snapshot is not None
        seen["committed_rows"] = [m.content for m in snapshot.messages()]
        return None

    await Runner(store).run(agent(ScriptedModel(["answer"]), check), "q")
    assert seen["committed_rows"] == ["q"]  # the reply was not committed yet when the guard ran


# 9. report and events


async def test_report_is_on_the_result_and_on_the_run_record(store: Store) -> None:
    guard = Calls(Continue("again"), None)
    result = await Runner(store).run(agent(ScriptedModel(["a", "b"]), guard), "q")
    assert result.stop_guard == StopGuardReport(continues_used=1, exhausted=False, error=None)
    record = await store.get_run(result.run_id)
    assert record is not None
    assert record.report["stop_guard"] == {"continues_used": 1, "exhausted": False, "error": None}


async def test_agent_without_a_guard_reports_none() -> None:
    result = await Runner().run(Agent("a", "", ScriptedModel(["x"])), "q")
    assert result.stop_guard is None


async def test_guard_events_are_in_the_stream_and_the_log(store: Store) -> None:
    guard = Calls(Continue("again"), Continue("again"), lambda c: Fail("no"))
    a = agent(FunctionModel(lambda r: Reply("x")), StopGuard(guard, max_continues=1))
    events = [e async for e in Runner(store).stream(a, "q", session_id="s")]
    kinds = [e.kind for e in events if isinstance(e, StopGuardEvent)]
    assert kinds == ["stop_guard.continued", "stop_guard.exhausted"]
    snapshot = await store.load_session("s")
    assert snapshot is not None
    assert [r["event"] for e in snapshot.entries for r in e.records] == ["continued", "exhausted"]


async def test_rejected_and_error_events_reach_the_stream() -> None:
    events = [e async for e in Runner().stream(agent(ScriptedModel(["x"]), Calls(Fail("no"))), "q")]
    assert [(e.kind, e.message) for e in events if isinstance(e, StopGuardEvent)] == [("stop_guard.rejected", "no")]


# 10. with an output type


class Cited(BaseModel):
    answer: str
    source: str


async def test_output_agent_guard_continue_sends_its_feedback_before_forced_completion() -> None:
    guard = Calls(Continue("Add a source."), None)
    model = ScriptedModel(['{"answer": "a", "source": ""}', '{"answer": "a", "source": "wiki"}'])
    result = await Runner().run(agent(model, guard, output_type=Cited), "q")
    assert result.output == Cited(answer="a", source="wiki")
    assert model.requests[1].tools != () and model.requests[1].messages[-1].content == LABEL + "Add a source."


async def test_output_agent_guard_stop_enters_forced_completion_when_output_is_missing() -> None:
    guard = Calls(None)
    model = ScriptedModel(["plain text", '{"answer": "a", "source": "b"}'])
    result = await Runner().run(agent(model, guard, output_type=Cited), "q")
    assert result.completion_reason == "output" and model.requests[1].forced_output is True


async def test_output_agent_exhausted_report_and_reason_survive_forced_completion() -> None:
    guard = Calls(Continue("more"))
    model = ScriptedModel(["plain text", '{"answer": "a", "source": "b"}'])
    result = await Runner().run(agent(model, StopGuard(guard, max_continues=0), output_type=Cited), "q")
    assert result.status == "completed" and result.output == Cited(answer="a", source="b")
    assert result.completion_reason == "stop_guard_exhausted"
    assert result.stop_guard == StopGuardReport(continues_used=0, exhausted=True)


# 11. finish nudges


async def test_finish_nudge_sends_the_nudge_and_accepts_on_empty() -> None:
    seen: list[FinishEvidence] = []

    def verify(ev: FinishEvidence) -> str:
        seen.append(ev)
        ran_lookup = any(t.name == "lookup" and t.ok for t in ev.tools)
        return "" if ran_lookup else "You stated figures but ran no lookup: verify them."

    model = ScriptedModel(["It is 42.", lookup_call(), "Verified: 42."])
    result = await Runner().run(agent(model, finish_nudge(verify)), "q")
    assert result.output == "Verified: 42." and result.completion_reason == "final_answer"
    assert [(e.final, e.turns, e.nudges) for e in seen] == [("It is 42.", 1, 0), ("Verified: 42.", 3, 1)]
    assert seen[1].tools[0].name == "lookup"


async def test_finish_nudge_cap_is_enforced_by_the_loop() -> None:
    result = await Runner().run(agent(FunctionModel(lambda r: Reply("x")), finish_nudge(lambda ev: "again")), "q")
    assert result.steps == 3 and result.completion_reason == "stop_guard_exhausted"
    assert result.stop_guard == StopGuardReport(continues_used=2, exhausted=True)


async def test_finish_nudge_that_raises_accepts_the_finish_and_is_reported() -> None:
    def broken(ev: FinishEvidence) -> str:
        raise KeyError("oops")

    result = await Runner().run(agent(ScriptedModel(["answer"]), finish_nudge(broken)), "q")
    assert result.status == "completed" and result.output == "answer"
    assert result.completion_reason == "stop_guard_error"
    assert result.stop_guard is not None and "KeyError" in (result.stop_guard.error or "")


async def test_finish_nudge_stream_shows_the_progress_note_never_the_nudge() -> None:
    a = agent(ScriptedModel(["a", "b"]), finish_nudge(lambda ev: "SECRET NUDGE" if ev.nudges == 0 else ""))
    events = [e async for e in Runner().stream(a, "q")]
    guard_events = [e for e in events if isinstance(e, StopGuardEvent)]
    assert guard_events[0].note == "verifying before finishing"
    assert all("SECRET NUDGE" not in repr(e) for e in events if isinstance(e, StopGuardEvent))


async def test_a_nudge_is_marked_as_external_input() -> None:
    a = agent(ScriptedModel(["a", "b"]), finish_nudge(lambda ev: "check" if ev.nudges == 0 else ""))
    result = await Runner().run(a, "q")
    nudge = next(m for m in result.messages if m.metadata.get("source") == "stop_guard")
    assert nudge.metadata["external_input"] is True and nudge.role == "user"


async def test_finish_nudge_only_sees_this_runs_tool_trace(store: Store) -> None:
    seen: list[FinishEvidence] = []

    def verify(ev: FinishEvidence) -> str:
        seen.append(ev)
        return ""

    runner = Runner(store)
    await runner.run(agent(ScriptedModel([lookup_call(), "first"])), "q1", session_id="s")
    await runner.run(agent(ScriptedModel(["second"]), finish_nudge(verify)), "q2", session_id="s")
    assert seen[0].tools == () and seen[0].turns == 1


# 12. step-cap policy


async def test_on_max_steps_fail_is_the_default_cut_off() -> None:
    result = await Runner().run(agent(FunctionModel(lambda r: lookup_call()), max_steps=2), "q")
    assert result.error is not None and result.error.code == "max_steps_exhausted"


async def test_on_max_steps_wrap_up_makes_one_tool_less_call_for_a_final_answer() -> None:
    def fn(req: ModelRequest) -> Reply:
        return lookup_call() if req.tools else Reply("Summary of what I found.")

    model = FunctionModel(fn)
    result = await Runner().run(agent(model, max_steps=2, on_max_steps="wrap_up"), "q")
    assert result.status == "completed" and result.completion_reason == "max_steps_wrapped_up"
    assert result.output == "Summary of what I found." and result.steps == 3
    wrap_row = result.messages[-2]
    assert wrap_row.role == "user" and wrap_row.metadata["source"] == "wrap_up"


async def test_wrap_up_reply_passes_the_same_stop_guard() -> None:
    guard = Calls(Fail("uncited"))

    def fn(req: ModelRequest) -> Reply:
        return lookup_call() if req.tools else Reply("Summary.")

    result = await Runner().run(agent(FunctionModel(fn), guard, max_steps=1, on_max_steps="wrap_up"), "q")
    assert len(guard.contexts) == 1 and result.error is not None and result.error.code == "stop_guard_rejected"


async def test_wrap_up_that_still_calls_tools_is_a_cut_off() -> None:
    result = await Runner().run(agent(FunctionModel(lambda r: lookup_call()), max_steps=1, on_max_steps="wrap_up"), "q")
    assert result.error is not None and result.error.code == "max_steps_exhausted" and result.steps == 2


def test_on_max_steps_must_be_fail_or_wrap_up() -> None:
    with pytest.raises(ConfigError, match="on_max_steps"):
        Agent("a", "", ScriptedModel([]), on_max_steps="ignore")  # type: ignore[arg-type]
