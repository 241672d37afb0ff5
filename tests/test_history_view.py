"""``HistoryView``: the history handed to a step's readers is a view of the run's rows, not a copy, and reads as
an immutable tuple of messages does."""

from __future__ import annotations

import pickle

import pytest

from stopwise import Agent, FunctionModel, Guardrails, Reply, Runner, ToolCall, tool
from stopwise.history_view import HistoryView
from stopwise.messages import Message, Role
from stopwise.models.base import ModelRequest


def _rows(n: int) -> list[Message]:
    return [Message(Role.USER, f"m{i}") for i in range(n)]


def test_a_view_keeps_showing_the_rows_it_was_taken_of_when_the_log_grows() -> None:
    log = _rows(3)
    view = HistoryView.of_log(log)
    log.extend(_rows(2))
    assert len(view) == 3
    assert tuple(view) == tuple(log[:3])
    assert len(HistoryView.of_log(log)) == 5


def test_a_history_view_reads_like_the_tuple_of_its_rows() -> None:
    log = _rows(6)
    head, tail = (Message(Role.SYSTEM, "sys"),), (Message(Role.USER, "new"),)
    view = head + HistoryView.of_log(log, 4, tail)
    expected = head + tuple(log[:4]) + tail
    assert view == expected and expected == view
    assert not view != expected  # noqa: SIM202 - __ne__ is what this checks
    assert len(view) == len(expected)
    assert [view[i] for i in range(-len(view), len(view))] == [expected[i] for i in range(-len(view), len(view))]
    assert list(reversed(view)) == list(reversed(expected))
    with pytest.raises(TypeError):  # messages hold a metadata dict: neither is hashable
        hash(view)
    assert log[2] in view and log[5] not in view
    assert view.index(log[3]) == expected.index(log[3])
    for s in (slice(1, 4), slice(0, 6), slice(2, None), slice(None, -1), slice(5, 2), slice(0, 6, 2), slice(-3, None)):
        assert tuple(view[s]) == expected[s], s
    assert view + tail == expected + tail
    with pytest.raises(IndexError):
        view[len(view)]


def test_a_history_view_is_not_equal_to_a_list_as_a_tuple_is_not() -> None:
    rows = _rows(2)
    assert HistoryView(rows) != rows
    assert HistoryView(rows) == tuple(rows)


def test_a_history_view_cannot_be_changed() -> None:
    view = HistoryView(_rows(2))
    with pytest.raises(TypeError):
        view[0] = Message(Role.USER, "x")  # type: ignore[index]
    with pytest.raises(AttributeError):
        view.append(Message(Role.USER, "x"))  # type: ignore[attr-defined]


def test_a_view_past_the_end_of_its_log_is_refused() -> None:
    with pytest.raises(ValueError, match="outside"):
        HistoryView.of_log(_rows(2), 3)


def test_a_pickled_transcript_carries_only_the_rows_it_shows() -> None:
    log = _rows(5)
    view = HistoryView.of_log(log, 2)
    back = pickle.loads(pickle.dumps(view))
    assert back == tuple(log[:2]) and len(back._rows) == 0 and len(back._tail) == 2


async def test_the_model_and_the_guardrails_get_views_of_one_history_not_copies() -> None:
    @tool
    async def bump(n: int) -> int:
        """Add one."""
        return n + 1

    requests: list[ModelRequest] = []
    seen: list[object] = []

    def fn(request: ModelRequest) -> Reply:
        requests.append(request)
        if len(requests) < 4:
            return Reply(tool_calls=[ToolCall("bump", {"n": len(requests)})])
        return Reply(text="done")

    def watch(ctx: object) -> None:
        seen.append(ctx.messages)  # type: ignore[attr-defined]

    agent = Agent(
        name="t",
        instructions="be brief",
        model=FunctionModel(fn),
        tools=[bump],
        guardrails=Guardrails(on_tool_call=watch, on_tool_result=watch),
    )
    result = await Runner().run(agent, "go")
    assert result.status == "completed"
    # Every request shows the history as it was when the call was made, however the run went on after it.
    for k, request in enumerate(requests):
        assert isinstance(request.messages, HistoryView)
        assert request.messages[0].role is Role.SYSTEM
        assert len(request.messages) == 1 + 1 + 2 * k  # system, input, one reply and one result a step
        assert tuple(request.messages[1:]) == tuple(result.messages[: 1 + 2 * k])
    # The requests share the rows of one history: the later one holds the same objects the earlier one did.
    assert all(a is b for a, b in zip(requests[1].messages, requests[3].messages, strict=False))
    assert all(isinstance(m, HistoryView) for m in seen)
