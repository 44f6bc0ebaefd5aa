"""Training items: the Boolean examples mixed with the original data, one `Item` each.

One item is a query with its labelled positives and its negatives, passage ids kept, so the
loss can mask a passage that is a labelled positive of another query in the batch. The
labelled negatives (for NOT: the excluded passage) come first, mined ones after. A NOT item
also carries its plain question (query pairs) and its kept and dropped parts (decomposition).
"""
from __future__ import annotations

import hashlib
import random
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from boolcl.data.hub import load_hf_split
from boolcl.data.loaders import load_training_pool
from boolcl.data.schema import Context, TrainingExample
from boolcl.data.sets import Corpus
from boolcl.errors import DataError
from boolcl.train.decomposition import not_parts
from boolcl.train.named import add_topic_negatives, load_groups, named_or_questions

MSMARCO_TRIPLETS = ("sentence-transformers/msmarco-msmarco-distilbert-base-tas-b", "triplet")


@dataclass
class Item:
    query: str
    positive_ids: list[str]
    positives: list[str]
    negative_ids: list[str]
    negatives: list[str]
    question_type: str
    positive_scores: list[float | None] | None = None  # teacher scores, for MarginMSE
    negative_scores: list[float | None] | None = None
    n_explicit: int = 0  # the first n_explicit negatives are labelled (negative_ctxs), the rest mined
    retain: bool = False  # retention scores this query: the original (plain) data's
    group: str | None = None  # the passage group (cluster) the question was written over
    not_parts: tuple[str, str, str] | None = None  # NOT: (kept question, dropped part, source)
    target: torch.Tensor | None = None  # NOT: the decomposition target (decomposition.py), when switched on


def _text_id(text: str) -> str:
    return "t" + hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


def _texts(ctxs: Sequence[Context], lookup: dict[str, str], where: str) -> list[str]:
    out = []
    for c in ctxs:
        text = c.text if c.text else lookup.get(c.passage_id)
        if text is None:
            raise DataError(where, None, f"passage {c.passage_id!r} has no text and is not in the corpus",
                            field="positive_ctxs")
        out.append(text)
    return out


def to_items(examples: Sequence[TrainingExample], corpus: Corpus | None, where: str) -> list[Item]:
    lookup = dict(zip(corpus.ids, corpus.texts)) if corpus else {}
    items = []
    for ex in examples:
        negs = ex.all_negatives
        labelled = {c.passage_id for c in ex.negative_ctxs}
        items.append(Item(ex.question, [c.passage_id for c in ex.positive_ctxs],
                          _texts(ex.positive_ctxs, lookup, where),
                          [c.passage_id for c in negs], _texts(negs, lookup, where), ex.question_type,
                          [c.score for c in ex.positive_ctxs], [c.score for c in negs],
                          n_explicit=sum(c.passage_id in labelled for c in negs),
                          group=ex.group, not_parts=not_parts(ex)))
    return items


def load_msmarco_triplets(limit: int | None, seed: int) -> list[Item]:
    """The original MS MARCO training data with mined hard negatives, from the hub."""

    ds = load_hf_split(*MSMARCO_TRIPLETS, "train")
    if limit is not None and limit < len(ds):
        ds = ds.shuffle(seed=seed).select(range(limit))
    return [Item(r["query"], [_text_id(r["positive"])], [r["positive"]], [_text_id(r["negative"])],
                 [r["negative"]], "simple") for r in ds]


def with_named(examples: list[TrainingExample], corpus: Corpus | None, t,
               where: str) -> tuple[list[TrainingExample], list[TrainingExample], Corpus, dict]:
    """train.named's additions (train/named.py): (the pool's examples with topic negatives, the
    named OR questions, the corpus with the passages they need, their counts for the manifest)."""
    if t.boolean == "none":
        raise DataError(where, None, "train.named builds on a Boolean pool's groups: set train.boolean")
    groups, passages, path = load_groups(t.boolean, where)
    known = set(corpus.ids) if corpus else set()
    extra = [(i, x) for i, x in zip(passages.ids, passages.texts) if i not in known]
    corpus = Corpus((corpus.ids if corpus else []) + [i for i, _ in extra],
                    (corpus.texts if corpus else []) + [x for _, x in extra])
    before = len(corpus.ids)
    if t.named.topics:
        examples, corpus = add_topic_negatives(examples, corpus, groups, where)
    topic_ids = set(corpus.ids[before:])
    named = named_or_questions(groups, t.named.or_questions, where) if t.named.or_questions else []
    counts = {"file": str(path), "groups": len(groups), "or_questions": len(named),
              "topic_negatives": sum(c.passage_id in topic_ids for e in examples for c in e.negative_ctxs)}
    return examples, named, corpus, counts


def build_mix(cfg) -> tuple[list[Item], dict]:
    """The training items for a config, and a summary of where they came from."""
    t = cfg.train
    rng = random.Random(cfg.seed)
    examples, corpus = load_training_pool(t.boolean) if t.boolean != "none" else ([], None)
    where = "sample training pool" if t.boolean == "sample" else t.boolean
    named: list[TrainingExample] = []
    named_counts = None
    if t.named.topics or t.named.or_questions:
        examples, named, corpus, named_counts = with_named(examples, corpus, t, where)
    boolean = [e for e in examples + named if e.question_type in set(t.operators)]
    if not boolean and t.boolean != "none":
        raise DataError(where, None, f"no training examples of type {list(t.operators)}", field="question_type")
    rng.shuffle(boolean)
    extra = {id(e) for e in named}  # on top of train.num_examples, which counts the pool's own
    keep = extra | {id(e) for e in [e for e in boolean if id(e) not in extra][: t.num_examples]}
    boolean = [e for e in boolean if id(e) in keep]
    items = to_items(boolean, corpus, where)
    if t.original == "sample":
        pool, pool_corpus = (examples, corpus) if t.boolean == "sample" else load_training_pool("sample")
        original = to_items([e for e in pool if e.question_type == "simple"], pool_corpus, "sample training pool")
    elif t.original == "msmarco":
        original = load_msmarco_triplets(t.original_size, cfg.seed)
    elif t.original == "none":
        original = []
    else:
        pool, pool_corpus = load_training_pool(t.original)
        original = to_items(pool, pool_corpus, t.original)
    for it in original:  # whatever the source: retention distils on these queries
        it.retain = True
    rng.shuffle(original)
    if t.original_size is not None:
        original = original[: t.original_size]
    if t.loss == "margin_mse":
        unscored = [it.query for it in items + original
                    if it.positive_scores is None or None in it.positive_scores or not it.negatives
                    or None in (it.negative_scores or [None])]
        if unscored:
            raise DataError(where, None, f"train.loss=margin_mse needs a teacher 'score' on every positive and "
                            f"negative context; {len(unscored)} examples lack one (first: {unscored[0]!r})",
                            field="score")
    summary = {"boolean": {"source": t.boolean, "operators": list(t.operators), "examples": len(items)},
               "original": {"source": t.original, "examples": len(original)}}
    if named_counts is not None:
        summary["named"] = named_counts
    return items + original, summary
