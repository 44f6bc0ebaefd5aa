"""Retention (train.retention): KL between the frozen starting model's in-batch score distribution
and the student's, on the original data's queries, so general ranking is not traded away for
the NOT questions."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from boolcl.train.collate import Batch
from boolcl.train.losses import default_scale, false_negative_mask, similarity
from boolcl.train.start_table import retention_rows
from boolcl.train.terms.base import Core, Extra, Term


def masked_kl(student: torch.Tensor, teacher: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """KL(softmax(teacher) || softmax(student)) per row over the unmasked columns, averaged."""
    student, teacher = student.masked_fill(mask, float("-inf")), teacher.masked_fill(mask, float("-inf"))
    log_s = F.log_softmax(student, -1).masked_fill(mask, 0.0)
    t = F.softmax(teacher, -1)
    log_t = F.log_softmax(teacher, -1).masked_fill(mask, 0.0)
    return (t * (log_t - log_s)).sum(-1).mean()


class Retention(Term):
    name = "retention"
    reads_start = True

    def __init__(self, weight: float, similarity: str = "dot", scale: float | None = None):
        super().__init__(weight)
        self.kind = similarity
        self.scale = default_scale(similarity) if scale is None else scale
        self.table = None  # the starting model's embeddings (attach)

    @classmethod
    def from_config(cls, t, similarity: str) -> Retention:
        return cls(t.retention.weight, similarity, t.scale)

    def collate(self, core: Core) -> Extra:
        return Extra(tensors={"rows": torch.tensor([bool(b.get("retain")) for b in core.picks], dtype=torch.bool)})

    def start_rows(self, items, collator) -> list[str]:
        return retention_rows(items, collator)

    def attach(self, table, items) -> dict:
        self.table = table
        return {}

    def forward(self, q: torch.Tensor, p: torch.Tensor, batch: Batch) -> torch.Tensor:
        rows = batch.extra[self.name]["rows"]
        if not bool(rows.any()):
            return q.new_zeros(())
        if self.table is None:
            raise ValueError("Retention reads the starting model's table: attach() it first")
        idx = torch.nonzero(rows).flatten()
        teacher_q = self.table.lookup(batch.query_features, idx.cpu())
        teacher_p = self.table.lookup(batch.passage_features)
        mask = false_negative_mask(batch.positive_keys[idx], batch.passage_keys, idx)
        return masked_kl(self.scale * similarity(q[idx], p, self.kind).float(),
                         self.scale * similarity(teacher_q, teacher_p, self.kind).float(), mask)
