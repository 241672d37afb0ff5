"""Checks of what a caller configures, shared by the constructors that take it: each raises ``ConfigError`` naming
the field, when the agent (tool, guard, runner) is defined rather than steps into a run."""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from typing import Any

from stopwise.errors import ConfigError

__all__ = ["check_function", "check_seconds"]


def check_seconds(field: str, value: object, *, optional: bool = True) -> None:
    """``value`` is a positive, finite number of seconds (not a bool, a string, NaN or infinity), or None when
    ``optional`` (no limit)."""
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, int | float) or not (value > 0 and math.isfinite(value)):
        or_none = " or None" if optional else ""
        raise ConfigError(field, f"must be positive seconds (a finite number){or_none}, got {value!r}")


def check_function(field: str, fn: object, *params: str) -> Callable[..., Any]:
    """``fn`` is callable with the positional arguments ``params`` name (the loop calls it so).

    A function that cannot take them (``lambda: True`` for a predicate of the step) would otherwise fail the run
    with a TypeError at its first call; it is refused here instead. A callable whose signature Python cannot read
    (some builtins) is taken on trust."""
    if not callable(fn):
        raise ConfigError(field, f"must be a function, got {fn!r}")
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return fn
    try:
        signature.bind(*params)
    except TypeError as exc:
        wanted = f"({', '.join(params)})" if params else "()"
        raise ConfigError(field, f"{_label(fn)} cannot be called as fn{wanted}: {exc}") from None
    return fn


def _label(fn: object) -> str:
    name = getattr(fn, "__name__", None) or type(fn).__name__
    return "the lambda" if name == "<lambda>" else repr(name)
