"""Red team of the stop decision: scripted models that try to evade it (a budget overshot in one step, a call
repeated in disguise, a reply that never ends, a hostile ``stop_when``, a run continued again and again after
cut-offs and a SIGKILL). Each test names the rule the attack must not break."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import signal
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from stopwise import Agent, Guardian, Limits, Reply, Runner, SQLiteStore, ToolCall, Usage, tool
from stopwise.guardian.conditions import DEFAULT_CONDITIONS
from stopwise.guardian.evaluators.scripted import ScriptedEvaluator
from stopwise.guardian.policy import ThresholdPolicy
from stopwise.models import FunctionModel, ModelRequest
from stopwise.store.base import EntryKind, LogEntry, RunRecord

STAGNATION = DEFAULT_CONDITIONS.only(["stagnation"])
ran: list[str] = []


@tool
def work(item: str) -> str:
    """Do one item of work."""
    ran.append(item)
    return f"did {item}"


@pytest.fixture(autouse=True)
def _clear() -> None:
    ran.clear()


def fan_out(width: int) -> FunctionModel:
    """A model that answers every request with ``width`` parallel calls, then a final answer once results came."""

    def reply(request: ModelRequest) -> Reply:
        if any(m.role.value == "tool" for m in request.messages):
            return Reply(text="done", usage=Usage(1, 1, 1))
        return Reply(tool_calls=[ToolCall("work", {"item": str(i)}, id=f"c{i}") for i in range(width)])

    return FunctionModel(reply)


# 1. Budget overshoot in one step ------------------------------------------------------------------------------


async def test_a_batch_of_100_calls_under_a_limit_of_10_runs_exactly_10_and_ends_typed() -> None:
    agent = Agent("a", "", fan_out(100), tools=[work], limits=Limits(tool_calls=10))
    result = await Runner().run(agent, "go", session_id="s")
    assert ran == [str(i) for i in range(10)]  # the first ten in call order, none past the budget
    assert result.status == "failed" and result.error is not None
    assert result.error.code == "tool_call_limit" and not result.error.retryable
    assert result.error.details == {"limit": "tool_calls", "allowed": 10, "used": 100}
    answered = [m for m in result.messages if m.role.value == "tool"]
    assert len(answered) == 100  # every call the model made has an answer row, so the transcript is whole
    assert sum("Not run" in str(m.content) for m in answered) == 90


async def test_a_zero_tool_call_budget_runs_no_call_at_all() -> None:
    agent = Agent("a", "", fan_out(5), tools=[work], limits=Limits(tool_calls=0))
    result = await Runner().run(agent, "go", session_id="s")
    assert ran == [] and result.error is not None and result.error.code == "tool_call_limit"


def overspending(usage: Usage) -> FunctionModel:
    """A model whose first reply asks for three calls and reports ``usage``, then answers."""

    def reply(request: ModelRequest) -> Reply:
        if any(m.tool_calls for m in request.messages):
            return Reply(text="done")
        return Reply(tool_calls=[ToolCall("work", {"item": str(i)}, id=f"c{i}") for i in range(3)], usage=usage)

    return FunctionModel(reply)


@pytest.mark.parametrize(
    ("limits", "code"),
    [
        (Limits(output_tokens=100), "token_limit"),
        (Limits(total_tokens=1_000), "token_limit"),
        (Limits(cost=0.001, priced_as="openai:gpt-4.1-mini"), "cost_limit"),
    ],
)
async def test_the_calls_of_a_reply_that_took_the_run_past_a_token_or_cost_budget_never_run(
    limits: Limits, code: str
) -> None:
    agent = Agent("a", "", overspending(Usage(1_000, 5_000, 1)), tools=[work], limits=limits)
    result = await Runner().run(agent, "go", session_id="s")
    assert ran == []  # none past the budget, as pydantic-ai's UsageLimits refuses them
    assert result.status == "failed" and result.error is not None and result.error.code == code
    rows = [m for m in result.messages if m.role.value == "tool"]
    assert len(rows) == 3 and all(str(m.content).startswith('{"error": "Not run:') for m in rows)


async def test_the_calls_of_a_reply_that_stays_within_the_budget_run() -> None:
    agent = Agent("a", "", overspending(Usage(10, 100, 1)), tools=[work], limits=Limits(output_tokens=100))
    result = await Runner().run(agent, "go", session_id="s")
    assert ran == ["0", "1", "2"] and result.status == "completed"


# 3. Burning the budget: giant replies, a reply that never ends ------------------------------------------------


async def test_one_reply_that_spends_the_whole_token_budget_ends_the_run_before_another_call() -> None:
    asked = []

    def greedy(request: ModelRequest) -> Reply:
        asked.append(1)
        return Reply(tool_calls=[ToolCall("work", {"item": "x"}, id=f"c{len(asked)}")], usage=Usage(10, 400_000, 1))

    agent = Agent("a", "", FunctionModel(greedy), tools=[work], limits=Limits(total_tokens=100_000))
    result = await Runner().run(agent, "go", session_id="s")
    assert len(asked) == 1 and ran == []
    assert result.error is not None and result.error.code == "token_limit"
    assert result.error.details == {"limit": "total_tokens", "allowed": 100_000, "used": 400_010}


async def test_a_megabyte_of_whitespace_as_the_answer_is_kept_verbatim_and_priced_by_its_usage() -> None:
    blank = " " * 1_000_000
    model = FunctionModel(lambda request: Reply(text=blank, usage=Usage(5, 250_000, 1)))
    agent = Agent("a", "", model, limits=Limits(output_tokens=1_000))
    result = await Runner().run(agent, "go", session_id="s")
    # A final answer on the step that spent the budget completes (the tokens are paid for); nothing is lost.
    assert result.status == "completed" and result.output == blank
    assert result.usage.output_tokens == 250_000


async def test_a_whitespace_tool_step_past_the_output_budget_ends_the_run_token_limit() -> None:
    calls = []

    def spin(request: ModelRequest) -> Reply:
        calls.append(1)
        call = ToolCall("work", {"item": "x"}, id=f"c{len(calls)}")
        return Reply(text=" " * 1_000_000, tool_calls=[call], usage=Usage(5, 250_000, 1))

    agent = Agent("a", "", FunctionModel(spin), tools=[work], limits=Limits(output_tokens=1_000))
    result = await Runner().run(agent, "go", session_id="s")
    assert len(calls) == 1 and result.error is not None and result.error.code == "token_limit"


class EndlessStream:
    """A streaming model whose stream never ends: a delta, then the next, forever (it yields to the event loop
    between deltas, as a network read does)."""

    name = "endless"

    def __init__(self) -> None:
        self.deltas = 0

    async def generate(self, request: ModelRequest) -> Reply:
        await asyncio.Event().wait()  # never answers
        raise AssertionError("unreachable")

    async def stream(self, request: ModelRequest) -> Any:
        while True:
            self.deltas += 1
            yield " "
            await asyncio.sleep(0)


async def test_a_stream_that_never_ends_is_cut_by_the_step_time_limit_typed_and_retryable() -> None:
    model = EndlessStream()
    agent = Agent("a", "", model, limits=Limits(step_seconds=0.2))
    events = [e async for e in Runner().stream(agent, "go", session_id="s")]
    result = events[-1].result  # type: ignore[attr-defined]
    assert model.deltas > 0
    assert result.status == "failed" and result.error is not None
    assert result.error.code == "time_limit" and result.error.retryable
    assert result.error.details["limit"] == "step_time"


async def test_a_model_call_that_never_returns_is_cut_by_the_run_time_limit() -> None:
    agent = Agent("a", "", EndlessStream(), limits=Limits(run_seconds=0.2))
    started = time.monotonic()
    result = await Runner().run(agent, "go", session_id="s")
    assert result.error is not None and result.error.code == "time_limit"
    assert result.error.details["limit"] == "run_time"
    assert time.monotonic() - started < 5


# 2. Spinning evasions: the same call in disguise ---------------------------------------------------------------


def spinner(calls: list[dict[str, Any]], tool_name: str = "lookup") -> FunctionModel:
    """Makes the given calls one a step, in order, then answers."""

    def reply(request: ModelRequest) -> Reply:
        made = sum(len(m.tool_calls) for m in request.messages)
        if made >= len(calls):
            return Reply(text="done")
        return Reply(tool_calls=[ToolCall(tool_name, calls[made], id=f"c{made}")])

    return FunctionModel(reply)


@tool
def lookup(q: Any = None, n: Any = None, nonce: str | None = None, a: int = 0, b: int = 0) -> str:
    """Look something up; the answer never changes."""
    return "nothing new"


def repeat_counts(calls: list[dict[str, Any]]) -> list[int]:
    """The policy's count of the latest call repeated in a row, per turn, for a run making ``calls``."""
    evaluator = ScriptedEvaluator([{"stagnation": 0.0}] * (len(calls) + 1))
    guardian = Guardian(evaluator=evaluator, conditions=STAGNATION, policy=ThresholdPolicy(repeat_limit=99))
    agent = Agent("a", "", spinner(calls), tools=[lookup], guardian=guardian)
    result = asyncio.run(Runner().run(agent, "go", session_id="s"))
    return [d.inputs.repeats for d in result.decisions if d.kind == "turn"][: len(calls)]


def test_the_same_call_with_its_arguments_in_another_key_order_counts_as_a_repeat() -> None:
    assert repeat_counts([{"a": 1, "b": 2}, {"b": 2, "a": 1}, {"a": 1, "b": 2}]) == [1, 2, 3]


def test_the_same_number_written_1_or_1_0_counts_as_a_repeat() -> None:
    assert repeat_counts([{"n": 1}, {"n": 1.0}, {"n": 1}]) == [1, 2, 3]


def test_a_text_argument_differing_only_in_spacing_counts_as_a_repeat() -> None:
    assert repeat_counts([{"q": "oslo weather"}, {"q": " oslo  weather"}, {"q": "oslo weather\n"}]) == [1, 2, 3]


def test_a_changed_text_or_a_true_for_1_is_another_call() -> None:
    assert repeat_counts([{"q": "oslo weather"}, {"q": "bergen weather"}]) == [1, 1]
    assert repeat_counts([{"n": 1}, {"n": True}]) == [1, 1]


def test_calls_alternating_or_cycling_or_with_a_fresh_nonce_are_seen_by_the_stagnation_question() -> None:
    a, b, c = {"q": "oslo weather"}, {"q": "bergen weather"}, {"q": "tromso weather"}
    spins = {
        "alternating": [a, b] * 5,
        "cycling three": [a, b, c] * 4,
        "fresh nonce": [{"q": "oslo weather", "nonce": f"{i:032x}"} for i in range(10)],
    }
    for name, calls in spins.items():
        agent = Agent("a", "", spinner(calls), tools=[lookup], guardian=Guardian(conditions=STAGNATION))
        result = asyncio.run(Runner().run(agent, "go", session_id="s"))
        outcomes = [d.outcome.value for d in result.decisions if d.kind == "turn"]
        # The stagnation question fires first (by the fourth step, before the repeat limit counts a cycle three
        # times, or never for the nonce), and the run is redirected (replan) and then stopped before the spin ends.
        assert "replan" in outcomes[:4], (name, outcomes)
        assert result.status == "failed" and result.steps < len(calls), (name, result.steps)


# 4. A hostile stop_when ----------------------------------------------------------------------------------------


def one_call_then_answer() -> FunctionModel:
    def reply(request: ModelRequest) -> Reply:
        if any(m.tool_calls for m in request.messages):
            return Reply(text="done")
        return Reply(tool_calls=[ToolCall("work", {"item": "x"}, id="c1")])

    return FunctionModel(reply)


async def test_a_stop_when_that_raises_fails_the_run_typed_after_its_tools_ran_and_were_kept() -> None:
    def broken(step: Any) -> bool:
        raise KeyError("boom")

    result = await Runner().run(Agent("a", "", one_call_then_answer(), tools=[work], stop_when=broken), "go")
    assert ran == ["x"]
    assert result.status == "failed" and result.error is not None and result.error.code == "stop_when_raised"
    assert [m.role.value for m in result.messages] == ["user", "assistant", "tool"]


class Ambiguous:
    """A numpy-array-like value: its truth is an error."""

    def __bool__(self) -> bool:
        raise ValueError("The truth value of an array with more than one element is ambiguous")


class Truthy:
    """A numpy-bool-like value: not a bool, but true."""

    def __bool__(self) -> bool:
        return True


async def test_a_stop_when_returning_a_value_whose_truth_raises_fails_stop_when_raised() -> None:
    agent = Agent("a", "", one_call_then_answer(), tools=[work], stop_when=lambda step: Ambiguous())
    result = await Runner().run(agent, "go")
    assert result.error is not None and result.error.code == "stop_when_raised"
    assert "ValueError" in result.error.message


async def test_a_stop_when_returning_a_non_bool_truthy_value_or_a_coroutine_stops_the_run() -> None:
    async def later() -> bool:
        return True

    for predicate in (lambda step: Truthy(), lambda step: later()):
        result = await Runner().run(Agent("a", "", one_call_then_answer(), tools=[work], stop_when=predicate), "go")
        assert result.status == "completed" and result.completion_reason.value == "stop_when"


async def test_a_stop_when_that_never_returns_is_cut_by_the_run_time_limit() -> None:
    async def stuck(step: Any) -> bool:
        await asyncio.Event().wait()
        return True

    agent = Agent("a", "", one_call_then_answer(), tools=[work], stop_when=stuck, limits=Limits(run_seconds=0.3))
    result = await asyncio.wait_for(Runner().run(agent, "go"), 10)
    assert result.status == "failed" and result.error is not None and result.error.code == "time_limit"
    assert ran == ["x"] and [m.role.value for m in result.messages] == ["user", "assistant", "tool"]


async def test_a_stop_when_that_mutates_the_calls_it_is_shown_changes_nothing_in_the_log(tmp_path: Path) -> None:
    def meddle(step: Any) -> bool:
        step.reply.tool_calls[0].args["item"] = "forged"
        step.tool_results[0].metadata["forged"] = True
        return True

    store = SQLiteStore(tmp_path / "log.db")
    agent = Agent("a", "", one_call_then_answer(), tools=[work], stop_when=meddle)
    result = await Runner(store).run(agent, "go", session_id="s")
    await store.close()
    reread = SQLiteStore(tmp_path / "log.db")
    snapshot = await reread.load_session("s")
    await reread.close()
    assert snapshot is not None
    logged = [c.args for m in snapshot.messages() for c in m.tool_calls]
    assert logged == [{"item": "x"}]
    assert not any("forged" in m.metadata for m in snapshot.messages())
    assert [c.args for m in result.messages for c in m.tool_calls] == [{"item": "x"}]


async def test_stop_when_on_the_step_that_spent_the_token_budget_completes_stop_when() -> None:
    def reply(request: ModelRequest) -> Reply:
        return Reply(tool_calls=[ToolCall("work", {"item": "x"}, id="c1")], usage=Usage(10, 5_000, 1))

    agent = Agent(
        "a", "", FunctionModel(reply), tools=[work], stop_when=lambda step: True, limits=Limits(output_tokens=100)
    )
    result = await Runner().run(agent, "go")
    assert result.status == "completed" and result.completion_reason.value == "stop_when"


# 5. Continuing a cut-off run, again and again, and after a SIGKILL ---------------------------------------------


def one_call_a_step() -> FunctionModel:
    """A model that never stops calling: one call a step, each with a fresh id and item."""

    def reply(request: ModelRequest) -> Reply:
        made = sum(len(m.tool_calls) for m in request.messages)
        return Reply(tool_calls=[ToolCall("work", {"item": str(made)}, id=f"c{made}")], usage=Usage(10, 1, 1))

    return FunctionModel(reply)


async def test_each_retry_of_a_run_cut_off_by_its_tool_call_budget_gets_exactly_that_budget_again() -> None:
    agent = Agent("a", "", one_call_a_step(), tools=[work], limits=Limits(tool_calls=2), max_steps=None)
    runner = Runner()
    result = await runner.run(agent, "go", session_id="s")
    for leg in range(1, 5):
        assert result.error is not None and result.error.code == "tool_call_limit"
        # This leg's count only: the budget did not leak from the legs before it, nor shrink.
        assert result.error.details == {"limit": "tool_calls", "allowed": 2, "used": 3}
        assert len(ran) == 2 * leg
        result = await runner.retry(agent, "s")
    assert len(ran) == 10
    assert result.usage.input_tokens == 10 * 15  # three model calls a leg, five legs: the run's usage adds up


KILL_AT_CALL = {"n": 0}


@tool
def fragile(item: str) -> str:
    """A tool whose process is killed (SIGKILL) on the configured call."""
    ran.append(item)
    if len(ran) == KILL_AT_CALL["n"]:
        os.kill(os.getpid(), signal.SIGKILL)
    return f"did {item}"


def fragile_model() -> FunctionModel:
    def reply(request: ModelRequest) -> Reply:
        made = sum(len(m.tool_calls) for m in request.messages)
        return Reply(tool_calls=[ToolCall("fragile", {"item": str(made)}, id=f"c{made}")], usage=Usage(10, 1, 1))

    return FunctionModel(reply)


FRAGILE = Agent("fragile", "", fragile_model(), tools=[fragile], limits=Limits(tool_calls=4), max_steps=None)


def _killed(target: Callable[..., None], *args: Any) -> None:
    """Run ``target(*args)`` in a child process that must die by SIGKILL (the test's kill inside it)."""
    child = multiprocessing.get_context("forkserver").Process(target=target, args=args)
    child.start()
    child.join(60)
    assert child.exitcode == -signal.SIGKILL


def _child(db: str, kill_at: int) -> None:
    KILL_AT_CALL["n"] = kill_at
    asyncio.run(Runner(SQLiteStore(db)).run(FRAGILE, "go", session_id="s"))


def test_after_a_sigkill_in_the_middle_the_continued_run_spends_only_what_is_left_of_its_budget(
    tmp_path: Path,
) -> None:
    db = tmp_path / "log.db"
    _killed(_child, str(db), 3)

    async def recover() -> Any:
        store = SQLiteStore(db)
        try:
            before = await store.load_session("s")
            assert before is not None
            ran_before = [m for m in before.messages() if m.role.value == "tool"]
            # Past the lease the killed process never dropped: the crashed run is continued, not started again.
            result = await Runner(store, clock=lambda: time.time() + 3600).retry(FRAGILE, "s")
            return ran_before, result
        finally:
            await store.close()

    ran_before, result = asyncio.run(recover())
    assert len(ran_before) == 2  # two steps committed; the third was killed inside its tool
    assert result.error is not None and result.error.code == "tool_call_limit"
    # The budget is counted from the log: 2 ran before the kill, the killed step's call runs again, one more
    # fits; the fifth is refused. A fresh budget would have let 4 more run.
    assert result.error.details == {"limit": "tool_calls", "allowed": 4, "used": 5}
    assert ran == ["2", "3"]  # in this process: the re-run of the killed call, then the last one the budget allows
    rows = [m for m in result.messages if m.role.value == "tool"]
    assert len(rows) == 5 and sum("Not run" in str(m.content) for m in rows) == 1
    # Five replies, each counted once: the killed step's reply was recorded with its intent and not asked again.
    assert result.usage.input_tokens == 50


# 6. Refusal before the write-ahead intent -------------------------------------------------------------------


async def test_a_reply_past_its_budget_writes_no_intent_for_calls_that_will_not_run(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "log.db")
    try:
        agent = Agent("a", "", overspending(Usage(1_000, 5_000, 1)), tools=[work], limits=Limits(output_tokens=100))
        result = await Runner(store).run(agent, "go", session_id="s")
        assert result.error is not None and result.error.code == "token_limit" and ran == []
        snapshot = await store.load_session("s")
        assert snapshot is not None
        # The input, then the step with its three refusals: no intent for calls refused before any could run.
        assert [e.kind for e in snapshot.entries] == [EntryKind.INPUT, EntryKind.STEP]
    finally:
        await store.close()


async def test_a_batch_cut_by_the_tool_call_limit_writes_its_intent_for_the_calls_that_run(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "log.db")
    try:
        agent = Agent("a", "", fan_out(5), tools=[work], limits=Limits(tool_calls=2))
        result = await Runner(store).run(agent, "go", session_id="s")
        assert result.error is not None and result.error.code == "tool_call_limit" and ran == ["0", "1"]
        snapshot = await store.load_session("s")
        assert snapshot is not None
        assert [e.kind for e in snapshot.entries] == [EntryKind.INPUT, EntryKind.INTENT, EntryKind.SETTLE]
    finally:
        await store.close()


class _KilledAtTheStep(SQLiteStore):
    """A store whose process is killed (SIGKILL) as it commits a step: the crash between deciding a step and
    recording it."""

    async def commit(self, entry: LogEntry, state: Mapping[str, Any], run: RunRecord | None = None) -> None:
        if entry.kind in (EntryKind.STEP, EntryKind.SETTLE):
            os.kill(os.getpid(), signal.SIGKILL)
        await super().commit(entry, state, run)


OVERSPENDER = Agent("a", "", overspending(Usage(1_000, 5_000, 1)), tools=[work], limits=Limits(output_tokens=100))


def _overspending_child(db: str) -> None:
    asyncio.run(Runner(_KilledAtTheStep(db)).run(OVERSPENDER, "go", session_id="s"))


def test_a_run_killed_before_recording_its_refused_reply_refuses_the_calls_again_when_continued(
    tmp_path: Path,
) -> None:
    db = tmp_path / "log.db"
    _killed(_overspending_child, str(db))

    async def recover() -> Any:
        store = SQLiteStore(db)
        try:
            before = await store.load_session("s")
            assert before is not None
            assert [e.kind for e in before.entries] == [EntryKind.INPUT]  # no intent: nothing was to run
            result = await Runner(store, clock=lambda: time.time() + 3600).retry(OVERSPENDER, "s")
            after = await store.load_session("s")
            assert after is not None
            return result, [e.kind for e in after.entries]
        finally:
            await store.close()

    result, kinds = asyncio.run(recover())
    assert ran == []  # in this process too: the re-asked reply is past the budget the same way
    assert result.error is not None and result.error.code == "token_limit"
    rows = [m for m in result.messages if m.role.value == "tool"]
    assert len(rows) == 3 and all(str(m.content).startswith('{"error": "Not run:') for m in rows)
    assert kinds == [EntryKind.INPUT, EntryKind.STEP]
