"""JSON encoding of records shared by the database stores."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import Any

from pydantic_core import PydanticSerializationError, from_json, to_json

from stopwise.errors import ErrorDetail, StateNotSerializable
from stopwise.messages import Message, ToolCall, Usage
from stopwise.storable import storable

__all__ = ["ROW_FIELDS", "dump_json", "dump_rows", "error_from", "load_json", "usage_from"]


def dump_json(value: Any) -> str:
    """Compact JSON; pydantic models, dataclasses, dates and the like are converted as pydantic does."""
    return to_json(value).decode()


def load_json(text: str | bytes | None) -> Any:
    """``json.loads(text)`` (``None`` for ``None``): the same value, or the same error for a text it refuses.

    Every stored JSON text a read decodes goes through here (a session's load decodes three per entry), so it is
    read by pydantic's parser first, three to four times faster on these short texts and giving equal values
    (big ints, floats to the last bit, ``NaN``, the last of duplicate keys; ``tests/test_load_json.py``). A text
    that parser refuses is read again by ``json.loads``: it reads a few that parser does not (a lone surrogate
    escape, nesting past 200 levels, a ``str`` holding a lone surrogate) and raises the error callers see today
    for the rest."""
    if text is None:
        return None
    try:
        return from_json(text)
    except (ValueError, TypeError):
        return json.loads(text)


def dump_state(state: Mapping[str, Any], session_id: str) -> str:
    """Session ``session_id``'s ``state`` as JSON under the storable-text rule; ``StateNotSerializable`` (naming
    the key) for a value JSON cannot hold, a NaN or infinite float included. The rule's walk runs only when the
    encoding shows a string that needs it: a lone surrogate fails to encode, a NUL reads ``\\u0000`` (a false
    alarm only costs the walk)."""
    if type(state) is dict and not state:
        return "{}"  # most sessions keep no state: no encoder for every commit
    try:
        text = dump_json(state)
    except (PydanticSerializationError, TypeError, ValueError):
        text = None
    if text is None or "\\u0000" in text:
        try:
            text = dump_json(storable(state, where=f"the state of session {session_id!r}"))
        except (PydanticSerializationError, TypeError, ValueError) as exc:
            raise StateNotSerializable(f"session state must be JSON-serialisable: {exc}") from exc
    if "NaN" in text or "Infinity" in text:  # a bare float constant, or only a string holding the word
        for key, value in json.loads(text).items():
            try:
                json.dumps(value, allow_nan=False)
            except ValueError:  # strict readers (a jsonb cast, a JavaScript UI) refuse the row: refused here
                raise StateNotSerializable(f"session state key {key!r} holds NaN or Infinity: not JSON") from None
    return text


ROW_FIELDS = {
    Message: ("role", "content", "tool_calls", "tool_call_id", "metadata"),
    ToolCall: ("name", "args", "id", "wire_id"),
}
"""The fields ``dump_rows`` writes, per class: a test holds them equal to the classes' own, so a field added to
``Message`` or ``ToolCall`` cannot be dropped from the log unnoticed."""


def dump_rows(messages: Sequence[Message]) -> str:
    """A log entry's rows as JSON: the same text as ``messages.dump_messages`` (``load_messages`` reads it back),
    fields at their defaults left out, built as plain data for one ``to_json`` call: every commit encodes its
    rows, and pydantic's walk of the ``Message`` schema took twice as long."""
    return to_json([_row(m) for m in messages]).decode()


def _row(m: Message) -> dict[str, Any]:
    row: dict[str, Any] = {"role": m.role.value}
    if m.content:
        row["content"] = m.content
    if m.tool_calls:
        row["tool_calls"] = [_call(c) for c in m.tool_calls]
    if m.tool_call_id is not None:
        row["tool_call_id"] = m.tool_call_id
    if m.metadata:
        row["metadata"] = m.metadata
    return row


def _call(c: ToolCall) -> dict[str, Any]:
    call: dict[str, Any] = {"name": c.name}
    if c.args != {}:
        call["args"] = c.args
    if c.id:
        call["id"] = c.id
    if c.wire_id is not None:
        call["wire_id"] = c.wire_id
    return call


def dump_usage(usage: Usage | None) -> str | None:
    """The usage's non-zero counts (``usage_from`` reads the others back as zero)."""
    # Field by field, not ``asdict`` (a deep copy, 3 us) or a filtered ``to_data``: this runs for every entry
    # committed. ``tests/test_codec.py`` fails if ``Usage`` gains a field this leaves out.
    if usage is None:
        return None
    data: dict[str, int] = {}
    if usage.input_tokens:
        data["input_tokens"] = usage.input_tokens
    if usage.output_tokens:
        data["output_tokens"] = usage.output_tokens
    if usage.requests:
        data["requests"] = usage.requests
    return dump_json(data)


def usage_from(text: str | None) -> Usage:
    data = load_json(text)
    return Usage(**data) if data else Usage()


def dump_error(error: ErrorDetail | None) -> str | None:
    return None if error is None else dump_json(asdict(error))


def error_from(text: str | None) -> ErrorDetail | None:
    data = load_json(text)
    return ErrorDetail(**data) if data else None
