"""What a goal asks for: a change to the world (delete, cancel, update, send, create...) or an answer (a question,
a lookup), read from its words alone.

The distinction matters when a run ends saying it could not finish and changed nothing: for a question that is a
failure (the answer was not found), but for a change it may be the right end state (there was nothing to delete),
which the words of the run cannot tell apart from a failure to change (``RuleEvaluator``'s goal_reached).
"""

from __future__ import annotations

import enum
import json
import re
from importlib import resources

__all__ = ["CHANGE_VERBS", "GoalKind", "goal_kind"]


class GoalKind(enum.Enum):
    CHANGE = "change"
    """The goal asks for a write: an imperative change verb leads one of its opening sentences or clauses, bare or
    past a polite, wishing or helping lead-in, whatever the punctuation ("Delete Jaden White from the crm", "Can you
    cancel my next meeting?", "I'd like to return the headphones", "I need help changing my flight", "If so, book a
    meeting"), or the user wishes for a change by name ("I want a refund", "I need my card activated")."""
    QUESTION = "question"
    """The goal asks for an answer and for no change: a question mark, or a question word (who, which, is, how
    many...) leading it."""
    OTHER = "other"
    """Neither shows at the goal's start (a bug report to fix, a riddle, an empty goal)."""


_HEAD_CHARS = 400
"""Only the goal's opening is read: what a task asks for is said first, and a long goal (a bug report, a
specification) goes on with text whose verbs describe, not ask (``print(dat)``, "Create a grid of 3x3")."""
_RISK_WRITE_LABELS = ("regulated", "irreversible", "reversible")
"""The risk rule's name hints for calls that write, destroy or move money (``rule_coefficients.json``,
``risk.name_hints``): a verb among them asks for a change in a request as it does in a tool's name."""
_NOT_REQUEST_TEXT = """payment invoice payroll salary patient medical prescription ssn loan kyc bank billing credit tax
insurance money funds wallet crypto sms lifecycle checkout import start"""
_NOT_REQUEST_WORDS = frozenset(_NOT_REQUEST_TEXT.split())
"""Hint words that, opening a clause of a request, ask for no change: nouns that name what a tool touches ("Bank
transfer not showing", "Insurance details?"), and two verbs that open code and procedures ("import numpy as np",
"Start by reading the file")."""
_REQUEST_VERB_TEXT = """activate append apply archive block book build change deactivate disable dispute enable exchange
fix freeze generate implement insert invite link lock make modify order plot reactivate reassign record register
request reschedule reserve resolve return reverse revert subscribe turn unblock unfreeze unlink unlock unsubscribe"""
"""Change verbs of requests that the risk rule's name hints lack ("book", "order", "return", "exchange", "activate",
"block"; a verb there is not repeated here). Base forms only, so a participle that describes ("the event was
updated") is not read as a request."""
_ASSISTANT_VERB_TEXT = """play pause resume skip mute unmute dim shuffle switch call text dial sync unsync redeem"""
"""Verbs that ask an assistant to act on a device, a playback, a connection or another person ("play some jazz",
"call mom", "skip this song", "sync my phone"): each makes something happen outside the dialogue, as a write does,
though no back-office tool's name carries them."""


def _risk_write_words() -> frozenset[str]:
    """The shipped risk table's write, destructive and money hint words (read once, at import)."""
    text = resources.files("stopwise.guardian").joinpath("data", "rule_coefficients.json").read_text(encoding="utf-8")
    hints = json.loads(text)["risk"]["name_hints"]
    return frozenset(str(w) for label in _RISK_WRITE_LABELS for w in hints[label])


CHANGE_VERBS: frozenset[str] = (
    (_risk_write_words() - _NOT_REQUEST_WORDS)
    | frozenset(_REQUEST_VERB_TEXT.split())
    | frozenset(_ASSISTANT_VERB_TEXT.split())
)
"""Verbs that, in the imperative, ask for a change the tools must make (a plot or a file made counts: it is a
write): the risk rule's write, destructive and money verbs (one list for both readers: a verb added there counts
here), the request verbs and the assistant's action verbs above."""
_LED_VERBS = frozenset({"lock", "order", "request", "return", "reverse"})
"""Change verbs that ask for a change only after a request's lead-in ("I'd like to return...", "Can you order..."):
bare, they open code ("return None", "order_by()"), say how to give an answer ("Return the first in alphabetical
order", "Order the list by...") or name a thing ("Lock tests are failing", "Reverse time zone conversion")."""
_PHRASAL_VERBS = (("get", "rid"), ("top", "up"))
"""Two-word change verbs whose first word alone asks for none ("get", "top")."""
_WISH = (
    r"(?:i(?: really| just| also)? (?:need|want|wish|would like|would love)|i'd(?: really| also)? (?:like|love)"
    r"|(?:i am|i'm) (?:trying|looking|hoping|needing|wanting))"
)
"""The user's own wish: "I need", "I'd like", "I'm looking"."""
_ABLE = (
    r"(?:(?:can|could|may) (?:i|we)(?: please)?|(?:am i|are we) able to|(?:is it|would it be) possible(?: for me)? to)"
)
"""Asking whether one (or we) may: "Can I cancel...?", "Can we switch...?", "Is it possible to change...?" (a request
to the agent that would do it: read as one, a run that ends "could not" and changed nothing is not a sure
failure)."""
_HELP = r"(?:help|assist)(?: me)?(?: to| with| in)?"
_LEAD = re.compile(
    r"^(?:(?:hi|hello|hey)(?: there)?|(?:can|could|would|will) you(?: please| kindly)?(?: be so kind as to)?"
    rf"(?: please)?(?: {_HELP})?(?: do)?|{_ABLE}|please|kindly|also|then|so|and|but|just|now|go ahead and|let's|let us|"
    rf"(?:i )?wanna|{_HELP}|if (?:so|not|yes)|(?:{_WISH}|need|want|i (?:have|got))(?: (?:you|someone|somebody))? to|"
    r"i(?: really| just| also)? need (?:some |immediate |urgent )?(?:help|assistance)(?: to| with| in)?|"
    r"(?:i am|i'm) interested in)\b[\s,!.]*"
)
"""Words that may stand before the request without changing what is asked: a greeting, a polite or wishing
lead-in ("Can you please delete...", "Could I cancel...", "I'd like to return...", "I wanna book...", "let's
move..."), a call for help ("I need help with changing..."), a condition ("If so, book...")."""
_WANT = rf"^(?:{_WISH}|would like|would love|(?:can|could|may) (?:i|we) (?:get|have))"
_WANTS = re.compile(
    _WANT + r"(?: to (?:get|have|make|request|receive|do))? (?:a |an |my |the |some )?(?:new |full )?([a-z]+)\b"
)
"""A wish whose object is a change named by its verb: "I want a refund", "Can I get a refund?", "I'd like to make
a transfer"."""
_WANTS_DONE = re.compile(
    _WANT
    + r"(?: to (?:get|have))? (?:my|the|this|that|it|them|these|those|our)(?: [a-z'-]+){0,3}? (?:to be )?([a-z]+ed)\b"
)
"""A wish for something to be changed: "I need my card activated", "I'd like my account to be deleted"."""
_NEEDS_DONE = re.compile(r"\bneeds? (?:to be )?([a-z]+(?:ed|ing))\b")
"""Something that needs changing: "My address needs to be updated", "My new card needs activating"."""
_NOUN_AFTER_TEXT = "is was are were has have had not did does do will won't isn't wasn't hasn't didn't"
_NOUN_AFTER = frozenset(_NOUN_AFTER_TEXT.split())
"""A word after a change verb that makes the verb a noun, the clause a statement ("Transfer was declined",
"Refund not showing")."""
_AFTER_QUESTION = re.compile(r"^(?:and )?if\b")
"""After a question, a sentence asks for a change only as what to do with the answer ("Was total visits above 21?
If so, make a task"); any other imperative there says how to answer ("What was the title? Write the numbers in
plain text")."""
_SENTENCE_END = re.compile(r"([.?!]+(?=\s|$)|\n+)")
"""A full stop, question or exclamation mark before a space (not the dot of a URL, a DOI or a number), or a line
break."""
_CLAUSES = re.compile(r"[,;]|\band\b|\bthen\b")
_WORD = re.compile(r"[a-z][a-z_'-]*")
"""A word; a hyphenated one or an identifier is one word ("record-making" is not the verb "record", nor
"call_command" the verb "call")."""
_CODE = re.compile(r"^[a-z][a-z_'-]*\s*[=(]")
"""A word that a call's parenthesis or an assignment follows is code, not a verb ("text = ...", "play(x)")."""
_QUESTION_WORD_TEXT = """who whom whose what which when where why how is are was were do does did can could will would
should has have had"""
_QUESTION_WORDS = frozenset(_QUESTION_WORD_TEXT.split())


def _bases(form: str) -> frozenset[str]:
    """The base forms a gerund or past participle may have: "changing" and "changed" change, "cancelling" cancel,
    "unlocked" unlock; nothing for a word in neither form."""
    for suffix in ("ing", "ed"):
        stem = form.removesuffix(suffix)
        if stem != form and len(stem) > 1:
            forms = {stem, stem + "e"}
            if stem[-1] == stem[-2]:
                forms.add(stem[:-1])
            return frozenset(forms)
    return frozenset()


def _is_change_verb(words: list[str], after_lead: bool) -> bool:
    """The clause's words open with a change verb used as one: its base form, a phrasal verb ("top up"), or, after
    a lead-in only, their gerund ("help with changing", "assistance in topping up"); not a verb a statement makes a
    noun of ("Transfer was declined"), and a verb of ``_LED_VERBS`` only after a lead-in."""
    gerund = after_lead and words[0].endswith("ing")
    heads = _bases(words[0]) if gerund else frozenset({words[0]})
    size = 2 if len(words) > 1 and any((head, words[1]) in _PHRASAL_VERBS for head in heads) else 1
    if len(words) > size and words[size] in _NOUN_AFTER:
        return False
    if size == 2:
        return True
    return any(head in CHANGE_VERBS and (after_lead or head not in _LED_VERBS) for head in heads)


def _asks_change(clause: str) -> bool:
    """The clause, past its polite or conditional lead-in, starts with a change verb (``_is_change_verb``), is a
    wish for a change by its noun or participle ("I want a refund", "I need my card activated", "My address needs to
    be updated": ``_WANTS``, ``_WANTS_DONE``, ``_NEEDS_DONE``, the last not in a question), or is a condition with
    the request after it and no comma between ("If engaged users was above 11 make a task")."""
    clause = clause.strip()
    if (wish := _WANTS.match(clause)) and wish.group(1) in CHANGE_VERBS:
        return True
    first = _WORD.match(clause)
    needs = None if first is None or first.group() in _QUESTION_WORDS else _NEEDS_DONE.search(clause)
    for done in (_WANTS_DONE.match(clause), needs):
        if done and _bases(done.group(1)) & CHANGE_VERBS:
            return True
    after_lead = False
    while (lead := _LEAD.match(clause)) and lead.end():
        clause = clause[lead.end() :].strip()
        after_lead = True
    if not _WORD.match(clause) or _CODE.match(clause):  # a number, a path, a quote or code is no imperative
        return False
    words = _WORD.findall(clause)
    if _is_change_verb(words, after_lead):
        return True
    return words[0] in ("if", "unless") and any(w in CHANGE_VERBS for w in words[1:])


def goal_kind(goal: str) -> GoalKind:
    """CHANGE when a clause of the goal's opening sentences asks for a change (see ``_asks_change``), where a
    sentence after a question counts only when it starts with "if" ("If so, ...": ``_AFTER_QUESTION``); else
    QUESTION when an opening sentence ends with a question mark or starts with a question word ("How do I cancel
    my transfer?" asks how: a QUESTION); else OTHER. Pure; case-insensitive."""
    asked = False
    # A typographic apostrophe (phones and word processors write "I’d") reads as the plain one.
    parts = _SENTENCE_END.split(goal[:_HEAD_CHARS].lower().replace("\u2019", "'"))
    for sentence, end in zip(parts[::2], [*parts[1::2], ""], strict=True):
        text = sentence.strip()
        if not text or (asked and not _AFTER_QUESTION.match(text)):
            continue
        if any(_asks_change(c) for c in _CLAUSES.split(text)):
            return GoalKind.CHANGE
        first = _WORD.match(text)
        asked = asked or "?" in end or (first is not None and first.group() in _QUESTION_WORDS)
    return GoalKind.QUESTION if asked else GoalKind.OTHER
