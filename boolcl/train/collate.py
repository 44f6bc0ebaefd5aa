"""From training items to tensors: what each item contributes in an epoch, and the `Batch`.

`ItemDataset` picks, per epoch, the positive and negatives an item uses; `Collator` tokenises
a list of those picks into one `Batch`, the only thing the loop and the objective's terms
read, with what each term adds to it (train/terms/base.py).
"""
from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields

import torch

from boolcl.train.mixing import Item

PLACEHOLDER = -2  # passage key of a filler negative; -1 pads positive_keys


def passage_key(passage_id: str) -> int:
    """A stable 63-bit integer for a passage id, so masks can be built on device and across processes."""
    return int.from_bytes(hashlib.blake2b(passage_id.encode(), digest_size=8).digest(), "little") >> 1


class ItemDataset(torch.utils.data.Dataset):
    """Picks, per epoch, which positive and which negatives each item uses (deterministic)."""

    def __init__(self, items: list[Item], n_negatives: int):
        self.items, self.n_negatives, self.epoch = items, n_negatives, 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, i: int) -> dict:
        it = self.items[i]
        p = (self.epoch + i) % len(it.positives)
        negs, explicit = [], 0
        if it.negatives and self.n_negatives:
            scores = it.negative_scores if it.negative_scores is not None else [None] * len(it.negatives)
            slots = list(zip(it.negative_ids, it.negatives, scores))
            k, n = it.n_explicit, self.n_negatives
            explicit = min(k, n)
            # labelled negatives first, then mined ones; each epoch moves on to the next ones of each
            negs = (_rotate(slots[:k], self.epoch * explicit) + _rotate(slots[k:], self.epoch * (n - explicit)))[:n]
        return {"query": it.query, "positive": it.positives[p], "positive_id": it.positive_ids[p],
                "positive_ids": it.positive_ids, "negatives": negs, "n_explicit": explicit,
                "question_type": it.question_type, "retain": it.retain,
                "target": it.target,
                "positive_score": it.positive_scores[p] if it.positive_scores else None}


def _rotate(xs: list, shift: int) -> list:
    if not xs:
        return xs
    shift %= len(xs)
    return xs[shift:] + xs[:shift]


@dataclass
class Core:
    """The batch as the collator builds it before any term: what the terms collate from."""
    picks: list[dict]  # ItemDataset's picks, one per query
    positive_keys: torch.Tensor  # (B, width) passage keys of each query's labelled positives, -1 padded
    n_negatives: int


@dataclass
class Batch:
    """One process's micro-batch. B queries, each with n negatives:

    query rows:    the B queries, then each term's extra rows (`rows_of`), one forward for all
    passage rows:  the B positives, then query i's n negatives at B + i*n .. B + i*n + n-1
    """

    query_features: dict[str, torch.Tensor]  # tokenised query rows
    passage_features: dict[str, torch.Tensor]  # tokenised passage rows
    n_queries: int  # B
    n_tokens: int  # real (unpadded) tokens, queries and passages: throughput, counted on the CPU
    passage_keys: torch.Tensor  # (P,) passage_key of each passage row, PLACEHOLDER for a filler
    positive_keys: torch.Tensor  # (B, width) keys of each query's labelled positives, padded with -1
    teacher_margins: torch.Tensor | None = None  # (B, n) teacher score(positive) - score(negative)
    extra: dict[str, dict[str, torch.Tensor]] = field(default_factory=dict)  # each term's tensors, by its name
    rows: dict[str, tuple[int, int]] = field(default_factory=dict)  # each term's extra query rows [start, stop)

    def rows_of(self, name: str) -> slice:
        return slice(*self.rows[name])

    def _map(self, fn: Callable[[torch.Tensor], torch.Tensor]) -> Batch:
        def each(value):
            if isinstance(value, torch.Tensor):
                return fn(value)
            if isinstance(value, dict):
                return {k: each(v) for k, v in value.items()}
            return value
        return Batch(**{f.name: each(getattr(self, f.name)) for f in fields(self)})

    def to(self, device, non_blocking: bool = False) -> Batch:
        """Every tensor on `device` (Accelerate's prepared loader calls this)."""
        return self._map(lambda x: x.to(device, non_blocking=non_blocking))

    def pin_memory(self) -> Batch:
        """Page-locked copies, for the DataLoader's `pin_memory=True` on GPUs."""
        return self._map(lambda x: x.pin_memory())


class Collator:
    """Tokenise queries and passages, each padded to the longest of its kind in the batch.

    Queries are short and passages long, so they are padded (and encoded) separately. The
    passages are each item's positive, then the negatives. Every item contributes exactly
    `n_negatives` passages (short lists are topped up by repeating; an item without any
    gets empty placeholders the loss ignores), so batches have a fixed shape. Passage ids
    travel as integer keys (`passage_keys`, `positive_keys`), from which the loss masks
    false negatives, also across processes. Each of `terms` adds its query rows after the
    batch's own and files its tensors under its name (train/terms/base.py).
    """

    def __init__(self, tokenizer, max_length: int, n_negatives: int,
                 query_prompt: str | None = None, passage_prompt: str | None = None, terms: Sequence = ()):
        self.tokenizer, self.max_length, self.n_negatives = tokenizer, max_length, n_negatives
        self.query_prompt, self.passage_prompt = query_prompt or "", passage_prompt or ""
        self.terms = list(terms)

    def _tokenize(self, texts: list[str]) -> dict:
        return dict(self.tokenizer(texts, padding=True, truncation=True, max_length=self.max_length,
                                   return_tensors="pt"))

    def queries(self, texts: list[str]) -> dict:
        """Question texts tokenised as a batch's own queries are: prompt added, cut at max_length."""
        return self._tokenize([self.query_prompt + x for x in texts])

    def __call__(self, batch: list[dict]) -> Batch:
        b_n, n = len(batch), self.n_negatives
        passages, ids = [b["positive"] for b in batch], [b["positive_id"] for b in batch]
        margins = []  # teacher's score(positive) - score(negative), when the data has scores
        for b in batch:
            negs = b["negatives"] or []
            for j in range(n):
                # no negative at all: an empty placeholder that the loss leaves out of every softmax
                neg = negs[j % len(negs)] if negs else (None, "", None)
                ids.append(neg[0])
                passages.append(neg[1])
                pos_score, neg_score = b.get("positive_score"), (neg[2] if len(neg) > 2 else None)
                margins.append(None if pos_score is None or neg_score is None else pos_score - neg_score)
        width = max(len(b["positive_ids"]) for b in batch)
        positive_keys = torch.full((b_n, width), -1, dtype=torch.long)
        for i, b in enumerate(batch):
            positive_keys[i, : len(b["positive_ids"])] = torch.tensor([passage_key(x) for x in b["positive_ids"]])
        core = Core(batch, positive_keys, n)
        texts, extra, rows = [b["query"] for b in batch], {}, {}
        for term in self.terms:
            added = term.collate(core)
            rows[term.name] = (len(texts), len(texts) + len(added.queries))
            texts += added.queries
            extra[term.name] = added.tensors
        queries = self.queries(texts)
        passages = self._tokenize([self.passage_prompt + p for p in passages])
        return Batch(
            query_features=queries, passage_features=passages, n_queries=b_n,
            n_tokens=int(queries["attention_mask"].sum() + passages["attention_mask"].sum()),
            passage_keys=torch.tensor([PLACEHOLDER if x is None else passage_key(x) for x in ids], dtype=torch.long),
            positive_keys=positive_keys,
            teacher_margins=(torch.tensor(margins, dtype=torch.float).view(b_n, n)
                             if margins and None not in margins else None),
            extra=extra, rows=rows)
