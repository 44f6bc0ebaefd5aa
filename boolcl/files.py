"""Writing files so that a killed run never leaves half of one, and where caches live.

Every file boolcl writes goes through `atomic_write_bytes`: a temporary file in the same
folder, flushed to disk, renamed over the target. A reader sees the old file or the new
one, never a torn one, also across processes.
"""
from __future__ import annotations

import io
import os
import tempfile
from pathlib import Path


def cache_root() -> Path:
    """The one cache root: $BOOLCL_CACHE, else ~/.cache/boolcl (embeddings, datasets)."""
    return Path(os.environ.get("BOOLCL_CACHE", Path.home() / ".cache" / "boolcl"))


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_save_npy(path: str | os.PathLike, array) -> None:
    import numpy as np

    buf = io.BytesIO()
    np.save(buf, array)
    atomic_write_bytes(path, buf.getvalue())
