"""Hard negatives mined with the retriever: its top results for a question, minus the positives.

The labelled negatives of a question are already in `negative_ctxs`, so they are not
repeated here. For NOT questions the other passages of the question's own group are
skipped too: they were never checked, and they often satisfy the broad part of the
question, which would make them false negatives.
"""
from __future__ import annotations

import numpy as np

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
