"""`boolcl explain MODEL "question"`: what the model reads in one question, and what it retrieves.

For a model with scope pooling (pooling.py), each token's class probabilities (ordinary,
negation marker, inside the exclusion) and its weight in the pooled question (pooling.py's mode says how):
the first thing to look at when a NOT question brings back the passage it excludes. With
`data=`, the top 10 passages of that set, the question's excluded passages (`negative_ctxs`)
and positives marked when the question text is one of the set's questions.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from omegaconf import DictConfig
from rich.console import Console
from rich.table import Table

from boolcl.data.loaders import load_retrieval_set
from boolcl.data.sets import RetrievalSet
from boolcl.pooling import EXCLUDED, MARKER, ORDINARY, scope_pooling
from boolcl.retrieval.cache import folder as cache_folder
from boolcl.retrieval.encode import encode
from boolcl.retrieval.models import load_eval_model
from boolcl.retrieval.prompts import prompts_for
from boolcl.retrieval.search import normalize, search
from boolcl.scoring.runner import corpus_embeddings

NO_HEAD = "{model} has no scope head to show: it pools with {pooling}, every token counts the same"


@dataclass
class TokenWeight:
    token: str
    p_ordinary: float
    p_marker: float
    p_excluded: float
    weight: float  # the token's share in the pooled question (ScopePooling.token_weights; a plain mean: 1)


@dataclass
class Hit:
    rank: int
    docid: str
    score: float
    text: str
    label: str  # "excluded" (the question's negative_ctxs), "positive", or ""


def token_weights(model, question: str, prompt: str | None = None) -> list[TokenWeight] | None:
    """Per token of `question` (as the encoder tokenises it, prompt included), the head's
    probabilities and pooling weight; None for a model without scope pooling."""
    import torch

    head = scope_pooling(model)
    if head is None:
        return None
    features = model.tokenizer([(prompt or "") + question], truncation=True, max_length=model.max_seq_length,
                               return_tensors="pt")
    features = {k: v.to(model.device) for k, v in features.items()}
    model.eval()
    with torch.no_grad():
        for module in model:  # the modules before the head give the token embeddings it reads
            if module is head:
                break
            features = module(features)
        logits = head.scope_logits(features["token_embeddings"], features["attention_mask"])
        p = head.class_probabilities(logits)[0].float().cpu()  # as the pooling weighs them (with any shift)
    weight = head.token_weights(p[None], features["attention_mask"][0:1].cpu())[0]
    tokens = model.tokenizer.convert_ids_to_tokens(features["input_ids"][0].tolist())
    return [TokenWeight(tok, float(p[i, ORDINARY]), float(p[i, MARKER]), float(p[i, EXCLUDED]), float(weight[i]))
            for i, tok in enumerate(tokens)]


def top_passages(model, rset: RetrievalSet, question: str, cfg: DictConfig, fingerprint: str,
                 k: int = 10) -> tuple[list[Hit], dict[str, int]]:
    """The `k` best passages of `rset` for `question` (corpus embeddings from evaluate's cache), and
    the rank of each excluded passage in the whole corpus, also when it is outside the top `k`."""
    q_prompt, p_prompt = prompts_for(model, cfg.eval.query_prompt, cfg.eval.passage_prompt)

    def encode_passages(texts):
        return encode(model, texts, batch_size=cfg.eval.batch_size, prompt=p_prompt, desc=f"passages ({rset.name})")

    cache_dir = cache_folder(cfg.eval.cache_dir) if cfg.eval.cache else None
    p_emb, _ = corpus_embeddings(model, rset, encode_passages, prompt=p_prompt, cache_dir=cache_dir,  # evaluate's key
                                 shard_size=cfg.eval.shard_size, model_fp=fingerprint)
    q_emb = encode(model, [question], prompt=q_prompt, show_progress=False)
    if (model.similarity_fn_name or "cosine") == "cosine":
        p_emb, q_emb = normalize(p_emb), normalize(q_emb)
    scores, idx = search(q_emb, p_emb, min(k, len(rset.corpus)))
    asked = next((q for q in rset.questions if q.question.strip() == question.strip()), None)
    excluded = {c.passage_id for c in asked.negative_ctxs} if asked else set()
    positive = {c.passage_id for c in asked.positive_ctxs} if asked else set()
    hits = []
    for rank, (s, j) in enumerate(zip(scores[0], idx[0]), 1):
        if j < 0:
            continue
        docid = rset.corpus.ids[int(j)]
        label = "excluded" if docid in excluded else "positive" if docid in positive else ""
        hits.append(Hit(rank, docid, float(np.float32(s)), rset.corpus.texts[int(j)], label))
    every = p_emb @ q_emb[0]
    where = {pid: i for i, pid in enumerate(rset.corpus.ids)}
    ranks = {pid: 1 + int((every > every[where[pid]]).sum()) for pid in sorted(excluded) if pid in where}
    return hits, ranks


def pooling_name(model) -> str:
    last = [type(m).__name__ for m in model][1:] or ["its first module"]
    return ", ".join(last)


def explain(model_spec: str, question: str, cfg: DictConfig, data: str | None = None,
            console: Console | None = None) -> dict:
    """Print (and return) the token table, or the no-head message, and with `data` the top 10."""
    console = console or Console()
    model, info = load_eval_model(model_spec, cfg)
    q_prompt, _ = prompts_for(model, cfg.eval.query_prompt, cfg.eval.passage_prompt)
    weights = token_weights(model, question, q_prompt)
    out: dict = {"model": info, "question": question, "tokens": weights, "message": None, "hits": None,
                 "in_data": None, "excluded_ranks": None}
    if weights is None:
        out["message"] = NO_HEAD.format(model=model_spec, pooling=pooling_name(model))
        console.print(out["message"])
    else:
        head = scope_pooling(model)
        rule = (f"p(ordinary) - {head.drop:g}·p(excluded)" if head.mode == "tokens" else
                f"kept part's mean - {head.drop:g} x excluded part's mean, per token")
        t = Table(title=f"{question}", caption=f"weight = {rule}; mean pooling gives every token 1")
        for col in ("#", "token", "p(ordinary)", "p(marker)", "p(excluded)", "weight"):
            t.add_column(col, justify="left" if col == "token" else "right")
        for i, w in enumerate(weights):
            cls = max(("ordinary", w.p_ordinary), ("marker", w.p_marker), ("excluded", w.p_excluded),
                      key=lambda c: c[1])[0]
            style = {"marker": "yellow", "excluded": "red"}.get(cls)
            t.add_row(str(i), w.token, f"{w.p_ordinary:.3f}", f"{w.p_marker:.3f}", f"{w.p_excluded:.3f}",
                      f"{w.weight:+.3f}", style=style)
        console.print(t)
    if data:
        rset = load_retrieval_set(data)
        hits, out["excluded_ranks"] = top_passages(model, rset, question, cfg, info["fingerprint"], k=10)
        out["hits"] = hits
        out["in_data"] = any(q.question.strip() == question.strip() for q in rset.questions)
        t = Table(title=f"top {len(hits)} of {rset.name} ({len(rset.corpus)} passages)",
                  caption=None if out["in_data"] else "the question is not in this data set: no labels to mark")
        longest = max((len(h.docid) for h in hits), default=7)
        t.add_column("rank", justify="right", min_width=4)
        t.add_column("passage", min_width=min(longest, 40), overflow="fold")
        t.add_column("score", justify="right", min_width=6)
        t.add_column("label", min_width=8)
        room = console.width - (4 + min(longest, 40) + 6 + 8) - 16  # borders and padding of 5 columns
        t.add_column("text", no_wrap=True, overflow="ellipsis", max_width=max(room, 10))  # one line each
        for h in hits:
            mark = {"excluded": "[bold red]EXCLUDED[/]", "positive": "[green]positive[/]"}.get(h.label, "")
            t.add_row(str(h.rank), h.docid, f"{h.score:.4f}", mark, h.text[:160] + ("…" if len(h.text) > 160 else ""))
        console.print(t)
        for pid, rank in out["excluded_ranks"].items():
            console.print(f"excluded passage {pid}: rank {rank} of {len(rset.corpus)}")
    return out
