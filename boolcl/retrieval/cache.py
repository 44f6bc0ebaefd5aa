"""The one embedding cache: texts' embeddings on disk, in shards, keyed by model, texts and settings.

Evaluation and the generator both read and write through `encode_cached`. Comparing five
checkpoints on one corpus encodes each once; an interrupted encode resumes at the first
missing shard; under `accelerate launch` each process encodes its own shards (shard i goes
to process i mod N) and every process then reads them all. Shards are written by
boolcl.files' atomic writer, so a killed run never leaves a torn one.

Every shard (the start table of train/start_table.py is kept in shards too) is one safetensors
file whose metadata holds the key it was written under and a blake2b checksum of that metadata
and of the tensors' bytes (`pack`). One file, renamed into place whole: two runs writing the
same entry at once leave one of their two complete files, never a mix. An entry is only read
when its checksum matches and its key is the key it is read under (`unpack`); a shard must also
be the shard of that index, of these texts, with the rows it should hold. Any other (a flipped
byte, a truncated file, another entry's file copied in, one from an older boolcl) is named in a
warning and encoded again.
The folder's name comes from `cache_key` over the encoder's identity
(boolcl/retrieval/identity.py), the texts and the shard size, and is the key the shards in it
are read under.
"""
from __future__ import annotations

import hashlib
import json
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
from safetensors import SafetensorError
from safetensors.numpy import load as load_arrays
from safetensors.numpy import save as save_arrays

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


def _seal(header: dict[str, str], body: bytes | memoryview) -> str:
    """The checksum of an entry: its metadata (in key order, as safetensors keeps no order) and its tensors' bytes."""
    digest = hashlib.blake2b(json.dumps(header, sort_keys=True).encode(), digest_size=16)
    digest.update(body)
    return "blake2b:" + digest.hexdigest()


def _split(data: bytes) -> tuple[dict, memoryview]:
    """A safetensors file's metadata and the bytes after its header (the tensors')."""
    size = int.from_bytes(data[:8], "little")
    if len(data) < 8 + size:
        raise ValueError("shorter than its header says")
    header = json.loads(data[8:8 + size])
    meta = header.get("__metadata__") if isinstance(header, dict) else None
    return dict(meta) if isinstance(meta, dict) else {}, memoryview(data)[8 + size:]


def pack(save: Callable[..., bytes], tensors: dict, header: dict[str, str]) -> bytes:
    """`tensors` as a safetensors file (`save`: safetensors.numpy's or .torch's) whose metadata is `header`
    (with its "key") plus the checksum of both. The tensors' bytes do not depend on the metadata."""
    _, body = _split(save(tensors))
    return save(tensors, metadata={**header, "checksum": _seal(header, body)})


def unpack(data: bytes, key: str) -> tuple[dict[str, str] | None, str | None]:
    """The metadata of an entry read under `key`, or None and why it cannot be trusted."""
    try:
        header, body = _split(data)
    except (ValueError, UnicodeDecodeError) as err:
        return None, f"is not a readable cache entry ({err})"
    claimed = header.pop("checksum", None)
    if claimed is None or "key" not in header:
        return None, "has no checksum or key (written by an older boolcl)"
    if _seal(header, body) != claimed:
        return None, "does not match its checksum (corrupted)"
    if header["key"] != key:
        return None, f"was written under key {header['key']}, not {key} (another entry's file)"
    return header, None


def texts_digest(texts: list[str]) -> str:
    """Which texts a shard embeds, in order (each text's length first, so no two lists share a digest)."""
    digest = hashlib.blake2b(digest_size=16)
    for text in texts:
        raw = text.encode("utf-8", "surrogatepass")
        digest.update(len(raw).to_bytes(8, "little") + raw)
    return digest.hexdigest()


def _write_shard(path: Path, array: np.ndarray, header: dict[str, str]) -> None:
    atomic_write_bytes(path, pack(save_arrays, {"embeddings": array}, header))


def _read_shard(path: Path, key: str, header: dict[str, str], rows: int) -> tuple[np.ndarray | None, str | None]:
    """The shard's embeddings, or None and why it cannot be trusted (None, None: not there). `header`:
    what the shard must say of itself besides its key (its index, its texts)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None, None
    except OSError as err:
        return None, f"cannot be read ({err})"
    found, why = unpack(data, key)
    if found is None:
        return None, why
    if {k: found.get(k) for k in header} != header:
        return None, (f"was written as shard {found.get('shard')} of texts {found.get('texts')}, not as shard "
                      f"{header['shard']} of these texts ({header['texts']}): another shard's file")
    try:
        array = load_arrays(data)["embeddings"]
    except (SafetensorError, KeyError) as err:
        return None, f"is not a readable array ({err})"
    if array.ndim != 2 or array.shape[0] != rows or array.dtype != np.float32:
        return None, f"holds {array.shape} {array.dtype}, expected {rows} float32 rows"
    return array, None


def encode_cached(encode_fn, texts: list[str], folder: Path, *, shard_size: int = SHARD_SIZE,
                  meta: dict | None = None, distributed: bool = True,
                  key: str | None = None) -> tuple[np.ndarray, dict]:
    """Embeddings of `texts`, reading finished shards from `folder` and encoding the rest.

    `encode_fn(list_of_texts) -> np.ndarray`. Returns the embeddings and what happened
    (shards read, shards encoded) for results.json. `distributed=False` keeps it to this process
    (the generator, which never runs under `accelerate launch` and should not import it).
    `key`: what each shard must have been written under; by default the folder's name, as every
    caller names the folder by its `cache_key`. A shard that fails its check is encoded again (and
    rewritten by the process that owns it).
    """
    state = process_state() if distributed else _SINGLE
    folder.mkdir(parents=True, exist_ok=True)
    if meta is not None and state.is_main_process:
        atomic_write_text(folder / "meta.json", json.dumps(meta, indent=2) + "\n")
    n_shards = max(1, -(-len(texts) // shard_size))
    key = folder.name if key is None else key
    paths = [folder / f"shard-{i:05d}.safetensors" for i in range(n_shards)]
    chunks = [texts[i * shard_size:(i + 1) * shard_size] for i in range(n_shards)]
    headers = [{"shard": str(i), "texts": texts_digest(chunks[i])} for i in range(n_shards)]
    arrays: dict[int, np.ndarray] = {}
    encoded = 0

    def redo(i: int, why: str | None, write: bool) -> None:
        nonlocal encoded
        if why is not None:
            warnings.warn(f"embedding cache: {paths[i]} {why}; encoding it again", stacklevel=3)
        arrays[i] = np.asarray(encode_fn(chunks[i]), dtype=np.float32)
        encoded += 1
        if write:
            _write_shard(paths[i], arrays[i], {"key": key, **headers[i]})

    for i in range(n_shards):  # this process's shards: check what is there, encode the rest
        if i % state.num_processes != state.process_index:
            continue
        array, why = _read_shard(paths[i], key, headers[i], len(chunks[i]))
        if array is None:
            redo(i, why, write=True)
        else:
            arrays[i] = array
    state.wait_for_everyone()
    for i in range(n_shards):  # the other processes' shards, checked again as they are read
        if i not in arrays:
            array, why = _read_shard(paths[i], key, headers[i], len(chunks[i]))
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
