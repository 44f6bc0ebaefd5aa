"""BIRCO (Wang et al., 2024): five retrieval tasks with complex objectives, scored per task.

Each query comes with its own candidate pool, and a system ranks only that pool. Two
sources are read:

- the release files as the authors lay them out: `<root>/<task>/test_set.pickle` (or
  `dev_set.pickle`), also under `<root>/datasets/<task>/` as in the BIRCO repository. A
  set is a dict `{"query": {qid: text}, "corpus": {cid: text}, "qrel": {qid: {cid: grade}}}`;
  the candidate pool of a query is exactly the keys of its qrel dict, grades are 0/1
  (0/1/2 for clinical-trial, fractions for DORIS-MAE). Pickles are read with
  `safe_pickle`, never `pickle.load`.
- the MTEB copies on the Hugging Face hub (`mteb/BIRCO-<Task>-Test`, configs `corpus`,
  `queries` and `default` = qrels, split `test`), through `load_hf_split`, from the hub or a
  local copy of the repository. Their qrels keep the grade-0 rows, so the pools survive.

Rank files (`<root>/ranks/<task>/e5_rank.pickle`, the authors' published rankings) are
`{qid: [cid, ...]}`, best first, over that query's pool.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass
from numbers import Integral, Real
from pathlib import Path

from boolcl.data import safe_pickle
from boolcl.data.hub import load_hf_split
from boolcl.errors import DataError

TASKS = ("arguana", "clinical-trial", "doris-mae", "relic", "wtb")
SPLITS = ("test", "dev")
HUB_IDS = {
    "arguana": "mteb/BIRCO-ArguAna-Test",
    "clinical-trial": "mteb/BIRCO-ClinicalTrial-Test",
    "doris-mae": "mteb/BIRCO-DorisMae-Test",
    "relic": "mteb/BIRCO-Relic-Test",
    "wtb": "mteb/BIRCO-WTB-Test",
}


@dataclass
class BircoTask:
    """One BIRCO task split: queries, passages, and graded qrels whose keys are the pools."""

    task: str
    split: str
    queries: dict[str, str]
    corpus: dict[str, str]
    qrels: dict[str, dict[str, float | int]]
    source: str

    def pool(self, qid: str) -> list[str]:
        return list(self.qrels[qid])

    @property
    def name(self) -> str:
        return f"birco-{self.task}" + ("" if self.split == "test" else f"-{self.split}")

    def describe(self) -> dict:
        sizes = [len(p) for p in self.qrels.values()]
        grades = sorted({g for rel in self.qrels.values() for g in rel.values()})
        return {"task": self.task, "split": self.split, "queries": len(self.queries),
                "passages": len(self.corpus), "judged": sum(sizes),
                "pool_size": {"min": min(sizes), "max": max(sizes), "mean": sum(sizes) / len(sizes)},
                "grades": grades if len(grades) <= 10 else [grades[0], "...", grades[-1]],
                "queries_without_relevant": sum(1 for rel in self.qrels.values()
                                                if not any(g > 0 for g in rel.values()))}


def _id(value, label: str, where: str, field: str) -> str:
    """Ids arrive as str, numpy.str_ (a str subclass) or, now and then, ints."""
    if isinstance(value, str):
        if not value.strip():
            raise DataError(where, None, f"field {field!r}: empty {label}", field=field)
        return str(value)
    if isinstance(value, Integral) and not isinstance(value, bool):
        return str(int(value))
    raise DataError(where, None, f"field {field!r}: {label} must be a string, got {type(value).__name__} "
                    f"({value!r:.40})", field=field)


def _texts(obj, where: str, field: str) -> dict[str, str]:
    if not isinstance(obj, dict):
        raise DataError(where, None, f"field {field!r}: must be a dict {{id: text}}, got {type(obj).__name__}",
                        field=field)
    out: dict[str, str] = {}
    for key, text in obj.items():
        k = _id(key, "id", where, field)
        if not isinstance(text, str) or not text.strip():
            raise DataError(where, None, f"field {field!r}: text of {k!r} must be a non-empty string, "
                            f"got {type(text).__name__}", field=field)
        if k in out:
            raise DataError(where, None, f"field {field!r}: id {k!r} appears twice", field=field)
        out[k] = text
    if not out:
        raise DataError(where, None, f"field {field!r}: is empty", field=field)
    return out


def _grade(value, where: str, qid: str, cid: str) -> float | int:
    if isinstance(value, bool) or not isinstance(value, Real) or not math.isfinite(float(value)):
        raise DataError(where, None, f"field 'qrel': grade of ({qid!r}, {cid!r}) must be a finite number, "
                        f"got {value!r:.40}", field="qrel")
    f = float(value)
    return int(f) if f.is_integer() else f


def build_task(task: str, split: str, data, where: str) -> BircoTask:
    """Validate a release-format dict (`query`, `corpus`, `qrel`) and normalise its ids."""
    if not isinstance(data, dict):
        raise DataError(where, None, f"must hold a dict with 'query', 'corpus' and 'qrel', got {type(data).__name__}")
    for key in ("query", "corpus", "qrel"):
        if key not in data:
            raise DataError(where, None, f"field {key!r}: is missing (found keys {sorted(map(str, data))})", field=key)
    queries = _texts(data["query"], where, "query")
    corpus = _texts(data["corpus"], where, "corpus")
    raw = data["qrel"]
    if not isinstance(raw, dict):
        raise DataError(where, None, f"field 'qrel': must be a dict {{qid: {{cid: grade}}}}, got {type(raw).__name__}",
                        field="qrel")
    qrels: dict[str, dict[str, float | int]] = {}
    for qkey, rel in raw.items():
        qid = _id(qkey, "query id", where, "qrel")
        if qid not in queries:
            raise DataError(where, None, f"field 'qrel': query {qid!r} is not in 'query'", field="qrel")
        if not isinstance(rel, dict) or not rel:
            raise DataError(where, None, f"field 'qrel': the pool of query {qid!r} must be a non-empty dict "
                            f"{{cid: grade}}", field="qrel")
        pool: dict[str, float | int] = {}
        for ckey, grade in rel.items():
            cid = _id(ckey, "passage id", where, "qrel")
            if cid not in corpus:
                raise DataError(where, None, f"field 'qrel': passage {cid!r} (pool of query {qid!r}) is not in "
                                "'corpus'", field="qrel")
            pool[cid] = _grade(grade, where, qid, cid)
        qrels[qid] = pool
    missing = [q for q in queries if q not in qrels]
    if missing:
        raise DataError(where, None, f"field 'qrel': {len(missing)} queries have no candidate pool "
                        f"(first: {missing[0]!r})", field="qrel")
    return BircoTask(task, split, queries, corpus, qrels, where)


def release_candidates(root: Path, task: str, split: str) -> list[Path]:
    """Where a release set may lie under `root`, in the order they are tried."""
    name = f"{split}_set.pickle"
    return [root / task / name, root / "datasets" / task / name, root / name]


def is_hub_copy(folder: Path) -> bool:
    """A local copy of a hub dataset repository: a README declaring configs, no release layout."""
    readme = folder / "README.md"
    if not readme.is_file() or "config_name" not in readme.read_text(encoding="utf-8", errors="replace"):
        return False
    release = [folder / t for t in TASKS] + [folder / "datasets"]
    return not any(p.is_dir() for p in release) and not any(folder.glob("*.pickle"))


def load_birco_files(path: str | os.PathLike, task: str, split: str = "test") -> BircoTask:
    """A task from the release files: a `.pickle` file, a task folder, or the release root."""
    path = Path(path)
    if path.is_file():
        target = path
    else:
        tried = release_candidates(path, task, split)
        target = next((p for p in tried if p.is_file()), None)
        if target is None:
            raise DataError(path, None, f"no BIRCO {task} {split} set here; looked for "
                            + ", ".join(str(p) for p in tried))
    return build_task(task, split, safe_pickle.load(target), str(target))


def _column(ds, names: tuple[str, ...], label: str) -> list:
    for name in names:
        if name in ds.column_names:
            return list(ds[name])
    raise DataError(label, None, f"lacks column {names[0]!r} (columns: {ds.column_names})", field=names[0])


def load_birco_hub(task: str, source: str | None = None) -> BircoTask:
    """The MTEB copy of a task's test split: from the hub, or a local copy of its repository."""
    source = source or HUB_IDS[task]
    try:
        corpus_ds = load_hf_split(source, "corpus", "test")
        queries_ds = load_hf_split(source, "queries", "test")
        qrels_ds = load_hf_split(source, "default", "test")
    except DataError as e:
        cause = e.__context__ or e
        raise DataError(source, None, f"could not load BIRCO {task} from {source!r} "
                        f"({type(cause).__name__}: {str(cause)[:300]}). Without the Hugging Face hub, use the "
                        f"release files: data=birco-{task}:/path/to/birco (a folder holding "
                        f"{task}/test_set.pickle, as in github.com/BIRCO-benchmark/BIRCO datasets/)") from None
    def label(config: str) -> str:
        return f"{source}[{config}]"

    corpus_ids = _column(corpus_ds, ("_id", "id", "corpus-id"), label("corpus"))
    corpus_text = _column(corpus_ds, ("text",), label("corpus"))
    query_ids = _column(queries_ds, ("_id", "id", "query-id"), label("queries"))
    query_text = _column(queries_ds, ("text",), label("queries"))
    q = _column(qrels_ds, ("query-id", "query_id", "qid"), label("default"))
    c = _column(qrels_ds, ("corpus-id", "corpus_id", "docid"), label("default"))
    s = _column(qrels_ds, ("score", "relevance"), label("default"))
    qrel: dict[str, dict] = {}
    for qid, cid, grade in zip(q, c, s):
        qrel.setdefault(str(qid), {})[str(cid)] = grade
    data = {"query": {str(i): t for i, t in zip(query_ids, query_text)},
            "corpus": {str(i): t for i, t in zip(corpus_ids, corpus_text)}, "qrel": qrel}
    out = build_task(task, "test", data, f"{source}[{task}]")
    if all(all(g > 0 for g in rel.values()) for rel in out.qrels.values()):
        raise DataError(source, None, "its qrels list only relevant passages, so the candidate pools of the "
                        "BIRCO protocol cannot be recovered; use the release files instead")
    return out


def load_birco(task: str, source: str | None = None, split: str = "test") -> BircoTask:
    """`task` from release files or a hub copy; `source` None means the hub (test split only)."""
    if task not in TASKS:
        raise DataError(f"birco-{task}", None, f"unknown BIRCO task; tasks: {', '.join(TASKS)}")
    if split not in SPLITS:
        raise DataError(f"birco-{task}", None, f"unknown split {split!r}; splits: {', '.join(SPLITS)}")
    path = Path(source).expanduser() if source is not None else None
    if path is None or not path.exists():
        if source is not None and (source.startswith((".", "/", "~")) or source.count("/") != 1):
            raise DataError(source, None, "no such file or folder (give the BIRCO release root, a task "
                            "folder, a .pickle file, or a hub dataset id such as " + HUB_IDS[task] + ")")
        if split != "test":
            raise DataError(f"birco-{task}-{split}", None, "the hub copies hold only the test split; the dev "
                            f"split needs the release files: data=birco-{task}-{split}:/path/to/birco")
        return load_birco_hub(task, source)
    if path.is_dir() and is_hub_copy(path) and not any(p.is_file() for p in release_candidates(path, task, split)):
        return load_birco_hub(task, str(path))
    return load_birco_files(path, task, split)


def available_tasks(root: str | os.PathLike, split: str = "test") -> list[str]:
    """Tasks whose `split` set exists under a release root."""
    root = Path(root)
    return [t for t in TASKS if any(p.is_file() for p in release_candidates(root, t, split)[:2])]


# ----------------------------------------------------------------------------- rank files

def rank_file(root: str | os.PathLike, task: str, model: str = "e5") -> Path:
    """`<root>/ranks/<task>/<model>_rank.pickle` (or `<root>/evaluation/ranks/...` as upstream)."""
    root = Path(root)
    for base in (root / "ranks", root / "evaluation" / "ranks", root):
        p = base / task / f"{model}_rank.pickle"
        if p.is_file():
            return p
    return root / "ranks" / task / f"{model}_rank.pickle"


def load_rank_pickle(path: str | os.PathLike) -> dict[str, list[str]]:
    """A BIRCO rank file `{qid: [cid, ...]}` (best first), ids normalised to str."""
    where = str(path)
    data = safe_pickle.load(path)
    if not isinstance(data, dict) or not data:
        raise DataError(where, None, f"a rank file must be a non-empty dict {{qid: [cid, ...]}}, "
                        f"got {type(data).__name__}")
    out: dict[str, list[str]] = {}
    for key, ranking in data.items():
        qid = _id(key, "query id", where, "qid")
        if not isinstance(ranking, (list, tuple)):
            raise DataError(where, None, f"field {qid!r}: the ranking must be a list of passage ids, "
                            f"got {type(ranking).__name__}", field=qid)
        cids = [_id(c, "passage id", where, qid) for c in ranking]
        if len(set(cids)) != len(cids):
            dup = next(c for c in cids if cids.count(c) > 1)
            raise DataError(where, None, f"field {qid!r}: passage {dup!r} is ranked twice", field=qid)
        if qid in out:
            raise DataError(where, None, f"query {qid!r} appears twice", field=qid)
        out[qid] = cids
    return out
