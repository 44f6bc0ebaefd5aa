"""Contrastive InfoNCE over in-batch and hard negatives.

Query i's target is passage i; every other passage in the batch (other queries'
positives and all hard negatives) is a negative, except passages that are labelled
positives of query i, which are left out of its softmax. With `gather=True` under
several processes, every process's passages serve as negatives for every query.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from boolcl.train.collate import PLACEHOLDER


def similarity(q: torch.Tensor, p: torch.Tensor, kind: str) -> torch.Tensor:
    if kind == "cosine":
        q, p = F.normalize(q, dim=-1), F.normalize(p, dim=-1)
    elif kind != "dot":
        raise ValueError(f"similarity must be 'dot' or 'cosine', got {kind!r}")
    return q @ p.T


def default_scale(kind: str) -> float:
    """Cosine lives in [-1, 1] and needs sharpening (temperature 0.05); dot scores do not."""
    return 20.0 if kind == "cosine" else 1.0


def labelled_positives(positive_keys: torch.Tensor, passage_keys: torch.Tensor) -> torch.Tensor:
    """(queries, passages): True where passage j is one of query i's labelled positives."""
    return (passage_keys[None, :, None] == positive_keys[:, None, :]).any(-1)


def false_negative_mask(positive_keys: torch.Tensor, passage_keys: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """True where passage j is a labelled positive of query i but not its target, or a placeholder."""

    mask = labelled_positives(positive_keys, passage_keys) | (passage_keys == PLACEHOLDER)[None, :]
    mask[torch.arange(len(targets), device=mask.device), targets] = False
    return mask


def gather_with_grad(x: torch.Tensor) -> tuple[torch.Tensor, int]:
    """All processes' rows (gradients flow back to their owners) and this process's offset."""
    import torch.distributed as dist
    from torch.distributed.nn.functional import all_gather

    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return x, 0
    return torch.cat(all_gather(x), 0), dist.get_rank() * x.shape[0]


def gather_keys(x: torch.Tensor) -> torch.Tensor:
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return x
    out = [torch.empty_like(x) for _ in range(dist.get_world_size())]
    dist.all_gather(out, x)
    return torch.cat(out, 0)


class InfoNCE(torch.nn.Module):
    def __init__(self, similarity: str = "dot", scale: float | None = None, gather: bool = False):
        super().__init__()
        self.kind, self.gather = similarity, gather
        self.scale = default_scale(similarity) if scale is None else scale

    def forward(self, q: torch.Tensor, p: torch.Tensor, passage_keys: torch.Tensor | None = None,
                positive_keys: torch.Tensor | None = None, targets: torch.Tensor | None = None) -> torch.Tensor:
        """q: (B, d) queries; p: (P, d) passages, rows 0..B-1 being the queries' targets
        unless `targets` (indices into this process's passages) says otherwise."""
        offset = 0
        if self.gather:
            p, offset = gather_with_grad(p)
            if passage_keys is not None:
                passage_keys = gather_keys(passage_keys)
        if targets is None:
            targets = torch.arange(q.shape[0], device=q.device)
        targets = targets + offset
        logits = self.scale * similarity(q, p, self.kind).float()
        if passage_keys is not None and positive_keys is not None:
            logits = logits.masked_fill(false_negative_mask(positive_keys, passage_keys, targets), float("-inf"))
        return F.cross_entropy(logits, targets)


class MarginMSE(torch.nn.Module):
    """Match the teacher's margins: (s(q, p+) - s(q, p-)) should equal (t(q, p+) - t(q, p-)).

    The objective msmarco-distilbert-dot-v5 was trained with (Hofstätter et al., 2020);
    passages are [B positives, then each query's n negatives], as the collator lays them out.
    """

    def __init__(self, similarity: str = "dot"):
        super().__init__()
        self.kind = similarity

    def forward(self, q: torch.Tensor, p: torch.Tensor, teacher_margins: torch.Tensor) -> torch.Tensor:
        b, n = teacher_margins.shape
        if self.kind == "cosine":
            q, p = F.normalize(q, dim=-1), F.normalize(p, dim=-1)
        positive = (q * p[:b]).sum(-1)  # (B,)
        negatives = torch.einsum("bd,bnd->bn", q, p[b:].view(b, n, -1))  # (B, n)
        return F.mse_loss((positive[:, None] - negatives).float(), teacher_margins.float())
