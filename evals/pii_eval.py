"""The personal-data section of ``evals/guardrail_builtins.py``: detection on ``pii_samples()``, false positives on
``lookalikes()`` and on the ordinary-text corpus, beside the detector the built-ins had before (Luhn alone for
cards, dashed SSNs only) and the trivial baseline (flag nothing)."""

from __future__ import annotations

import re
from collections import Counter, defaultdict

from ordinary_text import ordinary_lines
from pii_samples import PiiSample, lookalikes, pii_samples

from stopwise.guardrails._pii import PiiKind, _luhn, find_pii, require_phonenumbers

__all__ = ["pii_section"]

_OLD_SSN = re.compile(r"\b(?!000|666|9\d\d)\d{3}-(?!00)\d{2}-(?!0000)\d{4}\b")
_OLD_CARD = re.compile(r"\b(?:\d[ -]?){12,18}\d\b")


def _old_flags(text: str) -> bool:
    """The detector ``block_pii`` had before: Luhn alone on 13-19 digits (space or dash), dashed SSNs."""
    if _OLD_SSN.search(text):
        return True
    for m in _OLD_CARD.finditer(text):
        digits = re.sub(r"[ -]", "", m.group())
        if 13 <= len(digits) <= 19 and _luhn(digits):
            return True
    return False


def pii_section(per_kind: int) -> None:
    try:
        phonenumbers = require_phonenumbers("evals")
        kinds = frozenset(PiiKind)
    except Exception:
        phonenumbers, kinds = None, frozenset(PiiKind) - {PiiKind.PHONE}

    def flags(text: str) -> bool:
        return bool(find_pii(text, kinds, phonenumbers=phonenumbers))

    def covered(sample: PiiSample) -> bool:
        found = find_pii(sample.text, kinds, phonenumbers=phonenumbers)
        start = sample.text.index(sample.value)
        return any(f.start <= start and f.end >= start + len(sample.value) for f in found)

    samples = pii_samples()
    by_kind: dict[str, list[bool]] = defaultdict(list)
    old_by_kind: dict[str, list[bool]] = defaultdict(list)
    for s in samples:
        by_kind[s.kind].append(covered(s))
        old_by_kind[s.kind].append(_old_flags(s.text))
    skipped = "" if phonenumbers else "; phones skipped: no pii extra"
    print(f"\npii: {len(samples)} samples (evals/pii_samples.py){skipped}")
    print(f"  {'kind':8} {'n':>4}  {'stopwise':>10}  {'before (Luhn alone)':>20}")
    for kind, hits in by_kind.items():
        print(f"  {kind:8} {len(hits):4}  {sum(hits):>10}  {sum(old_by_kind[kind]):>20}")

    looks = lookalikes()
    print(f"\npii: false positives on look-alikes (evals/pii_samples.py, {len(looks)} lines)")
    print(f"  {'kind':28} {'n':>5}  {'stopwise':>16}  {'before':>16}  baseline")
    counts: Counter[str] = Counter()
    ours: Counter[str] = Counter()
    old: Counter[str] = Counter()
    for s in looks:
        counts[s.kind] += 1
        ours[s.kind] += flags(s.text)
        old[s.kind] += _old_flags(s.text)
    for kind, n in counts.items():
        print(f"  {kind:28} {n:5}  {_pct(ours[kind], n):>16}  {_pct(old[kind], n):>16}  0")

    corpus = ordinary_lines(per_kind)
    total = sum(map(len, corpus.values()))
    flagged = sum(flags(line) for lines in corpus.values() for line in lines)
    old_flagged = sum(_old_flags(line) for lines in corpus.values() for line in lines)
    print(
        f"\npii: ordinary text (evals/ordinary_text.py): {_pct(flagged, total)} lines flagged; "
        f"before {_pct(old_flagged, total)}; baseline 0"
    )
    for kind, lines in corpus.items():
        hits = [line for line in lines if flags(line)]
        if hits:
            print(f"  {kind}: {len(hits)}, e.g. {hits[0][:100]!r}")


def _pct(n: int, d: int) -> str:
    return f"{n} ({100 * n / d:.2f}%)" if d else "-"
