"""Retrieval per simple question and the two ways of merging the lists by an expression.

A leaf's result is a `Hits`: the top-`depth` passages of one simple question with their
scores, and `floor`, the lowest score on the list. A passage that is not on the list
scores at most `floor` for that question (exact search), which is all the merges need
to know about it.

Hard merge (the paper's baseline, set operations on the lists):
    AND  intersection, scores added
    OR   union, for each passage the max of the scores it has
    NOT  difference pos \\ neg; score = score_pos - floor_neg (the best a passage off the
         neg list can score for neg), so the survivors keep pos's order
Soft merge (weights instead of sets; every candidate of every list is kept):
    missing scores are filled with the list's floor, then
    AND  sum of the scores
    OR   max of the scores
    NOT  score_pos - lambda * score_neg, over pos's candidates only
    rule 'linear' merges the similarity scores; rule 'rank' first turns each list into
    reciprocal-rank scores 1 / (rrf_k + rank), which are on one scale whatever the model.
With `anchor` > 0, the soft score adds anchor * the original question's score (its own
top-`depth` list, floor-filled): the decomposition steers, the whole question still counts.

Everything here works on plain dicts and lists, so the tests can check it by hand.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from boolcl.logic.grammar import And, Expr, Not, Term, terms
from boolcl.retrieval.search import search
from boolcl.scoring.metrics import rank

SOFT_RULES = ("linear", "rank")


@dataclass
class Hits:
    scores: dict  # docid -> score, the top `depth` passages
    floor: float  # the lowest retrieved score: an upper bound for any passage not on the list

    @classmethod
    def from_ranked(cls, ranked: list[tuple[str, float]]) -> "Hits":
        scores = {d: float(s) for d, s in ranked}
        return cls(scores, min(scores.values()) if scores else 0.0)

    def get(self, docid: str) -> float:
        return self.scores.get(docid, self.floor)


def ranked(scores: dict, limit: int | None = None) -> list[tuple[str, float]]:
    """Best first, ties broken as every boolcl ranking breaks them (scoring.metrics.rank)."""
    return rank(scores.items(), limit)


def rank_scores(hits: Hits, rrf_k: float = 60.0) -> Hits:
    """The same list scored 1 / (rrf_k + rank); the floor is the next rank's value."""
    order = ranked(hits.scores)
    scores = {d: 1.0 / (rrf_k + r) for r, (d, _) in enumerate(order, 1)}
    return Hits(scores, 1.0 / (rrf_k + len(order) + 1))


# --- hard --------------------------------------------------------------------------------------

def hard_and(lists: list[Hits]) -> Hits:
    common = set(lists[0].scores).intersection(*(h.scores for h in lists[1:]))
    scores = {d: sum(h.scores[d] for h in lists) for d in common}
    return Hits(scores, sum(h.floor for h in lists))


def hard_or(lists: list[Hits]) -> Hits:
    scores: dict = {}
    for h in lists:
        for d, s in h.scores.items():
            scores[d] = max(scores.get(d, s), s)
    return Hits(scores, max(h.floor for h in lists))


def hard_not(pos: Hits, neg: Hits) -> Hits:
    scores = {d: s - neg.floor for d, s in pos.scores.items() if d not in neg.scores}
    return Hits(scores, pos.floor - neg.floor)


def merge_hard(expr: Expr, leaf: dict[str, Hits]) -> Hits:
    """The paper's set algebra over `leaf[question]` lists."""
    if isinstance(expr, Term):
        return leaf[expr.text]
    if isinstance(expr, Not):
        return hard_not(merge_hard(expr.pos, leaf), merge_hard(expr.neg, leaf))
    parts = [merge_hard(a, leaf) for a in expr.args]
    return hard_and(parts) if isinstance(expr, And) else hard_or(parts)


# --- soft --------------------------------------------------------------------------------------

def soft_and(lists: list[Hits]) -> Hits:
    union = set().union(*(h.scores for h in lists))
    return Hits({d: sum(h.get(d) for h in lists) for d in union}, sum(h.floor for h in lists))


def soft_or(lists: list[Hits]) -> Hits:
    union = set().union(*(h.scores for h in lists))
    return Hits({d: max(h.get(d) for h in lists) for d in union}, max(h.floor for h in lists))


def soft_not(pos: Hits, neg: Hits, lam: float) -> Hits:
    return Hits({d: s - lam * neg.get(d) for d, s in pos.scores.items()}, pos.floor - lam * neg.floor)


def merge_soft(expr: Expr, leaf: dict[str, Hits], lam: float = 0.5) -> Hits:
    if isinstance(expr, Term):
        return leaf[expr.text]
    if isinstance(expr, Not):
        return soft_not(merge_soft(expr.pos, leaf, lam), merge_soft(expr.neg, leaf, lam), lam)
    parts = [merge_soft(a, leaf, lam) for a in expr.args]
    return soft_and(parts) if isinstance(expr, And) else soft_or(parts)


def with_anchor(merged: Hits, original: Hits, weight: float) -> Hits:
    """merged + weight * original, over merged's candidates (original floor-filled)."""
    if not weight:
        return merged
    return Hits({d: s + weight * original.get(d) for d, s in merged.scores.items()},
                merged.floor + weight * original.floor)


def soft_score(expr: Expr, leaf: dict[str, Hits], original: Hits | None, *, lam: float, rule: str = "linear",
               anchor: float = 0.0, rrf_k: float = 60.0) -> Hits:
    if rule not in SOFT_RULES:
        raise ValueError(f"soft rule {rule!r}: expected one of {', '.join(SOFT_RULES)}")
    if rule == "rank":
        leaf = {q: rank_scores(h, rrf_k) for q, h in leaf.items()}
        original = rank_scores(original, rrf_k) if original is not None else None
    merged = merge_soft(expr, leaf, lam)
    return with_anchor(merged, original, anchor) if original is not None else merged


# --- retrieval ---------------------------------------------------------------------------------

def retrieve(q_emb: np.ndarray, p_emb: np.ndarray, ids: list[str], depth: int) -> list[Hits]:
    """Top-`depth` passages per query row with the evaluator's exact search (already normalised
    when the model is cosine)."""
    if len(q_emb) == 0:
        return []
    scores, idx = search(q_emb, p_emb, depth)
    return [Hits.from_ranked([(ids[j], float(s)) for s, j in zip(scores[i], idx[i]) if j >= 0])
            for i in range(len(q_emb))]


def leaf_questions(exprs: list[Expr]) -> list[str]:
    """Every distinct simple question, in first-seen order (each is encoded and searched once)."""
    seen: dict[str, None] = {}
    for e in exprs:
        for t in terms(e):
            seen.setdefault(t, None)
    return list(seen)
