"""Negated statements: minimal pairs of passages that differ by a negation, one question for each.

An exclusion ("X other than Y") asks the retriever to leave a passage out; a negated
statement ("Einstein did not enjoy it at that age") asks it to tell two nearly identical
passages apart by one word. Mean pooling over a hundred tokens barely moves when "not"
is added, so a bi-encoder scores both passages alike, and NevIR's paired accuracy falls below
random. `train.negation.pairs=N` reads N minimal pairs in NevIR's layout (`written_pairs`),
from `train.negation.source`: the ones written for boolcl, or a user's own. Each pair becomes
two items:

    q1    positive doc1,  hard negative doc2
    q2    positive doc2,  hard negative doc1

so the only way to rank both right is to read the negation, in the question and in the
passage (docs/method.md, "Negated statements: two runs, one model").
"""
from __future__ import annotations

import random
from pathlib import Path

from boolcl.data.nevir import file_names, load_nevir
from boolcl.errors import ConfigError
from boolcl.train.mixing import Item

QUESTION_TYPE = "statement"  # not "not": these rows get no exclusion, decomposition or retention, and the
# scope head learns them as ordinary throughout, never in its warm-up

# minimal pairs written for boolcl in NevIR's layout (train.negation.source=written; never NevIR's own)
WRITTEN = Path(__file__).resolve().parent.parent / "data" / "negation_pairs.jsonl"


def written_pairs(source: str, n: int, seed: int, split: str = "train") -> tuple[list[Item], str]:
    """2 x min(n, available) items from minimal pairs in NevIR's layout ({id, q1, doc1, q2, doc2}:
    doc1 answers q1, doc2 answers q2), drawn in an order fixed by `seed` (n < 0: all of them).

    `source` is anything data/nevir.py reads: "written" (the 640 pairs bundled with boolcl,
    written for it, none from NevIR: docs/data-formats.md, "Written negation pairs"), a .json/.jsonl file, a
    folder, or a hub id with `split` (NevIR's own training split, `orionweller/NevIR`, for
    users who can reach the hub). NevIR's test split (asked for, or a file named as the authors
    name it) is refused: it is the benchmark. Also returns where the pairs came from."""
    label = source
    if source == "written":
        source = str(WRITTEN)
    elif split == "test":
        raise ConfigError("train.negation.split=test: NevIR's test split is the benchmark; train on your own "
                          "pairs, `written` or the hub's `train` split")
    pairs = load_nevir(source, split)
    if label != "written" and Path(pairs.source).name in file_names("test"):
        raise ConfigError(f"train.negation.source={label}: {pairs.source} is NevIR's test split, the benchmark; "
                          "train on your own pairs, `written` or the hub's `train` split")
    chosen = list(pairs.pairs)
    random.Random(f"negation-written/{seed}").shuffle(chosen)
    if n >= 0:
        chosen = chosen[:n]
    out: list[Item] = []
    for p in chosen:
        group = f"negation/{p.id}"
        id1, id2 = f"{group}#1", f"{group}#2"
        out.append(Item(p.q1, [id1], [p.doc1], [id2], [p.doc2], QUESTION_TYPE, n_explicit=1, group=group))
        out.append(Item(p.q2, [id2], [p.doc2], [id1], [p.doc1], QUESTION_TYPE, n_explicit=1, group=group))
    return out, "written" if label == "written" else pairs.source


def without_statements(items: list[Item]) -> list[Item]:
    """The items less the pairs' questions: what the scope head's warm-up and practice sentences
    are drawn from, since both are about exclusions."""
    return [it for it in items if it.question_type != QUESTION_TYPE]


def within_length(items: list[Item], tokenizer, max_length: int) -> list[Item]:
    """The pairs whose two passages still differ once cut to `max_length` tokens: a negation
    past the cut leaves two identical passages, one labelled right and one wrong."""
    keep = []
    for a, b in zip(items[::2], items[1::2]):
        ids = tokenizer([a.positives[0], b.positives[0]], truncation=True, max_length=max_length)["input_ids"]
        if ids[0] != ids[1]:
            keep += [a, b]
    return keep
