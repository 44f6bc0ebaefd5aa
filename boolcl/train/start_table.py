"""The frozen starting model's embedding of every text the NOT-aware terms compare with, computed once.

Retention (objective.py) scores the original data's queries against the pool's passages as
the starting model did; decomposition distillation (decomposition.py) aims each NOT question
at the start's arithmetic on the question and its two parts. The start never changes and is
read in eval mode, so each text has one embedding: one pass before the first step over the
texts of both terms replaces a teacher forward on every step and a second encoding for the
targets.

The pass goes through the embedding cache (retrieval/cache.py) under the start's identity
(train.cache_start_table): a later run on the same pool from the same model (another seed or
variant, a resumed run) reads the table instead of encoding it, and under `accelerate
launch` the processes share the encoding shard by shard. Each shard carries the table's key and
is read only under it: one copied from another start's or another pool's table is encoded again,
with a warning.
"""
from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from boolcl.errors import TrainingError
from boolcl.retrieval.cache import SHARD_SIZE, cache_key, encode_cached


class StartView:
    """The starting model without a copy: the student's own modules, taken before the recipe
    changes any of them.

    Until the first optimiser step the student's weights are the starting model's (LoRA's
    update starts at zero), and that is when `StartTable` reads the view, once; a copy held a
    second model in memory for that. Each call runs in eval mode and gives every module back
    the mode it had."""

    def __init__(self, model, identity: str | None = None):
        self.stages = list(model)
        self.identity = identity  # the starting model's embedding identity: keys the cached table

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


def retention_rows(items, collator) -> list[str]:
    """What retention scores, as the collator feeds it (prompts included): the retained queries
    and every passage of the pool, plus "" (the collator's filler); none without a retained query."""
    queries = sorted({it.query for it in items if it.retain})
    if not queries:  # no original data: retention never scores a row
        return []
    passages = sorted({p for it in items for p in (*it.positives, *it.negatives)} | {""})
    return [collator.query_prompt + x for x in queries] + [collator.passage_prompt + x for x in passages]


class StartTable:
    """The starting model's embeddings of `rows` (texts as the model reads them, prompts
    included), tokenised by the training collator, so a row's key is the key of what the loop
    sees. The table is built in a fixed order (by length, then key) from the rows alone, so a
    resumed run and every process build the same table; each process looks up its own rows,
    so nothing needs gathering.

    With `cache_dir` and the start's `identity` (retrieval/identity.py) it goes through the
    embedding cache; `settings` are what else changes the floats (precision, device). Shards
    hold a whole number of batches, so a table read back is the one this run would have
    encoded, to the bit."""

    def __init__(self, teacher, rows: Sequence[str], collator, autocast=contextlib.nullcontext,
                 device: torch.device | str = "cpu", batch_size: int = 64, cache_dir: Path | None = None,
                 identity: str | None = None, settings: dict | None = None):
        self.collator = collator
        self.index: dict[bytes, int] = {}
        self.table = torch.zeros((0, 0))
        self.cache: dict | None = None  # what the embedding cache did, for data_manifest.json
        if not rows:
            return
        tokens = collator.tokenizer(list(rows), truncation=True, max_length=collator.max_length)["input_ids"]
        keys = [ids_key(torch.tensor(ids, dtype=torch.long)) for ids in tokens]
        unique = sorted({k: len(ids) for k, ids in zip(keys, tokens)}.items(), key=lambda kv: (kv[1], kv[0]))
        text_of = dict(zip(keys, rows))
        texts = [text_of[k] for k, _ in unique]

        @torch.no_grad()
        def encode(chunk: list[str]) -> np.ndarray:
            out = []
            with autocast():
                for lo in range(0, len(chunk), batch_size):
                    features = {k: v.to(device) for k, v in collator._tokenize(chunk[lo:lo + batch_size]).items()}
                    out.append(teacher(features)["sentence_embedding"].float().cpu())
            return torch.cat(out).numpy()

        if cache_dir is None:
            table = encode(texts)
        else:
            if identity is None:
                raise ValueError("a cached start table needs the starting model's identity")
            shard = batch_size * max(1, SHARD_SIZE // batch_size)  # whole batches: the same floats as uncached
            ids = hashlib.blake2b(b"".join(k for k, _ in unique), digest_size=16).hexdigest()
            settings = {"kind": "start-table", "batch_size": batch_size, "shard_size": shard, **(settings or {})}
            key = cache_key(identity, ids, settings)  # each shard carries it and is read under it
            table, self.cache = encode_cached(encode, texts, Path(cache_dir) / key, shard_size=shard, key=key,
                                              meta={"identity": identity, **settings, "rows": len(texts)})
        self.table = torch.from_numpy(np.ascontiguousarray(table))
        self.index = {k: i for i, (k, _) in enumerate(unique)}

    def __len__(self) -> int:
        return len(self.index)

    def _at(self, keys: list[bytes]) -> list[int]:
        try:
            return [self.index[k] for k in keys]
        except KeyError:
            raise TrainingError("a text the starting model's table never embedded: the collator and StartTable "
                                "tokenise differently (a bug: please report it)") from None

    def lookup(self, features: dict[str, torch.Tensor], rows: torch.Tensor | None = None) -> torch.Tensor:
        """The start's embeddings of the tokenised rows (only `rows`, if given), on their device."""
        keys = row_keys(features)
        chosen = range(len(keys)) if rows is None else rows.tolist()
        return self.table[self._at([keys[i] for i in chosen])].to(features["input_ids"].device)

    def embed(self, rows: Sequence[str]) -> torch.Tensor:
        """The start's embeddings of texts given as the model reads them (prompts included), on the CPU."""
        tokens = self.collator.tokenizer(list(rows), truncation=True, max_length=self.collator.max_length)["input_ids"]
        return self.table[self._at([ids_key(torch.tensor(ids, dtype=torch.long)) for ids in tokens])]
