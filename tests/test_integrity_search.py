"""A marker family split into literal-led pieces finds exactly the match its joined patterns find."""

from __future__ import annotations

import random
import re

import pytest

from stopwise.guardian.evaluators import _integrity
from stopwise.guardian.evaluators._integrity import _MARKER_SOURCES, _MARKERS, _WORD
from stopwise.guardian.evaluators._integrity_search import Family, words_present


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
    """Texts stitched from the patterns' own phrases, marks and spaces: every family finds the same span."""
    phrases = r"[a-z][a-z' ]*[a-z]"
    vocabulary = sorted({w for patterns in _MARKER_SOURCES.values() for p in patterns for w in re.findall(phrases, p)})
    glue = [" ", " ", " ", "  ", "\n", ". ", ": ", '"', "'", ", ", "-", "_", "> ", "|", "please ", "1 ", "a ", "the "]
    rng = random.Random(7)
    found = 0
    for _ in range(8000):
        text = "".join(rng.choice(vocabulary) + rng.choice(glue) for _ in range(rng.randint(1, 24)))
        present = words_present(_WORD.findall(text))
        for family, split in _MARKERS:
            m = _integrity._joined(family).search(text)
            assert split.search(text, present) == (None if m is None else m.span()), (family, text)
            found += m is not None
    assert found > 400  # the texts do hit the patterns
