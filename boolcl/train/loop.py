"""The training loop: continue training a SentenceTransformer with InfoNCE on Accelerate.

`train()` reads top to bottom: set-up (run folder, model, data, optimiser, objective), the
loop, the final save. The set-up functions above it each build one thing. The same code runs
on one CPU, one GPU or N GPUs (`accelerate launch`), and a run that was killed resumes from
its last checkpoint to the same weights it would have reached.

Anything that draws random numbers is called in a fixed order (model and LoRA
initialisation, then data): changing that order changes the weights a run ends with.
"""
from __future__ import annotations

import json
import math
import time
from contextlib import nullcontext
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import torch
from accelerate import Accelerator, PartialState
from accelerate.utils import broadcast_object_list, set_seed
from omegaconf import DictConfig
from tqdm.auto import tqdm
from transformers import get_linear_schedule_with_warmup

from boolcl.config import to_yaml
from boolcl.config.validate import check_grad_cache
from boolcl.distributed import cpu_only_distributed
from boolcl.errors import ConfigError, TrainingError
from boolcl.files import atomic_write_text, check_writable
from boolcl.retrieval import cache, packing
from boolcl.retrieval.identity import embedding_identity, encoder_state
from boolcl.retrieval.models import load_model, set_encoder
from boolcl.retrieval.prompts import prompts_for
from boolcl.train import checkpoint, grad_cache, terms
from boolcl.train.collate import Batch, Collator, ItemDataset
from boolcl.train.mixing import Item, build_mix
from boolcl.train.objective import Objective
from boolcl.train.periodic_eval import PeriodicEval
from boolcl.train.sampling import EpochShuffle
from boolcl.train.start_table import StartTable, StartView

# ---------------------------------------------------------------- set-up


def mixed_precision(setting: str) -> str:
    """`auto`: bf16 on GPUs that have it, else fp16; fp32 on CPU (exact, and what the tests pin)."""
    if setting != "auto":
        return setting
    if torch.cuda.is_available():
        return "bf16" if torch.cuda.is_bf16_supported() else "fp16"
    return "no"


def agree_on_run_dir(state: PartialState, cfg: DictConfig) -> Path:
    """Rank 0 names the run folder and every rank receives that name."""
    name = [cfg.out or str(Path("checkpoints") / f"{cfg.name}-{datetime.now():%Y%m%d-%H%M%S}")]
    if state.num_processes > 1:
        broadcast_object_list(name, from_process=0)
    return Path(name[0])


def per_device_batch(cfg: DictConfig, processes: int) -> int:
    t = cfg.train
    per_step = processes * t.grad_accum
    if t.batch_size < per_step or t.batch_size % per_step:
        raise ConfigError(f"train.batch_size={t.batch_size} must be a multiple of processes x grad_accum "
                          f"= {processes} x {t.grad_accum}; it is the global batch per optimiser step")
    check_grad_cache(t, processes)  # compose() checked it as for one process
    return t.batch_size // per_step


def build_model(cfg: DictConfig):
    """The starting model with what the recipe adds: padding-free forwards, gradient checkpointing,
    LoRA; and the start (None unless a term reads it): a view of the model's modules, which
    embeds as the start did until the first step (start_table.StartView)."""
    t = cfg.train
    model = load_model(cfg.model, similarity=cfg.similarity, trust_remote_code=cfg.model_trust_remote_code)
    model.boolcl_own_length = model.max_seq_length  # what the checkpoint is saved with (checkpoint.published_length)
    model.max_seq_length = t.max_length
    start = None
    if terms.reads_start(t):  # its identity keys the cached table
        identity = None
        if t.cache_start_table:  # the table is keyed by token ids: the tokenizer needs no description
            identity = embedding_identity(model, prompt=None, state=encoder_state(model, with_tokenizer=False))
        start = StartView(model, identity)
    encoder = model[0].auto_model
    if getattr(encoder, "pooler", None) is not None:  # BERT's pooler: computed, never used by SentenceTransformer
        encoder.pooler.requires_grad_(False)  # (DDP would wait forever for its gradients)
    if t.packed:  # padding-free forwards; before LoRA wraps the encoder
        packing.install(model)
    if t.gradient_checkpointing:
        encoder.gradient_checkpointing_enable()
    if t.lora.enabled:
        from peft import LoraConfig, get_peft_model

        set_encoder(model, get_peft_model(encoder, LoraConfig(
            r=t.lora.r, lora_alpha=t.lora.alpha, lora_dropout=t.lora.dropout,
            target_modules=list(t.lora.target_modules) if t.lora.target_modules else None)))
    return model, start


@dataclass
class Data:
    items: list[Item]
    mix: dict  # where the items came from, for data_manifest.json
    dataset: ItemDataset
    loader: torch.utils.data.DataLoader
    terms: list[terms.Term]  # the objective's terms, with what they read of the start


def build_data(cfg: DictConfig, model, local_batch: int, query_prompt: str | None, passage_prompt: str | None,
               start: StartView | None = None, accelerator=None) -> Data:
    """The training items, the objective's terms (train/terms/) with the starting model's
    embeddings of what they compare with (from `start`, encoded as `accelerator` runs: its
    device and precision), and a loader of `Batch`es in an order fixed by (seed, epoch)."""
    t = cfg.train
    items, mix = build_mix(cfg)
    objective_terms = terms.build(t, model.similarity_fn_name or "cosine")
    collate = Collator(model.tokenizer, t.max_length, t.hard_negatives, query_prompt, passage_prompt,
                       terms=objective_terms)
    rows = [row for term in objective_terms for row in term.start_rows(items, collate)]
    if any(term.reads_start for term in objective_terms):  # one pass of the frozen start over all they read
        if start is None:
            raise ValueError("build_data: these terms read the starting model: pass `start` (build_model's second value)")
        autocast, device = (accelerator.autocast, accelerator.device) if accelerator else (nullcontext, model.device)
        precision = str(accelerator.mixed_precision) if accelerator else "no"
        table = StartTable(start, rows, collate, autocast, device, **start_table_cache(cfg, start, device, precision))
        if table.cache is not None:
            mix["start_table"] = table.cache
        for term in objective_terms:  # decomposition's targets: from the start, before any step (and on resume)
            mix |= term.attach(table, items)
    dataset = ItemDataset(items, t.hard_negatives)
    lengths = [len(it.query) + max(len(p) for p in it.positives) for it in items] if t.group_by_length else None
    groups = [it.group for it in items] if t.group_by_cluster else None
    sampler = EpochShuffle(len(dataset), cfg.seed, lengths, local_batch, groups)
    loader = torch.utils.data.DataLoader(dataset, batch_size=local_batch, sampler=sampler, drop_last=True,
                                         collate_fn=collate, num_workers=t.num_workers,
                                         persistent_workers=t.num_workers > 0, pin_memory=torch.cuda.is_available(),
                                         generator=torch.Generator().manual_seed(cfg.seed))
    return Data(items, mix, dataset, loader, objective_terms)


def start_table_cache(cfg: DictConfig, start: StartView, device: torch.device, precision: str) -> dict:
    """Where the start table is cached (train.cache_start_table; nowhere: {}), under the start's
    identity and what else changes its floats besides the texts (start_table.StartTable)."""
    if not cfg.train.cache_start_table:
        return {}
    return {"cache_dir": cache.folder(cfg.eval.cache_dir),
            "identity": start.identity,
            "settings": {"precision": precision, "device": torch.device(device).type, "packed": bool(cfg.train.packed)}}


@dataclass
class Plan:
    micro_per_epoch: int  # micro-batches per epoch: whole optimiser steps only, so resume stays aligned
    total_steps: int
    epochs: int


def plan_steps(cfg: DictConfig, n_items: int, local_batch: int, processes: int) -> Plan:
    t = cfg.train
    steps_per_epoch = n_items // (local_batch * processes) // t.grad_accum
    if steps_per_epoch == 0:
        raise ConfigError(f"only {n_items} training items: fewer than one global batch of {t.batch_size}")
    total_steps = t.max_steps if t.max_steps > 0 else steps_per_epoch * t.epochs
    return Plan(steps_per_epoch * t.grad_accum, total_steps, math.ceil(total_steps / steps_per_epoch))


def build_optimizer(cfg: DictConfig, model, total_steps: int, device: torch.device):
    """AdamW with linear warm-up and decay. The parameter order is fixed: the optimiser state is
    restored by position."""
    t = cfg.train
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=t.lr, weight_decay=t.weight_decay, fused=device.type == "cuda")
    scheduler = get_linear_schedule_with_warmup(optimizer, int(t.warmup_ratio * total_steps), total_steps)
    return optimizer, scheduler


def write_run_files(cfg: DictConfig, run_dir: Path, mix: dict, accelerator, plan: Plan, resume_from: Path | None):
    """config.yaml and data_manifest.json in the run folder, and what the run is about to do."""
    t = cfg.train
    run_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_text(run_dir / "config.yaml", to_yaml(cfg))
    atomic_write_text(run_dir / "data_manifest.json", json.dumps(checkpoint.manifest(cfg, mix), indent=2) + "\n")
    print(f"training {cfg.name}: {mix['boolean']['examples']} Boolean + {mix['original']['examples']} original "
          f"examples, processes: {accelerator.num_processes}, global batch {t.batch_size}, {plan.total_steps} steps, "
          f"precision {accelerator.mixed_precision} -> {run_dir}" + (f" (resuming {resume_from.name})" if resume_from else ""),
          flush=True)
    if "decomposition" in mix:
        d = mix["decomposition"]
        print(f"decomposition targets: {d['rules']} NOT questions split by the rules, {d['provenance']} by their "
              f"provenance, {d['unsplit']} unsplit (no target)"
              + (f"; {d['composed']} composed for the warm-up" if d.get("composed") else ""), flush=True)


# ---------------------------------------------------------------- the loop's parts


def plain_step(forward, accelerator, objective, batch: Batch) -> tuple[torch.Tensor, dict]:
    """One micro-batch encoded whole: the objective's loss, backpropagated unless it is not finite
    (the caller reports that), as grad_cache.step does a chunk at a time."""
    q = forward(batch.query_features)
    p = forward(batch.passage_features)
    loss, parts = objective(q["sentence_embedding"], p["sentence_embedding"], batch)
    if torch.isfinite(loss):
        accelerator.backward(loss)
    return loss, parts


def epoch_batches(accelerator, data: Data, epoch: int, skip: int):
    """The loader for `epoch`, past its first `skip` micro-batches (already trained before a resume)."""
    data.dataset.set_epoch(epoch)
    batches = accelerator.skip_first_batches(data.loader, skip) if skip else data.loader
    batches.set_epoch(epoch)  # the order of an epoch depends on (seed, epoch) only
    return batches


def dropout_seed(seed: int, epoch: int, micro: int, rank: int) -> int:
    """Dropout draws from a seed fixed by (seed, epoch, batch, rank) alone, so a resumed run
    draws exactly what the uninterrupted run drew, whatever else used the RNG."""
    return hash((seed, epoch, micro, rank)) % 2**63


def non_finite_loss(loss: torch.Tensor, step: int, epoch: int, micro: int, run_dir: Path) -> TrainingError:
    return TrainingError(f"loss is {loss.item()} at step {step} (epoch {epoch}, batch {micro}); "
                         f"checkpoints in {run_dir} are intact. Try a lower train.lr, "
                         f"train.mixed_precision=no, or check that batch's data.")


def out_of_memory(t, step: int, n_queries: int) -> TrainingError:
    """What to change and what each change costs: train.grad_accum keeps the queries per optimiser
    step but not the objective; gradient caching keeps both, for one more forward pass."""
    cache = (f"lower train.grad_cache_chunk={t.grad_cache_chunk} (rows encoded at a time)" if t.grad_cache_chunk
             else "set train.grad_cache_chunk=N (encode N rows at a time, keep every negative: one more forward pass)")
    return TrainingError(
        f"out of memory at step {step} with {n_queries} queries x {1 + t.hard_negatives} passages per "
        f"device of length <= {t.max_length}: {cache}, set train.gradient_checkpointing=true, lower "
        f"train.max_length, or lower train.batch_size or train.hard_negatives. Raising train.grad_accum keeps "
        f"the queries per optimiser step but not the objective: with InfoNCE each micro-batch's queries then "
        f"see only that micro-batch's negatives")


def position_after(step: int, epoch: int, micro: int, plan: Plan) -> dict:
    """Where the data stands after micro-batch `micro` of `epoch` (trainer_state.json)."""
    if micro + 1 == plan.micro_per_epoch:
        return {"step": step, "epoch": epoch + 1, "micro_batches": 0}
    return {"step": step, "epoch": epoch, "micro_batches": micro + 1}


class Meter:
    """Triples and tokens seen since the loop started (counted on the CPU: no GPU sync), and
    one record per logged step to train_log.jsonl, the trackers and the progress bar."""

    def __init__(self, accelerator, log: checkpoint.TrainLog, bar):
        self.accelerator, self.log, self.bar = accelerator, log, bar
        self.seen, self.tokens, self.start = 0, 0, time.perf_counter()

    def count(self, batch: Batch) -> None:
        self.seen += batch.n_queries * self.accelerator.num_processes
        self.tokens += batch.n_tokens * self.accelerator.num_processes

    def write(self, step: int, epoch: int, loss: torch.Tensor, parts: dict, lr: float, grad_norm,
              scores: dict) -> None:
        self.start += scores.get("eval_s", 0.0)  # time spent scoring is not training time
        elapsed = time.perf_counter() - self.start
        record = {"step": step, "epoch": epoch, "loss": self.accelerator.reduce(loss.detach(), "mean").item(),
                  "lr": lr, "grad_norm": float(grad_norm),
                  "triples_per_s": self.seen / elapsed, "elapsed_s": elapsed, "tokens": self.tokens}
        if len(parts) > 1:  # each term of the objective on its own (this process's last batch)
            record |= {f"loss_{k}": v.item() for k, v in parts.items()}
        record |= scores  # eval/<set>/<MEASURE@k>/<TYPE> and eval_s at the steps train.eval_every scores
        self.log.write(record)
        self.accelerator.log({k: v for k, v in record.items() if k != "step"}, step=step)
        self.bar.set_postfix(loss=f"{record['loss']:.4f}")


# ---------------------------------------------------------------- train


def train(cfg: DictConfig) -> Path:
    t = cfg.train
    state = PartialState(cpu=cpu_only_distributed())
    run_dir = agree_on_run_dir(state, cfg)
    resume_from = checkpoint.find_resume(t.resume, run_dir)
    accelerator = Accelerator(cpu=cpu_only_distributed(), mixed_precision=mixed_precision(t.mixed_precision),
                              gradient_accumulation_steps=t.grad_accum,
                              log_with=list(t.report_to) or None, project_dir=str(run_dir))
    set_seed(cfg.seed)

    # Set-up. Everything that can fail cheaply fails here, before any compute.
    local_batch = per_device_batch(cfg, accelerator.num_processes)
    scorer = PeriodicEval(cfg, accelerator, run_dir, resume_from)  # train.eval_every: its sets are read here
    model, start = build_model(cfg)
    model.to(accelerator.device)  # the set-up's encoding (the start table) runs where training will
    check_writable(run_dir, checkpoint.checkpoint_bytes(model) if t.save_every else
                   checkpoint.model_bytes(model) + checkpoint.CARD_SLACK, what="run folder (out=)")
    query_prompt, passage_prompt = prompts_for(model, cfg.eval.query_prompt, cfg.eval.passage_prompt)
    data = build_data(cfg, model, local_batch, query_prompt, passage_prompt, start, accelerator)
    del start  # the table holds all the NOT-aware terms need of the start
    plan = plan_steps(cfg, len(data.loader.sampler), local_batch, accelerator.num_processes)  # items per epoch
    optimizer, scheduler = build_optimizer(cfg, model, plan.total_steps, accelerator.device)
    # InfoNCE or MarginMSE, plus the NOT-aware terms the recipe switches on (objective.py)
    objective = Objective(data.terms)
    model, optimizer, data.loader = accelerator.prepare(model, optimizer, data.loader)
    # The scheduler counts optimiser steps of the global batch, so it stays out of prepare()
    # (Accelerate would step it once per process); checkpoint.py saves it with the state, as JSON.
    forward = torch.compile(model, dynamic=True) if t.compile else model  # batches vary in length

    progress = {"step": 0, "epoch": 0, "micro_batches": 0}  # where the data stands, for resume
    if resume_from is not None:
        checkpoint.load_training_state(accelerator, model, optimizer, scheduler, resume_from / checkpoint.STATE_DIR)
        progress = json.loads((resume_from / checkpoint.STATE_FILE).read_text())
    if accelerator.is_main_process:
        write_run_files(cfg, run_dir, data.mix, accelerator, plan, resume_from)
    log = checkpoint.TrainLog(run_dir / "train_log.jsonl", enabled=accelerator.is_main_process,
                              after_step=progress["step"])
    accelerator.init_trackers("logs", config=checkpoint.flat_config(cfg))  # TensorBoard: <run>/logs/

    # The loop.
    step = progress["step"]
    bar = tqdm(total=plan.total_steps, initial=step, desc=f"training {cfg.name}", unit="step",
               disable=not accelerator.is_main_process)
    meter = Meter(accelerator, log, bar)
    model.train()
    if resume_from is None:  # a term that trains alone first (train.decomposition.warmup_steps)
        for term in data.terms:
            said = term.before_training(model, data.items, t, cfg.seed, accelerator)
            if said and accelerator.is_main_process:
                bar.write(said)
    for epoch in range(progress["epoch"], plan.epochs):
        skip = progress["micro_batches"] if epoch == progress["epoch"] else 0
        for micro, batch in enumerate(epoch_batches(accelerator, data, epoch, skip), start=skip):
            if micro >= plan.micro_per_epoch:
                break
            torch.manual_seed(dropout_seed(cfg.seed, epoch, micro, accelerator.process_index))
            with accelerator.accumulate(model):
                try:
                    if t.grad_cache_chunk:  # the whole batch's objective, encoded a chunk at a time
                        loss, parts = grad_cache.step(model, forward, accelerator, objective, batch,
                                                      t.grad_cache_chunk)
                    else:
                        loss, parts = plain_step(forward, accelerator, objective, batch)
                    if not torch.isfinite(loss):  # (then nothing was backpropagated)
                        raise non_finite_loss(loss, step + 1, epoch, micro, run_dir)
                except torch.OutOfMemoryError:
                    raise out_of_memory(t, step + 1, batch.n_queries) from None
                grad_norm = None
                if accelerator.sync_gradients:
                    grad_norm = accelerator.clip_grad_norm_(model.parameters(), t.max_grad_norm)
                optimizer.step()  # a no-op between accumulation boundaries
                if accelerator.sync_gradients:
                    scheduler.step()
                optimizer.zero_grad(set_to_none=True)
            meter.count(batch)
            if not accelerator.sync_gradients:
                continue
            step += 1
            bar.update(1)
            scores = scorer.maybe_score(model, step, epoch, plan.total_steps)  # {} but every train.eval_every steps
            if step % t.log_every == 0 or step == plan.total_steps or scores:
                meter.write(step, epoch, loss, parts, scheduler.get_last_lr()[0], grad_norm, scores)
            if t.save_every and step % t.save_every == 0 and step < plan.total_steps:
                checkpoint.save_checkpoint(accelerator, model, optimizer, scheduler, run_dir,
                                           position_after(step, epoch, micro, plan) | scorer.state(),
                                           keep_last=t.keep_last)
            if step >= plan.total_steps:
                break
        if step >= plan.total_steps:
            break
    bar.close()

    checkpoint.save_final(accelerator, model, run_dir)
    for tracker in accelerator.trackers:  # end_training() would also end the process group, which
        tracker.finish()  # outlives the run; train.py ends it
    return run_dir
