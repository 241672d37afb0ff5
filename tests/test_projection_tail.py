"""The guardian reads only the tail of a run: its projection, repeats and numbering match a walk of the whole run."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from stopwise import Agent, FunctionModel, Reply, Runner, ToolCall, tool
from stopwise.guardian import Answer, Answers, QuestionSet, YesNo
from stopwise.guardian.guardian import Guardian
from stopwise.guardian.projection import Projection, project, tail_start
from stopwise.messages import TOOL_ERROR, Message, Role
from stopwise.step_plan import StepPlan
from stopwise.stop.repeats import Streak

# A step: its text, and for each of its calls (tool name, argument, result or None when it has none yet).
STEP = st.tuples(
    st.text(max_size=8),
    st.lists(st.tuples(st.sampled_from(["a", "b"]), st.integers(0, 2), st.none() | st.text(max_size=6)), max_size=3),
)


def _rows(steps: list[tuple[str, list[tuple[str, int, str | None]]]]) -> list[Message]:
    rows = [Message(Role.USER, "the goal")]
    for n, (text, calls) in enumerate(steps):
        tool_calls = tuple(ToolCall(name, {"x": arg}, id=f"c{n}_{i}") for i, (name, arg, _) in enumerate(calls))
        rows.append(Message(Role.ASSISTANT, text, tool_calls))
        for call, (_, _, result) in zip(tool_calls, calls, strict=True):
            if result is not None:
                rows.append(Message(Role.TOOL, result, tool_call_id=call.id, metadata={TOOL_ERROR: result == ""}))
    return rows


@settings(max_examples=200, deadline=None)
@given(st.lists(STEP, max_size=12), st.integers(0, 8), st.integers(0, 12))
def test_a_projection_of_a_runs_tail_equals_the_projection_of_the_whole_run(
    steps: list[tuple[str, list[tuple[str, int, str | None]]]], last_k: int, cut: int
) -> None:
    rows = _rows(steps)
    whole = project(rows, goal="g", last_k=last_k)
    assistants = [i for i, m in enumerate(rows) if m.role is Role.ASSISTANT]
    # Any tail that starts at a step and still holds the last K steps, told how many steps came before it.
    start = assistants[min(cut, len(assistants) - 1)] if assistants else 0
    start = min(start, tail_start(rows, last_k)) if last_k else start
    before = sum(1 for m in rows[:start] if m.role is Role.ASSISTANT)
    tail = project(rows[start:], goal="g", last_k=last_k, steps_before=before)
    assert tail.steps == whole.steps
    assert tail.text == whole.text and tail.state_hash == whole.state_hash


def test_tail_start_walks_back_to_the_oldest_kept_step_and_no_further_than_lo() -> None:
    rows = _rows([("one", [("a", 1, "r")]), ("two", []), ("three", [("b", 2, "s")])])
    assert tail_start(rows, 2) == 3  # the second step's row: [user, step 1, its result, step 2, step 3, result]
    assert tail_start(rows, 9) == 0
    assert tail_start(rows, 9, lo=2) == 2
    assert tail_start(rows, 0) == len(rows)


def _call(name: str, arg: int) -> Message:
    return Message(Role.ASSISTANT, "", (ToolCall(name, {"x": arg}, id=f"{name}{arg}"),))


def test_repeats_counts_the_latest_identical_calls_back_to_the_first_different_one() -> None:
    rows = [_call("a", 1), _call("a", 2), Message(Role.USER, "more"), _call("a", 2), _call("a", 2)]
    assert Streak.of(rows).count == 3
    assert Streak.of([*rows, _call("b", 2)]).count == 1
    assert Streak.of([Message(Role.USER, "no calls")]).count == 0
    both = Message(Role.ASSISTANT, "", (ToolCall("a", {"x": 2}, id="p"), ToolCall("a", {"x": 2}, id="q")))
    assert Streak.of([*rows, both]).count == 5


class Recording:
    """Answers every question 'no' and keeps the turn projections it was shown."""

    name = "recording"

    def __init__(self) -> None:
        self.turns: list[Projection] = []

    async def evaluate(self, projection: Projection, questions: QuestionSet) -> Answers:
        if projection.pending is None:
            self.turns.append(projection)
        answers = {}
        for c in questions.conditions:
            if isinstance(c.question, YesNo):
                answers[c.name] = Answer({"yes": 0.0, "no": 1.0})
            else:
                quiet = next(x for x in c.question.labels if x not in c.fires_on)
                answers[c.name] = Answer({x: float(x == quiet) for x in c.question.labels})
        return Answers("recording", "1", answers)


@tool(risk="read_only")
def search(q: str) -> str:
    """Search."""
    return f"results for {q}"


async def test_each_turn_sees_its_last_steps_numbered_within_its_own_run() -> None:
    evaluator = Recording()
    model = FunctionModel(
        lambda r: Reply(tool_calls=[ToolCall("search", {"q": f"q{r.step}"})]) if r.step < 12 else Reply("done")
    )
    agent = Agent("g", "Do it.", model, tools=[search], guardian=Guardian(evaluator, history_steps=3))
    runner = Runner()
    await runner.run(agent, "first task", session_id="s")
    evaluator.turns.clear()
    await runner.run(agent, "second task", session_id="s")  # a second run: its steps count from 1 again
    assert len(evaluator.turns) == 12
    for step, projection in enumerate(evaluator.turns, start=1):
        shown = list(range(max(1, step - 2), step + 1))
        assert [s.step for s in projection.steps] == shown
        assert projection.goal == "second task"
        for s in projection.steps[:-1] if step == 12 else projection.steps:
            assert s.calls[0].result == f"results for q{s.step}"


@tool
def lookup(q: str) -> str:
    """Look up (no declared risk: the risk gate asks the evaluator)."""
    return f"found {q}"


async def test_a_call_after_one_the_step_did_not_offer_is_judged_on_the_reply_itself() -> None:
    """The risk gate of every call of a reply reads that reply as the latest step, also after a call the step's
    plan left out was answered with an error row (that row once took the reply's place for the calls after it)."""
    pending: list[Projection] = []

    class Gate(Recording):
        async def evaluate(self, projection: Projection, questions: QuestionSet) -> Answers:
            if projection.pending is not None:
                pending.append(projection)
            return await super().evaluate(projection, questions)

    calls = (ToolCall("search", {"q": "a"}, id="c1"), ToolCall("lookup", {"q": "b"}, id="c2"))
    model = FunctionModel(lambda r: Reply("checking both", tool_calls=calls) if r.step == 1 else Reply("done"))
    agent = Agent(
        "g",
        "Do it.",
        model,
        tools=[search, lookup],
        guardian=Guardian(Gate()),
        prepare_step=lambda ctx: StepPlan(tools=["lookup"]),
    )
    result = await Runner().run(agent, "task")
    assert result.status == "completed"
    assert [p.pending.name for p in pending if p.pending is not None] == ["lookup"]
    latest = pending[0].steps[-1]
    assert latest.text == "checking both" and [c.tool for c in latest.calls] == ["search", "lookup"]
