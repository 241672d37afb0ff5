"""Cost of the secret and personal-data built-ins per tool result (``find_secrets``, ``find_pii``), on real tool
outputs, and the ratio of one source tree to another.

Texts: the tool results of ``evals/data/integrity.jsonl`` (real bash, web and Wikipedia outputs, BIPIA's emails,
tables and code, JSON records) of 2,000 characters or more, each cut at 8,000 characters (the length a step's
result is usually capped at), ``--texts`` of them spread evenly over the file. Times are CPU time of the process
(``time.process_time``), per call, median and p95 over the texts, the round with the median median of
``--rounds``. ``redact_secrets()`` runs ``find_secrets`` on every string of a result; ``block_pii()`` runs
``find_pii`` with cards, SSNs and IBANs (``phones=True`` adds the ``phonenumbers`` matcher, timed separately).

    PYTHONPATH=src python benchmarks/bench_builtins.py
    python benchmarks/bench_builtins.py --src /tmp/before/src --src src    # before / after, same texts

With ``--src`` each tree runs in its own process (``PYTHONPATH=<tree>``), the trees taking turns for ``--passes``
passes in alternating order (so a burst of load from another process, or the first run of a pass being slower,
hits both), and the last tree's medians over the passes are
printed over the first's.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

CORPUS = Path(__file__).resolve().parents[1] / "evals" / "data" / "integrity.jsonl"


def texts(n: int) -> list[str]:
    out = []
    with CORPUS.open(encoding="utf-8") as f:
        for line in f:
            text = json.loads(line).get("tool_output") or ""
            if len(text) >= 2000:
                out.append(text[:8000])
    step = max(1, len(out) // n)
    return out[::step][:n]


def timed(fn: Callable[[str], object], sample: Sequence[str], rounds: int) -> tuple[float, float]:
    """(median, p95) microseconds per call, of the round whose median is the median of the rounds."""
    for text in sample:
        fn(text)  # warm up: compiled patterns, imports, caches
    results = []
    for _ in range(rounds):
        per_call = []
        for text in sample:
            start = time.process_time()
            fn(text)
            per_call.append((time.process_time() - start) * 1e6)
        per_call.sort()
        results.append((statistics.median(per_call), per_call[int(0.95 * (len(per_call) - 1))]))
    results.sort()
    return results[len(results) // 2]


def measure(n: int, rounds: int) -> dict[str, tuple[float, float]]:
    from stopwise.guardrails._pii import PiiKind, find_pii, require_phonenumbers
    from stopwise.guardrails._secrets import find_secrets

    sample = texts(n)
    core = frozenset({PiiKind.CARD, PiiKind.SSN, PiiKind.IBAN})
    phonenumbers = require_phonenumbers("bench")
    return {
        "find_secrets": timed(find_secrets, sample, rounds),
        "find_pii (cards, SSNs, IBANs)": timed(lambda t: find_pii(t, core), sample, rounds),
        "find_pii (phones)": timed(
            lambda t: find_pii(t, frozenset({PiiKind.PHONE}), phonenumbers=phonenumbers), sample, rounds
        ),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--texts", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--src", action="append", default=[], help="a source tree to time (repeatable)")
    parser.add_argument("--passes", type=int, default=4, help="with --src: turns each tree takes")
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.json:
        print(json.dumps(measure(args.texts, args.rounds)))
        return 0
    figures: list[dict[str, tuple[float, float]]] = []
    if not args.src:
        figures.append(measure(args.texts, args.rounds))
    else:
        runs: list[list[dict[str, list[float]]]] = [[] for _ in args.src]
        for turn in range(args.passes):
            order = list(enumerate(args.src))
            for i, tree in order if turn % 2 == 0 else order[::-1]:  # the first run of a pass is often slower
                env = {**os.environ, "PYTHONPATH": str(Path(tree).resolve())}
                cmd = [sys.executable, __file__, "--json", "--texts", str(args.texts), "--rounds", str(args.rounds)]
                out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout
                runs[i].append(json.loads(out))
        for tree_runs in runs:
            figures.append(
                {
                    name: (
                        statistics.median(r[name][0] for r in tree_runs),
                        statistics.median(r[name][1] for r in tree_runs),
                    )
                    for name in tree_runs[0]
                }
            )
    print(f"per 8,000-character tool result ({args.texts} texts from evals/data/integrity.jsonl), CPU microseconds")
    for name in figures[0]:
        cells = "   ".join(f"{f[name][0]:8.0f} median {f[name][1]:8.0f} p95" for f in figures)
        ratio = f"   last/first {figures[-1][name][0] / figures[0][name][0]:.2f}x" if len(figures) > 1 else ""
        print(f"  {name:30} {cells}{ratio}")
    if args.src:
        print("  trees: " + ", ".join(args.src))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
