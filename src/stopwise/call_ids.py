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

__all__ = ["call_ids_in", "fresh_call_id", "unique_call_ids"]


def fresh_call_id() -> str:
    """A new stopwise call id (``sw_`` and 24 hex digits)."""
    return f"sw_{uuid.uuid4().hex[:24]}"


def call_ids_in(messages: Sequence[Message]) -> set[str]:
    """Every call id the history holds: the assistant rows' calls, and the tool rows' answers."""
    taken: set[str] = set()
    for m in messages:
        for call in m.tool_calls:
            taken.add(call.id)
        if m.tool_call_id is not None:
            taken.add(m.tool_call_id)
    return taken


def unique_call_ids(reply: Reply, taken: Iterable[str]) -> Reply:
    """``reply`` with every call id unique: within the reply and against ``taken`` (the ids the session already
    used). The first use of an id keeps it; each later use gets a fresh id, with the provider's id in
    ``wire_id``. Returns ``reply`` itself when every id is already unique. Pure: no I/O, no clock (a fresh id is
    random, never derived from the clock)."""
    used = set(taken)
    calls = list(reply.tool_calls)
    changed = False
    for i, call in enumerate(calls):
        if call.id in used:
            new_id = fresh_call_id()
            while new_id in used:  # pragma: no cover - 96 random bits
                new_id = fresh_call_id()
            calls[i] = replace(call, id=new_id, wire_id=call.wire_id or call.id)
            changed = True
        used.add(calls[i].id)
    return replace(reply, tool_calls=tuple(calls)) if changed else reply
