"""`boolcl decompose`: the decomposed-query Boolean baseline, end to end.

load model + data -> decompose every question (LLM or offline rules) -> encode the corpus
(the evaluator's embedding cache, same key as `boolcl evaluate`) and every distinct simple
question -> top depth_factor*k per simple question -> hard and soft merges -> score both
with the evaluator's metrics -> OUT/hard/{results.json,run.trec}, OUT/soft/..., and
OUT/decomposition_report.json + OUT/decompositions.jsonl.

An OUT that holds anything is written into only when its decomposition_report.json is of the same
model, data and decomposer (the same command run again), or with `overwrite=true`.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

from boolcl.baselines.combine import (
    leaf_questions,
    merge_hard,
    ranked,
    retrieve,
    soft_score,
)
from boolcl.baselines.decompose import DecompositionReport, llm_decompose
from boolcl.config import validate
from boolcl.data.loaders import load_retrieval_set
from boolcl.errors import ConfigError
from boolcl.files import atomic_write_text, check_output_folder
from boolcl.logic.rules import OFFLINE_NAME, offline_decompose
from boolcl.retrieval.cache import folder as cache_folder
from boolcl.retrieval.encode import encode
from boolcl.retrieval.identity import embedding_identity, encoder_state
from boolcl.retrieval.models import fingerprint, load_eval_model
from boolcl.retrieval.prompts import prompts_for
from boolcl.retrieval.search import normalize
from boolcl.scoring.report import print_table, write_results
from boolcl.scoring.runner import corpus_embeddings, data_info, headline, score_run


def default_out(cfg, data_name: str) -> Path:
    return Path(cfg.out) if cfg.out else Path("results") / f"decompose-{data_name}"


def _decomposer_name(cfg) -> str:
    return OFFLINE_NAME if str(cfg.decompose.backend) == "offline" else f"llm:{cfg.llm.model}"


def earlier_run(cfg, data_name: str):
    """A test for a folder: its decomposition_report.json is of this model, data set and decomposer."""
    def own(folder: Path) -> bool:
        rep = json.loads((folder / "decomposition_report.json").read_text(encoding="utf-8"))
        return (rep.get("model"), rep.get("data"), rep.get("decomposer")) == (str(cfg.model), data_name,
                                                                             _decomposer_name(cfg))
    return own


def _decompose(cfg, rset):
    pairs = [(q.qid, q.question) for q in rset.questions]
    if str(cfg.decompose.backend) == "offline":
        return offline_decompose(pairs), None
    return llm_decompose(pairs, cfg.llm, cfg.decompose.cache_dir)


def _corpus_embeddings(model, rset, cfg, state: dict, p_prompt, show_progress: bool):
    def encode_passages(texts):
        return encode(model, texts, batch_size=cfg.eval.batch_size, prompt=p_prompt,
                      desc=f"passages ({rset.name})", show_progress=show_progress)

    cache_dir = cache_folder(cfg.eval.cache_dir) if cfg.eval.cache else None
    return corpus_embeddings(model, rset, encode_passages, prompt=p_prompt, cache_dir=cache_dir,
                             shard_size=cfg.eval.shard_size, state=state)


def run_decompose(cfg, *, model=None, rset=None, show_progress: bool = True, console=None) -> dict:
    """Run the baseline for `cfg.model` on `cfg.data`; return the paths written and the headline figures.

    `model` / `rset` may be passed already loaded (a caller evaluating several settings
    on one set); otherwise they are loaded from the config like `boolcl evaluate` does.
    """

    if "decompose" not in cfg:
        raise ConfigError("the config has no 'decompose' section (boolcl.config.schema.DecomposeCfg)")
    dcfg = cfg.decompose
    validate(cfg)
    if str(dcfg.backend) == "llm" and str(cfg.llm.backend) == "offline":
        raise ConfigError("decompose.backend=llm needs an endpoint: set llm.backend=openai (and llm.base_url / "
                          "llm.model), or use decompose.backend=offline for the rule-based decomposer")
    t0 = time.perf_counter()
    k = int(cfg.eval.k)
    depth = int(dcfg.depth_factor) * k
    if rset is None:
        rset = load_retrieval_set(cfg.data)
    out = default_out(cfg, rset.name)
    check_output_folder(out, overwrite=bool(cfg.get("overwrite", False)), own=earlier_run(cfg, rset.name),
                        whose="this baseline's (the same model, data and decomposer)")
    if model is None:

        model, info = load_eval_model(str(cfg.model), cfg)
        model_fp = info["fingerprint"]
    else:
        model_fp = fingerprint(model)
    sim = model.similarity_fn_name or "cosine"
    if sim not in ("cosine", "dot"):
        raise ConfigError(f"similarity {sim!r} is not supported for search (use dot or cosine)")

    # 1. decompose
    decomps, llm_stats = _decompose(cfg, rset)
    t_dec = time.perf_counter()
    report = DecompositionReport(_decomposer_name(cfg), llm=llm_stats)
    qtype = {q.qid: q.question_type for q in rset.questions}
    for d in decomps:
        report.add(d, qtype.get(d.qid))

    # 2. encode: corpus (cached like `evaluate`), original questions, distinct simple questions
    q_prompt, p_prompt = prompts_for(model, cfg.eval.query_prompt, cfg.eval.passage_prompt)
    state = encoder_state(model, model_fp=model_fp)  # the model's part of the cache key and results' identity
    p_emb, cache_info = _corpus_embeddings(model, rset, cfg, state, p_prompt, show_progress)
    leaves = leaf_questions([d.expr for d in decomps])
    originals = [q.question for q in rset.questions]
    q_emb = encode(model, originals + leaves, batch_size=cfg.eval.batch_size, prompt=q_prompt,
                   desc="questions", show_progress=show_progress)
    if sim == "cosine":
        p_emb, q_emb = normalize(p_emb), normalize(q_emb)
    t_enc = time.perf_counter()

    # 3. retrieve top depth per question, merge
    hits = retrieve(q_emb, p_emb, rset.corpus.ids, max(depth, k))
    orig_hits = dict(zip([q.qid for q in rset.questions], hits[:len(originals)]))
    leaf_hits = dict(zip(leaves, hits[len(originals):]))
    base_run, hard_run, soft_run = {}, {}, {}
    for d in decomps:
        base_run[d.qid] = ranked(orig_hits[d.qid].scores)
        hard_run[d.qid] = ranked(merge_hard(d.expr, leaf_hits).scores, depth)
        soft_run[d.qid] = ranked(soft_score(d.expr, leaf_hits, orig_hits[d.qid], lam=float(dcfg.soft_lambda),
                                            rule=str(dcfg.soft_rule), anchor=float(dcfg.soft_anchor),
                                            rrf_k=float(dcfg.rrf_k)).scores, depth)
    t_merge = time.perf_counter()

    # 4. score and write
    data = data_info(rset)
    decomposer = report.decomposer
    settings = {"similarity": sim, "depth": depth, "depth_factor": int(dcfg.depth_factor),
                "decomposer": decomposer, "embedding_cache": cache_info, "query_prompt": q_prompt,
                "passage_prompt": p_prompt, "max_seq_length": model.max_seq_length,
                "embedding_identity": {"passages": embedding_identity(model, prompt=p_prompt, state=state),
                                       "queries": embedding_identity(model, prompt=q_prompt, state=state)}}
    timings = {"decompose_s": t_dec - t0, "encode_s": t_enc - t_dec, "merge_s": t_merge - t_enc}
    base_info = {"spec": str(cfg.model), "origin": getattr(model, "boolcl_origin", None), "fingerprint": model_fp,
                 "similarity": sim}
    variants = {
        "hard": (hard_run, {"merge": "hard: AND intersection+sum, OR union+max, NOT difference-subtract"}),
        "soft": (soft_run, {"merge": "soft", "soft_rule": str(dcfg.soft_rule),
                            "soft_lambda": float(dcfg.soft_lambda), "soft_anchor": float(dcfg.soft_anchor),
                            **({"rrf_k": float(dcfg.rrf_k)} if str(dcfg.soft_rule) == "rank" else {})}),
    }
    paths: dict = {"out": out}
    rows: dict = {"base": headline(score_run(rset, base_run, k=k), k)}
    figures: dict = {"base": rows["base"]}
    for name, (run, extra) in variants.items():
        result = score_run(rset, run, k=k, settings={**settings, **extra}, timings=timings)
        info = {**base_info, "baseline": "decomposed-query", "variant": name, "decomposer": decomposer,
                "offline_decomposer": decomposer == OFFLINE_NAME, **extra}
        tag = f"decompose-{name}"
        write_results(out / name, result, model=info, data=data, k=k, tag=tag)
        paths[name] = out / name / "results.json"
        paths[f"{name}_run"] = out / name / "run.trec"
        rows[name] = figures[name] = headline(result, k)
    rep = report.to_dict()
    rep.update({"model": str(cfg.model), "data": rset.name, "depth": depth})
    atomic_write_text(out / "decomposition_report.json", json.dumps(rep, indent=2) + "\n")
    atomic_write_text(out / "decompositions.jsonl",
                      "".join(json.dumps(d.to_dict(), ensure_ascii=False) + "\n" for d in decomps))
    paths["report"] = out / "decomposition_report.json"
    paths["decompositions"] = out / "decompositions.jsonl"
    label = "offline rules" if decomposer == OFFLINE_NAME else decomposer
    print_table(rows, k, title=f"Decomposed-query baseline · {cfg.model} · {rset.name} · decomposer: {label}",
                console=console)
    return {"paths": paths, "headline": figures, "report": rep}
