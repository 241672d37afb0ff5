"""A model spinning between two to four calls (``search(q)``, ``open(url)``, ``search(q)``, ``open(url)``...) is a
repeat too: ``stopwise.stop.repeats.Cycles`` finds it, the guardian's policy replans on it at ``repeat_limit`` as on
one call repeated, the peer integrations count it the same way, and without a guardian ``stop_when=is_looping(n)``
stops it. Logs written before cycles were counted replay as they were decided."""

from __future__ import annotations

import asyncio
import json
import random
from pathlib import Path
from typing import Any

import pytest

from stopwise import Agent, Approve, Guardian, Reply, Runner, SQLiteStore, ToolCall, is_looping, tool
from stopwise.errors import ConfigError, UnreadableRecord
from stopwise.guardian import GuardianOutcome
from stopwise.guardian.conditions import DEFAULT_CONDITIONS
from stopwise.guardian.evaluators.scripted import ScriptedEvaluator
from stopwise.guardian.policy import PolicyInputs, ThresholdPolicy
from stopwise.guardian.records import GuardianDecision, replay
from stopwise.messages import Message, Role
from stopwise.models import FunctionModel, ModelRequest
from stopwise.records import parse_records
from stopwise.stop.repeats import Cycle, Cycles, Repeats, Streak
from stopwise.store.base import Store

STAGNATION = DEFAULT_CONDITIONS.only(["stagnation"])
SEARCH = ("search", {"q": "oslo weather"})
OPEN = ("open", {"url": "https://yr.no/oslo"})
READ = ("read", {"section": "forecast"})

Call = tuple[str, dict[str, Any]]


def step(*calls: Call) -> Message:
    """One reply's row making ``calls`` together."""
    return Message(Role.ASSISTANT, "", tuple(ToolCall(n, a, id=f"c{i}") for i, (n, a) in enumerate(calls)))


def counts(steps: list[tuple[Call, ...]]) -> list[int]:
    """The latest cycle's whole repetitions after each step (0: none), extending the cycles step by step."""
    out, cycles = [], Cycles()
    for calls in steps:
        cycles = cycles.then([step(*calls), Message(Role.TOOL, "a result", tool_call_id="c0")])
        latest = cycles.latest
        out.append(latest.count if latest is not None else 0)
    return out


# The detection (pure) ------------------------------------------------------------------------------------------


def test_two_calls_alternating_are_a_cycle_counted_in_whole_repetitions() -> None:
    assert counts([(SEARCH,), (OPEN,)] * 3) == [0, 0, 0, 2, 2, 3]
    latest = Cycles().then([step(SEARCH), step(OPEN)] * 3).latest
    assert latest == Cycle((("search",), ("open",)), 3)
    assert latest.reason == "the calls search, open were made in the same order 3 times in a row"


def test_three_calls_in_turn_are_a_cycle_named_from_where_it_began() -> None:
    assert counts([(SEARCH,), (OPEN,), (READ,)] * 3) == [0, 0, 0, 0, 0, 2, 2, 2, 3]
    # A partial repetition after the whole ones does not count, and the cycle keeps the order it began in.
    latest = Cycles().then([step(SEARCH), step(OPEN), step(READ)] * 3 + [step(SEARCH)]).latest
    assert latest == Cycle((("search",), ("open",), ("read",)), 3)


def test_a_broken_cycle_starts_counting_again() -> None:
    other = ("write", {"text": "x"})
    spin = [(SEARCH,), (OPEN,), (SEARCH,), (OPEN,)]
    assert counts([*spin, (other,), *spin]) == [0, 0, 0, 2, 0, 0, 0, 0, 2]


def test_a_changed_argument_breaks_the_cycle_but_a_canonical_variant_does_not() -> None:
    changed = ("search", {"q": "bergen weather"})
    assert counts([(SEARCH,), (OPEN,), (changed,), (OPEN,), (SEARCH,), (OPEN,)]) == [0, 0, 0, 0, 0, 0]
    spaced = ("search", {"q": "  oslo   weather "})
    assert counts([(SEARCH,), (OPEN,), (spaced,), (OPEN,), (SEARCH,), (OPEN,)]) == [0, 0, 0, 2, 2, 3]


def test_a_replys_parallel_calls_are_one_unordered_step_of_the_cycle() -> None:
    # The same two calls sent together in any order, three replies in a row: a cycle of one step.
    latest = Cycles().then([step(SEARCH, OPEN), step(OPEN, SEARCH), step(SEARCH, OPEN)]).latest
    assert latest == Cycle((("open", "search"),), 3)
    assert latest.reason == "the calls open + search were made together 3 times in a row"
    # Two calls in one reply are not the same step as those calls one reply each.
    assert counts([(SEARCH, OPEN), (SEARCH,), (OPEN,), (SEARCH, OPEN)]) == [0, 0, 0, 0]


def test_one_call_repeated_is_the_streaks_not_a_cycle() -> None:
    rows = [step(SEARCH)] * 4
    assert Cycles().then(rows).latest is None
    assert Streak.of(rows).count == 4


def test_reading_back_from_the_newest_row_gives_what_extending_step_by_step_gives() -> None:
    rng = random.Random(7)
    calls = [SEARCH, OPEN, READ]
    for _ in range(2000):
        rows = [
            step(*rng.sample(calls, rng.choice([1, 1, 1, 2]))) if rng.random() > 0.1 else Message(Role.USER, "hi")
            for _ in range(rng.randint(0, 16))
        ]
        start = rng.randint(0, len(rows))
        assert Cycles.of(rows, start=start) == Cycles().then(rows[start:])
        # The native loop's fold (each call keyed once) counts what the two read-backs count.
        kept = Repeats().then(rows[start:])
        assert kept.cycles == Cycles().then(rows[start:]) and kept.streak == Streak.of(rows, start=start)


def test_repeats_read_back_from_the_newest_row_are_the_loops_fold_and_none_from_past_the_rows() -> None:
    rng = random.Random(11)
    for _ in range(500):
        rows = [step(*rng.sample([SEARCH, OPEN, READ], rng.choice([1, 1, 2]))) for _ in range(rng.randint(0, 12))]
        start = rng.randint(0, len(rows))
        assert Repeats.of(rows, start=start) == Repeats().then(rows[start:])
        assert Repeats.of(rows, start=len(rows) + rng.randint(1, 3)) == Repeats()


def test_reading_back_stops_at_the_count_asked_for() -> None:
    rows = [step(SEARCH), step(OPEN)] * 50
    latest = Cycles.of(rows, at_most=3).latest
    assert latest is not None and latest.count == 3
    assert Cycles.of(rows).latest == Cycle((("search",), ("open",)), 50)


# The guardian's policy -------------------------------------------------------------------------------------------


def test_the_policy_replans_on_a_cycle_made_repeat_limit_times_naming_its_calls() -> None:
    policy = ThresholdPolicy()
    cycle = Cycle((("search",), ("open",)), 3)
    result = policy.decide({}, (), PolicyInputs({}, cycle=cycle))
    assert result.outcome is GuardianOutcome.REPLAN
    assert result.reason == "replan: the calls search, open were made in the same order 3 times in a row"
    assert policy.decide({}, (), PolicyInputs({}, cycle=Cycle(cycle.steps, 2))).outcome is GuardianOutcome.CONTINUE
    # Raising the limit lets a legitimate polling loop go on, for a cycle as for one call.
    assert ThresholdPolicy(repeat_limit=5).decide({}, (), PolicyInputs({}, cycle=cycle)).outcome is (
        GuardianOutcome.CONTINUE
    )


def test_policy_inputs_without_a_cycle_write_the_record_they_wrote_before() -> None:
    assert "cycle" not in PolicyInputs({}, repeats=2).to_data()
    inputs = PolicyInputs({}, cycle=Cycle((("a", "b"), ("c",)), 4))
    assert PolicyInputs.from_data(json.loads(json.dumps(inputs.to_data()))) == inputs


def spinner(calls: list[Call]) -> FunctionModel:
    """Makes the given calls one a step, in order, then answers."""

    def reply(request: ModelRequest) -> Reply:
        made = sum(len(m.tool_calls) for m in request.messages)
        if made >= len(calls):
            return Reply(text="done")
        name, args = calls[made]
        return Reply(tool_calls=[ToolCall(name, args, id=f"c{made}")])

    return FunctionModel(reply)


@tool
def search(q: str) -> str:
    """Search the web."""
    return "https://yr.no/oslo"


@tool(name="open")
def open_page(url: str) -> str:
    """Open a page."""
    return "Oslo: rain"


@tool
def read(section: str) -> str:
    """Read a section of the open page."""
    return "rain"


TOOLS = [search, open_page, read]


def stagnation_guardian(calls: list[Call], **policy: Any) -> Guardian:
    """A guardian asking only stagnation, answered "no" on every turn of a run making ``calls``: what replans is the
    repeat count alone."""
    evaluator = ScriptedEvaluator([{"stagnation": 0.0}] * (len(calls) + 1))
    return Guardian(evaluator=evaluator, conditions=STAGNATION, policy=ThresholdPolicy(**policy))


def guarded(calls: list[Call], **policy: Any) -> Agent:
    return Agent("a", "", spinner(calls), tools=TOOLS, guardian=stagnation_guardian(calls, **policy))


def test_the_native_loop_replans_a_run_alternating_two_calls_on_the_third_repetition() -> None:
    result = asyncio.run(Runner().run(guarded([SEARCH, OPEN] * 3), "go", session_id="s"))
    turns = [d for d in result.decisions if d.kind == "turn"]
    assert [d.outcome.value for d in turns[:6]] == ["continue"] * 5 + ["replan"]
    assert turns[5].reason == "replan: the calls search, open were made in the same order 3 times in a row"
    assert [d.inputs.cycle.count if d.inputs.cycle else 0 for d in turns[:6]] == [0, 0, 0, 2, 2, 3]
    assert all(replay(d).outcome is d.outcome and replay(d).reason == d.reason for d in turns)


def test_a_spin_that_goes_on_after_its_replans_fails_the_run() -> None:
    result = asyncio.run(Runner().run(guarded([SEARCH, OPEN, READ] * 8), "go", session_id="s"))
    assert result.status == "failed"
    assert "the calls search, open, read were made in the same order" in result.decisions[-1].reason


# Logs written before cycles were counted ------------------------------------------------------------------------

OLD_DECISION = json.loads(
    # Step 6 of the run SEARCH, OPEN, SEARCH, OPEN, SEARCH, OPEN, as stopwise wrote it before it counted cycles
    # (captured from commit dda7bc1): its inputs have no cycle, and it continued.
    '{"type": "guardian", "run_id": "36f5aba7c6044af2ae27ddd829a219c8", "step": 6, "kind": "turn", "call_id": null,'
    ' "state_hash": "ca3ee052fdced1a7", "question_set_version": "qs-f00c2581812c", "evaluator": "scripted",'
    ' "model_version": "scripted-1", "answers": {"stagnation": {"distribution": {"yes": 0.0, "no": 1.0},'
    ' "uncertain": false, "note": ""}}, "conditions": [{"name": "stagnation", "outcome": "replan", "threshold": 0.5,'
    ' "delta": 0.05, "fires_on": ["yes"], "hysteresis": [2, 3], "version": "1"}], "policy": {"max_replans": 2,'
    ' "repeat_limit": 3, "on_unavailable": "escalate", "budget_nearly_spent": 0.9}, "inputs": {"held_before":'
    ' {"stagnation": [false, false]}, "replans": 0, "repeats": 1, "declared_risk": null}, "outcome": "continue",'
    ' "reason": "continue", "latency_ms": 0.255, "held": {"stagnation": false}, "resolved_by": null, "escalated": [],'
    ' "state": null}'
)


def test_a_decision_recorded_before_cycles_counted_replays_as_it_was_decided() -> None:
    old = GuardianDecision.from_data(OLD_DECISION)
    assert old.inputs.cycle is None
    again = replay(old)
    assert again.outcome is GuardianOutcome.CONTINUE and again.reason == "continue"
    # ...and reads back to the record it was: nothing is added to its inputs.
    assert old.to_data()["inputs"] == OLD_DECISION["inputs"]


def test_a_damaged_cycle_in_a_record_is_refused_typed_not_misread() -> None:
    for damaged, field in (
        ({"steps": "ab", "count": 3}, "inputs.cycle.steps"),
        ({"steps": [["a"]], "count": "3"}, "inputs.cycle.count"),
    ):
        data = json.loads(json.dumps(OLD_DECISION))
        data["inputs"]["cycle"] = damaged
        with pytest.raises(UnreadableRecord, match=field):
            parse_records([data])
    data = json.loads(json.dumps(OLD_DECISION))
    data["inputs"]["cycle"] = {"steps": [["search"], ["open"]], "count": 3}
    (decision,) = parse_records([data])
    assert isinstance(decision, GuardianDecision) and replay(decision).outcome is GuardianOutcome.REPLAN


# The peer integrations --------------------------------------------------------------------------------------------


async def turn_decisions(store: Store, session: str) -> list[GuardianDecision]:
    """The turn decisions a peer's run logged in ``session`` of ``store``, in log order."""
    snapshot = await store.load_session(session)
    assert snapshot is not None
    records = [r for e in snapshot.entries for r in parse_records(e.records)]
    return [r for r in records if isinstance(r, GuardianDecision) and r.kind == "turn"]


async def through_pydantic_ai(calls: list[Call]) -> list[GuardianDecision]:
    pytest.importorskip("pydantic_ai")
    from pydantic_ai import Agent as PydanticAgent
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import AgentInfo
    from pydantic_ai.models.function import FunctionModel as PydanticFunctionModel

    from stopwise.integrations.pydantic_ai import StopwiseCapability

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        made = sum(isinstance(m, ModelResponse) for m in messages)
        if made >= len(calls):
            return ModelResponse(parts=[TextPart("done")])
        name, args = calls[made]
        return ModelResponse(parts=[ToolCallPart(name, args, tool_call_id=f"c{made}")])

    capability = StopwiseCapability(guardian=stagnation_guardian(calls))
    agent: PydanticAgent[None, Any] = PydanticAgent(PydanticFunctionModel(model), capabilities=[capability])
    for t in TOOLS:
        agent.tool_plain(name=t.name)(t.fn)
    result = await agent.run("go")
    return await turn_decisions(capability.deciders.store, result.conversation_id)


async def through_openai_agents(calls: list[Call]) -> list[GuardianDecision]:
    pytest.importorskip("agents")
    from agents import Agent as SDKAgent
    from agents import function_tool, set_tracing_disabled
    from agents.testing import ScriptedModel as SDKModel
    from agents.testing import assistant_message, function_call

    from stopwise.integrations.openai_agents import Stopwise

    set_tracing_disabled(True)
    turns: list[Any] = [[function_call(n, a, call_id=f"c{i}")] for i, (n, a) in enumerate(calls)]
    stopwise = Stopwise(guardian=stagnation_guardian(calls))
    sdk_tools = [function_tool(t.fn, name_override=t.name) for t in TOOLS]
    agent = stopwise.attach(
        SDKAgent("a", model=SDKModel([*turns, [assistant_message("done")]]), tools=sdk_tools)  # type: ignore[arg-type]
    )
    await stopwise.run(agent, "go", session_id="s", max_turns=len(calls) + 2)
    return await turn_decisions(stopwise.deciders.store, "s")


async def through_langgraph(calls: list[Call]) -> list[GuardianDecision]:
    pytest.importorskip("langgraph")
    from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
    from langchain_core.messages import AIMessage, BaseMessage
    from langchain_core.tools import tool as lc_tool
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.graph import START, MessagesState, StateGraph

    from stopwise.integrations.langgraph import Stopwise

    lc_tools = [lc_tool(t.name)(t.fn) for t in TOOLS]
    replies: list[BaseMessage] = [
        AIMessage("", tool_calls=[{"name": n, "args": a, "id": f"c{i}"}]) for i, (n, a) in enumerate(calls)
    ]
    model = FakeMessagesListChatModel(responses=[*replies, AIMessage("done")])

    async def call_model(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await model.ainvoke(state["messages"])]}

    stopwise = Stopwise(guardian=stagnation_guardian(calls))
    graph = StateGraph(MessagesState)
    graph.add_node("model", call_model)
    graph.add_node("finish", stopwise.finish_node(model="model", tools="tools"))
    graph.add_node("tools", stopwise.tool_node(lc_tools))
    graph.add_edge(START, "model")
    graph.add_edge("model", "finish")
    app = graph.compile(checkpointer=InMemorySaver())
    thread = {"configurable": {"thread_id": "t1"}, "recursion_limit": 10 * len(calls)}
    await app.ainvoke({"messages": [("user", "go")]}, thread)
    return await turn_decisions(stopwise.deciders.store, "t1")


@pytest.mark.parametrize(
    "peer",
    [through_pydantic_ai, through_openai_agents, through_langgraph],
    ids=["pydantic-ai", "openai-agents", "langgraph"],
)
async def test_the_integrations_count_a_cycle_and_decide_on_it_as_the_native_loop_does(peer: Any) -> None:
    calls = [SEARCH, OPEN, READ] * 3
    native = await Runner().run(guarded(calls), "go", session_id="s")
    mine = [d for d in native.decisions if d.kind == "turn"][: len(calls)]
    theirs = (await peer(calls))[: len(calls)]

    def seen(decisions: list[GuardianDecision]) -> list[tuple[str, int, Cycle | None, str]]:
        return [(d.outcome.value, d.inputs.repeats, d.inputs.cycle, d.reason) for d in decisions]

    assert seen(theirs) == seen(mine)
    assert mine[-1].outcome is GuardianOutcome.REPLAN and mine[-1].inputs.cycle == Cycle(
        (("search",), ("open",), ("read",)), 3
    )


# Without a guardian: stop_when=is_looping(n) ---------------------------------------------------------------------


def looping(calls: list[Call], n: int = 3) -> Agent:
    return Agent("a", "", spinner(calls), tools=TOOLS, stop_when=is_looping(n))


async def test_is_looping_stops_an_alternating_run_completed_naming_the_calls_in_the_log_on_disk(
    tmp_path: Path,
) -> None:
    store = SQLiteStore(tmp_path / "log.db")
    result = await Runner(store).run(looping([SEARCH, OPEN] * 10), "go", session_id="s")
    assert result.status == "completed" and result.completion_reason == "stop_when" and result.steps == 6
    assert result.detail == "the calls search, open were made in the same order 3 times in a row"

    reopened = SQLiteStore(tmp_path / "log.db")
    (run,) = await reopened.list_runs("s")
    assert run.status.value == "completed" and run.completion_reason is not None
    assert run.completion_reason.value == "stop_when" and run.detail == result.detail


async def test_is_looping_stops_one_call_repeated_n_times_naming_it(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "log.db")
    result = await Runner(store).run(looping([READ] * 10, n=4), "go", session_id="s")
    assert result.completion_reason == "stop_when" and result.steps == 4
    assert result.detail == "the call read was made 4 times in a row with the same arguments"


async def test_is_looping_counts_only_this_runs_calls_not_the_sessions_earlier_runs(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "log.db")
    first = await Runner(store).run(looping([SEARCH, OPEN] * 2), "go", session_id="s")
    assert first.completion_reason is not None and first.completion_reason.value == "final_answer"
    # The next run starts the same spin again: the first run's two repetitions do not count towards its three.
    second = await Runner(store).run(looping([SEARCH, OPEN] * 10), "again", session_id="s")
    assert second.completion_reason is not None and second.completion_reason.value == "stop_when"
    assert second.steps == 6


async def test_is_looping_counts_a_step_settled_after_an_approval_once() -> None:
    @tool(name="open", needs_approval=True)
    def open_approved(url: str) -> str:
        """Open a page (a reviewer approves each)."""
        return "Oslo: rain"

    agent = Agent("a", "", spinner([SEARCH, OPEN] * 10), tools=[search, open_approved], stop_when=is_looping(3))
    runner = Runner()
    result = await runner.run(agent, "go", session_id="s")
    while result.status == "suspended":
        result = await runner.resume(agent, "s", decisions={p.call_id: Approve() for p in result.pending})
    assert result.completion_reason is not None and result.completion_reason.value == "stop_when"
    assert sum(len(m.tool_calls) for m in result.messages) == 6


async def test_is_looping_and_the_guardians_repeat_limit_stop_a_spin_on_the_same_step() -> None:
    calls = [SEARCH, OPEN, READ] * 4
    stopped = await Runner().run(looping(calls, n=3), "go")
    guarded_run = await Runner().run(guarded(calls), "go", session_id="s")
    first_replan = next(d.step for d in guarded_run.decisions if d.outcome is GuardianOutcome.REPLAN)
    assert stopped.steps == first_replan == 9


def test_is_looping_refuses_a_count_below_two() -> None:
    for bad in (1, 0, True, 2.5):
        with pytest.raises(ConfigError, match="is_looping"):
            is_looping(bad)  # type: ignore[arg-type]
