"""What a tool sees of the run it is called in."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from stopwise.messages import Usage

if TYPE_CHECKING:
    from stopwise.guardrails.hooks import Guardrails

__all__ = ["RunContext"]


@dataclass(slots=True)
class RunContext:
    """Passed to a tool that declares a parameter annotated ``RunContext``.

    ``state`` is the session's custom state as a draft for this step: writes commit with the step's
    transaction, so a crash before the commit discards them and a re-run step sees the last committed state.
    """

    session_id: str
    run_id: str
    step: int
    tool_call_id: str
    state: dict[str, Any]
    runner: Any
    """The ``Runner`` driving this run; sub-agents use it to run on the same store."""
    runtime_context: Any = None
    """The caller's per-run object from ``run(..., runtime_context=...)``: never persisted or serialised."""
    sub_usage: Usage = field(default_factory=Usage)
    """Model usage of the sub-agents this call ran (``Agent.as_tool`` adds it): the parent's token budgets count
    it, and ``RunResult.sub_usage`` reports it apart from the parent's own ``usage``."""
    agent_path: tuple[str, ...] = ()
    """The sub-agent path of the loop that called the tool; empty in a root run (``GuardrailContext.agent_path``)."""
    guardrails: Guardrails | None = None
    """The guardrails of the loop that called the tool: what a sub-agent it runs inherits (``Agent.as_tool``)."""
    switched_off: list[str] = field(default_factory=list)
    """Tools this call switched off (``switch_off``); they commit with the step's results."""

    def switch_off(self, *names: str) -> None:
        """Switch the named tools off for the rest of the run, from the step after this one (seed 000: a tool may
        only switch tools off; a stop guard may switch them back on, ``stopwise.tool_switches``). Raises
        ``TypeError`` for a name that is not a non-empty string."""
        bad = [n for n in names if not isinstance(n, str) or not n.strip()]
        if bad or not names:
            raise TypeError(f"switch_off takes tool names, got {names!r}")
        self.switched_off.extend(names)

    @property
    def idempotency_key(self) -> str:
        """Stable across a re-run of the same step after a crash: ``"{run_id}:{step}:{tool_call_id}"``."""
        return f"{self.run_id}:{self.step}:{self.tool_call_id}"
