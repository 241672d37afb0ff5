"""Cache stackone-defender's score of the integrity corpus's records (slow: about 0.4 s per text on one core).

    python evals/score_defender.py            # the train subsample, then the whole test split (resumes)

Writes ``evals/calibration/defender_scores.jsonl``: a header line naming the library and its version and how
texts were read, then one line per record: the SHA-256 of its text (first 16 hex digits), its split, the
library's Tier 2 probability and Tier 1 risk level as ``stopwise.guardian.evaluators.defender`` reads them, and
the wall milliseconds the library took (one core). Scores only, never the texts. Records already in the file
are skipped, so an interrupted run continues where it stopped; a file written by another library version, model
files (their digest, ``model_digest``) or reading is refused.

Which records: every record of the ``test`` split (the held-out corpora, for ``evals/eval_defender.py``), and of
the ``train`` split (without the second version's train-only corpora, like the shipped light model) every
injected record and a fixed random sample of clean ones (``TRAIN_CLEAN``, seed 14), for fitting the combination
in ``evals/train_defender.py``.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _integrity_data import Item, load_items
from train_integrity import SECOND_CORPORA

from stopwise.guardian.evaluators.defender import DefenderIntegrity, score_with_library

CACHE = Path(__file__).resolve().parent / "calibration" / "defender_scores.jsonl"
READ_CHARS = 8000
TRAIN_CLEAN = 350
SEED = 14


def text_key(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def train_sample() -> list[Item]:
    items = [i for i in load_items("train") if i.corpus not in SECOND_CORPORA]
    clean = [i for i in items if not i.label]
    return [i for i in items if i.label] + random.Random(SEED).sample(clean, TRAIN_CLEAN)


def header(version: str, model: str) -> dict[str, object]:
    # ``model``: the digest of the library's model files (``model_digest``): a model replaced under the same
    # version would otherwise be read from this cache as the old one's scores.
    return {
        "library": "stackone-defender",
        "version": version,
        "model": model,
        "read_chars": READ_CHARS,
        "tool_name": "tool_result",
    }


def load_cache() -> tuple[dict[str, object] | None, dict[str, dict[str, object]]]:
    if not CACHE.exists():
        return None, {}
    lines = CACHE.read_text(encoding="utf-8").splitlines()
    head = json.loads(lines[0])
    rows = (json.loads(line) for line in lines[1:] if line.strip())
    return head, {str(r["key"]): r for r in rows}


def main() -> None:
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    backend = DefenderIntegrity()
    want = header(backend.library_version, backend.model_digest)
    head, done = load_cache()
    if head is not None and head != want:
        sys.exit(f"{CACHE} was written with {head}, not {want}: move it away to rescore")
    if head is None:
        CACHE.write_text(json.dumps(want) + "\n", encoding="utf-8")
    todo = [(i, "train") for i in train_sample()] + [(i, "test") for i in load_items("test")]
    started = time.perf_counter()
    scored = 0
    with CACHE.open("a", encoding="utf-8") as out:
        for item, split in todo:
            key = text_key(item.text)
            if key in done:
                continue
            t0 = time.perf_counter()
            s = score_with_library(backend.defense, item.text, READ_CHARS)
            ms = (time.perf_counter() - t0) * 1000.0
            row = {"key": key, "split": split, "score": round(s.score, 6), "risk": s.risk, "ms": round(ms, 1)}
            done[key] = row
            out.write(json.dumps(row) + "\n")
            out.flush()
            scored += 1
            if scored % 100 == 0:
                print(f"{scored} scored, {time.perf_counter() - started:.0f} s", flush=True)
    print(f"done: {scored} scored in {time.perf_counter() - started:.0f} s; {len(done)} in {CACHE}")


if __name__ == "__main__":
    main()
