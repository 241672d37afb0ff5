"""One normalisation of untrusted text for the rules that read intent (injection markers, the guardian's
integrity features), so a disguised instruction reads as the plain one.

``normalise_untrusted`` undoes the common evasion families:

- compatibility forms (Unicode NFKC): fullwidth letters, mathematical bold or script letters, ligatures, circled
  letters;
- look-alike letters from other scripts (Cyrillic, Greek, Armenian, small capitals, ...) mapped to Latin;
- characters that render as nothing: zero-width spaces and joiners, the BOM, soft hyphens, variation selectors,
  bidirectional controls; Unicode tag characters (which mirror ASCII invisibly) decoded;
- stacked combining marks ("zalgo" text) and accents removed;
- letter spacing (``i g n o r e``, ``i.g.n.o.r.e``) and common leetspeak (``1gn0r3 pr3v10u5``) folded;
- encodings a tool result carries decoded first (``decode_escapes``): HTML character references (``&#73;``,
  ``&#x49;``, ``&amp;``), ``\\uXXXX`` / ``\\xXX`` escapes as JSON or Python text holds them, percent-encoding
  (``%20``) and quoted-printable (``=20``, soft line breaks). They are the carrier's own way of writing text, not
  a disguise, so they are not counted as tricks: an encoded text reads exactly as the plain one.

The last two are folded only where the result spells words the intent rules read (``INTENT_WORDS``): an
identifier such as ``sha256``, a version ``1.2.3.4`` or a list ``A B C D`` stays as it is, so ordinary text keeps
its numbers. Secret and personal-data rules must not use this: folding digits into letters would break them.
They read the raw text and handle separators themselves.

Pure and deterministic: no I/O, no clock; the same text always gives the same result.
"""

from __future__ import annotations

import functools
import html
import re
import unicodedata
from collections.abc import Callable
from itertools import product, repeat

__all__ = ["INTENT_WORDS", "decode_escapes", "fold_script", "normalise_untrusted"]

# Characters that render as nothing: soft hyphen, combining grapheme joiner, Arabic letter mark, Hangul fillers,
# Mongolian vowel separator, zero-width spaces and joiners, bidi marks, embeddings, overrides and isolates, word
# joiner and invisible operators, variation selectors, the BOM.
_INVISIBLE = re.compile(
    "[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u206f"
    "\u3164\ufe00-\ufe0f\ufeff\uffa0\U000e0001\U000e007f\U000e0100-\U000e01ef]"
)
# Unicode "tag" characters mirror ASCII invisibly; decoding them shows the hidden text to the rules.
_TAG_CHARS = re.compile("[\U000e0020-\U000e007e]")
# Letters from another script inside a Latin word ("іgnore" with a Cyrillic і): a classic filter dodge.
_MIXED_SCRIPT = re.compile(r"[a-z][\u0370-\u03ff\u0400-\u04ff]|[\u0370-\u03ff\u0400-\u04ff][a-z]", re.IGNORECASE)
_GREEK_CYRILLIC = re.compile(r"[\u0370-\u03ff\u0400-\u04ff]", re.IGNORECASE)  # no mix without one
# Compatibility look-alikes that only a disguise uses inside running text: fullwidth letters and digits (not the
# fullwidth punctuation every Chinese or Japanese text uses, which NFKC still folds), mathematical
# alphanumerics, enclosed (circled, parenthesised, squared) letters, which NFKC folds; IPA letters and small
# capitals, which the look-alike table maps. Each one is a trick.
_STYLED = re.compile(
    "[\uff10-\uff19\uff21-\uff3a\uff41-\uff5a\u2460-\u24ff\U0001d400-\U0001d7ff\U0001f100-\U0001f1ff\u0250-\u02af\u1d00-\u1d2b]"
)
# Two or more combining marks on one letter: zalgo text, never ordinary spelling.
_MARK = "[\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f]"
_STACKED_MARKS = re.compile(_MARK + "{2,}")
_ONE_MARK = re.compile(_MARK)
# Stretches of characters past ASCII, with single ASCII characters between them (two stretches are at least two
# ASCII characters apart), captured so that ``split`` returns them between the ASCII parts: every pass below but
# the folds changes or counts only characters past ASCII and their neighbours, so it reads only these stretches.
_STRETCHES_SPLIT = re.compile("([^\x00-\x7f]+(?:[\x00-\x7f][^\x00-\x7f]+)*)")
# Runs of non-ASCII words a space apart: where the look-alike table can change anything (one call each).
_WORDS_PAST_ASCII = re.compile("[^\x00-\x7f]+(?: [^\x00-\x7f]+)*")

# Confusables: letters of other scripts (and Latin variants NFKC keeps) that render like a Latin letter.
# Drawn from the visually identical pairs of Unicode's confusables data (UTS #39) for the Latin alphabet.
_HOMOGLYPHS = str.maketrans(
    {
        # Cyrillic
        "а": "a", "в": "b", "е": "e", "к": "k", "о": "o", "р": "p", "с": "c", "у": "y", "х": "x", "ѕ": "s",
        "і": "i", "ј": "j", "ԁ": "d", "һ": "h", "ԛ": "q", "ԝ": "w", "ӏ": "l", "ү": "y",
        "А": "a", "В": "b", "Е": "e", "К": "k", "М": "m", "Н": "h", "О": "o", "Р": "p", "С": "c", "Т": "t",
        "У": "y", "Х": "x", "Ѕ": "s", "І": "i", "Ј": "j", "Ԁ": "d", "Һ": "h", "Ԛ": "q", "Ԝ": "w", "Ӏ": "l",
        "Ү": "y",
        # Greek
        "α": "a", "ε": "e", "ι": "i", "κ": "k", "ν": "v", "ο": "o", "ρ": "p", "τ": "t", "υ": "u", "χ": "x",
        "ϲ": "c", "ϳ": "j",
        "Α": "a", "Β": "b", "Ε": "e", "Ζ": "z", "Η": "h", "Ι": "i", "Κ": "k", "Μ": "m", "Ν": "n", "Ο": "o",
        "Ρ": "p", "Τ": "t", "Υ": "y", "Χ": "x", "Ϲ": "c",
        # Armenian
        "հ": "h", "ո": "n", "ս": "u", "ց": "g", "օ": "o", "Ս": "u", "Օ": "o",
        # Latin variants NFKC keeps: small capitals, dotless i and j, script g, IPA look-alikes
        "ı": "i", "ȷ": "j", "ɑ": "a", "ɡ": "g", "ɩ": "i", "ɪ": "i", "ʏ": "y", "ʀ": "r", "ʙ": "b", "ɢ": "g",
        "ʜ": "h", "ʟ": "l", "ɴ": "n", "ᴀ": "a", "ᴄ": "c", "ᴅ": "d", "ᴇ": "e", "ᴊ": "j", "ᴋ": "k", "ᴍ": "m",
        "ᴏ": "o", "ᴘ": "p", "ᴛ": "t", "ᴜ": "u", "ᴠ": "v", "ᴡ": "w", "ᴢ": "z",
        # Cherokee letters that render as Latin capitals
        "Ꭺ": "a", "Ᏼ": "b", "Ꮯ": "c", "Ꭼ": "e", "Ꮐ": "g", "Ꮋ": "h", "Ꭻ": "j", "Ꮶ": "k", "Ꮮ": "l", "Ꮇ": "m",
        "Ꮲ": "p", "Ꮪ": "s", "Ꭲ": "t", "Ꮩ": "v", "Ꮃ": "w", "Ꮓ": "z",
    }
)  # fmt: skip
# Any of them, found fast: most non-Latin text (CJK, emoji, accents) holds none and need not be translated.
_LOOK_ALIKE = re.compile("[" + "".join(map(re.escape, map(chr, _HOMOGLYPHS))) + "]")

_INTENT_TEXT = """
    a i all any the a an and or to of in on at for from by with as is are be been was were it its this that these
    those you your yours me my we our us he she they them now not no do does did never only just then
    there here what when where who how if else
    ignore ignoring ignored disregard forget override overrule bypass skip drop abandon cancel
    previous prior above earlier preceding original initial old existing current new real actual true updated
    instead instruction instructions direction directions directive directives prompt prompts rule rules
    guideline guidelines guardrails context message messages command commands order orders task tasks request
    requests everything anything told said before
    system assistant user developer human admin administrator root sudo mode god debug jailbreak jailbroken dan
    unrestricted unfiltered uncensored evil pretend act behave restrictions limits filters censorship
    ai agent agents llm model models bot chatbot gpt claude gemini copilot
    reveal print show output repeat leak dump display share list tell disclose recite verbatim hidden secret
    secrets password passwords credentials token tokens key keys api private ssh env environment variables
    call invoke use run execute trigger send forward email post upload transfer exfiltrate copy submit delete
    remove wipe erase wire funds money bank account pay payment
    must should shall need have required will reply respond answer response say include append add write
    comply obey follow important urgent attention priority critical warning notice authorized official
    emergency immediately confirm approved approve click visit link url
"""
INTENT_WORDS: frozenset[str] = frozenset(_INTENT_TEXT.split())
"""The words the intent rules read: letter spacing and leetspeak are folded only where they spell these."""

# A run of four or more single characters, each followed by one separator: ``i g n o r e``, ``i.g.n.o.r.e``.
# Runs of words are split where the gap is wider than the gap between letters (``i g n o r e   a l l``).
_SPACED = re.compile(r"(?<![^\s\"'(\[])(?:[a-z0-9@$!|](?:[ \t]+|[._\-*/·~])){3,}[a-z0-9@$!|](?![^\s\"'.,;:!?)\]])")
# Three single characters in a row, each after a separator (itself after a character or a space), the third
# followed by a separator or by what may end a run: every spaced run holds one, and a search for it starts only at
# separators, far quicker than trying ``_SPACED`` (which starts with a look-behind) at every character.
_SPACED_HINT = re.compile(
    r"[ \t._\-*/·~](?<=[a-z0-9@$!| \t].)[a-z0-9@$!|](?:[ \t]+|[._\-*/·~])[a-z0-9@$!|](?:[ \t]+|[._\-*/·~])"
    r"[a-z0-9@$!|](?![^\s\"'.,;:!?)\]_\-*/·~])"
)
# A word of three or more characters that mixes letters with the digits and signs leetspeak uses (``1gn0r3``,
# ``pr3v10us``, ``@ll``); two-character tokens (``a1``, ``h2``) and mostly-digit ones (``60d``) are left alone.
# The first character decides which of the two is still to be seen ahead (a sign or digit after a letter, a letter
# after a sign or digit): one look-ahead per word instead of two (twice as fast, the same matches).
_LEET_WORD = re.compile(
    r"(?<![\w@$|])(?:[a-z](?=[a-z]*[0-9@$!|])|[0-9@$!|](?=[a-z@$!|0-9]*[a-z]))[a-z0-9@$!|]{2,}(?![\w@$|])"
)
# A sign or digit beside a letter: every leetspeak word holds one.
_LEET_HINT = re.compile(r"[0-9@$!|](?:[a-z]|(?<=[a-z].))")
_LEET: dict[str, tuple[str, ...]] = {
    "0": ("o",), "1": ("i", "l"), "3": ("e",), "4": ("a",), "5": ("s",), "6": ("g",), "7": ("t",), "8": ("b",),
    "9": ("g",), "@": ("a",), "$": ("s",), "!": ("i",), "|": ("l", "i"),
}  # fmt: skip
_MAX_LEET_CHOICES = 64
_LONGEST_WORD = max(map(len, INTENT_WORDS))


def _unleet(token: str) -> str | None:
    """The intent word a leetspeak token spells, if any (ambiguous signs tried every way)."""
    options = [_LEET.get(ch, (ch,)) for ch in token]
    n = 1
    for o in options:
        n *= len(o)
    if n > _MAX_LEET_CHOICES:
        return None
    for letters in product(*options):
        word = "".join(letters)
        if word in INTENT_WORDS:
            return word
    return None


def _segment(letters: str) -> list[str] | None:
    """``letters`` split into intent words (fewest words wins), or None when they do not spell such words."""
    best: list[list[str] | None] = [[]] + [None] * len(letters)
    for end in range(1, len(letters) + 1):
        for start in range(max(0, end - _LONGEST_WORD), end):
            head = best[start]
            word = letters[start:end]
            if head is None or word not in INTENT_WORDS:
                continue
            if best[end] is None or len(head) + 1 < len(best[end] or ()):
                best[end] = [*head, word]
    return best[-1]


def _word_of(chars: list[str]) -> str | None:
    word = "".join(chars)
    if word in INTENT_WORDS:
        return word
    return _unleet(word) if not word.isalpha() else None


def _unspace(run: str) -> str | None:
    """The words a letter-spaced run spells, or None to leave it as it is."""
    chars = re.findall(r"[a-z0-9@$!|]", run)
    gaps = [len(g) for g in re.findall(r"[^a-z0-9@$!|]+", run)]
    if not any(c.isalpha() for c in chars):
        return None  # digits only: a number, a version, an address
    # Words are split where a gap is wider than the narrowest gap.
    narrow = min(gaps)
    groups: list[list[str]] = [[chars[0]]]
    for ch, gap in zip(chars[1:], gaps, strict=True):
        if gap > narrow:
            groups.append([ch])
        else:
            groups[-1].append(ch)
    words = []
    for group in groups:
        word = _word_of(group)
        if word is None:
            joined = "".join(group)
            split = _segment(joined) if joined.isalpha() else None
            if split is None:
                return None
            words.extend(split)
        else:
            words.append(word)
    return " ".join(words)


def _fold_spacing(text: str) -> tuple[str, int]:
    folded = 0

    def one(m: re.Match[str]) -> str:
        nonlocal folded
        words = _unspace(m.group())
        if words is None:
            return m.group()
        folded += 1
        return words

    return _sub_near(_SPACED, _SPACED_HINT, one, text, "\n"), folded


def _fold_leet(text: str) -> tuple[str, int]:
    folded = 0

    def one(m: re.Match[str]) -> str:
        nonlocal folded
        token = m.group()
        if token in _LEET_WORDS:
            word = _LEET_WORDS[token]
        else:
            # Mostly digits is a quantity or a code (``60d``, ``a11``), not a word in disguise.
            word = None if sum(c.isalpha() for c in token) * 2 < len(token) else _unleet(token)
            if len(_LEET_WORDS) >= 1 << 14:
                _LEET_WORDS.clear()
            _LEET_WORDS[token] = word
        if word is None:
            return token
        folded += 1
        return word

    # A backslash or a double quote cuts too: a JSON-escaped listing or log ("\\n" between lines) has no space
    # for thousands of characters.
    return _sub_near(_LEET_WORD, _LEET_HINT, one, text, ' \n\\"'), folded


def _sub_near(
    rx: re.Pattern[str], hint: re.Pattern[str], repl: Callable[[re.Match[str]], str], text: str, cuts: str
) -> str:
    """``rx.sub(repl, text)``, run only on the stretches between two of the characters ``cuts`` that hold a match
    of ``hint`` (which every match of ``rx`` holds). Exact when no match of ``rx`` holds a cut and each looks one
    character beyond its match only for something a cut, like the text's edge, satisfies: a newline for
    ``_SPACED``; a space, a newline, a backslash or a double quote for ``_LEET_WORD``. The stretches are joined
    with newlines (a cut of both) and substituted in one pass (``repl`` never returns a newline): a Python step
    per stretch, not a ``sub``. Past ``_STRETCHES`` stretches the rest is one."""
    spans: list[tuple[int, int]] = []
    done = 0
    rest = False
    next_cut = _cut_finder(cuts)
    while (m := hint.search(text, done)) is not None:
        if len(spans) >= _STRETCHES:
            rest = True
            break
        # The last stretch ended at a cut (``done``): no cut need be looked for before it. Each step is one C call
        # (the nearest cut before the hint: the last of each cut's ``rfind``; after it: one search of their class).
        start = max(map(text.rfind, cuts, repeat(done), repeat(m.start()))) + 1
        cut = next_cut(text, m.end())
        end = len(text) if cut is None else cut.start()
        spans.append((start, end))
        done = end
    if not spans:
        return text
    subbed = rx.sub(repl, "\n".join([text[a:b] for a, b in spans])).split("\n")
    out: list[str] = []
    done = 0
    for (a, b), stretch in zip(spans, subbed, strict=True):
        out.append(text[done:a])
        out.append(stretch)
        done = b
    out.append(rx.sub(repl, text[done:]) if rest else text[done:])
    return "".join(out)


@functools.cache
def _cut_finder(cuts: str) -> Callable[[str, int], re.Match[str] | None]:
    """``search(text, pos)`` of the first of the characters ``cuts`` at or after ``pos``."""
    return re.compile(f"[{re.escape(cuts)}]").search


_STRETCHES = 64
"""Beyond this many hinted stretches one pass over the rest is cheaper than a Python step per stretch."""


# Token -> the intent word it spells in leetspeak, or None: ids and codes ("utf8", "a1b2") recur from text to text.
_LEET_WORDS: dict[str, str | None] = {}


def _strip_marks(text: str) -> str:
    decomposed = _combining_marks().sub("", unicodedata.normalize("NFD", text))
    if _ASTRAL.search(decomposed):
        decomposed = _ASTRAL.sub(_unless_mark, decomposed)
    return unicodedata.normalize("NFC", decomposed)


@functools.cache
def _combining_marks() -> re.Pattern[str]:
    """One class of the combining marks (``unicodedata.combining`` non-zero) of the Basic Multilingual Plane: a regex
    removes them in one pass instead of a Python test per character. Built on first use (a scan of 65,536
    characters, a few milliseconds)."""
    ranges: list[list[int]] = []
    for cp in range(0x10000):
        if unicodedata.combining(chr(cp)):
            if ranges and ranges[-1][1] == cp - 1:
                ranges[-1][1] = cp
            else:
                ranges.append([cp, cp])
    return re.compile("[" + "".join(f"{re.escape(chr(a))}-{re.escape(chr(b))}" for a, b in ranges) + "]")


# Characters past the Basic Multilingual Plane (emoji, a few scripts' marks) are asked one by one: they are rare.
_ASTRAL = re.compile("[\U00010000-\U0010ffff]")


def _unless_mark(m: re.Match[str]) -> str:
    return "" if unicodedata.combining(m.group()) else m.group()


def _map_look_alikes(m: re.Match[str]) -> str:
    return m.group().translate(_HOMOGLYPHS)


def _split_stretches(text: str) -> list[str]:
    """``_STRETCHES_SPLIT.split(text)``: the ASCII parts and the stretches between them, ``[ascii, stretch, ascii,
    ..., ascii]``. Only the chunks of ``_CHUNK`` characters that are not all ASCII are searched (``isascii`` of a
    chunk is one quick C pass; the search looks at every character): a stretch cannot cross a chunk of ASCII, which
    holds two ASCII characters in a row."""
    if len(text) <= 2 * _CHUNK:
        return _STRETCHES_SPLIT.split(text)
    parts = [""]
    done = i = 0
    n = len(text)
    while i < n:
        if text[i : i + _CHUNK].isascii():
            i += _CHUNK
            continue
        j = i + _CHUNK
        while j < n and not text[j : j + _CHUNK].isascii():
            j += _CHUNK
        first, *rest = _STRETCHES_SPLIT.split(text[i:j])
        parts[-1] += text[done:i] + first
        parts.extend(rest)
        done = i = j
    parts[-1] += text[done:]
    return parts


_CHUNK = 256

_ANY_TRICK = re.compile(
    # _GREEK_CYRILLIC, with what it matches ignoring case outside its ranges (the micro and ohm signs, old
    # Cyrillic letter forms, Greek with a prosgegrammeni); _INVISIBLE, _STYLED and _ONE_MARK in the Basic
    # Multilingual Plane; and every character past it (tag characters, the rest of _INVISIBLE and _STYLED).
    "[\u0370-\u03ff\u0400-\u04ff\u00b5\u1c80-\u1c87\u1fbe\u1fd3\u1fe3\u2126"
    "\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u206f"
    "\u3164\ufe00-\ufe0f\ufeff\uffa0"
    "\uff10-\uff19\uff21-\uff3a\uff41-\uff5a\u2460-\u24ff\u0250-\u02af\u1d00-\u1d2b"
    "\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f"
    "\U00010000-\U0010ffff]"
)
"""A character one of ``_undo_past_ascii``'s first five passes looks for, or any past the Basic Multilingual Plane:
one scan instead of five (a class of Basic Multilingual Plane ranges and one range past it is read from a bitmap;
one holding ranges past it character by character). ``tests/test_normalise_fast_paths.py`` checks, over every
code point, that it matches whatever those passes look for."""


def _nfkc(text: str) -> str:
    """``unicodedata.normalize("NFKC", text)``, normalising only the runs of characters ``_nfkc_unstable`` holds,
    each with the character before it: every other character is left as it is by NFKC and starts a piece that
    normalises apart from what precedes it (a starter that NFKC keeps and that joins no earlier character), so the
    pieces normalise each on its own. Python's ``normalize`` decomposes and recomposes a whole text as soon as one
    character of it needs it (a Chinese page's fullwidth comma): most of the text is then done for nothing."""
    out: list[str] = []
    done = 0
    for m in _nfkc_unstable().finditer(text):
        start = max(m.start() - 1, 0)  # the character before a run is stable: no earlier run reaches it
        out.append(text[done:start])
        out.append(unicodedata.normalize("NFKC", text[start : m.end()]))
        done = m.end()
    if not done:
        return text
    out.append(text[done:])
    return "".join(out)


@functools.cache
def _nfkc_unstable() -> re.Pattern[str]:
    """Runs of the characters at which NFKC may not start a piece apart (``_nfkc``): past the Basic Multilingual
    Plane, every character; in it, each that NFKC changes alone, a combining mark (it may be reordered or joined to
    the character before), the second character of a canonical pair (it may compose with the one before) and the
    Hangul vowel and final jamo (they compose by rule, not by a listed pair). Built on first use (a scan of 65,536
    characters, some 30 milliseconds); ``tests/test_normalise_fast_paths.py`` checks the claim against every
    canonical pair of the whole code space and against ``normalize`` of the whole text."""
    combining, decomposition, normalize = unicodedata.combining, unicodedata.decomposition, unicodedata.normalize
    unstable = set(range(0x1161, 0x1176)) | set(range(0x11A8, 0x11C3))
    for cp in range(0x80, 0x10000):
        c = chr(cp)
        parts = decomposition(c).split()
        if parts:
            if parts[0][0] != "<" and len(parts) == 2:
                unstable.add(int(parts[1], 16))
            if normalize("NFKC", c) != c:
                unstable.add(cp)
        if combining(c):
            unstable.add(cp)
    ranges: list[list[int]] = []
    for cp in sorted(unstable):
        if ranges and ranges[-1][1] == cp - 1:
            ranges[-1][1] = cp
        else:
            ranges.append([cp, cp])
    spans = "".join(f"{re.escape(chr(a))}-{re.escape(chr(b))}" for a, b in ranges)
    return re.compile(f"[{spans}\U00010000-\U0010ffff]+")


def _undo_past_ascii(text: str) -> tuple[str, int]:
    """The passes that read characters past ASCII (look-alikes across scripts, invisible and tag characters, styled
    letters, stacked marks, compatibility forms, accents), and how many tricks they undid, on ``text`` whose pieces
    between separators (``_SEPARATORS``) are each a stretch (``_STRETCHES_SPLIT``) and its neighbouring ASCII
    characters, or on a whole text. Every pass acts on one character or on a character and its neighbours, and
    Unicode normalisation never joins a character to the ASCII one after it: each piece comes out as it would inside
    the whole text."""
    tricks = 0
    # One scan says whether any of the five passes below has anything to do (most text past ASCII, CJK or
    # accented, holds none of their characters): the removals and decodings before a test only remove characters
    # or give ASCII, so a text without any of them keeps none.
    if _ANY_TRICK.search(text):
        if _GREEK_CYRILLIC.search(text):
            tricks += len(_MIXED_SCRIPT.findall(text))
        if _INVISIBLE.search(text):
            text, n = _INVISIBLE.subn("", text)
            tricks += n
        if _TAG_CHARS.search(text):
            text, n = _TAG_CHARS.subn(lambda m: chr(ord(m.group()) - 0xE0000), text)
            tricks += n
        if _STYLED.search(text):
            tricks += len(_STYLED.findall(text))
        if _ONE_MARK.search(text):
            tricks += len(_STACKED_MARKS.findall(text))
    text = _nfkc(text)
    if not text.isascii():
        # NFKC's output is composed: with nothing to decompose and no mark to remove it stays as it is.
        if _ASTRAL.search(text) or not unicodedata.is_normalized("NFD", text) or _combining_marks().search(text):
            text = _strip_marks(text)
        if _LOOK_ALIKE.search(text):
            # Only non-ASCII characters map: translating their runs (not the whole text, where every character
            # costs a dictionary miss) gives the same text.
            text = _WORDS_PAST_ASCII.sub(_map_look_alikes, text)
    return text, tricks


def _undo_in_stretches(text: str) -> tuple[str, int]:
    """``_undo_past_ascii(text)``, reading only the stretches past ASCII with one ASCII neighbour each side (a
    control character the text does not hold between them, ``_SEPARATORS``) when they are a small part of the
    text."""
    parts = _split_stretches(text)
    if len(parts) == 1:
        return text, 0  # all ASCII: nothing to undo
    plain, stretches = parts[0::2], parts[1::2]
    # The ASCII parts between stretches hold at least two characters: each stretch's neighbours are its own.
    pieces = [a[-1:] + s + b[:1] for a, s, b in zip(plain[:-1], stretches, plain[1:], strict=True)]
    if sum(map(len, pieces)) * 4 > len(text):
        return _undo_past_ascii(text)
    separator = next((c for c in _SEPARATORS if c not in text), None)
    if separator is None:
        return _undo_past_ascii(text)
    undone, tricks = _undo_past_ascii(separator.join(pieces))
    out = [""] * len(parts)
    out[1::2] = undone.split(separator)
    out[0::2] = [plain[0][:-1], *[a[1:-1] for a in plain[1:-1]], plain[-1][1:]]
    return "".join(out), tricks


_SEPARATORS = "\x00\x01\x02\x03\x04\x05\x06\x07\x08"
"""Characters that join the stretches read by ``_undo_past_ascii``: ASCII, neither a letter nor a space nor a mark,
so no pass changes one or reads across it (as across the ASCII characters between stretches); the first one the
text does not hold (a decoded e-mail may hold NUL)."""


def normalise_untrusted(text: str, limit: int = 2000) -> tuple[str, int]:
    """Lower-cased text with every evasion family above undone, cut at ``limit`` characters first; and how many
    tricks were undone (a signal in itself). Accents removed and ordinary case folding do not count as tricks;
    a look-alike letter, an invisible or tag character, a styled letter, stacked marks, a letter-spaced run and
    a leetspeak word each count once. Escapes and character references (``decode_escapes``) are decoded after the
    cut and do not count."""
    text = decode_escapes(text[:limit])
    tricks = 0
    if not text.isascii():
        text, tricks = _undo_in_stretches(text)
    text = text.lower()
    text, n = _fold_spacing(text)
    tricks += n
    text, n = _fold_leet(text)
    tricks += n
    return text, tricks


def fold_script(text: str) -> str:
    """``text`` with only the passes on characters past ASCII applied, lower-cased: the form a phrase of another
    script or with accents takes in ``normalise_untrusted``'s output (``"Précédentes"`` -> ``"precedentes"``; a
    Russian word's Latin-looking letters mapped). ASCII is left as it is (but lower-cased), so a regex written in
    plain text without upper-case escapes keeps its syntax."""
    return _undo_past_ascii(text)[0].lower()


# --------------------------------------------------------------------------------------------------------------
# Encodings a tool result carries. Each pass is entered only when a cheap ``in`` test (one C scan) finds its mark.

# Quoted-printable: a soft line break (``=`` at the end of a line of prose, one holding a space) marks a raw e-mail
# body; without one, ``=XX`` between letters or digits (``Ignore=20all``, ``caf=C3=A9``: a code after a code
# counts) twice or more. A lone ``width=20`` in code or a URL is neither, nor is base64's padding (``==`` or ``=``
# ending a line without spaces). Each pattern here starts with its literal (look-behinds after it), so ``re`` jumps
# from one occurrence of it to the next.
_QP_SOFT_BREAK = re.compile(r"=\r?\n")
_QP_LINE_END = re.compile(r"=(?<=[^=\n]=)\r?\n")
_QP_BYTES = re.compile(r"=[0-9A-F]{2}(?:=[0-9A-F]{2})*")
_QP_BETWEEN_LETTERS = re.compile(r"=(?<=[A-Za-z0-9]=)[0-9A-F]{2}(?==?[A-Za-z0-9])")
# Percent-encoding: runs of ``%XX``, decoded as UTF-8 (a run that is not UTF-8, like "50%de descuento", stays).
_PERCENT_BYTES = re.compile(r"%[0-9a-fA-F]{2}(?:%[0-9a-fA-F]{2})*")
# ``\uXXXX`` (a surrogate pair as two), ``\U00XXXXXX`` and ``\xXX``, not after another backslash (``\\u0041`` is an
# escaped backslash before the letters "u0041").
_BACKSLASH_ESCAPE = re.compile(
    r"\\(?<!\\\\)(?:u([dD][89abAB][0-9a-fA-F]{2})\\u([dD][c-fC-F][0-9a-fA-F]{2})|u([0-9a-fA-F]{4})"
    r"|U(000[0-9a-fA-F]{5}|0010[0-9a-fA-F]{4})|x([0-9a-fA-F]{2}))"
)
# An HTML character reference: ``&#73;``, ``&#x49;``, or a named one (``&amp;``, ``&nbsp``).
_CHAR_REFERENCE = re.compile(r"&(?:#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});?")


def _prose_soft_break(text: str) -> bool:
    """Whether a line holding a space ends in one ``=`` (looked at only where a line ends so)."""
    for m in _QP_LINE_END.finditer(text):
        start = text.rfind("\n", 0, m.start()) + 1
        if " " in text[start : m.start()] or "\t" in text[start : m.start()]:
            return True
    return False


def _hex_bytes(m: re.Match[str]) -> str:
    """A run of ``=XX`` or ``%XX`` codes as the UTF-8 text it spells, or as written when it spells none."""
    run = m.group()
    try:
        return bytes.fromhex(run.replace(run[0], "")).decode("utf-8")
    except UnicodeDecodeError:
        return run


def _backslash_escape(m: re.Match[str]) -> str:
    high, low, bmp, astral, byte = m.groups()
    if high is not None:
        return chr(0x10000 + ((int(high, 16) - 0xD800) << 10) + int(low, 16) - 0xDC00)
    code = int(bmp or astral or byte, 16)
    # A lone surrogate is no character: left as written.
    return m.group() if 0xD800 <= code <= 0xDFFF else chr(code)


def decode_escapes(text: str) -> str:
    """``text`` with the encodings a tool result may carry decoded, one layer each, in the order one is wrapped in
    the next: quoted-printable (only with a soft line break after prose, or ``=XX`` between letters twice or more),
    percent-encoding (runs that spell UTF-8), ``\\uXXXX`` / ``\\U00XXXXXX`` / ``\\xXX`` escapes, then HTML
    character references (``html.unescape``'s reading). A text holding none of ``=``, ``%``, ``\\`` and ``&`` is
    returned as it is, after four C scans."""
    if "=" in text and (len(_QP_BETWEEN_LETTERS.findall(text)) >= 2 or _prose_soft_break(text)):
        text = _QP_BYTES.sub(_hex_bytes, _QP_SOFT_BREAK.sub("", text))
    if "%" in text:
        text = _PERCENT_BYTES.sub(_hex_bytes, text)
    if "\\" in text:
        text = _BACKSLASH_ESCAPE.sub(_backslash_escape, text)
    if "&" in text and _CHAR_REFERENCE.search(text):
        text = html.unescape(text)
    return text
