"""Training throughput: sentence-transformers' stock path vs boolcl, same model, data and batch.

    python benchmarks/bench_train.py                 # CPU: small, prints the ratio
    python benchmarks/bench_train.py --steps 80      # GPU: batch 64, 1 hard negative, bf16, max length 256
    python benchmarks/bench_train.py --steps 16 --log-every 2 [--bf16] [--compile]   # CPU, as in docs/performance.md
    python benchmarks/bench_train.py --lengths mixed --packed     # padded vs padding-free (train.packed) batches

Both rates are steady-state: the steps before boolcl's second log record are left out of both.

Stock path: SentenceTransformerTrainer + MultipleNegativesRankingLoss. boolcl: the real
`train()` loop (pre-tokenised batches padded to the longest, one forward for queries and
passages, fused AdamW on CUDA, optional torch.compile). Prints triples/s for both, the
ratio, peak GPU memory and model-FLOPs utilisation (6 * parameters * tokens / time / peak).
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

PEAK_BF16 = {"H200": 989e12, "H100": 989e12, "A100": 312e12}


def peak_flops() -> float | None:
    import torch

    if not torch.cuda.is_available():
        return None
    name = torch.cuda.get_device_name()
    return next((v for k, v in PEAK_BF16.items() if k in name), None)


def stock(model_dir: Path, rows, args, work: Path) -> dict:
    import torch
    from datasets import Dataset
    from sentence_transformers import (
        SentenceTransformer,
        SentenceTransformerTrainer,
        SentenceTransformerTrainingArguments,
    )
    from sentence_transformers.losses import MultipleNegativesRankingLoss

    model = SentenceTransformer(str(model_dir))
    model.max_seq_length = args.max_length
    data = Dataset.from_dict({"anchor": [r[0] for r in rows], "positive": [r[1] for r in rows],
                              "negative": [r[2] for r in rows]})
    cuda = torch.cuda.is_available()
    from transformers import TrainerCallback

    class StepClock(TrainerCallback):  # the same steady-state window as boolcl's log records
        def __init__(self):
            self.times = []

        def on_step_end(self, *_, **__):
            if cuda:
                torch.cuda.synchronize()
            self.times.append(time.perf_counter())

    targs = SentenceTransformerTrainingArguments(
        output_dir=str(work / "stock"), per_device_train_batch_size=args.batch, max_steps=args.steps,
        learning_rate=2e-5, warmup_ratio=0.1, bf16=cuda or args.bf16, save_strategy="no", report_to=[],
        logging_steps=10**6, dataloader_drop_last=True, seed=0, disable_tqdm=True, use_cpu=not cuda)
    clock = StepClock()
    trainer = SentenceTransformerTrainer(model=model, args=targs, train_dataset=data,
                                         loss=MultipleNegativesRankingLoss(model), callbacks=[clock])
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    trainer.train()
    wall = time.perf_counter() - start
    first = min((args.warmup + 1) * args.log_every - 1, len(clock.times) - 2)  # after boolcl's log[warmup] step
    rate = (len(clock.times) - 1 - first) * args.batch / (clock.times[-1] - clock.times[first])
    return {"triples_per_s": rate, "triples_per_s_end_to_end": args.steps * args.batch / wall, "wall_s": wall,
            "bf16": bool(targs.bf16), "peak_mem_gb": torch.cuda.max_memory_allocated() / 1e9 if cuda else None}


def boolcl_run(model_dir: Path, pool: Path, args, work: Path, compile_: bool, packed: bool = False) -> dict:
    import torch

    from boolcl.config import compose
    from boolcl.train.loop import train

    cfg = compose(["recipe=tiny", f"model={model_dir}", "similarity=dot", "train.boolean=none",
                   f"train.original={pool}", "train.original_size=null", f"train.batch_size={args.batch}",
                   "train.hard_negatives=1", f"train.max_length={args.max_length}", f"train.max_steps={args.steps}",
                   f"train.log_every={args.log_every}", "train.save_every=0", "train.report_to=[]",
                   f"train.mixed_precision={'bf16' if args.bf16 else 'auto'}", "train.lr=2e-5",
                   f"train.compile={str(compile_).lower()}", f"train.num_workers={args.workers}",
                   f"train.packed={str(packed).lower()}",
                   f"out={work / ('boolcl' + ('-compiled' if compile_ else '') + ('-packed' if packed else ''))}"])
    cuda = torch.cuda.is_available()
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    run = train(cfg)
    wall = time.perf_counter() - start
    log = [json.loads(x) for x in (run / "train_log.jsonl").read_text().splitlines()]
    skip = min(args.warmup, len(log) - 2)  # steady state: leave out the first records (compile, caches)
    a, b = log[skip], log[-1]
    rate = (b["step"] - a["step"]) * args.batch / (b["elapsed_s"] - a["elapsed_s"])
    tokens_per_s = (b["tokens"] - a["tokens"]) / (b["elapsed_s"] - a["elapsed_s"])
    return {"triples_per_s": rate, "triples_per_s_end_to_end": args.steps * args.batch / wall, "wall_s": wall,
            "tokens_per_s": tokens_per_s, "peak_mem_gb": torch.cuda.max_memory_allocated() / 1e9 if cuda else None}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=None, help="optimiser steps per path (default: 80 GPU, 6 CPU)")
    ap.add_argument("--batch", type=int, default=None, help="queries per step (default: 64 GPU, 16 CPU)")
    ap.add_argument("--max-length", type=int, default=256)
    ap.add_argument("--warmup", type=int, default=1, help="boolcl log records left out of the steady-state rate")
    ap.add_argument("--log-every", type=int, default=10, help="boolcl steps between log records (each one syncs the GPU)")
    ap.add_argument("--workers", type=int, default=None, help="boolcl data-loader workers (default: 4 GPU, 0 CPU)")
    ap.add_argument("--compile", action="store_true", help="also time boolcl with train.compile=true")
    ap.add_argument("--packed", action="store_true", help="also time boolcl with train.packed=true (padding-free)")
    ap.add_argument("--lengths", choices=["fixed", "mixed"], default="fixed",
                    help="fixed: 15-token queries, 63-token passages; mixed: 4-24 and 16-240 words, drawn uniformly")
    ap.add_argument("--bf16", action="store_true", help="CPU: both paths in bf16 autocast (AMX CPUs), not fp32")
    ap.add_argument("--tokenizer", default=None, help="tokenizer folder (default: the packaged MiniLM's)")
    ap.add_argument("--json", default=None, help="write the figures here")
    args = ap.parse_args()
    import torch

    cuda = torch.cuda.is_available()
    args.steps = args.steps or (80 if cuda else 6)
    args.batch = args.batch or (64 if cuda else 16)
    args.workers = (4 if cuda else 0) if args.workers is None else args.workers
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    work = bc.scratch("bench-train-")
    tok = bc.tokenizer_dir(args.tokenizer)
    model_dir = bc.distilbert_folder(work, tok)
    rows = bc.triples(args.steps * args.batch, bc.words(tok), mixed=args.lengths == "mixed")
    pool = bc.write_pool(work / "pool" / "train.jsonl", rows)
    n_params = sum(p.numel() for p in __import__("sentence_transformers").SentenceTransformer(str(model_dir)).parameters())

    results = {"device": torch.cuda.get_device_name() if cuda else "cpu", "bf16": cuda or args.bf16,
               "batch": args.batch, "steps": args.steps, "lengths": args.lengths,
               "hard_negatives": 1, "max_length": args.max_length, "parameters": n_params}
    def save():
        if args.json:
            Path(args.json).write_text(json.dumps(results, indent=2))

    results["stock"] = stock(model_dir, rows, args, work)
    save()
    results["boolcl"] = boolcl_run(model_dir, pool, args, work, compile_=False)
    save()
    if args.compile:
        results["boolcl_compiled"] = boolcl_run(model_dir, pool, args, work, compile_=True)
        save()
    if args.packed:
        results["boolcl_packed"] = boolcl_run(model_dir, pool, args, work, compile_=False, packed=True)
        save()
    if args.packed and args.compile:
        results["boolcl_packed_compiled"] = boolcl_run(model_dir, pool, args, work, compile_=True, packed=True)
    peak = peak_flops()
    variants = ("boolcl", "boolcl_compiled", "boolcl_packed", "boolcl_packed_compiled")
    for key in variants:
        if key in results:
            r = results[key]
            r["ratio_vs_stock"] = r["triples_per_s"] / results["stock"]["triples_per_s"]
            r["mfu"] = 6 * n_params * r["tokens_per_s"] / peak if peak else None
    print(json.dumps(results, indent=2))
    print(f"\nstock {results['stock']['triples_per_s']:.4g} triples/s | boolcl {results['boolcl']['triples_per_s']:.4g} "
          f"triples/s | ratio {results['boolcl']['ratio_vs_stock']:.2f}x"
          + (f" | MFU {results['boolcl']['mfu']:.1%}" if results['boolcl']['mfu'] else ""))
    for key in variants[1:]:
        if key in results:
            r = results[key]
            print(f"{key.replace('_', ' ')} {r['triples_per_s']:.4g} triples/s | ratio {r['ratio_vs_stock']:.2f}x"
                  f" | {r['triples_per_s'] / results['boolcl']['triples_per_s']:.2f}x padded boolcl"
                  + (f" | MFU {r['mfu']:.1%}" if r["mfu"] else ""))
    save()


if __name__ == "__main__":
    main()
