"""Batched encoding: length-sorted batches (little padding), bf16/fp16 on GPU, a progress bar.

On a GPU, tokenisation on one CPU core becomes the limit, so batches are tokenised by
DataLoader workers ahead of the GPU and copied from pinned memory without blocking.
"""
from __future__ import annotations

import os
import time

import numpy as np
import torch
from tqdm.auto import tqdm


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


def default_workers(device: torch.device) -> int:
    return 0 if device.type != "cuda" else max(1, min(8, (os.cpu_count() or 2) - 1))


@torch.inference_mode()
def encode(model, texts: list[str], *, batch_size: int = 64, prompt: str | None = None,
           desc: str = "encoding", show_progress: bool = True, num_workers: int | None = None) -> np.ndarray:
    """Embeddings as float32 rows in the order of `texts`."""
    if not texts:
        dim = model.get_sentence_embedding_dimension() or 0
        return np.zeros((0, dim), dtype=np.float32)
    model.eval()
    device = model.device
    dtype = autocast_dtype(device)
    workers = default_workers(device) if num_workers is None else num_workers
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
