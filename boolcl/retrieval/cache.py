"""The one embedding cache: texts' embeddings on disk, in shards, keyed by model, texts and settings.

Evaluation and the generator both read and write through `encode_cached`. Comparing five
checkpoints on one corpus encodes each once; an interrupted encode resumes at the first
missing shard; under `accelerate launch` each process encodes its own shards (shard i goes
to process i mod N) and every process then reads them all. Shards are written by
boolcl.files' atomic writer, so a killed run never leaves a torn one.

Each shard has a checksum beside it (`shard-00000.npy.sum`, blake2b of the file's bytes),
written after the shard. A shard is only read when its checksum matches and it holds the
rows it should; any other (a flipped byte, a truncated file, one without a checksum from
an older boolcl or a run killed between the two writes) is named in a warning and encoded
again. The folder's name comes from `cache_key` over the encoder's identity
(boolcl/retrieval/identity.py), the texts and the shard size.
"""
from __future__ import annotations

import hashlib
import io
import json
import warnings
from pathlib import Path

import numpy as np

from boolcl.distributed import process_state
from boolcl.files import atomic_write_bytes, atomic_write_text, cache_root

SHARD_SIZE = 50_000


class _Single:
    num_processes, process_index, is_main_process = 1, 0, True

    def wait_for_everyone(self) -> None:
        pass


_SINGLE = _Single()


def default_dir() -> Path:
    return cache_root() / "embeddings"


def folder(cache_dir: str | None) -> Path:
    """The embedding cache's folder: `eval.cache_dir` when set, else `default_dir()`."""
    return Path(cache_dir) if cache_dir else default_dir()


def cache_key(model_fp: str, corpus_fp: str, settings: dict) -> str:
    payload = json.dumps({"model": model_fp, "corpus": corpus_fp, **settings}, sort_keys=True)
    return hashlib.blake2b(payload.encode(), digest_size=16).hexdigest()


def checksum(data: bytes) -> str:
    return "blake2b:" + hashlib.blake2b(data, digest_size=16).hexdigest()


def sum_path(path: Path) -> Path:
    return path.with_name(path.name + ".sum")


def _write_shard(path: Path, array: np.ndarray) -> None:
    """The shard, then its checksum: a checksum never names bytes that are not on disk."""
    buf = io.BytesIO()
    np.save(buf, array)
    data = buf.getvalue()
    atomic_write_bytes(path, data)
    atomic_write_text(sum_path(path), checksum(data) + "\n")


def _read_shard(path: Path, rows: int) -> tuple[np.ndarray | None, str | None]:
    """The shard's embeddings, or None and why it cannot be trusted (None, None: not there)."""
    if not path.is_file():
        return None, None
    try:
        data = path.read_bytes()
        expected = sum_path(path).read_text().strip()
    except FileNotFoundError:
        return None, "has no checksum (written by an older boolcl, or the run stopped before the checksum)"
    except OSError as err:
        return None, f"cannot be read ({err})"
    if checksum(data) != expected:
        return None, "does not match its checksum (corrupted)"
    try:
        array = np.load(io.BytesIO(data), allow_pickle=False)
    except (ValueError, OSError, EOFError) as err:
        return None, f"is not a readable array ({err})"
    if array.ndim != 2 or array.shape[0] != rows or array.dtype != np.float32:
        return None, f"holds {array.shape} {array.dtype}, expected {rows} float32 rows"
    return array, None


def encode_cached(encode_fn, texts: list[str], folder: Path, *, shard_size: int = SHARD_SIZE,
                  meta: dict | None = None, distributed: bool = True) -> tuple[np.ndarray, dict]:
    """Embeddings of `texts`, reading finished shards from `folder` and encoding the rest.

    `encode_fn(list_of_texts) -> np.ndarray`. Returns the embeddings and what happened
    (shards read, shards encoded) for results.json. `distributed=False` keeps it to this process
    (the generator, which never runs under `accelerate launch` and should not import it).
    A shard that fails its check is encoded again (and rewritten by the process that owns it).
    """
    state = process_state() if distributed else _SINGLE
    folder.mkdir(parents=True, exist_ok=True)
    if meta is not None and state.is_main_process:
        atomic_write_text(folder / "meta.json", json.dumps(meta, indent=2) + "\n")
    n_shards = max(1, -(-len(texts) // shard_size))
    paths = [folder / f"shard-{i:05d}.npy" for i in range(n_shards)]
    chunks = [texts[i * shard_size:(i + 1) * shard_size] for i in range(n_shards)]
    arrays: dict[int, np.ndarray] = {}
    encoded = 0

    def redo(i: int, why: str | None, write: bool) -> None:
        nonlocal encoded
        if why is not None:
            warnings.warn(f"embedding cache: {paths[i]} {why}; encoding it again", stacklevel=3)
        arrays[i] = np.asarray(encode_fn(chunks[i]), dtype=np.float32)
        encoded += 1
        if write:
            _write_shard(paths[i], arrays[i])

    for i in range(n_shards):  # this process's shards: check what is there, encode the rest
        if i % state.num_processes != state.process_index:
            continue
        array, why = _read_shard(paths[i], len(chunks[i]))
        if array is None:
            redo(i, why, write=True)
        else:
            arrays[i] = array
    state.wait_for_everyone()
    for i in range(n_shards):  # the other processes' shards, checked again as they are read
        if i not in arrays:
            array, why = _read_shard(paths[i], len(chunks[i]))
            if array is None:
                redo(i, why or "is missing after its process finished", write=False)
            else:
                arrays[i] = array
    out = np.concatenate([arrays[i] for i in range(n_shards)]) if texts else np.zeros((0, 0), np.float32)
    if out.shape[0] != len(texts):
        raise RuntimeError(f"embedding cache {folder} holds {out.shape[0]} rows for {len(texts)} passages; "
                           f"delete the folder and run again")
    return out, {"dir": str(folder), "shards": n_shards, "encoded_here": encoded,
                 "read": n_shards - encoded if state.num_processes == 1 else None}
