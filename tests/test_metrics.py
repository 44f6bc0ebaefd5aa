"""Metrics against ir-measures (trec_eval's definitions) on random runs, to 1e-9."""
import random

import ir_measures
import pytest
from ir_measures import RR, R, nDCG

from boolcl.scoring import metrics


def random_case(seed: int, graded: bool):
    rng = random.Random(seed)
    docs = [f"d{i}" for i in range(60)]
    qrels, run = {}, {}
    for q in range(40):
        qid = f"q{q}"
        rel = rng.sample(docs, rng.randint(1, 6))
        qrels[qid] = {d: (rng.randint(1, 3) if graded else 1) for d in rel}
        if rng.random() < 0.2:  # a few judged-but-irrelevant documents (grade 0)
            qrels[qid][rng.choice(docs)] = 0
        ranked = rng.sample(docs, rng.randint(0, 30))
        # distinct scores: implementations disagree on how to break ties (see test below)
        run[qid] = metrics.rank((d, rng.random()) for d in ranked)
    return qrels, run


@pytest.mark.parametrize("seed,graded", [(0, False), (1, False), (2, True), (3, True)])
@pytest.mark.parametrize("k", [1, 5, 10, 20])
def test_agrees_with_ir_measures(seed, graded, k):
    qrels, run = random_case(seed, graded)
    ranked = {q: [d for d, _ in lst] for q, lst in run.items()}
    ours = metrics.per_query(ranked, qrels, {}, k=k, measures=("MRR", "Recall", "nDCG"))
    ref_qrels = [ir_measures.Qrel(q, d, r) for q, rel in qrels.items() for d, r in rel.items()]
    ref_run = [ir_measures.ScoredDoc(q, d, s) for q, lst in run.items() for d, s in lst]
    ref = {}
    for m in ir_measures.iter_calc([RR @ k, R @ k, nDCG @ k], ref_qrels, ref_run):
        ref[(str(m.measure), m.query_id)] = m.value
    names = {f"MRR@{k}": f"RR@{k}", f"Recall@{k}": f"R@{k}", f"nDCG@{k}": f"nDCG@{k}"}
    checked = 0
    for ours_name, ref_name in names.items():
        for qid, value in ours[ours_name].items():
            # ir-measures leaves out queries with no retrieved documents; those score 0 here
            expected = ref.get((ref_name, qid), 0.0)
            assert value == pytest.approx(expected, abs=1e-9), (ours_name, qid)
            checked += 1
    assert checked == 3 * len(qrels)


def test_ties_are_broken_like_trec_eval():
    """Score descending, then docid descending; ir-measures' providers differ here, so runs store scores."""
    assert [d for d, _ in metrics.rank([("a", 1.0), ("c", 1.0), ("b", 2.0)])] == ["b", "c", "a"]


def test_neg_recall_by_hand():
    ranking = ["p1", "n1", "x", "n2", "p2"]
    assert metrics.neg_recall(ranking, ["n1", "n2", "n3"], k=3) == pytest.approx(1 / 3)
    assert metrics.neg_recall(ranking, ["n1", "n2", "n3"], k=5) == pytest.approx(2 / 3)
    assert metrics.neg_recall(ranking, [], k=5) is None


def test_aggregate_per_type_skips_queries_without_negatives():
    run = {"a": ["n", "p"], "b": ["p"], "c": ["x", "p"]}
    qrels = {"a": {"p": 1}, "b": {"p": 1}, "c": {"p": 1}}
    negs = {"a": ["n"], "b": [], "c": ["n"]}
    values = metrics.per_query(run, qrels, negs, k=10)
    agg = metrics.aggregate(values, {"a": "not", "b": "and", "c": "not"})
    assert agg["MRR@10"]["ALL"] == {"value": pytest.approx((0.5 + 1 + 0.5) / 3), "n": 3}
    assert agg["MRR@10"]["AND"]["value"] == 1.0
    assert agg["NegRecall@10"]["ALL"] == {"value": 0.5, "n": 2}  # b has no explicit negative
    assert agg["NegRecall@10"]["AND"] == {"value": None, "n": 0}
