"""Named passages: what a question wants from a passage it names.

Questions name passages in two ways. "Give an example of a wrestler that is not a sumo
wrestler" names a category, and the category's own description is not an answer; "Serologists
or immunologists" names its answers. The pool's Boolean questions name neither kind, so a
model trained on them learns one preference for whatever a question names, and the two kinds
pull it in opposite directions (docs/method.md). Two kinds of extra data, both built from the
pool's own groups, show the model each case:

- topic negatives (`train.named.topics`): each group's topic, as a passage of its own, is a
  labelled negative of the group's Boolean questions;
- named OR questions (`train.named.or_questions=N`): per group, N questions joining two of its
  passages' names with "or" ("Barn swallow or White stork?"), both passages positive.

A pool's groups come in one of two layouts, both read here:

- the sample's: `clusters.jsonl` beside the pool's `train.jsonl`, one row per group with
  `cluster`, `topic`, `docids` and `split`, the names being the titles in `corpus.jsonl`;
  only `split: train` groups (or rows without a split) are read, so a held-out group never
  reaches training;
- `boolcl generate`'s: `<stem>.groups.jsonl` beside `<stem>.jsonl`, one row per group with
  `cluster`, `topic` and `passages` (`docid`, `name`, `text`), from the generator's naming step.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field, replace
from pathlib import Path

from boolcl.data.jsonl import iter_jsonl, read_jsonl
from boolcl.data.loaders import pool_path
from boolcl.data.schema import Context, CorpusDoc, RowError, TrainingExample
from boolcl.data.sets import Corpus
from boolcl.errors import DataError

OR_FORMS = ("{a} or {b}", "What is {a} or {b}?", "{a} or {b}?")
NAMED_SEED = 0  # the named questions are data, the same for every training seed


@dataclass(frozen=True)
class Group:
    name: str
    topic: str | None
    docids: tuple[str, ...]
    names: dict[str, str] = field(default_factory=dict, compare=False)  # docid -> a short name (a title)


def _text(row: dict, key: str, what: str) -> str | None:
    value = row.get(key)
    if value is not None and (not isinstance(value, str) or not value.strip()):
        raise RowError(key, f"must be a non-empty string when given ({what})")
    return value


def _group(row) -> tuple[Group, dict[str, str]] | None:
    """One row of a groups file: (the group, the passage texts it carries); None for a held-out group."""
    if not isinstance(row, dict):
        raise RowError("<row>", f"must be a JSON object, got {type(row).__name__}")
    if row.get("split", "train") != "train":
        return None
    name = row.get("cluster")
    if not isinstance(name, str) or not name:
        raise RowError("cluster", "must name the group")
    topic = _text(row, "topic", "the group's topic")
    names, texts = {}, {}
    if "passages" in row:
        listed = row["passages"]
        if not isinstance(listed, list) or not all(isinstance(p, dict) and isinstance(p.get("docid"), str)
                                                   and isinstance(p.get("text"), str) for p in listed):
            raise RowError("passages", "must list objects with a 'docid' and a 'text'")
        for p in listed:
            texts[p["docid"]] = p["text"]
            if _text(p, "name", "a passage's name"):
                names[p["docid"]] = p["name"]
        docids = [p["docid"] for p in listed]
    else:
        docids = row.get("docids")
        if not isinstance(docids, list) or not all(isinstance(d, str) for d in docids):
            raise RowError("docids", "must list the group's passage ids")
    return Group(name, topic, tuple(docids), names), texts


def read_groups(path: Path) -> tuple[list[Group], dict[str, str]]:
    """The training groups of `path` in file order, and the passage texts it carries (generated
    layout); a bad row names its line and field."""
    groups, texts = [], {}
    for found in iter_jsonl(path, _group):
        if found is not None:
            groups.append(found[0])
            texts |= found[1]
    return groups, texts


def load_groups(spec: str, where: str) -> tuple[list[Group], Corpus, Path]:
    """A pool's training groups, with their passages' names; the passages the groups file adds
    to the pool's corpus (generated layout; the sample's are in its corpus already); the file."""
    clusters, stem = pool_path(spec, "clusters.jsonl"), Path(spec)
    generated = stem.with_name(f"{stem.stem}.groups.jsonl")
    if spec != "sample" and generated.is_file():
        groups, texts = read_groups(generated)
        return groups, Corpus(list(texts), list(texts.values())), generated
    if clusters.is_file() and pool_path(spec, "corpus.jsonl").is_file():
        groups, _ = read_groups(clusters)
        titles = {d.docid: d.title for d in read_jsonl(pool_path(spec, "corpus.jsonl"), CorpusDoc.from_dict)
                  if d.title}
        named = [replace(g, names={d: titles[d] for d in g.docids if d in titles}) for g in groups]
        return named, Corpus([], []), clusters
    raise DataError(where, None, f"train.named builds on the pool's groups: it needs {generated.name} beside the "
                    "pool (written by boolcl generate), or clusters.jsonl and corpus.jsonl beside its train.jsonl "
                    "(the bundled sample's layout). For a generated pool, run boolcl generate again with the settings "
                    "that made it and overwrite=true (its cached answers cost nothing; only naming the groups asks the "
                    "LLM), or train without named passages: train.named.topics=false train.named.or_questions=0")


def topic_passage_id(group: str) -> str:
    return f"{group}/topic"


def add_topic_negatives(examples: list[TrainingExample], corpus: Corpus, groups: list[Group],
                        where: str) -> tuple[list[TrainingExample], Corpus]:
    """Each group's topic as a passage (its topic as title and text, as the pool's passages have
    a title), a labelled negative of the group's AND, OR and NOT examples: after a NOT question's
    excluded passages, so an exclusion keeps its turn first; before the others' negatives."""
    topics = {g.name: g.topic for g in groups if g.topic}
    if not topics:
        raise DataError(where, None, "train.named.topics needs group topics: no training group of the pool has one",
                        field="topic")
    taken = set(corpus.ids) & {topic_passage_id(g) for g in topics}
    if taken:
        raise DataError(where, None, f"the corpus already holds a passage {sorted(taken)[0]!r}, the id a topic "
                        "passage would take")
    docs = [CorpusDoc(topic_passage_id(g), t[0].upper() + t[1:] + ".", title=t) for g, t in topics.items()]
    out = []
    for ex in examples:
        if ex.question_type not in ("and", "or", "not") or ex.group not in topics:
            out.append(ex)
            continue
        topic = Context(topic_passage_id(ex.group))
        negs = [*ex.negative_ctxs, topic] if ex.question_type == "not" else [topic, *ex.negative_ctxs]
        out.append(replace(ex, negative_ctxs=negs))
    return out, Corpus(corpus.ids + [d.docid for d in docs], corpus.texts + [d.text() for d in docs])


def named_or_questions(groups: list[Group], per_group: int, where: str) -> list[TrainingExample]:
    """`per_group` questions per group, each two of its passages' names joined by "or", both
    positive, the group's first three other named passages labelled negatives. A group with
    fewer than two named passages (an LLM's answers that could not be used) gets none."""
    rng = random.Random(NAMED_SEED)
    out = []
    for g in groups:
        ids = [d for d in g.docids if g.names.get(d)]
        if len(ids) < 2:
            continue
        for k in range(per_group):
            a, b = rng.sample(ids, 2)
            question = rng.choice(OR_FORMS).format(a=g.names[a], b=g.names[b])
            out.append(TrainingExample(
                qid=f"{g.name}/named-or-{k}", question=question, question_type="or",
                positive_ctxs=[Context(a), Context(b)],
                negative_ctxs=[Context(d) for d in ids if d not in (a, b)][:3],
                provenance={"cluster": g.name, "operator": "or", "source": "passage names"}))
    if groups and not out and per_group:
        raise DataError(where, None, "train.named.or_questions: no group has two passages with a name",
                        field="name")
    return out
