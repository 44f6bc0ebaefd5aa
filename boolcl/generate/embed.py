"""Embeddings for grouping and mining, through the one embedding cache (boolcl.retrieval.cache).

The model part of the key is the encoder's identity (hub id, or the folder with its files'
sizes and times) rather than a hash of its weights, as evaluation uses: the model is then
loaded only on a miss, so a fully cached rerun does not even import torch.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np

from boolcl.data.hub import files_stamp
from boolcl.files import atomic_write_text
from boolcl.retrieval.cache import cache_key, encode_cached
from boolcl.retrieval.models import load_model, resolve
from boolcl.retrieval.search import normalize


def model_identity(spec: str) -> dict:
    r = resolve(spec)
    ident: dict = {"spec": spec, "origin": r.origin}
    if r.origin == "hub":
        ident["path"] = r.path
        return ident
    ident["files"] = files_stamp(Path(r.path))
    return ident


class Encoder:
    """`encode(texts, kind)` -> float32 rows; `similarity` is 'dot' or 'cosine'."""

    def __init__(self, spec: str, cache_dir: str | Path | None, *, similarity: str | None = None,
                 batch_size: int = 64, show_progress: bool = True):
        self.spec = spec
        self.cache_dir = Path(cache_dir) / "embeddings" if cache_dir else None
        self.batch_size = batch_size
        self.show_progress = show_progress
        self._model = None
        self._ident = model_identity(spec)
        self._similarity = similarity
        self.encoded = 0  # texts actually encoded (not from the cache)

    def _load(self):
        if self._model is None:
            self._model = load_model(self.spec)
        return self._model

    def _meta_path(self) -> Path | None:
        if self.cache_dir is None:
            return None
        h = hashlib.sha256(json.dumps(self._ident, sort_keys=True).encode()).hexdigest()[:24]
        return self.cache_dir / f"model-{h}.json"

    @property
    def similarity(self) -> str:
        if self._similarity:
            return self._similarity
        meta = self._meta_path()
        if meta is not None and meta.is_file():
            self._similarity = json.loads(meta.read_text())["similarity"]
            return self._similarity
        name = getattr(self._load(), "similarity_fn_name", None) or "cosine"
        self._similarity = "dot" if name == "dot" else "cosine"
        if meta is not None:
            atomic_write_text(meta, json.dumps({"model": self._ident, "similarity": self._similarity}))
        return self._similarity

    def encode(self, texts: list[str], kind: str) -> np.ndarray:
        def encode_fn(chunk: list[str]) -> np.ndarray:
            from boolcl.retrieval.encode import encode  # torch, only on a miss

            arr = encode(self._load(), chunk, batch_size=self.batch_size, desc=f"encoding {kind}",
                         show_progress=self.show_progress)
            self.encoded += len(chunk)
            return arr

        if self.cache_dir is None:
            return encode_fn(texts)
        texts_fp = hashlib.sha256(json.dumps(texts, ensure_ascii=False).encode()).hexdigest()
        model_fp = hashlib.sha256(json.dumps(self._ident, sort_keys=True).encode()).hexdigest()
        folder = self.cache_dir / cache_key(model_fp, texts_fp, {"kind": kind})
        arr, _ = encode_cached(encode_fn, texts, folder, distributed=False)
        return arr

    def prepare(self, emb: np.ndarray) -> np.ndarray:
        """Rows ready for inner-product search under this encoder's similarity."""
        return normalize(emb) if self.similarity == "cosine" else emb
