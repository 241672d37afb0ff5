"""User code is handed copies: what it changes in place reaches nothing logged. Each callable a user hands stopwise
that the hooks' and models' tests (``test_hook_rows``, ``test_model_rows``) do not cover changes, in place, every
list and dict it is handed (a tool its arguments and the values it returned; a custom evaluator its projection;
an ``on_event`` observer every event; an output validator the output; a peer's tool-result guardrail the peer's
result), and the run (in memory and in a SQLite file, to its approval and the resumed leg after) leaves the log,
the model's requests, the results and the guardian's decisions as the same run without the meddling does."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from stopwise import Agent, Guardian, Guardrails, MemoryStore, Modify, Pass, Risk, Runner, tool
from stopwise.events import Event, ModelReplied, RunFinished, ToolCalled, ToolReturned
from stopwise.guardian.conditions import QuestionSet
from stopwise.guardian.evaluators.rule import RuleEvaluator
from stopwise.guardian.guardian import _evaluate
from stopwise.guardian.projection import Projection
from stopwise.messages import Reply, Role, ToolCall
from stopwise.models import FunctionModel, ModelRequest
from stopwise.result import RunStatus
from stopwise.row_copies import own_value
from test_hook_rows import changed, mutate, mutate_calls, shown
from test_model_rows import Observed, Scripted, observe, opened, publish, tagged_draft

KINDS = pytest.mark.parametrize("kind", ["memory", "sqlite"])


def texts(seen: Observed) -> list[str]:
    """Everything of a run that could show a change: the arguments, metadata and contents of the log's rows, of
    both results' rows, of the rows the hooks were shown, and the outputs."""
    rows = [*seen.log, *(m for r in seen.results for m in r.messages)]
    return (
        [t for h in seen.hooks for t in h]
        + shown(rows)
        + [m.content for m in rows]
        + [json.dumps(r.output, default=str) for r in seen.results]
    )


def guardian_saw(seen: Observed) -> list[tuple[int, str, str, str, Any]]:
    """What the guardian projected (its state hash), decided, and read besides (repeats, replans, hysteresis)."""
    return [(d.step, d.kind, d.state_hash, d.outcome.value, d.inputs) for d in seen.decisions]


async def same_as_clean(
    tmp_path: Path, kind: str, meddling: dict[str, Any], clean: dict[str, Any], *, results: bool = True
) -> Observed:
    """The run with the meddling code and with its well-behaved twin: the log, the requests, the results (unless
    ``results`` is false: the meddling code was handed them) and the guardian's decisions are the same, and no
    text of the meddling run shows a change."""
    async with opened(kind, tmp_path / "clean.db") as store:
        twin = await observe(store, Scripted(meddle=False), **clean)
    async with opened(kind, tmp_path / "log.db") as store:
        meddled = Scripted(meddle=False)
        seen = await observe(store, meddled, **meddling)
    assert len(meddled.requests) == 4 and len(seen.decisions) >= 4
    assert changed(t for r in meddled.requests for t in r) == []
    if not results:
        seen.results = []
    assert changed(texts(seen)) == []
    assert seen.log == twin.log
    assert guardian_saw(seen) == guardian_saw(twin)
    return seen


# --- tools -----------------------------------------------------------------------------------------------------


def drafting(*, meddle: bool) -> tuple[Any, Any]:
    """A draft and a publish tool whose ``tags`` are untyped (``Any``: pydantic hands the argument itself to the
    function, not a copy); with ``meddle`` each changes its arguments in place and returns."""

    @tool(risk=Risk.READ_ONLY, name="tagged_draft")
    def draft(topic: str, tags: Any) -> str:
        """Write a tagged draft note."""
        if meddle:
            tags.append("changed")
        return f"Draft: {topic}"

    @tool(risk=Risk.READ_ONLY, needs_approval=True, name="publish")
    def publish_it(topic: str, tags: Any) -> str:
        """Publish a tagged note."""
        if meddle:
            tags.append("changed")
        return f"Published: {topic}"

    return draft, publish_it


@KINDS
async def test_a_tool_that_changes_its_arguments_in_place_changes_neither_the_log_nor_the_requests_nor_the_guardian(
    tmp_path: Path, kind: str
) -> None:
    await same_as_clean(tmp_path, kind, {"tools": drafting(meddle=True)}, {"tools": drafting(meddle=False)})


async def test_a_tool_that_changes_its_arguments_in_place_still_counts_as_repeating_the_same_call() -> None:
    # The guardian's repeat count compares the logged arguments: a tool that changed them would make three
    # identical calls look different.
    def same_call(request: ModelRequest) -> Reply:
        calls = sum(len(m.tool_calls) for m in request.messages)
        return Reply(tool_calls=[ToolCall("tagged_draft", {"topic": "x", "tags": ["a"]})]) if calls < 3 else Reply("ok")

    ran: list[int] = []

    @tool(risk=Risk.READ_ONLY)
    def tagged_draft(topic: str, tags: Any) -> str:
        """Write a tagged draft note; marks its arguments with how many times it ran."""
        ran.append(1)
        tags.append(f"changed {len(ran)}")
        return f"Draft: {topic}"

    store = MemoryStore()
    agent = Agent("a", "", FunctionModel(same_call), tools=[tagged_draft], guardian=Guardian())
    result = await Runner(store).run(agent, "go", session_id="s")
    assert result.status is RunStatus.COMPLETED, result.error
    turns = [d for d in result.decisions if d.kind == "turn"]
    assert [d.inputs.repeats for d in turns] == [1, 2, 3, 3]  # the answer's turn: the last call's count


@KINDS
async def test_a_tool_that_changes_a_value_it_returned_later_does_not_change_the_logged_result(
    tmp_path: Path, kind: str
) -> None:
    returned: list[dict[str, Any]] = []

    def keeping(meddle: bool) -> tuple[Any, Any]:
        @tool(risk=Risk.READ_ONLY, name="tagged_draft")
        def draft(topic: str, tags: list[str]) -> dict[str, Any]:
            """Write a tagged draft note; keeps what it returned, and changes all of it on its next call."""
            for value in returned if meddle else ():
                value["tags"].append("changed")
                value["topic"] = "changed"
            returned.append({"topic": topic, "tags": tags})
            return returned[-1]

        return draft, publish

    await same_as_clean(tmp_path, kind, {"tools": keeping(True)}, {"tools": keeping(False)})
    assert len(returned) == 4  # two drafts in each run: the later one changed the earlier


# --- the guardian's evaluator ------------------------------------------------------------------------------------


def meddle_with(projection: Projection) -> None:
    """Change every call's arguments of ``projection``, the proposed call's too."""
    for step in projection.steps:
        for call in step.calls:
            call.args["topic"] = "changed"
            call.args["tags"].append("changed")
    if projection.pending is not None:
        mutate_calls([projection.pending])


class Meddling:
    """A custom evaluator: the rule evaluator's answers, after which (``meddle``) it changes the projection."""

    def __init__(self, meddle: bool) -> None:
        self.meddle = meddle
        self.rules = RuleEvaluator()
        self.asked = 0

    async def evaluate(self, projection: Projection, questions: QuestionSet) -> Any:
        answers = await self.rules.evaluate(projection, questions)
        self.asked += 1
        if self.meddle:
            meddle_with(projection)
        return answers


class MeddlingRules(RuleEvaluator):
    """A subclass of stopwise's own evaluator, defined outside stopwise: user code too."""

    def __init__(self, meddle: bool) -> None:
        super().__init__()
        self.meddle = meddle
        self.asked = 0

    async def evaluate(self, projection: Projection, questions: QuestionSet) -> Any:
        answers = await super().evaluate(projection, questions)
        self.asked += 1
        if self.meddle:
            meddle_with(projection)
        return answers


@KINDS
@pytest.mark.parametrize("evaluator", [Meddling, MeddlingRules])
async def test_an_evaluator_that_changes_its_projection_changes_neither_the_log_nor_the_requests_nor_the_decisions(
    tmp_path: Path, kind: str, evaluator: Any
) -> None:
    meddling = evaluator(meddle=True)
    clean = {"guardian": Guardian(evaluator=evaluator(meddle=False))}
    await same_as_clean(tmp_path, kind, {"guardian": Guardian(evaluator=meddling)}, clean)
    assert meddling.asked >= 6  # it was handed the calls' and the turns' projections


# --- on_event: what the events carry ---------------------------------------------------------------------------


def meddling_observer(events: list[str]) -> Any:
    """An ``on_event`` observer that changes everything an event carries in place: the reply's calls, the call,
    the tool row, and the result's rows, state and pending calls."""

    def on_event(agent: Agent, event: Event) -> None:
        events.append(type(event).__name__)
        if isinstance(event, ModelReplied):
            mutate_calls(event.reply.tool_calls)
        elif isinstance(event, ToolCalled):
            mutate_calls([event.call])
        elif isinstance(event, ToolReturned):
            mutate_calls([event.call])
            mutate([event.message])
        elif isinstance(event, RunFinished):
            mutate(event.result.messages)
            for p in event.result.pending:
                mutate_calls([ToolCall(p.tool, p.args)])  # type: ignore[arg-type]
            for value in event.result.state.values():
                if isinstance(value, list):
                    value.append("changed")

    return on_event


@KINDS
async def test_an_on_event_observer_that_changes_what_events_carry_changes_neither_the_log_nor_the_resumed_leg(
    tmp_path: Path, kind: str
) -> None:
    events: list[str] = []
    # The results are the ones the observer was handed (and changed): the log and the resumed leg are checked.
    await same_as_clean(tmp_path, kind, {"runner": {"on_event": meddling_observer(events)}}, {}, results=False)
    assert {"ModelReplied", "ToolCalled", "ToolReturned", "RunFinished"} <= set(events)


@KINDS
async def test_a_caller_that_changes_the_rows_of_a_result_changes_neither_the_log_nor_the_next_run(
    tmp_path: Path, kind: str
) -> None:
    requests: list[list[str]] = []

    def reply(request: ModelRequest) -> Reply:
        requests.append(shown(request.messages))
        if request.messages[-1].role is Role.USER:
            return Reply(tool_calls=[ToolCall("tagged_draft", {"topic": "x", "tags": ["a"]})])
        return Reply("ok")

    async with opened(kind, tmp_path / "log.db") as store:
        agent = Agent("a", "", FunctionModel(reply), tools=[tagged_draft])
        runner = Runner(store)
        first = await runner.run(agent, "go", session_id="s")
        mutate(first.messages)
        second = await runner.run(agent, "again", session_id="s")
        snapshot = await store.load_session("s")
    assert second.status is RunStatus.COMPLETED and snapshot is not None
    assert len(requests) == 4
    assert changed(t for r in requests[2:] for t in r) == []
    assert changed(shown(snapshot.messages()) + shown(second.messages)) == []


# --- approvals ---------------------------------------------------------------------------------------------------


async def test_a_reviewer_that_changes_the_arguments_it_modified_a_call_with_later_changes_nothing_logged() -> None:
    store = MemoryStore()  # the store that keeps the rows themselves
    agent = Agent("a", "", Scripted(meddle=False), tools=[tagged_draft, publish])
    first = await Runner(store).run(agent, "go", session_id="s")
    tags = ["a"]
    modified = {"topic": "final", "tags": tags}
    second = await Runner(store).resume(agent, "s", {first.pending[0].call_id: Modify(modified)})
    tags.append("changed")
    modified["topic"] = "changed"
    snapshot = await store.load_session("s")
    assert second.status is RunStatus.COMPLETED and snapshot is not None
    assert "Published: final ['a']" in [m.content for m in snapshot.messages()]
    assert changed(shown(snapshot.messages()) + [m.content for m in snapshot.messages()]) == []


# --- output validators ------------------------------------------------------------------------------------------


@tool(risk=Risk.READ_ONLY)
def summary(topic: str, tags: list[str]) -> dict[str, Any]:
    """The run's summary: ends the run (a stop-at tool)."""
    return {"topic": topic, "tags": tags}


@KINDS
async def test_an_output_validator_that_changes_the_output_in_place_changes_neither_the_output_nor_the_log(
    tmp_path: Path, kind: str
) -> None:
    handed: list[Any] = []

    def validator(output: Any) -> None:
        handed.append(output)
        output["tags"].append("changed")
        output["topic"] = "changed"

    def reply(request: ModelRequest) -> Reply:
        return Reply(tool_calls=[ToolCall("summary", {"topic": "x", "tags": ["a"]})])

    async with opened(kind, tmp_path / "log.db") as store:
        agent = Agent(
            "a", "", FunctionModel(reply), tools=[summary], stop_at_tools=["summary"], output_validators=[validator]
        )
        result = await Runner(store).run(agent, "go", session_id="s")
        snapshot = await store.load_session("s")
        stored = await store.get_run(result.run_id)
    assert result.status is RunStatus.COMPLETED and snapshot is not None and stored is not None
    assert handed and result.output == {"topic": "x", "tags": ["a"]} == stored.output
    assert changed(shown(snapshot.messages()) + [m.content for m in snapshot.messages()]) == []


# --- a peer's tool-result guardrail ---------------------------------------------------------------------------


async def test_a_pydantic_ai_tool_result_guardrail_that_changes_the_result_in_place_changes_neither_its_history() -> (
    None
):
    pytest.importorskip("pydantic_ai", reason="needs the 'pydantic-ai' extra")
    from pydantic_ai import Agent as PeerAgent
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import AgentInfo
    from pydantic_ai.models.function import FunctionModel as PeerModel

    from stopwise.integrations.pydantic_ai import StopwiseCapability

    sent: list[str] = []
    judged: list[Any] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        sent.append(repr(messages))
        if not any(isinstance(m, ModelResponse) for m in messages):
            return ModelResponse(parts=[ToolCallPart("draft", {"topic": "x", "tags": ["a"]}, tool_call_id="c1")])
        return ModelResponse(parts=[TextPart("done")])

    def meddle(ctx: Any) -> Pass:
        judged.append(ctx.result)
        ctx.result["tags"].append("changed")
        ctx.result["topic"] = "changed"
        return Pass()

    store = MemoryStore()
    capability = StopwiseCapability(store=store, guardrails=Guardrails(on_tool_result=meddle))
    agent: PeerAgent[None, str] = PeerAgent(PeerModel(model), capabilities=[capability])

    @agent.tool_plain
    def draft(topic: str, tags: list[str]) -> dict[str, Any]:
        """Write a tagged draft note."""
        return {"topic": topic, "tags": tags}

    result = await agent.run("go")
    assert result.output == "done" and len(sent) == 2 and judged
    assert "changed" not in repr(result.all_messages()) + "".join(sent)


# --- what is deliberately not copied -----------------------------------------------------------------------------


async def test_stopwise_own_evaluators_are_handed_the_projection_itself_and_any_other_a_copy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The copy costs about 30 us a question set; stopwise's evaluators only read the projection.
    handed: list[Projection] = []

    async def reading(self: Any, projection: Projection, questions: QuestionSet) -> Any:
        handed.append(projection)
        return None

    monkeypatch.setattr(RuleEvaluator, "evaluate", reading)
    monkeypatch.setattr(Meddling, "evaluate", reading)
    pending = ToolCall("tagged_draft", {"topic": "x", "tags": ["a"]})
    projection = Guardian().project([], goal="g", pending=pending)
    questions = QuestionSet(Guardian().turn_conditions, "1")
    for evaluator in (RuleEvaluator(), Meddling(meddle=False)):
        await _evaluate(evaluator, projection, questions)
    ours, theirs = handed
    assert ours is projection
    assert theirs is not projection and theirs.pending == pending and theirs.pending is not pending
    assert theirs.pending is not None and theirs.pending.args["tags"] is not pending.args["tags"]


def test_a_peer_result_has_its_lists_and_dicts_copied_and_an_object_of_its_own_type_shared() -> None:
    # A peer's tool may return any object; only JSON's containers are copied (a deep copy of any object could
    # fail, or cost without bound).
    class Report:
        pass

    report = Report()
    value = {"rows": [{"n": 1}], "report": report}
    copy = own_value(value)
    assert copy == value and copy["rows"] is not value["rows"] and copy["rows"][0] is not value["rows"][0]
    assert copy["report"] is report
