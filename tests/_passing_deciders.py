"""Every stopwise decider attached and none of them intervening: what the peer-suite tests wrap a peer's agent in
to show the peer's own behaviour holds unchanged (tests/test_peer_suites_*.py)."""

from __future__ import annotations

from stopwise.guardrails import Guardrails
from stopwise.stop.guard import StopGuard


def passing_guardrails() -> Guardrails:
    """A guardrail on each of the four hooks, each passing."""
    return Guardrails(
        on_input=[lambda ctx: None],
        on_tool_call=[lambda ctx: None],
        on_tool_result=[lambda ctx: None],
        on_output=[lambda ctx: None],
    )


def accepting_guard() -> StopGuard:
    """A stop guard that accepts every plain-text ending."""
    return StopGuard(lambda ctx: None, name="accepts")
