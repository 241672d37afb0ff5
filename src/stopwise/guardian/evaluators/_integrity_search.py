"""The leftmost match of a family of regexes, found fast: each pattern split into pieces that start with a literal.

Python's ``re`` scans a text quickly only for a pattern that starts with a literal (or a set of characters): it
then jumps from one occurrence of that literal to the next. A pattern that starts with ``\\b`` or with an
alternation of words is tried at every position, about 14 ns a character each: eleven marker families of a few
patterns each cost about 2 ms on 8,000 characters. ``Family`` rewrites a family's patterns, without changing what
they match, into pieces that each start with one literal (``\\b(?:ignore|disregard)\\s+all`` becomes
``ignore(?<!\\wignore)\\s+all`` and ``disregard(?<!\\wdisregard)\\s+all``: the look-behind is the ``\\b``), and runs
only the pieces whose leading word the text holds.

What a caller may rely on: ``Family.search(text, present)`` is the match ``compiled.search(text)`` would return
for ``compiled = re.compile("|".join(f"(?:{p})" for p in patterns))`` (same start and end), given ``present`` =
``words_present(tokens of text)``, or None exactly when that search finds nothing. ``anchors`` (words one of which
every match of every pattern contains) gate the pieces that cannot be split.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

__all__ = ["Family", "apostrophe_parts", "is_word_char", "words_present"]

_META = frozenset("()[]{}?*+|.^$\\")
_QUANTIFIERS = frozenset("?*+{")
_LETTERS = re.compile(r"[a-z0-9]+")
# What may follow a leading word for the token holding it to be exactly that word: a boundary, a space.
_WORD_ENDS = ("\\b", "\\s", " ")


def words_present(words: Iterable[str]) -> set[str]:
    """The distinct tokens of a text (``[a-z0-9']+`` words and single marks), and the parts of those holding an
    apostrophe ("'priority" after an opening quote, "don't"): what the gates of ``Family.search`` look up."""
    present = set(words)
    present.update(apostrophe_parts(present))
    return present


def apostrophe_parts(words: Iterable[str]) -> set[str]:
    """The parts between apostrophes of the ``words`` that hold one ("don't" gives "don" and "t")."""
    return {part for w in words if "'" in w for part in w.split("'")}


@dataclass(frozen=True, slots=True)
class _Piece:
    """A pattern (or one alternative of one) that starts with a literal, or cannot be split further."""

    source: str
    """The piece's regex; compiled on first use (``rx``): most pieces of most processes never run, and compiling
    some 200 regexes up front would add tens of milliseconds to the first use of the rule evaluator."""
    at_start: bool
    """The piece begins with ``^``: only a match at the text's start counts (``match``, not ``search``)."""
    words: frozenset[str]
    """Run only when one of these is present..."""
    also: frozenset[str] = frozenset()
    """... and all of these (the lead's other words)..."""
    then: frozenset[str] = frozenset()
    """... and one of these (the words that may follow the lead; empty when not known)."""
    compiled: list[re.Pattern[str]] = field(default_factory=list, compare=False, repr=False)

    @property
    def rx(self) -> re.Pattern[str]:
        if not self.compiled:
            self.compiled.append(re.compile(self.source))
        return self.compiled[0]

    def may_match(self, present: set[str]) -> bool:
        """False when the words ``present`` in a text rule a match out."""
        then = self.then
        return not (self.words.isdisjoint(present) or not self.also <= present or (then and then.isdisjoint(present)))

    def find(self, text: str, present: set[str]) -> tuple[int, int] | None:
        if not self.may_match(present):
            return None
        m = self.rx.match(text) if self.at_start else self.rx.search(text)
        return None if m is None else m.span()


@dataclass(frozen=True, slots=True)
class _Preceded:
    """``(?:^|[.!?]\\s*|\\bplease\\s+)tail``: a tail that must start a text, follow one of a set of marks (and
    spaces), or follow a word and spaces. Searched from the tail's literal-led pieces, each occurrence then checked
    for what precedes it: far fewer tries than the marks, frequent in JSON, each trying every tail."""

    leads: tuple[re.Pattern[str] | str | None, ...]
    """In the pattern's order: None for ``^``, a one-character class for ``[...]\\s*``, a word for ``\\bword\\s+``."""
    tail: tuple[_Piece, ...]
    words: frozenset[str]
    """Every tail piece's leading words: no match without one of them."""

    def find(self, text: str, present: set[str]) -> tuple[int, int] | None:
        best: tuple[int, int] | None = None
        for piece in self.tail:
            if piece.words.isdisjoint(present) or not piece.may_match(present):
                continue
            pos = 0
            while (m := piece.rx.search(text, pos)) is not None:
                start = self._start(text, m.start())
                if start is not None:
                    # One start has one tail position (the tail starts with a letter, after the spaces), and
                    # starts grow with tail positions: the first that fits is this piece's leftmost.
                    if best is None or start < best[0]:
                        best = (start, m.end())
                    break
                pos = m.start() + 1
        return best

    def _start(self, text: str, at: int) -> int | None:
        """Where the whole match starts when the tail starts at ``at``, or None when nothing fitting precedes."""
        k = at
        while k and text[k - 1].isspace():
            k -= 1
        starts = []
        for lead in self.leads:
            if lead is None:
                if not at:
                    starts.append(0)
            elif isinstance(lead, str):
                p = k - len(lead)
                if k < at and p >= 0 and text.startswith(lead, p) and not (p and is_word_char(text[p - 1])):
                    starts.append(p)
            else:
                # The mark right before the spaces, or the first space that is itself one of the marks ("\n").
                first = next((i for i in range(max(k - 1, 0), at) if lead.match(text, i)), None)
                if first is not None:
                    starts.append(first)
        return min(starts, default=None)


def is_word_char(c: str) -> bool:
    """What ``\\w`` matches in a ``str`` pattern."""
    return c.isalnum() or c == "_"


_LEAD_MARKS = re.compile(r"(\[[^\]]+\])\\s\*")
_LEAD_WORD = re.compile(r"\\b([a-z]+)\\s\+")


def _preceded(leads: list[str], tail: str, anchors: frozenset[str]) -> _Preceded | None:
    """``(?:leads)tail`` as a ``_Preceded``, or None when a lead is of another kind or the tail cannot be split."""
    kinds: list[re.Pattern[str] | str | None] = []
    for lead in leads:
        marks, word = _LEAD_MARKS.fullmatch(lead), _LEAD_WORD.fullmatch(lead)
        if lead == "^":
            kinds.append(None)
        elif marks is not None:
            kinds.append(re.compile(marks.group(1)))
        elif word is not None:
            kinds.append(word.group(1))
        else:
            return None
    pieces = [p for alt in _alternatives(tail) for p in _split(alt, anchors, follows_space=True)]
    if not all(isinstance(p, _Piece) and p.source[:1].isalpha() for p in pieces):
        return None
    tails = tuple(p for p in pieces if isinstance(p, _Piece))
    return _Preceded(tuple(kinds), tails, frozenset().union(*(p.words for p in tails)))


@dataclass(frozen=True, slots=True)
class Family:
    """A family of regexes as pieces that each start with a literal (see the module docstring)."""

    pieces: tuple[_Piece | _Preceded, ...]

    @classmethod
    def of(cls, patterns: Sequence[str], anchors: frozenset[str]) -> Family:
        return cls(tuple(p for source in patterns for alt in _alternatives(source) for p in _split(alt, anchors)))

    def search(self, text: str, present: set[str]) -> tuple[int, int] | None:
        """The span of the joined patterns' leftmost match in ``text``, or None."""
        best: tuple[int, int] | None = None
        for piece in self.pieces:
            if piece.words.isdisjoint(present):
                continue  # the commonest way out, tested here without a call
            span = piece.find(text, present)
            # The earliest start wins; on a tie the earlier piece, as the joined alternation would try it first.
            if span is not None and (best is None or span[0] < best[0]):
                best = span
                if not span[0]:
                    break
        return best


def _split(
    alt: str, anchors: frozenset[str], boundary: bool = False, follows_space: bool = False
) -> list[_Piece | _Preceded]:
    """The pieces of one alternative (``boundary``: it followed a ``\\b``; ``follows_space``: it is a
    ``_Preceded`` tail, so a match starts a token)."""
    if alt.startswith("\\b"):
        return _split(alt[2:], anchors, True, follows_space)
    b = "\\b" if boundary else ""
    if alt.startswith("(?:"):
        end = _close(alt)
        tail = alt[end + 1 :]
        if not tail or tail[0] not in _QUANTIFIERS:
            inner = _alternatives(alt[3:end])
            preceded = None if boundary or follows_space else _preceded(inner, tail, anchors)
            if preceded is not None:
                return [preceded]
            # ``\b(?:x|y)tail`` is ``\bxtail|\bytail``, tried in that order.
            return [p for i in inner for p in _split(b + i + tail, anchors, False, follows_space)]
    if alt.startswith("^"):
        return [_Piece(b + alt, True, anchors)]
    lead, used = _literal_run(alt)
    rest = alt[used:]
    if (boundary or follows_space) and lead[:1].isalnum():
        words = _first_words(alt) or anchors
        # The lead's later words are whole tokens (or apostrophe parts) of any match: "the user has" needs "user"
        # and "has". After a lead ending in a space, the next token is one of the rest's first words, if known.
        whole = rest.startswith(_WORD_ENDS)
        inner = [m.group() for m in _LETTERS.finditer(lead) if m.end() < len(lead) or whole][1:]
        then = _first_words(rest) if not lead[-1].isalnum() and lead[-1] != "'" else None
        guard = f"(?<!\\w{re.escape(lead)})" if boundary else ""
        return [_Piece(f"{re.escape(lead)}{guard}{rest}", False, words, frozenset(inner), then or frozenset())]
    return [_Piece(b + alt, False, anchors)]


def _first_words(alt: str) -> frozenset[str] | None:
    """The token (or apostrophe part) any match of ``alt`` starts with, when ``alt`` is matched at a token's start
    and that can be known from its literals (None when not)."""
    if alt.startswith("(?:"):
        end = _close(alt)
        tail = alt[end + 1 :]
        if tail and tail[0] in _QUANTIFIERS:
            return None
        found: set[str] = set()
        for inner in _alternatives(alt[3:end]):
            words = _first_words(inner + tail)
            if words is None:
                return None
            found |= words
        return frozenset(found)
    lead, used = _literal_run(alt)
    rest = alt[used:]
    first = _LETTERS.match(lead)
    if first is None or first.start():
        return None
    word = first.group()
    # ``word`` is a whole token when a non-letter follows it in the lead or the rest starts with a word's end;
    # or it is ``word`` and one optional letter ("agents?", "an?").
    if len(word) < len(lead) or rest.startswith(_WORD_ENDS):
        return frozenset({word})
    if _OPTIONAL_LETTER.match(rest) and rest[2:].startswith(_WORD_ENDS):
        return frozenset({word, word + rest[0]})
    return None


_OPTIONAL_LETTER = re.compile(r"[a-z]\?")


def _literal_run(source: str) -> tuple[str, int]:
    """The literal text ``source`` starts with (a character a quantifier follows is not part of it), and how many
    characters of ``source`` spell it."""
    out: list[str] = []
    i = 0
    while i < len(source):
        c = source[i]
        if c == "\\":
            if i + 1 >= len(source) or source[i + 1].isalnum() or source[i + 1] == "_":
                break  # a class (\s, \w, \d) or an assertion (\b), not a literal
            char, width = source[i + 1], 2
        elif c in _META:
            break
        else:
            char, width = c, 1
        if source[i + width : i + width + 1] in _QUANTIFIERS:
            break
        out.append(char)
        i += width
    return "".join(out), i


def _syntax(source: str) -> Iterator[tuple[int, str]]:
    """The characters of pattern ``source`` that are syntax, with their index: escapes and character classes
    skipped."""
    i, in_class = 0, False
    while i < len(source):
        c = source[i]
        if c == "\\":
            i += 2
            continue
        if in_class:
            in_class = c != "]"
        elif c == "[":
            in_class = True
            if source[i + 1 : i + 2] == "^":
                i += 1
            if source[i + 1 : i + 2] == "]":
                i += 1  # a "]" first in a class is a literal
        else:
            yield i, c
        i += 1


def _alternatives(source: str) -> list[str]:
    """``source`` cut at its top-level ``|``."""
    out, depth, start = [], 0, 0
    for i, c in _syntax(source):
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        elif c == "|" and not depth:
            out.append(source[start:i])
            start = i + 1
    out.append(source[start:])
    return out


def _close(source: str) -> int:
    """The index of the ``)`` that closes the group opening ``source``."""
    depth = 0
    for i, c in _syntax(source):
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if not depth:
                return i
    raise ValueError(f"unbalanced group in {source!r}")
