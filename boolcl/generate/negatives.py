"""Hard negatives mined with the retriever: its top results for a question, minus the positives.

The labelled negatives of a question are already in `negative_ctxs`, so they are not
repeated here. For NOT questions the other passages of the question's own group are
skipped too: they were never checked, and they often satisfy the broad part of the
question, which would make them false negatives.

`hard_negatives` mines for a run's kept questions over the pool its groups came from.
"""
from __future__ import annotations

import numpy as np

from boolcl.generate.cluster import Group
from boolcl.generate.corpus import Passages
from boolcl.generate.process import Outcome
from boolcl.retrieval.search import search


def mine(question_emb: np.ndarray, passage_emb: np.ndarray, *, skip: list[set[int]], k: int,
         depth: int) -> list[list[int]]:
    """For each question, up to `k` passage indices from its top `depth`, best first, none in `skip[i]`."""
    if k <= 0 or len(question_emb) == 0:
        return [[] for _ in range(len(question_emb))]

    depth = max(depth, k)
    _, idx = search(question_emb, passage_emb, min(depth + max((len(s) for s in skip), default=0),
                                                   passage_emb.shape[0]))
    out = []
    for row, banned in zip(idx, skip):
        picked = []
        for j in row:
            j = int(j)
            if j < 0 or j in banned:
                continue
            picked.append(j)
            if len(picked) == k:
                break
        out.append(picked)
    return out


def hard_negatives(outcomes: list[Outcome], labels: dict[str, tuple[set, set]], groups: list[Group],
                   passages: Passages, pool: list[int], pool_emb, encoder, *, k: int,
                   depth: int) -> list[list[int]]:
    """Per outcome, up to `k` passage indices from the pool, none labelled (nor in its group, for NOT).

    `pool_emb` is (embeddings, row of each pool passage) when grouping already embedded the
    pool, else None and the pool is embedded here. Without an encoder nothing is mined.
    """
    mined: list[list[int]] = [[] for _ in outcomes]
    if encoder is None or k <= 0 or not outcomes:
        return mined
    group_of = {x.gid: set(x.members) for x in groups}
    if pool_emb is None:
        emb = encoder.encode([passages.text(i) for i in pool], "passages")
        row_of = {i: r for r, i in enumerate(pool)}
    else:
        emb, row_of = pool_emb
    p_emb = encoder.prepare(emb)
    q_emb = encoder.prepare(encoder.encode([o.question for o in outcomes], "questions"))
    skip = []
    for o in outcomes:
        pos, neg = labels[o.draw.qid]
        banned = pos | neg | (group_of[o.draw.group] if o.draw.op == "not" else set())
        skip.append({row_of[i] for i in banned if i in row_of})
    rows = mine(q_emb, p_emb, skip=skip, k=k, depth=depth)
    return [[pool[r] for r in rr] for rr in rows]
