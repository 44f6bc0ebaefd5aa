"""Writing files so that a killed run never leaves half of one, and where caches live.

Every file boolcl writes goes through `atomic_write_bytes`: a temporary file in the same
folder, flushed to disk, renamed over the target. A reader sees the old file or the new
one, never a torn one, also across processes.

A folder that must be whole to be used (a model) is written by `new_folder`: into
`<out>.partial`, renamed to `out` when complete, so a reader never finds half of one.

`check_writable` is the pre-flight every stage runs before its compute: an output folder
that cannot be written, or lacks room, fails in a second instead of after hours.
"""
from __future__ import annotations

import hashlib
import io
import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path

from boolcl.errors import ConfigError


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


@contextmanager
def new_folder(out: str | os.PathLike):
    """Yield `<out>.partial` (not yet created) to fill; it becomes `out` when the block ends and
    is removed if the block raises. An `out` that exists is refused, never overwritten."""
    out = Path(out)
    if out.exists():
        raise ConfigError(f"{out} exists; choose another folder")
    partial = out.with_name(out.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)  # left by a killed earlier attempt
    try:
        yield partial
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    partial.rename(out)


def file_digest(path: str | os.PathLike, make=hashlib.sha256) -> str:
    """Hex digest of a file's bytes, read in 1 MiB chunks (model weights do not fit a read())."""
    h = make()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


def check_writable(folder: str | os.PathLike, need_bytes: int = 0, what: str = "output folder") -> None:
    """Raise ConfigError unless `folder` (or, when it does not exist yet, the nearest folder above
    it, where it will be created) accepts a new file and has `need_bytes` free. It writes a probe
    file and removes it (permission bits say nothing to root or on a read-only mount) and leaves
    no folder behind."""
    folder = Path(folder)
    probe = folder
    while not os.path.lexists(probe) and probe.parent != probe:
        probe = probe.parent
    if not probe.is_dir():
        raise ConfigError(f"{what} {folder} cannot be created: {probe} exists and is not a folder")
    try:
        fd, tmp = tempfile.mkstemp(dir=probe, prefix=".boolcl-write-check.")
        os.close(fd)
        os.unlink(tmp)
    except OSError as err:
        raise ConfigError(f"{what} {folder} is not writable: cannot create a file in {probe} "
                          f"({err.strerror or err})") from None
    if need_bytes > 0:
        free = shutil.disk_usage(probe).free
        if free < need_bytes:
            raise ConfigError(f"{what} {folder} has {human_bytes(free)} free on its disk but needs about "
                              f"{human_bytes(need_bytes)} ({need_bytes} bytes); free space or choose another out=")
