"""The eval reports' plain-text tables: the first column left-aligned, the others right-aligned, a rule below
the headers. Every cell is escaped (``terminal_safe``): a trace's source or id is text a log or a file wrote."""

from __future__ import annotations

from typing import TextIO

from stopwise._terminal import terminal_safe

__all__ = ["table"]


def table(headers: list[str], rows: list[list[str]], out: TextIO) -> None:
    rows = [[terminal_safe(cell) for cell in row] for row in rows]
    widths = [max(len(cell) for cell in column) for column in zip(headers, *rows, strict=False)]

    def line(cells: list[str]) -> str:
        return "  ".join(
            c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        )

    print(line(headers).rstrip(), file=out)
    print(line(["-" * w for w in widths]).rstrip(), file=out)
    for row in rows:
        print(line(row).rstrip(), file=out)
