"""The ``Model`` protocol: one async call from a request to a reply."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from stopwise.messages import Message, Reply

__all__ = ["Model", "ModelRequest", "ToolSpec"]


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """What the model is told about a tool: its name, description and JSON schema of arguments."""

    name: str
    description: str
    parameters: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class ModelRequest:
    """Everything the model sees for one call."""

    messages: tuple[Message, ...]
    """The context: system instructions first, then the session's log."""
    tools: tuple[ToolSpec, ...]
    """The tools offered on this call; empty during forced completion."""
    step: int
    """The step this call belongs to (1-based, within the run)."""
    output_schema: Mapping[str, Any] | None = None
    """JSON schema of the structured output the agent expects, if it declared one."""
    forced_output: bool = False
    """True on a forced-completion call: tools are off and the reply must be the structured output."""


@runtime_checkable
class Model(Protocol):
    """Anything with ``async generate(request) -> Reply``.

    An exception from ``generate`` ends the run ``failed`` with code ``model_error``; committed steps stay.
    """

    async def generate(self, request: ModelRequest) -> Reply: ...
