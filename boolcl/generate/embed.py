"""Embeddings for grouping and mining, cached on disk so a rerun does not encode again.

The cache key is the encoder's identity (hub id, or the folder with its files' sizes
and times), its max length, and the texts. The model is loaded only on a miss, so a
fully cached rerun does not even import torch.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np

from ..data.jsonl import atomic_write_text


def model_identity(spec: str) -> dict:
    from ..models import resolve

    r = resolve(spec)
    ident: dict = {"spec": spec, "origin": r.origin}
    if r.origin == "hub":
        ident["path"] = r.path
        return ident
    from ..data.loaders import files_stamp

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
            from ..models import load_model

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
        key = hashlib.sha256(json.dumps([self._ident, kind, texts], ensure_ascii=False).encode()).hexdigest()
        path = self.cache_dir / f"{kind}-{key[:32]}.npy" if self.cache_dir else None
        if path is not None and path.is_file():
            try:
                arr = np.load(path)
                if arr.shape[0] == len(texts):
                    return arr
            except (OSError, ValueError):
                pass
        from ..evaluate.encode import encode

        arr = encode(self._load(), texts, batch_size=self.batch_size, desc=f"encoding {kind}",
                     show_progress=self.show_progress)
        self.encoded += len(texts)
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{path.name}.tmp")
            with open(tmp, "wb") as fh:
                np.save(fh, arr)
            tmp.replace(path)
        return arr

    def prepare(self, emb: np.ndarray) -> np.ndarray:
        """Rows ready for inner-product search under this encoder's similarity."""
        from ..evaluate.search import normalize

        return normalize(emb) if self.similarity == "cosine" else emb
