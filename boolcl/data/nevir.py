"""NevIR (Weller et al., EACL 2024): pairs of passages that differ by a negation, one question each.

Each pair is `{id, q1, doc1, q2, doc2}`: `doc1` answers `q1`, `doc2` answers `q2`. Where from:

- no PATH: the hub copy `orionweller/NevIR` through `datasets` (split `test`);
- PATH a `.json` file holding a list of pairs (the authors' `NevIR_test.json`) or a `.jsonl`
  file with one pair per line;
- PATH a folder: its `NevIR_test.json` (or `test.json` / `test.jsonl`; for another split,
  `NevIR_<split>.json` ...) when present, else a local copy of the hub repository read
  through `datasets`.

A pair with a missing or empty field stops the read, naming the row (1-based) and field.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path

from boolcl.data.hub import load_hf_split
from boolcl.data.jsonl import iter_lines, read_text_checked
from boolcl.data.schema import RowError, _str
from boolcl.errors import DataError

HUB_ID = "orionweller/NevIR"
FIELDS = ("id", "q1", "doc1", "q2", "doc2")
FILE_NAMES = ("NevIR_{split}.json", "{split}.json", "{split}.jsonl")  # in a folder, for the split asked


def file_names(split: str) -> list[str]:
    """The names a folder's file of `split` may have, in the order they are looked for."""
    return [name.format(split=split) for name in FILE_NAMES]


@dataclass(frozen=True)
class NevirPair:
    id: str
    q1: str
    doc1: str
    q2: str
    doc2: str

    @classmethod
    def from_dict(cls, row) -> NevirPair:
        if not isinstance(row, dict):
            raise RowError("<row>", f"must be a JSON object, got {type(row).__name__}")
        return cls(*(_str(row, f, is_id=f == "id") for f in FIELDS))


@dataclass
class NevirSet:
    pairs: list[NevirPair]
    source: str
    split: str = "test"

    def fingerprint(self) -> str:
        """A hash of every pair: two results on the same pairs carry the same value."""
        h = hashlib.blake2b(digest_size=16)
        for p in self.pairs:
            h.update(json.dumps(asdict(p), sort_keys=True).encode() + b"\n")
        return h.hexdigest()


def _parse(rows, label: str) -> list[NevirPair]:
    pairs, seen = [], {}
    for i, row in enumerate(rows, 1):
        try:
            pair = NevirPair.from_dict(row)
        except RowError as e:
            rid = row.get("id") if isinstance(row, dict) else None
            named = f" (id {rid!r})" if rid is not None and e.field != "id" else ""
            raise DataError(label, None, f"row {i}{named}: {e}", field=e.field) from None
        if pair.id in seen:
            raise DataError(label, None, f"row {i}: pair id {pair.id!r} also on row {seen[pair.id]}", field="id")
        seen[pair.id] = i
        pairs.append(pair)
    if not pairs:
        raise DataError(label, None, "holds no pairs")
    return pairs


def _read_file(path: Path) -> list[NevirPair]:
    if path.suffix == ".jsonl":
        rows = []
        for lineno, line in iter_lines(path):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as e:
                    raise DataError(path, lineno, f"invalid JSON ({e.msg} at column {e.colno})") from None
        return _parse(rows, str(path))
    text = read_text_checked(path)
    try:
        rows = json.loads(text)
    except json.JSONDecodeError as e:
        raise DataError(path, e.lineno, f"invalid JSON ({e.msg} at column {e.colno})") from None
    if not isinstance(rows, list):
        raise DataError(path, None, f"a NevIR file holds a JSON list of pairs, this one a {type(rows).__name__}")
    return _parse(rows, str(path))


def load_nevir(source: str | None = None, split: str = "test") -> NevirSet:
    """The NevIR pairs of `split` from a file, a folder or the hub (see the module doc)."""
    if source is None:
        source = HUB_ID
    path = Path(source)
    if path.is_file():
        return NevirSet(_read_file(path), str(path), split)
    if path.is_dir():
        names = file_names(split)
        for name in names:
            if (path / name).is_file():
                return NevirSet(_read_file(path / name), str(path / name), split)
        if not (path / "README.md").is_file():
            raise DataError(path, None, f"no NevIR file here (looked for {', '.join(names)}, or a README.md "
                            "of a hub copy)")
    elif source != HUB_ID and (path.is_absolute() or source.startswith(".") or source.count("/") != 1):
        raise DataError(path, None, "not found (data=nevir:PATH wants a NevIR .json file, a folder holding "
                        "NevIR_test.json, or a local copy of the hub repository orionweller/NevIR)")
    try:
        ds = load_hf_split(source, "default", split)
    except DataError as e:  # hub.py's hint names BoolQuestions; say what works for NevIR
        reason = str(e).removeprefix(f"{e.path}: ").split(". Without access")[0]
        raise DataError(source, None, f"{reason}. Without access to the hub, point at a local copy: "
                        "data=nevir:/path/to/NevIR_test.json (or a folder holding it)") from None
    missing = [f for f in FIELDS if f not in ds.column_names]
    if missing:
        raise DataError(f"{source}[{split}]", None, f"lacks column(s) {missing} (has {ds.column_names})",
                        field=missing[0])
    return NevirSet(_parse(ds.select_columns(list(FIELDS)), f"{source}[{split}]"), f"{source}[{split}]", split)
