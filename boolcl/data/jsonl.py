"""JSONL in and out, validating every row.

A bad row stops the read with the file, the line number and the field, because a
silently skipped row changes what a run trained or evaluated on. Every line-based
reader in boolcl goes through `iter_lines`: UTF-8 only (a bad byte names its line),
at most MAX_LINE_BYTES per line. Writes go through
boolcl.files' atomic writer, so a killed run never leaves half a file.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Callable, Iterable, Iterator, TypeVar

from boolcl.data.schema import RowError
from boolcl.errors import DataError
from boolcl.files import atomic_write_text

T = TypeVar("T")

MAX_LINE_BYTES = 1_000_000  # the longest line any boolcl reader accepts (a passage is a few KB)


def decode_utf8(data: bytes, path: str | os.PathLike, lineno: int | None) -> str:
    """`data` as text; bytes that are not UTF-8 stop the read with the file, line and byte column."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        if lineno is None:  # a whole file: find the line of the bad byte
            lineno = data.count(b"\n", 0, e.start) + 1
            column = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1
        else:
            column = e.start + 1
        raise DataError(path, lineno, f"not valid UTF-8 (byte 0x{data[e.start]:02x} at byte column {column}); "
                        "boolcl reads UTF-8 text only: re-save the file as UTF-8") from None


def iter_lines(path: str | os.PathLike) -> Iterator[tuple[int, str]]:
    """(line number, text) per line, newline stripped, UTF-8 checked; a line over MAX_LINE_BYTES is refused.

    Reads in bounded pieces, so an over-long line (a file without newlines, a stray
    binary) is measured and refused without being held in memory.
    """
    path = Path(path)
    if not path.is_file():
        raise DataError(path, None, "file not found")
    with path.open("rb") as fh:
        lineno = 0
        while True:
            raw = fh.readline(MAX_LINE_BYTES + 1)
            if not raw:
                return
            lineno += 1
            if len(raw) > MAX_LINE_BYTES and not raw.endswith(b"\n"):
                size = len(raw)
                while not raw.endswith(b"\n"):
                    raw = fh.readline(1 << 20)
                    if not raw:
                        break
                    size += len(raw)
                size -= 1 if raw.endswith(b"\n") else 0
                raise DataError(path, lineno, f"line is {size:,} bytes long; the limit is {MAX_LINE_BYTES:,} "
                                "(boolcl.data.jsonl.MAX_LINE_BYTES)")
            raw = raw.rstrip(b"\r\n") if raw.endswith(b"\n") else raw
            if lineno == 1 and raw.startswith(b"\xef\xbb\xbf"):  # a UTF-8 byte-order mark
                raw = raw[3:]
            yield lineno, decode_utf8(raw, path, lineno)


def read_text_checked(path: str | os.PathLike) -> str:
    """A whole text file (a JSON document), UTF-8 checked with the line of a bad byte."""
    path = Path(path)
    if not path.is_file():
        raise DataError(path, None, "file not found")
    data = path.read_bytes()
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    return decode_utf8(data, path, None)


def iter_jsonl(path: str | os.PathLike, parse: Callable[[dict], T]) -> Iterator[T]:
    """Yield `parse(row)` for each non-blank line; raise DataError on the first bad one."""
    path = Path(path)
    for lineno, line in iter_lines(path):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            raise DataError(path, lineno, f"invalid JSON ({e.msg} at column {e.colno})") from None
        except ValueError as e:  # e.g. an integer with more digits than Python converts
            raise DataError(path, lineno, f"invalid JSON ({e})") from None
        try:
            yield parse(row)
        except RowError as e:
            raise DataError(path, lineno, str(e), field=e.field) from None


def read_jsonl(path: str | os.PathLike, parse: Callable[[dict], T], *, unique: Callable[[T], str] | None = None) -> list[T]:
    """Read a whole file; with `unique`, also reject a repeated id."""
    rows = []
    seen: dict[str, int] = {}
    for i, row in enumerate(iter_jsonl(path, parse)):
        if unique is not None:
            key = unique(row)
            if key in seen:
                raise DataError(path, None, f"id {key!r} appears twice (rows {seen[key] + 1} and {i + 1})")
            seen[key] = i
        rows.append(row)
    return rows


def write_jsonl(path: str | os.PathLike, rows: Iterable) -> int:
    """Write rows (dataclasses with `to_dict`, or dicts) atomically; return the count."""
    lines = []
    for row in rows:
        data = row.to_dict() if hasattr(row, "to_dict") else row
        lines.append(json.dumps(data, ensure_ascii=False))
    atomic_write_text(path, "".join(line + "\n" for line in lines))
    return len(lines)
