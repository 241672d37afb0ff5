"""Deprecated names kept for one minor release (see CHANGELOG.md): a module-level ``__getattr__`` that warns."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping

__all__ = ["aliases"]


def aliases(module: str, renamed: Mapping[str, tuple[str, object]]) -> Callable[[str], object]:
    """A ``__getattr__`` for ``module`` that serves each old name (``old -> (new name, object)``) with a
    ``DeprecationWarning`` naming the new one, and raises ``AttributeError`` for anything else."""

    def __getattr__(name: str) -> object:
        if name in renamed:
            new, value = renamed[name]
            warnings.warn(
                f"{module}.{name} is deprecated and will be removed in the next minor release; use {new}",
                DeprecationWarning,
                stacklevel=2,
            )
            return value
        raise AttributeError(f"module {module!r} has no attribute {name!r}")

    return __getattr__
