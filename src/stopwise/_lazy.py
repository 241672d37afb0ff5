"""Names a package exports but imports only when first used (PEP 562), so ``import stopwise`` stays fast."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping

__all__ = ["lazy"]


def lazy(
    package: str, where: Mapping[str, str], fallback: Callable[[str], object] | None = None
) -> Callable[[str], object]:
    """A module ``__getattr__`` for ``package``: each name of ``where`` (``name -> module``) is imported from its
    module when first asked for, then kept in the package's namespace, so later lookups are plain attribute reads.
    Any other name goes to ``fallback`` (another ``__getattr__``, e.g. deprecated aliases), else
    ``AttributeError``. A type checker sees the names through ``if TYPE_CHECKING:`` imports in the package."""
    namespace = importlib.import_module(package).__dict__

    def __getattr__(name: str) -> object:
        module = where.get(name)
        if module is None:
            if fallback is not None:
                return fallback(name)
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    return __getattr__
