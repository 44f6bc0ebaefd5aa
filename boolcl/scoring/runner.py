"""Score one model on one retrieval set: encode, search, rank, measure."""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from omegaconf import DictConfig

from boolcl.data.sets import RetrievalSet
from boolcl.retrieval.cache import SHARD_SIZE, cache_key, encode_cached, folder as cache_folder
from boolcl.retrieval.encode import encode
from boolcl.retrieval.identity import embedding_identity, encoder_state
from boolcl.retrieval.onnx_backend import load_encoder
from boolcl.retrieval.prompts import prompts_for
from boolcl.retrieval.search import normalize, search
from boolcl.scoring import metrics

RUN_DEPTH = 100  # ranked passages kept per query in run files


@dataclass
class EvalResult:
    metrics: dict  # {measure: {ALL|AND|OR|NOT: {"value", "n"}}}
    per_query: dict  # {measure: {qid: value}}
    run: dict  # {qid: [(docid, score), ...]} best first
    settings: dict
    timings: dict = field(default_factory=dict)
    question_types: dict = field(default_factory=dict)  # {qid: and|or|not}


def corpus_embeddings(model, rset: RetrievalSet, encode_passages, *, prompt: str | None, cache_dir: Path | None,
                      shard_size: int = SHARD_SIZE, model_fp: str | None = None,
                      state: dict | None = None) -> tuple:
    """The corpus's embeddings and the cache's report (None without `cache_dir`).

    The one cache lookup of evaluate, the baselines and explain: the folder is keyed by the
    encoder's identity with the passage prompt (retrieval/identity.py), the corpus and the
    shard size, so each reads what the others wrote and nothing another encoder wrote."""
    if cache_dir is None:
        return encode_passages(rset.corpus.texts), None
    state = state or encoder_state(model, model_fp=model_fp)
    identity = embedding_identity(model, prompt=prompt, state=state)
    key = cache_key(identity, rset.corpus_fingerprint(), {"shard_size": shard_size})
    meta = {"data": rset.source, "identity": identity, "prompt": prompt, "shard_size": shard_size, "encoder": state}
    emb, info = encode_cached(encode_passages, rset.corpus.texts, Path(cache_dir) / key, shard_size=shard_size,
                              meta=meta)
    return emb, {**info, "identity": identity}


def evaluate_model(model, rset: RetrievalSet, *, k: int = 10, batch_size: int = 64,
                   query_prompt: str | None = None, passage_prompt: str | None = None,
                   show_progress: bool = True, cache_dir: Path | None = None, model_fp: str | None = None,
                   shard_size: int = SHARD_SIZE) -> EvalResult:
    """Encode, search, score. With `cache_dir`, corpus embeddings are read from / written to
    the shard cache under the encoder's identity (weights, tokenizer, modules, prompt, length,
    precision), which results.json records as `embedding_identity`."""
    q_prompt, p_prompt = prompts_for(model, query_prompt, passage_prompt)
    similarity = model.similarity_fn_name or "cosine"
    state = encoder_state(model, model_fp=model_fp)
    identity = {"passages": embedding_identity(model, prompt=p_prompt, state=state),
                "queries": embedding_identity(model, prompt=q_prompt, state=state)}
    t0 = time.perf_counter()

    def encode_passages(texts):
        return encode(model, texts, batch_size=batch_size, prompt=p_prompt, desc=f"passages ({rset.name})",
                      show_progress=show_progress)

    p_emb, cache_info = corpus_embeddings(model, rset, encode_passages, prompt=p_prompt, cache_dir=cache_dir,
                                          shard_size=shard_size, state=state)
    t1 = time.perf_counter()
    q_emb = encode(model, [q.question for q in rset.questions], batch_size=batch_size, prompt=q_prompt,
                   desc="questions", show_progress=show_progress)
    t2 = time.perf_counter()
    run = ranked_run(rset, q_emb, p_emb, similarity=similarity, k=k)
    t3 = time.perf_counter()
    settings = {"k": k, "batch_size": batch_size, "similarity": similarity,
                "query_prompt": q_prompt, "passage_prompt": p_prompt,
                "max_seq_length": model.max_seq_length, "precision": state["precision"],
                "embedding_identity": identity, "embedding_cache": cache_info}
    timings = {"encode_passages_s": t1 - t0, "encode_questions_s": t2 - t1, "search_s": t3 - t2,
               "passages_per_s": len(rset.corpus) / max(t1 - t0, 1e-9)}
    return score_run(rset, run, k=k, settings=settings, timings=timings)


def ranked_run(rset: RetrievalSet, q_emb, p_emb, *, similarity: str, k: int = 10) -> dict:
    """Exact search of every question's embedding over the corpus's: `{qid: [(docid, score), ...]}`,
    the top max(k, RUN_DEPTH) best first. The one search step of `evaluate_model` and of the
    scores taken during training (train/periodic_eval.py), so the two give the same numbers."""
    if similarity == "cosine":
        p_emb, q_emb = normalize(p_emb), normalize(q_emb)
    elif similarity != "dot":
        raise ValueError(f"similarity {similarity!r} is not supported for search (use dot or cosine)")
    scores, idx = search(q_emb, p_emb, max(k, RUN_DEPTH))
    ids = rset.corpus.ids
    return {q.qid: metrics.rank((ids[j], float(s)) for s, j in zip(scores[i], idx[i]) if j >= 0)
            for i, q in enumerate(rset.questions)}


def score_run(rset: RetrievalSet, run: dict, *, k: int = 10, settings: dict | None = None,
              timings: dict | None = None) -> EvalResult:
    """Metrics of a ranking `{qid: [(docid, score), ...]}` on a BoolQuestions-format set."""
    ranked = {qid: [d for d, _ in lst] for qid, lst in run.items()}
    qrels = {q.qid: {c.passage_id: 1 for c in q.positive_ctxs} for q in rset.questions}
    negatives = {q.qid: [c.passage_id for c in q.negative_ctxs] for q in rset.questions}
    values = metrics.per_query(ranked, qrels, negatives, k=k)
    groups = {q.qid: q.question_type for q in rset.questions}
    settings = {"k": k, **(settings or {}), "passages": len(rset.corpus), "questions": len(rset.questions)}
    return EvalResult(metrics.aggregate(values, groups), values, run, settings, timings or {}, groups)


def headline(result: EvalResult, k: int = 10) -> dict[str, float | None]:
    """Every measure per group in percent, keyed "MEASURE@k/GROUP" (the paper's Table 3 has MRR and NegRecall)."""
    out: dict[str, float | None] = {}
    for measure, groups in result.metrics.items():
        for group, cell in groups.items():
            out[f"{measure}/{group}"] = None if cell["value"] is None else 100 * cell["value"]
    return out


def evaluate_spec(model_spec: str, rset: RetrievalSet, cfg: DictConfig, *,
                  show_progress: bool = True) -> tuple[EvalResult, dict]:
    """Load `model_spec`, evaluate it on `rset`; return the result and the model's description."""
    model, info = load_encoder(model_spec, cfg)  # load_eval_model, then eval.backend (torch | onnx)
    cache_dir = cache_folder(cfg.eval.cache_dir) if cfg.eval.cache else None
    result = evaluate_model(model, rset, k=cfg.eval.k, batch_size=cfg.eval.batch_size,
                            query_prompt=cfg.eval.query_prompt, passage_prompt=cfg.eval.passage_prompt,
                            show_progress=show_progress, cache_dir=cache_dir, model_fp=info["fingerprint"],
                            shard_size=cfg.eval.shard_size)
    return result, info


def data_info(rset: RetrievalSet) -> dict:
    return {"name": rset.name, "source": rset.source, "questions": len(rset.questions),
            "passages": len(rset.corpus), "corpus_fingerprint": rset.corpus_fingerprint(),
            "questions_fingerprint": rset.questions_fingerprint()}
