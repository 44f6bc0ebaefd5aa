"""`boolcl explain MODEL "question"`: what a model retrieves for one question.

The top 10 passages of an evaluation set (`data=`, default: the config's, the bundled sample)
for the question, by the model's own similarity; when the question text is one of the set's
questions, its excluded passages (`negative_ctxs`) and positives are marked, and each excluded
passage's rank in the whole corpus is printed, also when it is outside the top 10: the first
thing to look at when a NOT question brings back the passage it excludes.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from omegaconf import DictConfig
from rich.console import Console
from rich.table import Table
from rich.text import Text

from boolcl.data.loaders import load_retrieval_set
from boolcl.data.sets import RetrievalSet
from boolcl.retrieval.cache import folder as cache_folder
from boolcl.retrieval.encode import encode
from boolcl.retrieval.models import load_eval_model
from boolcl.retrieval.prompts import prompts_for
from boolcl.retrieval.search import normalize, search
from boolcl.scoring.runner import corpus_embeddings


@dataclass
class Hit:
    rank: int
    docid: str
    score: float
    text: str
    label: str  # "excluded" (the question's negative_ctxs), "positive", or ""


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


def explain(model_spec: str, question: str, cfg: DictConfig, data: str | None = None,
            console: Console | None = None) -> dict:
    """Print (and return) the top 10 passages of `data` (default: `cfg.data`) for `question`,
    labelled when the question is one of that set's, and the rank of each excluded passage."""
    console = console or Console()
    model, info = load_eval_model(model_spec, cfg)
    rset = load_retrieval_set(data or cfg.data)
    hits, excluded_ranks = top_passages(model, rset, question, cfg, info["fingerprint"], k=10)
    out: dict = {"model": info, "question": question, "data": rset.name, "hits": hits,
                 "in_data": any(q.question.strip() == question.strip() for q in rset.questions),
                 "excluded_ranks": excluded_ranks}
    t = Table(title=Text(f"{question}\ntop {len(hits)} of {rset.name} ({len(rset.corpus)} passages)"),
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
