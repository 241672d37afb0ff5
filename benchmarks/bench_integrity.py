"""Cost of the integrity check per tool result, by the result's length, on one core; optionally beside
stackone-defender (a published detector with a MiniLM model in its wheel; the ``bench`` extra) on the same texts.

Target: at most 2 ms per tool result of up to 8,000 characters (median and p95 of the 2,000-8,000 and 8,000
buckets), with no text cached: every text is scored by a fresh call of ``score_text`` (what ``RuleEvaluator`` does
the first time it sees a result; it then remembers it). What ``_integrity`` keeps from one text to the next is per
single word (codes, weights, spellings), so rounds after the first find most words known, as a running process does.

Texts: the tool results of ``evals/data/integrity.jsonl`` (real bash, web and Wikipedia outputs, BIPIA's
emails, tables and code, JSON records; clean and injected), bucketed by length; the ``8000`` bucket is each long
text cut at exactly 8,000 characters (the guardian's ``result_chars``). The process is pinned to one CPU where the
platform allows and times are CPU time of this process (``time.process_time``: on a shared machine, other
processes' load does not count); each bucket is timed in several rounds and the round whose median is the median
of the rounds is reported, so a burst of load from another process skews one round, not the figure.

``--src DIR`` (repeatable) times the stopwise of each source tree instead of the one imported, in one worker
process per tree, the trees taking turns round by round: ``--src /tmp/before/src --src src`` compares a before and
an after on the same texts under the same load, and prints, per bucket, the median over texts of the last tree's
time over the first's (paired, per round; the median of the rounds).

With numpy installed (the ``fast`` extra) the model's windows of long texts are scored with it (the same numbers);
``--pure`` times every tree without it, as the default install runs.

Usage:
    python benchmarks/bench_integrity.py [--per-bucket 200] [--rounds 5] [--stackone] [--src DIR ...] [--json PATH]
                                         [--strict] [--pure]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

CORPUS = Path(__file__).resolve().parents[1] / "evals" / "data" / "integrity.jsonl"
BUCKETS = ((0, 500), (500, 2000), (2000, 8000), (8000, 8001))
TARGET_MS = 2.0


def texts_by_bucket(per_bucket: int) -> dict[str, list[str]]:
    texts = [json.loads(line)["tool_output"] for line in CORPUS.open(encoding="utf-8")]
    rng = random.Random(0)
    out: dict[str, list[str]] = {}
    for lo, hi in BUCKETS:
        # The last bucket: every long text cut at exactly 8,000 characters.
        pool = [t[:8000] for t in texts if len(t) >= 8000] if lo == 8000 else [t for t in texts if lo <= len(t) < hi]
        out[f"{lo}-{hi - 1 if lo == 8000 else hi}"] = rng.sample(pool, min(per_bucket, len(pool)))
    return out


def one_round(score: Callable[[str], Any], texts: Sequence[str]) -> list[float]:
    """CPU milliseconds of each text, scored once."""
    ms = []
    for t in texts:
        start = time.process_time()
        score(t)
        ms.append((time.process_time() - start) * 1000.0)
    return ms


def summary(rounds: Sequence[Sequence[float]]) -> tuple[float, float]:
    """Median and p95 milliseconds per text, from the round with the median median."""
    per_round = []
    for ms in rounds:
        ordered = sorted(ms)
        per_round.append((statistics.median(ordered), ordered[int(0.95 * (len(ordered) - 1))]))
    per_round.sort()
    return per_round[len(per_round) // 2]


def stopwise_scorer(pure: bool = False) -> tuple[Callable[[str], Any], str]:
    """``score_text`` with the shipped model and read length of the stopwise on the path, and the model's version
    (with ``pure``, the model's windows without numpy even when it is installed: the default install's path)."""
    from stopwise.guardian.evaluators import _integrity
    from stopwise.guardian.evaluators._integrity import score_text
    from stopwise.guardian.evaluators.rule import load_coefficients, load_integrity_model

    if pure and hasattr(_integrity, "_numpy"):
        _integrity._numpy = lambda: None  # type: ignore[attr-defined]
    model, read_chars = load_integrity_model(), load_coefficients().scan_chars
    return (lambda t: score_text(t, model, read_chars)), model.version


def worker(per_bucket: int, pure: bool) -> int:
    """``--worker``: reads a bucket name per line, answers one round of its timings as a JSON line."""
    pin()
    score, _ = stopwise_scorer(pure)
    buckets = texts_by_bucket(per_bucket)
    for line in sys.stdin:
        print(json.dumps(one_round(score, buckets[line.strip()])), flush=True)
    return 0


class Tree:
    """A worker process timing the stopwise of one source tree."""

    def __init__(self, src: str, per_bucket: int, pure: bool) -> None:
        env = dict(os.environ, PYTHONPATH=os.path.abspath(src))
        command = [sys.executable, os.path.abspath(__file__), "--worker", "--per-bucket", str(per_bucket)]
        command += ["--pure"] if pure else []
        self.src = src
        self.process = subprocess.Popen(command, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def round(self, bucket: str) -> list[float]:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(bucket + "\n")
        self.process.stdin.flush()
        return [float(ms) for ms in json.loads(self.process.stdout.readline())]

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait()


def pin() -> None:
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})


def stackone() -> Callable[[str], Any]:
    from stackone_defender import create_prompt_defense

    defense = create_prompt_defense(enable_tier2=True)
    defense.warmup_tier2()
    return lambda text: defense.defend_tool_result(text, "read_document")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--per-bucket", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--stackone", action="store_true", help="also time stackone-defender (one round)")
    parser.add_argument("--json", help="write the figures here")
    parser.add_argument("--strict", action="store_true", help="exit 1 when the target is missed")
    parser.add_argument("--src", action="append", default=[], help="a source tree to time (repeatable)")
    parser.add_argument("--pure", action="store_true", help="no numpy (the fast extra) even if installed")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return worker(args.per_bucket, args.pure)
    pin()
    buckets = texts_by_bucket(args.per_bucket)
    # Each system answers one round of a bucket's timings; the trees take turns, round by round.
    systems: dict[str, tuple[Callable[[str], list[float]], int]] = {}
    trees = [Tree(src, args.per_bucket, args.pure) for src in args.src]
    for tree in trees:
        systems[f"stopwise {tree.src}"] = (tree.round, args.rounds)
    if not trees:
        score, version = stopwise_scorer(args.pure)
        print(f"model {version}")
        systems["stopwise"] = (lambda bucket: one_round(score, buckets[bucket]), args.rounds)
    if args.stackone:
        defender = stackone()
        systems["stackone-defender"] = (lambda bucket: one_round(defender, buckets[bucket]), 1)
    print(f"python {platform.python_version()} on {platform.machine()}, one core")
    print(f"{'chars':>10} {'texts':>6} " + " ".join(f"{n + ' median':>26} {'p95':>8}" for n in systems))
    results: dict[str, dict[str, Any]] = {}
    for bucket, texts in buckets.items():
        rounds: dict[str, list[list[float]]] = {name: [] for name in systems}
        for k in range(args.rounds):
            for name, (time_round, wanted) in systems.items():
                if k < wanted:
                    rounds[name].append(time_round(bucket))
        row = {name: summary(r) for name, r in rounds.items()}
        results[bucket] = {name: {"median_ms": m, "p95_ms": p} for name, (m, p) in row.items()} | {"n": len(texts)}
        cells = " ".join(f"{m:26.3f} {p:8.3f}" for m, p in row.values())
        print(f"{bucket:>10} {len(texts):6} {cells}")
        if len(trees) > 1:
            # Paired: each text's time in the last tree over its time in the first (same round), median per round.
            first, last = (rounds[f"stopwise {t.src}"] for t in (trees[0], trees[-1]))
            per_round = [
                statistics.median(b / a for a, b in zip(r0, r1, strict=True) if a > 0)
                for r0, r1 in zip(first, last, strict=True)
            ]
            results[bucket]["paired_ratio"] = statistics.median(per_round)
            print(f"{'':>10} {'':>6} per text, last tree / first (median): {statistics.median(per_round):.2f}")
        if "stackone-defender" in row:
            for name in systems:
                if name.startswith("stopwise"):
                    ratio = row["stackone-defender"][0] / row[name][0]
                    print(f"{'':>10} {'':>6} stackone / {name} (median): {ratio:.0f}x")
    for tree in trees:
        tree.close()
    ours = [name for name in systems if name.startswith("stopwise")][-1]  # the last tree: the "after"
    long = [b for b in ("2000-8000", "8000-8000") if b in results]
    worst = max(results[b][ours]["p95_ms"] for b in long)
    print(
        f"\ntarget: <= {TARGET_MS} ms per result of up to 8,000 characters; {ours}'s worst p95 {worst:.3f} ms: "
        f"{'met' if worst <= TARGET_MS else 'MISSED'}"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    return 1 if args.strict and worst > TARGET_MS else 0


if __name__ == "__main__":
    sys.exit(main())
