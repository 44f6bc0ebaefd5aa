"""The contrastive term every run has: InfoNCE over in-batch and hard negatives, or MarginMSE
against a teacher's margins (train.loss), on the batch's own queries."""
from __future__ import annotations

import torch

from boolcl.train.collate import Batch
from boolcl.train.losses import InfoNCE, MarginMSE
from boolcl.train.terms.base import Term


class Contrastive(Term):
    name = "contrastive"

    def __init__(self, loss: str, similarity: str, scale: float | None = None, gather: bool = False):
        super().__init__(1.0)
        if loss not in ("infonce", "margin_mse"):
            raise ValueError(f"train.loss must be 'infonce' or 'margin_mse', got {loss!r}")
        self.loss = InfoNCE(similarity, scale, gather=gather) if loss == "infonce" else MarginMSE(similarity)

    @classmethod
    def from_config(cls, t, similarity: str) -> Contrastive:
        return cls(t.loss, similarity, t.scale, t.gather_negatives)

    def forward(self, q: torch.Tensor, p: torch.Tensor, batch: Batch) -> torch.Tensor:
        q = q[:batch.n_queries]
        if isinstance(self.loss, MarginMSE):
            return self.loss(q, p, batch.teacher_margins)
        return self.loss(q, p, batch.passage_keys, batch.positive_keys)
