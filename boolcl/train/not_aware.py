"""Losses that make a retriever read NOT without forgetting the rest (`recipe=not_plus`).

- `ExclusionMargin`: a NOT question's excluded passage must score below each of the
  question's positives in the batch by a margin. InfoNCE only asks it to lose to the one
  target, and only until its share of the softmax is small; NegRecall@10 asks it to drop
  below nearly every positive.
- Query pairs: `InfoNCE` with explicit targets (see `Collator`) makes the plain question
  retrieve the passage that its NOT form excludes, and `QueryContrast` makes that passage
  prefer the plain form to the NOT form.
- `DecompositionDistill`: the NOT question's embedding points where the frozen starting
  model's decomposition arithmetic puts it (decomposition.py says why that generalises).
- `Retention`: KL between the frozen starting model's in-batch score distribution and the
  student's, on the original data's queries, so general ranking is not traded away.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from boolcl.train.losses import false_negative_mask, labelled_positives, similarity


class ExclusionMargin(torch.nn.Module):
    """Hinge: s(q, positive) - s(q, excluded) >= margin, for every positive of q in the batch."""

    def __init__(self, similarity: str = "dot", margin: float = 0.2):
        super().__init__()
        self.kind, self.margin = similarity, margin

    def forward(self, q: torch.Tensor, p: torch.Tensor, passage_keys: torch.Tensor, positive_keys: torch.Tensor,
                excluded: torch.Tensor) -> torch.Tensor:
        """q: (B, d); p: (B + B*n, d) as the collator lays them out; excluded: (B, n) bool slots.

        Mean over (query, excluded passage, positive in the batch) of relu(margin - (s+ - s-)).
        """
        b, n = excluded.shape
        rows = excluded.any(1)
        if not bool(rows.any()):
            return q.new_zeros(())
        q = q[rows]
        scores = similarity(q, p, self.kind).float()  # (R, P)
        is_positive = labelled_positives(positive_keys[rows], passage_keys)  # (R, P)
        negatives = torch.arange(n, device=q.device)[None, :] + b + n * torch.nonzero(rows).flatten()[:, None]
        neg_scores = scores.gather(1, negatives)  # (R, n)
        gaps = scores[:, None, :] - neg_scores[:, :, None]  # (R, n, P): s(q, positive) - s(q, excluded)
        valid = excluded[rows][:, :, None] & is_positive[:, None, :]
        hinge = F.relu(self.margin - gaps)
        return (hinge * valid).sum() / valid.sum().clamp(min=1)


class QueryContrast(torch.nn.Module):
    """The excluded passage must prefer the plain question to its NOT form:
    -log sigmoid(scale * (s(plain, e) - s(not, e))), so adding the exclusion must lower e's score."""

    def __init__(self, similarity: str = "dot", scale: float = 1.0):
        super().__init__()
        self.kind, self.scale = similarity, scale

    def forward(self, q_not: torch.Tensor, q_plain: torch.Tensor, excluded: torch.Tensor) -> torch.Tensor:
        if self.kind == "cosine":
            q_not, q_plain, excluded = (F.normalize(x, dim=-1) for x in (q_not, q_plain, excluded))
        gap = ((q_plain - q_not) * excluded).sum(-1).float()
        return F.softplus(-self.scale * gap).mean()


class Retention(torch.nn.Module):
    """KL(teacher || student) over each chosen query's in-batch passages, at the training scale."""

    def __init__(self, similarity: str = "dot", scale: float = 1.0):
        super().__init__()
        self.kind, self.scale = similarity, scale

    def forward(self, q: torch.Tensor, p: torch.Tensor, teacher_q: torch.Tensor, teacher_p: torch.Tensor,
                rows: torch.Tensor, passage_keys: torch.Tensor, positive_keys: torch.Tensor) -> torch.Tensor:
        if not bool(rows.any()):
            return q.new_zeros(())
        idx = torch.nonzero(rows).flatten()
        mask = false_negative_mask(positive_keys[idx], passage_keys, idx)
        return masked_kl(self.scale * similarity(q[idx], p, self.kind).float(),
                         self.scale * similarity(teacher_q[idx], teacher_p, self.kind).float(), mask)


def masked_kl(student: torch.Tensor, teacher: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """KL(softmax(teacher) || softmax(student)) per row over the unmasked columns, averaged."""
    student, teacher = student.masked_fill(mask, float("-inf")), teacher.masked_fill(mask, float("-inf"))
    log_s = F.log_softmax(student, -1).masked_fill(mask, 0.0)
    t = F.softmax(teacher, -1)
    log_t = F.log_softmax(teacher, -1).masked_fill(mask, 0.0)
    return (t * (log_t - log_s)).sum(-1).mean()


class DecompositionDistill(torch.nn.Module):
    """1 - cos(student's NOT question, its decomposition target): a direction, since a query's
    length scales all its scores alike and leaves its ranking unchanged."""

    def forward(self, q: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return (1 - F.cosine_similarity(q.float(), targets.to(q.device).float(), dim=-1)).mean()
