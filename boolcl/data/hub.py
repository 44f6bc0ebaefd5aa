"""Reading hub datasets, or local copies laid out like the hub repository, through `datasets`."""
from __future__ import annotations

import hashlib
from pathlib import Path

from boolcl.errors import DataError
from boolcl.files import cache_root


def _hub_error(source: str, config: str, err: Exception) -> DataError:
    hint = (f"could not load {source!r} config {config!r} ({type(err).__name__}: {err}). "
            "Without access to the Hugging Face hub, download the dataset repository elsewhere "
            "and point at the folder: data=boolquestions-msmarco:/path/to/BoolQuestions")
    return DataError(source, None, hint)


def files_stamp(folder: Path) -> str:
    """A cheap identity for a folder's contents: every file's relative name, size and mtime."""
    h = hashlib.blake2b(digest_size=12)
    for p in sorted(folder.rglob("*")):
        if p.is_file():
            st = p.stat()
            h.update(f"{p.relative_to(folder)}:{st.st_size}:{st.st_mtime_ns}".encode())
    return h.hexdigest()


def local_cache_dir(folder: Path) -> str:
    """A datasets cache folder keyed by the local copy's path and files.

    `datasets` keys its cache for a local repository by folder name and config only, so
    two different local copies (or an edited one) would silently share stale Arrow files.
    """
    key = hashlib.blake2b(f"{folder.resolve()}:{files_stamp(folder)}".encode(), digest_size=8).hexdigest()
    return str(cache_root() / "datasets" / key)


def load_hf_split(source: str, config: str, split: str):
    """`datasets.load_dataset` for a hub id or a local copy of a hub repository."""
    import datasets

    cache_dir = local_cache_dir(Path(source)) if Path(source).is_dir() else None
    try:
        return datasets.load_dataset(source, config, split=split, cache_dir=cache_dir)
    except Exception as err:  # datasets raises many types for network/offline/missing files
        raise _hub_error(source, config, err) from None
