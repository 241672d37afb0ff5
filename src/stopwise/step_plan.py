"""Per-step preparation: ``Agent(prepare_step=fn)`` chooses, before each model call, the model, the tools offered,
the tool choice and the instructions for that call; what it chose is recorded in the step's log entry.

``fn(ctx: StepContext)`` (sync or ``async def``) returns a ``StepPlan`` (None, or a field left None, keeps the
agent's own setting). A tool the plan does not offer is not callable on that step: a call to it is answered with an
error row. A ``prepare_step`` that raises, or returns something invalid, fails the run (``prepare_step_failed``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, TypeAlias

from stopwise.errors import ConfigError
from stopwise.messages import Message
from stopwise.models.base import Model
from stopwise.tools import Tool

__all__ = ["PrepareStep", "StepContext", "StepPlan", "StepPlanRecord"]

TOOL_CHOICES = ("auto", "required", "none")


@dataclass(frozen=True, slots=True)
class StepContext:
    """What ``prepare_step`` sees before a model call."""

    step: int
    """The step about to run (1-based, within the run)."""
    steps_used: int
    """Steps already taken against ``max_steps`` in this run leg."""
    messages: Sequence[Message]
    """The session's log so far (without the system instructions), an immutable sequence."""
    state: Mapping[str, Any]
    """The session's custom state (read-only)."""
    forced: bool
    """The call is a forced-output or wrap-up call: tools are off whatever the plan says."""
    tools_off: frozenset[str] = frozenset()
    """The tools switched off in this run (``stopwise.tool_switches``): not offered whatever the plan says."""


@dataclass(frozen=True, slots=True)
class StepPlan:
    """What one model call uses instead of the agent's defaults; a field left None keeps the default."""

    model: Model | str | None = None
    """Another model for this call (a ``Model`` or a model string); the agent's middleware still applies."""
    tools: Sequence[str | Tool] | None = None
    """The tools offered on this call (names or tools of the agent): Vercel AI SDK's ``activeTools``."""
    tool_choice: str | None = None
    """``"auto"``, ``"required"``, ``"none"``, or a tool's name to force that tool."""
    instructions: str | None = None
    """The system instructions for this call instead of the agent's."""

    def __post_init__(self) -> None:
        if isinstance(self.tools, str):
            # A lone name would otherwise be read as one tool name per character.
            raise ConfigError("StepPlan.tools", f"must be a list of tool names or tools, got {self.tools!r}")
        if self.tool_choice is not None and not isinstance(self.tool_choice, str):
            raise ConfigError("StepPlan.tool_choice", f"must be a string or None, got {self.tool_choice!r}")
        if self.instructions is not None and not isinstance(self.instructions, str):
            raise ConfigError("StepPlan.instructions", f"must be a string or None, got {self.instructions!r}")


@dataclass(frozen=True, slots=True)
class StepPlanRecord:
    """What ``prepare_step`` chose for a step, as its log entry keeps it."""

    TYPE: ClassVar[str] = "step_plan"
    step: int
    model: str | None = None
    """The model's description (its repr), when the plan changed it."""
    tools: tuple[str, ...] | None = None
    tool_choice: str | None = None
    instructions: str | None = None

    def to_data(self) -> dict[str, Any]:
        return {
            "type": self.TYPE,
            "step": self.step,
            "model": self.model,
            "tools": None if self.tools is None else list(self.tools),
            "tool_choice": self.tool_choice,
            "instructions": self.instructions,
        }

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> StepPlanRecord:
        tools = data.get("tools")
        return cls(
            data["step"],
            data.get("model"),
            None if tools is None else tuple(tools),
            data.get("tool_choice"),
            data.get("instructions"),
        )

    def describe(self) -> str:
        """One line for a reader: what the plan changed."""
        parts = []
        if self.model is not None:
            parts.append(f"model={self.model}")
        if self.tools is not None:
            parts.append(f"tools=[{', '.join(self.tools)}]")
        if self.tool_choice is not None:
            parts.append(f"tool_choice={self.tool_choice}")
        if self.instructions is not None:
            parts.append(f"instructions={self.instructions[:60]!r}")
        return ", ".join(parts) or "agent defaults"


PrepareStep: TypeAlias = Callable[[StepContext], "StepPlan | Awaitable[StepPlan | None] | None"]
