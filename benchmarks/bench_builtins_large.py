"""Cost of every built-in tool-result guardrail on one 1 MB tool result, real and adversarial shapes.

A tool result is attacker-controlled text (a web page, a file), so a guardrail whose patterns go quadratic on some
shape is a denial of service: past its time limit the run fails ``guardrail_timeout``. Shapes: ``real`` (the tool
outputs of ``evals/data/integrity.jsonl`` joined up to 1 MB), ``prose`` (common words), and shapes that aim at
the patterns: many ``curl`` words on one line, private-key headers without a footer, PuTTY key headers without a
MAC, percent-escapes, a base64 blob, a JSON object of many keys, secret words with nothing assigned. Each guardrail
runs in its own process with ``--timeout`` seconds (a quadratic one is reported as over it); CPU milliseconds.

    PYTHONPATH=src python benchmarks/bench_builtins_large.py
    python benchmarks/bench_builtins_large.py --src /tmp/before/src --src src    # before / after
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

SIZE = 1_000_000
CORPUS = Path(__file__).resolve().parents[1] / "evals" / "data" / "integrity.jsonl"
GUARDRAILS = (
    "redact_secrets",
    "block_pii",
    "redact_pii",
    "block_pii_phones",
    "block_injected_results",
    "max_tool_result_length",
)


def shapes() -> dict[str, str]:
    rng = random.Random(0)
    real: list[str] = []
    with CORPUS.open(encoding="utf-8") as f:
        for line in f:
            real.append(json.loads(line).get("tool_output") or "")
            if sum(map(len, real)) > SIZE:
                break
    words = [
        "the",
        "of",
        "and",
        "to",
        "in",
        "a",
        "is",
        "that",
        "for",
        "it",
        "as",
        "was",
        "with",
        "be",
        "by",
        "on",
        "not",
        "this",
        "are",
        "or",
        "from",
        "at",
        "which",
        "but",
        "have",
    ]
    return {
        "real": "\n".join(real)[:SIZE],
        "prose": " ".join(rng.choice(words) for _ in range(SIZE // 3))[:SIZE],
        "curl-words-one-line": ("curl " * (SIZE // 5))[:SIZE],
        "key-headers-no-footer": ("-----BEGIN RSA PRIVATE KEY-----\nabc\n" * (SIZE // 35))[:SIZE],
        "putty-headers-no-mac": ("PuTTY-User-Key-File-2: ssh-rsa\n" * (SIZE // 31))[:SIZE],
        "percent-escapes": ("%41" * (SIZE // 3))[:SIZE],
        "base64-blob": base64.b64encode(rng.randbytes(SIZE * 3 // 4)).decode(),
        "json-many-keys": json.dumps({f"key_{i}": f"v{i}" for i in range(SIZE // 20)})[:SIZE],
        "secret-words-unassigned": ("token password secret= " * (SIZE // 23))[:SIZE],
    }


def one(shape: str, name: str) -> float:
    """CPU milliseconds of guardrail ``name`` on shape ``shape``, in this process."""
    from stopwise.guardrails import (
        ToolResultContext,
        block_injected_results,
        block_pii,
        max_tool_result_length,
        redact_pii,
        redact_secrets,
    )
    from stopwise.messages import ToolCall

    factories = {
        "redact_secrets": redact_secrets,
        "block_pii": block_pii,
        "redact_pii": redact_pii,
        "block_pii_phones": lambda: block_pii(phones=True),
        "block_injected_results": block_injected_results,
        "max_tool_result_length": lambda: max_tool_result_length(8000),
    }
    guard = factories[name]()
    ctx = ToolResultContext((), 1, "s", "r", None, ToolCall("read", {}, "c1"), shapes()[shape], False)
    start = time.process_time()
    guard(ctx)  # type: ignore[operator]
    return (time.process_time() - start) * 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--src", action="append", default=[], help="a source tree to time (repeatable)")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds per guardrail and shape")
    parser.add_argument("--one", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(one(*args.one))
        return 0
    trees = args.src or [os.environ.get("PYTHONPATH", "src")]
    print(f"CPU ms per {SIZE:,}-character tool result; '>' = still running after {args.timeout:.0f} s")
    print(f"  {'shape':26} {'guardrail':24} " + "  ".join(f"{Path(t).parent.name or t:>14}" for t in trees))
    for shape in shapes():
        for name in GUARDRAILS:
            cells = []
            for tree in trees:
                env = {**os.environ, "PYTHONPATH": str(Path(tree).resolve())}
                try:
                    out = subprocess.run(
                        [sys.executable, __file__, "--one", shape, name],
                        env=env,
                        capture_output=True,
                        text=True,
                        check=True,
                        timeout=args.timeout,
                    ).stdout
                    cells.append(f"{float(out):14.0f}")
                except subprocess.TimeoutExpired:
                    cells.append(f"{'>' + str(int(args.timeout * 1000)):>14}")
            print(f"  {shape:26} {name:24} " + "  ".join(cells), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
