"""What the development-set builders of this folder share: reading Debian's dictd files (a
.index of headword, offset, length in dictd's base64, and a dictzip .dict.dz) with errors that
name the file and line, and writing a set into a folder whole or not at all."""
from __future__ import annotations

import gzip
import json
import zlib
from collections.abc import Callable
from pathlib import Path

from boolcl.files import new_folder

B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"  # dictd's offsets, big-endian
B64_VALUE = {c: i for i, c in enumerate(B64)}


class DictdError(Exception):
    """A problem with the input files or the output folder; the message names the file (and line)."""


def b64_number(s: str, path: Path, lineno: int) -> int:
    if not s:
        raise DictdError(f"{path}:{lineno}: empty offset or length (expected dictd base64 digits)")
    n = 0
    for ch in s:
        if ch not in B64_VALUE:
            raise DictdError(f"{path}:{lineno}: {s!r} is not a dictd base64 number (bad character {ch!r})")
        n = n * 64 + B64_VALUE[ch]
    return n


def read_index(path: Path, install_hint: str) -> list[tuple[str, int, int, int]]:
    """Rows (headword, offset, length, line number) of a dictd .index file."""
    if not path.is_file():
        raise DictdError(f"{path}: file not found; {install_hint}")
    rows = []
    with open(path, encoding="utf-8", errors="strict") as f:
        try:
            for lineno, line in enumerate(f, 1):
                line = line.rstrip("\n")
                if not line.strip():
                    continue
                parts = line.split("\t")
                if len(parts) != 3:
                    raise DictdError(f"{path}:{lineno}: expected 'headword<TAB>offset<TAB>length' (3 fields), "
                                     f"got {len(parts)}: {line[:80]!r}")
                head, off, length = parts
                rows.append((head, b64_number(off, path, lineno), b64_number(length, path, lineno), lineno))
        except UnicodeDecodeError as e:
            raise DictdError(f"{path}:{lineno + 1}: not UTF-8 ({e.reason})") from None
    if not rows:
        raise DictdError(f"{path}: holds no index lines")
    return rows


def read_dict(path: Path, install_hint: str) -> bytes:
    """The uncompressed text of a dictzip (gzip) .dict.dz file."""
    if not path.is_file():
        raise DictdError(f"{path}: file not found; {install_hint}")
    try:
        with gzip.open(path, "rb") as f:
            return f.read()
    except (OSError, EOFError, zlib.error) as e:
        raise DictdError(f"{path}: not a dictzip/gzip file ({e})") from None


def check_span(head: str, off: int, length: int, lineno: int, data: bytes, index_path: Path,
               dict_path: Path) -> None:
    """An index row must point inside the dictionary's text."""
    if off + length > len(data) or length <= 0:
        raise DictdError(f"{index_path}:{lineno}: entry {head!r} at offset {off} length {length} lies outside "
                         f"{dict_path} ({len(data)} bytes uncompressed)")


def made_here(folder: Path, name: str) -> bool:
    """A folder a builder wrote (its stats.json names the set): rebuilt in place without --overwrite."""
    try:
        return json.loads((folder / "stats.json").read_text(encoding="utf-8")).get("name") == name
    except (OSError, ValueError):
        return False


def write_whole(out: Path, name: str, overwrite: bool, write: Callable[[Path], dict]) -> dict:
    """Run `write(folder)` into a fresh folder that replaces `out` when it returns, so `out` holds the
    whole set or is left as it was; a folder that holds anything but an earlier build of `name` is
    refused unless `overwrite`."""
    if out.is_dir() and any(out.iterdir()) and not (overwrite or made_here(out, name)):
        raise DictdError(f"{out} holds other files and is not a set this builder wrote: choose another --out, "
                         "or pass --overwrite to write into it (files of the same name are replaced)")
    with new_folder(out, overwrite=True) as partial:  # checked just above
        return write(Path(partial))
