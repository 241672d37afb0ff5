"""Typed questions the guardian asks: yes/no, a choice among labelled options, a score on ordered levels.

A question is code: versioned, reviewed and tested. Invalid questions raise ``ConfigError`` when defined.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from stopwise.errors import ConfigError

__all__ = ["Choice", "Question", "Score", "YesNo"]


def _instructions(kind: str, text: Any) -> None:
    if not isinstance(text, str) or not text.strip():
        raise ConfigError(f"{kind}.instructions", "must be a non-empty string")


@dataclass(frozen=True, slots=True)
class YesNo:
    """A yes/no question; the answer is the probability of yes."""

    instructions: str
    criteria_true: str | None = None
    """What makes the answer yes, spelled out for the evaluator."""
    criteria_false: str | None = None
    """What makes the answer no."""

    def __post_init__(self) -> None:
        _instructions("YesNo", self.instructions)

    @property
    def labels(self) -> tuple[str, ...]:
        return ("yes", "no")

    def to_data(self) -> dict[str, Any]:
        return {
            "type": "yes_no",
            "instructions": self.instructions,
            "criteria_true": self.criteria_true,
            "criteria_false": self.criteria_false,
        }


@dataclass(frozen=True, slots=True)
class Choice:
    """One of 1 to 255 labelled options; the answer is a distribution over the labels."""

    instructions: str
    options: Mapping[str, str] = field(default_factory=dict)
    """Label -> what it means."""
    labels: tuple[str, ...] = field(init=False, repr=False, compare=False)
    """The option labels, in order (derived from ``options``)."""

    def __post_init__(self) -> None:
        _instructions("Choice", self.instructions)
        if not isinstance(self.options, Mapping) or not 1 <= len(self.options) <= 255:
            count = len(self.options) if isinstance(self.options, Mapping) else type(self.options).__name__
            raise ConfigError("Choice.options", f"needs 1 to 255 labelled options, got {count}")
        for label, meaning in self.options.items():
            if not isinstance(label, str) or not label.strip() or not isinstance(meaning, str):
                raise ConfigError("Choice.options", f"each option is a non-empty label with a description: {label!r}")
        object.__setattr__(self, "options", dict(self.options))
        object.__setattr__(self, "labels", tuple(self.options))

    def to_data(self) -> dict[str, Any]:
        return {"type": "choice", "instructions": self.instructions, "options": dict(self.options)}


@dataclass(frozen=True, slots=True)
class Score:
    """A score on 2 to 10 ordered levels (level 0 first); the answer is a distribution over the levels."""

    instructions: str
    levels: Sequence[str] = ()
    """What each level means, lowest first."""
    labels: tuple[str, ...] = field(init=False, repr=False, compare=False)
    """``"0"``, ``"1"``... one per level (derived from ``levels``)."""

    def __post_init__(self) -> None:
        _instructions("Score", self.instructions)
        levels = tuple(self.levels) if isinstance(self.levels, Sequence) and not isinstance(self.levels, str) else ()
        if not 2 <= len(levels) <= 10:
            raise ConfigError("Score.levels", f"needs 2 to 10 levels, got {len(levels)}")
        if not all(isinstance(level, str) and level.strip() for level in levels):
            raise ConfigError("Score.levels", "each level is a non-empty description")
        object.__setattr__(self, "levels", levels)
        # Derived once: answers are checked against the labels on every turn.
        object.__setattr__(self, "labels", tuple(str(i) for i in range(len(levels))))

    def to_data(self) -> dict[str, Any]:
        return {"type": "score", "instructions": self.instructions, "levels": list(self.levels)}


Question = YesNo | Choice | Score
