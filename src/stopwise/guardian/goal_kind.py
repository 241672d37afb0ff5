"""What a goal asks for: a change to the world (delete, cancel, update, send, create...) or an answer (a question,
a lookup), read from its words alone.

The distinction matters when a run ends saying it could not finish and changed nothing: for a question that is a
failure (the answer was not found), but for a change it may be the right end state (there was nothing to delete),
which the words of the run cannot tell apart from a failure to change (``RuleEvaluator``'s goal_reached).
"""

from __future__ import annotations

import enum
import re

__all__ = ["CHANGE_VERBS", "GoalKind", "goal_kind"]


class GoalKind(enum.Enum):
    CHANGE = "change"
    """The goal asks for a write: an imperative change verb leads one of its opening sentences or clauses
    ("Delete Jaden White from the crm", "Can you cancel my next meeting?", "If so, book a meeting")."""
    QUESTION = "question"
    """The goal asks for an answer and for no change: a question mark, or a question word (who, which, is, how
    many...) leading it."""
    OTHER = "other"
    """Neither shows at the goal's start (a bug report to fix, a riddle, an empty goal)."""


_HEAD_CHARS = 400
"""Only the goal's opening is read: what a task asks for is said first, and a long goal (a bug report, a
specification) goes on with text whose verbs describe, not ask (``print(dat)``, "Create a grid of 3x3")."""
_CHANGE_VERB_TEXT = """add append archive assign book build cancel change close create delete deploy draft drop edit
email fix forward generate implement insert invite make mark merge modify move pay plot post publish reassign record
register remove rename reply reschedule reset resolve save schedule send set submit transfer turn unsubscribe update
upload write"""
CHANGE_VERBS = frozenset(_CHANGE_VERB_TEXT.split())
"""Verbs that, in the imperative, ask for a change the tools must make (a plot or a file made counts: it is a
write). Base forms only, so a participle that describes ("the event was updated") is not read as a request."""
_LEAD = re.compile(
    r"^(?:(?:can|could|would|will) you(?: please)?(?: do)?|please|kindly|also|then|so|and|just|now|go ahead and|"
    r"i (?:need|want|would like|'d like)(?: you)? to|help me|if (?:so|not|yes))\b[\s,]*"
)
"""Words that may stand before the imperative without changing what is asked ("Can you please delete...",
"If so, book...")."""
_AFTER_QUESTION = re.compile(r"^(?:and )?if\b")
"""After a question, a sentence asks for a change only as what to do with the answer ("Was total visits above 21?
If so, make a task"); any other imperative there says how to answer ("What was the title? Write the numbers in
plain text")."""
_SENTENCE_END = re.compile(r"([.?!]+(?=\s|$)|\n+)")
"""A full stop, question or exclamation mark before a space (not the dot of a URL, a DOI or a number), or a line
break."""
_CLAUSES = re.compile(r"[,;]|\band\b|\bthen\b")
_WORD = re.compile(r"[a-z][a-z'-]*")
"""A word; a hyphenated one is one word ("record-making" is not the verb "record")."""
_QUESTION_WORD_TEXT = """who whom whose what which when where why how is are was were do does did can could will would
should has have had"""
_QUESTION_WORDS = frozenset(_QUESTION_WORD_TEXT.split())


def _asks_change(clause: str) -> bool:
    """The clause, past its polite or conditional lead-in, starts with a change verb ("get rid of" is one), or is
    a condition with the request after it and no comma between ("If engaged users was above 11 make a task")."""
    clause = clause.strip()
    while (lead := _LEAD.match(clause)) and lead.end():
        clause = clause[lead.end() :].strip()
    if not _WORD.match(clause):  # a clause that starts with a number, a path or a quote is no imperative
        return False
    words = _WORD.findall(clause)
    if words[0] in CHANGE_VERBS or words[:2] == ["get", "rid"]:
        return True
    return words[0] in ("if", "unless") and any(w in CHANGE_VERBS for w in words[1:])


def goal_kind(goal: str) -> GoalKind:
    """CHANGE when a clause of the goal's opening sentences asks for a change (see ``_asks_change``), where a
    sentence after a question counts only when it starts with "if" ("If so, ...": ``_AFTER_QUESTION``); else
    QUESTION when an opening sentence ends with a question mark or starts with a question word; else OTHER. Pure;
    case-insensitive."""
    asked = False
    parts = _SENTENCE_END.split(goal[:_HEAD_CHARS].lower())
    for sentence, end in zip(parts[::2], [*parts[1::2], ""], strict=True):
        text = sentence.strip()
        if not text or (asked and not _AFTER_QUESTION.match(text)):
            continue
        if any(_asks_change(c) for c in _CLAUSES.split(text)):
            return GoalKind.CHANGE
        first = _WORD.match(text)
        asked = asked or "?" in end or (first is not None and first.group() in _QUESTION_WORDS)
    return GoalKind.QUESTION if asked else GoalKind.OTHER
