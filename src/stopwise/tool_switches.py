"""Tool switches (seed 000): switching one of the agent's tools off, or back on, for the rest of a run.

A ``ToolSwitch`` is a context item. A stop guard may add one (``ctx.add_context(ToolSwitch(on=["search"]))`` or
``Continue(context=[...])``) to switch tools on or off; a tool may only switch tools off
(``RunContext.switch_off("search")``), so a tool's output can never hand the model back a capability. Each switch
commits with its step as a ``ToolSwitchRecord``, and the tools switched off are folded from the run's records in log
order (``switched_off``): a crash, a retry or an approval in between keeps them, a fork keeps those made up to its
step, and a new run starts with every tool on.

A tool switched off is not offered to the model (on top of what ``prepare_step`` chose for the step, which sees
the switched-off names in ``StepContext.tools_off``) and a call to it is answered with an error row, as for any
tool not offered on that step.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

__all__ = ["ToolSwitch", "ToolSwitchRecord", "switched_off"]

SwitchSource = Literal["stop_guard", "tool"]


def _names(value: Sequence[Any] | str, where: str) -> tuple[str, ...]:
    items = [value] if isinstance(value, str) else list(value)
    names = tuple(getattr(i, "name", i) for i in items)  # a Tool stands for its name
    bad = [n for n in names if not isinstance(n, str) or not n.strip()]
    if bad:
        raise TypeError(f"ToolSwitch.{where} must be tool names or tools, got {bad!r}")
    return names


@dataclass(frozen=True, slots=True, init=False)
class ToolSwitch:
    """Switch tools ``on`` and ``off`` (names, or the agent's tools) for the rest of the run; ``off`` applies
    after ``on``. Raises ``TypeError`` for anything that is not a name or a tool, ``ValueError`` for a switch
    that names no tool."""

    on: tuple[str, ...]
    off: tuple[str, ...]

    def __init__(self, on: Sequence[Any] | str = (), off: Sequence[Any] | str = ()) -> None:
        object.__setattr__(self, "on", _names(on, "on"))
        object.__setattr__(self, "off", _names(off, "off"))
        if not self.on and not self.off:
            raise ValueError("a ToolSwitch needs at least one tool to switch on or off")


@dataclass(frozen=True, slots=True)
class ToolSwitchRecord:
    """One switch as the log keeps it, committed with the step that made it."""

    TYPE: ClassVar[str] = "tool_switch"
    source: SwitchSource
    step: int
    on: tuple[str, ...] = ()
    off: tuple[str, ...] = ()
    tool_call_id: str | None = None
    """The call whose tool switched, for ``source="tool"``."""

    def to_data(self) -> dict[str, Any]:
        data: dict[str, Any] = {"type": self.TYPE, "source": self.source, "step": self.step}
        data.update(on=list(self.on), off=list(self.off))
        if self.tool_call_id is not None:
            data["tool_call_id"] = self.tool_call_id
        return data

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> ToolSwitchRecord:
        return cls(
            data["source"],
            data["step"],
            tuple(data.get("on", ())),
            tuple(data.get("off", ())),
            data.get("tool_call_id"),
        )


def switched_off(records: Iterable[object], before: frozenset[str] = frozenset()) -> frozenset[str]:
    """The tools switched off after ``records`` (a run's records in log order; other records are skipped), starting
    from ``before``, the set the run's earlier records gave."""
    off: set[str] = set(before)
    for r in records:
        if isinstance(r, ToolSwitchRecord):
            off.difference_update(r.on)
            off.update(r.off)
    return frozenset(off)
