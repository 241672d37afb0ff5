"""A one-line progress bar on stderr for the commands that read a lot (eval, whole-database stats): no dependency,
redrawn at most ten times a second."""

from __future__ import annotations

import sys
import time
from typing import TextIO

__all__ = ["ProgressBar"]


class ProgressBar:
    """``bar(done, total)`` redraws ``label [#####.....] done/total elapsed``; ``close()`` ends the line.

    Drawn only when ``enabled`` (by default: when the stream is a terminal), so logs and CI output stay clean.
    """

    def __init__(self, label: str, *, stream: TextIO | None = None, enabled: bool | None = None, width: int = 30):
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = enabled if enabled is not None else self.stream.isatty()
        self.label = label
        self.width = width
        self._start = time.perf_counter()
        self._last = 0.0
        self._drawn = False

    def __call__(self, done: int, total: int) -> None:
        if not self.enabled:
            return
        now = time.perf_counter()
        if done < total and now - self._last < 0.1:
            return
        self._last = now
        filled = self.width * done // total if total else self.width
        bar = "#" * filled + "." * (self.width - filled)
        self.stream.write(f"\r{self.label} [{bar}] {done:,}/{total:,} {now - self._start:.1f}s")
        self.stream.flush()
        self._drawn = True

    def close(self) -> None:
        if self._drawn:
            self.stream.write("\n")
            self.stream.flush()
            self._drawn = False
