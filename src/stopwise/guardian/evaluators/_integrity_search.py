"""The leftmost match of a family of regexes, found fast: each pattern split into pieces that start with a literal.

Python's ``re`` scans a text quickly only for a pattern that starts with a literal (or a set of characters): it
then jumps from one occurrence of that literal to the next. A pattern that starts with ``\\b`` or with an
alternation of words is tried at every position, about 14 ns a character each: eleven marker families of a few
patterns each cost about 2 ms on 8,000 characters. ``Family`` rewrites a family's patterns, without changing what
they match, into pieces that each start with one literal (``\\b(?:ignore|disregard)\\s+all`` becomes
``ignore(?<!\\wignore)\\s+all`` and ``disregard(?<!\\wdisregard)\\s+all``: the look-behind is the ``\\b``), and runs
only the pieces whose leading word the text holds, and one of each set of words that ``_required`` reads further in
the piece as certain to be in every match (``all`` above).

What a caller may rely on: ``Family.search(text, present)`` is the match ``compiled.search(text)`` would return
for ``compiled = re.compile("|".join(f"(?:{p})" for p in patterns))`` (same start and end), given ``present`` =
``words_present(tokens of text)``, or None exactly when that search finds nothing. ``Families.search`` gives each
family's ``Family.search`` answer, for several families at once. ``anchors`` (words one of which
every match of every pattern contains) gate the pieces that cannot be split.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import groupby
from operator import itemgetter

__all__ = ["Families", "Family", "apostrophe_parts", "is_word_char", "words_present"]

_META = frozenset("()[]{}?*+|.^$\\")
_QUANTIFIERS = frozenset("?*+{")
_LETTERS = re.compile(r"[a-z0-9]+")


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
    """... and one of these (the words that may follow the lead; empty when not known)..."""
    clauses: tuple[frozenset[str], ...] = ()
    """... and one of each of these (``_required``: words later in the pattern that every match holds)."""
    compiled: list[re.Pattern[str]] = field(default_factory=list, compare=False, repr=False)
    rest: tuple[frozenset[str], ...] = field(init=False, compare=False, repr=False)
    """The sets besides ``words`` of which a text must hold one each (``also``'s words one by one, ``then``,
    ``clauses``): tested in one C call after ``words``."""

    def __post_init__(self) -> None:
        sets = [frozenset({w}) for w in sorted(self.also)] + ([self.then] if self.then else []) + list(self.clauses)
        object.__setattr__(self, "rest", tuple(dict.fromkeys(c for c in sets if c != self.words)))

    @property
    def rx(self) -> re.Pattern[str]:
        if not self.compiled:
            self.compiled.append(re.compile(self.source))
        return self.compiled[0]

    def may_match(self, present: set[str]) -> bool:
        """False when the words ``present`` in a text rule a match out."""
        return not (self.words.isdisjoint(present) or any(map(present.isdisjoint, self.rest)))

    def find(self, text: str, present: set[str]) -> tuple[int, int] | None:
        return self.run(text, present) if self.may_match(present) else None

    def run(self, text: str, present: set[str]) -> tuple[int, int] | None:
        """``find`` without the gate (the caller tested it)."""
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
    rest: tuple[frozenset[str], ...] = ()
    """Empty: ``words`` is the whole gate here (``run`` gates each tail piece by its own sets)."""

    def find(self, text: str, present: set[str]) -> tuple[int, int] | None:
        return None if self.words.isdisjoint(present) else self.run(text, present)

    def run(self, text: str, present: set[str]) -> tuple[int, int] | None:
        best: tuple[int, int] | None = None
        disjoint = present.isdisjoint
        for piece in self.tail:
            if piece.words.isdisjoint(present) or any(map(disjoint, piece.rest)):
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
        return _leftmost([p for p in self.pieces if not p.words.isdisjoint(present)], text, present)


def _leftmost(pieces: Iterable[_Piece | _Preceded], text: str, present: set[str]) -> tuple[int, int] | None:
    """The leftmost match, as ``Family.search`` picks it, of a family's ``pieces`` (in order; each known to have one
    of its ``words`` in the text) whose other sets (``rest``) the text holds too; or None."""
    best: tuple[int, int] | None = None
    disjoint = present.isdisjoint
    for piece in pieces:
        if any(map(disjoint, piece.rest)):  # one C call
            continue
        span = piece.run(text, present)
        # The earliest start wins; on a tie the earlier piece, as the joined alternation would try it first.
        if span is not None and (best is None or span[0] < best[0]):
            best = span
            if not span[0]:
                break
    return best


@dataclass(frozen=True, slots=True)
class Families:
    """Several families searched in one text, each as ``Family.search`` finds it, the pieces to run found from the
    words the text holds: one C intersection of those with every piece's words instead of a test per piece (a
    short text holds few words, and most pieces of most families lead with none of them)."""

    families: tuple[Family, ...]
    leads: frozenset[str] = field(init=False, compare=False, repr=False)
    """Every piece's ``words``."""
    by_lead: dict[str, tuple[tuple[int, int], ...]] = field(init=False, compare=False, repr=False)
    """For each word of ``leads``, the (family, piece) indices of the pieces whose ``words`` hold it."""

    def __post_init__(self) -> None:
        by_lead: dict[str, list[tuple[int, int]]] = {}
        for f, family in enumerate(self.families):
            for i, piece in enumerate(family.pieces):
                for word in piece.words:
                    by_lead.setdefault(word, []).append((f, i))
        object.__setattr__(self, "leads", frozenset(by_lead))
        object.__setattr__(self, "by_lead", {w: tuple(ix) for w, ix in by_lead.items()})

    def search(self, text: str, present: set[str]) -> list[tuple[int, int] | None]:
        """``[family.search(text, present) for family in families]``."""
        spans: list[tuple[int, int] | None] = [None] * len(self.families)
        held = self.leads.intersection(present)  # iterates the smaller of the two
        if held:
            # Sorted, the indices come family by family and, within one, in the pieces' order.
            runs = sorted({fi for word in held for fi in self.by_lead[word]})
            for f, group in groupby(runs, key=itemgetter(0)):
                pieces = self.families[f].pieces
                spans[f] = _leftmost((pieces[i] for _, i in group), text, present)
        return spans


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
    clauses = tuple(_required(b + alt, follows_space))
    if alt.startswith("^"):
        return [_Piece(b + alt, True, anchors, clauses=clauses)]
    lead, used = _literal_run(alt)
    rest = alt[used:]
    if (boundary or follows_space) and lead[:1].isalnum() and len(lead) <= _SHORT_LEAD and _OPTIONAL_NEXT.match(rest):
        # ``an? x`` is ``an x|a x``, tried in that order (``?`` is greedy): two pieces led by "an " and "a ", each
        # far rarer in a text than the letter "a" alone, which ``re`` would try to match at every occurrence.
        with_it, without = alt[:used] + rest[0] + rest[2:], alt[:used] + rest[2:]
        return [*_split(with_it, anchors, boundary, follows_space), *_split(without, anchors, boundary, follows_space)]
    if (boundary or follows_space) and lead[:1].isalnum():
        words = _first_words(alt) or anchors
        # The lead's later words are whole tokens (or apostrophe parts) of any match: "the user has" needs "user"
        # and "has". After a lead ending in a space, the next token is one of the rest's first words, if known.
        whole = _ends_word(rest)
        inner = [m.group() for m in _LETTERS.finditer(lead) if m.end() < len(lead) or whole][1:]
        then = _first_words(rest) if not lead[-1].isalnum() and lead[-1] != "'" else None
        guard = f"(?<!\\w{re.escape(lead)})" if boundary else ""
        source = f"{re.escape(lead)}{guard}{rest}"
        return [_Piece(source, False, words, frozenset(inner), then or frozenset(), clauses)]
    return [_Piece(b + alt, False, anchors, clauses=clauses)]


def _required(source: str, start: bool) -> list[frozenset[str]]:
    """Sets of words of which every match of ``source`` holds one each, as a token or an apostrophe part (what
    ``words_present`` gives), for matches that begin at a token's start (``start``) or anywhere (see ``_walk``)."""
    return _walk(source, start)[0]


def _walk(source: str, start: bool) -> tuple[list[frozenset[str]], bool]:
    """``_required``'s sets, and whether every match of ``source`` ends at a token's start.

    Reads the pattern's top level left to right, knowing at each point whether the match is then at a token's
    start (after a character outside ``[a-z0-9]``, or at the text's start): a literal run of ``[a-z0-9]`` with such
    characters (or ``\\b``, a space) on both sides is one word; an unquantified group there gives its first words
    (``_first_words``). Whatever it does not understand ends the reading (and the end is then not known): a set is
    added only when certain, so a gate made of them never rules out a match."""
    if len(_alternatives(source)) > 1:
        return [], False
    out: list[frozenset[str]] = []
    s = source
    while s:
        if s.startswith("\\b"):
            # Before a word character: no word character precedes. Only words are read after it (a literal run or
            # a group's first words start with a letter or a digit), so before a mark it says nothing wrong.
            s, start = s[2:], True
        elif s.startswith("^"):
            s, start = s[1:], True
        elif s.startswith(("(?<=", "(?<!", "(?=", "(?!")):
            s = s[_close(s) + 1 :]  # zero width: the position is unchanged
        elif s.startswith("(?:"):
            end = _close(s)
            if start and (words := _first_words(s)) is not None:
                out.append(words)
            least, again, rest = _quantifier(s[end + 1 :])
            # Where the group leaves the match: a repeated group's later turns start wherever the earlier ended,
            # so they are read from an unknown start (what is known from one is known from any start).
            entry = start and not again
            ends = all(_walk(alt, entry)[1] for alt in _alternatives(s[3:end]))
            s, start = rest, ends and (start or least > 0)
        else:
            lead, used = _literal_run(s)
            if used:
                rest = s[used:]
                for m in _LETTERS.finditer(lead):
                    if not (m.start() or start):
                        continue
                    if m.end() < len(lead) or _ends_word(rest):
                        out.append(frozenset({m.group()}))
                    elif _OPTIONAL_LETTER.match(rest) and _ends_word(rest[2:]):  # "agents?"
                        out.append(frozenset({m.group(), m.group() + rest[0]}))
                s, start = rest, not lead[-1].isalnum()
                continue
            width, off_token = _atom(s)
            if not width:
                return out, False
            least, _, s = _quantifier(s[width:])
            # off_token None: the atom may be a letter or a digit, and the position is then unknown.
            start = bool(off_token) and (start or least > 0)
    return out, start


def _atom(source: str) -> tuple[int, bool | None]:
    """The width in ``source`` of its first atom when it is one character, a class or an escape (0 otherwise), and
    whether every character it matches is outside ``[a-z0-9]`` (None when it may be inside)."""
    if source.startswith("\\"):
        if source[1:2] in ("s", "n", "t", "r"):
            return 2, True
        if source[1:2].isalnum() or source[1:2] == "_":
            return (2, None) if source[1:2] in "dDwWS" else (0, None)
        return (2, True) if source[1:2] else (0, None)
    if source.startswith("["):
        i = 2 if source[1:2] == "^" else 1
        i += source[i : i + 1] == "]"  # a "]" first in a class is a literal
        while i < len(source):
            if source[i] == "]":
                return i + 1, None
            i += 2 if source[i] == "\\" else 1
        return 0, None
    if source[:1] == ".":
        return 1, None
    if source[:1] and source[0] not in _META:
        return 1, not source[0].isalnum()
    return 0, None


_BOUNDS = re.compile(r"(?:[?*+]|\{\d*(?:,\d*)?\})[?+]?")


def _quantifier(source: str) -> tuple[int, bool, str]:
    """For the quantifier ``source`` starts with (none: exactly once): the least repetitions it allows, whether it
    allows more than one, and the rest of ``source``."""
    m = _BOUNDS.match(source)
    if m is None:
        return 1, False, source
    c = source[0]
    least = 1 if c == "+" else int(source[1 : m.end()].split(",")[0].rstrip("}?+") or 0) if c == "{" else 0
    return least, c != "?", source[m.end() :]


def _ends_word(rest: str) -> bool:
    """Whether a word that ``rest`` follows in a pattern ends there in every match: ``\\b``, or a character outside
    ``[a-z0-9]`` (a space, a mark, ``\\s``) that must follow, perhaps after optional ones."""
    if rest.startswith("\\b"):
        return True
    width, off_token = _atom(rest)
    if not width or not off_token:
        return False
    least, _, after = _quantifier(rest[width:])
    return least > 0 or _ends_word(after)


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
    if len(word) < len(lead) or _ends_word(rest):
        return frozenset({word})
    if _OPTIONAL_LETTER.match(rest) and _ends_word(rest[2:]):
        return frozenset({word, word + rest[0]})
    return None


_OPTIONAL_LETTER = re.compile(r"[a-z]\?")
_OPTIONAL_NEXT = re.compile(r"[a-z0-9]\?(?![?+])")
"""A letter or digit made optional by a greedy ``?`` (not ``??`` nor ``?+``)."""
_SHORT_LEAD = 2
"""A lead of at most this many characters followed by an optional letter is split in two (``_split``): a longer
lead is rare enough in a text that a second piece would cost more than it saves."""


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
