"""The training objective: the weighted sum of the terms the recipe switches on (train/terms/).

    loss = contrastive (InfoNCE or MarginMSE)
         + retention.weight     · Retention             (KL to the frozen starting model's scores)
         + decomposition.weight · DecompositionDistill  (cosine to the start's decomposition arithmetic)

Each term is reported on its own in the training log, so a run shows what each one did.
"""
from __future__ import annotations

import torch

from boolcl.train.collate import Batch
from boolcl.train.terms import Term


class Objective:
    def __init__(self, terms: list[Term]):
        self.terms = terms

    def __call__(self, q: torch.Tensor, p: torch.Tensor, batch: Batch) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """q: every query row's embedding, p: every passage row's (laid out as `Batch` says)."""
        parts = {}
        for term in self.terms:
            value = term(q, p, batch)
            if value is not None:  # nothing of this term's in the batch
                parts[term.name] = term.weight * value
        return sum(parts.values()), parts
