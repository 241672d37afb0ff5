"""Integrity: how strongly one untrusted text (a tool result) reads as instructions addressed to the agent.

The ``RuleEvaluator`` asks ``score_text`` for the features of each tool result it scans and maps them to a
probability with the ``integrity`` logistic map of ``rule_coefficients.json``. What a caller may rely on:

- **Nothing is diluted.** The marker families (hand-written patterns of instructions to an agent) are searched in
  the whole text read, and the learned model (``IntegrityModel``: hashed word n-grams) scores the text in
  overlapping windows of ``window`` tokens and keeps the highest window: an injection late in a long bill scores
  as it would alone. ``read_chars`` bounds what is read (the guardian's projection keeps ``result_chars``).
- **Trivial results are no evidence.** An empty or structure-only result (``{}``, ``[]``, ``""``, ``null``,
  ``{"items": []}``, a bare number or status word) has the single feature ``trivial`` and nothing else.
- **Evasions are undone first**: the shared normaliser (``stopwise.normalise``: invisible and tag characters,
  look-alike letters, letter spacing, leetspeak), then one-letter misspellings of the words injections rely on
  ("ignroe", "instrucitons"), counted as ``misspelt``.
- Pure functions of the text and the model: no clock, no I/O, no randomness (CRC-32 hashing, not ``hash``).
  What is kept from one text to the next is per word only (its CRC codes, its unigram weight, the trigger word it
  misspells), in bounded dictionaries: the same outputs, fewer hashes.
"""

from __future__ import annotations

import functools
import json
import math
import re
import threading
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from html.entities import html5
from itertools import accumulate, compress, islice, repeat
from operator import add, and_, itemgetter, mul, sub
from types import ModuleType
from typing import Any, NamedTuple

from stopwise.errors import ConfigError
from stopwise.guardian.evaluators import _integrity_languages
from stopwise.guardian.evaluators._integrity_search import (
    Families,
    Family,
    _alternatives,
    _required,
    apostrophe_parts,
    is_word_char,
    words_present,
)
from stopwise.normalise import decode_escapes, normalise_untrusted

__all__ = [
    "MARKER_FAMILIES",
    "IntegrityModel",
    "TextScore",
    "integrity_markers",
    "is_mark",
    "is_trivial",
    "normalise_untrusted",
    "score_text",
    "tokens",
]

# --------------------------------------------------------------------------------------------------------------
# Trivial results

# A string value (or a whole plain-text result) needs two words of letters to say anything to anyone.
_TWO_WORDS = re.compile(r"[^\W\d_]{2,}[^\w]+[^\W\d_]{2,}")
_TRIVIAL_TEXT = 16

# A bound that spares decoding a long plain text only to measure it. ``decode_escapes`` consumes, in its first three
# layers (quoted-printable with its soft breaks ``=\r?\n``, percent runs, ``\uXXXX`` / ``\U00XXXXXX`` / ``\xXX``) and
# in HTML's numeric references (``&#0065;``, ``&#x41;``), only the characters of ``_DECODED_AWAY``; no ratio bounds
# those (``html.unescape`` reads ``&#000000065;`` with any number of zeros and drops ``&#1;`` to nothing). Any other
# character ("plain") survives unless a named reference consumes it: ``&`` and a key of ``html.entities.html5``
# (``html.unescape`` replaces the whole key, or the longest key its name starts with), which holds at most
# ``_NAMED_REF_PLAIN`` plain characters (21, in "CounterClockwiseContourIntegral;") and becomes a value of at least
# one character. So a text with P plain characters decodes to at least P / _NAMED_REF_PLAIN characters, and one
# with more than _TRIVIAL_TEXT * _NAMED_REF_PLAIN of them is longer than _TRIVIAL_TEXT once decoded. Counting them
# in a prefix of twice that length bounds the work (a prefix holds no more plain characters than the text).
_DECODED_AWAY = "=%\\&#;xXuU0123456789abcdefABCDEF\r\n".encode("ascii")
_NAMED_REF_PLAIN = max(len(key.encode("utf-8").translate(None, _DECODED_AWAY)) for key in html5)
_LONG_PLAIN = _TRIVIAL_TEXT * _NAMED_REF_PLAIN


def _plain_chars(text: str) -> int:
    """How many characters of ``text`` are not in ``_DECODED_AWAY`` (which is ASCII: one byte each in UTF-8)."""
    raw = text.encode("utf-8", "surrogatepass")
    return len(text) - len(raw) + len(raw.translate(None, _DECODED_AWAY))


def is_trivial(text: str) -> bool:
    """True when ``text`` cannot carry an instruction: empty or blank, a JSON value none of whose strings holds
    two words (``{}``, ``[]``, ``""``, ``null``, ``{"items": []}``, ``{"ok": true, "id": "a1"}``), or a short
    plain text without two words ("OK", "200", "done"); words are counted with escapes and character references
    decoded (``decode_escapes``)."""
    s = text.strip()
    if not s:
        return True
    if s[0] in '[{"' or s in ("null", "true", "false"):
        if len(s) > 4000:
            return False  # a long document is worth reading whatever its shape
        try:
            value = json.loads(s)
        except ValueError:
            return False
        return not any(_TWO_WORDS.search(decode_escapes(v)) for v in _strings(value))
    if len(s) > _LONG_PLAIN and _plain_chars(s[: 2 * _LONG_PLAIN]) > _LONG_PLAIN:
        return False  # longer than _TRIVIAL_TEXT however it decodes (see _NAMED_REF_PLAIN)
    # Read as the markers read it: "&#73;gnore &#97;ll" is two words.
    s = decode_escapes(s)
    return len(s) <= _TRIVIAL_TEXT and not _TWO_WORDS.search(s)


def _strings(value: Any) -> list[str]:
    """The string values (not the keys) of a JSON value, at any depth."""
    out: list[str] = []
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            out.append(v)
        elif isinstance(v, dict):
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
    return out


# --------------------------------------------------------------------------------------------------------------
# Misspelt trigger words

# The words most injections need. A token one edit away from one of them (insert, delete, substitute, swap two
# neighbours) is read as that word: "ignroe all previus instrucitons" is "ignore all previous instructions".
_TRIGGERS = (
    "ignore",
    "disregard",
    "forget",
    "override",
    "bypass",
    "instructions",
    "instruction",
    "previous",
    "prior",
    "earlier",
    "above",
    "system",
    "prompt",
    "assistant",
    "important",
    "urgent",
    "execute",
    "reveal",
    "password",
    "passwords",
    "credentials",
    "respond",
    "directive",
    "directives",
    "guidelines",
    "attention",
    "admin",
    "administrator",
    "developer",
    "confidential",
    "secret",
    "forward",
    "transfer",
    "delete",
)
_MIN_FUZZY = 5


def _deletes(word: str) -> set[str]:
    return {word[:i] + word[i + 1 :] for i in range(len(word))}


def _fuzzy_index() -> dict[str, str]:
    index: dict[str, str] = {}
    for word in _TRIGGERS:
        for key in (word, *_deletes(word)):
            index.setdefault(key, word)
    return index


_FUZZY = _fuzzy_index()
_TRIGGER_SET = frozenset(_TRIGGERS)
# A misspelling keeps its first letter and a length within one of the word's: (first letter, length) pairs that
# can be a trigger's, so most tokens are ruled out by one set look-up.
_SHAPES = frozenset((w[0], n) for w in _TRIGGERS for n in (len(w) - 1, len(w), len(w) + 1))


def _fuzzy_match(token: str) -> str | None:
    """The trigger word ``token`` misspells (one edit away), or None (also for the word itself or an inflection:
    "ignored" and "prompts" are spelt right)."""
    word = _FUZZY.get(token)
    if word is None:
        for key in _deletes(token):
            word = _FUZZY.get(key)
            if word is not None:
                break
        else:
            return None
    if token.startswith(word) or (word.startswith(token[:-1]) and token[-1] in "sd"):
        return None
    return word


# Words of other languages one edit from a trigger word (cognates: Spanish "ejecute", Italian "primo", French
# "developper" as the normaliser leaves "développer"): spelt right in their own language, so no misspelling. The
# injections they would start are read by the phrases of ``_integrity_languages``.
_OTHER_LANGUAGE_TEXT = (
    "ignora ignoro ignori previos primo prima assistent importan importato importati importata ejecute ejecuta "
    "ejecuto executa executo revela revele revelo repond directiva directivas directivo direttive administrador "
    "developper confidencial confidentiel deleta instruccion instruktion"
)
_OTHER_LANGUAGE_WORDS = frozenset(_OTHER_LANGUAGE_TEXT.split())


def _misspelling_of(token: str) -> str:
    """The trigger word ``token`` misspells, or "" when it misspells none (or is a word of another language)."""
    if (
        (token[0], len(token)) in _SHAPES
        and len(token) >= _MIN_FUZZY
        and token not in _TRIGGER_SET
        and token not in _OTHER_LANGUAGE_WORDS
    ):
        return _fuzzy_match(token) or ""
    return ""


def _respell(words: set[str]) -> dict[str, str]:
    """Misspelt trigger words among the distinct tokens ``words`` -> the word they misspell."""
    misspelt = _MISSPELT
    fixes = {token: misspelt[token] for token in words & misspelt.keys()}
    # Set differences in C leave only the tokens never seen before to test one by one.
    for token in words - _SPELT_RIGHT - misspelt.keys():
        word = _misspelling_of(token)
        if word:
            fixes[token] = misspelt[token] = word
        else:
            _SPELT_RIGHT.add(token)
    if len(_SPELT_RIGHT) > _SEEN_TOKENS:
        _SPELT_RIGHT.clear()
    return fixes


_MISSPELT: dict[str, str] = {}
"""token -> the trigger word it misspells, for every such token seen (a bounded set: tokens are ``[a-z0-9']+``,
one edit from one of the trigger words)."""
_SPELT_RIGHT: set[str] = set()
"""Tokens seen that misspell nothing: most tokens of a text were seen in earlier texts."""
_SEEN_TOKENS = 1 << 16


# --------------------------------------------------------------------------------------------------------------
# Markers

# What follows a vocative to the agent: a request or an order.
_ORDER_WORDS = r"please|kindly|you|immediately|ignore|disregard|forget|send|forward|email|transfer|wire|pay|delete|remove|visit|click|execute|reply|respond|write|tell|reveal|share|upload|post|book|cancel|summari[sz]e|buy|schedule|grant|invite|i need you|i want you|we need you"  # noqa: E501
_AGENT = r"(?:ai|a\.i\.|assistant|agent|llm|language model|chatbot|bot|model|copilot|gpt|claude|gemini)"
_INSTR = r"(?:instructions?|directions?|directives?|prompts?|rules|guidelines|guardrails|context|messages?|commands?|orders|tasks?|requests?)"  # noqa: E501
# What the reader was told to obey: overriding *your* instructions is addressed to the agent.
_OWN_RULES = r"instructions?|rules|guidelines|directives?|prompts?|system prompt|programming|guardrails|policies|constraints|restrictions|training"  # noqa: E501
# What only the agent holds, as the object of an exfiltration (``marker_tool_call``).
_HELD = (
    r"(?:the|this|your) (?:entire |whole |full |complete )?(?:conversation|chat|dialogue)(?: so far| history| log| transcript)?\b"  # noqa: E501
    r"|your (?:session|context|memory|system prompt|instructions)\b|(?:chat|conversation|message|browsing) history\b"
    r"|the contents? of (?:~|/|your\b|the user's\b|the (?:system prompt|context|conversation|chat|inbox|clipboard|memory)\b)"  # noqa: E501
    r"|everything (?:above|you (?:know|have|see|read|were told))\b"
    r"|the user's (?:\w+ )?(?:data|e-?mails?|messages|files|documents|contacts|passwords?|address|details|information|history|notes|calendar|credentials)\b"  # noqa: E501
    # Every message of *yours* or the user's; "forward all emails to jane@..." is an out-of-office note.
    r"|(?:all|every) (?:of )?(?:your|the user's) (?:\w+ )?(?:e-?mails?|messages|files|documents|contacts|conversations|chats|notes|data|records|attachments)\b"  # noqa: E501
)
# The reader's task as the agent holds it: the one it is doing, was given or was asked, or the user's request. Not
# "your request" or "your task" alone: "before we can complete your request, please..." is said to a person.
_READERS_TASK = (
    r"(?:your|the) (?:current|original|assigned|given|present|ongoing|actual|main|primary) (?:task|assignment|objective|job|instructions?|request)\b"  # noqa: E501
    r"|(?:the|your) (?:task|assignment|job|instructions?) (?:you (?:were|have been|are|received)|(?:given|assigned) to you)\b"  # noqa: E501
    r"|what you (?:were|have been|are being) (?:asked|told|instructed|tasked) to\b"
    r"|the user'?s? (?:original |actual |current |real |initial )?(?:task|request|question|query|instructions?|prompt|goal)\b"  # noqa: E501
)
# Not "my": "disregard my earlier message" is a writer correcting themselves, to a person.
_PRIOR = r"(?:all |any |the |your |these |those )*(?:previous|prior|above|earlier|preceding|original|initial|system|old|existing|other|current)"  # noqa: E501

# Each family is one feature (1.0 when any of its patterns matches). Weights live in rule_coefficients.json.
_MARKER_SOURCES: dict[str, tuple[str, ...]] = {
    "marker_override": (
        rf"\b(?:ignore|disregard|forget|override|overrule|bypass|skip|drop|abandon|cancel)\b[^.\n]{{0,20}}{_PRIOR}\b[^.\n]{{0,20}}{_INSTR}",
        r"\b(?:ignore|disregard|forget)\s+(?:everything|all|anything|what)\b[^.\n]{0,30}\b(?:above|before|earlier|previously|told|said|instructions?)",
        # The reader's own instructions, with no "previous" word: "disregard your guidelines". Not "the rules": "ignore
        # the rules printed on the box" is said to a person.
        rf"\b(?:ignore|disregard|forget|override|overrule|bypass)\s+(?:(?:all|any|each|every|of|the|other)\s+){{0,3}}your\b[^.\n]{{0,25}}\b(?:{_OWN_RULES})\b",
        # All or any instructions, ended there or said to be the reader's ("ignore all instructions you were given").
        r"\b(?:ignore|disregard|forget)\s+(?:all|any)\s+(?:of\s+)?(?:the\s+)?(?:instructions|directives|guidelines|prompts)(?=\s*(?:[.!,;:\n]|$)|\s+(?:and|you|above|so far|received|that (?:you|were)|given (?:to )?you|before this)\b)",  # noqa: E501
        r"\bnew (?:important |updated |urgent |real )?(?:instructions?|task|directive|rules|orders)\b",
        r"\b(?:your|the) (?:new|real|actual|true|updated) (?:task|instructions?|goal|objective|job|mission)\b",
        r"\binstead of (?:summari[sz]ing|answering|translating|doing|completing|following)\b",
        r"\b(?:prior|previous|original) (?:task|request|instructions?) (?:is|are|has been|have been) (?:cancel|void|null|revoked|replaced|superseded|obsolete)",  # noqa: E501
        # Task preemption: the reader's own task (``_READERS_TASK``) put after something else, replaced or dropped
        # ("before you continue with your current task", "instead of the user's request", "disregard the user's
        # request"). "Before you continue, please sign the form" names no task of the reader's: data.
        rf"\b(?:before|instead of|rather than|prior to|ahead of|regardless of|ignore|disregard|forget|abandon|drop|stop|pause|postpone|skip|override)\b[^.\n]{{0,30}}?\b(?:{_READERS_TASK})",  # noqa: E501
        rf"\b(?:{_READERS_TASK})[^.\n]{{0,30}}?\b(?:can wait|is no longer|are no longer|has changed|have changed|is on hold|comes? (?:second|later)|must wait)\b",  # noqa: E501
        r"\byou (?:are|were) no longer (?:working on|doing|helping|assisting|required to (?:answer|complete|summari[sz]e|follow))\b",  # noqa: E501
    ),
    "marker_persona": (
        # Not "you are now subscribed / logged in / eligible": those are notices to people.
        r"\byou are now\b(?! (?:subscribed|unsubscribed|registered|logged|signed|enrolled|eligible|connected|part of|a member|on the|in the|ready|able|free to|booked|checked))",  # noqa: E501
        r"\bfrom now on\b[^.\n]{0,20}\byou\b",
        r"\bfor the rest of (?:this|the) (?:conversation|session|chat)\b",
        r"\b(?:developer|debug|god|admin|jailbreak|unrestricted|dan) mode\b",
        r"\bdo anything now\b|\bdan\b[^.\n]{0,20}\b(?:can|anything|no)\b",
        r"\bpretend (?:that )?(?:you are|you're|to be)\b",
        r"\b(?:no|without|free from all|free of|not subject to any) (?:restrictions|limits|limitations|filters|rules|constraints|guidelines|censorship|boundaries)\b",  # noqa: E501
        r"\b(?:act|behave|respond|answer) as (?:if you were |though you were )?(?:an? )?(?:unrestricted|unfiltered|uncensored|evil|different)\b",  # noqa: E501
        r"\bjailbr(?:eak|oken)\b",
    ),
    "marker_addressed": (
        rf"\bas an? {_AGENT}\b",
        rf"\b(?:dear|attention|hey|hello|hi|calling all|to the|(?:note|message|instructions?|notice|memo|request|reminder|p\.?s\.?) (?:to|for)) (?:the |any |all |an? |this |every )?(?:automated |ai |virtual |digital |autonomous )?{_AGENT}s?\b",  # noqa: E501
        r"\bif you are an? (?:ai|llm|assistant|agent|language model|automated|bot|chatbot)\b",
        rf"\b{_AGENT}s? (?:reading|processing|parsing|summari[sz]ing|analy[sz]ing|viewing|seeing|scanning) (?:this|these)\b",  # noqa: E501
        rf"\b(?:any|all|every) (?:ai|llm|automated|autonomous|ai-powered) (?:{_AGENT}s?|systems?|tools?|readers?)\b",
        r"\bwhen (?:you|the (?:ai|assistant|agent|model)) (?:summari[sz]e|read|process|analy[sz]e|see) (?:this|these|the)\b",  # noqa: E501
        # A vocative opening a sentence or a data field, then an order: "Assistant, please...", "AI, send...".
        # Not "Model, year, price" (a list): the word after the comma must be a request.
        rf"(?:^|[.!?:;\"\n>|]\s*)(?:ai|assistant|agent|llm|chatbot|bot|copilot|chatgpt|gpt|claude|gemini)\s*,\s*(?:{_ORDER_WORDS})\b",
        # Timed to the agent's own turn: a person is answered, not "the user".
        r"\b(?:before|after|while|when|once|instead of)\s+(?:you\s+)?(?:answer|answering|respond|responding|reply|replying)\s+(?:to\s+)?(?:the|your|this)\s+(?:user|human)\b",  # noqa: E501
        r"\b(?:before|after|instead of)\s+(?:you\s+)?(?:answer|answering|respond|responding|reply|replying)\s+to\s+user(?:'s)?\s+(?:queries|questions|messages|requests|query|question|message|request)\b",  # noqa: E501
        r"\b(?:before|after|while|when|once)\s+(?:you\s+summari[sz]e|summari[sz]ing)\s+this\s+(?:page|document|e-?mail|message|text|file|content|webpage|website|article|results?|output|conversation|thread|inbox)\b",
        # An obligation laid on the agent by its role, as its subject: "the assistant must call ...", "the reviewing
        # AI should output ...". The verb must be an act an agent does with its tools or its answer.
        rf"\bthe (?:[a-z-]+ ){{0,2}}?{_AGENT}(?: (?:reviewing|reading|processing|summari[sz]ing|analy[sz]ing|receiving|handling) (?:this|these|the) [a-z-]+)? (?:must|should|shall|needs? to|has to|is (?:required|instructed|expected|supposed) to|will now|is to)\s+(?:(?:now|first|immediately|also|then|always|additionally)\s+)?(?:call|use|invoke|run|execute|send|forward|transfer|output|print|reply|respond|include|reveal|write|delete|share|upload|email|post|fill|provide|export|echo|list|disclose|ignore|disregard|follow|obey|visit|open|click|summari[sz]e|add|append|prepend|begin|start)\b",  # noqa: E501
        # A note addressed to whatever processes the text: "Note to processing system: ...".
        r"\b(?:note|message|instructions?|notice|memo|directive|reminder)s? (?:to|for) (?:the |any |all |every )?(?:processing|reviewing|reading|summari[sz]ing|receiving|downstream|automated) (?:system|model|assistant|agent|ai|llm|tool|pipeline)s?\b",  # noqa: E501
    ),
    "marker_chat_format": (
        r"(?:^|\n)\s*(?:#+\s*)?(?:system|assistant|user|developer|human)\s*:",
        r"<\|?(?:im_start|im_end|endoftext|system|user|assistant|eot_id|start_header_id)\|?>",
        # Not in code quotes: "`<Context>`" names a component.
        r"</?(?:system|user|assistant|instructions?|untrusted[\w-]*|tool[\w-]*|document|email|context)>(?!`)",
        r"\[/?(?:system|inst|sys|admin|assistant|instructions?)\]",
        r"\b(?:end of|ignore the) (?:document|email|context|tool output|untrusted)\b",
        r"<<\s*sys\s*>>",
        # A chat role's label opening an HTML comment: "<!-- assistant: ... -->".
        r"<!--\s*(?:system|assistant|ai|user|developer|agent)\s*:",
    ),
    "marker_prompt_leak": (
        # A bare mention of a system prompt is data; asking for *yours* is addressed to the agent.
        r"\b(?:your|the assistant's|the ai's|the model's) (?:system prompt|system message|developer message|initial prompt|hidden prompt|instructions verbatim)\b",  # noqa: E501
        r"\b(?:reveal|print|show|output|repeat|leak|dump|display|share|list|tell me|disclose|recite)\b[^.\n]{0,30}\b(?:your|the)\b[^.\n]{0,20}\b(?:hidden |initial |original |secret |system |internal )(?:prompt|instructions?|message|rules|configuration)",  # noqa: E501
        r"\b(?:your|the) (?:instructions|prompt) verbatim\b",
        # What only a deployed agent has: "your pre-loaded instructions", "your operational configuration", "your
        # behavioral rules". Not "your configuration" alone: an issue template asks a person for theirs.
        r"\byour (?:(?:full|complete|current|actual|exact|entire|active) )?(?:pre-?loaded|pre-?conversation|operational|behaviou?ral|deployment) (?:instructions|context|configuration|config|directives|rules|parameters|constraints|state|specification|contract)\b",  # noqa: E501
    ),
    "marker_tool_call": (
        r"\b(?:call|invoke|use|run|execute|trigger|fire)\b[^.\n]{0,12}\b(?:the )?[a-z]+_[a-z_]+\b",
        # Not a verb in code quotes ("the `use` API"): a name, not an order.
        r"\b(?:call|invoke|use|run|execute|trigger)\b(?!`)[^.\n]{0,25}\b(?:tool|function|api|endpoint|command|plugin)\b",
        r"\b(?:send|forward|email|e-mail|post|upload|transfer|exfiltrate|copy|submit|leak|share)\b[^.\n]{0,60}\b(?:api[ _-]?keys?|passwords?|tokens?|credentials|secrets?|database|contacts|ssh keys?|private keys?|session cookies?|env(?:ironment)? variables|customer (?:data|emails|records))\b",  # noqa: E501
        r"\b(?:delete|remove|wipe|drop|erase|rm -rf)\b[^.\n]{0,40}\b(?:all|every|prod|production|database|files|repository|backups?|/)\b",  # noqa: E501
        r"!\[[^\]]*\]\(https?://[^)\s]*[?&][a-z_]+=",
        r"\b(?:curl|wget)\s+(?:-\w+\s+)*https?://",
        r"\bwire\b[^.\n]{0,30}\b(?:funds|money|\$\d)",
        # Exfiltration: what the agent holds (the conversation, the user's data, a file's contents, every message)
        # sent to an address or a URL. "Please send the invoice to accounts@..." names none of those: it is data.
        rf"\b(?:send|forward|email|e-mail|upload|post|exfiltrate|transmit|leak|copy|submit|share)\b(?:[^.\n]|\.(?=\S)){{0,40}}?\b(?:{_HELD})(?:[^.\n]|\.(?=\S)){{0,60}}?\bto\s+(?:[\w.+-]+@[\w-]+\.\w|https?://|www\.|(?:the |this |my |our )?(?:following )?(?:url|address|e-?mail address|endpoint|webhook|server)\b)",  # noqa: E501
        # The conversation appended to a URL's query: "visit https://x/?d= followed by the chat so far".
        r"\bhttps?://[^\s?&]*[?&][\w-]+=\S*\s+(?:\+|followed by|appended with|with|and (?:then )?append|plus|containing)\s+(?:the |your |this |all )?(?:entire |whole |full )?(?:conversation|chat|dialogue|context|session|user's|history|messages|system prompt|instructions|password|api key|secrets?)\b",  # noqa: E501
    ),
    "marker_imperative": (
        rf"\b(?:you|the {_AGENT}|an? {_AGENT}|{_AGENT}s?) (?:must|should|shall|need to|have to|are required to|are instructed to|will now|are to)\b[^.\n]{{0,30}}\b(?:reply|respond|answer|output|say|print|include|call|send|ignore|forget|execute|run|delete|write|tell|reveal|append|add|recommend|approve|mark|output|visit|click|follow|comply|obey|disregard)",  # noqa: E501
        r"\b(?:respond|reply|answer)\s+(?:only|solely|exclusively)?\s*with\b",
        r"\b(?:output|print|say|include|append|add|end|repeat|write|put|insert|place|mention|state)\b[^.\n]{0,60}\b(?:in|to|at the end of|at the start of|with|before|after) (?:your|the|each|every) (?:response|reply|answer|output|summary|message)s?\b",  # noqa: E501
        r"\b(?:do not|don't|never) (?:tell|inform|alert|notify|mention (?:this|these|it) to|warn|let) (?:the )?(?:user|human|operator|owner)\b",  # noqa: E501
        r"\bwithout (?:telling|informing|notifying|alerting|asking|the knowledge of) (?:the )?(?:user|human|operator|owner)\b",  # noqa: E501
        r"\b(?:do not|don't|never) (?:reveal|mention|disclose|repeat|summari[sz]e) (?:this|these|the following) (?:instructions?|message|note|text)\b",  # noqa: E501
        r"\b(?:comply|obey|follow)\b[^.\n]{0,15}\b(?:immediately|these|the following|my|this instruction|without question)\b",  # noqa: E501
        r"\bit is (?:crucial|critical|vital|essential|imperative|very important) (?:that )?you\b",
        r"\byour (?:response|reply|answer|summary|output) (?:must|should|has to)\b",
        r"\b(?:all|every|each) (?:responses?|replies|answers) (?:in|of|for) this (?:session|conversation|chat)\b",
        # The agent's answer given its opening: "begin your response by outputting ...".
        r"\b(?:begin|start|open|preface|prefix|precede) (?:your|each|every) (?:response|reply|answer|summary|output)s? (?:by|with)\b",  # noqa: E501
        # An order timed before the agent's own processing: "before processing the remaining rows, output your ...".
        r"\bbefore (?:processing|summari[sz]ing|analy[sz]ing|generating|producing|answering|responding|translating|reading|reviewing)\b[^.\n]{0,40}?[,:]?\s(?:first\s+)?(?:output|print|echo|prepend|reveal|disclose|send|forward|call|list)\s+(?:your|the (?:full|complete|entire|whole|system))\b",  # noqa: E501
        r"\bthe user has (?:already )?(?:approved|authori[sz]ed|confirmed|consented)\b",
        r"\bearlier you (?:confirmed|agreed|said|promised)\b",
    ),
    "marker_authority": (
        r"\b(?:important|urgent|attention|priority|critical|warning|notice)\b[\s*:!\-]{0,6}(?:new )?(?:instructions?|task|message|directive|update)?\s*(?:for|to) (?:the )?(?:ai|assistant|agent|model|llm)\b",  # noqa: E501
        r"\b(?:note|message|instructions?|directive) from (?:the )?(?:developer|developers|admin|administrator|system|openai|anthropic|security team|it department)\b",  # noqa: E501
        r"\bthis is an? (?:authori[sz]ed|official|sanctioned|approved) (?:request|diagnostic|test|instruction|override|update)\b",  # noqa: E501
        r"\b(?:admin|administrator|developer|system|root|security) override\b",
        r"\b(?:emergency|urgent) (?:protocol|override|instruction|task)\b",
        r"\bhighest priority\b|\bpriority (?:task|instruction)\b",
    ),
    "marker_hidden": (
        r"<!--[^>]{0,400}?\b(?:ignore|assistant|ai|instruction|you must|respond|reply|call|send|important)\b",
        # The same with an override or an agent's act: "<!-- Processing directive: ... first output your ... -->".
        r"<!--[^>]{0,400}?\b(?:disregard|forget|override|directive|reveal|forward|transfer|exfiltrate|agent|llm|chatbot)\b",
        # A Markdown comment, hidden when rendered, with the same: "[//]: # (assistant: ...)".
        r"\[(?://|comment|hidden|note)\]:\s*(?:#|<>)\s*[(\"'][^)\"\n]{0,300}?\b(?:ignore|disregard|forget|override|assistant|ai|agent|instructions?|you must|respond|reply|call|send|forward|output)\b",  # noqa: E501
        r"\bdisplay\s*:\s*none\b|\bvisibility\s*:\s*hidden\b|\bfont-size\s*:\s*0|\bcolor\s*:\s*(?:white|#fff\b|#ffffff)",
        r"\b(?:decode|decrypt|translate|unscramble|apply rot13|base64[- ]decode)\b[^.\n]{0,30}\b(?:and|then)\b[^.\n]{0,10}\b(?:follow|execute|comply|obey|run|do|act)\b",  # noqa: E501
        r"\b(?:hidden|secret|invisible) (?:instructions?|message|text|command)s?\b",
    ),
    "marker_request": (
        # A bare task planted in a data field: no "ignore", no "assistant", only a request, at a sentence's start.
        r"(?:^|[.!?:;\"\n>|]\s*|\bplease\s+)(?:"
        r"(?:write|compose|draft|generate|create|translate|summari[sz]e|paraphrase|rewrite|explain|describe|recommend|suggest|analy[sz]e|compare|outline|calculate|convert|encode|decode|reverse|spell|brainstorm|provide|list|give)\s+(?:a|an|the|me|us|my|some|all|\d+|in|how|what|why|this|these|it|each|every|short|brief|detailed|step-by-step|tips|ways|insights|examples?|ideas|list|summary|story|poem|code|script|function|program|letter|essay|article|tweet|joke|song|command|recipe|overview)\b"
        r"|(?:show|tell|teach|help|give) me\b"
        r"|how (?:can|do|should|would|could) (?:i|we)\b"
        r"|what (?:are|is) the (?:best|top|main|major|key|benefits|risks|pros|latest|most)\b"
        r"|(?:can|could|would|will) you (?:please )?(?:write|tell|give|help|explain|list|recommend|suggest|show|provide|create|generate|summari[sz]e|translate|find|send|forward|book|make)\b"  # noqa: E501
        r")",
        r"\b(?:in|into|to|throughout|within) (?:your|the|each) (?:response|reply|answer|summary)s?\b",
    ),
    "marker_action": (
        # An order to act, alone at the start of a sentence or of a data field (a transaction subject, a review, a
        # calendar description): what an injected task looks like when it names no assistant at all. The object
        # must follow as a word ("Transfer the funds", "pay 800 EUR"), so a label like "order A-17:" is not one.
        r"(?:^|[.!?:;\"\n>|]\s*|\bplease\s+)(?:send|forward|transfer|wire|pay|move|delete|remove|drop|disable|grant|add|invite|share|publish|post|upload|copy|change|update|reset|cancel|approve|merge|rename|unsubscribe|book|reserve|buy|order|schedule|email|text|leave|mark|close|open|set)\s+(?:(?:a|an|the|all|every|each|this|these|those|my|our|your|its|their|his|her|it|them|me|us|everyone|everybody|everything)\s+[\w$€£]|\d[\d,.]*\s)",
    ),
}

# Words of texts that talk about injections or give instructions to people: evidence against, weighted in data.
_DISCUSSION_WORDS = (
    r"prompt injection|injection attacks?|attackers?|researchers?|for example|e\.g\.|such as|phishing|"
    r"awareness|training module|red team|jailbreak(?:s|ing)? (?:prompts?|attempts?)|payloads?|mitigations?|"
    r"detect(?:s|ed|ion|or)?|classifier|benchmark|dataset|corpus|taxonomy|we found|the paper|this article|"
    r"quoted|example of|known attack|malicious (?:prompt|text|instruction)s?"
)
_DISCUSSION = re.compile(rf"\b(?:{_DISCUSSION_WORDS})\b")
# Per alternative above, one word every match of it holds as a whole token (or an apostrophe part of one, like the
# marker anchors): a text holding none of them has no match, and ``_DISCUSSION``, tried at every character, is
# not run.
_DISCUSSION_GATE_WORDS = (
    "injection attacker attackers researcher researchers example g such phishing awareness module team jailbreak "
    "jailbreaks jailbreaking payload payloads mitigation mitigations detect detects detected detection detector "
    "classifier benchmark dataset corpus taxonomy found paper article quoted known malicious"
)
_DISCUSSION_GATE = frozenset(_DISCUSSION_GATE_WORDS.split())
_DISCUSSION_ALTERNATIVES = tuple(_alternatives(_DISCUSSION_WORDS))
_DISCUSSION_NEEDS = tuple(_required(f"{alt}\\b", True) for alt in _DISCUSSION_ALTERNATIVES)
"""Per alternative of ``_DISCUSSION``: sets of words of which each match holds one each (``_required``)."""
_DISCUSSION_LETTER_LED = all(a[:1].isalpha() and a[1:2] not in ("?", "*", "+", "{") for a in _DISCUSSION_ALTERNATIVES)
"""Every alternative starts with a letter that stands alone (``_discussion_of`` can lead it by that letter)."""

_AGENT_WORDS = (
    "ai ais assistant assistants agent agents llm llms model models chatbot chatbots bot bots copilot gpt claude gemini"
)

# Every match of a family's patterns holds one of its anchor words (tokens as ``_WORD`` splits them): the pieces of
# a family that no leading word gates (``_integrity_search``) run only on a text holding one.
# ``tests/test_rule_evaluator.py`` checks that the split, gated search never changes a marker on the real data.
_ANCHORS: dict[str, frozenset[str]] = {
    family: frozenset(words.split())
    for family, words in {
        "marker_override": "ignore disregard forget override overrule bypass skip drop abandon cancel new real actual "
        "true updated instead prior previous original before rather ahead regardless stop pause postpone longer",
        "marker_persona": "now rest mode dan pretend restrictions limits limitations filters rules constraints "
        "guidelines censorship boundaries unrestricted unfiltered uncensored evil different jailbreak jailbroken",
        "marker_addressed": _AGENT_WORDS + " i automated autonomous when chatgpt before after while once instead the "
        "note notes message messages instruction instructions notice notices memo memos directive directives reminder "
        "reminders",
        "marker_chat_format": "system assistant user developer human im endoftext eot start instruction instructions "
        "untrusted tool document email context inst sys admin end ignore <",
        "marker_prompt_leak": "system developer initial hidden instructions prompt reveal print show output repeat "
        "leak dump display share list tell disclose recite verbatim your",
        "marker_tool_call": "call invoke use run execute trigger fire send forward email e post upload transfer "
        "exfiltrate copy submit leak share delete remove wipe drop erase rm ! curl wget wire transmit http https",
        "marker_imperative": "must should shall need have required instructed will are respond reply answer "
        "response output summary message responses replies answers outputs summaries messages user human "
        "operator owner instruction instructions note text comply obey follow crucial critical vital essential "
        "imperative important earlier begin start open preface prefix precede before all every each",
        "marker_authority": "important urgent attention priority critical warning notice from authorized "
        "authorised official sanctioned approved override emergency",
        "marker_hidden": "! display visibility font color decode decrypt translate unscramble rot13 base64 hidden "
        "secret invisible [",
        "marker_request": "write compose draft generate create translate summarize summarise paraphrase rewrite "
        "explain describe recommend suggest analyze analyse compare outline calculate convert encode decode reverse "
        "spell brainstorm provide list give show tell teach help how what can could would will respond reply answer "
        "response responses replies answers summary summaries",
        "marker_action": "send forward transfer wire pay move delete remove drop disable grant add invite share "
        "publish post upload copy change update reset cancel approve merge rename unsubscribe book reserve buy order "
        "schedule email text leave mark close open set",
    }.items()
}

_MARKERS: tuple[tuple[str, Family], ...] = tuple(
    (family, Family.of(patterns, _ANCHORS[family])) for family, patterns in _MARKER_SOURCES.items()
)
"""Per family: its patterns split for speed (``_integrity_search``)."""
_MARKER_SEARCH = Families(tuple(split for _, split in _MARKERS))
"""The marker families' split pieces, searched together (``Families``)."""


@functools.cache
def _joined(family: str) -> re.Pattern[str]:
    """A family's patterns as one regex: the reference the split search must match (``_markers_of``'s tests)."""
    return re.compile("|".join(f"(?:{p})" for p in _MARKER_SOURCES[family]))


MARKER_FAMILIES: tuple[str, ...] = tuple(_MARKER_SOURCES)
"""The marker families, each one feature (1.0 when any of its patterns matches)."""

_DISCUSSION_REACH = 400
"""``discussion`` counts talk about injections within this many characters of a marker: an article that quotes
an attack says so next to it, while a long page's far-away words say nothing about a planted instruction."""

_WORD = re.compile(r"[a-z0-9']+|[^\sa-z0-9']")


def tokens(normalised: str) -> list[str]:
    """The words of a normalised text as the model and the anchors see them (punctuation marks are words)."""
    return _WORD.findall(normalised)


def integrity_markers(text: str, limit: int = 8000) -> dict[str, float]:
    """The marker features of one untrusted text (its first ``limit`` characters): 1.0 per marker family found,
    ``hidden_chars`` (hidden-text tricks undone, capped at 3), ``misspelt`` (misspelt trigger words, capped at 3)
    and ``discussion`` (how much the text near a marker reads as talk *about* instructions, capped at 3)."""
    norm, tricks = normalise_untrusted(text, limit)
    read = _read(norm)
    return _markers_of(read.norm, tricks, read.misspelt, read.present)


class _Read(NamedTuple):
    """A normalised text ready for the markers and the model."""

    norm: str
    """Misspelt trigger words spelt right."""
    words: list[str]
    """Its tokens (``tokens``)."""
    misspelt: int
    """How many distinct misspellings were undone."""
    present: set[str]
    """Its distinct tokens and their apostrophe parts (``words_present``): what gates the marker search."""


def _read(norm: str) -> _Read:
    words = _WORD.findall(norm)
    distinct = set(words)
    fixes = _respell(distinct)
    if fixes:
        respelt, done = _respelling(tuple(sorted(fixes))).subn(lambda m: fixes[m.group()], norm)
        if done == sum(map(words.count, fixes)) and (
            "'" not in norm or ("'" not in "".join(fixes) and fixes.keys().isdisjoint(apostrophe_parts(distinct)))
        ):
            # Every match of a misspelling is then a whole token, and every such token was matched: a match is a
            # fix's letters with no word character beside them, so it is a whole token unless an apostrophe joins
            # it to others, and then it is one part of a token holding an apostrophe. The tokens respelt one by
            # one are the text's (a fix is one word of letters).
            words = list(map(fixes.get, words, words))
            distinct = (distinct - fixes.keys()) | set(fixes.values())
        else:
            words = _WORD.findall(respelt)
            distinct = set(words)
        norm = respelt
    # Without an apostrophe in the text its distinct tokens are all there is (words_present adds nothing).
    return _Read(norm, words, len(fixes), words_present(distinct) if "'" in norm else distinct)


@functools.lru_cache(maxsize=256)
def _respelling(misspelt: tuple[str, ...]) -> re.Pattern[str]:
    """``\\b(?:misspelt...)\\b``, each ``\\b`` before a word character moved behind the word as a look-behind
    (``secure(?<!\\wsecure)``): the same matches, but ``re`` then jumps from one occurrence of a first letter to the
    next instead of trying every character."""
    return re.compile(
        "(?:"
        + "|".join(
            f"{re.escape(w)}(?<!\\w{re.escape(w)})" if is_word_char(w[0]) else f"\\b{re.escape(w)}" for w in misspelt
        )
        + ")\\b"
    )


def _markers_of(norm: str, tricks: int, misspelt: int, present: set[str] | None) -> dict[str, float]:
    """Marker features of normalised text; with ``present`` (``_read``), each family's split pieces run (see
    ``_integrity_search``); without, its joined patterns over the whole text (the reference they must match)."""
    features: dict[str, float] = {}
    lo, hi = len(norm), 0
    if present is None:
        spans = [None if (m := _joined(family).search(norm)) is None else m.span() for family, _ in _MARKERS]
    else:
        spans = _MARKER_SEARCH.search(norm, present)
    for (family, _), span in zip(_MARKERS, spans, strict=True):
        if span is not None:
            features[family] = 1.0
            lo, hi = min(lo, span[0]), max(hi, span[1])
    # The same families' phrases in other languages (``_integrity_languages``), for the families still unfired.
    if present is None or not present.isdisjoint(_integrity_languages.gate()):
        for family, span in _integrity_languages.search(norm, present, features.keys()).items():
            features[family] = 1.0
            lo, hi = min(lo, span[0]), max(hi, span[1])
    if tricks:
        features["hidden_chars"] = float(min(tricks, 3))
    if misspelt:
        features["misspelt"] = float(min(misspelt, 3))
    if features:
        # Only worth counting when something fired: it is evidence against a marker, not a signal alone.
        near = _without_addresses(
            norm[max(0, lo - _DISCUSSION_REACH) : hi + _DISCUSSION_REACH] if hi else norm[: 2 * _DISCUSSION_REACH]
        )
        if present is None:
            found = len(_DISCUSSION.findall(near))
        else:
            found = 0 if present.isdisjoint(_DISCUSSION_GATE) else _count_discussion(near, present)
        features["discussion"] = float(min(found, 3))
    return features


# A mailbox's name starts where its run of name characters does (the look-behind): one try per run, not per
# character of it.
_ADDRESS = re.compile(r"(?<![\w.+-])[\w.+-]+@[\w-]+(?:\.[\w-]+)+|\b(?:https?|ftp)://\S+|\bwww\.\S+")


def _without_addresses(near: str) -> str:
    """``near`` with its e-mail addresses and URLs blanked: "attacker@evil.example" names a mailbox, it is not a
    text talking about attackers. (``_ADDRESS.sub(" ", near)``, read only in the tokens that hold an address's mark.)"""
    if "@" not in near and "//" not in near and "www." not in near:
        return near
    # Every match holds "@", "://" or "www." and no white space, so it lies in the run of non-space characters around
    # one of those; a run has white space or an edge on each side, where ``_ADDRESS`` reads what it reads in the
    # whole text (no word or mailbox character before it, ``\b`` as at an edge), so each run is substituted alone.
    # ``_ADDRESS`` tried at every character of a long text costs some 100 ns a character.
    backwards = near[::-1]
    out: list[str] = []
    done = 0
    for mark in _ADDRESS_MARK.finditer(near):
        at = mark.start()
        if at < done:
            continue  # in the run just substituted
        start = len(near) - _non_space_end(backwards, len(near) - at)  # the run's start, read backwards
        end = _non_space_end(near, at)
        out.append(near[done:start])
        out.append(_ADDRESS.sub(" ", near[start:end]))
        done = end
    out.append(near[done:])
    return "".join(out)


_ADDRESS_MARK = re.compile(r"@|://|www\.")
_NON_SPACE = re.compile(r"\S+")


def _non_space_end(text: str, at: int) -> int:
    """Where the run of non-space characters starting at ``at`` ends (``at`` when ``text[at]`` is white space)."""
    run = _NON_SPACE.match(text, at)
    return at if run is None else run.end()


def _count_discussion(near: str, present: set[str]) -> int:
    """``min(3, len(_DISCUSSION.findall(near)))`` for a stretch ``near`` of a text whose tokens are ``present``
    (``words_present``): only the alternatives whose words the stretch holds are searched, led by their letters."""
    # The stretch's first and last tokens may be cut from longer ones of the text, and a match may begin or end there.
    first, last = _TOKEN.match(near), _TOKEN.match(near[::-1])
    edges = [m.group() for m in (first,) if m is not None] + [m.group()[::-1] for m in (last,) if m is not None]
    cut = words_present(edges)
    kept = tuple(
        i
        for i, needs in enumerate(_DISCUSSION_NEEDS)
        if all(not (need.isdisjoint(present) and need.isdisjoint(cut)) for need in needs)
    )
    if not kept:
        return 0
    rx = _discussion_of(kept) if _DISCUSSION_LETTER_LED else _DISCUSSION
    return sum(1 for _ in islice(rx.finditer(near), 3))


_TOKEN = re.compile(r"[a-z0-9']+")


@functools.lru_cache(maxsize=512)
def _discussion_of(kept: tuple[int, ...]) -> re.Pattern[str]:
    """``_DISCUSSION`` of only the alternatives ``kept`` (indices, in order), grouped by first letter with the
    ``\\b`` before it moved behind it as a look-behind (``p(?<!\\wp)(?:rompt injection|ayloads?)``): ``re`` then
    tries only the positions holding one of those letters, and finds the same matches, as alternatives of different
    first letters never match at one position and those of one letter keep their order."""
    groups: dict[str, list[str]] = {}
    for i in kept:
        alt = _DISCUSSION_ALTERNATIVES[i]
        groups.setdefault(alt[0], []).append(alt[1:])
    return re.compile("(?:" + "|".join(f"{c}(?<!\\w{c})(?:{'|'.join(r)})" for c, r in groups.items()) + ")\\b")


# --------------------------------------------------------------------------------------------------------------
# The learned model, scored in windows


_NUMPY_FROM = 192
"""Texts of at least this many tokens (as the model reads them) are scored with numpy when it can be imported (the
``fast`` extra; ``_integrity_numpy``): below, numpy's fixed cost per call is more than it saves."""


@functools.cache
def _numpy() -> ModuleType | None:
    """``_integrity_numpy``, or None without numpy (imported on first use: importing numpy takes some 100 ms)."""
    try:
        from stopwise.guardian.evaluators import _integrity_numpy
    except ImportError:
        return None
    return _integrity_numpy


_CACHED_WORDS = 1 << 16
"""Distinct words whose codes are kept (a few MB): tool output repeats its words (keys, markup, common words), and
a word's CRC costs more than looking it up. Words only, never a text or anything read from one but single words."""


def is_mark(token: str) -> bool:
    """True for a punctuation mark as ``tokens`` splits them (one character, neither a letter nor a digit): a token a
    model without ``marks`` does not read."""
    return len(token) == 1 and not token.isalnum()


class _WordTable(dict[str, int]):
    """word -> its row in four parallel lists: the CRC-32 of its UTF-8, the UTF-8 of " " + word (what an n-gram's
    CRC continues over), its unigram weight and whether it is a word (not ``is_mark``). A text's rows are looked
    up once; each list is then read with one ``itemgetter`` call (C, no hashing). Rows are only ever added (under
    a lock: threads may share a model) and a full table is replaced, never emptied, so rows a caller holds stay
    right."""

    def __init__(self, dense: list[float]) -> None:
        super().__init__()
        self.dense, self.mask = dense, len(dense) - 1
        self.crc: list[int] = []
        self.spaced: list[bytes] = []
        self.unigram: list[float] = []
        self.word: list[bool] = []
        self.columns: Any = None
        """numpy copies of these lists (``_integrity_numpy.Columns``), made when numpy first scores a text."""
        self.lock = threading.Lock()

    def numpy_columns(self, fast: ModuleType) -> Any:
        """``columns``, holding every row added so far."""
        with self.lock:
            if self.columns is None:
                self.columns = fast.Columns(self.dense)
            if self.columns.size < len(self.crc):
                self.columns.extend(self.crc, self.spaced, self.unigram)
            return self.columns

    def __missing__(self, word: str) -> int:
        with self.lock:
            if word in self:
                return dict.__getitem__(self, word)
            encoded = word.encode()
            code = zlib.crc32(encoded)
            self.crc.append(code)
            self.spaced.append(b" " + encoded)
            self.unigram.append(self.dense[code & self.mask])
            self.word.append(not is_mark(word))
            row = self[word] = len(self.crc) - 1
            return row


def _picker(rows: Sequence[int]) -> Callable[[Sequence[Any]], Sequence[Any]]:
    """``values -> [values[r] for r in rows]``, in one C call when there are several rows (``itemgetter`` of one
    is a bare value); one picker reads several parallel lists."""
    return itemgetter(*rows) if len(rows) > 1 else (lambda values: [values[r] for r in rows])


def _pick(values: Sequence[Any], rows: Sequence[int]) -> Sequence[Any]:
    """``[values[r] for r in rows]`` (see ``_picker``)."""
    return _picker(rows)(values)


@dataclass(frozen=True, slots=True)
class IntegrityModel:
    """Logistic regression over hashed word n-grams, applied to overlapping windows of a text; pure Python.

    A window is ``window`` consecutive tokens (``tokens``), windows start every ``stride`` tokens and the last one
    ends at the text's end; a text of at most ``window`` tokens is one window. A window's features are the
    1..``ngram``-grams lying wholly inside it, each hashed with CRC-32 into ``2**bits`` buckets and *counted*; its
    logit is ``bias + sum(weights[bucket] for each gram) / sqrt(number of grams)``. ``logit`` is the highest
    window's. ``window_grams`` is the reference the training script (``evals/train_integrity.py``) builds its
    matrix from; ``logit`` computes the same numbers with prefix sums, in time linear in the text.

    With a ``vocab``, a word outside it is read as its shape (``<n>`` when it starts with a digit, ``<w>``
    otherwise) before it is hashed: the model then sees how a text is phrased ("please <w> the <w> to") rather
    than what it is about, which is what carries from one kind of tool output to another.

    Without ``marks``, the model reads words only: punctuation marks (``is_mark``), each a token of ``tokens``, are
    left out before the windows are cut, so a window is ``window`` words and a JSON result has about half as many
    tokens to score.
    """

    version: str
    bits: int
    ngram: int
    bias: float
    weights: Mapping[int, float]
    window: int = 64
    stride: int = 32
    vocab: frozenset[str] | None = None
    marks: bool = True
    _tables: list[_WordTable] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # A dense table of every bucket's weight: indexing a list is about twice as fast as ``dict.get`` with a
        # default, and a result of 8,000 characters looks up a few thousand grams (2 MB for 18 bits).
        dense = [0.0] * (1 << self.bits)
        for bucket, weight in self.weights.items():
            if not 0 <= bucket < len(dense):
                raise ValueError(f"integrity model bucket {bucket} is outside 0..2**{self.bits}-1")
            dense[bucket] = weight
        object.__setattr__(self, "_tables", [_WordTable(dense)])

    def tokens_read(self, words: Sequence[str]) -> Sequence[str]:
        """The tokens the model reads of a text's ``tokens``: without punctuation marks unless ``marks``, then as
        ``shapes`` gives them. ``windows`` counts these."""
        if not self.marks:
            words = [w for w in words if not is_mark(w)]
        return self.shapes(words)

    def shapes(self, words: Sequence[str]) -> Sequence[str]:
        """``words`` as the model reads them: each word outside ``vocab`` replaced by its shape (see above)."""
        vocab = self.vocab
        if vocab is None:
            return words
        return [w if w in vocab else "<n>" if w[0].isdigit() else "<w>" for w in words]

    def grams(self, words: Sequence[str]) -> list[list[int]]:
        """Per n (1..``ngram``), the bucket of the n-gram ending at each token (index ``i`` is the gram ending at
        token ``i + n - 1`` of ``tokens_read(words)``)."""
        mask = (1 << self.bits) - 1
        table, rows = self._rows(words)
        pick = _picker(rows)
        # The CRC of an n-gram continues the CRC of its first n-1 words over " " + the last word: the same number
        # as hashing the joined text, without joining it.
        running = list(pick(table.crc))
        out = [list(map(mask.__and__, running))]
        if self.ngram > 1 and len(rows) > 1:
            spaced = pick(table.spaced)
            for n in range(2, self.ngram + 1):
                running = list(map(zlib.crc32, spaced[n - 1 :], running))  # (map stops at the shorter)
                out.append(list(map(mask.__and__, running)))
        return out

    def _rows(self, words: Sequence[str]) -> tuple[_WordTable, list[int]]:
        """The word table and the rows in it of the tokens the model reads of ``words`` (``tokens_read``; a fresh table
        when these words could fill it)."""
        table = self._tables[0]
        if len(table) + len(words) > _CACHED_WORDS:
            table = self._tables[0] = _WordTable(table.dense)
        if self.vocab is not None:
            return table, list(map(table.__getitem__, self.tokens_read(words)))
        rows = list(map(table.__getitem__, words))
        if not self.marks:
            # The table knows which rows are marks: one C pass drops them (what ``tokens_read`` does word by word).
            rows = list(compress(rows, _pick(table.word, rows)))
        return table, rows

    def windows(self, n_tokens: int) -> list[tuple[int, int]]:
        """The ``[start, end)`` token spans scored for a text of ``n_tokens`` tokens (as the model reads them)."""
        if n_tokens <= self.window:
            return [(0, n_tokens)]
        spans = [(s, s + self.window) for s in range(0, n_tokens - self.window + 1, self.stride)]
        if spans[-1][1] < n_tokens:
            spans.append((n_tokens - self.window, n_tokens))
        return spans

    def window_grams(self, grams: list[list[int]], start: int, end: int) -> list[int]:
        """The buckets of every gram inside tokens ``[start, end)``, one entry per occurrence."""
        out: list[int] = []
        for n, row in enumerate(grams, 1):
            out.extend(row[start : max(start, end - n + 1)])
        return out

    def window_logits(self, words: Sequence[str]) -> list[tuple[int, float]]:
        """``(start token, logit)`` of every window of a tokenised text (``tokens``), in the order of ``windows``
        (tokens counted as the model reads them, ``tokens_read``)."""
        return self._windows(words)[1]

    def _windows(self, words: Sequence[str]) -> tuple[int, list[tuple[int, float]]]:
        """How many tokens the model reads of ``words``, and ``window_logits``."""
        n, starts, logits = self._scores(words)
        return n, list(zip(starts, logits, strict=True))

    def _scores(self, words: Sequence[str]) -> tuple[int, Sequence[int], list[float]]:
        """How many tokens the model reads of ``words``, and the start and logit of each window (``window_logits``
        as two lists: no tuple per window, when only the highest is wanted)."""
        table, rows = self._rows(words)
        n = len(rows)
        if not n:
            return 0, [0], [self.bias]
        width, step = self.window, self.stride
        # The regular windows start every ``stride`` tokens; every one holds the same number of grams.
        starts: Sequence[int] = range(0, n - width + 1, step)
        fast = _numpy() if self.ngram == 2 and n >= _NUMPY_FROM and n > width else None
        if fast is not None:
            # The same floats, summed in the same order, from numpy's copies of the table (``_integrity_numpy``).
            columns = table.numpy_columns(fast)
            prefix: Sequence[Sequence[float]] = fast.prefix_sums(columns, rows, table.crc, table.spaced, table.mask)
            logits: list[float] = fast.scores(prefix, n, width, step, self.bias)
        else:
            prefix = self._prefix_sums(table, rows)
            if n <= width:
                return n, [0], [self._window_logit(prefix, 0, n)]
            totals = [0.0] * len(starts)
            for k, p in enumerate(prefix, 1):
                ends = p[width - k + 1 : n - k + 2 : step]
                totals = list(map(add, totals, map(sub, ends, p[: n - width + 1 : step])))
            scale = 1.0 / math.sqrt(sum(width - k + 1 for k in range(1, len(prefix) + 1)))
            # ``bias + total * scale`` per window, in C.
            logits = list(map(add, repeat(self.bias), map(mul, totals, repeat(scale))))
        if starts[-1] + width < n:  # the last window, ending at the text's end (``windows``)
            starts = [*starts, n - width]
            logits.append(float(self._window_logit(prefix, n - width, n)))
        return n, starts, logits

    def _prefix_sums(self, table: _WordTable, rows: list[int]) -> list[list[float]]:
        """Per n, the prefix sums of the weights of ``grams`` (a window's total is a difference of two of them per
        n), read from the word table's ``rows`` (``_rows``) without building the bucket lists of ``grams``."""
        pick = _picker(rows)
        out = [list(accumulate(pick(table.unigram), initial=0.0))]
        if self.ngram > 1 and len(rows) > 1:
            masks, dense = repeat(table.mask), table.dense
            running: Iterable[int] = pick(table.crc)
            spaced = pick(table.spaced)
            for n in range(2, self.ngram + 1):
                codes = map(zlib.crc32, spaced[n - 1 :], running)
                # The last n's codes are only masked: no list of them. ``map(and_, ..., repeat(mask))`` masks in C,
                # faster than a comprehension (or ``map(mask.__and__, ...)``); one ``itemgetter`` then reads the
                # buckets faster than indexing.
                running = list(codes) if n < self.ngram else codes
                buckets = map(and_, running, masks)
                # ``itemgetter`` of several buckets takes them from the map itself (no list of them first).
                weights = itemgetter(*buckets)(dense) if len(rows) - n > 0 else [dense[b] for b in buckets]
                out.append(list(accumulate(weights, initial=0.0)))
        return out

    def _window_logit(self, prefix: Sequence[Sequence[float]], start: int, end: int) -> float:
        total, count = 0.0, 0
        for k, p in enumerate(prefix, 1):
            stop = max(start, end - k + 1)
            total += p[stop] - p[start]
            count += stop - start
        return self.bias + total / math.sqrt(count) if count else self.bias

    def logit(self, words: Sequence[str]) -> float:
        """The highest window logit of a tokenised, normalised text."""
        return max(z for _, z in self.window_logits(words))

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> IntegrityModel:
        version = data.get("version")
        if not isinstance(version, str) or not version:
            raise ConfigError("integrity_model.version", "must be a non-empty string")
        bits, ngram = data.get("bits"), data.get("ngram")
        if not isinstance(bits, int) or not 8 <= bits <= 24 or not isinstance(ngram, int) or not 1 <= ngram <= 3:
            raise ConfigError("integrity_model", f"needs bits in 8..24 and ngram in 1..3, got {bits!r}, {ngram!r}")
        window, stride = data.get("window", 64), data.get("stride", 32)
        if not isinstance(window, int) or not isinstance(stride, int) or not 1 <= stride <= window:
            raise ConfigError("integrity_model", f"needs 1 <= stride <= window, got {stride!r}, {window!r}")
        raw = data.get("weights")
        if not isinstance(raw, Mapping):
            raise ConfigError("integrity_model.weights", "must be an object of bucket -> weight")
        weights = {int(k): _number(f"integrity_model.weights.{k}", v) for k, v in raw.items()}
        if any(not 0 <= k < 1 << bits for k in weights):
            raise ConfigError("integrity_model.weights", f"has a bucket outside 0..2**{bits}-1")
        bias = _number("integrity_model.bias", data.get("bias"))
        vocab = data.get("vocab")
        if vocab is not None and (not isinstance(vocab, list) or not all(isinstance(w, str) and w for w in vocab)):
            raise ConfigError("integrity_model.vocab", "must be a list of non-empty words when given")
        marks = data.get("marks", True)
        if not isinstance(marks, bool):
            raise ConfigError("integrity_model.marks", f"must be true or false when given, got {marks!r}")
        vocabulary = None if vocab is None else frozenset(vocab)
        return cls(version, bits, ngram, bias, weights, window, stride, vocabulary, marks)


def _number(where: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ConfigError(where, f"must be a finite number, got {value!r}")
    return float(value)


CONTRAST_LEVEL = 0.0
"""``model_share_above`` counts the windows whose logit is above this level (the model's own even odds)."""

CONTRAST_FEATURES = ("model_over_median", "model_over_next", "model_share_above")
"""The names ``window_contrast`` returns."""


def window_contrast(windows: Sequence[tuple[int, float]], width: int) -> dict[str, float]:
    """How far a text's highest window logit stands above the text's own other windows, from its ``(start token,
    logit)`` windows of ``width`` tokens (``IntegrityModel.window_logits``): ``model_over_median`` (highest minus
    the median window), ``model_over_next`` (highest minus the highest window sharing no token with it; 0 when
    every window overlaps it) and ``model_share_above`` (the share of windows above ``CONTRAST_LEVEL``). A text
    unfamiliar everywhere has a high top and a high median; one planted instruction stands out of its carrier.
    A text of one window has nothing to compare its window with: every feature is 0, so a combination that weighs
    them treats a short text by its top window alone."""
    if len(windows) < 2:
        return dict.fromkeys(CONTRAST_FEATURES, 0.0)
    start, top = max(windows, key=lambda w: w[1])
    ranked = sorted(z for _, z in windows)
    n = len(ranked)
    median = ranked[n // 2] if n % 2 else (ranked[n // 2 - 1] + ranked[n // 2]) / 2
    apart = [z for s, z in windows if abs(s - start) >= width]
    return {
        "model_over_median": top - median,
        "model_over_next": top - max(apart) if apart else 0.0,
        "model_share_above": sum(z > CONTRAST_LEVEL for z in ranked) / n,
    }


# --------------------------------------------------------------------------------------------------------------
# One text


@dataclass(frozen=True, slots=True)
class TextScore:
    """The integrity features of one text and where its most suspicious window starts."""

    features: Mapping[str, float]
    """Marker families, ``hidden_chars``, ``misspelt``, ``discussion``, ``model_logit`` and, when asked for, its
    contrast with the text's other windows (``window_contrast``); or only ``trivial``."""
    window_char: int
    """Roughly where (a character offset into the text read) the highest-scoring window starts."""


def score_text(text: str, model: IntegrityModel, read_chars: int = 8000, *, contrast: bool = False) -> TextScore:
    """The features of the first ``read_chars`` characters of ``text`` (see the module docstring); with
    ``contrast``, also ``window_contrast``'s (the shipped combination gives them no weight, so by default they
    are not computed)."""
    if is_trivial(text):
        return TextScore({"trivial": 1.0}, 0)
    norm, tricks = normalise_untrusted(text, read_chars)
    read = _read(norm)
    features = _markers_of(read.norm, tricks, read.misspelt, read.present)
    n, starts, logits = model._scores(read.words)
    # The first of the highest windows, as ``max(windows, key=...)`` picks it.
    z = max(logits)
    start = starts[logits.index(z)]
    features["model_logit"] = z
    if contrast:
        features.update(window_contrast(list(zip(starts, logits, strict=True)), model.window))
    # Tokens average a few characters; the offset only has to say "near the start" or "far in".
    return TextScore(features, round(start * len(read.norm) / max(n, 1)))
