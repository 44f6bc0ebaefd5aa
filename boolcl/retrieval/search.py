"""Exact top-k search by inner product: faiss when installed, torch otherwise.

Cosine similarity is inner product on unit vectors, so callers normalise first.
"""
from __future__ import annotations

import numpy as np


def normalize(x: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.maximum(norms, 1e-12)


def _faiss():
    try:
        import faiss  # noqa: F401
    except ImportError:
        return None
    return faiss


def search(queries: np.ndarray, passages: np.ndarray, k: int, *, backend: str = "auto") -> tuple[np.ndarray, np.ndarray]:
    """(scores, indices), each (n_queries, min(k, n_passages)), best first."""
    k = min(k, passages.shape[0])
    faiss = _faiss() if backend in ("auto", "faiss") else None
    if backend == "faiss" and faiss is None:
        raise ImportError("backend='faiss' needs faiss (pip install faiss-cpu)")
    gpu_faiss = faiss is not None and hasattr(faiss, "StandardGpuResources") and faiss.get_num_gpus() > 0
    if backend == "auto" and not gpu_faiss and _cuda():
        return torch_search(queries, passages, k, device="cuda")  # exact matmul on the GPU beats faiss-cpu
    if faiss is not None:
        index = faiss.IndexFlatIP(passages.shape[1])
        if gpu_faiss:
            index = faiss.index_cpu_to_all_gpus(index)
        index.add(np.ascontiguousarray(passages, dtype=np.float32))
        scores, idx = index.search(np.ascontiguousarray(queries, dtype=np.float32), k)
        return scores, idx
    return torch_search(queries, passages, k)


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def torch_search(queries: np.ndarray, passages: np.ndarray, k: int, chunk: int = 1_000_000,
                 device: str = "cpu") -> tuple[np.ndarray, np.ndarray]:
    """Chunked matmul + top-k; merges per-chunk winners so memory stays bounded.

    On a GPU the chunks are multiplied in half precision (fp32 accumulate), the way an
    exact search over millions of passages fits in seconds.
    """
    import torch

    half = device != "cpu"
    q = torch.from_numpy(np.ascontiguousarray(queries, dtype=np.float32)).to(device)
    q = q.half() if half else q
    best_s = best_i = None
    for lo in range(0, passages.shape[0], chunk):
        p = torch.from_numpy(np.ascontiguousarray(passages[lo:lo + chunk], dtype=np.float32)).to(device)
        p = p.half() if half else p
        s, i = torch.topk((q @ p.T).float(), min(k, p.shape[0]), dim=1)
        i = i + lo
        if best_s is None:
            best_s, best_i = s, i
        else:
            s, i = torch.cat([best_s, s], 1), torch.cat([best_i, i], 1)
            best_s, pos = torch.topk(s, k, dim=1)
            best_i = torch.gather(i, 1, pos)
    return best_s.cpu().numpy(), best_i.cpu().numpy()
