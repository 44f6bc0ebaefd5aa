"""Scores while training: `train.eval_every`, `train.eval_data`, `train.keep_best`.

Every `eval_every` optimiser steps, and after the last, the live model is scored on the
eval set(s) the way `boolcl evaluate` scores a saved one (same prompts, max length, batch
size, search and metrics: scoring/runner.py), so the trade between NOT and the other types
shows while it happens. MRR@k and NegRecall@k per question type go into that step's record
of train_log.jsonl and to the trackers as `eval/<set>/<MEASURE@k>/<TYPE>`.

Scoring must not change the run: the encoder runs in eval mode under inference mode, every
module's train/eval flag and every random generator's state (Python, NumPy, torch, CUDA) are
put back afterwards, and no embedding is cached on disk (the weights change every step).
A run with `eval_every` on ends with the same weights, bit for bit on CPU, as one without
(tests/test_periodic_eval.py). Under `accelerate launch` each process encodes its own slice
of the texts and the slices are gathered, so the processes share the encoding as
`boolcl evaluate` does.

`keep_best=MEASURE@k/TYPE` keeps the model that scored best by that measure (highest MRR,
lowest NegRecall; the first of equal scores) in `<run>/best/`, a whole model folder written
like the final model, with `best.json` (measure, value, step) inside. The record goes into
each checkpoint's trainer_state.json, so a resumed run knows the best so far.
"""
from __future__ import annotations

import json
import random
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import torch
from accelerate.utils import broadcast_object_list
from omegaconf import DictConfig, OmegaConf
from tqdm.auto import tqdm

from boolcl.config.validate import BEST_MEASURES, parse_keep_best
from boolcl.data.loaders import load_retrieval_set, subsample
from boolcl.data.sets import RetrievalSet
from boolcl.data.spec import parse_data_spec
from boolcl.errors import ConfigError
from boolcl.retrieval.encode import encode
from boolcl.retrieval.prompts import prompts_for
from boolcl.scoring.runner import headline, ranked_run, score_run
from boolcl.train import checkpoint

AFTER_TRAINING = ("quest", "birco", "nevir")  # scored by their own rules: `boolcl evaluate` after training


def lower_is_better(metric: str) -> bool:
    return metric.split("/")[-2].startswith("NegRecall")


def load_eval_sets(cfg: DictConfig) -> list[RetrievalSet]:
    """train.eval_data (default: the run's data=) read once, at set-up, each cut to train.eval_max_corpus."""
    t = cfg.train
    specs = t.eval_data if t.eval_data is not None else cfg.data
    specs = [str(s) for s in (OmegaConf.to_container(specs) if OmegaConf.is_list(specs) else [specs])]
    sets = []
    for spec in specs:
        if parse_data_spec(spec).kind in AFTER_TRAINING:
            raise ConfigError(f"train.eval_data: {spec} is a benchmark with its own scoring; during training boolcl "
                              f"scores retrieval sets (sample, boolquestions-*, msmarco-dev, beir:PATH, a folder). "
                              f"Score {spec} with `boolcl evaluate` after training")
        rset = load_retrieval_set(spec)
        if t.eval_max_corpus and t.eval_max_corpus < len(rset.corpus):
            rset, _ = subsample(rset, t.eval_max_corpus, cfg.seed)  # `boolcl evaluate`'s eval.max_corpus slice
        sets.append(rset)
    names = [s.name for s in sets]
    if len(set(names)) < len(names):
        raise ConfigError(f"train.eval_data={specs}: two sets share a name ({names}); their scores would mix")
    return sets


def resolve_keep_best(cfg: DictConfig, sets: list[RetrievalSet]) -> str | None:
    """train.keep_best as the full key `<set>/<MEASURE@k>/<TYPE>`, checked against what the set holds."""
    if cfg.train.keep_best is None:
        return None
    name, metric = parse_keep_best(cfg.train.keep_best, cfg.eval.k)
    by_name = {s.name: s for s in sets}
    if name is not None and name not in by_name:
        raise ConfigError(f"train.keep_best={cfg.train.keep_best}: no eval set named {name!r}; "
                          f"train.eval_data gives {', '.join(by_name)}")
    rset = by_name[name] if name is not None else sets[0]
    group = metric.split("/")[1]
    asked = [q for q in rset.questions if group == "ALL" or q.question_type.upper() == group]
    if lower_is_better(metric):
        asked = [q for q in asked if q.negative_ctxs]
    if not asked:
        types = sorted({q.question_type.upper() for q in rset.questions})
        raise ConfigError(f"train.keep_best={cfg.train.keep_best}: {rset.name} has no {group} questions"
                          + (" with explicit negatives" if lower_is_better(metric) else "")
                          + f" to score (its types: {', '.join(types)})")
    return f"{rset.name}/{metric}"


def better(value: float | None, record: dict | None, metric: str) -> bool:
    if value is None:
        return False
    if record is None:
        return True
    return value < record["value"] if lower_is_better(metric) else value > record["value"]


@contextmanager
def untouched(model):
    """Run the block and put back what scoring could change: each module's train/eval flag and
    every random generator (encode()'s DataLoader draws a seed from torch's)."""
    modes = [(m, m.training) for m in model.modules()]
    py, np_state = random.getstate(), np.random.get_state()
    devices = [torch.cuda.current_device()] if torch.cuda.is_available() else []
    try:
        with torch.random.fork_rng(devices=devices):
            yield
    finally:
        random.setstate(py)
        np.random.set_state(np_state)
        for m, mode in modes:
            m.training = mode


def shared_encode(accelerator, model, texts: list[str], *, prompt: str | None, batch_size: int) -> np.ndarray:
    """Embeddings of `texts`: each process encodes one contiguous slice and every process gets all rows."""
    n, rank = accelerator.num_processes, accelerator.process_index
    if n == 1:
        return encode(model, texts, batch_size=batch_size, prompt=prompt, show_progress=False)
    size = -(-len(texts) // n)
    mine = encode(model, texts[rank * size:(rank + 1) * size], batch_size=batch_size, prompt=prompt,
                  show_progress=False)
    dim = mine.shape[1] if len(mine) else model.get_sentence_embedding_dimension()
    padded = torch.zeros(size, dim, dtype=torch.float32)
    padded[:len(mine)] = torch.from_numpy(mine)
    rows = accelerator.gather(padded.to(accelerator.device)).cpu().numpy()  # slice after slice, each padded
    return rows[:len(texts)]  # only the last non-empty slice can be short: its padding and the empty ones follow


class PeriodicEval:
    """Set up once (the sets are read before any compute); `maybe_score` after each optimiser step."""

    def __init__(self, cfg: DictConfig, accelerator, run_dir: Path, resume_from: Path | None):
        t = cfg.train
        self.cfg, self.accelerator, self.run_dir, self.every = cfg, accelerator, run_dir, t.eval_every
        self.sets = load_eval_sets(cfg) if self.every else []
        self.keep = resolve_keep_best(cfg, self.sets) if self.every else None
        self.best: dict | None = self._resumed_best(resume_from) if self.keep else None

    def _resumed_best(self, resume_from: Path | None) -> dict | None:
        """The best so far as the checkpoint recorded it (trainer_state.json): the checkpoint is the truth;
        a best/ written after it, by the run that was stopped, is replaced once the replayed steps beat it."""
        if resume_from is None:
            return None
        record = json.loads((resume_from / checkpoint.STATE_FILE).read_text()).get("best")
        if record is not None and record.get("metric") != self.keep:
            if self.accelerator.is_main_process:
                print(f"boolcl: the checkpoint kept the best by {record.get('metric')}; this run keeps it by "
                      f"{self.keep} and starts that record afresh", file=sys.stderr)
            return None
        on_disk = self.run_dir / checkpoint.BEST_DIR / checkpoint.BEST_FILE
        seen = json.loads(on_disk.read_text()) if on_disk.is_file() else None
        if self.accelerator.is_main_process and record is not None and (seen or {}).get("step") != record["step"]:
            print(f"boolcl: {on_disk.parent} does not hold the checkpoint's best (step {record['step']}, "
                  f"{self.keep} {record['value']:.2f}); it is rewritten when a later step beats that", file=sys.stderr)
        return record

    def due(self, step: int, total_steps: int) -> bool:
        return bool(self.every) and (step % self.every == 0 or step == total_steps)

    def state(self) -> dict:
        """What a checkpoint's trainer_state.json carries for resume (plain JSON)."""
        return {"best": self.best} if self.best is not None else {}

    def maybe_score(self, model, step: int, epoch: int, total_steps: int) -> dict:
        """`{}` unless due; else the scores as `eval/<set>/<MEASURE@k>/<TYPE>` (percent) and `eval_s`,
        with best/ rewritten when the kept measure improved. Every process must call it."""
        if not self.due(step, total_steps):
            return {}
        start = time.perf_counter()
        with untouched(model):
            scores = {}
            for rset in self.sets:
                scores |= {f"eval/{rset.name}/{key}": value for key, value in self.score(model, rset).items()}
            shared = [scores]  # every process acts on rank 0's numbers: one decision about best/
            if self.accelerator.num_processes > 1:
                broadcast_object_list(shared, from_process=0)
            scores = shared[0]
            improved = self.keep is not None and better(scores.get(f"eval/{self.keep}"), self.best, self.keep)
            if improved:
                self.best = {"metric": self.keep, "value": scores[f"eval/{self.keep}"], "step": step,
                             "epoch": epoch, "lower_is_better": lower_is_better(self.keep)}
                checkpoint.save_best(self.accelerator, model, self.run_dir, self.best | {"scores": scores})
        scores["eval_s"] = time.perf_counter() - start
        if self.accelerator.is_main_process:
            tqdm.write(self.line(step, total_steps, scores, improved))
        return scores

    @torch.inference_mode()
    def score(self, model, rset: RetrievalSet) -> dict:
        """MRR@k and NegRecall@k per type on `rset`, in percent, keyed as results.json's headline."""
        e = self.cfg.eval
        st = self.accelerator.unwrap_model(model)
        # as `boolcl evaluate` loads the saved model: eval.max_length, else the model's own length
        kept_length = st.max_seq_length
        st.max_seq_length = e.max_length or getattr(st, "boolcl_own_length", kept_length)
        try:
            q_prompt, p_prompt = prompts_for(st, e.query_prompt, e.passage_prompt)
            p_emb = shared_encode(self.accelerator, st, rset.corpus.texts, prompt=p_prompt, batch_size=e.batch_size)
            q_emb = shared_encode(self.accelerator, st, [q.question for q in rset.questions], prompt=q_prompt,
                                  batch_size=e.batch_size)
        finally:
            st.max_seq_length = kept_length
        if not self.accelerator.is_main_process:
            return {}  # rank 0 searches and scores; the others receive its numbers
        run = ranked_run(rset, q_emb, p_emb, similarity=st.similarity_fn_name or "cosine", k=e.k)
        values = headline(score_run(rset, run, k=e.k), e.k)
        return {key: v for key, v in values.items()
                if v is not None and key.split("@")[0] in BEST_MEASURES}

    def line(self, step: int, total_steps: int, scores: dict, improved: bool) -> str:
        """The console's progress line: MRR@k per type and NegRecall@k on NOT, per set."""
        k, parts = self.cfg.eval.k, []
        for rset in self.sets:
            head = f"eval/{rset.name}/"
            mrr = " ".join(f"{key.rsplit('/', 1)[1]} {v:.2f}" for key, v in scores.items()
                           if key.startswith(f"{head}MRR@{k}/"))
            neg = scores.get(f"{head}NegRecall@{k}/NOT")
            parts.append(f"{rset.name} MRR@{k} {mrr}" + (f" | NegRecall@{k} NOT {neg:.2f}" if neg is not None else ""))
        best = ""
        if self.best is not None:
            best = f"; best {self.keep} {self.best['value']:.2f} at step {self.best['step']}" + \
                   (" (saved to best/)" if improved else "")
        return f"step {step}/{total_steps} eval ({scores['eval_s']:.1f} s): " + "; ".join(parts) + best
