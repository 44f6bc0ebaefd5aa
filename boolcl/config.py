"""Structured configs: one schema for every subcommand, recipes in `recipes/` fill it.

The dataclasses are the single source of truth for which keys exist. Hydra merges
`recipes/config.yaml` + `recipes/recipe/<name>.yaml` + command-line overrides on top
of them, and struct mode turns a typo into an error. `check_overrides` runs before
Hydra so that a bad key or recipe is reported with the list of what does exist.
"""
from __future__ import annotations

import difflib
import os
import re
from dataclasses import dataclass, field, fields, is_dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Optional

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING, DictConfig, OmegaConf

from .baselines.config import DecomposeCfg


class ConfigError(ValueError):
    """A config that cannot work; raised before any compute."""


@dataclass
class LoraCfg:
    enabled: bool = False
    r: int = 16
    alpha: int = 32
    dropout: float = 0.05
    target_modules: Optional[list[str]] = None  # None: peft's default for the architecture


@dataclass
class ExclusionCfg:
    """NOT-aware: an explicit negative must score below each of its query's positives by `margin`."""
    weight: float = 0.0  # 0: off
    margin: float = 0.2  # in similarity units (cosine or dot), before `train.scale`
    operators: list[str] = field(default_factory=lambda: ["not"])  # whose explicit negatives count


@dataclass
class PairsCfg:
    """NOT-aware: each NOT question's plain (disjunctive) question joins the batch with the
    excluded passage as its positive, so only the exclusion tells the two queries apart."""
    weight: float = 0.0  # 0: off


@dataclass
class RetentionCfg:
    """Keep general retrieval: match the frozen starting model's in-batch score distribution
    (KL at the training scale) on the original data's queries."""
    weight: float = 0.0  # 0: off


@dataclass
class DecompositionCfg:
    """NOT-aware: embed a NOT question where the frozen starting model's arithmetic puts it,
    anchor · T(question) + T(kept part) - drop · T(dropped part) (train/decomposition.py)."""
    weight: float = 0.0  # 0: off
    drop: float = 1.0  # how hard the dropped part is subtracted
    anchor: float = 0.5  # how much of the whole question's own embedding stays in the target
    synthetic: int = 0  # new NOT wordings (target only, no passages) added to the batch per item; 0: none
    templates: list[str] = field(default_factory=lambda: [  # how synthetic wordings join kept and dropped parts
        "{keep}, other than {drop}?", "{keep}, apart from {drop}?", "{keep}, excluding {drop}?",
        "{keep}, but not {drop}?", "{keep} except {drop}?", "{keep}, leaving out {drop}?",
        "{keep} that have nothing to do with {drop}?", "{keep}, not counting {drop}?",
        "Besides {drop}, {keep_lc}?", "Setting aside {drop}, {keep_lc}?"])


@dataclass
class ScopeCfg:
    """NOT-aware: scope pooling (pooling.py): a head finds the exclusion's tokens and pools them
    with weight -drop, taught from the rules' spans (train/scope.py). Saved with the model."""
    weight: float = 0.0  # 0: off (mean pooling as the model has it)
    drop: float = 0.5  # pooling weight of an excluded token is -drop (0.5: not_plus_tiny, chosen on the sample)
    lr: float = 1e-2  # the head's learning rate: it starts from zero and has few steps to find the scope
    hidden: int = 64  # the head's GRU width (each direction)
    warmup: int = 300  # steps fitting the head alone on the frozen start model before training; 0: none
    synthetic: int = 1  # template practice sentences per item and step, for the head only; 0: none
    templates: list[str] = field(default_factory=lambda: [  # exclusion wordings of the practice sentences
        "{keep} other than {drop}?", "{keep}, apart from {drop}?", "{keep} aside from {drop}?",
        "{keep}, excluding {drop}?", "{keep}, but not {drop}?", "{keep} except {drop}?", "{keep}, except for {drop}?",
        "{keep}, leaving out {drop}?", "{keep} that have nothing to do with {drop}?", "{keep} that are not {drop}?",
        "{keep} without {drop}?", "{keep}, not counting {drop}?", "{keep}, setting aside {drop}?",
        "{keep} unrelated to {drop}?", "{keep}, ignoring {drop}?", "{keep} that don't involve {drop}?",
        "{keep}, with the exception of {drop}?", "{keep} rather than {drop}?", "{keep}, save for {drop}?",
        "{keep}, minus {drop}?", "{keep} that aren't about {drop}?", "{keep}, but leave out {drop}?",
        "{keep} that do not concern {drop}?", "{keep}, as long as it isn't {drop}?", "{keep}, and not {drop}?",
        "Besides {drop}, {keep_lc}?", "Apart from {drop}, {keep_lc}?", "Other than {drop}, {keep_lc}?",
        "Excluding {drop}, {keep_lc}?", "Setting aside {drop}, {keep_lc}?", "Not counting {drop}, {keep_lc}?",
        "{drop} aside, {keep_lc}?"])


@dataclass
class TrainCfg:
    boolean: str = "sample"  # Boolean examples: 'sample' (bundled pool), a JSONL path, or 'none'
    operators: list[str] = field(default_factory=lambda: ["not"])
    num_examples: int = 2000  # Boolean examples to mix in (all if fewer exist)
    original: str = "sample"  # original data: 'msmarco' (hub), 'sample', 'none' or a JSONL path
    original_size: Optional[int] = None  # None: all
    hard_negatives: int = 1  # negatives per query in each step
    batch_size: int = 64  # global batch (queries per optimiser step)
    grad_accum: int = 1
    lr: float = 2e-5
    weight_decay: float = 0.01
    warmup_ratio: float = 0.1
    epochs: int = 1
    max_steps: int = -1  # >0 overrides epochs
    max_length: int = 300
    loss: str = "infonce"  # infonce | margin_mse (needs teacher 'score' on the contexts)
    scale: Optional[float] = None  # logits multiplier; None: 1 for dot, 20 for cosine
    gather_negatives: bool = True  # several processes: every process's passages are negatives for every query
    max_grad_norm: float = 1.0
    mixed_precision: str = "auto"  # auto | no | fp16 | bf16
    gradient_checkpointing: bool = False
    lora: LoraCfg = field(default_factory=LoraCfg)  # train low-rank adapters only; saved merged
    group_by_length: bool = False  # batches of similar length (less padding), in random order
    group_by_cluster: bool = False  # NOT-aware: questions over the same passages share a batch (not with group_by_length)
    compile: bool = False  # torch.compile the encoder (GPU; dynamic shapes)
    log_every: int = 10
    save_every: int = 0  # steps between checkpoints; 0: only the final one
    keep_last: int = 2
    resume: Any = False  # false | true (latest checkpoint in out=) | path to a checkpoint-N folder
    report_to: list[str] = field(default_factory=lambda: ["tensorboard"])  # accelerate trackers; [] for none
    exclusion: ExclusionCfg = field(default_factory=ExclusionCfg)  # NOT-aware additions (recipe=not_plus)
    pairs: PairsCfg = field(default_factory=PairsCfg)
    retention: RetentionCfg = field(default_factory=RetentionCfg)
    decomposition: DecompositionCfg = field(default_factory=DecompositionCfg)
    scope: ScopeCfg = field(default_factory=ScopeCfg)
    num_workers: int = 0


@dataclass
class EvalCfg:
    k: int = 10
    batch_size: int = 64
    max_length: int = 300
    cache: bool = True  # corpus embeddings on disk, keyed by model, corpus and settings
    cache_dir: Optional[str] = None  # None: $BOOLCL_CACHE/embeddings or ~/.cache/boolcl/embeddings
    shard_size: int = 50000  # passages per cache shard: the unit an interrupted encode resumes from
    max_corpus: Optional[int] = None  # keep labelled passages + a seeded random sample of the rest (quick runs)
    query_prompt: Optional[str] = None
    passage_prompt: Optional[str] = None


@dataclass
class CompareCfg:
    baseline: Optional[str] = None  # name or path of the run the others are compared with; None: the first
    test: str = "randomization"  # paired test over queries: randomization | bootstrap
    samples: int = 10000  # permutations or bootstrap resamples
    alpha: float = 0.05
    seeds: bool = False  # average runs that differ only by seed into one row (mean ± std)


@dataclass
class LLMCfg:
    backend: str = "offline"  # offline (rules and templates, no network) | openai (any OpenAI-compatible endpoint)
    base_url: Optional[str] = None  # None: api.openai.com; e.g. http://127.0.0.1:8000/v1 for vLLM / llama.cpp
    model: str = "gpt-4o-mini"
    api_key_env: str = "OPENAI_API_KEY"  # the name of the variable, never the key
    concurrency: int = 16  # requests in flight at once
    temperature: float = 0.0
    max_tokens: int = 256
    timeout: float = 60.0  # seconds per request before it counts as a timeout (and is retried)
    max_retries: int = 8  # per request, on 429 / 5xx / timeouts / connection errors
    backoff: float = 1.0  # first back-off in seconds, doubled each retry (a Retry-After header wins)
    max_backoff: float = 60.0
    price_input: float = 0.15  # USD per million prompt tokens, for the report's cost estimate
    price_output: float = 0.60  # USD per million completion tokens


@dataclass
class GenerateCfg:
    corpus: str = "sample"  # sample | boolquestions-msmarco[:DIR] | boolquestions-nq[:DIR] | corpus.jsonl | folder
    num_examples: int = 2000  # in total, split evenly over the operators
    operators: list[str] = field(default_factory=lambda: ["not"])
    grouping: str = "auto"  # cluster (MS MARCO) | page (NQ: successive passages of a title) | prefix (docid up to '/') | auto
    cluster_size: int = 8  # mean passages per cluster: n_clusters = passages // cluster_size
    svd_dim: int = 64  # truncated SVD dimensions before agglomerative clustering
    sample_size: Optional[int] = 20000  # passages sampled before grouping; None: all
    page_size: int = 8  # most successive passages of one page in a group
    min_candidates: int = 2  # candidate passages drawn per group (the paper: 2 or 3)
    max_candidates: int = 3
    min_passage_chars: int = 40  # shorter passages are skipped (and counted)
    max_passage_chars: int = 2000  # passages are cut to this length inside prompts
    filter: str = "strict"  # strict: positives answer and AND/NOT negatives do not | positives | off
    hard_negatives: int = 4  # extra negatives mined with the encoder (top-k minus positives)
    mine_depth: int = 30  # how deep in the ranking to look for them
    encoder: Optional[str] = None  # encoder for clustering and mining; None: `model`
    exclude: Optional[str] = None  # an eval set (e.g. sample) whose labelled passages are never used
    cache_dir: Optional[str] = ".boolcl_cache/generate"  # LLM answers and embeddings (null: none); resumes a killed run
    max_draws_per_example: float = 20.0  # give up (and report a shortfall) after this many draws per example asked


@dataclass
class BoolclConfig:
    name: str = MISSING  # the recipe's name; run folders start with it
    model: str = MISSING  # hub id, local SentenceTransformer folder, or 'offline-default'
    similarity: Optional[str] = None  # dot | cosine; None: the model's own
    data: str = "sample"  # evaluation set
    out: Optional[str] = None  # run folder; None: checkpoints/<name>-<time>
    run: Optional[str] = None  # evaluate: score this ranking file (TREC run, BIRCO rank pickles) instead of a model
    seed: int = 42
    train: TrainCfg = field(default_factory=TrainCfg)
    eval: EvalCfg = field(default_factory=EvalCfg)
    llm: LLMCfg = field(default_factory=LLMCfg)
    generate: GenerateCfg = field(default_factory=GenerateCfg)
    compare: CompareCfg = field(default_factory=CompareCfg)
    decompose: DecomposeCfg = field(default_factory=DecomposeCfg)


ConfigStore.instance().store(name="boolcl_schema", node=BoolclConfig)

VALID = {
    "similarity": {None, "dot", "cosine"},
    "train.loss": {"infonce", "margin_mse"},
    "train.mixed_precision": {"auto", "no", "fp16", "bf16"},
    "llm.backend": {"offline", "openai"},
    "generate.grouping": {"auto", "cluster", "page", "prefix"},
    "generate.filter": {"strict", "positives", "off"},
    "compare.test": {"randomization", "bootstrap"},
}
OPERATORS = {"and", "or", "not"}


def recipes_dir() -> Path:
    """The recipes folder: installed as the package `boolcl.recipes`, or beside a source checkout."""
    try:
        return Path(str(resources.files("boolcl.recipes")))
    except ModuleNotFoundError:  # running from a checkout that was never pip-installed
        return Path(__file__).resolve().parents[1] / "recipes"


def available_recipes() -> list[str]:
    return sorted(p.stem for p in (recipes_dir() / "recipe").glob("*.yaml"))


def schema_keys(node: Any = BoolclConfig, prefix: str = "") -> dict[str, list[str]]:
    """Map each section ('' for the top) to the keys it accepts."""
    out: dict[str, list[str]] = {prefix: []}
    for f in fields(node):
        out[prefix].append(f.name)
        default = f.default_factory() if callable(f.default_factory) else f.default  # type: ignore[misc]
        if is_dataclass(default):
            out.update(schema_keys(type(default), f"{prefix}{f.name}."))
    return out


def check_overrides(overrides: list[str]) -> None:
    """Reject an unknown recipe or key with a message that lists what exists."""
    sections = schema_keys()
    for item in overrides:
        if item.startswith("-") or "=" not in item:
            continue
        key, value = item.split("=", 1)
        key = key.lstrip("+~")
        if key.startswith("hydra."):
            continue
        if key == "recipe":
            names = available_recipes()
            if value not in names:
                raise ConfigError(f"unknown recipe {value!r}; available recipes: {', '.join(names)} "
                                  f"(files in {recipes_dir() / 'recipe'})")
            continue
        section, _, leaf = key.rpartition(".")
        section = f"{section}." if section else ""
        if section not in sections or leaf not in sections[section]:
            if section in sections:
                known = sections[section]
                hint = difflib.get_close_matches(leaf, known, n=1)
                where = f"in '{section[:-1]}'" if section else "at the top level"
                msg = f"unknown config key {key!r}; keys {where}: {', '.join(known)}"
                if hint:
                    msg += f" (did you mean {section}{hint[0]}?)"
            else:
                groups = sorted(s[:-1] for s in sections if s)
                msg = f"unknown config section in {key!r}; sections: {', '.join(groups)}"
            raise ConfigError(msg)


def validate(cfg: DictConfig) -> None:
    """Checks the types cannot express; each message names the key."""
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
    for key in ("batch_size", "grad_accum", "max_length", "epochs", "keep_last"):
        if t[key] < 1:
            raise ConfigError(f"train.{key} must be >= 1, got {t[key]}")
    if t.hard_negatives < 0:
        raise ConfigError(f"train.hard_negatives must be >= 0, got {t.hard_negatives}")
    for key in ("exclusion", "pairs", "retention", "decomposition", "scope"):
        if t[key].weight < 0:
            raise ConfigError(f"train.{key}.weight must be >= 0, got {t[key].weight}")
    for key in ("drop", "anchor", "synthetic"):
        if t.decomposition[key] < 0:
            raise ConfigError(f"train.decomposition.{key} must be >= 0, got {t.decomposition[key]}")
    for template in t.decomposition.templates:
        try:
            template.format(keep="", keep_lc="", drop="")
        except (KeyError, IndexError, ValueError) as err:
            raise ConfigError(f"train.decomposition.templates: {template!r} may only use {{keep}}, {{keep_lc}} "
                              f"and {{drop}} ({type(err).__name__}: {err})") from None
        if "{drop}" not in template or not ("{keep}" in template or "{keep_lc}" in template):
            raise ConfigError(f"train.decomposition.templates: {template!r} needs {{drop}} and {{keep}} or {{keep_lc}}")
    if t.scope.drop < 0:
        raise ConfigError(f"train.scope.drop must be >= 0, got {t.scope.drop}")
    if t.scope.lr <= 0:
        raise ConfigError(f"train.scope.lr must be > 0, got {t.scope.lr}")
    if t.scope.hidden < 1 or t.scope.synthetic < 0 or t.scope.warmup < 0:
        raise ConfigError(f"train.scope.hidden must be >= 1, train.scope.synthetic and train.scope.warmup >= 0, "
                          f"got {t.scope.hidden}, {t.scope.synthetic} and {t.scope.warmup}")
    for template in t.scope.templates:
        fields = re.findall(r"\{(\w*)\}", template)
        if fields.count("drop") != 1 or len([f for f in fields if f in ("keep", "keep_lc")]) != 1 or \
                set(fields) - {"keep", "keep_lc", "drop"}:
            raise ConfigError(f"train.scope.templates: {template!r} needs {{drop}} once and {{keep}} or {{keep_lc}} "
                              f"once, and nothing else in braces")
    if t.scope.synthetic and not t.scope.templates:
        raise ConfigError("train.scope.synthetic > 0 needs at least one template")
    if t.decomposition.synthetic and not t.decomposition.templates:
        raise ConfigError("train.decomposition.synthetic > 0 needs at least one template")
    if set(t.exclusion.operators) - OPERATORS:
        raise ConfigError(f"train.exclusion.operators={list(t.exclusion.operators)} must be a subset of {sorted(OPERATORS)}")
    if (t.exclusion.weight or t.pairs.weight) and t.hard_negatives < 1:
        raise ConfigError("train.exclusion / train.pairs need the excluded passage in the batch: "
                          "set train.hard_negatives >= 1")
    if t.group_by_length and t.group_by_cluster:
        raise ConfigError("train.group_by_length and train.group_by_cluster order batches in two different ways; pick one")
    if t.loss == "margin_mse" and (t.exclusion.weight or t.pairs.weight or t.retention.weight
                                   or t.decomposition.weight):
        raise ConfigError("train.exclusion / train.pairs / train.retention / train.decomposition work with "
                          "train.loss=infonce only")
    if t.lr <= 0:
        raise ConfigError(f"train.lr must be > 0, got {t.lr}")
    if not 0 <= t.warmup_ratio < 1:
        raise ConfigError(f"train.warmup_ratio must be in [0, 1), got {t.warmup_ratio}")
    if cfg.eval.k < 1:
        raise ConfigError(f"eval.k must be >= 1, got {cfg.eval.k}")


def compose(overrides: list[str] | None = None) -> DictConfig:
    """The resolved config for `overrides` (Hydra syntax), as the CLI sees it."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    overrides = list(overrides or [])
    check_overrides(overrides)
    try:
        with initialize_config_dir(config_dir=str(recipes_dir()), version_base="1.3"):
            cfg = hydra_compose(config_name="config", overrides=overrides)
    except (HydraException, OmegaConfBaseException) as e:
        raise ConfigError(str(e)) from None
    validate(cfg)
    return cfg


def to_yaml(cfg: DictConfig) -> str:
    """The config as saved next to a checkpoint: resolved, without secrets.

    Only the *name* of the API-key variable is in the config; values of the
    environment never enter it, so there is nothing to scrub beyond a guard.
    """
    container = OmegaConf.to_container(cfg, resolve=True)
    assert isinstance(container, dict)
    for key in list(container):
        if key == "hydra":
            container.pop(key)
    text = OmegaConf.to_yaml(OmegaConf.create(container))
    secret = os.environ.get(str(cfg.llm.api_key_env), "")
    if secret and secret in text:
        raise ConfigError("refusing to write a config that contains the API key")
    return text
