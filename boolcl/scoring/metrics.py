"""Ranking metrics, per query and per question type.

MRR@k, Recall@k and nDCG@k follow trec_eval's definitions (tested against ir-measures
to 1e-9). NegRecall@k is BoolQuestions' measure of how many of a query's explicit
negatives reach the top k: |negatives in top k| / |negatives|, averaged over the
queries that have at least one explicit negative. Lower is better.

A run is `{qid: [docid, ...]}` best first; ties must already be broken (see `rank`).
"""
from __future__ import annotations

import math
from typing import Iterable, Mapping, Sequence

Run = Mapping[str, Sequence[str]]
Qrels = Mapping[str, Mapping[str, int]]  # graded relevance; > 0 is relevant


def rank(scored: Iterable[tuple[str, float]], k: int | None = None) -> list[tuple[str, float]]:
    """Sort (docid, score) best first, breaking ties by docid descending as trec_eval does."""
    out = sorted(scored, key=lambda x: (x[1], x[0]), reverse=True)
    return out[:k] if k else out


def reciprocal_rank(ranking: Sequence[str], relevant: Mapping[str, int], k: int) -> float:
    for i, doc in enumerate(ranking[:k]):
        if relevant.get(doc, 0) > 0:
            return 1.0 / (i + 1)
    return 0.0


def recall(ranking: Sequence[str], relevant: Mapping[str, int], k: int) -> float:
    n_rel = sum(1 for r in relevant.values() if r > 0)
    if n_rel == 0:
        return 0.0
    return sum(1 for doc in ranking[:k] if relevant.get(doc, 0) > 0) / n_rel


def ndcg(ranking: Sequence[str], relevant: Mapping[str, int], k: int) -> float:
    """Gain = relevance grade, discount log2(rank + 1), ideal from the judged grades."""
    dcg = sum(relevant.get(doc, 0) / math.log2(i + 2) for i, doc in enumerate(ranking[:k]) if relevant.get(doc, 0) > 0)
    ideal = sorted((r for r in relevant.values() if r > 0), reverse=True)[:k]
    idcg = sum(r / math.log2(i + 2) for i, r in enumerate(ideal))
    return dcg / idcg if idcg > 0 else 0.0


def neg_recall(ranking: Sequence[str], negatives: Iterable[str], k: int) -> float | None:
    """Share of explicit negatives in the top k; None when the query has none."""
    negatives = set(negatives)
    if not negatives:
        return None
    return len(negatives.intersection(ranking[:k])) / len(negatives)


def per_query(run: Run, qrels: Qrels, negatives: Mapping[str, Iterable[str]], k: int = 10,
              measures: Sequence[str] = ("MRR", "NegRecall", "Recall", "nDCG")) -> dict[str, dict[str, float]]:
    """`{measure@k: {qid: value}}` for every query in `qrels`; a query missing from the run scores 0."""
    out: dict[str, dict[str, float]] = {f"{m}@{k}": {} for m in measures}
    for qid, rel in qrels.items():
        ranking = list(run.get(qid, ()))
        if "MRR" in measures:
            out[f"MRR@{k}"][qid] = reciprocal_rank(ranking, rel, k)
        if "Recall" in measures:
            out[f"Recall@{k}"][qid] = recall(ranking, rel, k)
        if "nDCG" in measures:
            out[f"nDCG@{k}"][qid] = ndcg(ranking, rel, k)
        if "NegRecall" in measures:
            value = neg_recall(ranking, negatives.get(qid, ()), k)
            if value is not None:
                out[f"NegRecall@{k}"][qid] = value
    return out


def aggregate(values: Mapping[str, Mapping[str, float]], groups: Mapping[str, str]) -> dict[str, dict[str, dict]]:
    """Mean per group and for ALL: `{measure: {group: {"value", "n"}}}` (values are fractions)."""
    out: dict[str, dict[str, dict]] = {}
    names = ["ALL"] + sorted({g.upper() for g in groups.values()})
    for measure, by_qid in values.items():
        out[measure] = {}
        for name in names:
            vals = [v for q, v in by_qid.items() if name == "ALL" or groups[q].upper() == name]
            out[measure][name] = {"value": (sum(vals) / len(vals)) if vals else None, "n": len(vals)}
    return out
