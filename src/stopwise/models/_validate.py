"""The model boundary: what a model hands back is untrusted input, checked once before anything else sees it.

Every model (the adapters, ``FunctionModel``, a middleware's output) reaches the loop through one call site,
which passes the reply through ``validate_reply`` and an exception through ``model_failure``. A reply is either
well-formed (and made storable, see ``stopwise.storable``) or becomes a ``model_error`` naming the field.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from stopwise.errors import ConfigError, ErrorCategory, ErrorCode, ErrorDetail, ModelError
from stopwise.messages import Reply, StopReason, TokenLogprob, ToolCall, Usage
from stopwise.storable import is_storable, storable, storable_text

__all__ = ["ReplyLimits", "model_failure", "validate_reply"]


@dataclass(frozen=True, slots=True)
class ReplyLimits:
    """Bounds on what one model reply may carry (``Agent(reply_limits=...)``); a reply beyond them ends the run
    ``model_error`` (retryable: a new call may stay within them) and nothing of it is committed."""

    max_depth: int = 64
    """Deepest nesting of a tool call's arguments (the arguments object itself is level 1)."""
    max_args_bytes: int = 1_000_000
    """Size of all the reply's tool-call arguments together, about their compact UTF-8 JSON (escapes not counted)
    (a raw string counts its UTF-8 length)."""

    def __post_init__(self) -> None:
        for name in ("max_depth", "max_args_bytes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"reply_limits.{name}", f"must be an int >= 1, got {value!r}")


class _Malformed(Exception):
    def __init__(self, field: str, problem: str, *, retryable: bool = False) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field
        self.problem = problem
        self.retryable = retryable


def validate_reply(reply: object, limits: ReplyLimits) -> Reply | ErrorDetail:
    """``reply`` if it is a well-formed ``Reply`` (its text, names, ids and arguments made storable), else a
    ``model_error`` whose ``details`` name the ``field`` and the ``problem``.

    Well-formed: ``text`` a str; ``tool_calls`` ``ToolCall`` values whose ``name`` and ``id`` are str and whose
    ``args`` are a JSON object with str keys (or the raw str a model sent, which the loop answers with an error
    row the model can read) within ``limits``; ``stop_reason`` a ``StopReason``; ``usage`` None or a ``Usage`` of
    ints >= 0; ``logprobs`` None or ``TokenLogprob`` values. A wrong type is a bug in the code that built the
    reply and is not retryable; arguments beyond the limits are the model's choice and are.
    """
    try:
        return _checked(reply, limits)
    except _Malformed as exc:
        message = f"the model's reply is malformed: {exc}"
        details = {"field": exc.field, "problem": exc.problem}
        return ErrorDetail(ErrorCode.MODEL_ERROR, message, ErrorCategory.MODEL, exc.retryable, details)


def model_failure(exc: BaseException) -> ErrorDetail:
    """The ``model_error`` for an exception raised by a model call.

    A ``ModelError`` says itself whether it is retryable. Anything else was not classified by the adapter: it is
    retryable only when it is a known transient failure (a timeout, a dropped connection); a bug that would
    repeat on every call (a ``TypeError`` from bad settings, say) is not.
    """
    if isinstance(exc, ModelError):
        facts = {"provider": exc.provider, "status": exc.status, "request_id": exc.request_id}
        return ErrorDetail(ErrorCode.MODEL_ERROR, str(exc), ErrorCategory.MODEL, exc.retryable, facts)
    transient = isinstance(exc, (TimeoutError, ConnectionError))
    message = f"{type(exc).__name__}: {exc}"
    return ErrorDetail(
        ErrorCode.MODEL_ERROR, message, ErrorCategory.MODEL, transient, {"exception": type(exc).__name__}
    )


def _checked(reply: object, limits: ReplyLimits) -> Reply:
    if not isinstance(reply, Reply):
        raise _Malformed("reply", f"the model returned {type(reply).__name__}, expected Reply")
    if type(reply.text) is not str:
        _require(reply.text, str, "text")
    if not isinstance(reply.tool_calls, tuple):
        raise _Malformed("tool_calls", f"must be a sequence of ToolCall, got {type(reply.tool_calls).__name__}")
    if not isinstance(reply.stop_reason, StopReason):
        raise _Malformed("stop_reason", f"must be a StopReason, got {reply.stop_reason!r}")
    usage = reply.usage
    if usage is not None and not (
        type(usage) is Usage
        and type(usage.input_tokens) is int
        and type(usage.output_tokens) is int
        and type(usage.requests) is int
        and usage.input_tokens >= 0
        and usage.output_tokens >= 0
        and usage.requests >= 0
    ):  # the common usage in one test; anything else is checked field by field, to name the field
        _require(usage, Usage, "usage")
        for name in ("input_tokens", "output_tokens", "requests"):
            count = getattr(usage, name)
            if isinstance(count, bool) or not isinstance(count, int) or count < 0:
                raise _Malformed(f"usage.{name}", f"must be an int >= 0, got {count!r}")
    if reply.logprobs is not None:
        if not isinstance(reply.logprobs, tuple):
            raise _Malformed("logprobs", f"must be a tuple of TokenLogprob, got {type(reply.logprobs).__name__}")
        for i, lp in enumerate(reply.logprobs):
            _require(lp, TokenLogprob, f"logprobs[{i}]")
    budget = limits.max_args_bytes
    calls = []
    changed = False
    for i, call in enumerate(reply.tool_calls):
        # The field names are only spelled out when something is wrong: this runs for every call of every reply.
        if type(call) is not ToolCall:
            _require(call, ToolCall, f"tool_calls[{i}]")
        name, call_id, args = call.name, call.id, call.args
        if type(name) is not str or type(call_id) is not str:
            _require(name, str, f"tool_calls[{i}].name")
            _require(call_id, str, f"tool_calls[{i}].id")
        if isinstance(args, str):
            size = len(args.encode("utf-8", "surrogatepass"))
        elif type(args) is dict or isinstance(args, Mapping):
            size, clean = _check_json(args, f"tool_calls[{i}].args", limits.max_depth)
            if not clean:
                args = storable(args, where=f"tool_calls[{i}].args")
        else:
            raise _Malformed(f"tool_calls[{i}].args", f"must be a JSON object, got {type(args).__name__}")
        budget -= size
        if budget < 0:
            raise _Malformed(
                f"tool_calls[{i}].args",
                f"the reply's tool-call arguments exceed {limits.max_args_bytes} bytes",
                retryable=True,
            )
        if not is_storable(name):
            name = storable_text(name, where=f"tool_calls[{i}].name")
        if not is_storable(call_id):
            call_id = storable_text(call_id, where=f"tool_calls[{i}].id")
        if isinstance(args, str) and not is_storable(args):
            args = storable_text(args, where=f"tool_calls[{i}].args")
        if name is call.name and call_id is call.id and args is call.args:
            calls.append(call)
        else:
            calls.append(replace(call, name=name, id=call_id, args=args))
            changed = True
    text = storable_text(reply.text, where="the model's text")
    if text is reply.text and not changed:
        return reply
    return replace(reply, text=text, tool_calls=tuple(calls))


def _require(value: object, kind: type, field: str) -> None:
    if not isinstance(value, kind):
        raise _Malformed(field, f"must be a {kind.__name__}, got {type(value).__name__}")


def _check_json(args: Mapping[str, Any], field: str, max_depth: int) -> tuple[int, bool]:
    """Check that ``args`` is a JSON object with str keys nested at most ``max_depth`` deep; return its size as
    compact UTF-8 JSON (escape characters aside) and whether every string in it is storable. Iterative, so a
    100,000-deep value is refused rather than overflowing the stack; one pass over the value."""
    flat = _flat_object(args)
    if flat is not None:
        return flat
    size, clean = 0, True
    # A value's place is kept as (its parent's place, its key or index) and spelled out only for an error.
    stack: list[tuple[Any, int, Any]] = [(args, 1, field)]
    pop, push = stack.pop, stack.append
    while stack:
        value, depth, where = pop()
        kind = type(value)
        if kind is str or isinstance(value, str):
            if value.isascii():
                size += 2 + len(value)
                clean = clean and "\x00" not in value
            else:
                size += 2 + len(value.encode("utf-8", "surrogatepass"))
                clean = clean and is_storable(value)
        elif kind is bool or value is None:
            size += 5
        elif kind is int or kind is float or isinstance(value, (int, float)):
            if kind is float and not math.isfinite(value):
                raise _Malformed(_place(where), f"{value!r} is not a JSON number")
            size += len(repr(value))
        elif isinstance(value, Mapping):
            if depth > max_depth:
                raise _Malformed(field, f"nested deeper than {max_depth} levels", retryable=True)
            size += 2 + 2 * len(value)  # braces, and per item a colon and a comma
            for k, v in value.items():
                if not isinstance(k, str):
                    raise _Malformed(_place(where), f"has a key that is not a str: {k!r}")
                push((k, depth, where))
                push((v, depth + 1, (where, k)))
        elif isinstance(value, (list, tuple)):
            if depth > max_depth:
                raise _Malformed(field, f"nested deeper than {max_depth} levels", retryable=True)
            size += 2 + len(value)
            stack.extend((v, depth + 1, (where, i)) for i, v in enumerate(value))
        else:
            raise _Malformed(_place(where), f"{type(value).__name__} is not a JSON value")
    return size, clean


def _flat_object(args: Mapping[str, Any]) -> tuple[int, bool] | None:
    """``_check_json``'s answer for the common arguments: a dict of str keys to ASCII strings, ints and flags (no
    nesting, so no depth and no place to name); None for anything else, which the full walk checks."""
    if type(args) is not dict:
        return None
    size, clean = 2 + 2 * len(args), True
    for k, v in args.items():
        kind = type(v)
        if type(k) is not str or not k.isascii():
            return None
        size += 2 + len(k)
        clean = clean and "\x00" not in k
        if kind is str and v.isascii():
            size += 2 + len(v)
            clean = clean and "\x00" not in v
        elif kind is int:
            size += len(repr(v))
        elif kind is bool or v is None:
            size += 5
        else:
            return None
    return size, clean


def _place(where: Any) -> str:
    """A place as ``_check_json`` keeps it, spelled as the error names it: ``tool_calls[0].args.a[2]``."""
    parts = []
    while isinstance(where, tuple):
        where, key = where
        parts.append(f"[{key}]" if isinstance(key, int) else f".{key}")
    return f"{where}{''.join(reversed(parts))}"
