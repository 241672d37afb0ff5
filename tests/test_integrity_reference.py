"""Integrity's fast paths give exactly the features of the reference implementation on every real tool result.

Two checks, both over every tool result of ``evals/data/devset.jsonl`` and ``evals/data/integrity.jsonl``:

- the markers, ``hidden_chars``, ``misspelt``, ``discussion``, ``trivial``, the tokens the model reads and the
  shared normaliser's output (``stopwise.normalise.normalise_untrusted``) must hash to the digest stored in
  ``tests/data/integrity_reference.txt``, written by the implementation of 2026-12-01 (main at 1e6deb8, before the
  speed work) with ``PYTHONPATH=<that tree>/src python tests/test_integrity_reference.py --write``; on 2026-12-02
  (evasion2, on main after markers2) the digests of the 414 texts whose features the decoding of encodings, the
  other-language phrases, the cognates and fullwidth punctuation change on purpose were replaced, the other 5,671
  kept; on 2026-12-02 (preempt) the digests of the 9 texts whose markers the task-preemption, agent-obligation,
  hidden-comment and agent-configuration patterns change on purpose were replaced, the others kept. None of these
  depends on the model's weights, so retraining the model leaves the digest true;
- the model's logit and the start of its highest window must equal (within 1e-12) a plain re-computation in this
  file: every window's n-grams joined, hashed and looked up one by one, with whatever weights are shipped.

Regenerate the digest only when a feature's definition changes on purpose, and say so in the commit.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import sys
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from stopwise.guardian.evaluators._integrity import IntegrityModel, _read, is_trivial, normalise_untrusted, score_text
from stopwise.guardian.evaluators.rule import load_coefficients, load_integrity_model

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "evals" / "data"
DIGEST = Path(__file__).resolve().parent / "data" / "integrity_reference.txt"
"""First line ``read_chars N``, then one line per text: its key (``_key``) and the digest of its features."""


def tool_results() -> list[str]:
    """Every distinct tool result of the development set and the integrity corpus, in a fixed order."""
    seen: dict[str, None] = {}
    for name in ("devset.jsonl", "integrity.jsonl"):
        for line in (DATA / name).open(encoding="utf-8"):
            record = json.loads(line)
            if isinstance(record.get("tool_output"), str):
                seen.setdefault(record["tool_output"])
            for step in record["projection"]["steps"]:
                for call in step["calls"]:
                    if isinstance(call.get("result"), str):
                        seen.setdefault(call["result"])
    return list(seen)


def _key(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:10]


def _rule_part(text: str, read_chars: int) -> str:
    """A hash of everything ``score_text`` derives from a text without the model: features, tokens, and the
    normalised text with its count of tricks (``hidden_chars`` caps it at 3)."""
    features = dict(score_text(text, _NO_MODEL, read_chars).features)
    features.pop("model_logit", None)
    normalised = normalise_untrusted(text, read_chars)
    words = [] if is_trivial(text) else _read(normalised[0]).words
    blob = json.dumps([sorted(features.items()), words, normalised], ensure_ascii=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:8]


_NO_MODEL = IntegrityModel("none", 8, 1, 0.0, {})


def _digests(texts: list[str], read_chars: int) -> Iterator[tuple[str, str]]:
    for text in texts:
        yield _key(text), _rule_part(text, read_chars)


def _plain_windows(model: IntegrityModel, words: list[str]) -> list[tuple[int, float]]:
    """``(start token, logit)`` of every window, the slow and obvious way."""
    mask, shaped = (1 << model.bits) - 1, list(model.tokens_read(words))
    grams = [
        [
            model.weights.get(zlib.crc32(" ".join(shaped[i : i + n]).encode()) & mask, 0.0)
            for i in range(len(shaped) - n + 1)
        ]
        for n in range(1, model.ngram + 1)
    ]
    out = []
    for start, end in model.windows(len(shaped)) if shaped else [(0, 0)]:
        weights = [w for n, row in enumerate(grams, 1) for w in row[start : max(start, end - n + 1)]]
        out.append((start, model.bias + math.fsum(weights) / math.sqrt(len(weights)) if weights else model.bias))
    return out


@pytest.fixture(scope="module")
def texts() -> list[str]:
    if not (DATA / "devset.jsonl").exists() or not (DATA / "integrity.jsonl").exists():
        pytest.skip("evals/data is not built (python evals/build_devset.py; python evals/build_integrity.py)")
    return tool_results()


@pytest.mark.slow
def test_integrity_rule_features_and_tokens_match_the_reference_digest_on_every_real_tool_result(
    texts: list[str],
) -> None:
    first, *lines = DIGEST.read_text(encoding="utf-8").splitlines()
    expected = dict(line.split() for line in lines)
    checked = 0
    different = []
    for key, digest in _digests(texts, int(first.split()[1])):
        if key in expected:
            checked += 1
            if expected[key] != digest:
                different.append(key)
    # The corpus may be rebuilt; most of its texts stay, and every one that stayed must agree.
    assert checked >= 0.8 * len(expected), (checked, len(expected))
    assert different == [], f"{len(different)} of {checked} texts differ, e.g. {different[:5]}"


@pytest.mark.slow
def test_integrity_model_logit_and_window_equal_a_plain_recomputation_on_every_real_tool_result(
    texts: list[str],
) -> None:
    model, read_chars = load_integrity_model(), load_coefficients().scan_chars
    for text in texts:
        if is_trivial(text):
            continue
        scored = score_text(text, model, read_chars)
        read = _read(normalise_untrusted(text, read_chars)[0])
        windows = _plain_windows(model, read.words)
        z = max(logit for _, logit in windows)
        assert abs(scored.features["model_logit"] - z) < 1e-12, text[:200]
        # Windows of repeated text tie up to rounding: the highest is any of those.
        chars, n = len(read.norm), max(len(model.tokens_read(read.words)), 1)
        highest = {round(start * chars / n) for start, logit in windows if logit > z - 1e-12}
        assert scored.window_char in highest, text[:200]


if __name__ == "__main__" and sys.argv[1:] == ["--write"]:
    chars = load_coefficients().scan_chars
    DIGEST.parent.mkdir(exist_ok=True)
    digests = dict(_digests(tool_results(), chars))
    DIGEST.write_text(f"read_chars {chars}\n" + "".join(f"{k} {v}\n" for k, v in sorted(digests.items())))
    print(f"wrote {len(digests)} digests to {DIGEST}")


def test_the_leetspeak_pattern_matches_what_its_two_look_ahead_form_matched_on_random_words() -> None:
    """``normalise._LEET_WORD`` was rewritten for speed (one look-ahead chosen by the first character)."""
    import random
    import re

    from stopwise.normalise import _LEET_WORD

    before = re.compile(r"(?<![\w@$|])(?=[a-z@$!|0-9]*[a-z])(?=[a-z]*[0-9@$!|])[a-z0-9@$!|]{3,}(?![\w@$|])")
    rng = random.Random(3)
    alphabet = "abeilost0134579@$!|_ .-'é"
    for _ in range(20000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 16)))
        assert [m.span() for m in _LEET_WORD.finditer(text)] == [m.span() for m in before.finditer(text)], text


def test_spacing_and_leetspeak_folds_rewrite_only_hinted_lines_exactly_as_a_whole_text_pass_would() -> None:
    """``_fold_spacing`` and ``_fold_leet`` run their pattern only on lines holding a hint; on random multi-line
    texts of letters, signs, digits and separators the result and the count equal one pass over the whole text."""
    import random

    from stopwise import normalise

    def spaced(token: str) -> str | None:
        return normalise._unspace(token)

    def leet(token: str) -> str | None:
        return None if sum(c.isalpha() for c in token) * 2 < len(token) else normalise._unleet(token)

    def whole(rx: re.Pattern[str], word_of: Callable[[str], str | None], text: str) -> tuple[str, int]:
        count = 0

        def one(m: re.Match[str]) -> str:
            nonlocal count
            word = word_of(m.group())
            count += word is not None
            return m.group() if word is None else word

        return rx.sub(one, text), count

    rng = random.Random(5)
    alphabet = ["i", "g", "n", "o", "r", "e", "a", "l", "1", "3", "0", "@", "$", "|", "!", " ", " ", "\n", ".", "-"]
    alphabet += ["i g n o r e", "1gn0r3", "pr3v10us", "@ll", "a l l", "r.u.l.e.s", "5y5t3m", "s e n d  a l l"]
    folds = ((normalise._fold_spacing, normalise._SPACED, spaced), (normalise._fold_leet, normalise._LEET_WORD, leet))
    hits = 0
    for fold, rx, word_of in folds:
        for k in range(4000):
            # Every tenth text long enough to hold more hinted stretches than are rewritten one by one.
            text = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 40) if k % 10 else 400))
            expected = whole(rx, word_of, text)
            assert fold(text) == expected, text
            hits += expected[1]
    assert hits > 500  # the texts do hold spaced and leetspeak words


@pytest.mark.parametrize("marks", [True, False])
@pytest.mark.parametrize("ngram", [1, 2, 3])
def test_window_logits_equal_the_plain_recomputation_for_every_order_and_length(ngram: int, marks: bool) -> None:
    """Texts of 0 to 80 tokens (fewer than a window, one window, several, a last short one) under models of every
    n-gram order with a weight in every bucket, reading punctuation marks or not."""
    import random

    rng = random.Random(ngram)
    weights = {bucket: rng.uniform(-2, 2) for bucket in range(1 << 8)}
    model = IntegrityModel("t", 8, ngram, -0.5, weights, window=8, stride=3, marks=marks)
    vocabulary = ["ignore", "the", "{", '"', "é", "previous", "7", "rules", "x"]
    for n in [0, 1, 2, 3, 7, 8, 9, 10, 11, 30, 80]:
        words = [rng.choice(vocabulary) for _ in range(n)]
        fast = model.window_logits(words)
        plain = _plain_windows(model, words)
        assert [s for s, _ in fast] == [s for s, _ in plain]
        assert all(abs(a - b) < 1e-12 for (_, a), (_, b) in zip(fast, plain, strict=True)), (n, fast, plain)


def test_window_logits_stay_right_when_the_word_table_fills_and_is_replaced(monkeypatch: pytest.MonkeyPatch) -> None:
    """The per-word table is bounded: a text whose words could overflow it gets a fresh table, and earlier rows
    are never reused for other words."""
    import random

    from stopwise.guardian.evaluators import _integrity

    monkeypatch.setattr(_integrity, "_CACHED_WORDS", 40)
    rng = random.Random(11)
    model = IntegrityModel("t", 8, 2, 0.25, {b: rng.uniform(-1, 1) for b in range(256)}, window=6, stride=2)
    replaced, table = 0, model._tables[0]
    for _ in range(60):
        words = [f"w{rng.randrange(200)}" for _ in range(rng.randint(1, 30))]
        fast = model.window_logits(words)
        plain = _plain_windows(model, words)
        assert all(abs(a - b) < 1e-12 for (_, a), (_, b) in zip(fast, plain, strict=True))
        replaced += model._tables[0] is not table
        table = model._tables[0]
        assert len(table) <= 40
    assert replaced > 5
