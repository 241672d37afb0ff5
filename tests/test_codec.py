"""The stores' JSON codec: a log entry's rows are written as ``messages.dump_messages`` writes them."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from stopwise.messages import Message, Role, ToolCall, Usage, dump_messages, load_messages
from stopwise.store._codec import ROW_FIELDS, dump_rows, dump_usage, usage_from

ROWS: list[tuple[Message, ...]] = [
    (Message.user("hi"),),
    (Message(Role.SYSTEM),),
    (Message(Role.ASSISTANT, tool_calls=(ToolCall("bump", {"n": 3}),)),),
    (Message(Role.TOOL, "4", tool_call_id="c1", metadata={"content_encoding": "text"}),),
    (Message(Role.USER, 'é \u2028 \U0001f600 "quoted" \\ back'), Message(Role.ASSISTANT, "two rows")),
    (
        Message(
            Role.ASSISTANT,
            "text and calls",
            tool_calls=(ToolCall("raw", "not{json", id="a", wire_id="w"), ToolCall("empty", {}, id="b")),
        ),
    ),
    (Message(Role.TOOL, "", tool_call_id="", metadata={"tool_error": True, "nested": [1, 2.5, None, {"k": "v"}]}),),
    (Message(Role.ASSISTANT, tool_calls=(ToolCall("deep", {"a": {"b": [True, False, 1e300, -0.0]}}, id="c"),)),),
    (),
]


@pytest.mark.parametrize("rows", ROWS)
def test_the_store_writes_rows_as_dump_messages_does_and_reads_them_back(rows: tuple[Message, ...]) -> None:
    text = dump_rows(rows)
    assert text == dump_messages(rows).decode()
    assert load_messages(text) == rows


@pytest.mark.parametrize("cls", [Message, ToolCall])
def test_the_row_encoder_knows_every_field_of_a_row(cls: type[Any]) -> None:
    assert ROW_FIELDS[cls] == tuple(f.name for f in dataclasses.fields(cls))


def test_usage_is_written_with_every_field_it_has_and_read_back() -> None:
    counts = {f.name: n for n, f in enumerate(dataclasses.fields(Usage), start=1)}
    assert usage_from(dump_usage(Usage(**counts))) == Usage(**counts)
    assert dump_usage(Usage()) == "{}" and dump_usage(None) is None
