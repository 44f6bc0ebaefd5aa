"""The training objective: the contrastive loss plus the recipe's NOT-aware terms, weighted.

    loss = InfoNCE (or MarginMSE)
         + exclusion.weight · ExclusionMargin     (NOT: excluded passage below every positive)
         + pairs.weight     · (InfoNCE on the plain questions: they retrieve the excluded passage
                               + QueryContrast: that passage prefers the plain form to the NOT form)
         + retention.weight · KL to the frozen starting model (original data's queries, and
                               the Boolean ones of retention.operators)
         + decomposition.weight · (1 - cos to the starting model's decomposition of each NOT question)
         + scope.weight     · cross-entropy of the scope-pooling head's token classes (scope.py)
                              (+ the same on a share of the questions with their markers hidden)

Each term is reported on its own in the training log, so a run shows what each one did.
"""
from __future__ import annotations

import contextlib

import torch

from boolcl.train.collate import Batch
from boolcl.train.losses import InfoNCE, MarginMSE
from boolcl.train.not_aware import (
    DecompositionDistill,
    ExclusionMargin,
    QueryContrast,
    Retention,
)
from boolcl.train.scope import HiddenMarkerLoss, ScopeLoss
from boolcl.train.start_table import StartTable


class Objective:
    def __init__(self, t, similarity: str, start_table: StartTable | None = None,
                 autocast=contextlib.nullcontext, scope_head=None):
        """`t` is the train config. With retention on, `start_table` holds the starting model's
        embeddings of the retained queries and the pool's passages (start_table.py)."""
        self.t, self.autocast = t, autocast
        if t.loss == "margin_mse":
            self.margin_mse = MarginMSE(similarity)
        self.info_nce = InfoNCE(similarity, t.scale, gather=t.gather_negatives)
        self.pair_nce = InfoNCE(similarity, t.scale, gather=False)  # pair targets live on this process
        self.pair_contrast = QueryContrast(similarity, self.info_nce.scale)
        self.exclusion = ExclusionMargin(similarity, t.exclusion.margin) if t.exclusion.weight else None
        self.retention = Retention(similarity, self.info_nce.scale) if t.retention.weight else None
        self.decomposition = DecompositionDistill() if t.decomposition.weight else None
        self.scope = ScopeLoss() if t.scope.weight else None
        self.hidden_markers = None
        if t.scope.weight and t.scope.hide_markers:
            if scope_head is None:
                raise ValueError("train.scope.hide_markers needs the model's scope head")
            self.hidden_markers = HiddenMarkerLoss(scope_head, t.scope.hide_markers)
        if self.retention is not None and start_table is None:
            raise ValueError("train.retention needs the starting model's table (start_table.StartTable)")
        self.start_table = start_table

    def __call__(self, q: torch.Tensor, p: torch.Tensor, batch: Batch,
                 scope_logits: tuple[torch.Tensor, torch.Tensor] | None = None,
                 query_tokens: torch.Tensor | None = None) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """q: all query rows' embeddings, p: all passage rows' (laid out as `Batch` says).
        scope_logits: the scope head's (query, passage) token logits; query_tokens: the query
        rows' token embeddings (train.scope.hide_markers reads them)."""
        t, b = self.t, batch.n_queries
        q_main = q[:b]
        if t.loss == "margin_mse":
            parts = {"contrastive": self.margin_mse(q_main, p, batch.teacher_margins)}
        else:
            parts = {"contrastive": self.info_nce(q_main, p, batch.passage_keys, batch.positive_keys)}
        if self.exclusion is not None:
            parts["exclusion"] = t.exclusion.weight * self.exclusion(
                q_main, p, batch.passage_keys, batch.positive_keys, batch.excluded)
        if t.pairs.weight and len(batch.pair_rows):
            plain = q[b:b + len(batch.pair_rows)]
            parts["pairs"] = t.pairs.weight * (
                self.pair_nce(plain, p, batch.passage_keys, batch.pair_positive_keys, targets=batch.pair_targets)
                + self.pair_contrast(q_main[batch.pair_rows], plain, p[batch.pair_targets]))
        if self.retention is not None:
            rows = batch.retained
            if bool(rows.any()):  # the teacher's embeddings of the chosen queries and the passages
                idx = torch.nonzero(rows).flatten()
                teacher_q = q_main.new_zeros((b, q_main.shape[1]), dtype=torch.float)
                teacher_q[idx] = self.start_table.lookup(batch.query_features, idx.cpu())
                teacher_p = self.start_table.lookup(batch.passage_features)
                parts["retention"] = t.retention.weight * self.retention(
                    q_main, p, teacher_q, teacher_p, rows, batch.passage_keys, batch.positive_keys)
        if self.decomposition is not None and len(batch.distill_rows):
            parts["decomposition"] = t.decomposition.weight * self.decomposition(
                q[batch.distill_rows], batch.distill_targets)
        if self.scope is not None:
            q_logits, p_logits = scope_logits
            parts["scope"] = t.scope.weight * self.scope(q_logits, batch.scope_labels, p_logits,
                                                         batch.passage_features["attention_mask"])
        if self.hidden_markers is not None:
            parts["scope_hidden"] = t.scope.weight * self.hidden_markers(
                query_tokens, batch.scope_labels, batch.query_features["attention_mask"])
        return sum(parts.values()), parts
