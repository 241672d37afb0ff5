"""A decoded view of a text for the secret and personal-data detectors, with a map back to the text's positions.

A tool argument or result can carry a secret or a card number in a shape the detectors' patterns do not read:
percent-encoded inside a URL (``token%3Dghp_...``), inside a JSON document that is itself a JSON string
(``{\\"password\\": \\"...\\"}``) or in an HTML attribute (``{&quot;apiKey&quot;: ...}``), with zero-width
characters or a soft hyphen inside it (invisible, so a reader copies the secret whole), or grouped by no-break or
thin spaces and typographic dashes (``4111\\u00a01111...``).
``decoded_view`` undoes those once, so the detectors can run on the view, and maps each find back to the span of
the original text it came from, so the redaction covers the encoded characters too (and keeps the escapes
around it: a JSON string stays valid).

Unlike ``stopwise.normalise`` (intent rules), nothing here folds letters or digits into others: a secret's
characters are its value. Pure and deterministic.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass

__all__ = ["DecodedView", "decoded_view"]

# Characters that render as nothing and could sit inside a token: soft hyphen, Mongolian vowel separator,
# zero-width spaces and joiners, directional marks, embeddings, overrides and isolates, word joiner and
# invisible operators, the BOM. (The intent normaliser's set is wider: it reads prose, this reads values.)
_INVISIBLE = "\u00ad\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff"
# Separators that typesetting puts in numbers: no-break, figure, thin and narrow no-break spaces; hyphens, the
# en dash and the minus sign.
_SPACES = "\u00a0\u2007\u2009\u202f"
_DASHES = "\u2010\u2011\u2012\u2013\u2212"
# The HTML entities of quotes and the ampersand: JSON in an HTML attribute (``data-config="{&quot;key&quot;:...``).
_ENTITIES = {"&quot;": '"', "&#34;": '"', "&#x22;": '"', "&apos;": "'", "&#39;": "'", "&#x27;": "'", "&amp;": "&"}
_SPACE_SET = frozenset(_SPACES)
_DASH_SET = frozenset(_DASHES)
# What each reader needs decoded: secrets live in escaped text (JSON in JSON, in HTML, in a URL); numbers in
# typeset text. Typeset spaces and dashes are common in prose, so the secret rules do not pay for them.
_FOR_SECRETS = re.compile(
    rf"[{_INVISIBLE}]|%[2-7][0-9A-Fa-f]|\\u00[2-7][0-9A-Fa-f]|\\[\"'\\/]|&(?:quot|apos|amp|#3[49]|#x2[27]);"
)
_FOR_NUMBERS = re.compile(rf"[{_INVISIBLE}]|[{_SPACES}]|[{_DASHES}]|%[2-7][0-9A-Fa-f]")
# How far around each decoded character a detector reads the view: longer than any token, a little more to find
# the start of the word it sits in. Elsewhere the view is the text, which the detectors read already.
_MARGIN = 320
_SNAP = 64


@dataclass(frozen=True, slots=True)
class DecodedView:
    """``text``, a decoding of ``source``, and for each piece of it where it came from in ``source``."""

    text: str
    _starts: tuple[int, ...]
    """The view offset where each piece starts, ascending (a removed character is a piece of length 0)."""
    _pieces: tuple[tuple[int, int, int, bool], ...]
    """Per piece: (view start, source start, source end, whether it is a copy of the source)."""

    def windows(self) -> list[tuple[int, int]]:
        """The stretches of ``text`` (start, end) that hold a decoded character, with enough around each that a
        find touching one lies inside: each reaches ``_MARGIN`` characters past the decoded ones, then out to a
        whitespace (within ``_SNAP`` more), so it does not start or end in the middle of a word."""
        text = self.text
        out: list[tuple[int, int]] = []
        for view_start, _, _, copied in self._pieces:
            if copied:
                continue
            lo = max(0, view_start - _MARGIN)
            hi = min(len(text), view_start + 1 + _MARGIN)
            if lo > 0:
                cut = max(text.rfind(" ", max(0, lo - _SNAP), lo), text.rfind("\n", max(0, lo - _SNAP), lo))
                lo = cut + 1 if cut >= 0 else lo
            if out and lo <= out[-1][1]:
                out[-1] = (out[-1][0], hi)
            else:
                out.append((lo, hi))
        for i, (lo, hi) in enumerate(out):
            if hi < len(text):
                cut = min(
                    (c for c in (text.find(" ", hi, hi + _SNAP), text.find("\n", hi, hi + _SNAP)) if c >= 0), default=hi
                )
                out[i] = (lo, cut)
        return out

    def source_span(self, start: int, end: int) -> tuple[int, int]:
        """The span of the source that ``text[start:end]`` (not empty) was decoded from."""
        return self._source_start(start), self._source_end(end - 1)

    def _piece(self, at: int) -> tuple[int, int, int, bool]:
        return self._pieces[bisect_right(self._starts, at) - 1]

    def _source_start(self, at: int) -> int:
        view_start, src_start, _, copied = self._piece(at)
        return src_start + (at - view_start) if copied else src_start

    def _source_end(self, last: int) -> int:
        view_start, src_start, src_end, copied = self._piece(last)
        return src_start + (last - view_start) + 1 if copied else src_end


def _decode(token: str) -> str:
    if token[0] == "%":
        return chr(int(token[1:], 16))
    if token.startswith("\\u"):
        return chr(int(token[2:], 16))
    if token[0] == "\\":
        return token[1]
    if token[0] == "&":
        return _ENTITIES[token]
    if token in _SPACE_SET:
        return " "
    if token in _DASH_SET:
        return "-"
    return ""  # invisible


def decoded_view(text: str, *, numbers: bool) -> DecodedView | None:
    """The view of ``text`` with invisible characters removed and printable percent-escapes (``%3D``) decoded, and
    for secrets (``numbers=False``) JSON's ``\\u0026``-style escapes of printable ASCII (Go writes ``&``, ``<``, ``>``
    so), backslash-escaped quotes, slashes and backslashes and the HTML entities of quotes and ``&`` decoded, or for
    numbers (``numbers=True``) typographic spaces and dashes made plain; None when there is nothing to decode."""
    matches = list((_FOR_NUMBERS if numbers else _FOR_SECRETS).finditer(text))
    if not matches:
        return None
    parts: list[str] = []
    starts: list[int] = []
    pieces: list[tuple[int, int, int, bool]] = []
    at = view_at = 0
    for m in matches:
        if m.start() > at:
            starts.append(view_at)
            pieces.append((view_at, at, m.start(), True))
            parts.append(text[at : m.start()])
            view_at += m.start() - at
        decoded = _decode(m.group())
        starts.append(view_at)
        pieces.append((view_at, m.start(), m.end(), False))
        parts.append(decoded)
        view_at += len(decoded)
        at = m.end()
    if at < len(text):
        starts.append(view_at)
        pieces.append((view_at, at, len(text), True))
        parts.append(text[at:])
    return DecodedView("".join(parts), tuple(starts), tuple(pieces))
