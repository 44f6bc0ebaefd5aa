"""The one embedding cache: texts' embeddings on disk, in shards, keyed by model, texts and settings.

Evaluation and the generator both read and write through `encode_cached`. Comparing five
checkpoints on one corpus encodes each once; an interrupted encode resumes at the first
missing shard; under `accelerate launch` each process encodes its own shards (shard i goes
to process i mod N) and every process then reads them all. Shards are written by
boolcl.files' atomic writer, so a killed run never leaves a torn one.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np

from boolcl.distributed import process_state
from boolcl.files import atomic_save_npy, atomic_write_text, cache_root

SHARD_SIZE = 50_000


class _Single:
    num_processes, process_index, is_main_process = 1, 0, True

    def wait_for_everyone(self) -> None:
        pass


_SINGLE = _Single()


def default_dir() -> Path:
    return cache_root() / "embeddings"


def cache_key(model_fp: str, corpus_fp: str, settings: dict) -> str:
    payload = json.dumps({"model": model_fp, "corpus": corpus_fp, **settings}, sort_keys=True)
    return hashlib.blake2b(payload.encode(), digest_size=16).hexdigest()


def encode_cached(encode_fn, texts: list[str], folder: Path, *, shard_size: int = SHARD_SIZE,
                  meta: dict | None = None, distributed: bool = True) -> tuple[np.ndarray, dict]:
    """Embeddings of `texts`, reading finished shards from `folder` and encoding the rest.

    `encode_fn(list_of_texts) -> np.ndarray`. Returns the embeddings and what happened
    (shards read, shards encoded) for results.json. `distributed=False` keeps it to this process
    (the generator, which never runs under `accelerate launch` and should not import it).
    """
    state = process_state() if distributed else _SINGLE
    folder.mkdir(parents=True, exist_ok=True)
    if meta is not None and state.is_main_process:
        atomic_write_text(folder / "meta.json", json.dumps(meta, indent=2) + "\n")
    n_shards = max(1, -(-len(texts) // shard_size))
    paths = [folder / f"shard-{i:05d}.npy" for i in range(n_shards)]
    encoded = 0
    for i, path in enumerate(paths):
        if i % state.num_processes != state.process_index or path.is_file():
            continue
        atomic_save_npy(path, encode_fn(texts[i * shard_size:(i + 1) * shard_size]).astype(np.float32))
        encoded += 1
    state.wait_for_everyone()
    out = np.concatenate([np.load(p) for p in paths]) if texts else np.zeros((0, 0), np.float32)
    if out.shape[0] != len(texts):
        raise RuntimeError(f"embedding cache {folder} holds {out.shape[0]} rows for {len(texts)} passages; "
                           f"delete the folder and run again")
    return out, {"dir": str(folder), "shards": n_shards, "encoded_here": encoded,
                 "read": n_shards - encoded if state.num_processes == 1 else None}
