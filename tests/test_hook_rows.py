"""No user hook that is handed logged rows can change, by changing them in place, what the model is sent next or
what the log records: each hook below mutates every call's arguments (nested lists too) and every row's metadata
it can reach, on a SQLite log on disk, over two runs of one session."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from stopwise import Agent, Guardrails, Pass, Runner, SQLiteStore, tool
from stopwise.events import Event
from stopwise.history import HistoryRecord
from stopwise.messages import Message, Reply, Role, ToolCall
from stopwise.models import FunctionModel, ModelRequest
from stopwise.records import parse_records
from stopwise.step_plan import StepContext
from stopwise.stop.guard import Continue, StopGuard, StopGuardContext
from stopwise.stop.max_steps import MaxStepsContext


@tool
def tagged_draft(topic: str, tags: list[str]) -> str:
    """Write a tagged draft note."""
    return f"Draft: {topic} {tags}"


def mutate(rows: Iterable[Message]) -> None:
    """Change every call's arguments, nested list included, and every row's metadata of ``rows``."""
    for m in rows:
        m.metadata["changed"] = True  # type: ignore[index]
        mutate_calls(m.tool_calls)


def mutate_calls(calls: Iterable[ToolCall]) -> None:
    for c in calls:
        tags = c.args.get("tags")
        if isinstance(tags, list):
            tags.append("changed")
        c.args["topic"] = "changed"  # type: ignore[index]


def shown(messages: Iterable[Message]) -> list[str]:
    """Every call's arguments and every row's metadata of ``messages``, as text."""
    rows = list(messages)
    return [json.dumps(c.args) for m in rows for c in m.tool_calls] + [
        json.dumps(dict(m.metadata), sort_keys=True) for m in rows
    ]


def changed(texts: Iterable[str]) -> list[str]:
    return [t for t in texts if "changed" in t]


def calls_since_user(request: ModelRequest) -> int:
    """How many replies with calls ``request`` holds after its last user row."""
    since = 0
    for m in reversed(request.messages):
        if m.role is Role.USER:
            break
        since += m.role is Role.ASSISTANT and bool(m.tool_calls)
    return since


def drafting(requests: list[list[str]]) -> FunctionModel:
    """Two tagged drafts after each user row, then an answer; every request is kept as ``shown`` text."""

    def reply(request: ModelRequest) -> Reply:
        requests.append(shown(request.messages))
        if calls_since_user(request) < 2:
            return Reply(tool_calls=[ToolCall("tagged_draft", {"topic": f"take {len(requests)}", "tags": ["a"]})])
        return Reply("done")

    return FunctionModel(reply)


def mutating_guardrail(ctx: Any) -> Pass:
    """A guardrail that changes every row of its context in place, and the call it judges where it has one."""
    mutate(ctx.messages)
    if getattr(ctx, "tool_call", None) is not None:
        mutate_calls([ctx.tool_call])
    return Pass()


async def two_runs(path: Path, runner_kwargs: dict[str, Any] | None = None, **agent_kwargs: Any) -> list[str]:
    """Two runs of one session with the hook; what of it changed in the requests, the results and the log."""
    requests: list[list[str]] = []
    seen: list[str] = []
    async with SQLiteStore(path) as store:
        agent = Agent("a", "", drafting(requests), tools=[tagged_draft], **agent_kwargs)
        runner = Runner(store, **(runner_kwargs or {}))
        for prompt in ("go", "again"):
            result = await runner.run(agent, prompt, session_id="s")
            assert result.status == "completed", result.error
            seen += shown(result.messages)
    async with SQLiteStore(path) as store:
        snapshot = await store.load_session("s")
    assert snapshot is not None
    assert len(requests) >= 6  # both runs made their calls: the hooks had rows to change
    return changed([t for r in requests for t in r] + seen + shown(snapshot.messages()))


async def test_prepare_step_that_mutates_every_row_changes_neither_the_next_request_nor_the_log(
    tmp_path: Path,
) -> None:
    def plan(ctx: StepContext) -> None:
        mutate(ctx.messages)

    assert await two_runs(tmp_path / "log.db", prepare_step=plan) == []


async def test_a_history_processor_that_mutates_rows_in_place_changes_neither_the_next_request_nor_the_log(
    tmp_path: Path,
) -> None:
    def processor(messages: Sequence[Message]) -> list[Message]:
        mutate(messages)
        return list(messages)

    assert await two_runs(tmp_path / "log.db", history_processors=[processor]) == []


async def test_a_history_processor_that_returns_new_rows_still_changes_what_the_model_is_sent(tmp_path: Path) -> None:
    requests: list[list[str]] = []

    def processor(messages: Sequence[Message]) -> list[Message]:
        return [*messages[:-1], Message(messages[-1].role, messages[-1].content, metadata={"note": "processed"})]

    async with SQLiteStore(tmp_path / "log.db") as store:
        agent = Agent("a", "", drafting(requests), tools=[tagged_draft], history_processors=[processor])
        result = await Runner(store).run(agent, "go", session_id="s")
    assert result.status == "completed"
    assert all(r[-1] == json.dumps({"note": "processed"}) for r in requests)
    assert [t for t in shown(result.messages) if "processed" in t] == []


async def test_a_history_processor_passing_rows_on_is_recorded_as_keeping_them_not_adding_any(tmp_path: Path) -> None:
    # Rows are matched by identity: a processor handed copies still keeps the logged rows it passes on.
    def keep_all(messages: Sequence[Message]) -> list[Message]:
        return list(messages)

    async with SQLiteStore(tmp_path / "log.db") as store:
        agent = Agent("a", "", drafting([]), tools=[tagged_draft], history_processors=[keep_all])
        result = await Runner(store).run(agent, "go", session_id="s")
        snapshot = await store.load_session("s")
    assert result.status == "completed" and snapshot is not None
    histories = [r for e in snapshot.entries for r in parse_records(e.records) if isinstance(r, HistoryRecord)]
    assert [(h.dropped, h.added, h.sent) for h in histories] == [((), 0, 1), ((), 0, 3), ((), 0, 5)]


async def test_an_input_guardrail_that_mutates_every_row_changes_neither_the_next_request_nor_the_log(
    tmp_path: Path,
) -> None:
    assert await two_runs(tmp_path / "log.db", guardrails=Guardrails(on_input=mutating_guardrail)) == []


async def test_a_tool_call_guardrail_that_mutates_every_row_changes_neither_the_next_request_nor_the_log(
    tmp_path: Path,
) -> None:
    assert await two_runs(tmp_path / "log.db", guardrails=Guardrails(on_tool_call=mutating_guardrail)) == []


async def test_a_tool_result_guardrail_that_mutates_every_row_changes_neither_the_next_request_nor_the_log(
    tmp_path: Path,
) -> None:
    assert await two_runs(tmp_path / "log.db", guardrails=Guardrails(on_tool_result=mutating_guardrail)) == []


async def test_an_output_guardrail_that_mutates_every_row_changes_neither_the_next_request_nor_the_log(
    tmp_path: Path,
) -> None:
    assert await two_runs(tmp_path / "log.db", guardrails=Guardrails(on_output=mutating_guardrail)) == []


async def test_a_stop_guard_that_mutates_every_row_changes_neither_the_next_request_nor_the_log(
    tmp_path: Path,
) -> None:
    def check(ctx: StopGuardContext) -> Continue | None:
        mutate(ctx.messages)
        mutate(ctx.run_messages)
        return Continue("check again") if ctx.continues_used == 0 else None

    assert await two_runs(tmp_path / "log.db", stop_guard=StopGuard(check)) == []


async def test_an_on_event_hook_that_mutates_every_row_it_is_shown_changes_neither_the_next_request_nor_the_log(
    tmp_path: Path,
) -> None:
    def on_event(agent: Agent, event: Event) -> None:
        for name in ("reply", "call", "message"):
            value = getattr(event, name, None)
            if isinstance(value, Message):
                mutate([value])
            elif isinstance(value, ToolCall):
                mutate_calls([value])
            elif isinstance(value, Reply):
                mutate_calls(value.tool_calls)

    assert await two_runs(tmp_path / "log.db", {"on_event": on_event}) == []


async def test_a_max_steps_handler_that_mutates_every_row_changes_neither_the_next_request_nor_the_log(
    tmp_path: Path,
) -> None:
    requests: list[list[str]] = []

    def handler(ctx: MaxStepsContext) -> str:
        mutate(ctx.messages)
        return "stopped"

    async with SQLiteStore(tmp_path / "log.db") as store:
        agent = Agent("a", "", drafting(requests), tools=[tagged_draft], max_steps=1, on_max_steps=handler)
        runner = Runner(store)
        first = await runner.run(agent, "go", session_id="s")
        await runner.run(agent, "again", session_id="s")
        snapshot = await store.load_session("s")
    assert snapshot is not None and len(requests) == 2
    assert changed([t for r in requests for t in r] + shown(first.messages) + shown(snapshot.messages())) == []


async def test_a_needs_approval_predicate_that_mutates_the_args_changes_neither_the_next_request_nor_the_log(
    tmp_path: Path,
) -> None:
    def risky(args: dict[str, Any]) -> bool:
        mutate_calls([ToolCall("tagged_draft", args)])
        return False

    @tool(needs_approval=risky)
    def tagged_draft(topic: str, tags: list[str]) -> str:
        """Write a tagged draft note."""
        return f"Draft: {topic} {tags}"

    requests: list[list[str]] = []
    async with SQLiteStore(tmp_path / "log.db") as store:
        agent = Agent("a", "", drafting(requests), tools=[tagged_draft])
        result = await Runner(store).run(agent, "go", session_id="s")
        snapshot = await store.load_session("s")
    assert result.status == "completed" and snapshot is not None and len(requests) == 3
    assert changed([t for r in requests for t in r] + shown(result.messages) + shown(snapshot.messages())) == []


async def test_a_tool_that_mutates_its_arguments_changes_neither_the_next_request_nor_the_log(tmp_path: Path) -> None:
    @tool
    def tagged_draft(topic: str, tags: list[str]) -> str:
        """Write a tagged draft note."""
        tags.append("changed")
        return f"Draft: {topic}"

    requests: list[list[str]] = []
    async with SQLiteStore(tmp_path / "log.db") as store:
        agent = Agent("a", "", drafting(requests), tools=[tagged_draft])
        result = await Runner(store).run(agent, "go", session_id="s")
        snapshot = await store.load_session("s")
    assert result.status == "completed" and snapshot is not None and len(requests) == 3
    assert changed([t for r in requests for t in r] + shown(result.messages) + shown(snapshot.messages())) == []
