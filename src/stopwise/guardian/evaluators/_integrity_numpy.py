"""The integrity model's window logits with numpy (the ``fast`` extra): bit for bit the numbers of the pure-Python
path of ``IntegrityModel._scores``, some three times faster on a long text.

Used by ``IntegrityModel`` for a bigram model (``ngram == 2``) on a text of at least ``_integrity._NUMPY_FROM``
tokens when numpy can be imported (imported on first such text, not with stopwise). What a caller may rely on:
the logits are exactly those of the pure-Python path (the same floats, not close ones): every sum is taken in the
same order (``numpy.cumsum`` adds one term after the other, as ``itertools.accumulate`` does, and each window
adds its n-gram orders' differences one after the other, starting from 0.0), and a bigram's bucket is the same CRC-32.

A bigram's CRC is ``zlib.crc32(b" " + second, crc32(first))``. CRC-32 is affine in the register it starts from:
``crc32(data, v) == shift(len(data), v ^ 0xFFFFFFFF) ^ crc32(data, 0xFFFFFFFF)``, where ``shift(n, x)`` (the register
``x`` run over ``n`` zero bytes) is linear in ``x``, so it is four table look-ups, one per byte of ``x``. The
tables are built for data of up to ``LONGEST`` bytes; a bigram whose second word is longer is hashed by ``zlib``.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["LONGEST", "Columns", "prefix_sums", "scores"]

LONGEST = 48
"""The longest ``b" " + word`` (in bytes) whose bigrams the shift tables hash; longer ones go to ``zlib``."""

_ONES = 0xFFFFFFFF


def _shift_tables() -> Any:
    """``out[n, i, b]``: the register ``b << 8 * i`` run over ``n`` zero bytes (``crc32`` without its final xor)."""
    out = np.zeros((LONGEST + 1, 4, 256), dtype=np.uint32)
    for n in range(1, LONGEST + 1):
        zeros = bytes(n)
        base = zlib.crc32(zeros, _ONES)
        for i in range(4):
            out[n, i] = [zlib.crc32(zeros, (b << (8 * i)) ^ _ONES) ^ base for b in range(256)]
    return out


_SHIFTS = _shift_tables()


class Columns:
    """numpy copies of a word table's columns (``_WordTable``: rows are only ever added), extended as it grows:
    each word's CRC, ``crc32(b" " + word, 0xFFFFFFFF)``, the length of ``b" " + word`` (0 past ``LONGEST``) and
    its unigram weight; and the model's dense weights."""

    def __init__(self, dense: Sequence[float]) -> None:
        self.dense = np.asarray(dense, dtype=np.float64)
        self.size = 0
        self.crc = np.zeros(0, dtype=np.uint32)
        self.tail = np.zeros(0, dtype=np.uint32)
        self.length = np.zeros(0, dtype=np.intp)
        self.unigram = np.zeros(0, dtype=np.float64)

    def extend(self, crc: Sequence[int], spaced: Sequence[bytes], unigram: Sequence[float]) -> None:
        """Copy the rows from ``size`` up to the length of the columns given (the table's, read under its lock)."""
        new = slice(self.size, len(crc))
        words = spaced[new]
        self.crc = np.concatenate((self.crc, np.asarray(crc[new], dtype=np.uint32)))
        self.tail = np.concatenate((self.tail, np.fromiter((zlib.crc32(s, _ONES) for s in words), np.uint32)))
        lengths = np.fromiter(map(len, words), np.intp, len(words))
        self.length = np.concatenate((self.length, np.where(lengths <= LONGEST, lengths, 0)))
        self.unigram = np.concatenate((self.unigram, np.asarray(unigram[new], dtype=np.float64)))
        self.size = len(crc)


def prefix_sums(columns: Columns, rows: Sequence[int], crc: Sequence[int], spaced: Sequence[bytes], mask: int) -> Any:
    """The unigram and bigram prefix sums of the tokens at ``rows`` (``IntegrityModel._prefix_sums``), as two numpy
    arrays starting with 0.0; ``crc`` and ``spaced`` are the table's columns (for words past ``LONGEST``)."""
    r = np.fromiter(rows, dtype=np.intp, count=len(rows))
    first, second = r[:-1], r[1:]
    x = columns.crc[first] ^ np.uint32(_ONES)
    n = columns.length[second]
    s = _SHIFTS
    codes = s[n, 0, x & 255] ^ s[n, 1, (x >> 8) & 255] ^ s[n, 2, (x >> 16) & 255] ^ s[n, 3, x >> 24]
    codes ^= columns.tail[second]
    for j in np.flatnonzero(n == 0).tolist():
        codes[j] = zlib.crc32(spaced[int(second[j])], crc[int(first[j])])
    zero = np.zeros(1, dtype=np.float64)
    return (
        np.concatenate((zero, np.cumsum(columns.unigram[r]))),
        np.concatenate((zero, np.cumsum(columns.dense[codes & np.uint32(mask)]))),
    )


def scores(prefix: Any, n: int, width: int, step: int, bias: float) -> list[float]:
    """The logit of each regular window (starting every ``step`` tokens) of a text of ``n > width`` tokens, from
    ``prefix_sums``' arrays: what ``IntegrityModel._scores`` computes from its lists."""
    totals = np.zeros(len(range(0, n - width + 1, step)), dtype=np.float64)
    for k, p in enumerate(prefix, 1):
        totals = totals + (p[width - k + 1 : n - k + 2 : step] - p[: n - width + 1 : step])
    scale = 1.0 / math.sqrt(sum(width - k + 1 for k in range(1, len(prefix) + 1)))
    logits: list[float] = (bias + totals * scale).tolist()
    return logits
