"""Batched encoding with length-sorted batches (less padding) and a progress bar."""
from __future__ import annotations

import time

import numpy as np
import torch
from tqdm.auto import tqdm


def autocast_dtype(device: torch.device) -> torch.dtype | None:
    """bf16 where the GPU supports it, fp16 on older GPUs, full precision on CPU."""
    if device.type != "cuda":
        return None
    return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16


@torch.inference_mode()
def encode(model, texts: list[str], *, batch_size: int = 64, prompt: str | None = None,
           desc: str = "encoding", show_progress: bool = True) -> np.ndarray:
    """Embeddings as float32 rows in the order of `texts`."""
    if not texts:
        dim = model.get_sentence_embedding_dimension() or 0
        return np.zeros((0, dim), dtype=np.float32)
    model.eval()
    device = model.device
    dtype = autocast_dtype(device)
    order = np.argsort([-len(t) for t in texts], kind="stable")  # longest first: OOM shows up at once
    out: np.ndarray | None = None
    start = time.perf_counter()
    bar = tqdm(total=len(texts), desc=desc, unit="text", disable=not show_progress, leave=False)
    for lo in range(0, len(texts), batch_size):
        idx = order[lo:lo + batch_size]
        features = model.preprocess([texts[i] for i in idx], prompt=prompt)
        features = {k: (v.to(device) if hasattr(v, "to") else v) for k, v in features.items()}
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
