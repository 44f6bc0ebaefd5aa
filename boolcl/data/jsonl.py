"""JSONL in and out, validating every row.

A bad row stops the read with the file, the line number and the field, because a
silently skipped row changes what a run trained or evaluated on. Writes go through
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


def iter_jsonl(path: str | os.PathLike, parse: Callable[[dict], T]) -> Iterator[T]:
    """Yield `parse(row)` for each non-blank line; raise DataError on the first bad one."""
    path = Path(path)
    if not path.is_file():
        raise DataError(path, None, "file not found")
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise DataError(path, lineno, f"invalid JSON ({e.msg} at column {e.colno})") from None
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
