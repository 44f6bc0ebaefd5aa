"""Encoding throughput: boolcl's encoder vs SentenceTransformer.encode, same model, batch and precision.

    python scripts/bench_encode.py                  # CPU: a small corpus
    python scripts/bench_encode.py --passages 200000 --batch 512    # GPU

Also times exact top-10 search for 1,000 queries and, on a GPU, projects a full MS MARCO
evaluation (8.8M passages: encode + index + search) from the measured rates.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_common as bc  # noqa: E402

MSMARCO_PASSAGES = 8_841_823


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--passages", type=int, default=None, help="default: 100000 GPU, 1000 CPU")
    ap.add_argument("--batch", type=int, default=None, help="default: 512 GPU, 64 CPU")
    ap.add_argument("--tokenizer", default=None)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    import numpy as np
    import torch
    from sentence_transformers import SentenceTransformer

    from boolcl.retrieval.encode import encode
    from boolcl.retrieval.search import search

    cuda = torch.cuda.is_available()
    n = args.passages or (100_000 if cuda else 1000)
    batch = args.batch or (512 if cuda else 64)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    work = Path(tempfile.mkdtemp(prefix="bench-encode-"))
    tok = bc.tokenizer_dir(args.tokenizer)
    folder = bc.distilbert_folder(work, tok)
    rows = bc.triples(n // 2 + 1, bc.words(tok))
    texts = [t for _, p, q in rows for t in (p, q)][:n]
    device = "cuda" if cuda else "cpu"
    dtype = torch.bfloat16 if cuda else torch.float32
    res = {"device": torch.cuda.get_device_name() if cuda else "cpu", "passages": n, "batch": batch,
           "precision": str(dtype)}

    stock = SentenceTransformer(str(folder), device=device)
    stock.to(dtype)  # encode() runs in the model's dtype; bf16 weights = bf16 compute, as boolcl's autocast
    stock.encode(texts[: batch * 2], batch_size=batch)  # warm-up
    if cuda:
        torch.cuda.synchronize()
    t = time.perf_counter()
    a = stock.encode(texts, batch_size=batch, convert_to_numpy=True)
    res["stock_passages_per_s"] = n / (time.perf_counter() - t)

    ours = SentenceTransformer(str(folder), device=device)
    encode(ours, texts[: batch * 2], batch_size=batch, show_progress=False)  # warm-up
    t = time.perf_counter()
    b = encode(ours, texts, batch_size=batch, show_progress=False)
    res["boolcl_passages_per_s"] = n / (time.perf_counter() - t)
    res["ratio"] = res["boolcl_passages_per_s"] / res["stock_passages_per_s"]
    cos = (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
    res["min_cosine_between_paths"] = float(cos.min())  # same embeddings up to bf16 rounding

    queries = b[:1000] + 0.01
    t = time.perf_counter()
    search(queries, b, 10)
    res["search_1000q_s"] = time.perf_counter() - t
    if cuda:  # exact search at MS MARCO scale: 8.8M x 768 fp16 on the GPU, chunked matmul + top-k
        big = torch.randn(MSMARCO_PASSAGES, 768, device="cuda", dtype=torch.float16)
        q = torch.randn(1000, 768, device="cuda", dtype=torch.float16)
        torch.cuda.synchronize()
        t = time.perf_counter()
        best = None
        for lo in range(0, MSMARCO_PASSAGES, 2_000_000):
            s, i = torch.topk((q @ big[lo:lo + 2_000_000].T).float(), 10, dim=1)
            best = (s, i + lo) if best is None else (torch.cat([best[0], s], 1), torch.cat([best[1], i + lo], 1))
        torch.topk(best[0], 10, dim=1)
        torch.cuda.synchronize()
        res["search_1000q_msmarco_s"] = time.perf_counter() - t
        res["projected_msmarco_eval_min"] = (MSMARCO_PASSAGES / res["boolcl_passages_per_s"]
                                             + res["search_1000q_msmarco_s"] * 7) / 60  # dev: 6,980 queries
    print(json.dumps(res, indent=2))
    print(f"\nSentenceTransformer.encode {res['stock_passages_per_s']:.0f}/s | boolcl {res['boolcl_passages_per_s']:.0f}/s "
          f"| ratio {res['ratio']:.2f}x | search 1000 queries {res['search_1000q_s']:.3f}s")
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
