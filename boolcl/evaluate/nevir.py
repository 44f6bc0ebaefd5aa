"""NevIR scoring: paired accuracy, the benchmark's official measure, and each side's accuracy.

For every pair the model scores the four (question, passage) combinations. The q1 side is
right when sim(q1, doc1) > sim(q1, doc2), the q2 side when sim(q2, doc2) > sim(q2, doc1);
the pair counts only when both are (a tie is wrong). Ordering both sides at random gets
25% paired accuracy. A retriever that ignores the negation ranks the same passage first
for both questions and so gets one side right and the pair wrong.

results.json carries, per pair id, 1/0 for `PairedAcc`, `Q1Acc` and `Q2Acc` in
`per_query` (every pair typed `pair`), so `boolcl compare` runs its paired test over pairs.
run.trec holds the four similarities: query `<id>/q1` or `<id>/q2`, passages `<id>/doc1`
and `<id>/doc2`; `run=FILE` scores such a file instead of a model.
"""
from __future__ import annotations

import time
import warnings
from pathlib import Path

import numpy as np

from boolcl.data.nevir import NevirSet, load_nevir
from boolcl.config import setting
from boolcl.data.spec import DataSpec
from boolcl.errors import DataError
from boolcl.retrieval.encode import encode
from boolcl.retrieval.models import load_eval_model
from boolcl.retrieval.prompts import prompts_for
from boolcl.retrieval.search import normalize
from boolcl.scoring import metrics
from boolcl.scoring.report import read_trec_run
from boolcl.scoring.runner import EvalResult

MEASURES = ("PairedAcc", "Q1Acc", "Q2Acc")
PAIR_TYPE = "pair"


def outcomes(sims: np.ndarray) -> dict[str, np.ndarray]:
    """`sims` is (pairs, 4): sim(q1,doc1), sim(q1,doc2), sim(q2,doc1), sim(q2,doc2); 1/0 per pair."""
    sims = np.asarray(sims, dtype=np.float64)
    q1 = sims[:, 0] > sims[:, 1]
    q2 = sims[:, 3] > sims[:, 2]
    return {"PairedAcc": (q1 & q2).astype(float), "Q1Acc": q1.astype(float), "Q2Acc": q2.astype(float)}


def similarities(model, nset: NevirSet, *, batch_size: int = 64, query_prompt: str | None = None,
                 passage_prompt: str | None = None, show_progress: bool = True) -> np.ndarray:
    """The (pairs, 4) similarity table, with the model's own similarity (cosine or dot)."""
    q_prompt, p_prompt = prompts_for(model, query_prompt, passage_prompt)
    pairs = nset.pairs
    docs = encode(model, [p.doc1 for p in pairs] + [p.doc2 for p in pairs], batch_size=batch_size,
                  prompt=p_prompt, desc="passages (nevir)", show_progress=show_progress)
    qs = encode(model, [p.q1 for p in pairs] + [p.q2 for p in pairs], batch_size=batch_size,
                prompt=q_prompt, desc="questions", show_progress=show_progress)
    similarity = model.similarity_fn_name or "cosine"
    if similarity == "cosine":
        docs, qs = normalize(docs), normalize(qs)
    elif similarity != "dot":
        raise ValueError(f"similarity {similarity!r} is not supported (use dot or cosine)")
    n = len(pairs)
    d1, d2, q1, q2 = docs[:n], docs[n:], qs[:n], qs[n:]
    return np.stack([(q1 * d1).sum(1), (q1 * d2).sum(1), (q2 * d1).sum(1), (q2 * d2).sum(1)], axis=1)


def same_after_truncation(model, nset: NevirSet, passage_prompt: str | None = None) -> int:
    """How many pairs' two documents are the same tokens once cut to the model's max_seq_length:
    their difference lies past the cut, so no model can order them (both sides tie, the pair is lost)."""
    tok, limit = model.tokenizer, model.max_seq_length
    prompt = passage_prompt or ""
    cut = [tok([prompt + d for d in docs], truncation=True, max_length=limit)["input_ids"]
           for docs in ([p.doc1 for p in nset.pairs], [p.doc2 for p in nset.pairs])]
    return sum(a == b for a, b in zip(*cut))


def to_run(nset: NevirSet, sims: np.ndarray) -> dict[str, list[tuple[str, float]]]:
    run = {}
    for p, (s11, s12, s21, s22) in zip(nset.pairs, sims):
        run[f"{p.id}/q1"] = metrics.rank([(f"{p.id}/doc1", float(s11)), (f"{p.id}/doc2", float(s12))])
        run[f"{p.id}/q2"] = metrics.rank([(f"{p.id}/doc1", float(s21)), (f"{p.id}/doc2", float(s22))])
    return run


def from_run(nset: NevirSet, path: Path) -> np.ndarray:
    """The similarity table from a TREC run in this module's id scheme; every pair must be there."""
    run = {q: dict(lst) for q, lst in read_trec_run(path).items()}
    sims = np.empty((len(nset.pairs), 4))
    for i, p in enumerate(nset.pairs):
        for j, (q, d) in enumerate((("q1", "doc1"), ("q1", "doc2"), ("q2", "doc1"), ("q2", "doc2"))):
            score = run.get(f"{p.id}/{q}", {}).get(f"{p.id}/{d}")
            if score is None:
                raise DataError(path, None, f"no score for query {p.id}/{q} and passage {p.id}/{d} (a NevIR run "
                                "scores both passages of each pair for both questions)", field="docid")
            sims[i, j] = score
    return sims


def result_of(nset: NevirSet, sims: np.ndarray, settings: dict, timings: dict | None = None) -> EvalResult:
    """Per-pair values and their means (group ALL only: NevIR has one kind of pair)."""
    values = {m: {p.id: float(v) for p, v in zip(nset.pairs, col)} for m, col in outcomes(sims).items()}
    types = {p.id: PAIR_TYPE for p in nset.pairs}
    return EvalResult(metrics.aggregate(values, {}), values, to_run(nset, sims), settings, timings or {}, types)


def describe(nset: NevirSet, name: str) -> dict:
    n = len(nset.pairs)
    return {"name": name, "source": nset.source, "benchmark": "nevir", "split": nset.split, "pairs": n,
            "questions": 2 * n, "passages": 2 * n, "questions_fingerprint": nset.fingerprint(),
            "measures": {"PairedAcc": "both questions of the pair rank their own passage first (official)",
                         "Q1Acc": "sim(q1, doc1) > sim(q1, doc2)", "Q2Acc": "sim(q2, doc2) > sim(q2, doc1)"},
            "random_baseline": {"PairedAcc": 0.25, "Q1Acc": 0.5, "Q2Acc": 0.5}}


def evaluate_nevir(bs: DataSpec, model_spec: str | None, cfg, *, show_progress: bool = True) -> tuple[EvalResult, dict]:
    """Score `model_spec` (or the run file `cfg.run`) on NevIR's test pairs."""
    nset = load_nevir(bs.path, bs.split or "test")
    k = int(setting(cfg, "eval.k", 10))
    run_path = setting(cfg, "run")
    settings: dict = {"k": k, "protocol": "each question ranks its pair's two passages; paired accuracy"}
    timings: dict = {}
    if run_path:
        path = Path(run_path)
        sims = from_run(nset, path)
        settings["run"] = {"path": str(path.resolve()), "format": "trec"}
    else:
        if not model_spec:
            raise ValueError("evaluate_nevir needs a model or run=FILE")
        model, info = load_eval_model(model_spec, cfg)
        batch_size = int(setting(cfg, "eval.batch_size", 64))
        q_prompt, p_prompt = prompts_for(model, setting(cfg, "eval.query_prompt"), setting(cfg, "eval.passage_prompt"))
        t0 = time.perf_counter()
        sims = similarities(model, nset, batch_size=batch_size, query_prompt=q_prompt, passage_prompt=p_prompt,
                            show_progress=show_progress)
        timings["encode_s"] = time.perf_counter() - t0
        same = same_after_truncation(model, nset, p_prompt)
        if same:
            warnings.warn(f"{bs.name}: the two documents of {same} of {len(nset.pairs)} pairs are the same text once cut "
                          f"to {model.max_seq_length} tokens, so those pairs cannot count; raise eval.max_length "
                          "(256 cuts none with MiniLM's tokenizer)", stacklevel=2)
        settings.update({"model": info, "batch_size": batch_size, "similarity": model.similarity_fn_name or "cosine",
                         "query_prompt": q_prompt, "passage_prompt": p_prompt,
                         "max_seq_length": model.max_seq_length, "pairs_same_after_truncation": same})
    settings.update({"questions": 2 * len(nset.pairs), "passages": 2 * len(nset.pairs), "pairs": len(nset.pairs)})
    return result_of(nset, sims, settings, timings), describe(nset, bs.name)
