"""Decomposition distillation (train.decomposition): each NOT question's embedding points where the
frozen starting model's decomposition arithmetic puts it, 1 - cos(student, target); a
direction, since a query's length scales all its scores alike and leaves its ranking
unchanged. The targets and why they carry over to unseen topics: train/decomposition.py.

With `warmup_steps` > 0, the term first trains alone (`before_training`): WARMUP_BATCH NOT
questions per step, towards their targets, with an optimiser of its own. Fitted jointly, the
contrastive and retention terms pull the question embedding elsewhere and the operator is
learnt only in part; fitted first, the run starts from an encoder that already subtracts the
dropped part. The warm-up draws from the pool's NOT questions and COMPOSED_SET more, composed
from the pool's own parts (decomposition.compose_questions): a target needs no passage, so
the operator is learnt over many more pairings and wordings than the pool was written with."""
from __future__ import annotations

import random

import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from boolcl.errors import TrainingError
from boolcl.train import decomposition
from boolcl.train.collate import Batch
from boolcl.train.terms.base import Core, Extra, Term


COMPOSED_SET = 4000  # composed NOT questions the warm-up draws from, beside the pool's
WARMUP_BATCH = 32  # NOT questions per warm-up step


class DecompositionDistill(Term):
    name = "decomposition"
    reads_start = True

    def __init__(self, weight: float, drop: float = 1.25, anchor: float = 0.5, normalize: bool = True,
                 warmup_steps: int = 0):
        super().__init__(weight)
        self.drop, self.anchor, self.normalize = drop, anchor, normalize
        self.warmup_steps = warmup_steps
        self.prompt = None
        self.tokenize = None  # the collator's query tokenisation (start_rows), for the warm-up
        self.composed: list[str] = []  # the warm-up's composed questions, with their targets (attach)
        self.composed_parts: list[tuple[str, str]] = []
        self.composed_targets = torch.zeros((0, 0))

    @classmethod
    def from_config(cls, t, similarity: str) -> DecompositionDistill:
        d = t.decomposition
        return cls(d.weight, float(d.drop), float(d.anchor), normalize=similarity == "cosine",
                   warmup_steps=int(d.warmup_steps))

    def collate(self, core: Core) -> Extra:
        rows = [i for i, b in enumerate(core.picks) if b.get("target") is not None]
        targets = [core.picks[i]["target"] for i in rows]
        return Extra(tensors={"rows": torch.tensor(rows, dtype=torch.long),
                              "targets": torch.stack(targets) if targets else torch.zeros((0, 0))})

    def start_rows(self, items, collator) -> list[str]:
        self.prompt, self.tokenize = collator.query_prompt, collator.queries
        if self.warmup_steps:
            self.composed, self.composed_parts = decomposition.compose_questions(items, COMPOSED_SET)
        return (decomposition.Plan.of(items).rows(self.prompt)
                + decomposition.target_texts(self.composed, self.composed_parts, self.prompt))

    def attach(self, table, items) -> dict:
        """Every NOT item that splits gets its target, from the start, before any step (and on
        resume); so does every composed question of the warm-up."""
        counts = decomposition.attach_targets(table.embed, decomposition.Plan.of(items), items,
                                              drop=self.drop, anchor=self.anchor, normalize=self.normalize,
                                              prompt=self.prompt)
        if self.composed:
            self.composed_targets = decomposition.teacher_targets(
                table.embed, self.composed, self.composed_parts, drop=self.drop, anchor=self.anchor,
                normalize=self.normalize, prompt=self.prompt)
        counts["composed"] = len(self.composed)
        return {"decomposition": counts}

    def before_training(self, model, items, t, seed: int, accelerator) -> str | None:
        """`warmup_steps` steps of this term alone: each draws WARMUP_BATCH of the composed and the
        pool's NOT questions (a generator seeded by `seed` and the process) and moves their
        embeddings towards their targets, with an AdamW of its own at train.lr. The training
        run's optimiser, schedule and data order are untouched."""
        if not self.warmup_steps:
            return None
        questions = list(self.composed)
        targets = [self.composed_targets] if self.composed else []
        for it in items:
            if it.target is not None:
                questions.append(it.query)
                targets.append(it.target[None])
        if not questions:
            raise TrainingError("train.decomposition.warmup_steps: no NOT question with a decomposition target "
                                "to warm up on (the pool has no NOT question the rules or its provenance split)")
        targets = torch.cat(targets).float()
        params = [p for p in model.parameters() if p.requires_grad]
        optimizer = torch.optim.AdamW(params, lr=t.lr, weight_decay=t.weight_decay)
        rng = random.Random(seed + 7919 * accelerator.process_index)
        losses = []
        for _ in tqdm(range(self.warmup_steps), desc="decomposition warm-up", unit="step",
                      disable=not accelerator.is_main_process):
            drawn = rng.sample(range(len(questions)), min(WARMUP_BATCH, len(questions)))
            features = self.tokenize([questions[i] for i in drawn])
            with accelerator.autocast():
                student = model({k: v.to(accelerator.device) for k, v in features.items()})["sentence_embedding"]
            loss = (1 - F.cosine_similarity(student.float(), targets[drawn].to(student.device), dim=-1)).mean()
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        for p in params:
            p.grad = None
        return (f"decomposition warm-up: {self.warmup_steps} steps over {len(questions)} NOT questions, "
                f"1 - cos {losses[0]:.3f} -> {losses[-1]:.3f}")

    def forward(self, q: torch.Tensor, p: torch.Tensor, batch: Batch) -> torch.Tensor | None:
        """1 - cos over the batch's NOT questions with a target."""
        mine = batch.extra[self.name]
        rows = mine["rows"].to(q.device)
        if not len(rows):
            return None
        student, targets = q[rows].float(), mine["targets"].to(q.device).float()
        return (1 - F.cosine_similarity(student, targets, dim=-1)).mean()
