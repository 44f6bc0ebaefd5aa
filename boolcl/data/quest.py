"""QUEST (Malaviya et al., 2023): entity-seeking queries with implicit set operations.

Read in the release format of google-research/language/quest:

- examples files (`test.jsonl`, `val.jsonl`, `train.jsonl`, `train_aug.jsonl`), one JSON object
  per line: `query` (the paraphrased query), `docs` (titles of the relevant documents),
  `original_query` (the templated query, atomic categories inside `<mark></mark>`; empty for
  augmented queries), `scores` (unused), `metadata` (`template`, `domain`, ratings, ...);
- `documents.jsonl` (from `documents.zip`), one `{title, text}` per line; titles are unique.

Queries have no ids in the release; as in QUEST's own tooling, a query's id is its 0-based
position in the examples file. Documents are identified by title; in run files and
results the id is the title with whitespace replaced by `_` (Wikipedia's own spelling),
so that TREC run lines stay whitespace-separated.

Templates map to operators: `_` -> simple, `_ or _` / `_ or _ or _` -> or,
`_ that are also _` / `_ that are also both _ and _` -> and, `_ that are not _` -> not, and
the combination `_ that are also _ but not _` -> and+not.

NOT negatives (for NegRecall) are derived only where the data provides them: the excluded
category of a NOT query, and the categories it is combined with, must each appear as an
atomic (`_`) query in one of the examples files read; the negatives are then the documents
in all of those categories (e.g. A ∩ B for "A that are not B"), minus the gold documents.
Queries without them are left out of NegRecall, which the loader reports.

The examples files are also on the hub (`cmalaviya/quest`); the documents are not, so
encoding with a model needs a local `documents.jsonl`.
"""
from __future__ import annotations

import os
import random
import re
import warnings
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from boolcl.data.jsonl import iter_jsonl
from boolcl.data.schema import RowError
from boolcl.data.sets import Corpus
from boolcl.errors import DataError

HUB_ID = "cmalaviya/quest"
SPLIT_FILES = {"test": "test.jsonl", "val": "val.jsonl", "train": "train.jsonl"}
EXAMPLE_FILES = ("test.jsonl", "val.jsonl", "train.jsonl", "train_aug.jsonl")
DOCUMENTS = "documents.jsonl"
RELEASE_URL = "https://storage.googleapis.com/gresearch/quest/"

TEMPLATE_OPERATORS = {
    "_": "simple",
    "_ or _": "or",
    "_ or _ or _": "or",
    "_ that are also _": "and",
    "_ that are also both _ and _": "and",
    "_ that are not _": "not",
    "_ that are also _ but not _": "and+not",
}
OPERATOR_ORDER = ("and", "or", "not")
_MARK = re.compile(r"<mark>(.*?)</mark>", re.S)


def operator_of(template: str) -> str:
    """The operator(s) a template applies: known templates by table, others by their words."""
    t = " ".join(template.split())
    if t in TEMPLATE_OPERATORS:
        return TEMPLATE_OPERATORS[t]
    if "_" not in t:
        raise ValueError(f"{template!r} is not a QUEST template (no '_' slot)")
    words = set(re.findall(r"[a-z]+", t.lower()))
    ops = set()
    if "or" in words:
        ops.add("or")
    if words & {"also", "and", "both"}:
        ops.add("and")
    if words & {"not", "except", "excluding", "without"}:
        ops.add("not")
    if not ops:
        if t.count("_") == 1:
            return "simple"
        raise ValueError(f"template {template!r} names no operator this loader knows "
                         f"(known templates: {', '.join(repr(k) for k in TEMPLATE_OPERATORS)})")
    return "+".join(op for op in OPERATOR_ORDER if op in ops)


def categories_of(original_query: str | None) -> list[str]:
    """The atomic categories marked in `original_query`, in order."""
    return [" ".join(m.split()) for m in _MARK.findall(original_query or "")]


def category_key(name: str) -> str:
    return " ".join(name.split()).casefold()


def doc_id(title: str) -> str:
    """A whitespace-free id for a document title (Wikipedia spells spaces as '_')."""
    return re.sub(r"\s", "_", title.strip())


@dataclass
class QuestExample:
    qid: str
    query: str
    docs: list[str]  # gold titles
    template: str
    operator: str
    original_query: str | None = None
    domain: str | None = None
    categories: list[str] = field(default_factory=list)


def parse_example(row, qid: str) -> QuestExample:
    """One examples-file row, validated; raises RowError naming the field."""
    if not isinstance(row, dict):
        raise RowError("<row>", f"must be a JSON object, got {type(row).__name__}")
    query = row.get("query")
    if not isinstance(query, str) or not query.strip():
        raise RowError("query", "is missing" if query is None else "must be a non-empty string")
    docs = row.get("docs")
    if not isinstance(docs, list):
        raise RowError("docs", "is missing" if docs is None else f"must be a list of titles, got {type(docs).__name__}")
    if not docs:
        raise RowError("docs", "is empty (every QUEST query has at least one relevant document)")
    for i, d in enumerate(docs):
        if not isinstance(d, str) or not d.strip():
            raise RowError(f"docs[{i}]", "must be a non-empty title string")
    if len(set(docs)) != len(docs):
        raise RowError("docs", "lists a title twice")
    original = row.get("original_query")
    if original is not None and not isinstance(original, str):
        raise RowError("original_query", f"must be a string or null, got {type(original).__name__}")
    meta = row.get("metadata")
    if not isinstance(meta, dict):
        raise RowError("metadata", "is missing" if meta is None else f"must be an object, got {type(meta).__name__}")
    template = meta.get("template")
    if not isinstance(template, str) or not template.strip():
        raise RowError("metadata.template", "is missing" if template is None else "must be a non-empty string")
    try:
        operator = operator_of(template)
    except ValueError as e:
        raise RowError("metadata.template", str(e)) from None
    domain = meta.get("domain")
    return QuestExample(qid=qid, query=query, docs=list(docs), template=" ".join(template.split()),
                        operator=operator, original_query=original or None,
                        domain=domain if isinstance(domain, str) else None,
                        categories=categories_of(original))


def read_examples(path: str | os.PathLike) -> list[QuestExample]:
    """An examples file; qids are the rows' 0-based positions (blank lines skipped)."""
    counter = iter(range(10**9))
    return list(iter_jsonl(path, lambda row: parse_example(row, str(next(counter)))))


def _parse_document(row) -> tuple[str, str]:
    if not isinstance(row, dict):
        raise RowError("<row>", f"must be a JSON object, got {type(row).__name__}")
    title, text = row.get("title"), row.get("text")
    if not isinstance(title, str) or not title.strip():
        raise RowError("title", "is missing" if title is None else "must be a non-empty string")
    if not isinstance(text, str):
        raise RowError("text", "is missing" if text is None else f"must be a string, got {type(text).__name__}")
    return title, text


def read_documents(path: str | os.PathLike, sep: str = " [SEP] ") -> tuple[Corpus, dict[str, str]]:
    """`documents.jsonl` as a Corpus (ids from titles, texts `title [SEP] text`) and title -> id."""
    ids: list[str] = []
    texts: list[str] = []
    title_to_id: dict[str, str] = {}
    owner: dict[str, str] = {}
    for i, (title, text) in enumerate(iter_jsonl(path, _parse_document), 1):
        did = doc_id(title)
        if title in title_to_id:
            raise DataError(path, None, f"field 'title': {title!r} appears twice (document {i}; titles must "
                            "be unique)", field="title")
        if did in owner:
            raise DataError(path, None, f"field 'title': {title!r} (document {i}) and {owner[did]!r} share "
                            f"the id {did!r}", field="title")
        owner[did] = title
        title_to_id[title] = did
        ids.append(did)
        texts.append(f"{title}{sep}{text}" if text.strip() else title)
    if not ids:
        raise DataError(path, None, "holds no documents")
    return Corpus(ids, texts), title_to_id


def atomic_index(examples: list[QuestExample]) -> dict[str, set[str]]:
    """Category -> member titles, from atomic (`_`) queries with a marked category."""
    index: dict[str, set[str]] = {}
    for ex in examples:
        if ex.operator == "simple" and len(ex.categories) == 1:
            index.setdefault(category_key(ex.categories[0]), set()).update(ex.docs)
    return index


def derive_not_negatives(examples: list[QuestExample], index: dict[str, set[str]]) -> dict[str, list[str]]:
    """{qid: titles} for NOT queries whose categories are all in `index` (see module doc)."""
    out: dict[str, list[str]] = {}
    for ex in examples:
        if "not" not in ex.operator.split("+") or len(ex.categories) < 2:
            continue
        keys = [category_key(c) for c in ex.categories]
        if not all(k in index for k in keys):
            continue
        members = set.intersection(*(index[k] for k in keys)) - set(ex.docs)
        if members:
            out[ex.qid] = sorted(members)
    return out


@dataclass
class QuestSet:
    name: str
    split: str
    examples: list[QuestExample]
    corpus: Corpus | None  # None when only the examples were read (enough to score a run)
    source: str
    negatives: dict[str, list[str]]  # {qid: doc ids}
    atomic_files: list[str]  # the examples files the NOT negatives were derived from
    missing_gold: int = 0  # gold titles absent from the documents file

    def qrels(self) -> dict[str, dict[str, int]]:
        return {ex.qid: {doc_id(t): 1 for t in ex.docs} for ex in self.examples}

    def groups(self) -> dict[str, str]:
        return {ex.qid: ex.operator for ex in self.examples}

    def negrecall_note(self) -> str:
        not_queries = sum(1 for ex in self.examples if "not" in ex.operator.split("+"))
        with_negs = len(self.negatives)
        if with_negs == 0:
            return (f"NegRecall not available: none of the {not_queries} NOT queries has derivable negatives "
                    "(their categories do not all appear as atomic '_' queries in the examples files read: "
                    f"{', '.join(self.atomic_files) or 'none'})")
        return (f"NegRecall over the {with_negs} of {not_queries} NOT queries whose excluded and included "
                "categories all appear as atomic '_' queries; negatives = documents in all of them minus the gold")

    def describe(self) -> dict:
        templates: dict[str, dict] = {}
        for ex in self.examples:
            cell = templates.setdefault(ex.template, {"operator": ex.operator, "queries": 0})
            cell["queries"] += 1
        return {"benchmark": "quest", "split": self.split, "questions": len(self.examples),
                "passages": len(self.corpus) if self.corpus is not None else None,
                "operators": dict(Counter(ex.operator for ex in self.examples)),
                "templates": templates,
                "query_templates": {ex.qid: ex.template for ex in self.examples},
                "negrecall": {"queries": len(self.negatives), "note": self.negrecall_note(),
                              "derived_from": self.atomic_files},
                "missing_gold_documents": self.missing_gold}


def _hub_file(filename: str, repo: str) -> Path:
    from huggingface_hub import hf_hub_download

    try:
        return Path(hf_hub_download(repo, filename, repo_type="dataset"))
    except Exception as err:  # offline, missing file, auth: the hub raises many kinds
        raise DataError(repo, None, f"could not download {filename} from the hub dataset {repo!r} "
                        f"({type(err).__name__}: {str(err)[:300]}). Without the hub, download the QUEST release "
                        f"files ({RELEASE_URL}{filename} and {RELEASE_URL}documents.zip, unzipped) into one "
                        "folder and use data=quest:/path/to/folder") from None


def _looks_like_hub_id(source: str) -> bool:
    return source.count("/") == 1 and not source.startswith((".", "/", "~"))


def load_quest(source: str | None = None, split: str = "test", *, need_corpus: bool = True) -> QuestSet:
    """QUEST `split` from a release folder (examples + documents.jsonl), an examples file, or the hub.

    `source`: a folder holding `<split>.jsonl` (test.jsonl / val.jsonl / train.jsonl) and
    `documents.jsonl`; an examples `.jsonl` file (documents.jsonl next to it); a folder with
    only `documents.jsonl` (examples then come from the hub); None or a hub id: the examples
    from the hub, which is enough to score a ranking file but not to encode (no documents).
    """
    if split not in SPLIT_FILES:
        raise DataError(f"quest-{split}", None, f"unknown split; splits: {', '.join(SPLIT_FILES)}")
    filename = SPLIT_FILES[split]
    hub_repo = None
    if source is None or (not Path(source).expanduser().exists() and _looks_like_hub_id(source)):
        hub_repo, folder, examples_path = source or HUB_ID, None, None
    else:
        path = Path(source).expanduser()
        if not path.exists():
            raise DataError(source, None, "no such file or folder")
        if path.is_file():
            folder, examples_path = path.parent, path
        else:
            folder = path
            examples_path = path / filename if (path / filename).is_file() else None
            if examples_path is None:
                if not (path / DOCUMENTS).is_file():
                    raise DataError(path, None, f"holds neither {filename} nor {DOCUMENTS} (QUEST release files)")
                hub_repo = HUB_ID
    if examples_path is None:
        examples_path = _hub_file(filename, hub_repo)
    examples = read_examples(examples_path)
    if not examples:
        raise DataError(examples_path, None, "holds no examples")

    # Atomic queries from every examples file at hand give the category members for NOT negatives.
    sources: list[tuple[str, list[QuestExample]]] = [(str(examples_path), examples)]
    for other in EXAMPLE_FILES:
        if other == filename and examples_path.name == filename:
            continue
        p = folder / other if folder is not None else None
        if p is not None and p.is_file():
            sources.append((str(p), read_examples(p)))
        elif hub_repo is not None:
            try:
                sources.append((f"{hub_repo}/{other}", read_examples(_hub_file(other, hub_repo))))
            except DataError:
                pass  # optional: fewer derivable negatives, reported in describe()
    index = atomic_index([ex for _, exs in sources for ex in exs])
    atomic_files = [name for name, exs in sources if any(ex.operator == "simple" for ex in exs)]
    neg_titles = derive_not_negatives(examples, index)

    corpus = None
    missing = 0
    docs_path = folder / DOCUMENTS if folder is not None else None
    if docs_path is not None and docs_path.is_file():
        corpus, title_to_id = read_documents(docs_path)
        missing = sum(1 for ex in examples for t in ex.docs if t not in title_to_id)
        if missing:
            warnings.warn(f"{missing} gold titles of {examples_path.name} are not in {docs_path}; they stay in "
                          "the qrels, so those queries cannot reach full recall", stacklevel=2)
        neg_titles = {q: [t for t in ts if t in title_to_id] for q, ts in neg_titles.items()}
        neg_titles = {q: ts for q, ts in neg_titles.items() if ts}
    elif need_corpus:
        where = docs_path or hub_repo or HUB_ID
        raise DataError(where, None, f"QUEST's documents ({DOCUMENTS}) are needed to encode and search, and "
                        f"they are not on the hub: download {RELEASE_URL}documents.zip, unzip it next to "
                        f"{filename}, and use data=quest:/path/to/folder")
    negatives = {q: [doc_id(t) for t in ts] for q, ts in neg_titles.items()}
    name = "quest" if split == "test" else f"quest-{split}"
    where = str(examples_path) if hub_repo is None else f"{hub_repo}/{filename}"
    if docs_path is not None and corpus is not None and hub_repo is not None:
        where += f" + {docs_path}"
    return QuestSet(name, split, examples, corpus, where, negatives, atomic_files, missing)


def subsample(qset: QuestSet, max_passages: int | None, seed: int = 0) -> QuestSet:
    """Keep every gold and negative document plus a seeded random sample of the rest."""
    if not max_passages or qset.corpus is None or len(qset.corpus) <= max_passages:
        return qset
    keep = {d for rel in qset.qrels().values() for d in rel} | {d for ns in qset.negatives.values() for d in ns}
    rest = [i for i, d in enumerate(qset.corpus.ids) if d not in keep]
    n_extra = max(0, max_passages - sum(1 for d in qset.corpus.ids if d in keep))
    chosen = set(random.Random(seed).sample(rest, min(n_extra, len(rest))))
    idx = [i for i, d in enumerate(qset.corpus.ids) if d in keep or i in chosen]
    corpus = Corpus([qset.corpus.ids[i] for i in idx], [qset.corpus.texts[i] for i in idx])
    return QuestSet(qset.name, qset.split, qset.examples, corpus, qset.source, qset.negatives,
                    qset.atomic_files, qset.missing_gold)


def read_predictions(path: str | os.PathLike, qset: QuestSet) -> dict[str, list[tuple[str, float]]]:
    """A QUEST predictions file (examples format, `docs` best first, optional `scores`) as a run.

    Rows are matched to the gold queries by their `query` text, as QUEST's own
    `analyze_retriever.py` does.
    """
    by_text: dict[str, list[str]] = {}
    for ex in qset.examples:
        by_text.setdefault(ex.query, []).append(ex.qid)

    def parse(row):
        if not isinstance(row, dict):
            raise RowError("<row>", f"must be a JSON object, got {type(row).__name__}")
        query, docs, scores = row.get("query"), row.get("docs"), row.get("scores")
        if not isinstance(query, str):
            raise RowError("query", "is missing" if query is None else "must be a string")
        if query not in by_text:
            raise RowError("query", f"{query[:80]!r} is not a query of {qset.name} ({qset.source})")
        if not isinstance(docs, list) or not all(isinstance(d, str) for d in docs):
            raise RowError("docs", "must be a list of document titles, best first")
        if scores is not None and (not isinstance(scores, list) or len(scores) != len(docs)
                                   or not all(isinstance(s, (int, float)) and not isinstance(s, bool) for s in scores)):
            raise RowError("scores", "must be null or a list of numbers as long as 'docs'")
        ids = [doc_id(d) for d in docs]
        if len(set(ids)) != len(ids):
            raise RowError("docs", "lists a document twice")
        vals = [float(s) for s in scores] if scores is not None else [float(len(docs) - i) for i in range(len(docs))]
        return query, list(zip(ids, vals))

    run: dict[str, list[tuple[str, float]]] = {}
    for query, ranked in iter_jsonl(path, parse):
        for qid in by_text[query]:
            run[qid] = ranked
    return run
