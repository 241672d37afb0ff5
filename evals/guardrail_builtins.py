"""Coverage and false positives of the built-in guardrails, printed side by side with a peer and a trivial baseline.

    PYTHONPATH=src python evals/guardrail_builtins.py            # every section
    PYTHONPATH=src python evals/guardrail_builtins.py secrets    # a section: secrets, installed, pii, peers, injection
    PYTHONPATH=src python evals/guardrail_builtins.py peers -v   # and list each miss and false alarm

- **secrets**: ``redact_secrets``'s rules on the format table of ``evals/secret_samples.py`` (caught: none of the
  secret survives redaction) and on the ordinary-text corpus of ``evals/ordinary_text.py`` (lines flagged), next
  to ``detect-secrets`` with its default plugins and filters (``pip install detect-secrets``; skipped when absent)
  and the trivial baseline (flag nothing: nothing caught, nothing flagged).
- **installed**: ``find_secrets`` on every line of files drawn (seed 0) from the venv's ``lib`` (Python, JSON, YAML,
  Markdown, text, config, XML and HTML files of the installed packages): the lines flagged, listed with ``-v``.
  Nothing there is a live secret; what is flagged is a credential in form (a documented example) or a false alarm.
- **pii**: ``block_pii``'s detectors on the personal-data table and the look-alike numbers of
  ``evals/pii_samples.py`` (order numbers, timestamps, ids), and on the ordinary-text corpus.
- **peers**: both detectors on the peers' own test data (``evals/data/peer_secrets.jsonl``,
  ``evals/data/peer_pii.jsonl``; see ``evals/peer_eval.py``), per source, dev and held-out.
- **injection**: ``block_injected_results()`` on the integrity records of the development set
  (``evals/data/devset.jsonl``), per split.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
from collections import Counter
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from ordinary_text import ordinary_lines
from secret_samples import secret_samples

from stopwise.guardrails._secrets import find_secrets, redact_text

DEVSET = Path(__file__).resolve().parent / "data" / "devset.jsonl"


def _pct(n: int, d: int) -> str:
    return f"{n}/{d} ({100 * n / d:.2f}%)" if d else "-"


def _detect_secrets_flags() -> Callable[[list[str]], list[bool]] | None:
    """A function telling, per line, whether detect-secrets reports a secret on it; None when not installed."""
    try:
        from detect_secrets import SecretsCollection
        from detect_secrets.settings import default_settings
    except ImportError:
        return None

    def flags(lines: list[str]) -> list[bool]:
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "lines.txt")
            Path(path).write_text("\n".join(line.replace("\r", " ") for line in lines) + "\n", encoding="utf-8")
            with default_settings():
                found = SecretsCollection()
                found.scan_file(path)
                hit = {s.line_number for _, s in found}
        return [i + 1 in hit for i in range(len(lines))]

    return flags


def secrets_section(per_kind: int) -> None:
    samples = secret_samples()
    caught = [s for s in samples if not _survives(s.secret, redact_text(s.text))]
    print(f"secrets: {len(samples)} formats (evals/secret_samples.py)")
    print(f"  stopwise redact_secrets   caught {_pct(len(caught), len(samples))}")
    missed = [s.format for s in samples if s not in caught]
    if missed:
        print(f"    missed: {', '.join(missed)}")
    peer = _detect_secrets_flags()
    if peer is not None:
        # Generous to the peer: a sample counts as caught when it reports anything on any of the sample's lines.
        peer_caught = sum(any(peer(s.text.splitlines())) for s in samples)
        print(f"  detect-secrets (defaults) caught {_pct(peer_caught, len(samples))} (reported anything on the sample)")
    else:
        print("  detect-secrets: not installed (pip install detect-secrets)")
    print(f"  baseline (flag nothing)   caught {_pct(0, len(samples))}")

    corpus = ordinary_lines(per_kind)
    total = sum(map(len, corpus.values()))
    print(f"\nsecrets: false positives on {total} lines of ordinary text (evals/ordinary_text.py)")
    print(f"  {'kind':14} {'lines':>6}  {'stopwise':>18}  {'detect-secrets':>18}")
    ours_all = peer_all = 0
    rules: Counter[str] = Counter()
    for kind, lines in corpus.items():
        ours = 0
        for line in lines:
            found = find_secrets(line)
            ours += bool(found)
            rules.update(f.rule for f in found)
        theirs = sum(peer(lines)) if peer is not None else None
        ours_all += ours
        peer_all += theirs or 0
        peer_text = _pct(theirs, len(lines)) if theirs is not None else "-"
        print(f"  {kind:14} {len(lines):6}  {_pct(ours, len(lines)):>18}  {peer_text:>18}")
    print(f"  {'all':14} {total:6}  {_pct(ours_all, total):>18}  {_pct(peer_all, total) if peer else '-':>18}")
    print(f"  baseline (flag nothing): {_pct(0, total)}")
    if rules:
        print(f"  stopwise rules that fired: {', '.join(f'{r} {n}' for r, n in rules.most_common())}")


INSTALLED_KINDS = ("*.py", "*.json", "*.yaml", "*.yml", "*.md", "*.txt", "*.cfg", "*.toml", "*.xml", "*.html")


def installed_section(files: int, verbose: bool) -> None:
    lib = Path(sys.prefix) / "lib"
    paths = sorted(p for kind in INSTALLED_KINDS for p in lib.rglob(kind))
    random.Random(0).shuffle(paths)
    lines = 0
    flagged: list[str] = []
    for path in paths[:files]:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        for line in text.splitlines():
            if len(line) > 2000:
                continue  # minified files: one "line" of a megabyte
            lines += 1
            if find_secrets(line):
                flagged.append(f"{path.name}: {line.strip()[:150]}")
    print(f"\nsecrets: lines of installed files flagged ({min(files, len(paths))} files of {lib}, seed 0)")
    print(f"  stopwise redact_secrets   {_pct(len(flagged), lines)}")
    print(f"  baseline (flag nothing)   {_pct(0, lines)}")
    if verbose:
        for line in flagged:
            print(f"    {line}")


def _survives(secret: str, redacted: str) -> bool:
    """True when any 8-character piece of the secret is still readable."""
    piece = 8 if len(secret) >= 8 else len(secret)
    return any(secret[i : i + piece] in redacted for i in range(0, len(secret) - piece + 1))


def injection_section() -> None:
    from stopwise.guardrails import ToolResultContext, block_injected_results
    from stopwise.messages import ToolCall

    if not DEVSET.exists():
        print("injection: evals/data/devset.jsonl is not there (python evals/build_devset.py builds it)")
        return
    guard = block_injected_results()
    call = ToolCall("tool", {}, "c")
    counts: Counter[tuple[str, bool, bool]] = Counter()
    with DEVSET.open(encoding="utf-8") as f:
        for line in f:
            record = json.loads(line)
            if record.get("condition") != "integrity" or "tool_output" not in record:
                continue
            ctx = ToolResultContext((), 1, "s", "r", None, call, record["tool_output"], False)
            counts[(record["split"], bool(record["label"]), guard(ctx) is not None)] += 1
    print("\ninjection: block_injected_results() on the development set's integrity records")
    for split in sorted({k[0] for k in counts}):
        pos = counts[(split, True, True)] + counts[(split, True, False)]
        neg = counts[(split, False, True)] + counts[(split, False, False)]
        print(
            f"  {split:5}  injected blocked {_pct(counts[(split, True, True)], pos)}; "
            f"clean blocked {_pct(counts[(split, False, True)], neg)}; baseline (block nothing): 0 of {pos}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("sections", nargs="*", default=["secrets", "pii", "peers", "injection"])
    parser.add_argument("-v", "--verbose", action="store_true", help="peers: list each miss and false alarm")
    parser.add_argument("--per-kind", type=int, default=3000, help="lines of each kind of ordinary text")
    parser.add_argument("--files", type=int, default=6000, help="installed: how many files to read")
    args = parser.parse_args()
    for section in args.sections:
        if section == "secrets":
            secrets_section(args.per_kind)
        elif section == "installed":
            installed_section(args.files, args.verbose)
        elif section == "injection":
            injection_section()
        elif section == "pii":
            from pii_eval import pii_section

            pii_section(args.per_kind)
        elif section == "peers":
            from peer_eval import peers_section

            peers_section(args.verbose)
        else:
            parser.error(f"unknown section {section!r}")


if __name__ == "__main__":
    main()
