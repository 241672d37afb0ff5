"""``Goal``: what a run is for, and the criteria its result must meet; part of the run, committed in its log.

A run's goal is given to ``Runner.run(..., goal=Goal(text, criteria=[...]))`` (or comes from the guardian's
configured default) and committed as a ``run_goal`` record with the run's first entry, before any step. The
guardian's projection, its re-anchoring rows, its stop guard, a resume, a retry and an audit all read it from
there, so one guardian serves runs with different goals and a run is judged against the goal it started with,
whatever the configuration says later.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from stopwise.errors import ConfigError

__all__ = ["Goal"]


@dataclass(frozen=True, slots=True, init=False)
class Goal:
    """A run's goal and acceptance criteria. ``text`` None means the run's first user input is the goal (the
    default when no goal is stated); ``criteria`` are what "done" means, each a short statement."""

    TYPE: ClassVar[str] = "run_goal"
    text: str | None
    criteria: tuple[str, ...]

    def __init__(self, text: str | None = None, criteria: Iterable[str] = ()) -> None:
        if text is not None and (not isinstance(text, str) or not text.strip()):
            raise ConfigError("goal.text", f"must be a non-empty string or None, got {text!r}")
        if isinstance(criteria, str):
            raise ConfigError("goal.criteria", "must be a list of statements, not one string")
        if not isinstance(criteria, Iterable):
            raise ConfigError("goal.criteria", f"must be a list of statements, got {type(criteria).__name__}")
        items = tuple(criteria)
        for c in items:
            if not isinstance(c, str) or not c.strip():
                raise ConfigError("goal.criteria", f"each criterion must be a non-empty string, got {c!r}")
        object.__setattr__(self, "text", text)
        object.__setattr__(self, "criteria", items)

    @classmethod
    def of(cls, goal: Goal | str | None) -> Goal | None:
        """``goal`` as a ``Goal``: a string is a goal without criteria; None stays None."""
        if goal is None or isinstance(goal, Goal):
            return goal
        if isinstance(goal, str):
            return cls(goal)
        raise ConfigError("goal", f"must be a Goal, a string or None, got {type(goal).__name__}")

    def to_data(self) -> dict[str, Any]:
        return {"type": self.TYPE, "text": self.text, "criteria": list(self.criteria)}

    @classmethod
    def from_data(cls, d: Mapping[str, Any]) -> Goal:
        return cls(d.get("text"), tuple(d.get("criteria", ())))
