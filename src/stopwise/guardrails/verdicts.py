"""Guardrail verdicts and the record each non-pass verdict leaves behind."""

from __future__ import annotations

import pickle
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, ClassVar

from stopwise._deprecated import aliases
from stopwise.errors import ErrorCopy, StopwiseError
from stopwise.messages import Message

__all__ = [
    "Block",
    "GuardrailError",
    "GuardrailRaised",
    "GuardrailRecord",
    "GuardrailTimeout",
    "Hook",
    "Pass",
    "Rewrite",
    "GuardrailVerdict",
]


class Hook(StrEnum):
    """The four boundaries a guardrail can watch."""

    INPUT = "input"
    """Once per run leg, before the first model call: sees the history the model is about to get."""
    TOOL_CALL = "tool_call"
    """Per call, before the approval gate and execution."""
    TOOL_RESULT = "tool_result"
    """Per result, after the whole batch settled, before the model or the log sees it."""
    OUTPUT = "output"
    """On the final answer, after the stop guard accepted it: the last word."""


@dataclass(frozen=True, slots=True)
class Pass:
    """Let it through; the same as returning ``None``. Leaves no record."""


@dataclass(frozen=True, slots=True)
class Block:
    """Refuse. On input the run ends without a model call; on a tool call or result the model reads an error
    naming the rule; on output the text becomes ``replacement`` (or empty)."""

    reason: str
    replacement: str | None = None
    redacted: bool = False
    """What is blocked holds something that must not be stored in clear (a secret, personal data). On the
    tool-result hook the tool receipt then keeps no copy of the result, only an HMAC when the application gave a
    key; on the tool-call hook the logged call keeps no arguments (``{}``); on the output hook an answer the
    guardian sends to a reviewer is stored as the replacement (or empty), and the block decides after the
    review."""


@dataclass(frozen=True, slots=True)
class Rewrite:
    """Replace what the hook guards. Set exactly the field of your hook: ``messages`` (input), ``args`` (tool
    call), ``result`` (tool result) or ``text`` (output)."""

    messages: Sequence[Message] | None = None
    args: Mapping[str, Any] | None = None
    result: Any = None
    text: str | None = None
    redacted: bool = False
    """This rewrite removed something that must not be stored in clear. On the tool-result hook the tool receipt
    then keeps the rewritten copy instead of the raw result (and an HMAC of the raw result when the application
    gave a key); on the tool-call hook the logged call (the log, the model's next request, the suspension) carries
    the rewritten arguments instead of the model's; on the output hook an answer stored before the hook decides
    (one the guardian sent to a reviewer, or failed) is stored rewritten. ``redact_secrets`` and ``redact_pii``
    set it."""


GuardrailVerdict = Pass | Block | Rewrite | None

_FIELD = {Hook.INPUT: "messages", Hook.TOOL_CALL: "args", Hook.TOOL_RESULT: "result", Hook.OUTPUT: "text"}


def rewrite_field(hook: Hook) -> str:
    """The one ``Rewrite`` field a hook accepts."""
    return _FIELD[hook]


@dataclass(frozen=True, slots=True)
class GuardrailRecord:
    """One non-pass verdict: in ``RunResult.guardrails``, in the log and in the stream."""

    TYPE: ClassVar[str] = "guardrail"

    hook: Hook
    action: str
    """``"block"`` or ``"rewrite"``."""
    name: str
    reason: str | None = None
    """Set on blocks; a rewrite says that something changed, not why."""
    tool_call_id: str | None = None
    """Set on the tool hooks."""
    step: int | None = None
    """Absent on the input hook, which runs before any step."""
    redacted: bool = False
    """The verdict was a redaction (``Rewrite(..., redacted=True)``, ``Block(..., redacted=True)``): what it
    removed is stored nowhere."""

    def to_data(self) -> dict[str, Any]:
        data = {
            "type": self.TYPE,
            "hook": self.hook.value,
            "action": self.action,
            "name": self.name,
            "reason": self.reason,
            "tool_call_id": self.tool_call_id,
            "step": self.step,
        }
        if self.redacted:  # only then: the records of every other verdict stay as they were written before
            data["redacted"] = True
        return data

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> GuardrailRecord:
        return cls(
            Hook(data["hook"]),
            data["action"],
            data["name"],
            data.get("reason"),
            data.get("tool_call_id"),
            data.get("step"),
            data.get("redacted") is True,
        )


class GuardrailRaised(StopwiseError):
    """A guardrail raised. Never swallowed: the run ends failed with this detail (code ``guardrail_raised``)."""

    def __init__(self, name: str, hook: Hook, error: BaseException) -> None:
        super().__init__(f"guardrail {name!r} on the {hook.value} hook raised {_described(error)}")
        self.guardrail = name
        self.hook = hook
        self.error = error

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickled whole (DBOS records a workflow's error so): the default would call this with the message alone.
        # An inner error that cannot make the trip travels as an ErrorCopy of its kind and text.
        return (type(self), (self.guardrail, self.hook, _portable(self.error)))


def _described(error: BaseException) -> str:
    """``Kind: text`` of an error, for a message; never raises (an error's own ``__str__`` may)."""
    if isinstance(error, ErrorCopy):
        return f"{error.kind.rpartition('.')[2]}: {error.message}"
    return f"{type(error).__name__}: {_text(error)}"


def _text(error: BaseException) -> str:
    try:
        return str(error)
    except Exception as exc:  # a guardrail's own exception class whose __str__ raises
        return f"(its str() raised {type(exc).__name__})"


def _portable(error: BaseException) -> BaseException:
    """``error`` when it survives a pickle round trip, else an ``ErrorCopy`` of its kind and text."""
    try:
        pickle.loads(pickle.dumps(error))
    except Exception:
        kind = type(error)
        return ErrorCopy(f"{kind.__module__}.{kind.__qualname__}", _text(error))
    return error


class GuardrailTimeout(GuardrailRaised):
    """A guardrail gave no verdict within its time limit. Never a pass: the run ends failed (code
    ``guardrail_timeout``), as for a raise. ``timeout`` is the limit that ran out, in seconds."""

    def __init__(self, name: str, hook: Hook, timeout: float) -> None:
        message = f"guardrail {name!r} on the {hook.value} hook timed out after {timeout:g}s"
        super().__init__(name, hook, TimeoutError(message))
        self.args = (message,)
        self.timeout = timeout

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.guardrail, self.hook, self.timeout))


class GuardrailError(StopwiseError):
    """A guardrail returned a verdict of the wrong type or with the wrong field for its hook."""

    def __init__(self, name: str, hook: Hook, problem: str) -> None:
        super().__init__(f"guardrail {name!r} on the {hook.value} hook: {problem}")
        self.guardrail = name
        self.hook = hook
        self.problem = problem

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.guardrail, self.hook, self.problem))


__getattr__ = aliases(__name__, {"Verdict": ("GuardrailVerdict", GuardrailVerdict)})
