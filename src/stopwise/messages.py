"""The vocabulary of a conversation: messages, tool calls, replies and usage.

These are small frozen values. They cross every module boundary, so they stay plain: no behaviour beyond
construction-time normalisation, and a JSON codec the stores share.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from pydantic_core import PydanticSerializationError, to_json

from stopwise.storable import is_storable, storable, storable_text, text_fields

if TYPE_CHECKING:
    from pydantic import TypeAdapter

__all__ = [
    "CONTENT_ENCODING",
    "TOOL_ERROR",
    "Message",
    "Reply",
    "Role",
    "StopReason",
    "TokenLogprob",
    "ToolCall",
    "Usage",
    "decode_tool_result",
    "encode_tool_result",
    "error_tool_result",
]

CONTENT_ENCODING = "content_encoding"
"""Metadata key set to ``"text"`` on a tool row whose content is a string result stored verbatim."""

TOOL_ERROR = "tool_error"
"""Metadata key set to ``True`` on a tool row that carries a failed call (``{"error": ...}``)."""


class Role(StrEnum):
    """Who wrote a message."""

    SYSTEM = "system"
    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"


class StopReason(StrEnum):
    """Why the model stopped producing a reply."""

    END_TURN = "end_turn"
    """The model finished its turn."""
    STOP_SEQUENCE = "stop_sequence"
    """A stop sequence ended the reply; a natural finish like ``end_turn``."""
    TOOL_USE = "tool_use"
    """The model asked for tool calls."""
    MAX_TOKENS = "max_tokens"
    """The reply was cut at its token limit."""
    CONTENT_FILTER = "content_filter"
    """A provider content filter cut the reply."""
    REFUSAL = "refusal"
    """The model refused."""
    ERROR = "error"
    """The provider reported an error in place of a reply."""


NATURAL_FINISH = frozenset({StopReason.END_TURN, StopReason.STOP_SEQUENCE})


def _new_call_id() -> str:
    # 24 random hex digits, as uuid4().hex[:24] gave (less its fixed version digit), at a fifth of the cost.
    return f"call_{os.urandom(12).hex()}"


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A call the model asked for.

    ``args`` is the decoded argument object, or the raw string a model sent when it did not decode; the loop
    turns a raw string that is not a JSON object into an error result the model can read.
    """

    name: str
    args: Mapping[str, Any] | str = field(default_factory=dict)
    id: str = ""
    """Unique within the session; generated when not given. The loop replaces an id the model repeated (within
    its reply, or from earlier in the session) with a fresh stopwise id before anything sees the call."""
    wire_id: str | None = None
    """The provider's own id when stopwise replaced it (see ``id``): what an adapter sends back to the provider
    when it replays the history; None when ``id`` is the provider's."""

    def __post_init__(self) -> None:
        if not self.id:
            object.__setattr__(self, "id", _new_call_id())


@dataclass(frozen=True, slots=True)
class Usage:
    """Token counts, added up across model calls."""

    input_tokens: int = 0
    output_tokens: int = 0
    requests: int = 0

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.requests + other.requests,
        )

    def to_data(self) -> dict[str, int]:
        """As JSON data (``Usage(**data)`` reads it back)."""
        return {"input_tokens": self.input_tokens, "output_tokens": self.output_tokens, "requests": self.requests}


@dataclass(frozen=True, slots=True)
class TokenLogprob:
    """One generated token with its log-probability, as a provider reports it when asked."""

    token: str
    logprob: float
    """Natural log of the token's probability."""
    top: tuple[tuple[str, float], ...] = ()
    """The most likely alternatives at this position as ``(token, logprob)`` pairs, most likely first (as many
    as were asked for; the chosen token is usually among them)."""


@dataclass(frozen=True, slots=True)
class Message:
    """One row of a session's log."""

    role: Role
    content: str = ""
    tool_calls: Sequence[ToolCall] = ()
    """Assistant rows only: the calls the model asked for, in order (kept as a tuple)."""
    tool_call_id: str | None = None
    """Tool rows only: the call this row answers."""
    metadata: Mapping[str, Any] = field(default_factory=dict)
    """Annotations for readers (encoding marker, error flag, automated-row marks). Treat as read-only."""

    def __post_init__(self) -> None:
        content = self.content
        if type(content) is str and content.isascii() and "\x00" not in content and type(self.role) is Role:
            # The common row (a role of ours, plain ASCII text) needs no conversion: only the calls' tuple.
            if not isinstance(self.tool_calls, tuple):
                object.__setattr__(self, "tool_calls", tuple(self.tool_calls))
            return
        if not isinstance(self.role, Role):
            try:
                object.__setattr__(self, "role", Role(self.role))
            except ValueError:
                raise ValueError(f"Message.role must be one of {[r.value for r in Role]}, got {self.role!r}") from None
        if not isinstance(self.content, str):
            raise TypeError(f"Message.content must be a str, got {type(self.content).__name__}")
        if not is_storable(self.content):
            # The storable-text rule holds for every row from the start, whoever built it.
            object.__setattr__(self, "content", storable_text(self.content, where=f"a {self.role.value} row"))
        if not isinstance(self.tool_calls, tuple):
            object.__setattr__(self, "tool_calls", tuple(self.tool_calls))

    @classmethod
    def user(cls, content: str) -> Message:
        return cls(Role.USER, content)

    @classmethod
    def system(cls, content: str) -> Message:
        return cls(Role.SYSTEM, content)


@dataclass(frozen=True, slots=True)
class Reply:
    """What a model returns for one request: text and/or tool calls, with a stop reason.

    The stop reason is inferred when not given: ``tool_use`` when there are tool calls, else ``end_turn``.
    """

    text: str = ""
    tool_calls: Sequence[ToolCall] = ()
    """The calls the model asked for, in order (kept as a tuple)."""
    stop_reason: StopReason = None  # type: ignore[assignment]  # inferred in __post_init__
    usage: Usage | None = None
    logprobs: tuple[TokenLogprob, ...] | None = None
    """Per-token log-probabilities of the text, when the model was asked for them (``OpenAIModel(logprobs=True)``);
    None when not asked for or not supported."""

    def __post_init__(self) -> None:
        if not isinstance(self.tool_calls, tuple):
            object.__setattr__(self, "tool_calls", tuple(self.tool_calls))
        if self.stop_reason is None:
            inferred = StopReason.TOOL_USE if self.tool_calls else StopReason.END_TURN
            object.__setattr__(self, "stop_reason", inferred)
        elif not isinstance(self.stop_reason, StopReason):
            object.__setattr__(self, "stop_reason", StopReason(self.stop_reason))

    @property
    def is_natural_finish(self) -> bool:
        """Text, no tool calls, and a stop reason of ``end_turn`` or ``stop_sequence``."""
        return not self.tool_calls and self.stop_reason in NATURAL_FINISH


# What the stores' storable check must look at (see stopwise.storable): a row's content is made storable when
# the row is built; roles are ours; usage is numbers.
text_fields(Message, "tool_calls", "tool_call_id", "metadata")
text_fields(ToolCall, "name", "args", "id", "wire_id")
text_fields(Usage)
text_fields(TokenLogprob, "token", "top")


def encode_tool_result(value: Any, *, tool_call_id: str) -> Message:
    """The tool row for a successful result: a string verbatim with the text marker, anything else as JSON.
    Raises ``ValueError`` for a value that strict JSON cannot hold (a NaN or infinite float anywhere in it;
    ``CyclicValue``, one, for a value that contains itself) and
    pydantic's error for one it cannot encode at all: the callers turn either into the error of an unserialisable
    result (an error row the model reads, for a tool).

    Tool output is untrusted text: the storable-text rule applies (``stopwise.storable``), so a lone surrogate or
    a NUL becomes U+FFFD instead of failing the commit."""
    if isinstance(value, str):
        text = value if is_storable(value) else storable_text(value, where=f"the result of call {tool_call_id}")
        return Message(Role.TOOL, text, tool_call_id=tool_call_id, metadata={CONTENT_ENCODING: "text"})
    if type(value) is int:  # JSON's spelling of an int is Python's: no encoder needed
        return Message(Role.TOOL, str(value), tool_call_id=tool_call_id)
    try:
        content = to_json(value).decode()
    except PydanticSerializationError:
        # Most often a lone surrogate in a string; anything else still fails on the second try (a value that
        # contains itself: ``storable`` raises ``CyclicValue``, a ``ValueError``).
        content = to_json(storable(value, where=f"the result of call {tool_call_id}")).decode()
    if "\\u0000" in content:  # a NUL inside a string value (JSON escapes it)
        content = to_json(storable(value, where=f"the result of call {tool_call_id}")).decode()
    if "NaN" in content or "Infinity" in content:  # a bare float constant, or only text that contains the word
        json.loads(content, parse_constant=_refuse_constant)
    return Message(Role.TOOL, content, tool_call_id=tool_call_id)


def _refuse_constant(name: str) -> Any:
    # pydantic writes a non-finite float as a bare NaN / Infinity, which JSON does not have: strict readers (a
    # JavaScript UI, a jsonb cast, most languages' parsers) refuse the row, so the result is refused here.
    raise ValueError(f"{name} is not a JSON number")


DENIED = "denied"
"""Metadata key set to ``True`` on an error row for a call that never ran because a guardrail blocked it or a
reviewer rejected it; such rows do not count toward the runaway-error guard."""

ORIGIN = "origin"
"""Metadata key on error rows: ``"tool"`` when the tool itself failed (raised, timed out), ``"stopwise"`` when
the call never reached the tool (unknown tool, arguments that do not validate, a denial)."""


def error_tool_result(message: str, *, tool_call_id: str, origin: str = "tool", denied: bool = False) -> Message:
    """The tool row for a failed call: ``{"error": message}`` as JSON, flagged in metadata."""
    text = storable_text(message, where=f"the error of call {tool_call_id}")
    content = json.dumps({"error": text}, ensure_ascii=False)
    meta: dict[str, Any] = {TOOL_ERROR: True, ORIGIN: origin}
    if denied:
        meta[DENIED] = True
    return Message(Role.TOOL, content, tool_call_id=tool_call_id, metadata=meta)


def decode_tool_result(message: Message) -> Any:
    """The value a tool row carries.

    A row marked as text returns its content as the string it was; an unmarked row (JSON results, and rows
    written before the marker existed) is parsed as JSON, falling back to the raw text when it is not JSON.
    """
    if not isinstance(message, Message):
        raise TypeError(f"decode_tool_result takes a tool row (a Message), got {type(message).__name__}")
    if message.metadata.get(CONTENT_ENCODING) == "text":
        return message.content
    try:
        return json.loads(message.content)
    except ValueError:
        return message.content


@functools.cache
def _messages_adapter() -> TypeAdapter[tuple[Message, ...]]:
    # Built on first use, not at import: building the schema (and loading pydantic's plugins) is most of what
    # importing this module would otherwise cost, and a process that never encodes messages never pays it.
    from pydantic import TypeAdapter

    return TypeAdapter(tuple[Message, ...])


def dump_messages(messages: Sequence[Message]) -> bytes:
    """JSON for a sequence of messages; the stores' shared codec. Fields that hold their defaults are left out
    (``load_messages`` reads them back): most rows have no calls, no call id and no metadata."""
    return _messages_adapter().dump_json(tuple(messages), exclude_defaults=True)


def load_messages(data: str | bytes) -> tuple[Message, ...]:
    return _messages_adapter().validate_json(data)


AUTOMATED_LABEL = "Automated feedback from the application (this is not from the user): "
"""The fixed prefix of every row stopwise writes for the model, so it never reads it as the user's words."""

AUTOMATED = "automated"
"""Metadata key: the row was written by the application, not the user; hidden from user-facing transcripts."""


def automated_feedback(text: str, *, source: str) -> Message:
    """A user-role row carrying application feedback behind the fixed label, marked automated and hidden."""
    return Message(
        Role.USER,
        AUTOMATED_LABEL + text,
        metadata={AUTOMATED: True, "hidden": True, "external_input": True, "source": source},
    )


def transcript(messages: Sequence[Message]) -> list[Message]:
    """The user-facing transcript: the log without hidden automated rows."""
    return [m for m in messages if not m.metadata.get("hidden")]
