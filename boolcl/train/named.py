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
  passages' titles with "or" ("Barn swallow or White stork?"), both passages positive.

A pool's groups are the sample's layout: `clusters.jsonl` beside the pool's `train.jsonl`,
one row per group with `cluster`, `topic`, `docids` and `split`; only `split: train` groups
(or rows without a split) are read, so a held-out group never reaches training.
"""
from __future__ import annotations

import json
import random
from dataclasses import dataclass, replace
from pathlib import Path

from boolcl.data.schema import Context, CorpusDoc, TrainingExample
from boolcl.data.sets import Corpus
from boolcl.errors import DataError

OR_FORMS = ("{a} or {b}", "What is {a} or {b}?", "{a} or {b}?")
NAMED_SEED = 0  # the named questions are data, the same for every training seed


@dataclass(frozen=True)
class Group:
    name: str
    topic: str | None
    docids: tuple[str, ...]


def read_groups(path: Path) -> list[Group]:
    """The training groups of `path` (clusters.jsonl), in file order; a bad row names its line."""
    groups = []
    with open(path, encoding="utf-8") as f:
        for line_no, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise DataError(str(path), line_no, f"not JSON: {e.msg}") from None
            if not isinstance(row, dict):
                raise DataError(str(path), line_no, "a row must be a JSON object")
            if row.get("split", "train") != "train":
                continue
            name, docids = row.get("cluster"), row.get("docids")
            if not isinstance(name, str) or not name:
                raise DataError(str(path), line_no, "'cluster' must name the group", field="cluster")
            if not isinstance(docids, list) or not all(isinstance(d, str) for d in docids):
                raise DataError(str(path), line_no, "'docids' must list the group's passage ids", field="docids")
            topic = row.get("topic")
            if topic is not None and (not isinstance(topic, str) or not topic.strip()):
                raise DataError(str(path), line_no, "'topic' must be a non-empty string when given", field="topic")
            groups.append(Group(name, topic, tuple(docids)))
    return groups


def topic_passage_id(group: str) -> str:
    return f"{group}/topic"


def add_topic_negatives(examples: list[TrainingExample], corpus: Corpus, groups: list[Group],
                        where: str) -> tuple[list[TrainingExample], Corpus]:
    """Each group's topic as a passage (its topic as title and text, as the pool's passages have
    a title), a labelled negative of the group's AND, OR and NOT examples: after a NOT question's
    excluded passages, so an exclusion keeps its turn first; before the others' negatives."""
    topics = {g.name: g.topic for g in groups if g.topic}
    if not topics:
        raise DataError(where, None, "train.named.topics needs group topics: no training group of its clusters.jsonl "
                        "has one", field="topic")
    taken = set(corpus.ids) & {topic_passage_id(g) for g in topics}
    if taken:
        raise DataError(where, None, f"the corpus already holds a passage {sorted(taken)[0]!r}, the id a topic "
                        "passage would take")
    docs = [CorpusDoc(topic_passage_id(g), t[0].upper() + t[1:] + ".", title=t) for g, t in topics.items()]
    out = []
    for ex in examples:
        group = (ex.provenance or {}).get("cluster") or (ex.provenance or {}).get("group")
        if ex.question_type not in ("and", "or", "not") or group not in topics:
            out.append(ex)
            continue
        topic = Context(topic_passage_id(group))
        negs = [*ex.negative_ctxs, topic] if ex.question_type == "not" else [topic, *ex.negative_ctxs]
        out.append(replace(ex, negative_ctxs=negs))
    return out, Corpus(corpus.ids + [d.docid for d in docs], corpus.texts + [d.text() for d in docs])


def named_or_questions(groups: list[Group], titles: dict[str, str], per_group: int,
                       where: str) -> list[TrainingExample]:
    """`per_group` questions per group, each two of its passages' titles joined by "or", both
    positive, the group's first three other passages labelled negatives."""
    rng = random.Random(NAMED_SEED)
    out = []
    for g in groups:
        ids = [d for d in g.docids if titles.get(d)]
        if len(ids) < 2:
            raise DataError(where, None, f"train.named.or_questions: group {g.name!r} has fewer than two passages "
                            "with a title in the pool's corpus", field="title")
        for k in range(per_group):
            a, b = rng.sample(ids, 2)
            question = rng.choice(OR_FORMS).format(a=titles[a], b=titles[b])
            out.append(TrainingExample(
                qid=f"{g.name}/named-or-{k}", question=question, question_type="or",
                positive_ctxs=[Context(a), Context(b)],
                negative_ctxs=[Context(d) for d in ids if d not in (a, b)][:3],
                provenance={"cluster": g.name, "operator": "or", "source": "passage titles"}))
    return out
