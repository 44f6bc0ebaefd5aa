"""BEIR-layout retrieval sets: the format most retrieval benchmarks (BEIR, MTEB) ship in.

A folder holds

- `corpus.jsonl`: one `{"_id", "title", "text"}` per line (`title` optional); a passage is
  encoded as `title text`, as the MS MARCO dev reader does;
- `queries.jsonl`: one `{"_id", "text"}` per line;
- `qrels/<split>.tsv`: `query-id<TAB>corpus-id<TAB>score`, an optional header line, graded
  relevance. A grade above 0 is relevant (nDCG uses the grade as gain); 0 is judged not
  relevant; a grade below 0 names an explicit negative, which NegRecall@k counts.

The same set can come through `datasets` instead: a hub id (`mteb/scifact`) or a local copy
of such a repository (its README declares the configs `corpus`, `queries` and `default`, the
qrels, with one split per qrels file). A folder is read directly when it has `corpus.jsonl`
and `qrels/<split>.tsv`; a folder with a README.md but no such qrels file goes through
`datasets`.

Queries without any relevant passage in the split are left out (nothing to find); judged
passages missing from the corpus are kept in the qrels (they count as never retrieved)
and counted in `describe()`, as are qrels rows whose query is not in the queries.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from pathlib import Path

from boolcl.data.hub import load_hf_split
from boolcl.data.jsonl import iter_jsonl, iter_lines
from boolcl.data.schema import Context, EvalQuestion, RowError, _str, id_problem
from boolcl.data.sets import Corpus, RetrievalSet
from boolcl.errors import DataError

QRELS_HEADER = ("query-id", "corpus-id", "score")


@dataclass
class BeirSet:
    """A BEIR split: the questions and corpus to search, plus the graded judgements they came from."""

    rset: RetrievalSet
    qrels: dict[str, dict[str, int]]  # {qid: {pid: grade > 0}}
    negatives: dict[str, list[str]]  # {qid: [pid with grade < 0]}
    split: str
    layout: str  # "files" | "datasets"
    counts: dict = field(default_factory=dict)

    def describe(self) -> dict:
        return {"benchmark": "beir", "split": self.split, "layout": self.layout,
                "relevance": "graded: > 0 relevant (nDCG gain = grade), 0 judged not relevant, < 0 explicit "
                             "negative (NegRecall)", **self.counts}


def passage_text(title: str | None, text: str) -> str:
    """`title text`, or the text alone when there is no title."""
    return f"{title} {text}".strip() if title else text


def _passage(row) -> tuple[str, str]:
    if not isinstance(row, dict):
        raise RowError("<row>", f"must be a JSON object, got {type(row).__name__}")
    pid = _str(row, "_id", is_id=True)
    text = _str(row, "text", allow_empty=True)
    title = _str(row, "title", required=False, allow_empty=True)
    return pid, passage_text(title, text)


def _query(row) -> tuple[str, str]:
    if not isinstance(row, dict):
        raise RowError("<row>", f"must be a JSON object, got {type(row).__name__}")
    return _str(row, "_id", is_id=True), _str(row, "text")


def _grade(value, where, line) -> int:
    if isinstance(value, bool):
        raise DataError(where, line, f"field 'score': {value!r} is not an integer grade", field="score")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    try:
        return int(str(value).strip())
    except ValueError:
        raise DataError(where, line, f"field 'score': {value!r} is not an integer grade", field="score") from None


def read_qrels_tsv(path: Path) -> list[tuple[str, str, int, int]]:
    """(query id, passage id, grade, line) per judgement line; a bad line stops the read."""
    if not path.is_file():
        raise DataError(path, None, "file not found (a BEIR folder has qrels/<split>.tsv)")
    rows = []
    for lineno, line in iter_lines(path):
        if not line.strip():
            continue
        parts = line.split("\t")
        if lineno == 1 and tuple(p.strip() for p in parts) == QRELS_HEADER:
            continue
        if len(parts) != 3:
            raise DataError(path, lineno, "a qrels line has 3 tab-separated columns 'query-id corpus-id "
                            f"score', this one has {len(parts)}", field="columns")
        qid, pid, score = (p.strip() for p in parts)
        _check_pair(qid, pid, path, lineno)
        rows.append((qid, pid, _grade(score, path, lineno), lineno))
    return rows


def _check_pair(qid: str, pid: str, where, line: int) -> None:
    """A judgement's two ids: present, and usable as ids (no whitespace)."""
    for key, value in (("query-id", qid), ("corpus-id", pid)):
        if not value:
            raise DataError(where, line, f"field {key!r}: is empty", field=key)
        problem = id_problem(value)
        if problem:
            raise DataError(where, line, f"field {key!r}: {problem}", field=key)


def _read_unique(path: Path, parse, what: str) -> dict[str, str]:
    out: dict[str, str] = {}
    lines: dict[str, int] = {}
    if not path.is_file():
        raise DataError(path, None, f"file not found (a BEIR folder has {what})")
    for i, (key, text) in enumerate(iter_jsonl(path, parse), 1):
        if key in out:
            raise DataError(path, None, f"id {key!r} appears twice (rows {lines[key]} and {i})", field="_id")
        out[key], lines[key] = text, i
    if not out:
        raise DataError(path, None, "holds no rows (every line is blank)")
    return out


def _from_files(folder: Path, split: str) -> tuple[dict, dict, list, str]:
    corpus = _read_unique(folder / "corpus.jsonl", _passage, "corpus.jsonl")
    queries = _read_unique(folder / "queries.jsonl", _query, "queries.jsonl")
    qrels = read_qrels_tsv(folder / "qrels" / f"{split}.tsv")
    return corpus, queries, qrels, str(folder / "qrels" / f"{split}.tsv")


def _columns(ds, label: str, needed: tuple[str, ...]) -> None:
    missing = [c for c in needed if c not in ds.column_names]
    if missing:
        raise DataError(label, None, f"lacks column(s) {missing} (has {ds.column_names})", field=missing[0])


def _from_datasets(source: str, split: str) -> tuple[dict, dict, list, str]:
    """The MTEB hub layout: configs `corpus` (split corpus), `queries` (split queries), `default` (qrels)."""
    corpus_ds = load_hf_split(source, "corpus", "corpus")
    label = f"{source}[corpus] row"
    _columns(corpus_ds, f"{source}[corpus]", ("_id", "text"))
    titles = corpus_ds["title"] if "title" in corpus_ds.column_names else [None] * len(corpus_ds)
    corpus: dict[str, str] = {}
    for i, (pid, title, text) in enumerate(zip(corpus_ds["_id"], titles, corpus_ds["text"]), 1):
        try:
            pid, text = _passage({"_id": pid, "title": title, "text": text})
        except RowError as e:
            raise DataError(label, i, str(e), field=e.field) from None
        if pid in corpus:
            raise DataError(label, i, f"id {pid!r} appears twice", field="_id")
        corpus[pid] = text
    queries_ds = load_hf_split(source, "queries", "queries")
    _columns(queries_ds, f"{source}[queries]", ("_id", "text"))
    queries: dict[str, str] = {}
    for i, (qid, text) in enumerate(zip(queries_ds["_id"], queries_ds["text"]), 1):
        try:
            qid, text = _query({"_id": qid, "text": text})
        except RowError as e:
            raise DataError(f"{source}[queries] row", i, str(e), field=e.field) from None
        queries[qid] = text
    qrels_ds = load_hf_split(source, "default", split)
    _columns(qrels_ds, f"{source}[default/{split}]", QRELS_HEADER)
    where = f"{source}[default/{split}] row"
    qrels = []
    for i, (qid, pid, score) in enumerate(zip(qrels_ds["query-id"], qrels_ds["corpus-id"], qrels_ds["score"]), 1):
        if qid is None or pid is None or not str(qid).strip() or not str(pid).strip():
            key = "query-id" if qid is None or not str(qid).strip() else "corpus-id"
            raise DataError(where, i, f"field {key!r}: is missing", field=key)
        _check_pair(str(qid), str(pid), where, i)
        qrels.append((str(qid), str(pid), _grade(score, where, i), i))
    return corpus, queries, qrels, f"{source}[default/{split}]"


def load_beir(source: str, split: str = "test", name: str | None = None) -> BeirSet:
    """Read a BEIR folder, a local copy of an MTEB hub repository, or a hub id (see the module doc)."""
    path = Path(source)
    if path.is_dir():
        direct = (path / "corpus.jsonl").is_file() or not (path / "README.md").is_file()
        if (path / "README.md").is_file() and not (path / "qrels" / f"{split}.tsv").is_file():
            direct = False
    elif path.exists():
        raise DataError(path, None, "a BEIR set is a folder (corpus.jsonl, queries.jsonl, qrels/<split>.tsv)")
    elif path.is_absolute() or source.startswith(".") or source.count("/") != 1:
        raise DataError(path, None, "folder not found (data=beir:PATH wants a BEIR folder or a hub id such as "
                        "mteb/scifact)")
    else:
        direct = False
    if direct:
        corpus, queries, judged, qrels_label = _from_files(path, split)
        layout = "files"
    else:
        try:
            corpus, queries, judged, qrels_label = _from_datasets(source, split)
        except DataError as e:  # hub.py's hint names BoolQuestions; say what works for BEIR
            if "Without access" not in str(e):
                raise
            reason = str(e).removeprefix(f"{e.path}: ").split(". Without access")[0]
            raise DataError(e.path, None, f"{reason}. Without access to the hub, point at a local folder: "
                            "data=beir:/path/to/<set> (corpus.jsonl, queries.jsonl, qrels/<split>.tsv) or a local "
                            "copy of the hub repository") from None
        layout = "datasets"

    grades: dict[str, dict[str, int]] = {}
    for qid, pid, grade, line in judged:
        if pid in grades.get(qid, {}):
            raise DataError(qrels_label, line, f"passage {pid!r} is judged twice for query {qid!r}",
                            field="corpus-id")
        grades.setdefault(qid, {})[pid] = grade
    unknown_queries = sorted(q for q in grades if q not in queries)
    missing_docs = sorted({p for rel in grades.values() for p in rel if p not in corpus})
    if not judged:
        raise DataError(qrels_label, None, "holds no judgements")
    questions, qrels, negatives = [], {}, {}
    without_positive = 0
    for qid, rel in grades.items():
        if qid not in queries:
            continue
        pos = {p: g for p, g in rel.items() if g > 0}
        if not pos:
            without_positive += 1
            continue
        neg = [p for p, g in rel.items() if g < 0]
        qrels[qid], negatives[qid] = pos, neg
        questions.append(EvalQuestion(qid, queries[qid], "simple", [Context(p) for p in pos],
                                      [Context(p) for p in neg]))
    if not questions:
        raise DataError(qrels_label, None, "no query of the split has a relevant passage (grade > 0) "
                        "in queries.jsonl")
    if unknown_queries or missing_docs:
        warnings.warn(f"{qrels_label}: {len(unknown_queries)} judged queries are not in the queries and "
                      f"{len(missing_docs)} judged passages are not in the corpus", stacklevel=2)
    label = name or f"beir-{path.name or source}"
    rset = RetrievalSet(label, questions, Corpus(list(corpus), list(corpus.values())), f"{source}[{split}]")
    counts = {"judgements": len(judged), "queries_judged": len(grades), "queries_without_positive": without_positive,
              "queries_not_in_queries_file": len(unknown_queries), "judged_passages_not_in_corpus": len(missing_docs),
              "with_explicit_negatives": sum(1 for n in negatives.values() if n)}
    return BeirSet(rset, qrels, negatives, split, layout, counts)

