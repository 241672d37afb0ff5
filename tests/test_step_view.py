"""What a ``stop_when`` predicate sees: ``StepView.messages`` is the session's log up to and including the step's
own reply and its tool rows, in log order, on a fresh step, on one settled after an approval, and in a detached
view; so a predicate counting the log (the README's ``drafted_three_times``) fires on the step that made the count."""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

from stopwise import Agent, Approve, Reply, Runner, SQLiteStore, StepView, ToolCall, tool
from stopwise.messages import Message, Role
from stopwise.models import FunctionModel, ModelRequest, ScriptedModel

README = Path(__file__).resolve().parent.parent / "README.md"


@tool
def draft(topic: str) -> str:
    """Write a draft note."""
    return f"Draft: {topic}"


@tool(needs_approval=True)
def send(to: str) -> str:
    """Send the note (a reviewer approves each)."""
    return f"sent to {to}"


@tool
def tagged_draft(topic: str, tags: list[str]) -> str:
    """Write a tagged draft note."""
    return f"Draft: {topic} {tags}"


@tool(needs_approval=True)
def tagged_send(topic: str, tags: list[str]) -> str:
    """Send a tagged note (a reviewer approves each)."""
    return f"sent {topic} to {tags}"


def readme_predicate(name: str) -> Any:
    """The function ``name`` as the README defines it, compiled from the README's own text."""
    text = README.read_text(encoding="utf-8")
    for block in text.split("```python")[1:]:
        tree = ast.parse(block.split("```", 1)[0])
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and node.name == name:
                scope: dict[str, Any] = {"StepView": StepView}
                exec(compile(ast.Module([node], []), str(README), "exec"), scope)
                return scope[name]
    raise AssertionError(f"README.md defines no {name}")


def drafting(steps: int) -> ScriptedModel:
    return ScriptedModel([Reply(tool_calls=[ToolCall("draft", {"topic": f"take {i}"})]) for i in range(steps)])


async def test_the_readme_drafted_three_times_fires_on_the_step_that_wrote_the_third_draft() -> None:
    predicate = readme_predicate("drafted_three_times")
    result = await Runner().run(Agent("a", "Draft.", drafting(8), tools=[draft], stop_when=predicate), "go")
    assert result.completion_reason == "stop_when" and result.detail == "three drafts written"
    assert result.steps == 3


def watching(seen: list[StepView]) -> Any:
    def predicate(step: StepView) -> bool:
        seen.append(step)
        return False

    return predicate


def assert_holds_its_own_step(view: StepView, log: list[Message]) -> None:
    """The view is the committed log's first rows, and its last assistant row is the view's own reply."""
    assert list(view.messages) == log[: len(view.messages)]
    last = next(m for m in reversed(view.messages) if m.role is Role.ASSISTANT)
    assert last.tool_calls == tuple(view.reply.tool_calls) and last.content == view.reply.text
    after = list(view.messages)[list(view.messages).index(last) + 1 :]
    assert sorted(after, key=str) == sorted(view.tool_results, key=str)


async def test_a_predicate_sees_its_own_steps_reply_as_the_last_assistant_row_on_a_fresh_step() -> None:
    seen: list[StepView] = []
    result = await Runner().run(Agent("a", "", drafting(3), tools=[draft], stop_when=watching(seen)), "go")
    assert [v.number for v in seen] == [1, 2, 3]
    for view in seen:
        assert_holds_its_own_step(view, list(result.messages))
        assert view.messages[-1].role is Role.TOOL and view.messages[-2].tool_calls == view.reply.tool_calls


async def test_a_predicate_sees_its_own_steps_reply_once_after_an_approval() -> None:
    model = ScriptedModel([Reply(tool_calls=[ToolCall("send", {"to": "team"})]), Reply("done")])
    seen: list[StepView] = []
    agent = Agent("a", "", model, tools=[send], stop_when=watching(seen))
    runner = Runner()
    result = await runner.run(agent, "go", session_id="s")
    assert result.status == "suspended" and seen == []
    result = await runner.resume(agent, "s", decisions={p.call_id: Approve() for p in result.pending})
    assert result.status == "completed" and len(seen) == 1
    (view,) = seen
    assert_holds_its_own_step(view, list(result.messages))
    assert sum(1 for m in view.messages if m.tool_calls) == 1  # the logged reply is not shown twice
    assert [m.content for m in view.messages[-2:]] == ["", "sent to team"]


async def test_a_step_settled_after_an_approval_shows_its_rows_in_log_order_each_once() -> None:
    # ``send`` waits for the reviewer while ``draft`` runs: the draft's row is logged first, the send's on resume.
    calls = [ToolCall("send", {"to": "team"}, id="s1"), ToolCall("draft", {"topic": "x"}, id="d1")]

    def reply(request: ModelRequest) -> Reply:
        return Reply(tool_calls=calls) if len(request.messages) < 3 else Reply("done")

    seen: list[StepView] = []
    agent = Agent(
        "a", "", FunctionModel(reply), tools=[send, draft], stop_when=watching(seen), run_unapproved_siblings=True
    )
    runner = Runner()
    result = await runner.run(agent, "go", session_id="s")
    assert result.status == "suspended"
    result = await runner.resume(agent, "s", decisions={p.call_id: Approve() for p in result.pending})
    (view,) = seen
    assert_holds_its_own_step(view, list(result.messages))
    assert [m.tool_call_id for m in view.tool_results] == ["s1", "d1"]  # call order
    assert [m.tool_call_id for m in view.messages[-2:]] == ["d1", "s1"]  # log order
    assert sum(1 for m in view.messages if m.tool_call_id == "d1") == 1


def test_a_detached_view_adds_the_reply_row_and_the_rows_not_logged_yet() -> None:
    go = Message.user("go")
    reply = Reply("", [ToolCall("draft", {"topic": "x"}, id="a"), ToolCall("draft", {"topic": "y"}, id="b")])
    row = Message(Role.ASSISTANT, "", reply.tool_calls)
    a, b = (Message(Role.TOOL, f"draft {i}", tool_call_id=i) for i in "ab")

    fresh = StepView.detached(1, reply, [a, b], [go])
    assert list(fresh.messages) == [go, row, a, b]
    settled = StepView.detached(1, reply, [a, b], [go, row, b], reply_logged=True, logged={"b"})
    assert list(settled.messages) == [go, row, b, a] and settled.tool_results == (a, b)


def test_a_detached_views_reply_row_is_a_copy_a_predicate_cannot_change_the_log_through() -> None:
    reply = Reply("", [ToolCall("draft", {"topic": "x"}, id="a")])
    view = StepView.detached(1, reply, [], [])
    view.messages[-1].tool_calls[0].args["topic"] = "changed"
    assert reply.tool_calls[0].args == {"topic": "x"}


def mutating_every_call(step: StepView) -> bool:
    """A predicate that changes every call's arguments and every row's metadata it is shown, nested values too."""
    rows = [*step.messages, Message(Role.ASSISTANT, "", step.reply.tool_calls), *step.tool_results]
    for m in rows:
        m.metadata["changed"] = True  # type: ignore[index]
        for c in m.tool_calls:
            c.args["tags"].append("changed")  # type: ignore[index, union-attr]
            c.args["topic"] = "changed"  # type: ignore[index]
    return False


def sent_calls(request: ModelRequest) -> list[str]:
    """What the model is shown of every call in the request, and of every row's metadata, as text."""
    shown = [json.dumps(c.args) for m in request.messages for c in m.tool_calls]
    return shown + [json.dumps(dict(m.metadata), sort_keys=True) for m in request.messages]


async def logged_calls(path: Path, session: str) -> list[str]:
    async with SQLiteStore(path) as store:
        snapshot = await store.load_session(session)
    assert snapshot is not None
    rows = snapshot.messages()
    return [json.dumps(c.args) for m in rows for c in m.tool_calls] + [json.dumps(dict(m.metadata)) for m in rows]


def changed(shown: list[str]) -> list[str]:
    return [s for s in shown if "changed" in s]


async def test_a_predicate_that_mutates_every_calls_args_changes_neither_the_next_request_nor_the_log_fresh(
    tmp_path: Path,
) -> None:
    requests: list[list[str]] = []

    def reply(request: ModelRequest) -> Reply:
        requests.append(sent_calls(request))
        if len(requests) <= 3:
            return Reply(tool_calls=[ToolCall("tagged_draft", {"topic": f"take {len(requests)}", "tags": ["a"]})])
        return Reply("done")

    async with SQLiteStore(tmp_path / "log.db") as store:
        agent = Agent("a", "", FunctionModel(reply), tools=[tagged_draft], stop_when=mutating_every_call)
        result = await Runner(store).run(agent, "go", session_id="s")
    assert result.status == "completed" and len(requests) == 4
    assert [changed(r) for r in requests] == [[], [], [], []]
    assert requests[-1][:3] == [json.dumps({"topic": f"take {i}", "tags": ["a"]}) for i in (1, 2, 3)]
    assert changed([json.dumps(c.args) for m in result.messages for c in m.tool_calls]) == []
    assert changed(await logged_calls(tmp_path / "log.db", "s")) == []


async def test_a_predicate_that_mutates_every_calls_args_changes_neither_the_next_request_nor_the_log_settled(
    tmp_path: Path,
) -> None:
    # The settled step's own reply row is in the log already when the predicate sees it: the row it is shown of
    # it is a copy too.
    requests: list[list[str]] = []

    def reply(request: ModelRequest) -> Reply:
        requests.append(sent_calls(request))
        if len(requests) == 1:
            return Reply(tool_calls=[ToolCall("tagged_send", {"topic": "note", "tags": ["team"]})])
        return Reply("done")

    async with SQLiteStore(tmp_path / "log.db") as store:
        agent = Agent("a", "", FunctionModel(reply), tools=[tagged_send], stop_when=mutating_every_call)
        runner = Runner(store)
        result = await runner.run(agent, "go", session_id="s")
        assert result.status == "suspended"
        result = await runner.resume(agent, "s", decisions={p.call_id: Approve() for p in result.pending})
    assert result.status == "completed" and len(requests) == 2
    assert requests[1][0] == json.dumps({"topic": "note", "tags": ["team"]}) and changed(requests[1]) == []
    assert changed([json.dumps(c.args) for m in result.messages for c in m.tool_calls]) == []
    assert changed(await logged_calls(tmp_path / "log.db", "s")) == []


def test_a_views_shared_log_rows_read_as_equal_copies_with_every_field_kept() -> None:
    call = ToolCall("draft", {"topic": "x", "tags": ["a", {"k": [1]}]}, id="c1", wire_id="toolu_1")
    log = [
        Message(Role.ASSISTANT, "thinking é", [call], metadata={"origin": "model", "nested": {"a": [1]}}),
        Message(Role.TOOL, "ok", tool_call_id="c1", metadata={"tool_error": False}),
    ]
    view = StepView.detached(2, Reply("", [ToolCall("draft", {"topic": "y"}, id="c2")]), [], log)
    shown = list(view.messages[:2])
    assert shown == log and [m.tool_calls for m in shown] == [(call,), ()]
    assert shown[0] is not log[0] and shown[0].tool_calls[0].args is not call.args
    assert shown[0].tool_calls[0].args["tags"][1] is not call.args["tags"][1]  # type: ignore[index]
    assert shown[0].metadata["nested"] is not log[0].metadata["nested"]


async def test_a_whole_log_predicate_on_a_long_run_is_shown_one_copy_of_each_logged_row() -> None:
    # Each step adds two rows (the reply, the tool row), shown as the step's own copies on that step; every row
    # logged before a step is read through the run leg's copies, so it is copied once however many steps read it.
    steps = 150
    shown: list[list[Message]] = []  # held, so no copy is freed and its id reused

    def walks_the_whole_log(step: StepView) -> bool:
        shown.append(list(step.messages))
        return False

    agent = Agent("a", "", drafting(steps), tools=[draft], stop_when=walks_the_whole_log, max_steps=None)
    result = await Runner().run(agent, "go")
    assert len(shown) == steps and result.messages[0] == Message.user("go")
    logged_before_last = 1 + 2 * (steps - 1)  # the input row and every earlier step's two rows
    assert len({id(m) for rows in shown for m in rows}) == logged_before_last + 2 * steps
    assert shown[-1] == list(result.messages)[: len(shown[-1])]
    assert not any(m is r for m, r in zip(shown[-1], result.messages, strict=False))  # copies, not the log's rows
