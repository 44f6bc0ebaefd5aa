"""Batched encoding: length-sorted batches (little padding), bf16/fp16 on GPU, a progress bar.

On a GPU, tokenisation on one CPU core becomes the limit, so batches are tokenised by
DataLoader workers ahead of the GPU and copied from pinned memory without blocking. On the
CPU, a batch of long passages whose activations outgrow the caches encodes fewer texts per
second than a smaller one, so batches there are also capped in padded tokens (`cpu_batches`).
"""
from __future__ import annotations

import os
import time
from collections.abc import Sequence

import numpy as np
import torch
from tqdm.auto import tqdm

from boolcl.retrieval.models import inner_model


def autocast_dtype(device: torch.device) -> torch.dtype | None:
    """bf16 where the GPU supports it, fp16 on older GPUs, full precision on CPU."""
    if device.type != "cuda":
        return None
    return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16


class _Tokenize:
    """Turns a list of text indices into model inputs (runs in DataLoader workers)."""

    def __init__(self, tokenizer, texts: list[str], prompt: str, max_length: int):
        self.tokenizer, self.texts, self.prompt, self.max_length = tokenizer, texts, prompt, max_length

    def __call__(self, idx: list[int]) -> tuple[list[int], dict]:
        batch = [self.prompt + self.texts[i] for i in idx]
        return idx, dict(self.tokenizer(batch, padding=True, truncation=True, max_length=self.max_length,
                                        return_tensors="pt"))


# On the CPU a batch holds at most this many values per hidden state (rows x longest row x
# hidden width): 4,096 tokens of MiniLM (384 wide), 2,048 of DistilBERT-base (768). On 2 cores,
# with NevIR's 148-token documents, 1.17-1.43x the texts/s of batches of 64 or 128 rows; caps
# from a quarter to the default gain about as much, twice the default much less (docs/performance.md:
# "Encoding on the CPU").
CPU_BATCH_VALUES = 4096 * 384


def hidden_width(model) -> int:
    """The transformer's hidden size (the sentence embedding's width when it has no config)."""
    width = getattr(getattr(inner_model(model[0]), "config", None), "hidden_size", None)
    return int(width or model.get_sentence_embedding_dimension() or 768)


def cpu_batches(lengths: Sequence[int], batch_size: int, max_tokens: int) -> list[list[int]]:
    """Indices in batches, longest first: at most `batch_size` rows and `max_tokens` padded tokens
    (rows x the batch's longest row) each; a row longer than `max_tokens` is a batch of its own."""
    order = np.argsort([-n for n in lengths], kind="stable").tolist()
    batches: list[list[int]] = []
    width = 0
    for i in order:
        if batches and len(batches[-1]) < batch_size and (len(batches[-1]) + 1) * width <= max_tokens:
            batches[-1].append(i)
        else:
            batches.append([i])
            width = lengths[i]
    return batches


def token_lengths(tokenizer, texts: Sequence[str], prompt: str, max_length: int, chunk: int = 4096) -> list[int]:
    """Each text's length in tokens after truncation, tokenised in chunks (only the lengths are kept)."""
    out: list[int] = []
    for lo in range(0, len(texts), chunk):
        ids = tokenizer([prompt + t for t in texts[lo:lo + chunk]], truncation=True, max_length=max_length)["input_ids"]
        out.extend(len(x) for x in ids)
    return out


def default_workers(device: torch.device) -> int:
    return 0 if device.type != "cuda" else max(1, min(8, (os.cpu_count() or 2) - 1))


@torch.inference_mode()
def encode(model, texts: list[str], *, batch_size: int = 64, prompt: str | None = None,
           desc: str = "encoding", show_progress: bool = True, num_workers: int | None = None,
           cpu_max_tokens: int | None = None) -> np.ndarray:
    """Embeddings as float32 rows in the order of `texts`. On the CPU a batch holds at most
    `cpu_max_tokens` padded tokens (default: CPU_BATCH_VALUES over the model's hidden width)."""
    if not texts:
        dim = model.get_sentence_embedding_dimension() or 0
        return np.zeros((0, dim), dtype=np.float32)
    model.eval()
    device = model.device
    dtype = autocast_dtype(device)
    workers = default_workers(device) if num_workers is None else num_workers
    if device.type == "cpu":
        lengths = token_lengths(model.tokenizer, texts, prompt or "", model.max_seq_length)
        batches = cpu_batches(lengths, batch_size, cpu_max_tokens or max(1, CPU_BATCH_VALUES // hidden_width(model)))
    else:
        order = np.argsort([-len(t) for t in texts], kind="stable")  # longest first: OOM shows up at once
        batches = [order[lo:lo + batch_size].tolist() for lo in range(0, len(texts), batch_size)]
    loader = torch.utils.data.DataLoader(batches, batch_size=None, num_workers=workers,
                                         pin_memory=device.type == "cuda",
                                         collate_fn=_Tokenize(model.tokenizer, texts, prompt or "", model.max_seq_length),
                                         prefetch_factor=4 if workers else None, persistent_workers=False)
    out: np.ndarray | None = None
    start = time.perf_counter()
    bar = tqdm(total=len(texts), desc=desc, unit="text", disable=not show_progress, leave=False)
    for idx, features in loader:
        features = {k: v.to(device, non_blocking=True) for k, v in features.items()}
        with torch.autocast(device.type, dtype=dtype, enabled=dtype is not None):
            emb = model(features)["sentence_embedding"]
        emb = emb.float().cpu().numpy()
        if out is None:
            out = np.empty((len(texts), emb.shape[1]), dtype=np.float32)
        out[idx] = emb
        bar.update(len(idx))
        bar.set_postfix_str(f"{bar.n / max(time.perf_counter() - start, 1e-9):.0f}/s")
    bar.close()
    assert out is not None
    return out
