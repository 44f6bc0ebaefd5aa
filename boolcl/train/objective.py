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
import hashlib

import torch

from boolcl.errors import TrainingError
from boolcl.train.collate import Batch, Collator
from boolcl.train.losses import InfoNCE, MarginMSE
from boolcl.train.not_aware import (
    DecompositionDistill,
    ExclusionMargin,
    QueryContrast,
    Retention,
)
from boolcl.train.scope import HiddenMarkerLoss, ScopeLoss


class StartView:
    """The retention teacher without a copy: the student's own modules, in the order they had
    before the scope head replaced the pooling, so the view pools as the starting model did.

    Until the first optimiser step the student's weights are the starting model's (LoRA's
    update starts at zero), and that is when `TeacherEmbeddings` reads the view, once; a copy
    held a second model in memory for that. Each call runs in eval mode and gives every
    module back the mode it had."""

    def __init__(self, model):
        self.stages = list(model)

    def __call__(self, features: dict) -> dict:
        modes = [(m, m.training) for stage in self.stages for m in stage.modules()]
        try:
            for stage in self.stages:
                features = stage.eval()(features)
            return features
        finally:
            for m, mode in modes:
                m.train(mode)


def ids_key(ids: torch.Tensor) -> bytes:
    """A digest of one row's token ids (int64, padding left out): the key a text has whichever
    batch it was padded in."""
    return hashlib.blake2b(ids.to(torch.long).numpy().tobytes(), digest_size=16).digest()


def row_keys(features: dict[str, torch.Tensor]) -> list[bytes]:
    """One key per tokenised row of a batch."""
    ids, mask = features["input_ids"].cpu(), features["attention_mask"].cpu().bool()
    return [ids_key(ids[i][mask[i]]) for i in range(len(ids))]


class TeacherEmbeddings:
    """The frozen teacher's embedding of every text the retention term can meet, computed once.

    The teacher never changes and runs in eval mode, so its embedding of a text is fixed: one
    pass at set-up over the queries retention scores (`Item.retain`) and the
    pool's passages replaces a teacher forward over the whole batch on every step. Texts are
    tokenised by the training collator itself, so a row's key is the key of what the loop sees.
    The table is built in a fixed order (by length, then key) from the items alone, so a resumed
    run and every process build the same table; retention compares each process's own queries
    with its own passages, so nothing needs gathering."""

    def __init__(self, teacher, items, collator: Collator, autocast=contextlib.nullcontext,
                 device: torch.device | str = "cpu", batch_size: int = 64):
        self.index: dict[bytes, int] = {}
        self.table = torch.zeros((0, 0))
        queries = sorted({it.query for it in items if it.retain})
        if not queries:  # no original data: retention never scores a row
            return
        passages = sorted({p for it in items for p in (*it.positives, *it.negatives)} | {""})  # "": the filler
        rows = [collator.query_prompt + x for x in queries] + [collator.passage_prompt + x for x in passages]
        tokens = collator.tokenizer(rows, truncation=True, max_length=collator.max_length)["input_ids"]
        keys = [ids_key(torch.tensor(ids, dtype=torch.long)) for ids in tokens]
        unique = sorted({k: len(ids) for k, ids in zip(keys, tokens)}.items(), key=lambda kv: (kv[1], kv[0]))
        text_of = dict(zip(keys, rows))
        chunks = []
        with torch.no_grad(), autocast():
            for lo in range(0, len(unique), batch_size):
                chunk = [text_of[k] for k, _ in unique[lo:lo + batch_size]]
                features = {k: v.to(device) for k, v in collator._tokenize(chunk).items()}
                chunks.append(teacher(features)["sentence_embedding"].float().cpu())
        self.table = torch.cat(chunks)
        self.index = {k: i for i, (k, _) in enumerate(unique)}

    def __len__(self) -> int:
        return len(self.index)

    def lookup(self, features: dict[str, torch.Tensor], rows: torch.Tensor | None = None) -> torch.Tensor:
        """The teacher's embeddings of the tokenised rows (only `rows`, if given), on their device."""
        keys = row_keys(features)
        chosen = range(len(keys)) if rows is None else rows.tolist()
        try:
            at = [self.index[keys[i]] for i in chosen]
        except KeyError:
            raise TrainingError("a batch holds a text the retention teacher never embedded: the collator and "
                                "TeacherEmbeddings tokenise differently (a bug: please report it)") from None
        return self.table[at].to(features["input_ids"].device)


class Objective:
    def __init__(self, t, similarity: str, teacher=None, autocast=contextlib.nullcontext, items=(),
                 collator: Collator | None = None, device: torch.device | str = "cpu", scope_head=None):
        """`t` is the train config. With retention on, `teacher` (`StartView` of the starting
        model, on `device`) embeds once the texts of `items` that retention needs, tokenised by
        `collator`; the teacher itself is not kept."""
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
        self.teacher_embeddings = None
        if self.retention is not None:
            if teacher is None or collator is None:
                raise ValueError("train.retention needs the teacher (StartView of the start) and the collator")
            self.teacher_embeddings = TeacherEmbeddings(teacher, items, collator, autocast, device)

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
                teacher_q[idx] = self.teacher_embeddings.lookup(batch.query_features, idx.cpu())
                teacher_p = self.teacher_embeddings.lookup(batch.passage_features)
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
