"""Call ids are unique by construction: the one place a model's tool-call ids become the session's ids.

A provider's call id is only a label the provider chose. Some servers number calls from 0 in every reply, a
model can repeat an id within one reply, and an attacker can reuse an earlier one. Everything downstream keys on
the id (the pending list, approvals, guardrail and guardian records, ``RunContext.idempotency_key``, a
sub-agent's child session), so ``unique_call_ids`` runs right after the reply is validated, before any of them
sees it: an id that is already taken is replaced by a fresh stopwise id and the provider's id is kept in
``ToolCall.wire_id``, which the adapters send back when they replay the history to the provider.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from dataclasses import replace

from stopwise.messages import Message, Reply

__all__ = ["SessionCallIds", "call_ids_in", "fresh_call_id", "unique_call_ids"]


def fresh_call_id() -> str:
    """A new stopwise call id (``sw_`` and 24 hex digits)."""
    return f"sw_{uuid.uuid4().hex[:24]}"


def call_ids_in(messages: Sequence[Message]) -> set[str]:
    """Every call id the history holds (a tool row answers a call of an earlier assistant row, so the calls are
    all of them)."""
    return {c.id for m in messages if m.tool_calls for c in m.tool_calls}


def unique_call_ids(reply: Reply, taken: Iterable[str]) -> Reply:
    """``reply`` with every call id unique: within the reply and against ``taken`` (the ids the session already
    used). The first use of an id keeps it; each later use gets a fresh id, with the provider's id in
    ``wire_id``. Returns ``reply`` itself when every id is already unique. Pure: no I/O, no clock (a fresh id is
    random, never derived from the clock)."""
    # The session's ids are only looked up, never copied: a reply holds a few calls, a session many thousands.
    seen = taken if isinstance(taken, (set, frozenset)) else set(taken)
    ids = [c.id for c in reply.tool_calls]
    if len(ids) == len(set(ids)) and seen.isdisjoint(ids):
        return reply  # the common case: nothing repeats
    used: set[str] = set()
    calls = list(reply.tool_calls)
    changed = False
    for i, call in enumerate(calls):
        if call.id in used or call.id in seen:
            new_id = fresh_call_id()
            while new_id in used or new_id in seen:  # pragma: no cover - 96 random bits
                new_id = fresh_call_id()
            calls[i] = replace(call, id=new_id, wire_id=call.wire_id or call.id)
            changed = True
        used.add(calls[i].id)
    return replace(reply, tool_calls=tuple(calls)) if changed else reply


class SessionCallIds:
    """The call ids a session has used, so each new reply's ids are made unique with a set lookup per call rather
    than a scan of the history. Built from the history on first use; a leg keeps one (``Leg.call_ids``)."""

    __slots__ = ("_taken",)

    def __init__(self) -> None:
        self._taken: set[str] | None = None

    def unique(self, reply: Reply, history: Sequence[Message]) -> Reply:
        """``unique_call_ids`` against every id used so far. The reply's ids join the set at once: a reply that
        is not committed ends its leg, so an id held back that way is never needed again."""
        if self._taken is None:
            self._taken = call_ids_in(history)
        calls = reply.tool_calls
        if len(calls) == 1 and calls[0].id not in self._taken:
            self._taken.add(calls[0].id)  # one new call (most replies): nothing to compare within the reply
            return reply
        unique = unique_call_ids(reply, self._taken)
        self._taken.update([c.id for c in unique.tool_calls])
        return unique
