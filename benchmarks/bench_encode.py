"""Encoding throughput: boolcl's encoder vs SentenceTransformer.encode, same model, batch and precision.

    python benchmarks/bench_encode.py                  # CPU: a small corpus
    python benchmarks/bench_encode.py --passages 200000 --batch 512    # GPU
    python benchmarks/bench_encode.py --backend onnx   # CPU: boolcl's torch path vs eval.backend=onnx (fp32, int8)
    python benchmarks/bench_encode.py --backend onnx --quantize "" --corpus sample   # CPU: the token cap alone

The default compares with SentenceTransformer.encode (DistilBERT-base, random weights). With
--backend onnx it times boolcl's encoder on one model (default: the packaged MiniLM) with the
transformer in torch and in ONNX Runtime, fp32 and int8, in one process on the same passages,
in interleaved rounds (median passages/s per path), and prints each one's ratio to torch and the
lowest cosine between its embeddings and torch's. It also times the torch path in plain batches
of --batch rows (`torch-rows`), without the cap on padded tokens that encode() puts on CPU
batches, so the cap's gain is measured in the same run.

Also times exact top-10 search for 1,000 queries and, on a GPU, projects a full MS MARCO
evaluation (8.8M passages: encode + index + search) from the measured rates.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
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
    ap.add_argument("--backend", choices=["stock", "onnx"], default="stock",
                    help="stock: vs SentenceTransformer.encode; onnx: torch vs eval.backend=onnx")
    ap.add_argument("--model", default="offline-default",
                    help="--backend onnx: the model (default: packaged MiniLM; distilbert-random: DistilBERT-base, "
                         "random weights)")
    ap.add_argument("--caps", default="",
                    help="--backend onnx: also time the torch path at these caps on padded tokens per CPU batch "
                         "(comma-separated, e.g. 1024,2048,4096,8192), as torch-capN")
    ap.add_argument("--quantize", default="none,int8", help="--backend onnx: eval.onnx_quantize values to time")
    ap.add_argument("--rounds", type=int, default=3, help="--backend onnx: interleaved timing rounds")
    ap.add_argument("--corpus", default="synthetic",
                    help="--backend onnx: synthetic (63-token passages), sample (the bundled sample's passages, "
                         "101 MiniLM tokens on average) or nevir:PATH (NevIR's documents, 148)")
    args = ap.parse_args()
    if args.backend == "onnx":
        return onnx_main(args)
    import numpy as np
    import torch
    from sentence_transformers import SentenceTransformer

    from boolcl.retrieval.encode import encode
    from boolcl.retrieval.search import search

    cuda = torch.cuda.is_available()
    n = args.passages or (100_000 if cuda else 1000)
    batch = args.batch or (512 if cuda else 64)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    work = bc.scratch("bench-encode-")
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


def onnx_main(args) -> None:
    """boolcl's encoder with the transformer in torch and in ONNX Runtime: same model, passages, batch, cores."""
    import statistics

    import numpy as np
    import torch

    from boolcl.retrieval.encode import encode
    from boolcl.retrieval.models import load_model, packaged_model_dir
    from boolcl.retrieval.onnx_backend import use_onnx

    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    n, batch = args.passages or 1000, args.batch or 64
    if args.corpus == "sample":
        from boolcl.data.loaders import load_retrieval_set

        texts = load_retrieval_set("sample").corpus.texts
        texts = (texts * (n // len(texts) + 1))[:n]
    elif args.corpus.startswith("nevir:"):
        from boolcl.data.nevir import load_nevir

        texts = [d for p in load_nevir(args.corpus.removeprefix("nevir:")).pairs for d in (p.doc1, p.doc2)][:n]
    elif args.corpus != "synthetic":
        raise SystemExit(f"--corpus {args.corpus}: expected synthetic, sample or nevir:PATH")
    else:
        rows = bc.triples(n // 2 + 1, bc.words(args.tokenizer or str(packaged_model_dir())))
        texts = [t for _, p, q in rows for t in (p, q)][:n]
    args.model = bc.model_spec(args.model, args.tokenizer)
    torch_model = load_model(args.model, device="cpu")
    paths = {"torch": torch_model, "torch-rows": torch_model}
    cap = {"torch-rows": 10**12}  # no cap: batches of `batch` rows, however long (encode's cpu_max_tokens)
    for n_tokens in (int(c) for c in args.caps.split(",") if c):
        paths[f"torch-cap{n_tokens}"] = torch_model
        cap[f"torch-cap{n_tokens}"] = n_tokens
    res = {"device": "cpu", "threads": torch.get_num_threads(), "model": args.model, "passages": n, "batch": batch,
           "corpus": args.corpus, "export_s": {}}
    for q in [q for q in args.quantize.split(",") if q]:
        t = time.perf_counter()
        paths[f"onnx-{q}"] = use_onnx(load_model(args.model, device="cpu"), q)
        res["export_s"][f"onnx-{q}"] = time.perf_counter() - t  # load + export (or cached export) + session
    rates: dict[str, list[float]] = {name: [] for name in paths}
    emb = {}
    for name, model in paths.items():  # warm-up
        encode(model, texts[: batch * 2], batch_size=batch, show_progress=False, cpu_max_tokens=cap.get(name))
    for _ in range(args.rounds):
        for name, model in paths.items():
            t = time.perf_counter()
            emb[name] = encode(model, texts, batch_size=batch, show_progress=False, cpu_max_tokens=cap.get(name))
            rates[name].append(n / (time.perf_counter() - t))
    ref = emb["torch"]
    res["rounds_passages_per_s"] = {k: [round(r, 1) for r in v] for k, v in rates.items()}
    res["passages_per_s"] = {k: statistics.median(v) for k, v in rates.items()}
    res["ratio_to_torch"] = {k: v / res["passages_per_s"]["torch"] for k, v in res["passages_per_s"].items()}
    res["min_cosine_to_torch"] = {
        k: float(((e * ref).sum(1) / (np.linalg.norm(e, axis=1) * np.linalg.norm(ref, axis=1))).min())
        for k, e in emb.items()}
    print(json.dumps(res, indent=2))
    print("\n" + " | ".join(f"{k} {res['passages_per_s'][k]:.0f}/s ({res['ratio_to_torch'][k]:.2f}x, "
                             f"min cos {res['min_cosine_to_torch'][k]:.4f})" for k in paths))
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
