"""The passages to generate from: load, check, leave out what must not be used.

`generate.corpus` is `sample`, `boolquestions-msmarco[:DIR]`, `boolquestions-nq[:DIR]`
(the corpus configs of the hub dataset, or a local copy), a corpus JSONL file or a
folder holding `corpus.jsonl`. An empty corpus or a repeated id stops the run with
the file and the id; passages that are too short are skipped and counted.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from boolcl.data.hub import load_hf_split
from boolcl.data.jsonl import read_jsonl
from boolcl.data.loaders import HUB_ID, SAMPLE_DIR, load_retrieval_set
from boolcl.data.schema import CorpusDoc
from boolcl.data.spec import BOOLQUESTIONS, parse_data_spec
from boolcl.errors import DataError


@dataclass
class Passages:
    """Usable passages in corpus order, plus what was left out and why."""

    source: str
    ids: list[str]
    docs: list[CorpusDoc]
    total: int
    skipped: Counter = field(default_factory=Counter)

    def __len__(self) -> int:
        return len(self.ids)

    def text(self, i: int) -> str:
        """What encoders see (NQ-style rows as `title [SEP] doc`) and what the examples carry."""
        return self.docs[i].text()


def _from_hub(name: str, source: str) -> tuple[list[CorpusDoc], str]:
    config = f"{BOOLQUESTIONS[name]}-corpus"
    ds = load_hf_split(source, config, "corpus")
    missing = {"docid", "doc"} - set(ds.column_names)
    label = f"{source}[{config}]"
    if missing:
        raise DataError(label, None, f"corpus lacks column(s) {sorted(missing)}", field=sorted(missing)[0])
    titles = ds["title"] if "title" in ds.column_names else [None] * len(ds)
    docs = []
    for i, (docid, doc, title) in enumerate(zip(ds["docid"], ds["doc"], titles)):
        if docid is None or doc is None or not isinstance(doc, str):
            raise DataError(label, i + 1, "field 'doc' or 'docid' is missing", field="doc")
        docs.append(CorpusDoc(str(docid), doc, title or None))
    return docs, label


def read_docs(spec: str) -> tuple[list[CorpusDoc], str]:
    ds = parse_data_spec(spec, files=True)
    if ds.kind == "sample":
        return read_jsonl(SAMPLE_DIR / "corpus.jsonl", CorpusDoc.from_dict), "sample"
    if ds.kind == "boolquestions":
        return _from_hub(ds.name, ds.path or HUB_ID)
    if ds.kind in ("folder", "file"):
        path = Path(spec) / "corpus.jsonl" if ds.kind == "folder" else Path(spec)
        if path.is_file():
            return read_jsonl(path, CorpusDoc.from_dict), str(path)
    raise DataError(spec, None, "corpus not found; use generate.corpus=sample, boolquestions-msmarco, "
                    "boolquestions-nq (optionally ':/path/to/local/copy'), a corpus JSONL file or a folder "
                    "with corpus.jsonl")


def load_passages(spec: str, *, min_chars: int, exclude: str | None = None) -> Passages:
    docs, label = read_docs(spec)
    if not docs:
        raise DataError(label, None, "the corpus is empty: nothing to generate from")
    seen: dict[str, int] = {}
    for i, d in enumerate(docs):
        if d.docid in seen:
            raise DataError(label, None, f"passage id {d.docid!r} appears twice (rows {seen[d.docid] + 1} and "
                            f"{i + 1}); ids must be unique", field="docid")
        seen[d.docid] = i
    banned: set[str] = set()
    if exclude:
        rs = load_retrieval_set(exclude)
        for q in rs.questions:
            banned.update(c.passage_id for c in q.positive_ctxs + q.negative_ctxs)
    out = Passages(label, [], [], len(docs))
    for d in docs:
        if d.docid in banned:
            out.skipped[f"labelled in {exclude}"] += 1
        elif len(d.doc.strip()) < min_chars:
            out.skipped[f"shorter than {min_chars} characters"] += 1
        else:
            out.ids.append(d.docid)
            out.docs.append(d)
    if len(out) < 2:
        why = ", ".join(f"{n} {r}" for r, n in out.skipped.items()) or "none left"
        raise DataError(label, None, f"only {len(out)} usable passage(s) out of {len(docs)} ({why}); "
                        f"lower generate.min_passage_chars or use a larger corpus")
    return out
