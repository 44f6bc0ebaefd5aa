"""What a `data=` (or `generate.corpus=`) value names, decided in one place without loading anything.

`evaluate` writes `eval/<name>/`, `compare` looks for it there and names its tables by it,
the generator picks its grouping by `kind`: all of them read the name from here.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from boolcl.data import birco, quest
from boolcl.errors import DataError

BOOLQUESTIONS = {"boolquestions-msmarco": "MSMARCO", "boolquestions-nq": "NaturalQuestions"}
BENCHMARKS = ("quest", "birco", "beir", "nevir")
BEIR_SPLITS = ("test", "dev", "train")


@dataclass(frozen=True)
class DataSpec:
    spec: str  # as the user wrote it
    kind: str  # sample | boolquestions | msmarco-dev | quest | birco | beir | nevir | folder | file
    name: str  # the set's name in results.json, eval/<name>/ and compare's tables
    path: str | None = None  # local copy, folder or file; None: the bundled sample or the hub
    split: str | None = None  # quest / birco / beir split
    task: str | None = None  # birco task; None: every task found

    @property
    def is_benchmark(self) -> bool:
        return self.kind in BENCHMARKS


def parse_data_spec(spec: str, *, files: bool = False) -> DataSpec:
    """Read `spec`; `files=True` also accepts a JSONL file (a corpus for the generator)."""
    spec = str(spec)
    if spec == "sample":
        return DataSpec(spec, "sample", "sample")
    name, sep, local = spec.partition(":")
    local = local if sep and local else None
    if name in BOOLQUESTIONS:
        return DataSpec(spec, "boolquestions", name, local)
    if name == "msmarco-dev":
        return DataSpec(spec, "msmarco-dev", name, local)
    if name in ("quest", "quest-test"):
        return DataSpec(spec, "quest", "quest", local, "test")
    if name.startswith("quest-"):
        if name[6:] not in quest.SPLIT_FILES:
            raise DataError(spec, None, f"unknown QUEST split {name[6:]!r}; use quest[:PATH] (test) or "
                            f"quest-<split>[:PATH] with a split of {', '.join(quest.SPLIT_FILES)}")
        return DataSpec(spec, "quest", f"quest-{name[6:]}", local, name[6:])
    if name in ("birco", "birco-dev", "birco-test"):
        split = "dev" if name == "birco-dev" else "test"
        return DataSpec(spec, "birco", "birco" + ("-dev" if split == "dev" else ""), local, split)
    if name.startswith("birco-"):
        rest, split = name[6:], "test"
        for s in birco.SPLITS:
            if rest.endswith(f"-{s}") and rest[: -len(s) - 1] in birco.TASKS:
                rest, split = rest[: -len(s) - 1], s
        if rest not in birco.TASKS:
            raise DataError(spec, None, f"unknown BIRCO task {rest!r}; use birco-<task>[-dev][:PATH] with a task "
                            f"of {', '.join(birco.TASKS)}, or birco[:PATH] for all")
        return DataSpec(spec, "birco", f"birco-{rest}" + ("" if split == "test" else f"-{split}"), local, split, rest)
    if name in ("beir",) + tuple(f"beir-{s}" for s in BEIR_SPLITS):
        split = name[5:] or "test"
        if local is None:
            raise DataError(spec, None, "a BEIR set needs its location: data=beir:PATH (a folder with corpus.jsonl, "
                            "queries.jsonl and qrels/<split>.tsv, a local copy of an MTEB hub repository, or a hub "
                            f"id such as mteb/scifact); data=beir-<split>:PATH for a split of {', '.join(BEIR_SPLITS)}")
        folder = Path(local).name or local.rstrip("/").rsplit("/", 1)[-1]
        return DataSpec(spec, "beir", f"beir-{folder}" + ("" if split == "test" else f"-{split}"), local, split)
    if name.startswith("beir-") and not Path(spec).exists():
        raise DataError(spec, None, f"unknown BEIR split {name[5:]!r}; use beir:PATH (test) or beir-<split>:PATH "
                        f"with a split of {', '.join(BEIR_SPLITS)}")
    if name == "nevir":
        return DataSpec(spec, "nevir", "nevir", local, "test")
    path = Path(spec)
    if path.is_dir():
        return DataSpec(spec, "folder", path.name or spec, spec)
    if files and path.is_file():
        return DataSpec(spec, "file", path.stem, spec)
    return DataSpec(spec, "unknown", path.name or spec, spec)
