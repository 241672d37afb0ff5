"""The ``peers`` section of ``evals/guardrail_builtins.py``: the built-in detectors on the peers' own test data.

``evals/data/peer_secrets.jsonl`` and ``evals/data/peer_pii.jsonl`` (built by ``evals/extract_peer_fixtures.py``)
hold the test strings of gitleaks, detect-secrets, secretlint, presidio, scrubadub and card-validator with the
peer's label; trufflehog's (AGPL-3.0, not shipped) are read from the local cache that script writes, when present.
Per source: recall on the positives (the detector found something; for personal data, something over every span
the peer expects) and false alarms on the negatives, beside the trivial baselines (flag nothing; flag every
high-entropy token for secrets, every run of nine digits or more for personal data) and detect-secrets 1.5 with
its default plugins for secrets.

The rules were fixed on the DEV sources (gitleaks, secretlint, trufflehog; presidio); the HELD-OUT ones
(detect-secrets; scrubadub and card-validator) were measured before and after without being looked at for fixes.
"""

from __future__ import annotations

import base64
import json
import re
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from stopwise.guardrails._pii import PiiKind, find_pii, require_phonenumbers
from stopwise.guardrails._secrets import find_secrets, shannon_entropy

__all__ = ["Fixture", "load_fixtures", "peers_section"]

DATA = Path(__file__).resolve().parent / "data"
SECRET_SPLITS = {
    "gitleaks": "dev",
    "gitleaks-generated": "dev",
    "secretlint": "dev",
    "trufflehog": "dev",
    "detect-secrets": "held-out",
}
PII_SPLITS = {"presidio": "dev", "scrubadub": "held-out", "card-validator": "held-out"}


@dataclass(frozen=True)
class Fixture:
    source: str
    path: str
    label: str
    text: str
    rule: str
    kind: str
    spans: tuple[tuple[int, int], ...]

    @property
    def positive(self) -> bool:
        return self.label == "positive"


def load_fixtures(name: str | Path) -> list[Fixture]:
    """The records of ``evals/data/<name>`` (or of the file ``name`` when it is a path)."""
    out = []
    with (DATA / name).open(encoding="utf-8") as f:
        for line in f:
            r = json.loads(line)
            spans = tuple((int(s), int(e)) for s, e in r.get("spans", []))
            text = base64.b64decode(r["text_b64"]).decode() if "text_b64" in r else r["text"]
            out.append(Fixture(r["source"], r["path"], r["label"], text, r["rule"], r.get("kind", ""), spans))
    return out


_TOKEN = re.compile(r"[A-Za-z0-9+/=_\-]{20,}")
_HEX = re.compile(r"[0-9a-fA-F]+")


def high_entropy_flags(text: str) -> bool:
    """The cheap rule: a token of 20 characters or more with detect-secrets' default entropy limits (hex 3.0,
    base64 4.5 bits per character)."""
    for m in _TOKEN.finditer(text):
        token = m.group()
        limit = 3.0 if _HEX.fullmatch(token) else 4.5
        if shannon_entropy(token) > limit:
            return True
    return False


_DIGIT_RUN = re.compile(r"\d(?:[ \-.()]{0,2}\d){8,}")


def digit_run_flags(text: str) -> bool:
    """The cheap rule for personal data: nine digits or more, single separators allowed between them."""
    return _DIGIT_RUN.search(text) is not None


def _line_flags(fixtures: list[Fixture]) -> list[bool] | None:
    """Whether detect-secrets 1.5 (default plugins and filters) reports anything on each fixture; None when it is
    not installed."""
    from guardrail_builtins import _detect_secrets_flags  # evals/ is on the path: this module is imported from it

    peer = _detect_secrets_flags()
    if peer is None:
        return None
    # One file per fixture: detect-secrets reports a secret once per file, so fixtures sharing a file would hide
    # the repeats of one value.
    return [any(peer(fx.text.splitlines() or [""])) for fx in fixtures]


def _rate(n: int, d: int) -> str:
    return f"{n}/{d} ({100 * n / d:.1f}%)" if d else "-"


def _table(
    title: str,
    fixtures: list[Fixture],
    splits: dict[str, str],
    detectors: dict[str, Callable[[Fixture], bool]],
) -> None:
    print(f"\n{title}")
    print(f"  {'source':16} {'split':9} {'n+':>4} {'n-':>4}  " + "  ".join(f"{d:>30}" for d in detectors))
    print(f"  {'':16} {'':9} {'':>4} {'':>4}  " + "  ".join(f"{'recall | false alarms':>30}" for _ in detectors))
    for source, split in splits.items():
        rows = [fx for fx in fixtures if fx.source == source]
        pos = [fx for fx in rows if fx.positive]
        neg = [fx for fx in rows if not fx.positive]
        cells = []
        for flag in detectors.values():
            cells.append(f"{_rate(sum(map(flag, pos)), len(pos))} | {_rate(sum(map(flag, neg)), len(neg))}")
        print(f"  {source:16} {split:9} {len(pos):4} {len(neg):4}  " + "  ".join(f"{c:>30}" for c in cells))


def secrets_peers(verbose: bool) -> None:
    fixtures = load_fixtures("peer_secrets.jsonl")
    # trufflehog's strings (AGPL-3.0) are not shipped: extract_peer_fixtures.py writes them to a cache outside git.
    from extract_peer_fixtures import TRUFFLEHOG_CACHE

    if TRUFFLEHOG_CACHE.exists():
        fixtures += load_fixtures(TRUFFLEHOG_CACHE)
    else:
        print(f"\ntrufflehog: {TRUFFLEHOG_CACHE} is not there (python evals/extract_peer_fixtures.py makes it)")
    peer = _line_flags(fixtures)
    peer_hit = {id(fx): hit for fx, hit in zip(fixtures, peer, strict=True)} if peer is not None else {}
    detectors: dict[str, Callable[[Fixture], bool]] = {
        "stopwise redact_secrets": lambda fx: bool(find_secrets(fx.text)),
        "baseline: flag nothing": lambda fx: False,
        "baseline: high entropy": lambda fx: high_entropy_flags(fx.text),
    }
    if peer is not None:
        detectors["detect-secrets 1.5 (defaults)"] = lambda fx: peer_hit[id(fx)]
    _table("secrets: the peers' test strings (evals/data/peer_secrets.jsonl)", fixtures, SECRET_SPLITS, detectors)
    if verbose:
        for fx in fixtures:
            found = bool(find_secrets(fx.text))
            if found != fx.positive:
                what = "missed" if fx.positive else "false alarm"
                print(f"    {fx.source} {what} [{fx.rule}] {fx.text[:110]!r}")


def pii_peers(verbose: bool) -> None:
    fixtures = load_fixtures("peer_pii.jsonl")
    try:
        phonenumbers = require_phonenumbers("evals")
    except Exception:
        phonenumbers = None

    def ours(fx: Fixture) -> bool:
        kind = PiiKind(fx.kind)
        if kind is PiiKind.PHONE and phonenumbers is None:
            return False
        found = find_pii(fx.text, frozenset({kind}), phonenumbers=phonenumbers)
        if not fx.positive or not fx.spans:
            return bool(found)
        # Every span the peer expects overlaps one of ours.
        return all(any(f.start < e and f.end > s for f in found) for s, e in fx.spans)

    detectors: dict[str, Callable[[Fixture], bool]] = {
        "stopwise block_pii": ours,
        "baseline: flag nothing": lambda fx: False,
        "baseline: 9+ digit run": lambda fx: digit_run_flags(fx.text),
    }
    kinds: dict[str, list[Fixture]] = defaultdict(list)
    for fx in fixtures:
        kinds[fx.kind].append(fx)
    for kind, rows in kinds.items():
        title = f"pii ({kind}{', phones=True, phone_region US' if kind == 'phone' else ''}): the peers' test texts"
        _table(title, rows, {s: v for s, v in PII_SPLITS.items() if any(fx.source == s for fx in rows)}, detectors)
    if verbose:
        for fx in fixtures:
            if ours(fx) != fx.positive:
                what = "missed" if fx.positive else "false alarm"
                print(f"    {fx.source} {fx.kind} {what} [{fx.rule}] {fx.text[:110]!r}")


def peers_section(verbose: bool = False) -> None:
    secrets_peers(verbose)
    pii_peers(verbose)
