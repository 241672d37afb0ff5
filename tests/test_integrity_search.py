"""A marker family split into literal-led pieces finds exactly the match its joined patterns find."""

from __future__ import annotations

import random
import re

import pytest

from stopwise.guardian.evaluators import _integrity
from stopwise.guardian.evaluators._integrity import _MARKER_SOURCES, _MARKERS, _WORD
from stopwise.guardian.evaluators._integrity_search import Family, _Piece, _required, words_present


def _span(family: Family, text: str) -> tuple[int, int] | None:
    return family.search(text, words_present(_WORD.findall(text)))


def _joined(patterns: list[str]) -> re.Pattern[str]:
    return re.compile("|".join(f"(?:{p})" for p in patterns))


@pytest.mark.parametrize(
    ("patterns", "text"),
    [
        ([r"\b(?:ignore|drop)\s+all"], "please drop all and ignore all"),
        ([r"\b(?:ignore|drop)\s+all"], "redrop all, _ignore all, 'ignore all"),  # \b after an apostrophe only
        ([r"\bagents? (?:must|should)"], "the agents must go"),
        ([r"\bagents? (?:must|should)"], "reagents must go"),
        ([r"\ban? (?:ai|bot)\b", r"\bbot\b"], "hello bot, an ai"),  # the earlier start wins across patterns
        ([r"\bx y\b", r"\bx\b"], "a x y"),  # a tie goes to the earlier pattern (its end, not the other's)
        ([r"\bx\b", r"\bx y\b"], "a x y"),
        ([r"(?:^|[.:\n]\s*|\bplease\s+)(?:send|pay)\s+the\b"], "send the money"),
        ([r"(?:^|[.:\n]\s*|\bplease\s+)(?:send|pay)\s+the\b"], "ok.  \n  pay the bill; resend the bill"),
        ([r"(?:^|[.:\n]\s*|\bplease\s+)(?:send|pay)\s+the\b"], "do pay the bill, or please \t send the money"),
        ([r"(?:^|[.:\n]\s*|\bplease\s+)(?:send|pay)\s+the\b"], "displease send the x. then: send the y"),
        ([r"(?:^|\n)\s*(?:system|user)\s*:"], "  user: hi"),
        ([r"(?:^|\n)\s*(?:system|user)\s*:"], "a\n\n system :"),
        ([r"\bjailbr(?:eak|oken)\b"], "a jailbroken model"),
        ([r"<\|?(?:im_start|system)\|?>"], "x <|im_start|> y"),
    ],
)
def test_the_split_search_finds_the_joined_patterns_match(patterns: list[str], text: str) -> None:
    m = _joined(patterns).search(text)
    anchors = frozenset(_WORD.findall(text))  # a family's anchors: words every match holds one of
    assert _span(Family.of(patterns, anchors), text) == (None if m is None else m.span())


def test_every_marker_family_split_agrees_with_its_joined_patterns_on_random_texts_of_their_words() -> None:
    """Texts stitched from the patterns' own phrases, marks and spaces: every family finds the same span, searched
    alone or with the others (``Families``)."""
    phrases = r"[a-z][a-z' ]*[a-z]"
    vocabulary = sorted({w for patterns in _MARKER_SOURCES.values() for p in patterns for w in re.findall(phrases, p)})
    glue = [" ", " ", " ", "  ", "\n", ". ", ": ", '"', "'", ", ", "-", "_", "> ", "|", "please ", "1 ", "a ", "the "]
    rng = random.Random(7)
    found = 0
    for _ in range(9000):
        text = "".join(rng.choice(vocabulary) + rng.choice(glue) for _ in range(rng.randint(1, 24)))
        present = words_present(_WORD.findall(text))
        together = _integrity._MARKER_SEARCH.search(text, present)
        for (family, split), span in zip(_MARKERS, together, strict=True):
            m = _integrity._joined(family).search(text)
            assert split.search(text, present) == span == (None if m is None else m.span()), (family, text)
            found += m is not None
    assert found > 300  # the texts do hit the patterns (fewer as the vocabulary grows: 361 after the preempt round)


@pytest.mark.parametrize(
    ("pattern", "at_token_start", "required"),
    [
        (r"\bthe (?:new|real) (?:task|rules)\b", False, [{"the"}, {"new", "real"}, {"task", "rules"}]),
        # An optional group that ends in a space leaves the match at a token's start.
        (r"\bcan you (?:please )?(?:write|tell)\b", False, [{"can"}, {"you"}, {"write", "tell"}]),
        # Optional spaces before a letter may be none: "foobar" matches, so neither word is required.
        (r"\bfoo\s*bar\b", False, []),
        (r"\bfoo\s*:", False, [{"foo"}]),
        # Without a known start the first word may be the end of a longer token ("reset the" holds "set the").
        (r"set\s+the\b", False, [{"the"}]),
        (r"set\s+the\b", True, [{"set"}, {"the"}]),
        # After a group the start is known only when each alternative ends off a token, and a repeated group's
        # later turns start where the earlier ended.
        (r"\b(?:ab|cd )x y\b", False, [{"abx", "cd"}, {"y"}]),
        (r"(?:#+\s*)?(?:system|user)\s*:", True, [{"system", "user"}]),
        (r"(?:a |b)*(?:system|user)\b", True, []),
        # An apostrophe splits a token into parts, each of which the gate sees.
        (r"\bthe model's (?:system prompt)\b", False, [{"the"}, {"model"}, {"s"}, {"system"}]),
        (r"\battackers?\b", False, [{"attacker", "attackers"}]),
        (r"\b(?:ignore|skip)\b|\bdrop\b", False, []),  # alternatives at the top: nothing every match holds
    ],
)
def test_required_words_are_only_words_every_match_holds(
    pattern: str, at_token_start: bool, required: list[set[str]]
) -> None:
    assert [set(c) for c in _required(pattern, at_token_start)] == required


def test_no_piece_gate_rules_out_a_match_of_its_own_regex_on_random_texts_of_the_markers_words() -> None:
    """Every gate (a piece's words and required sets) holds on each text its regex matches at a token's start."""
    phrases = r"[a-z][a-z' ]*[a-z]"
    vocabulary = sorted({w for patterns in _MARKER_SOURCES.values() for p in patterns for w in re.findall(phrases, p)})
    glue = [" ", "  ", "\n", ". ", ": ", '"', "'", ", ", "-", "_", "> ", "|", "please ", "re", "s", "the "]
    pieces = [
        (q, not isinstance(p, _Piece))
        for _, family in _MARKERS
        for p in family.pieces
        for q in getattr(p, "tail", (p,))
    ]
    rng = random.Random(11)
    checked = 0
    for _ in range(6000):
        text = "".join(rng.choice(vocabulary) + rng.choice(glue) for _ in range(rng.randint(1, 16)))
        present = words_present(_WORD.findall(text))
        for piece, tail in pieces:
            for m in piece.rx.finditer(text):
                # A tail counts only at a token's start (what follows a lead); other pieces wherever they match.
                if not tail or m.start() == 0 or not text[m.start() - 1].isalnum():
                    assert piece.may_match(present), (piece.source, text)
                    checked += 1
                    break
    assert checked > 150
