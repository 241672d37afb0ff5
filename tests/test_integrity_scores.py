"""The integrity scorer's speed work changes no output: every real tool result's probability, model logit and
window offset equal, bit for bit, what the scorer gave before it.

``tests/data/integrity_scores.txt`` holds a digest of, per distinct tool result of ``evals/data/devset.jsonl`` and
``evals/data/integrity.jsonl`` (``test_integrity_reference.tool_results``), the exact probability of the shipped
``integrity`` map, the exact ``model_logit`` (both as ``float.hex``) and the ``window_char`` of ``score_text``
with the shipped model and read length. It was written on 2026-12-02 by main at e083e64 (before the ``intspeed``
round) with ``PYTHONPATH=<that tree>/src python tests/test_integrity_scores.py --write``. It depends on the shipped
model and the integrity map's coefficients: regenerate it only when they or a feature's definition change on
purpose, and say so in the commit.
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import pytest

from stopwise.guardian.evaluators import _integrity
from stopwise.guardian.evaluators._integrity import score_text
from stopwise.guardian.evaluators.rule import load_coefficients, load_integrity_model
from test_integrity_reference import DATA, _key, tool_results

SCORES = Path(__file__).resolve().parent / "data" / "integrity_scores.txt"
"""First line ``read_chars N model VERSION``, then per text: its key and the digest of its probability, model logit
(``float.hex``) and window offset."""


def _scores(texts: list[str]) -> dict[str, str]:
    model, coefficients = load_integrity_model(), load_coefficients()
    out = {}
    for text in texts:
        scored = score_text(text, model, coefficients.scan_chars)
        p = coefficients.integrity.p(scored.features)
        logit = scored.features.get("model_logit")
        exact = f"{p.hex()} {'-' if logit is None else logit.hex()} {scored.window_char}"
        out[_key(text)] = hashlib.sha256(exact.encode()).hexdigest()[:10]
    return out


def _header() -> str:
    return f"read_chars {load_coefficients().scan_chars} model {load_integrity_model().version}"


@pytest.mark.slow
@pytest.mark.parametrize("path", ["as installed", "pure Python"])
def test_every_real_tool_results_integrity_probability_logit_and_window_are_bit_for_bit_the_recorded_ones(
    path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if path == "pure Python":
        monkeypatch.setattr(_integrity, "_numpy", lambda: None)  # the model's windows without numpy (``fast``)
    if not (DATA / "devset.jsonl").exists() or not (DATA / "integrity.jsonl").exists():
        pytest.skip("evals/data is not built (python evals/build_devset.py; python evals/build_integrity.py)")
    first, *lines = SCORES.read_text(encoding="utf-8").splitlines()
    assert first == _header(), "the shipped model or read length changed: regenerate the scores on purpose"
    expected = dict(line.split() for line in lines)
    texts = tool_results()
    got = _scores(texts)
    common = expected.keys() & got.keys()
    # The corpus may be rebuilt; most of its texts stay, and every one that stayed must agree exactly.
    assert len(common) >= 0.8 * len(expected), (len(common), len(expected))
    different = sorted(key for key in common if got[key] != expected[key])
    assert different == [], f"{len(different)} of {len(common)} texts differ, e.g. {different[:5]}"


if __name__ == "__main__" and sys.argv[1:] == ["--write"]:
    scores = _scores(tool_results())
    SCORES.write_text(f"{_header()}\n" + "".join(f"{k} {v}\n" for k, v in sorted(scores.items())), encoding="utf-8")
    print(f"wrote {len(scores)} scores to {SCORES}")
