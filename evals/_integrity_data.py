"""The integrity records of the development set and of the integrity corpus, as plain items (dev tools only).

``evals/train_integrity.py`` fits on the ``train`` items and ``evals/eval_integrity.py`` reports on the ``test``
ones; both read them through ``load_items``. Corpora are whole in one split (``evals/SOURCES.md``); the ``fresh``
split (agentprobe-injection) is neither: a corpus held out from every round before it, scored once per change.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEVSET = HERE / "data" / "devset.jsonl"
CORPUS = HERE / "data" / "integrity.jsonl"


@dataclass(frozen=True)
class Item:
    text: str
    label: bool
    split: str
    corpus: str
    """The unit of holding out: the record's source without its sub-part (``bipia``, ``mini-swe-agent``...)."""
    source: str
    kind: str
    span: tuple[int, int] | None
    """Where the planted text lies in ``text``; None when the whole text is the attack, or for clean records."""


def _records(path: Path) -> Iterator[dict[str, object]]:
    with path.open(encoding="utf-8") as f:
        for line in f:
            r = json.loads(line)
            if r["condition"] == "integrity":
                yield r


def load_items(split: str | None = None) -> list[Item]:
    items = []
    for path in (DEVSET, CORPUS):
        for r in _records(path):
            if split is not None and r["split"] != split:
                continue
            source = str(r["source"])
            span = r.get("span")
            items.append(
                Item(
                    str(r["tool_output"]),
                    bool(r["label"]),
                    str(r["split"]),
                    str(r.get("corpus") or source.split("/")[0]),
                    source,
                    str(r["kind"]),
                    (int(span[0]), int(span[1])) if isinstance(span, list) else None,
                )
            )
    return items
