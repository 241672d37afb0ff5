"""The integrity model scored with numpy (the ``fast`` extra) gives exactly the pure-Python path's windows."""

from __future__ import annotations

import random
import sys
from types import ModuleType

import pytest

from stopwise.guardian import evaluators
from stopwise.guardian.evaluators import _integrity
from stopwise.guardian.evaluators._integrity import IntegrityModel
from stopwise.guardian.evaluators.rule import load_integrity_model


def _numpy_module() -> ModuleType:
    pytest.importorskip("numpy")
    from stopwise.guardian.evaluators import _integrity_numpy

    return _integrity_numpy


# Words of every length around the shift tables' longest (``LONGEST`` bytes with the space), several bytes a
# character past ASCII, punctuation marks, digits.
_WORDS = ["the", "a", "ignore", "é", "日本", "0", ".", "{", '"', "😀", "x" * 46, "y" * 47, "z" * 48, "w" * 200]


def _pure(
    model: IntegrityModel, words: list[str], monkeypatch: pytest.MonkeyPatch
) -> tuple[int, list[int], list[float]]:
    with monkeypatch.context() as patch:
        patch.setattr(_integrity, "_numpy", lambda: None)
        n, starts, logits = model._scores(words)
    return n, list(starts), logits


@pytest.mark.parametrize("seed", range(4))
def test_numpy_window_logits_equal_the_pure_python_ones_bit_for_bit(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    _numpy_module()
    rng = random.Random(seed)
    shipped = load_integrity_model()
    # A model whose every bucket weighs something (the shipped one leaves most at 0), window and stride as shipped.
    weights = {b: rng.uniform(-3, 3) for b in range(1 << 12)}
    dense = IntegrityModel("dense", 12, 2, -0.5, weights, shipped.window, shipped.stride)
    pool = _WORDS + [f"w{i}" for i in range(300)]
    used = 0
    for model in (shipped, dense):
        for length in (_integrity._NUMPY_FROM, _integrity._NUMPY_FROM + 5, 1000, 2999):
            words = [rng.choice(pool) for _ in range(length)]
            expected = _pure(model, words, monkeypatch)
            n, starts, logits = model._scores(words)
            used += n >= _integrity._NUMPY_FROM
            assert (n, list(starts), logits) == expected
    assert used == 8 and _integrity._numpy() is _numpy_module()


def test_a_bigram_whose_second_word_is_past_the_shift_tables_is_hashed_by_zlib(monkeypatch: pytest.MonkeyPatch) -> None:
    model = IntegrityModel("long", 10, 2, 0.0, {b: float(b % 7) - 3 for b in range(1 << 10)}, 16, 8)
    longest = _numpy_module().LONGEST
    words = ["a", "b" * (longest + 3), "c" * longest] * 100
    n, starts, logits = model._scores(words)
    assert (n, list(starts), logits) == _pure(model, words, monkeypatch)
    assert len(set(logits)) > 1  # the windows differ: the long words' bigrams are weighed, not skipped


def test_without_numpy_a_long_text_is_scored_by_the_pure_python_path(monkeypatch: pytest.MonkeyPatch) -> None:
    model = load_integrity_model()
    words = ["the", "bill", "total", ":", "12"] * 100
    _integrity._numpy.cache_clear()
    try:
        monkeypatch.setitem(sys.modules, "numpy", None)  # as if it were not installed, nor imported before
        monkeypatch.delitem(sys.modules, "stopwise.guardian.evaluators._integrity_numpy", raising=False)
        monkeypatch.delattr(evaluators, "_integrity_numpy", raising=False)
        assert _integrity._numpy() is None
        n, starts, logits = model._scores(words)
    finally:
        _integrity._numpy.cache_clear()
    assert n == 500 and len(logits) == len(starts) == len(model.windows(500))
