"""Embed text chunks once with the embedding backend's model and keep them in a cache outside git (dev tool).

    python evals/embed_cache.py train    # the chunks evals/train_embed.py reads (a bounded sample, see train_rows)
    python evals/embed_cache.py test     # every chunk of the 2,226 held-out results (evals/eval_embed.py)

The cache (``$STOPWISE_EMBED_CACHE``, default ``/tmp/stopwise-embed-cache``) holds one ``.npz`` per split: the
chunks' SHA-256 keys, their unit-length all-MiniLM-L6-v2 embeddings (float32), and the wall time of embedding
them. Run it under ``nice -n 10`` on a shared machine; it pins itself to one core and one torch thread.
"""

from __future__ import annotations

import hashlib
import os
import random
import sys
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _embedding import CHUNK_CHARS, embedding_chunks
from _integrity_data import Item, load_items

from stopwise.guardian.evaluators._integrity import is_trivial

CACHE = Path(os.environ.get("STOPWISE_EMBED_CACHE", "/tmp/stopwise-embed-cache"))
READ_CHARS = 8000
SEED = 0
PER_GROUP = 40
"""Train texts sampled per (corpus, label), fixed seed, read whole: bounds the train chunks to about ten thousand."""
POSITIVES_PER_GROUP = 200
"""Injected train texts sampled per corpus whose planted request (read alone) is a positive; the first
``PER_GROUP`` of them are also read whole."""


def key(chunk: str) -> str:
    return hashlib.sha256(chunk.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Row:
    """One sampled train text: its scoring chunks (the whole span, as the backend reads it) and, for an injected
    text, its positive chunks (the planted request or attack read alone)."""

    item: Item
    weight: float
    """How many train texts of its (corpus, label) it stands for."""
    chunks: tuple[str, ...]
    """Empty for an injected text sampled only for its positives (``weight`` is then 0)."""
    positives: tuple[str, ...]


def train_rows() -> list[Row]:
    groups: dict[tuple[str, bool], list[Item]] = defaultdict(list)
    for item in load_items("train"):
        if not is_trivial(item.text):
            groups[(item.corpus, item.label)].append(item)
    rng = random.Random(SEED)
    rows = []
    for group in sorted(groups):
        members = groups[group]
        size = POSITIVES_PER_GROUP if group[1] else PER_GROUP
        picked = members if len(members) <= size else rng.sample(members, size)
        whole = min(PER_GROUP, len(picked))
        for n, item in enumerate(picked):
            chunks = tuple(embedding_chunks(item.text, READ_CHARS, CHUNK_CHARS)) if n < whole else ()
            positives: tuple[str, ...] = ()
            if item.label:
                alone = item.text[item.span[0] : item.span[1]] if item.span else item.text
                positives = tuple(embedding_chunks(alone, READ_CHARS, CHUNK_CHARS))
            if chunks or positives:
                rows.append(Row(item, len(members) / whole if chunks else 0.0, chunks, positives))
    return rows


def test_chunks() -> list[str]:
    return [c for i in load_items("test") for c in embedding_chunks(i.text, READ_CHARS, CHUNK_CHARS)]


def load(split: str) -> tuple[dict[str, np.ndarray], float]:
    """The cached embeddings of ``split`` by chunk key, and the cache's seconds per chunk."""
    path = CACHE / f"{split}.npz"
    if not path.exists():
        sys.exit(f"{path} is missing: run evals/embed_cache.py {split} first")
    data = np.load(path)
    keys = [str(k) for k in data["keys"]]
    return dict(zip(keys, data["vectors"], strict=True)), float(data["seconds"]) / max(len(keys), 1)


def main() -> None:
    split = sys.argv[1] if len(sys.argv) > 1 else "train"
    if split not in ("train", "test"):
        sys.exit("usage: embed_cache.py train|test")
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    import torch
    from _embedding import encode, load_encoder

    torch.set_num_threads(1)
    chunks = [c for r in train_rows() for c in (*r.chunks, *r.positives)] if split == "train" else test_chunks()
    unique = list(dict.fromkeys(chunks))
    print(f"{split}: {len(chunks)} chunks, {len(unique)} distinct", flush=True)
    encoder, _ = load_encoder()
    start, vectors = time.perf_counter(), []
    for i in range(0, len(unique), 256):
        vectors.extend(encode(encoder, unique[i : i + 256]))
        done = min(i + 256, len(unique))
        print(f"  {done}/{len(unique)} in {time.perf_counter() - start:.0f} s", flush=True)
    seconds = time.perf_counter() - start
    CACHE.mkdir(parents=True, exist_ok=True)
    np.savez(
        CACHE / f"{split}.npz",
        keys=np.array([key(c) for c in unique]),
        vectors=np.array(vectors, dtype=np.float32),
        seconds=np.array(seconds),
    )
    print(f"wrote {CACHE / f'{split}.npz'}: {seconds:.0f} s, {1000 * seconds / max(len(unique), 1):.1f} ms per chunk")


if __name__ == "__main__":
    main()
