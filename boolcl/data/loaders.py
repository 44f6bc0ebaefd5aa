"""Load evaluation sets and corpora by name: the bundled sample, BoolQuestions, local folders.

BoolQuestions goes through `datasets.load_dataset(source, config, split=...)` whether
`source` is the hub id or a local copy laid out like the hub repository (its README
declares the configs), so the offline tests exercise the code users run online.
"""
from __future__ import annotations

import os
from pathlib import Path

from boolcl.data.beir import load_beir
from boolcl.data.hub import load_hf_split
from boolcl.data.jsonl import read_jsonl
from boolcl.data.schema import (
    BEIR_HINT,
    Context,
    CorpusDoc,
    EvalQuestion,
    RowError,
    TrainingExample,
    id_problem,
)
from boolcl.data.sets import Corpus, RetrievalSet
from boolcl.data.spec import BOOLQUESTIONS, parse_data_spec
from boolcl.errors import DataError

HUB_ID = "ustc-zhangzm/BoolQuestions"
MSMARCO_DEV_HUB = "mteb/msmarco"  # configs default (qrels), corpus, queries; the dev split has 6,980 queries
SAMPLE_DIR = Path(__file__).with_name("sample")


def _rows(ds, parse, label: str):
    out = []
    for i, row in enumerate(ds):
        try:
            out.append(parse(row))
        except RowError as e:
            raise DataError(label, i + 1, str(e), field=e.field) from None
    return out


def load_boolquestions(name: str, source: str = HUB_ID) -> RetrievalSet:
    """BoolQuestions MSMARCO or NaturalQuestions: the eval split and its full corpus."""
    config = BOOLQUESTIONS[name]
    qs = load_hf_split(source, config, "eval")
    questions = _rows(qs, EvalQuestion.from_dict, f"{source}[{config}] eval row")
    corpus_ds = load_hf_split(source, f"{config}-corpus", "corpus")
    missing = {"docid", "doc"} - set(corpus_ds.column_names)
    if missing:
        raise DataError(f"{source}[{config}-corpus]", None, f"corpus lacks column(s) {sorted(missing)}",
                        field=sorted(missing)[0])
    ids = [str(x) for x in corpus_ds["docid"]]
    docs = corpus_ds["doc"]
    if "title" in corpus_ds.column_names:  # NQ: encode as `title [SEP] doc`
        texts = [f"{t} [SEP] {d}" if t else d for t, d in zip(corpus_ds["title"], docs)]
    else:
        texts = list(docs)
    for i, (pid, text) in enumerate(zip(ids, texts)):
        if not isinstance(text, str) or not text.strip():
            raise DataError(f"{source}[{config}-corpus] row", i + 1, "field 'doc': is empty", field="doc")
        problem = id_problem(pid)
        if problem:
            raise DataError(f"{source}[{config}-corpus] row", i + 1, f"field 'docid': {problem}", field="docid")
    return RetrievalSet(name, questions, Corpus(ids, texts), f"{source}[{config}]")


def load_msmarco_dev(source: str = MSMARCO_DEV_HUB) -> RetrievalSet:
    """The original MS MARCO passage dev set: "does Boolean training cost general retrieval?"

    Questions are typed `simple` (they have no Boolean structure and no explicit negatives).
    """
    qrels = load_hf_split(source, "default", "dev")
    positives: dict[str, list[Context]] = {}
    for row in qrels:
        if float(row["score"]) > 0:
            positives.setdefault(str(row["query-id"]), []).append(Context(str(row["corpus-id"])))
    queries = load_hf_split(source, "queries", "queries")
    questions = [EvalQuestion(str(r["_id"]), r["text"], "simple", positives[str(r["_id"])])
                 for r in queries if str(r["_id"]) in positives]
    corpus_ds = load_hf_split(source, "corpus", "corpus")
    titles = corpus_ds["title"] if "title" in corpus_ds.column_names else None
    texts = corpus_ds["text"]
    if titles is not None:
        texts = [f"{t} {d}".strip() if t else d for t, d in zip(titles, texts)]
    return RetrievalSet("msmarco-dev", questions, Corpus([str(x) for x in corpus_ds["_id"]], list(texts)),
                        f"{source}[dev]")


def load_folder(path: str | os.PathLike, name: str | None = None) -> RetrievalSet:
    """A folder in the project's own layout: `eval.jsonl` + `corpus.jsonl`."""
    path = Path(path)
    if not (path / "eval.jsonl").is_file() and (path / "queries.jsonl").is_file() and (path / "qrels").is_dir():
        raise DataError(path / "eval.jsonl", None, f"file not found; the folder has queries.jsonl and qrels/: "
                        f"{BEIR_HINT}")
    questions = read_jsonl(path / "eval.jsonl", EvalQuestion.from_dict, unique=lambda q: q.qid)
    if not questions:  # caught here, before a model is loaded or a passage encoded
        raise DataError(path / "eval.jsonl", None, "holds no questions (every line is blank)")
    docs = read_jsonl(path / "corpus.jsonl", CorpusDoc.from_dict, unique=lambda d: d.docid)
    if not docs:
        raise DataError(path / "corpus.jsonl", None, "holds no passages (every line is blank)")
    rs = RetrievalSet(name or path.name, questions, Corpus.from_docs(docs), str(path))
    check_references(rs, path / "eval.jsonl")
    return rs


def check_references(rs: RetrievalSet, label: str | os.PathLike) -> None:
    """Every labelled passage must exist in the corpus, or the metrics would lie."""
    known = set(rs.corpus.ids)
    for i, q in enumerate(rs.questions):
        for key, ctxs in (("positive_ctxs", q.positive_ctxs), ("negative_ctxs", q.negative_ctxs)):
            for c in ctxs:
                if c.passage_id not in known:
                    raise DataError(label, i + 1, f"field '{key}': passage {c.passage_id!r} "
                                    f"(question {q.qid!r}) is not in the corpus", field=key)


def subsample(rs: RetrievalSet, max_corpus: int, seed: int) -> tuple[RetrievalSet, dict]:
    """Keep every labelled passage plus a seeded random sample of the rest, `max_corpus` in all.

    A quick run on a big corpus; the scores are easier than on the full corpus, so the
    returned description goes into results.json next to them.
    """
    import random

    labelled = {c.passage_id for q in rs.questions for c in q.positive_ctxs + q.negative_ctxs}
    rest = [i for i, pid in enumerate(rs.corpus.ids) if pid not in labelled]
    keep_rest = max(0, max_corpus - (len(rs.corpus) - len(rest)))
    chosen = set(random.Random(seed).sample(rest, min(keep_rest, len(rest))))
    keep = [i for i, pid in enumerate(rs.corpus.ids) if pid in labelled or i in chosen]
    corpus = Corpus([rs.corpus.ids[i] for i in keep], [rs.corpus.texts[i] for i in keep])
    note = {"max_corpus": max_corpus, "seed": seed, "labelled_kept": len(keep) - len(chosen),
            "others_sampled": len(chosen), "of": len(rs.corpus)}
    return RetrievalSet(rs.name, rs.questions, corpus, rs.source), note


def load_retrieval_set(spec: str) -> RetrievalSet:
    """`sample`, `boolquestions-msmarco[:LOCAL_DIR]`, `boolquestions-nq[:LOCAL_DIR]`, `msmarco-dev`, `beir:PATH`,
    or a folder."""
    ds = parse_data_spec(spec)
    if ds.kind == "sample":
        return load_folder(SAMPLE_DIR, "sample")
    if ds.kind == "boolquestions":
        return load_boolquestions(ds.name, ds.path or HUB_ID)
    if ds.kind == "msmarco-dev":
        return load_msmarco_dev(ds.path or MSMARCO_DEV_HUB)
    if ds.kind == "folder":
        return load_folder(spec)
    if ds.kind == "beir":  # binary relevance here; `boolcl evaluate` scores the graded qrels
        return load_beir(ds.path, ds.split, ds.name).rset
    if ds.kind == "nevir":
        raise DataError(spec, None, "NevIR is a set of passage pairs, not a retrieval set; score it with "
                        "`boolcl evaluate MODEL data=nevir[:PATH]`")
    raise DataError(spec, None, "unknown data set; use 'sample', 'boolquestions-msmarco', 'boolquestions-nq', "
                    "'msmarco-dev' (optionally ':/path/to/local/copy'), quest..., birco-..., beir:PATH, nevir[:PATH], "
                    "or a folder with eval.jsonl and corpus.jsonl")


def pool_path(spec: str, name: str = "train.jsonl") -> Path:
    """A training pool's file: its examples (`train.jsonl`), or a file beside them (`corpus.jsonl`,
    `clusters.jsonl`)."""
    path = SAMPLE_DIR / "train.jsonl" if spec == "sample" else Path(spec)
    return path if name == "train.jsonl" else path.with_name(name)


def load_training_pool(spec: str) -> tuple[list[TrainingExample], Corpus | None]:
    """Training examples from the bundled pool or a JSONL file (+ its corpus when it has one)."""
    path, corpus_path = pool_path(spec), pool_path(spec, "corpus.jsonl")
    rows = read_jsonl(path, TrainingExample.from_dict, unique=lambda r: r.qid)
    corpus = None
    if corpus_path.is_file():
        corpus = Corpus.from_docs(read_jsonl(corpus_path, CorpusDoc.from_dict, unique=lambda d: d.docid))
    return rows, corpus
