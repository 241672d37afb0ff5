"""What counts as "the same call" for the repeat limit (``ThresholdPolicy.repeat_limit``): the tool's name and
its arguments in a canonical form (``canonical_args``), so a model cannot dodge the limit by re-sending one call
dressed differently.

Canonical means equal as JSON values and as a reader would see them: object keys in any order, a number written
``1`` or ``1.0``, and a text that differs only in spacing (leading, trailing, or runs of whitespace) are the same.
A ``true`` is not the number ``1``, list order matters, and a changed text or an extra field (a fresh nonce)
makes another call: those are left to the guardian's stagnation question, which reads near repeats and results
that bring nothing new.
"""

from __future__ import annotations

import json
import math
from typing import Any

__all__ = ["canonical_args"]


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
