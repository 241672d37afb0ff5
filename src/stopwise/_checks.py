"""Checks of what a caller configures, shared by the constructors that take it: each raises ``ConfigError`` naming
the field, when the agent (tool, guard, runner) is defined rather than steps into a run."""

from __future__ import annotations

import inspect
import math

from stopwise.errors import ConfigError

__all__ = ["check_async_method", "check_function", "check_model", "check_seconds", "check_store", "is_async_function"]


def check_seconds(field: str, value: object, *, optional: bool = True) -> None:
    """``value`` is a positive, finite number of seconds (not a bool, a string, NaN or infinity), or None when
    ``optional`` (no limit)."""
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, int | float) or not (value > 0 and math.isfinite(value)):
        or_none = " or None" if optional else ""
        raise ConfigError(field, f"must be positive seconds (a finite number){or_none}, got {value!r}")


def check_function(field: str, fn: object, *params: str) -> None:
    """``fn`` is callable with the positional arguments ``params`` name (the loop calls it so).

    A function that cannot take them (``lambda: True`` for a predicate of the step) would otherwise fail the run
    with a TypeError at its first call; it is refused here instead. A callable whose signature Python cannot read
    (some builtins) is taken on trust."""
    if not callable(fn):
        raise ConfigError(field, f"must be a function, got {fn!r}")
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return
    try:
        signature.bind(*params)
    except TypeError as exc:
        wanted = f"({', '.join(params)})" if params else "()"
        raise ConfigError(field, f"{_label(fn)} cannot be called as fn{wanted}: {exc}") from None


def is_async_function(fn: object) -> bool:
    """Whether calling ``fn`` makes a coroutine: an ``async def`` function or method, one wrapped by a decorator
    that kept ``__wrapped__``, or an object whose ``__call__`` is ``async def``."""
    if inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(inspect.unwrap(fn)):  # type: ignore[arg-type]
        return True
    if inspect.isfunction(fn) or inspect.ismethod(fn) or not callable(fn):
        return False
    return inspect.iscoroutinefunction(type(fn).__call__)


def check_async_method(field: str, obj: object, method: str) -> None:
    """``obj.method`` exists, is callable, and is not a plain ``def``: the loop awaits what it returns, so a sync
    method (``def generate(self, request)``) would fail the run at its first call. A callable Python cannot tell
    apart (a builtin, a mock) is taken on trust."""
    fn = getattr(obj, method, None)
    if not callable(fn):
        raise ConfigError(field, f"must have an async {method}(...) method, got {obj!r}")
    target = inspect.unwrap(getattr(fn, "__func__", fn))
    if inspect.isfunction(target) and not inspect.iscoroutinefunction(target):
        raise ConfigError(field, f"{type(obj).__name__}.{method} must be 'async def': the loop awaits it")


def check_model(field: str, model: object) -> None:
    """``model`` is a model instance whose ``generate`` is ``async def`` (or cannot be told apart from one)."""
    if isinstance(model, type):
        # The class's generate is callable too, but called unbound it fails at the first step.
        raise ConfigError(field, f"must be a model instance, got the class {model.__name__}: call it")
    if not callable(getattr(model, "generate", None)):
        raise ConfigError(field, f"must have an async generate(request) method or be a model string, got {model!r}")
    check_async_method(field, model, "generate")


def check_store(field: str, store: object) -> None:
    """``store`` has a store's methods: a path given where a ``SQLiteStore(path)`` is meant fails here, not at the
    first ``load_session`` of a run."""
    if not all(callable(getattr(store, method, None)) for method in ("load_session", "start_run", "commit")):
        raise ConfigError(field, f"must be a Store (MemoryStore(), SQLiteStore(path), ...), got {store!r}")


def _label(fn: object) -> str:
    name = getattr(fn, "__name__", None) or type(fn).__name__
    return "the lambda" if name == "<lambda>" else repr(name)
