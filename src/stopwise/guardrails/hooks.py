"""``Guardrails``: the four hooks, their contexts, and the ordering rules that run a hook's chain.

The rules, the same for every hook: a list runs in order; rewrites chain (each guardrail sees what the
previous one wrote); the first block short-circuits the rest of that hook; a pass is silent; a raise is not
swallowed. For the tool hooks the rules apply per call.

Each guardrail runs under a time limit, and a sync one runs in a worker thread, so a slow or blocking check
never stalls the event loop (and with it every other run of the process).
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from stopwise._checks import check_function, check_seconds
from stopwise.errors import ConfigError
from stopwise.guardrails.verdicts import (
    Block,
    GuardrailError,
    GuardrailRaised,
    GuardrailRecord,
    GuardrailTimeout,
    Hook,
    Pass,
    Rewrite,
    rewrite_field,
)
from stopwise.messages import Message, ToolCall, encode_tool_result
from stopwise.row_copies import own_args, own_row, own_value

__all__ = [
    "GuardrailContext",
    "Guardrails",
    "InputContext",
    "OutputContext",
    "ToolCallContext",
    "ToolResultContext",
    "for_sub_agent",
    "named",
]

C = TypeVar("C", bound="GuardrailContext")
V = TypeVar("V")


@dataclass(frozen=True, slots=True)
class GuardrailContext:
    """What every hook sees."""

    messages: Sequence[Message]
    """The history the model has (or is about to get), as an immutable sequence (a ``HistoryView`` sharing the
    run's rows, from the run loop)."""
    step: int | None
    """The step (1-based); None on the input hook."""
    session_id: str
    run_id: str
    runtime_context: Any
    """The caller's per-run object from ``run(..., runtime_context=...)``: never persisted or serialised. A
    sub-agent's loop sees its parent's."""
    agent_path: tuple[str, ...] = field(default=(), kw_only=True)
    """The sub-agent path of the evaluating loop: the names of the agents from the root run's sub-agent down to
    the agent whose loop asks (``("researcher", "fetcher")``); empty at the root run."""


@dataclass(frozen=True, slots=True)
class InputContext(GuardrailContext):
    pass


@dataclass(frozen=True, slots=True)
class ToolCallContext(GuardrailContext):
    tool_call: ToolCall
    """The call as the model made it, with ``args`` as rewritten by earlier guardrails in the list."""


@dataclass(frozen=True, slots=True)
class ToolResultContext(GuardrailContext):
    tool_call: ToolCall
    """The call that ran (its arguments after any tool-call rewrite)."""
    result: Any
    """The result the model would see: decoded (a str stays a str), earlier rewrites applied."""
    is_error: bool
    """True when the tool raised or timed out (``result`` is then ``{"error": ...}``)."""


@dataclass(frozen=True, slots=True)
class OutputContext(GuardrailContext):
    text: str
    """The final answer about to be returned, earlier rewrites applied."""


GuardrailFn = Callable[[Any], Any]


@dataclass(frozen=True, slots=True)
class _Named:
    fn: GuardrailFn
    name: str
    timeout: float | None

    def __call__(self, ctx: Any) -> Any:
        return self.fn(ctx)


def named(name: str, fn: GuardrailFn, *, timeout: float | None = None) -> GuardrailFn:
    """Give a guardrail an explicit name: the one records show and the model reads in a block message.

    ``timeout`` (seconds) overrides ``Guardrails.timeout`` for this guardrail; None keeps the ``Guardrails`` one.
    """
    if not isinstance(name, str) or not name.strip():
        raise ConfigError("named", "a guardrail name must be a non-empty string")
    check_seconds(f"named({name!r}).timeout", timeout)
    return _Named(fn, name, timeout)


def _name_of(fn: GuardrailFn, hook: Hook, index: int) -> str:
    if isinstance(fn, _Named):
        return fn.name
    name = getattr(fn, "__name__", None) or type(fn).__name__
    if name == "<lambda>":
        # An anonymous rule still needs a name the model and a log reader can point at.
        return f"{hook.value} guardrail #{index + 1}"
    return str(name)


def _is_async(fn: GuardrailFn) -> bool:
    target = fn.fn if isinstance(fn, _Named) else fn
    # An instance with ``async def __call__`` is async too, though ``iscoroutinefunction`` says no for it.
    return inspect.iscoroutinefunction(target) or inspect.iscoroutinefunction(type(target).__call__)


@dataclass(frozen=True, slots=True)
class _Link:
    """One guardrail of a hook's chain, as the chain runs it."""

    fn: GuardrailFn
    name: str
    is_async: bool
    """Awaited on the event loop; a sync guardrail runs in a worker thread instead."""
    timeout: float | None
    """Seconds the call may take (its own, or the ``Guardrails`` one); None for no limit."""


def _chain(hook: Hook, value: Any, timeout: float | None) -> tuple[_Link, ...]:
    if value is None:
        return ()
    items = list(value) if isinstance(value, Sequence) and not isinstance(value, str) else [value]
    chain = []
    for i, fn in enumerate(items):
        if not callable(fn):
            raise ConfigError(f"guardrails.on_{hook.value}", f"item {i} is not callable: {fn!r}")
        check_function(f"guardrails.on_{hook.value}", fn.fn if isinstance(fn, _Named) else fn, "ctx")
        own = fn.timeout if isinstance(fn, _Named) else None
        chain.append(_Link(fn, _name_of(fn, hook, i), _is_async(fn), own if own is not None else timeout))
    return tuple(chain)


@dataclass(frozen=True, slots=True)
class Guardrails:
    """Guardrails for the four hooks; each takes one guardrail (sync or async) or an ordered list.

    When a tool-result guardrail redacts (``Rewrite(..., redacted=True)`` or ``Block(..., redacted=True)``), the
    tool receipt in the log keeps the redacted copy, not the raw result; ``receipt_hmac_key`` adds an HMAC-SHA256
    of the raw result, so an auditor holding the original can prove it is the one the tool returned.
    ``store_redacted_results_in_clear=True`` keeps the raw result in the receipt anyway (the log then holds
    every secret a guardrail redacted: only for logs that are themselves protected like the secrets)."""

    on_input: Any = None
    on_tool_call: Any = None
    on_tool_result: Any = None
    on_output: Any = None
    timeout: float | None = 30.0
    """Seconds each guardrail call may take (``named(..., timeout=)`` sets one guardrail's own); past it the run
    fails with ``GuardrailTimeout`` (code ``guardrail_timeout``). None: no limit."""
    receipt_hmac_key: bytes | None = field(default=None, repr=False)
    """A key of at least 16 bytes for the HMAC of a redacted raw result; None: no HMAC is stored."""
    store_redacted_results_in_clear: bool = False
    """Keep the raw result of a redacted tool output in its receipt, in clear. Off unless you opt in."""
    chains: Mapping[Hook, tuple[_Link, ...]] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        check_seconds("guardrails.timeout", self.timeout)
        key = self.receipt_hmac_key
        if key is not None and (not isinstance(key, bytes) or len(key) < 16):
            raise ConfigError("guardrails.receipt_hmac_key", "must be bytes, at least 16 of them (or None)")
        if not isinstance(self.store_redacted_results_in_clear, bool):
            raise ConfigError("guardrails.store_redacted_results_in_clear", "must be True or False")
        chains = {
            Hook.INPUT: _chain(Hook.INPUT, self.on_input, self.timeout),
            Hook.TOOL_CALL: _chain(Hook.TOOL_CALL, self.on_tool_call, self.timeout),
            Hook.TOOL_RESULT: _chain(Hook.TOOL_RESULT, self.on_tool_result, self.timeout),
            Hook.OUTPUT: _chain(Hook.OUTPUT, self.on_output, self.timeout),
        }
        object.__setattr__(self, "chains", chains)

    def has(self, hook: Hook) -> bool:
        return bool(self.chains[hook])


def for_sub_agent(own: Guardrails | None, parent: Guardrails | None) -> Guardrails | None:
    """The guardrails of a sub-agent's loop: its ``own``, under the ``parent`` loop's (seed 003: guardrails are
    a run-level option, so a delegated task never silently drops a defence).

    On the tool-call and tool-result hooks the parent's chain runs first, then the sub-agent's own (a parent's
    block short-circuits the rest); each link keeps its name and time limit. The input and output hooks stay
    the sub-agent's own: the input hook runs once per run leg, not once per sub-agent, and the sub-agent's answer
    reaches the parent as a tool result, which the parent's tool-result hook judges. Receipts follow the
    sub-agent's settings, or the parent's when it has no guardrails of its own.
    """
    if parent is None or not any(parent.chains[h] for h in _INHERITED):
        return own
    base = own if own is not None else parent
    inherited = {h: parent.chains[h] + (own.chains[h] if own is not None else ()) for h in _INHERITED}
    merged = Guardrails(
        on_input=None if own is None else own.on_input,
        on_tool_call=tuple(link.fn for link in inherited[Hook.TOOL_CALL]) or None,
        on_tool_result=tuple(link.fn for link in inherited[Hook.TOOL_RESULT]) or None,
        on_output=None if own is None else own.on_output,
        timeout=base.timeout,
        receipt_hmac_key=base.receipt_hmac_key,
        store_redacted_results_in_clear=base.store_redacted_results_in_clear,
    )
    # The chains built from the merged lists would renumber an anonymous rule and give every link one limit.
    object.__setattr__(merged, "chains", {**merged.chains, **inherited})
    return merged


_INHERITED = (Hook.TOOL_CALL, Hook.TOOL_RESULT)
"""The hooks a sub-agent's loop takes from its parent's."""


@dataclass(frozen=True, slots=True)
class ChainResult(Generic[V]):
    """What a hook's chain decided: the (possibly rewritten) value, the block if one fired, the records."""

    value: V
    block: Block | None
    blocked_by: str | None
    records: tuple[GuardrailRecord, ...]
    redacted: bool = False
    """A verdict in the chain said the original holds something that must not be stored in clear."""
    clean: Any = None
    """The value just after the chain's last redacting rewrite (None when a redacting block came after it): the
    most a receipt may keep of a redacted original."""


async def run_chain(
    guardrails: Guardrails,
    hook: Hook,
    value: V,
    make_ctx: Callable[[V], C],
    *,
    step: int | None,
    tool_call_id: str | None = None,
    only_redactions: bool = False,
) -> ChainResult[V]:
    """Run one hook's chain on ``value`` by the ordering rules. A guardrail that raises propagates (as
    ``GuardrailRaised``; ``GuardrailTimeout`` past its time limit); a verdict of the wrong type or field raises
    ``GuardrailError`` naming the guardrail and the hook.

    ``only_redactions``: the chain's redactions alone, for a value that is stored before the hook itself decides
    (an answer the guardian sent to a reviewer): every guardrail runs, each on the value as the redactions before it
    left it; a redacting ``Rewrite`` changes the value and a redacting ``Block`` ends the chain (the value stays as
    it was: the caller stores what the block leaves); any other verdict is checked, then left for the hook to
    decide later, with no record."""
    records: list[GuardrailRecord] = []
    field_name = rewrite_field(hook)
    redacted = False
    clean: Any = None
    for link in guardrails.chains[hook]:
        name = link.name
        verdict = await _call(link, hook, make_ctx(value))
        if verdict is None or isinstance(verdict, Pass):
            continue
        if isinstance(verdict, Block):
            if not isinstance(verdict.reason, str):
                raise GuardrailError(name, hook, "Block.reason must be a string")
            if verdict.replacement is not None and not isinstance(verdict.replacement, str):
                raise GuardrailError(name, hook, "Block.replacement must be a string or None")
            if only_redactions and not verdict.redacted:
                continue
            records.append(GuardrailRecord(hook, "block", name, verdict.reason, tool_call_id, step, verdict.redacted))
            if verdict.redacted:
                redacted, clean = True, None
            return ChainResult(value, verdict, name, tuple(records), redacted, clean)
        if isinstance(verdict, Rewrite):
            rewritten = _rewritten(verdict, hook, field_name, name)
            if only_redactions and not verdict.redacted:
                continue
            value = rewritten
            records.append(GuardrailRecord(hook, "rewrite", name, None, tool_call_id, step, verdict.redacted))
            if verdict.redacted:
                redacted, clean = True, value
            continue
        raise GuardrailError(
            name, hook, f"expected None, Pass(), Block(...) or Rewrite(...), got {type(verdict).__name__}"
        )
    return ChainResult(value, None, None, tuple(records), redacted, clean)


async def _call(link: _Link, hook: Hook, ctx: Any) -> Any:
    """The guardrail's verdict: a sync one from a worker thread, all under the link's time limit. A sync
    guardrail that times out keeps its thread until it returns (a thread cannot be stopped); its verdict is
    dropped."""
    try:
        async with asyncio.timeout(link.timeout) as scope:
            verdict = link.fn(ctx) if link.is_async else await asyncio.to_thread(link.fn, ctx)
            if inspect.isawaitable(verdict):
                verdict = await verdict
    except TimeoutError as exc:
        if scope.expired():
            assert link.timeout is not None
            raise GuardrailTimeout(link.name, hook, link.timeout) from None
        raise GuardrailRaised(link.name, hook, exc) from exc
    except Exception as exc:
        raise GuardrailRaised(link.name, hook, exc) from exc
    return verdict


def _rewritten(verdict: Rewrite, hook: Hook, field_name: str, name: str) -> Any:
    """The value ``verdict`` rewrites to, checked for ``hook``: a copy of its lists and dicts (rows, arguments,
    a result), since the guardrail may keep its verdict and change it in place after the log holds it."""
    given = [f for f in ("messages", "args", "result", "text") if getattr(verdict, f) is not None]
    if hook is Hook.TOOL_RESULT:
        # ``result=None`` is a legitimate rewrite of a result, so only the other fields are wrong here.
        wrong = [f for f in given if f != "result"]
        if wrong:
            raise GuardrailError(name, hook, f"Rewrite sets {wrong}; the {hook.value} hook takes Rewrite(result=...)")
        _check_json(verdict.result, name, hook, "Rewrite.result")
        return own_value(verdict.result)
    if given != [field_name]:
        raise GuardrailError(
            name, hook, f"Rewrite sets {given or 'nothing'}; the {hook.value} hook takes Rewrite({field_name}=...)"
        )
    value = getattr(verdict, field_name)
    if hook is Hook.INPUT:
        messages = tuple(value)
        if not all(isinstance(m, Message) for m in messages):
            raise GuardrailError(name, hook, "Rewrite.messages must be a list of Message")
        return tuple(map(own_row, messages))
    if hook is Hook.TOOL_CALL:
        if not isinstance(value, Mapping):
            raise GuardrailError(name, hook, "Rewrite.args must be a mapping")
        _check_json(value, name, hook, "Rewrite.args")
        return own_args(value)
    if hook is Hook.OUTPUT and not isinstance(value, str):
        raise GuardrailError(name, hook, "Rewrite.text must be a string")
    return value


def _check_json(value: Any, name: str, hook: Hook, what: str) -> None:
    """A rewritten value goes into the log as JSON: one that cannot be is the guardrail's error, raised before
    anything of the step is written."""
    try:
        encode_tool_result(value, tool_call_id="")
    except Exception as exc:
        raise GuardrailError(
            name, hook, f"{what} cannot be serialised to JSON ({type(value).__name__}): {exc}"
        ) from None
