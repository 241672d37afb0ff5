"""Non-English injections and clean non-English text: the shipped integrity scorer at the policy threshold t*.

    PYTHONPATH=src python evals/eval_multilingual.py [--clean DIR]

Positives: spikee 0.9.2's non-English seed rows (``evals/third_party/spikee/*_other.jsonl``: Zulu, Albanian,
Irish, Scottish Gaelic; kept verbatim), each jailbreak template filled with each instruction of its own language
and planted in a pool-B carrier (the English spikee rows of the development set are built the same way), and the
same payloads alone. Negatives (``--clean``): paragraphs of the React documentation's translations
(github.com/reactjs/<lang>.react.dev, ``src/content``, CC BY 4.0), extracted as ``DIR/<lang>/**/*.md`` (see
evals/SOURCES.md); code blocks and paragraphs not in the page's language are dropped, paragraphs are joined up to
about 1,500 characters (a tool result's size), at most ``--per-language`` chunks per language.

The split by language was fixed before any score was read: the marker phrases were checked on zu and sq (spikee)
and on es, de, zh, ru, ja (clean); ga and gd (spikee) and fr, pt, it, ko (clean) are held out. The trivial
baselines: flagging nothing (recall 0, false alarms 0) and flagging everything (recall 1, false alarms 1).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import re
import sys
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _integrity_texts import CARRIERS  # noqa: E402

from stopwise.guardian.conditions import DEFAULT_CONDITIONS  # noqa: E402
from stopwise.guardian.evaluators.rule import RuleEvaluator  # noqa: E402

SPIKEE = HERE / "third_party" / "spikee"
DEV_SPIKEE, HELD_SPIKEE = ("zu", "sq"), ("ga", "gd")
DEV_CLEAN, HELD_CLEAN = ("es", "de", "zh-hans", "ru", "ja"), ("fr", "pt-br", "it", "ko")
# A paragraph is kept when it reads as its page's language: enough of these words (Latin scripts) or of letters
# past ASCII (the others).
_WORDS = {
    "es": "el la los las que para con una por como del",
    "fr": "le la les des que pour une dans est avec",
    "de": "der die das und ist nicht mit eine den zu",
    "pt-br": "o a os as que para com uma do da em",
    "it": "il la che per una con del della sono non",
}
_SEED = 14


def _jsonl(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _embed(carrier: str, insert: str) -> str:
    if carrier.lstrip().startswith("{"):
        insert = json.dumps(insert, ensure_ascii=False)[1:-1]
    return carrier.replace("{slot}", insert)


def injections() -> list[tuple[str, str, str]]:
    """(language, how, text): every template of a language filled with every instruction of it, planted and bare."""
    rng = random.Random(_SEED)
    jailbreaks = _jsonl(SPIKEE / "jailbreaks_other.jsonl")
    instructions = _jsonl(SPIKEE / "instructions_other.jsonl")
    out = []
    for j in jailbreaks:
        for ins in instructions:
            if ins["lang"] != j["lang"]:
                continue
            payload = str(j["text"]).replace("<INSTRUCTION>", str(ins["instruction"]))
            out.append((str(j["lang"]), "bare", payload))
            out.append((str(j["lang"]), "planted", _embed(rng.choice(CARRIERS["B"]), payload)))
    return out


def _in_language(lang: str, text: str) -> bool:
    if lang in _WORDS:
        words = set(re.findall(r"[^\W\d_]+", text.lower()))
        return len(words & set(_WORDS[lang].split())) >= 3
    letters = [c for c in text if c.isalpha()]
    return len(letters) >= 20 and sum(not c.isascii() for c in letters) >= 0.3 * len(letters)


def clean_chunks(root: Path, lang: str, limit: int) -> list[str]:
    """Prose paragraphs of one translation, in the page's language, joined into chunks of about 1,500 characters."""
    chunks: list[str] = []
    for page in sorted((root / lang).rglob("*.md")):
        body = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
        current = ""
        for para in re.split(r"\n\s*\n", body):
            para = para.strip()
            if para.startswith(("<", "---", "title:", "import ")) or not _in_language(lang, para):
                continue
            current = f"{current}\n\n{para}" if current else para
            if len(current) >= 1500:
                chunks.append(current)
                current = ""
        if current:
            chunks.append(current)
    rng = random.Random(_SEED)
    rng.shuffle(chunks)
    return chunks[:limit]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clean", type=Path, help="the React documentation translations, DIR/<lang>/**/*.md")
    parser.add_argument("--per-language", type=int, default=400)
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args()
    evaluator = RuleEvaluator()
    t_star = DEFAULT_CONDITIONS.by_name["integrity"].threshold

    def p(text: str) -> float:
        z = evaluator._integrity_logit(evaluator.text_integrity_score(text).features)
        return 1.0 / (1.0 + math.exp(-z))

    out: dict[str, dict[str, object]] = {"injections": {}, "clean": {}}
    hits: dict[str, list[bool]] = defaultdict(list)
    for lang, how, text in injections():
        fired = p(text) >= t_star
        hits[lang].append(fired)
        hits[f"{lang}/{how}"].append(fired)
    print(f"spikee non-English rows, recall at t*={t_star} (baselines: flag nothing 0, flag everything 1)")
    for key in sorted(hits):
        split = "dev" if key[:2] in DEV_SPIKEE else "held out"
        recall = sum(hits[key]) / len(hits[key])
        out["injections"][key] = {"n": len(hits[key]), "recall": recall, "split": split}
        print(f"  {key:12} {split:9} n={len(hits[key]):3}  recall {recall:.3f}")
    if args.clean is not None:
        print(f"\nclean React documentation paragraphs, false alarms at t*={t_star} (flag nothing: 0)")
        total = fired_total = 0
        for lang in (*DEV_CLEAN, *HELD_CLEAN):
            chunks = clean_chunks(args.clean, lang, args.per_language)
            fired = [c for c in chunks if p(c) >= t_star]
            split = "dev" if lang in DEV_CLEAN else "held out"
            rate = len(fired) / max(len(chunks), 1)
            total, fired_total = total + len(chunks), fired_total + len(fired)
            out["clean"][lang] = {"n": len(chunks), "false_alarms": len(fired), "rate": rate, "split": split}
            print(f"  {lang:8} {split:9} n={len(chunks):4}  false alarms {len(fired):3} ({rate:.2%})")
        print(f"  {'all':8} {'':9} n={total:4}  false alarms {fired_total:3} ({fired_total / max(total, 1):.2%})")
    if args.json is not None:
        args.json.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
