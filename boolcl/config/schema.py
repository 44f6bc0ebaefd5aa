"""The schema: every key of every subcommand, its type and its default, in one tree.

The dataclasses are the single source of truth for which keys exist. Hydra merges
`recipes/config.yaml` + `recipes/recipe/<name>.yaml` + command-line overrides on top
of them (compose.py), and struct mode turns a typo into an error.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING



@dataclass
class LoraCfg:
    enabled: bool = False
    r: int = 16
    alpha: int = 32
    dropout: float = 0.05
    target_modules: Optional[list[str]] = None  # None: peft's default for the architecture


@dataclass
class RetentionCfg:
    """Keep general retrieval: match the frozen starting model's in-batch score distribution
    (KL at the training scale) on the original data's queries."""
    weight: float = 0.0  # 0: off


@dataclass
class DecompositionCfg:
    """NOT-aware: embed a NOT question where the frozen starting model's arithmetic puts it,
    anchor · T(question) + T(kept part) - drop · T(dropped part) (train/decomposition.py)."""
    weight: float = 0.0  # 0: off, with its warm-up
    drop: float = 1.0  # how hard the dropped part is subtracted
    anchor: float = 0.5  # how much of the whole question's own embedding stays in the target
    warmup_steps: int = 0  # steps of this term alone before the first training step, 32 NOT questions each, drawn
    # from the pool's and 4,000 composed from the pool's parts (0: none)


@dataclass
class NamedCfg:
    """NOT-aware: passages a question names (train/named.py), built from the pool's groups
    (the sample's clusters.jsonl, or the <stem>.groups.jsonl `boolcl generate` writes)."""
    topics: bool = False  # each group's topic as a passage, a labelled negative of its Boolean questions
    or_questions: int = 0  # per group, questions joining two of its passages' names with "or"; 0: none


@dataclass
class TrainCfg:
    boolean: str = "sample"  # Boolean examples: 'sample' (bundled pool), a JSONL path, or 'none'
    operators: list[str] = field(default_factory=lambda: ["not"])
    num_examples: int = 2000  # Boolean examples to mix in (all if fewer exist)
    original: str = "sample"  # original data: 'msmarco' (hub), 'sample', 'none' or a JSONL path
    original_size: Optional[int] = None  # None: all
    hard_negatives: int = 1  # negatives per query in each step
    batch_size: int = 64  # global batch (queries per optimiser step)
    # micro-batches per optimiser step: less memory, but with InfoNCE each micro-batch's queries see only its own
    # negatives (a different objective); train.grad_cache_chunk keeps them all
    grad_accum: int = 1
    # gradient caching (train/grad_cache.py): encode this many rows (queries or passages) at a time and backpropagate
    # the whole batch's objective through them, every negative kept, in the memory of one chunk's activations, for
    # one more forward pass. null: off. At most a process's queries per micro-batch
    grad_cache_chunk: Optional[int] = None
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
    # padding-free: each batch's real tokens in one row, attention kept within each text (retrieval/packing.py);
    # the same embeddings to float noise, no work on padding
    packed: bool = False
    # the starting model's embeddings that retention and decomposition compare with, in the embedding cache
    # (eval.cache_dir): a later run on the same pool from the same model (another seed, a variant, a resume)
    # reads them instead of encoding them (train/start_table.py)
    cache_start_table: bool = True
    log_every: int = 10
    save_every: int = 0  # steps between checkpoints; 0: only the final one
    keep_last: int = 2
    resume: Any = False  # false | true (latest checkpoint in out=) | path to a checkpoint-N folder
    report_to: list[str] = field(default_factory=lambda: ["tensorboard"])  # accelerate trackers; [] for none
    # scores while training (train/periodic_eval.py): MRR and NegRecall per type in train_log.jsonl and the trackers
    eval_every: int = 0  # score the model every N optimiser steps and after the last; 0: off
    eval_data: Any = None  # a data= spec, or a list of them; None: the run's `data`
    eval_max_corpus: Optional[int] = None  # a dev slice: labelled passages + a seeded sample of the rest; None: all
    keep_best: Optional[str] = None  # keep <run>/best/, the model that scored best by this, e.g. MRR@10/NOT
    # NOT-aware additions (recipe=not_plus; docs/method.md)
    retention: RetentionCfg = field(default_factory=RetentionCfg)
    decomposition: DecompositionCfg = field(default_factory=DecompositionCfg)
    named: NamedCfg = field(default_factory=NamedCfg)
    num_workers: int = 0


@dataclass
class EvalCfg:
    k: int = 10
    batch_size: int = 64
    max_length: Optional[int] = None  # tokens per text; None: the model's own max_seq_length (256 for MiniLM)
    cache: bool = True  # corpus embeddings on disk, keyed by model, corpus and settings
    cache_dir: Optional[str] = None  # None: $BOOLCL_CACHE/embeddings or ~/.cache/boolcl/embeddings
    shard_size: int = 50000  # passages per cache shard: the unit an interrupted encode resumes from
    max_corpus: Optional[int] = None  # keep labelled passages + a seeded random sample of the rest (quick runs)
    query_prompt: Optional[str] = None
    passage_prompt: Optional[str] = None
    backend: str = "torch"  # torch | onnx (the transformer in ONNX Runtime on the CPU; pip install 'boolcl[onnx]')
    onnx_quantize: str = "none"  # with backend=onnx: none (fp32, the torch path's metrics) | int8 (faster, approximate)


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
    # name each group's topic and its passages (titles, else the LLM) into <stem>.groups.jsonl, for train.named
    named: bool = True


@dataclass
class DecomposeCfg:
    backend: str = "offline"  # offline (rule-based decomposer, labelled offline-rules) | llm (the `llm` section's endpoint)
    depth_factor: int = 2  # each simple question retrieves depth_factor * eval.k passages (the paper: 2k)
    soft_lambda: float = 1.0  # soft NOT: score(keep) - soft_lambda * score(drop)
    soft_rule: str = "linear"  # linear (similarity scores) | rank (reciprocal-rank scores 1/(rrf_k + rank))
    soft_anchor: float = 0.5  # soft: add this times the original question's score; 0 for the pure decomposition
    rrf_k: float = 60.0  # constant of soft_rule=rank
    cache_dir: Optional[str] = ".boolcl_cache/decompose"  # LLM answers (null: no cache)


@dataclass
class BoolclConfig:
    name: str = MISSING  # the recipe's name; run folders start with it
    model: str = MISSING  # hub id, local SentenceTransformer folder, or 'offline-default'
    # let a model run code it names itself (custom modules in modules.json, auto_map in config.json):
    # off, no such code is imported and a model that needs it is refused; on only for code you have read
    model_trust_remote_code: bool = False
    similarity: Optional[str] = None  # dot | cosine; None: the model's own
    data: str = "sample"  # evaluation set
    out: Optional[str] = None  # run folder; None: checkpoints/<name>-<time>
    # write into an `out=` that exists, is not empty and is not this command's own output (its unfinished run or
    # earlier output with the same settings, or the run train.resume continues); false: refuse it before any work.
    # Files of the same name are replaced; nothing else in the folder is removed
    overwrite: bool = False
    run: Optional[str] = None  # evaluate: score this ranking file (TREC run, BIRCO rank pickles) instead of a model
    seed: int = 42
    train: TrainCfg = field(default_factory=TrainCfg)
    eval: EvalCfg = field(default_factory=EvalCfg)
    llm: LLMCfg = field(default_factory=LLMCfg)
    generate: GenerateCfg = field(default_factory=GenerateCfg)
    compare: CompareCfg = field(default_factory=CompareCfg)
    decompose: DecomposeCfg = field(default_factory=DecomposeCfg)


ConfigStore.instance().store(name="boolcl_schema", node=BoolclConfig)
