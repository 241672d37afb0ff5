"""What counts as "the same call" for the repeat limit (``ThresholdPolicy.repeat_limit``): the tool's name and
its arguments in a canonical form (``canonical_args``), so a model cannot dodge the limit by re-sending one call
dressed differently.

Canonical means equal as JSON values and as a reader would see them: object keys in any order, a number written
``1`` or ``1.0``, and a text that differs only in spacing (leading, trailing, or runs of whitespace) are the same.
A ``true`` is not the number ``1``, list order matters, and a changed text or an extra field (a fresh nonce)
makes another call: those are left to the guardian's stagnation question, which reads near repeats and results
that bring nothing new.

``Streak`` counts how many times in a row a run's latest call was made, on those keys (pure: the native loop keeps
one on its leg and extends it step by step, the peer integrations count a run's rows with it).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from stopwise.messages import Message

__all__ = ["Streak", "canonical_args"]


def canonical_args(args: Any) -> str:
    """``args`` as canonical JSON text: equal for two argument values that are the same call (see the module)."""
    return json.dumps(_canonical(args), sort_keys=True, default=str, ensure_ascii=False, separators=(",", ":"))


def _canonical(value: Any) -> Any:
    if isinstance(value, str):
        return " ".join(value.split())
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {str(k): _canonical(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_canonical(v) for v in value]
    return value


@dataclass(frozen=True, slots=True)
class Streak:
    """The latest run of one repeated call (same tool, same arguments) in a span of rows: its call's key, how many
    times in a row it was made, and whether the span holds no other call (so the streak may go on before it)."""

    key: tuple[str, str] | None = None
    count: int = 0
    whole: bool = True

    @classmethod
    def of(cls, rows: Sequence[Message], keys: Mapping[str, str] | None = None, start: int = 0) -> Streak:
        """The streak at the end of ``rows[start:]`` (oldest first), read from the newest row back only as far as
        the streak goes. ``keys``: per call id, the key that stands for a call's arguments when its logged ones are
        not the model's (a redacted call's)."""
        key, count = None, 0
        for i in range(len(rows) - 1, start - 1, -1):
            for c in reversed(rows[i].tool_calls):
                k = (c.name, (keys.get(c.id) if keys else None) or canonical_args(c.args))
                if key is None:
                    key = k
                elif k != key:
                    return cls(key, count, False)
                count += 1
        return cls(key, count)

    def then(self, newer: Streak) -> Streak:
        """The streak of this span followed by ``newer``'s (rows without calls leave a streak as it is)."""
        if newer.key is None:
            return self
        if newer.whole and newer.key == self.key:
            return Streak(self.key, self.count + newer.count, self.whole)
        return newer
