"""The conversation vocabulary: messages, tool calls, replies, usage, and tool-row encoding."""

import dataclasses
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from stopwise import Message, Reply, Role, StopReason, ToolCall, Usage, decode_tool_result, transcript
from stopwise.messages import (
    AUTOMATED_LABEL,
    CONTENT_ENCODING,
    TOOL_ERROR,
    automated_feedback,
    dump_messages,
    encode_tool_result,
    error_tool_result,
    load_messages,
)

# --- Message -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("role", ["system", "user", "assistant", "tool"])
def test_message_accepts_each_role_as_a_string_and_normalises_it_to_role(role: str) -> None:
    msg = Message(role, "hello")
    assert msg.role is Role(role)
    assert msg.content == "hello"


def test_message_with_invalid_role_raises_naming_every_valid_role() -> None:
    with pytest.raises(ValueError, match="role") as info:
        Message("robot", "hi")
    text = str(info.value)
    assert "'robot'" in text
    for valid in ("system", "user", "assistant", "tool"):
        assert valid in text


def test_message_content_must_be_a_string() -> None:
    with pytest.raises(TypeError, match="content"):
        Message(Role.USER, 42)  # type: ignore[arg-type]


def test_message_defaults_have_no_tool_calls_no_call_id_and_empty_metadata() -> None:
    msg = Message(Role.ASSISTANT, "ok")
    assert msg.tool_calls == ()
    assert msg.tool_call_id is None
    assert dict(msg.metadata) == {}


def test_message_tool_calls_given_as_a_list_are_stored_as_a_tuple() -> None:
    call = ToolCall("search", {"q": "x"})
    msg = Message(Role.ASSISTANT, "", tool_calls=[call])  # type: ignore[arg-type]
    assert msg.tool_calls == (call,)


def test_message_user_and_system_constructors_set_the_role() -> None:
    assert Message.user("u") == Message(Role.USER, "u")
    assert Message.system("s") == Message(Role.SYSTEM, "s")


# --- ToolCall ------------------------------------------------------------------------------------------


def test_tool_call_without_id_gets_a_generated_unique_id() -> None:
    ids = {ToolCall("f", {}).id for _ in range(50)}
    assert len(ids) == 50
    assert all(isinstance(i, str) and i for i in ids)


def test_tool_call_with_id_none_gets_a_generated_id() -> None:
    call = ToolCall("f", {"a": 1}, id=None)  # type: ignore[arg-type]
    assert isinstance(call.id, str) and call.id


def test_tool_call_keeps_a_given_id() -> None:
    assert ToolCall("f", {}, id="call_abc").id == "call_abc"


def test_tool_call_args_default_to_an_empty_object() -> None:
    assert dict(ToolCall("f").args) == {}  # type: ignore[arg-type]


# --- Reply ---------------------------------------------------------------------------------------------


def test_reply_without_tool_calls_infers_end_turn() -> None:
    reply = Reply(text="done")
    assert reply.stop_reason is StopReason.END_TURN
    assert reply.tool_calls == ()
    assert reply.usage is None


def test_reply_with_tool_calls_infers_tool_use() -> None:
    reply = Reply(tool_calls=(ToolCall("f", {}),))
    assert reply.stop_reason is StopReason.TOOL_USE


def test_reply_keeps_an_explicit_stop_reason() -> None:
    assert Reply(text="cut", stop_reason=StopReason.MAX_TOKENS).stop_reason is StopReason.MAX_TOKENS
    with_calls = Reply(tool_calls=(ToolCall("f", {}),), stop_reason=StopReason.MAX_TOKENS)
    assert with_calls.stop_reason is StopReason.MAX_TOKENS


def test_reply_accepts_a_string_stop_reason_and_converts_it() -> None:
    reply = Reply(text="x", stop_reason="content_filter")  # type: ignore[arg-type]
    assert reply.stop_reason is StopReason.CONTENT_FILTER


def test_reply_tool_calls_given_as_a_list_are_stored_as_a_tuple() -> None:
    call = ToolCall("f", {})
    reply = Reply(tool_calls=[call])  # type: ignore[arg-type]
    assert reply.tool_calls == (call,)
    assert reply.stop_reason is StopReason.TOOL_USE


@pytest.mark.parametrize("reason", [StopReason.END_TURN, StopReason.STOP_SEQUENCE])
def test_reply_without_tool_calls_ending_end_turn_or_stop_sequence_is_a_natural_finish(
    reason: StopReason,
) -> None:
    assert Reply(text="answer", stop_reason=reason).is_natural_finish is True


@pytest.mark.parametrize(
    "reason",
    [StopReason.MAX_TOKENS, StopReason.CONTENT_FILTER, StopReason.REFUSAL, StopReason.ERROR, StopReason.TOOL_USE],
)
def test_reply_with_a_cut_or_failed_stop_reason_is_not_a_natural_finish(reason: StopReason) -> None:
    assert Reply(text="partial", stop_reason=reason).is_natural_finish is False


def test_reply_with_tool_calls_is_not_a_natural_finish_even_with_end_turn() -> None:
    reply = Reply(text="x", tool_calls=(ToolCall("f", {}),), stop_reason=StopReason.END_TURN)
    assert reply.is_natural_finish is False


# --- Usage ---------------------------------------------------------------------------------------------


def test_usage_adds_up_field_by_field_and_totals_tokens() -> None:
    total = Usage(10, 5, 1) + Usage(3, 2, 1)
    assert total == Usage(input_tokens=13, output_tokens=7, requests=2)
    assert total.total_tokens == 20


def test_usage_defaults_to_zero_so_it_can_start_a_sum() -> None:
    assert sum([Usage(1, 2, 1), Usage(4, 8, 1)], Usage()) == Usage(5, 10, 2)


# --- frozen values -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "attr", "new"),
    [
        (Message(Role.USER, "hi"), "content", "changed"),
        (ToolCall("f", {}, id="c1"), "id", "c2"),
        (Reply(text="x"), "text", "y"),
        (Usage(1, 2, 3), "input_tokens", 100),
    ],
)
def test_vocabulary_values_are_frozen(value: object, attr: str, new: object) -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(value, attr, new)


# --- tool results: the verbatim-string rule ------------------------------------------------------------


@pytest.mark.parametrize("text", ['{"a":1}', "42", '"quoted"', "", "true", "null", "[1, 2]", "plain text", " 7 "])
def test_string_result_is_stored_verbatim_with_text_marker(text: str) -> None:
    row = encode_tool_result(text, tool_call_id="c1")
    assert row.role is Role.TOOL
    assert row.tool_call_id == "c1"
    assert row.content == text
    assert row.metadata[CONTENT_ENCODING] == "text"
    assert TOOL_ERROR not in row.metadata


@pytest.mark.parametrize("text", ['{"a":1}', "42", '"quoted"', "", "null"])
def test_string_that_looks_like_json_decodes_back_to_the_same_string(text: str) -> None:
    decoded = decode_tool_result(encode_tool_result(text, tool_call_id="c1"))
    assert decoded == text
    assert isinstance(decoded, str)


@settings(max_examples=60)
@pytest.mark.slow
@given(st.text())
def test_any_string_result_round_trips_exactly_under_the_storable_text_rule(text: str) -> None:
    from stopwise.storable import storable_text

    row = encode_tool_result(text, tool_call_id="c")
    assert row.content == storable_text(text)  # the same text, unless it held a NUL or a lone surrogate
    assert decode_tool_result(row) == storable_text(text)


class _Point(BaseModel):
    x: int
    y: int


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({"a": 1, "b": [1, 2]}, {"a": 1, "b": [1, 2]}),
        ([1, "two", None], [1, "two", None]),
        (42, 42),
        (3.5, 3.5),
        (True, True),
        (False, False),
        (None, None),
        (_Point(x=1, y=2), {"x": 1, "y": 2}),
    ],
)
def test_non_string_result_is_stored_as_json_without_text_marker(value: object, expected: object) -> None:
    row = encode_tool_result(value, tool_call_id="c1")
    assert row.role is Role.TOOL
    assert row.tool_call_id == "c1"
    assert CONTENT_ENCODING not in row.metadata
    assert json.loads(row.content) == expected
    assert decode_tool_result(row) == expected


@pytest.mark.slow
@settings(max_examples=60)
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(),
        lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(), children, max_size=4),
        max_leaves=10,
    )
)
def test_any_json_value_result_round_trips_through_decode_under_the_storable_text_rule(value: object) -> None:
    from stopwise.storable import storable

    row = encode_tool_result(value, tool_call_id="c")
    assert decode_tool_result(row) == storable(value)


def test_unmarked_row_that_is_not_json_decodes_to_its_raw_text() -> None:
    old_row = Message(Role.TOOL, "result: ok, not json", tool_call_id="c1")
    assert decode_tool_result(old_row) == "result: ok, not json"


def test_unmarked_row_that_is_json_is_parsed() -> None:
    old_row = Message(Role.TOOL, '{"n": 3}', tool_call_id="c1")
    assert decode_tool_result(old_row) == {"n": 3}


def test_error_row_is_an_error_object_flagged_in_metadata() -> None:
    row = error_tool_result('bad "thing" happened', tool_call_id="c9")
    assert row.role is Role.TOOL
    assert row.tool_call_id == "c9"
    assert json.loads(row.content) == {"error": 'bad "thing" happened'}
    assert row.metadata[TOOL_ERROR] is True
    assert CONTENT_ENCODING not in row.metadata
    assert decode_tool_result(row) == {"error": 'bad "thing" happened'}


def test_text_marker_survives_the_store_codec_so_decode_still_returns_the_string() -> None:
    rows = (
        Message.user("hi"),
        Message(Role.ASSISTANT, "", tool_calls=(ToolCall("f", {"a": 1}, id="c1"),)),
        encode_tool_result('{"a":1}', tool_call_id="c1"),
        error_tool_result("boom", tool_call_id="c2"),
    )
    loaded = load_messages(dump_messages(rows))
    assert loaded == rows
    assert decode_tool_result(loaded[2]) == '{"a":1}'
    assert loaded[3].metadata[TOOL_ERROR] is True


# --- automated feedback and the transcript -------------------------------------------------------------


def test_automated_feedback_is_a_user_row_behind_the_exact_label() -> None:
    row = automated_feedback("your answer did not validate", source="output_check")
    assert AUTOMATED_LABEL == "Automated feedback from the application (this is not from the user): "
    assert row.content == AUTOMATED_LABEL + "your answer did not validate"
    assert row.role is Role.USER
    assert row.role is not Role.SYSTEM


def test_automated_feedback_is_marked_automated_hidden_and_external_input() -> None:
    row = automated_feedback("x", source="guard")
    assert row.metadata["automated"] is True
    assert row.metadata["hidden"] is True
    assert row.metadata["external_input"] is True
    assert row.metadata["source"] == "guard"


def test_transcript_hides_rows_marked_hidden_and_keeps_order_of_the_rest() -> None:
    user = Message.user("question")
    feedback = automated_feedback("try again", source="loop")
    other_hidden = Message(Role.ASSISTANT, "internal", metadata={"hidden": True})
    shown_flag_false = Message(Role.ASSISTANT, "visible", metadata={"hidden": False})
    answer = Message(Role.ASSISTANT, "answer")
    log = [user, feedback, other_hidden, shown_flag_false, answer]
    assert transcript(log) == [user, shown_flag_false, answer]
