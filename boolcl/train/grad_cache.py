"""Gradient caching (`train.grad_cache_chunk`): the whole batch's objective at the memory of a chunk.

InfoNCE improves with more in-batch negatives, but a step's activations grow with the batch,
and `train.grad_accum` is no way round that: each micro-batch would see only its own negatives,
a different objective. The objective reads only the sentence embeddings, which are small next to
the activations that make them, so a step runs in three passes (GradCache; Gao et al., 2021,
"Scaling Deep Contrastive Learning Batch Size under Memory Limited Setup"):

1. embed every query row and every passage row, `chunk` rows at a time, without a graph, noting
   the random state each chunk starts from;
2. compute the objective over the whole batch on those embeddings, held as leaves, and
   backpropagate it to them (with `train.gather_negatives`, the gradients of this process's
   passages that other processes' queries read come back through the gather's backward);
3. encode each chunk again, with its graph, from its noted random state (the same dropout
   masks, so the cached gradient belongs to these activations), and backpropagate the cached
   gradient into the weights.

The weights get the whole batch's gradients, for one more forward pass; only one chunk's
activations are alive at a time. It rests on every term of the objective reading the sentence
embeddings alone (train/terms/: `Term.forward(q, p, batch)`): those are all a step caches.
"""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import nullcontext

import torch
from accelerate.utils import DistributedType

from boolcl.errors import ConfigError
from boolcl.train.collate import Batch


class RandomState:
    """The CPU's generator and, on CUDA, the device's, as a chunk's first encoding starts:
    dropout in its second encoding must draw the masks the first drew."""

    def __init__(self, device: torch.device):
        self.device = device
        self.cpu = torch.get_rng_state()
        self.cuda = torch.cuda.get_rng_state(device) if device.type == "cuda" else None

    def restore(self) -> None:
        torch.set_rng_state(self.cpu)
        if self.cuda is not None:
            torch.cuda.set_rng_state(self.cuda, self.device)


def chunks(features: dict[str, torch.Tensor], size: int) -> Iterator[dict[str, torch.Tensor]]:
    """Tokenised rows `size` at a time, each chunk without the padding columns its rows all end
    in (a chunk of short texts runs short). A new dict each, made as it is asked for: a forward
    writes its outputs (token embeddings: the chunk's largest tensor) into the dict it is given,
    and a list of them would keep every chunk's outputs alive to the end of the step."""
    mask = features["attention_mask"]
    width = mask.shape[1]
    for start in range(0, mask.shape[0], size):
        rows = slice(start, start + size)
        used = int(mask[rows].any(0).nonzero().max()) + 1  # left padding: the last column is used
        yield {k: v[rows, :used] if v.dim() > 1 and v.shape[1] == width else v[rows] for k, v in features.items()}


def pieces(batch: Batch, chunk: int) -> Iterator[dict[str, torch.Tensor]]:
    """The batch's query chunks, then its passage chunks."""
    yield from chunks(batch.query_features, chunk)
    yield from chunks(batch.passage_features, chunk)


def query_chunks(batch: Batch, chunk: int) -> int:
    """How many of `pieces` are queries: the objective reads queries and passages apart."""
    return len(range(0, batch.query_features["input_ids"].shape[0], chunk))


def step(model, forward, accelerator, objective, batch: Batch, chunk: int) -> tuple[torch.Tensor, dict]:
    """One micro-batch: the objective's loss and parts (detached), its gradients accumulated into
    the weights as `accelerator.backward(loss)` would put them (divided over train.grad_accum,
    under fp16's loss scale), unless the loss is not finite, which the caller reports.

    `model` is the prepared (DDP-wrapped) model, `forward` what runs it (the same, or compiled);
    both passes run it, so autocast is the same in both. `objective` is called as
    `objective(query rows' embeddings, passage rows' embeddings, batch)`."""
    if accelerator.distributed_type == DistributedType.DEEPSPEED:
        raise ConfigError("train.grad_cache_chunk does not run under DeepSpeed, whose engine steps the optimiser "
                          "inside each backward (here one per chunk): use DDP or FSDP, or train.grad_cache_chunk=null")
    device = batch.query_features["input_ids"].device
    states, leaves = [], []
    with torch.no_grad():
        for features in pieces(batch, chunk):
            states.append(RandomState(device))
            leaves.append(forward(features)["sentence_embedding"].requires_grad_())
    queries = query_chunks(batch, chunk)
    loss, parts = objective(torch.cat(leaves[:queries]), torch.cat(leaves[queries:]), batch)
    if torch.isfinite(loss):
        loss.backward()  # d loss / d embeddings, into the leaves; no weight is reached
        replay(model, forward, accelerator, batch, chunk, states, [leaf.grad for leaf in leaves])
    return loss.detach(), {k: v.detach() for k, v in parts.items()}


def replay(model, forward, accelerator, batch: Batch, chunk: int, states: list[RandomState],
           grads: list[torch.Tensor]) -> None:
    """The third pass: each chunk encoded again from its random state and its cached gradient
    backpropagated. Only the last chunk's backward may synchronise gradients across processes;
    the others run under no_sync (between accumulation boundaries `accelerator.accumulate`
    already holds every one under it). The generators end as the first pass left them."""
    devices = [states[0].device] if states[0].cuda is not None else []
    with torch.random.fork_rng(devices=devices):
        for i, (features, state, grad) in enumerate(zip(pieces(batch, chunk), states, grads)):
            with nullcontext() if i == len(states) - 1 else accelerator.no_sync(model):
                state.restore()
                embeddings = forward(features)["sentence_embedding"]
                accelerator.backward((embeddings * grad).sum())
