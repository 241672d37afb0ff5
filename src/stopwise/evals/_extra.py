"""The ``eval`` extra: what its modules raise when numpy or scikit-learn is not installed."""

from __future__ import annotations

EXTRA_HINT = "pip install 'stopwise[eval]'"


def missing_extra(module: str, exc: ImportError) -> ModuleNotFoundError:
    """A ``ModuleNotFoundError`` naming ``module``, the extra and the install command, for ``raise ... from exc``.

    Its ``name`` is the missing package's (``numpy``, ``sklearn``), as the bare error's was.
    """
    return ModuleNotFoundError(f"{module} needs the eval extra: {EXTRA_HINT} ({exc})", name=exc.name)
