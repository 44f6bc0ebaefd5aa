"""Contrastive InfoNCE over in-batch and hard negatives.

Query i's target is passage i; every other passage in the batch (other queries'
positives and all hard negatives) is a negative, except passages that are labelled
positives of query i (`false_negative_mask`), which are left out of its softmax.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F


def similarity(q: torch.Tensor, p: torch.Tensor, kind: str) -> torch.Tensor:
    if kind == "cosine":
        q, p = F.normalize(q, dim=-1), F.normalize(p, dim=-1)
    elif kind != "dot":
        raise ValueError(f"similarity must be 'dot' or 'cosine', got {kind!r}")
    return q @ p.T


def default_scale(kind: str) -> float:
    """Cosine lives in [-1, 1] and needs sharpening (temperature 0.05); dot scores do not."""
    return 20.0 if kind == "cosine" else 1.0


class InfoNCE(torch.nn.Module):
    def __init__(self, similarity: str = "dot", scale: float | None = None):
        super().__init__()
        self.kind = similarity
        self.scale = default_scale(similarity) if scale is None else scale

    def forward(self, q: torch.Tensor, p: torch.Tensor, false_negative_mask: torch.Tensor | None = None,
                target_offset: int = 0) -> torch.Tensor:
        """q: (B, d) queries; p: (P, d) passages whose rows offset..offset+B are the targets."""
        logits = self.scale * similarity(q, p, self.kind).float()
        if false_negative_mask is not None:
            logits = logits.masked_fill(false_negative_mask, float("-inf"))
        labels = torch.arange(q.shape[0], device=q.device) + target_offset
        return F.cross_entropy(logits, labels)
