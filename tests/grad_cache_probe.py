"""Run under `accelerate launch --multi_gpu --num_processes 2`: a cached step against the whole graph, with
every process's passages gathered as negatives (train.gather_negatives), on the real model wrapped in DDP.

argv: model folder, training pool, output folder, chunk size. Writes OUT/rank<i>.json: the loss of each way,
the largest difference of their synchronised gradients, how many gradient all-reduces each backward ran, and
how far the gradients move when the other process's negatives are not gathered.
"""
import json
import sys
from pathlib import Path

import torch
from accelerate import Accelerator
from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook

from boolcl.config import compose
from boolcl.distributed import cpu_only_distributed
from boolcl.train import grad_cache
from boolcl.train.loop import build_data, build_model, per_device_batch
from boolcl.train.objective import Objective

model_dir, pool, out, chunk = sys.argv[1], sys.argv[2], Path(sys.argv[3]), int(sys.argv[4])
accelerator = Accelerator(cpu=cpu_only_distributed())
assert accelerator.num_processes == 2, accelerator.distributed_type
rank = accelerator.process_index
cfg = compose(["recipe=tiny", f"model={model_dir}", f"train.boolean={pool}", f"train.original={pool}",
               "train.batch_size=6", "train.hard_negatives=1", "train.max_length=32", f"train.grad_cache_chunk={chunk}",
               "train.gather_negatives=true", f"out={out / 'run'}"])
local = per_device_batch(cfg, accelerator.num_processes)
torch.manual_seed(cfg.seed)
model, start = build_model(cfg)
data = build_data(cfg, model, local, None, None, start)
batch = data.loader.collate_fn([data.dataset[i] for i in range(rank * local, (rank + 1) * local)])
objective = Objective(data.terms)
model = accelerator.prepare(model)
model.train()
reduces = []


def counted(state, bucket):
    reduces.append(1)
    return allreduce_hook(state, bucket)


model.register_comm_hook(None, counted)


def gradients():
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    model.zero_grad(set_to_none=True)
    return grads


def whole_graph():
    """The reference: every chunk encoded with its graph kept, in the cached step's order, one backward."""
    embedded = [model(features)["sentence_embedding"] for features in grad_cache.pieces(batch, chunk)]
    queries = grad_cache.query_chunks(batch, chunk)
    loss, _ = objective(torch.cat(embedded[:queries]), torch.cat(embedded[queries:]), batch)
    accelerator.backward(loss)
    return loss.detach()


def cached():
    return grad_cache.step(model, model, accelerator, objective, batch, chunk)[0]


def counted_run(run):
    torch.manual_seed(1000 + rank)  # each process its own dropout, as the loop's dropout_seed gives it
    reduces.clear()
    loss = run()
    return loss.item(), len(reduces), gradients()


ref_loss, ref_reduces, ref = counted_run(whole_graph)
loss, cached_reduces, got = counted_run(cached)
objective.terms[0].loss.gather = False  # the other process's negatives left out: another gradient
_, _, alone = counted_run(cached)
result = {"rank": rank, "reference_loss": ref_loss, "cached_loss": loss, "reference_reduces": ref_reduces,
          "cached_reduces": cached_reduces, "chunks": len(list(grad_cache.pieces(batch, chunk))),
          "max_diff": max(float((ref[k] - got[k]).abs().max()) for k in ref),
          "max_grad": max(float(ref[k].abs().max()) for k in ref),
          "same_keys": sorted(ref) == sorted(got),
          "max_diff_without_gather": max(float((ref[k] - alone[k]).abs().max()) for k in ref)}
(out / f"rank{rank}.json").write_text(json.dumps(result))

import torch.distributed as dist  # noqa: E402

dist.barrier()
dist.destroy_process_group()  # a clean exit: gloo threads otherwise abort at interpreter shutdown
