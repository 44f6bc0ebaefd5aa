"""Corpus embeddings on disk, in shards, keyed by model, corpus and encoding settings.

Comparing five checkpoints on one corpus encodes each once; an interrupted encode resumes
at the first missing shard; under `accelerate launch` each process encodes its own shards
(shard i goes to process i mod N) and every process then reads them all.
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import numpy as np

from ..data.jsonl import atomic_write_text

SHARD_SIZE = 50_000


def default_dir() -> Path:
    return Path(os.environ.get("BOOLCL_CACHE", Path.home() / ".cache" / "boolcl")) / "embeddings"


def cache_key(model_fp: str, corpus_fp: str, settings: dict) -> str:
    payload = json.dumps({"model": model_fp, "corpus": corpus_fp, **settings}, sort_keys=True)
    return hashlib.blake2b(payload.encode(), digest_size=16).hexdigest()


def _save(path: Path, array: np.ndarray) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with tmp.open("wb") as fh:
        np.save(fh, array)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def encode_cached(encode_fn, texts: list[str], folder: Path, *, shard_size: int = SHARD_SIZE,
                  meta: dict | None = None) -> tuple[np.ndarray, dict]:
    """Embeddings of `texts`, reading finished shards from `folder` and encoding the rest.

    `encode_fn(list_of_texts) -> np.ndarray`. Returns the embeddings and what happened
    (shards read, shards encoded) for results.json.
    """
    from ..distributed import process_state

    state = process_state()
    folder.mkdir(parents=True, exist_ok=True)
    if meta is not None and state.is_main_process:
        atomic_write_text(folder / "meta.json", json.dumps(meta, indent=2) + "\n")
    n_shards = max(1, -(-len(texts) // shard_size))
    paths = [folder / f"shard-{i:05d}.npy" for i in range(n_shards)]
    encoded = 0
    for i, path in enumerate(paths):
        if i % state.num_processes != state.process_index or path.is_file():
            continue
        _save(path, encode_fn(texts[i * shard_size:(i + 1) * shard_size]).astype(np.float32))
        encoded += 1
    state.wait_for_everyone()
    out = np.concatenate([np.load(p) for p in paths]) if texts else np.zeros((0, 0), np.float32)
    if out.shape[0] != len(texts):
        raise RuntimeError(f"embedding cache {folder} holds {out.shape[0]} rows for {len(texts)} passages; "
                           f"delete the folder and run again")
    return out, {"dir": str(folder), "shards": n_shards, "encoded_here": encoded,
                 "read": n_shards - encoded if state.num_processes == 1 else None}
