"""Writing files so that a killed run never leaves half of one, and where caches live.

Every file boolcl writes goes through `atomic_write_bytes`: a temporary file in the same
folder, flushed to disk, renamed over the target. A reader sees the old file or the new
one, never a torn one, also across processes.

A folder that must be whole to be used (a model) is written by `new_folder`: into
`<out>.partial`, renamed to `out` when complete, so a reader never finds half of one.

A temporary folder boolcl makes (`<out>.partial`, a run's `.final-tmp`) gets the mark file
`.boolcl-temp` before anything else, and only a folder holding it is ever removed: a folder
of the user's that happens to have the same name makes the command stop instead.

`check_output_folder` is what every command asks before it writes into `out=`: a folder that
exists and is not empty is used only when it is the command's own (its caller says how to tell,
e.g. the run's saved config.yaml) or when the user sets `overwrite=true`.

`check_writable` is the pre-flight every stage runs before its compute: an output folder
that cannot be written, or lacks room, fails in a second instead of after hours.
"""
from __future__ import annotations

import hashlib
import io
import os
import shutil
import tempfile
from collections.abc import Callable
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


TEMP_MARK = ".boolcl-temp"  # written first into every temporary folder boolcl makes
OVERWRITE = "overwrite=true"  # the setting that lets a command write into a folder it does not own


def check_output_folder(out: str | os.PathLike, *, overwrite: bool = False, own: Callable[[Path], bool] | None = None,
                        whose: str = "this run's", what: str = "output folder (out=)") -> None:
    """Raise ConfigError when `out` is a folder that holds anything and is neither the command's own
    (`own(out)`, e.g. the same command's earlier, unfinished output) nor given up by `overwrite`.
    Reads files only, so a command calls it before any work."""
    out = Path(out)
    if overwrite or not out.is_dir() or not any(out.iterdir()):
        return
    try:
        if own is not None and own(out):
            return
    except (OSError, ValueError, KeyError, TypeError, AttributeError):  # an unreadable record is not ours
        pass
    raise ConfigError(f"{what} {out} exists, is not empty and is not {whose} output: choose another out=, "
                      f"or set {OVERWRITE} to write into it (files of the same name are replaced)")


def remove_temp_folder(path: str | os.PathLike) -> None:
    """Remove `path` when it is a temporary folder boolcl made (it holds `TEMP_MARK`) or an empty
    one; anything else found there is refused, never removed."""
    path = Path(path)
    if not os.path.lexists(path):
        return
    if path.is_dir() and not path.is_symlink():
        if (path / TEMP_MARK).is_file():
            shutil.rmtree(path)
            return
        if not any(path.iterdir()):
            path.rmdir()
            return
    raise ConfigError(f"{path} is in the way of a temporary folder and was not made by boolcl (no {TEMP_MARK} in it); "
                      f"move it away, or choose another out=")


def make_temp_folder(path: str | os.PathLike) -> Path:
    """`path` as a new, empty temporary folder holding only `TEMP_MARK`; one an earlier, killed
    attempt left is removed first (`remove_temp_folder`: only when boolcl made it)."""
    path = Path(path)
    remove_temp_folder(path)
    path.mkdir(parents=True)
    try:
        (path / TEMP_MARK).write_text("a temporary folder of boolcl's, removed when found\n")
    except BaseException:
        shutil.rmtree(path, ignore_errors=True)
        raise
    return path


def move_entries(src: Path, dest: Path, last: str | None = None, move=os.replace) -> None:
    """Move `src`'s entries (all but `TEMP_MARK`) into the folder `dest`, each replacing its namesake,
    `last` after every other; then `src` is removed. `move` is a parameter so a test can stop it."""
    names = sorted(p.name for p in src.iterdir() if p.name not in (TEMP_MARK, last))
    if last is not None and (src / last).exists():
        names.append(last)
    for name in names:
        target = dest / name
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)  # a folder can only be replaced once it is gone
        move(src / name, target)
    (src / TEMP_MARK).unlink(missing_ok=True)
    src.rmdir()


@contextmanager
def new_folder(out: str | os.PathLike, *, overwrite: bool = False, own: Callable[[Path], bool] | None = None,
               whose: str = "this command's"):
    """Yield `<out>.partial`, made as a temporary folder (`make_temp_folder`), to fill; its entries
    become `out` when the block ends, and it is removed if the block raises. An `out` that holds
    anything is written into only when `own(out)` or `overwrite` says so (`check_output_folder`),
    its entries of the same name replaced."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise ConfigError(f"{out} exists and is not a folder; choose another out=")
    check_output_folder(out, overwrite=overwrite, own=own, whose=whose)
    partial = make_temp_folder(out.with_name(out.name + ".partial"))
    try:
        yield partial
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)  # made above, by this process
        raise
    if out.exists():
        move_entries(partial, out)
    else:
        partial.rename(out)
        (out / TEMP_MARK).unlink(missing_ok=True)


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
