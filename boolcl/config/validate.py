"""Every check the types cannot express, in one place; each message names the key.

compose() runs validate() on every config, before any command does any work (and before
torch is imported), so a run never fails halfway on a setting it could have refused at the
start. Numbers are checked from the schema: every int and float key must be finite and
within its range in RANGES, which names every numeric key but the few in FREE.
"""
from __future__ import annotations

import dataclasses
import importlib.util
import math
import operator
import re
import typing

from omegaconf import DictConfig, OmegaConf

from boolcl.config.schema import BoolclConfig
from boolcl.errors import ConfigError

VALID = {
    "similarity": {None, "dot", "cosine"},
    "train.loss": {"infonce", "margin_mse"},
    "train.mixed_precision": {"auto", "no", "fp16", "bf16"},
    "llm.backend": {"offline", "openai"},
    "generate.grouping": {"auto", "cluster", "page", "prefix"},
    "generate.filter": {"strict", "positives", "off"},
    "compare.test": {"randomization", "bootstrap"},
    "eval.backend": {"torch", "onnx"},
    "eval.onnx_quantize": {"none", "int8"},
}
OPERATORS = {"and", "or", "not"}

# The range of every numeric setting: a bound (">= 1", "> 0", "in [0, 1)") and what else the message says.
# null passes where the schema makes the key Optional. Some keys are also checked in validate() itself,
# earlier and with a message that says why; this table is what makes sure no numeric key goes unchecked.
RANGES = {
    "seed": ">= 0", "train.num_examples": ">= 0 (0: no Boolean examples)",
    "train.original_size": ">= 0 or null (all)", "train.hard_negatives": ">= 0", "train.batch_size": ">= 1",
    "train.grad_accum": ">= 1", "train.grad_cache_chunk": ">= 1 or null (off)", "train.lr": "> 0",
    "train.weight_decay": ">= 0", "train.warmup_ratio": "in [0, 1)",
    "train.epochs": ">= 1", "train.max_steps": ">= -1 (-1: use train.epochs)",
    "train.max_length": ">= 8 (tokens, the tokenizer's special ones included)",
    "train.scale": "> 0 or null (the similarity's default)", "train.max_grad_norm": "> 0",
    "train.lora.r": ">= 1", "train.lora.alpha": "> 0", "train.lora.dropout": "in [0, 1)",
    "train.log_every": ">= 1 (steps between log lines)", "train.save_every": ">= 0 (0: only the final model)",
    "train.keep_last": ">= 1", "train.eval_every": ">= 0 (0: no scores while training)",
    "train.eval_max_corpus": ">= 1 or null (the whole corpus)", "train.num_workers": ">= 0",
    "train.retention.weight": ">= 0",
    "train.decomposition.weight": ">= 0", "train.decomposition.drop": ">= 0", "train.decomposition.anchor": ">= 0",
    "train.decomposition.warmup_steps": ">= 0 (steps of the decomposition term alone before training; 0: none)",
    "train.named.or_questions": ">= 0 (named OR questions per group; 0: none)",
    "eval.k": ">= 1", "eval.batch_size": ">= 1",
    "eval.max_length": ">= 8 (tokens, the tokenizer's special ones included)",
    "eval.shard_size": ">= 1 (passages per cache shard)", "eval.max_corpus": ">= 1 or null (the whole corpus)",
    "llm.concurrency": ">= 1", "llm.temperature": ">= 0", "llm.max_tokens": ">= 1", "llm.timeout": "> 0",
    "llm.max_retries": ">= 0", "llm.backoff": ">= 0", "llm.max_backoff": ">= 0", "llm.price_input": ">= 0",
    "llm.price_output": ">= 0",
    "generate.num_examples": ">= 1", "generate.cluster_size": ">= 2", "generate.svd_dim": ">= 2",
    "generate.sample_size": ">= 2 or null", "generate.page_size": ">= 2", "generate.min_candidates": ">= 2",
    "generate.max_candidates": ">= 2", "generate.min_passage_chars": ">= 0", "generate.max_passage_chars": ">= 100",
    "generate.hard_negatives": ">= 0", "generate.mine_depth": ">= 1", "generate.max_draws_per_example": ">= 1",
    "compare.samples": ">= 1", "compare.alpha": "in (0, 1)",
    "decompose.depth_factor": ">= 1", "decompose.soft_lambda": ">= 0", "decompose.soft_anchor": ">= 0",
    "decompose.rrf_k": "> 0",
}
FREE = {  # numeric keys any finite value suits
}
_COMPARE = {">=": operator.ge, ">": operator.gt}
_INTERVAL = re.compile(r"in ([\[(])(\S+), (\S+?)([\])])")


def numeric_keys(cls=BoolclConfig, prefix: str = "") -> dict[str, bool]:
    """Every int and float key of the schema, dotted, and whether it may be null."""
    out: dict[str, bool] = {}
    for f in dataclasses.fields(cls):
        kind = typing.get_type_hints(cls)[f.name]
        if dataclasses.is_dataclass(kind):
            out |= numeric_keys(kind, f"{prefix}{f.name}.")
        elif kind in (int, float, typing.Optional[int], typing.Optional[float]):
            out[prefix + f.name] = kind in (typing.Optional[int], typing.Optional[float])
    return out


NUMERIC = numeric_keys()


def within(value: float, need: str) -> bool:
    """Whether `value` meets the bound `need` opens with: ">= 1", "> 0", "in [0, 1)", "in (0, 1)"."""
    interval = _INTERVAL.match(need)
    if interval:
        left, low, high, right = interval.groups()
        return (value >= float(low) if left == "[" else value > float(low)) and \
            (value <= float(high) if right == "]" else value < float(high))
    op, bound = need.split()[:2]
    return _COMPARE[op](value, float(bound))


def check_numbers(cfg: DictConfig) -> None:
    """Every numeric key finite (nan and inf pass every comparison with `<`, and would fail inside torch
    or at the first step instead), then within its range in RANGES."""
    for key in NUMERIC:
        value = OmegaConf.select(cfg, key)
        if isinstance(value, float) and not math.isfinite(value):
            raise ConfigError(f"{key}={value!r} must be a finite number")


def check_ranges(cfg: DictConfig) -> None:
    for key, need in RANGES.items():
        value = OmegaConf.select(cfg, key)
        if value is None and NUMERIC[key]:
            continue
        if value is None or not within(value, need):
            raise ConfigError(f"{key}={value!r} must be {need}")


def resume_flag(resume) -> bool | None:
    """`train.resume` read once for every caller: False (start afresh), True (the latest
    checkpoint of out=), or None when it names a checkpoint folder. YAML and the command line
    give true/false as booleans or as strings, so both spellings count."""
    if resume in (False, None, "false", "False"):
        return False
    if resume in (True, "true", "True"):
        return True
    return None


def validate(cfg: DictConfig) -> None:
    """Checks the types cannot express; each message names the key."""
    check_numbers(cfg)
    for key, allowed in VALID.items():
        value = OmegaConf.select(cfg, key)
        if value not in allowed:
            shown = ", ".join(sorted(str(a) for a in allowed if a is not None))
            raise ConfigError(f"{key}={value!r} is not one of: {shown}")
    for section in ("train", "generate"):
        bad = set(cfg[section].operators) - OPERATORS
        if bad or not cfg[section].operators:
            raise ConfigError(f"{section}.operators={list(cfg[section].operators)} must be a non-empty "
                              f"subset of {sorted(OPERATORS)}")
    t = cfg.train
    for key in ("retention", "decomposition"):
        if t[key].weight < 0:
            raise ConfigError(f"train.{key}.weight must be >= 0, got {t[key].weight}")
    if t.group_by_length and t.group_by_cluster:
        raise ConfigError("train.group_by_length and train.group_by_cluster order batches in two different ways; pick one")
    if t.loss == "margin_mse" and (t.retention.weight or t.decomposition.weight):
        raise ConfigError("train.retention / train.decomposition work with train.loss=infonce only")
    if t.max_steps == 0:
        raise ConfigError("train.max_steps=0 must be -1 (use train.epochs) or >= 1")
    check_ranges(cfg)
    check_grad_cache(t)
    check_eval_backend(cfg)
    check_periodic_eval(cfg)
    check_generate(cfg)
    check_decompose(cfg.decompose)


def check_grad_cache(t, processes: int | None = None) -> None:
    """train.grad_cache_chunk against what it splits (its range is in RANGES): a chunk holds at most
    the queries a process encodes per micro-batch. compose() does not know how many processes will
    run (None: checked as for one), the training loop checks again with the number it runs on."""
    chunk = t.grad_cache_chunk
    if not chunk:
        return
    queries = t.batch_size // ((processes or 1) * t.grad_accum)
    if chunk > queries:
        split = (f"train.batch_size={t.batch_size} / train.grad_accum={t.grad_accum}" if processes is None else
                 f"train.batch_size={t.batch_size} / ({processes} processes x train.grad_accum={t.grad_accum})")
        raise ConfigError(f"train.grad_cache_chunk={chunk} must be at most the queries a process encodes per "
                          f"micro-batch: {queries} ({split}); null: off")


def check_eval_backend(cfg: DictConfig) -> None:
    """eval.backend=onnx needs the optional extra: say so before any data or model loads."""
    if cfg.eval.backend != "onnx":
        return
    missing = [name for name in ("onnxruntime", "onnx") if importlib.util.find_spec(name) is None]
    if missing:
        raise ConfigError(f"eval.backend=onnx needs {' and '.join(missing)}, not installed here: "
                          f"pip install 'boolcl[onnx]' (or use eval.backend=torch)")


BEST_MEASURES = ("MRR", "NegRecall")  # what train.keep_best can follow; NegRecall: lower is better
BEST_GROUPS = ("ALL", "AND", "OR", "NOT", "SIMPLE")  # SIMPLE: msmarco-dev's questions


def keep_best_names(k: int) -> list[str]:
    return [f"{m}@{k}/{g}" for m in BEST_MEASURES for g in BEST_GROUPS]


def parse_keep_best(value: str, k: int) -> tuple[str | None, str]:
    """`train.keep_best` as (eval set name or None for the first set, results.json headline key),
    e.g. "NegRecall@10/NOT" -> (None, "NegRecall@10/NOT"), "sample/MRR@10/ALL" -> ("sample", "MRR@10/ALL")."""
    parts = str(value).split("/")
    metric = "/".join(parts[-2:])
    name = parts[0] if len(parts) == 3 and parts[0] else None
    if len(parts) not in (2, 3) or (len(parts) == 3 and name is None) or metric not in keep_best_names(k):
        raise ConfigError(f"train.keep_best={value!r} is not a measure boolcl scores while training; use one of "
                          f"{', '.join(keep_best_names(k))} (MEASURE@eval.k/TYPE, as in results.json's headline; "
                          f"NegRecall is lower-is-better), optionally after an eval set's name, e.g. "
                          f"sample/MRR@{k}/NOT, when train.eval_data lists several")
    return name, metric


def check_periodic_eval(cfg: DictConfig) -> None:
    """train.eval_data and train.keep_best (train/periodic_eval.py); the numbers are in RANGES."""
    t = cfg.train
    specs = OmegaConf.to_container(t.eval_data) if OmegaConf.is_list(t.eval_data) else [t.eval_data]
    if t.eval_data is not None and (not specs or not all(isinstance(s, str) and s.strip() for s in specs)):
        raise ConfigError(f"train.eval_data={specs if OmegaConf.is_list(t.eval_data) else t.eval_data!r} must be "
                          f"a data= spec, a non-empty list of them, or null (the run's data)")
    if t.keep_best is not None:
        parse_keep_best(t.keep_best, cfg.eval.k)
        if not t.eval_every:
            raise ConfigError(f"train.keep_best={t.keep_best} needs scores while training: set train.eval_every > 0")


def check_decompose(d) -> None:
    if str(d.backend) not in ("offline", "llm"):
        raise ConfigError(f"decompose.backend: {d.backend!r} is not one of offline, llm")
    if str(d.soft_rule) not in ("linear", "rank"):
        raise ConfigError(f"decompose.soft_rule: {d.soft_rule!r} is not one of linear, rank")


def check_generate(cfg: DictConfig) -> None:
    """The generator's settings that depend on one another (each alone is in RANGES)."""
    g = cfg.generate
    if g.min_candidates > g.max_candidates:
        raise ConfigError(f"generate.min_candidates={g.min_candidates} must be <= generate.max_candidates="
                          f"{g.max_candidates}")
