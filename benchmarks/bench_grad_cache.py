"""Gradient caching (train.grad_cache_chunk): peak memory and examples/s against the global batch, with and without.

    python benchmarks/bench_grad_cache.py                          # CPU: the packaged MiniLM, batches 64 128 256, chunk 32
    python benchmarks/bench_grad_cache.py --model distilbert-random --batches 64 256 1024 4096 --chunk 64 \
        --max-length 256 --steps 5                                 # GPU: DistilBERT-base, bf16
    python benchmarks/bench_grad_cache.py --json results/bench_grad_cache.json

Every configuration (a global batch, cached or not) trains `--steps` steps of the real `train()`
loop (recipe=tiny, one hard negative per query, synthetic triples of bench_common) in a Python
process of its own, one after the other, so no configuration's peak hides in another's. Memory is
measured from the first step on: on the CPU the process's peak resident memory (the kernel's
high-water mark, reset as the loop starts), on CUDA `torch.cuda.max_memory_allocated`; `added` is
that peak less what the process held as the loop started (model, data, optimiser state). examples/s
leaves the first step out (allocator and kernel warm-up). A configuration that fails, out of
memory or otherwise, is reported as not fitting, with its error's last line; the others still run.

Caching runs one more forward pass per step, so it is slower at a batch that fits without it;
what it buys is the batch that does not.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_common as bc  # noqa: E402

STATUS = Path("/proc/self/status")


def resident_mb(field: str) -> float | None:
    """VmRSS (now) or VmHWM (the peak) of this process, from /proc; None where there is none."""
    if not STATUS.is_file():
        return None
    found = re.search(rf"^{field}:\s+(\d+) kB", STATUS.read_text(), re.M)
    return int(found.group(1)) / 1024 if found else None


def reset_peak() -> bool:
    """Reset the kernel's resident high-water mark to the current size (Linux >= 4.0)."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def child(args) -> None:
    """One configuration in this process: train, then print its figures as one JSON line."""
    import torch

    from boolcl.config import compose
    from boolcl.train import loop

    cuda = torch.cuda.is_available()
    memory: dict = {}

    class Meter(loop.Meter):  # built just before the first step: the loop's memory is measured from here
        def __init__(self, *a, **kw):
            super().__init__(*a, **kw)
            if cuda:
                torch.cuda.reset_peak_memory_stats()
                memory["base_mb"] = torch.cuda.memory_allocated() / 2**20
            else:
                memory["reset"] = reset_peak()
                memory["base_mb"] = resident_mb("VmRSS")

    loop.Meter = Meter
    overrides = ["recipe=tiny", "train.boolean=none", f"train.original={args.pool}", "train.original_size=null",
                 f"train.batch_size={args.batch}", "train.hard_negatives=1", f"train.max_length={args.max_length}",
                 f"train.max_steps={args.steps}", "train.log_every=1", "train.save_every=0", "train.eval_every=0",
                 "train.report_to=[]", f"train.grad_cache_chunk={args.chunk or 'null'}", f"out={args.out}"]
    run = loop.train(compose(overrides + ([f"model={args.model}"] if args.model else [])))
    if cuda:
        peak = torch.cuda.max_memory_allocated() / 2**20
        measure = "torch.cuda.max_memory_allocated"
    elif memory["reset"] and resident_mb("VmHWM") is not None:
        peak, measure = resident_mb("VmHWM"), "peak resident memory from the first step"
    else:  # no resettable high-water mark: the process's whole peak (it includes the set-up's)
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / (1024 if sys.platform != "darwin" else 2**20)
        measure = "peak resident memory of the whole process"
    log = [json.loads(x) for x in (run / "train_log.jsonl").read_text().splitlines()]
    a, b = log[0], log[-1]  # from the end of the first step to the end of the last
    print(json.dumps({"fits": True, "batch": args.batch, "chunk": args.chunk, "pid": os.getpid(),
                      "peak_mb": peak, "added_mb": peak - (memory["base_mb"] or 0.0), "measure": measure,
                      "examples_per_s": (b["step"] - a["step"]) * args.batch / (b["elapsed_s"] - a["elapsed_s"]),
                      "steps": b["step"]}))


def configuration(args, batch: int, chunk: int, pool: Path, work: Path) -> dict:
    """Run one configuration in a fresh process; what it printed, or why it did not finish."""
    cmd = [sys.executable, __file__, "--child", "--batch", str(batch), "--chunk", str(chunk), "--steps",
           str(args.steps), "--max-length", str(args.max_length), "--pool", str(pool),
           "--out", str(work / f"b{batch}-c{chunk}"), *(["--model", args.model] if args.model else [])]
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode == 0:
        return json.loads(done.stdout.strip().splitlines()[-1]) | {"wall_s": time.perf_counter() - start}
    lines = done.stderr.strip().splitlines() or [f"exit status {done.returncode}"]
    why = "killed (out of memory?)" if done.returncode < 0 else lines[-1]
    return {"fits": False, "batch": batch, "chunk": chunk, "error": why[-300:]}


def show(r: dict) -> str:
    if not r["fits"]:
        return f"{'does not fit':>36}"
    return f"{r['peak_mb']:>9.0f} MB {r['added_mb']:>8.0f} MB {r['examples_per_s']:>8.1f}/s"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batches", type=int, nargs="+", default=None,
                    help="global batch sizes (default: 64 128 256 on the CPU, 64 256 1024 4096 on CUDA)")
    ap.add_argument("--chunk", type=int, default=None, help="train.grad_cache_chunk (default: 32 CPU, 64 CUDA); "
                    "a batch smaller than the chunk is cached in chunks of its size")
    ap.add_argument("--steps", type=int, default=4, help="optimiser steps per configuration (at least 2)")
    ap.add_argument("--max-length", type=int, default=64)
    ap.add_argument("--model", default=None, help="a model folder, or distilbert-random (DistilBERT-base, random "
                    "weights); default: the recipe's packaged MiniLM")
    ap.add_argument("--tokenizer", default=None, help="tokenizer folder for the synthetic text (default: the MiniLM's)")
    ap.add_argument("--json", default=None, help="write the figures here")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--batch", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--pool", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    args = ap.parse_args()
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    if args.child:
        return child(args)
    if args.steps < 2:
        raise SystemExit("--steps must be at least 2: the first step is left out of examples/s")
    import torch

    cuda = torch.cuda.is_available()
    batches = args.batches or ([64, 256, 1024, 4096] if cuda else [64, 128, 256])
    chunk = args.chunk or (64 if cuda else 32)
    work = bc.scratch("bench-grad-cache-")
    tok = bc.tokenizer_dir(args.tokenizer)
    args.model = bc.model_spec(args.model, args.tokenizer) if args.model else None
    pool = bc.write_pool(work / "pool" / "train.jsonl", bc.triples(args.steps * max(batches), bc.words(tok)))
    results = {"device": torch.cuda.get_device_name() if cuda else "cpu", "model": args.model or "offline-default",
               "steps": args.steps, "max_length": args.max_length, "hard_negatives": 1, "chunk": chunk, "runs": []}
    print(f"{'batch':>6} {'chunk':>6} | {'without caching: peak, added, speed':>36} | {'with caching':>36} | "
          f"cached/plain: peak, added, speed", flush=True)
    for batch in batches:
        plain = configuration(args, batch, 0, pool, work)
        cached = configuration(args, batch, min(chunk, batch), pool, work)
        row = {"batch": batch, "plain": plain, "cached": cached}
        if plain["fits"] and cached["fits"]:
            row |= {"peak_ratio": cached["peak_mb"] / plain["peak_mb"],
                    "added_ratio": cached["added_mb"] / plain["added_mb"] if plain["added_mb"] > 0 else None,
                    "speed_ratio": cached["examples_per_s"] / plain["examples_per_s"]}
            added = f"{row['added_ratio']:.2f}" if row["added_ratio"] is not None else "-"
            ratios = f"{row['peak_ratio']:.2f}, {added}, {row['speed_ratio']:.2f}"
        else:
            ratios = "; ".join(f"{name}: {r['error']}" for name, r in (("without", plain), ("with", cached))
                               if not r["fits"])
        results["runs"].append(row)
        print(f"{batch:>6} {min(chunk, batch):>6} | {show(plain)} | {show(cached)} | {ratios}", flush=True)
        if args.json:
            Path(args.json).write_text(json.dumps(results, indent=2))
    measure = next((r[k]["measure"] for r in results["runs"] for k in ("plain", "cached") if r[k]["fits"]), None)
    print(f"\npeak: {measure}; added: the peak less the memory held as the loop started; "
          f"speed: examples/s after the first step")


if __name__ == "__main__":
    main()
