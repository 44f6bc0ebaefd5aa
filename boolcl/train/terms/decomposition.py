"""Decomposition distillation (train.decomposition): each NOT question's embedding points where the
frozen starting model's decomposition arithmetic puts it, 1 - cos(student, target); a
direction, since a query's length scales all its scores alike and leaves its ranking
unchanged. The targets and why they carry over to unseen topics: train/decomposition.py."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from boolcl.train import decomposition
from boolcl.train.collate import Batch
from boolcl.train.terms.base import Core, Extra, Term


class DecompositionDistill(Term):
    name = "decomposition"
    reads_start = True

    def __init__(self, weight: float, drop: float = 1.25, anchor: float = 0.5, normalize: bool = True):
        super().__init__(weight)
        self.drop, self.anchor, self.normalize = drop, anchor, normalize
        self.prompt = None

    @classmethod
    def from_config(cls, t, similarity: str) -> DecompositionDistill:
        d = t.decomposition
        return cls(d.weight, float(d.drop), float(d.anchor), normalize=similarity == "cosine")

    def collate(self, core: Core) -> Extra:
        rows = [i for i, b in enumerate(core.picks) if b.get("target") is not None]
        targets = [core.picks[i]["target"] for i in rows]
        return Extra(tensors={"rows": torch.tensor(rows, dtype=torch.long),
                              "targets": torch.stack(targets) if targets else torch.zeros((0, 0))})

    def start_rows(self, items, collator) -> list[str]:
        self.prompt = collator.query_prompt
        return decomposition.Plan.of(items).rows(self.prompt)

    def attach(self, table, items) -> dict:
        """Every NOT item that splits gets its target, from the start, before any step (and on resume)."""
        counts = decomposition.attach_targets(table.embed, decomposition.Plan.of(items), items,
                                              drop=self.drop, anchor=self.anchor, normalize=self.normalize,
                                              prompt=self.prompt)
        return {"decomposition": counts}

    def forward(self, q: torch.Tensor, p: torch.Tensor, batch: Batch) -> torch.Tensor | None:
        mine = batch.extra[self.name]
        if not len(mine["rows"]):
            return None
        student, targets = q[mine["rows"]].float(), mine["targets"].to(q.device).float()
        return (1 - F.cosine_similarity(student, targets, dim=-1)).mean()
