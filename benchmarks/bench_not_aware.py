"""What the NOT-aware terms cost: the paper-style NOT recipe against not_plus and each addition alone.

    python benchmarks/bench_not_aware.py                       # CPU: 12 steps each, batch 16
    python benchmarks/bench_not_aware.py --steps 20 --only paper-not not_plus
    python benchmarks/bench_not_aware.py --json results/bench_not_aware.json
    python benchmarks/bench_not_aware.py --only paper-not not_plus --launch --repeat 5
    python benchmarks/bench_not_aware.py --only paper-not not_plus --model distilbert-random --batch 64 \
        train.max_length=256 train.mixed_precision=bf16          # GPU: the setting of the GPU benchmarks

Every variant is `recipe=not_plus_tiny` (the packaged MiniLM, the bundled sample's pool) with
some of its additions switched off, by scripts/reproduce/ablation.py's switches: `paper-not` is
the ablation's paper-style recipe (every addition off), `not_plus` the recipe, `+NAME` the
recipe with only that addition on. All run in this one process, one after the other, on the
same data, batch and seed, through the real `train()` loop. For each it prints

- triples/s over the same steady-state window (log records `--warmup` .. last: the first
  steps pay for allocator and kernel warm-up and are left out),
- the set-up seconds (from calling train() to the first step: model, data, the start table
  that retention and the decomposition targets read, the targets' arithmetic, the decomposition
  warm-up's steps), with those three parts timed on their own (the in-process runs start with an
  empty cache),
- both as ratios to `paper-not`,
- with `--launch`, the set-up as a user waits for it: from starting a fresh Python process
  (imports, config, model, data and the NOT-aware set-up) to the first step, each variant in
  a child process of its own, one at a time, twice: with an empty embedding cache (`cold`: the
  first run on a pool) and with the one its run above filled (`warm`: the start table, which a
  later seed, variant or resume on the same pool and starting model reads: train.cache_start_table);
  with `--repeat N`, N rounds that launch every variant in turn, and the median of each (one
  launch swings by a second on a shared machine).

Every run here gets an embedding cache of its own in a temporary folder, never ~/.cache.

Time it alone: two torch processes on the same cores slow each other far more than twice.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

HERE = Path(__file__).resolve().parent
# bench_common beside this file; the ablation's switches, so both name the same variants alike
sys.path[:0] = [str(HERE), str(HERE.parent / "scripts" / "reproduce")]
import bench_common as bc  # noqa: E402
from ablation import RECIPE, SWITCHES, parse_variant, switched_off  # noqa: E402
from ablation import VARIANTS as ABLATION  # noqa: E402

# name -> overrides on top of RECIPE
VARIANTS = {"paper-not": list(ABLATION["paper-not"]), "not_plus": []}
NEEDS = {"warmup": "decomposition"}  # a sub-setting of a term: +NAME keeps the term on
VARIANTS |= {f"+{name}": switched_off(*(other for other in SWITCHES if other not in (name, NEEDS.get(name))))
             for name in SWITCHES}
LAUNCHES = {"cold": "an empty embedding cache (the first run on a pool)",
            "warm": "the cache the run above filled (its start table)"}


@contextmanager
def timed_setup(clock: dict):
    """Wrap the set-up functions that train() calls to time them, and note when the loop starts."""
    from boolcl.train import decomposition, loop
    from boolcl.train.terms.decomposition import DecompositionDistill

    saved = {"StartTable": loop.StartTable, "attach_targets": decomposition.attach_targets, "Meter": loop.Meter,
             "before_training": DecompositionDistill.before_training}

    def timing(name, fn):
        def wrapper(*args, **kwargs):
            start = time.perf_counter()
            out = fn(*args, **kwargs)
            clock[name] = clock.get(name, 0.0) + time.perf_counter() - start
            return out
        return wrapper

    class Meter(saved["Meter"]):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            clock["loop_start"] = self.start
            clock["loop_start_wall"] = time.time()

    loop.StartTable = timing("start_table_s", saved["StartTable"])  # the start's embeddings (retention, targets)
    decomposition.attach_targets = timing("decomposition_s", saved["attach_targets"])
    DecompositionDistill.before_training = timing("warmup_s", saved["before_training"])  # the term's warm-up steps
    loop.Meter = Meter
    try:
        yield
    finally:
        loop.StartTable, decomposition.attach_targets, loop.Meter = (
            saved["StartTable"], saved["attach_targets"], saved["Meter"])
        DecompositionDistill.before_training = saved["before_training"]


def run_variant(name: str, overrides: list[str], args, work: Path, cache: Path) -> dict:
    from boolcl.config import compose
    from boolcl.train.loop import train

    cfg = compose([RECIPE, *overrides, f"seed={args.seed}", f"train.batch_size={args.batch}",
                   f"train.max_steps={args.steps}", "train.log_every=1", "train.save_every=0",
                   "train.report_to=[]", "train.eval_every=0", f"out={work / name}", *args.overrides,
                   f"eval.cache_dir={cache}"])
    clock: dict = {}
    with timed_setup(clock):
        start = time.perf_counter()
        run = train(cfg)
        wall = time.perf_counter() - start
    log = [json.loads(x) for x in (run / "train_log.jsonl").read_text().splitlines()]
    if len(log) <= args.warmup:
        raise SystemExit(f"{name}: {len(log)} log records, not enough past --warmup {args.warmup}: raise --steps")
    a, b = log[args.warmup - 1], log[-1]  # the window: after step `warmup` .. the last step
    seconds = b["elapsed_s"] - a["elapsed_s"]
    steps = b["step"] - a["step"]
    return {"overrides": overrides, "triples_per_s": steps * args.batch / seconds, "s_per_step": seconds / steps,
            "window": [a["step"] + 1, b["step"]], "setup_s": clock["loop_start"] - start, "wall_s": wall,
            "loop_start_wall": clock["loop_start_wall"], **{k: round(v, 3) for k, v in clock.items() if k.endswith("_s")}}


def launch_setup(name: str, args, cache: Path) -> float:
    """Seconds from starting a fresh `python` on this script (one variant, two steps, embedding
    cache in `cache`) to its first step."""
    cmd = [sys.executable, __file__, "--child", name, "--cache", str(cache), "--steps", "2", "--warmup", "1",
           "--batch", str(args.batch), "--seed", str(args.seed), *(f"--variant={v}" for v in args.variant),
           *args.overrides]
    start = time.time()
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(f"{name}: the child process failed:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])["loop_start_wall"] - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=12, help="optimiser steps per variant (default 12)")
    ap.add_argument("--batch", type=int, default=16, help="queries per step (default 16, the recipe's)")
    ap.add_argument("--warmup", type=int, default=3, help="steps left out of the steady-state window (default 3)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--only", nargs="+", default=None,
                    help=f"time only these variants (paper-not is always timed: it is the reference): "
                         f"{', '.join(VARIANTS)}")
    ap.add_argument("--variant", action="append", default=[], metavar="NAME=KEY=VALUE[,KEY=VALUE...]",
                    help="also time not_plus with these overrides, as NAME (repeatable)")
    ap.add_argument("--model", default=None,
                    help="the model for every variant (default: the recipe's packaged MiniLM); distilbert-random: "
                         "DistilBERT-base with random weights, as in the other GPU benchmarks")
    ap.add_argument("--tokenizer", default=None,
                    help="with --model distilbert-random: the tokenizer folder (default: the packaged MiniLM's)")
    ap.add_argument("--json", default=None, help="write the figures here")
    ap.add_argument("--launch", action="store_true",
                    help="also time each variant's set-up from a fresh process's start (imports included)")
    ap.add_argument("--repeat", type=int, default=1,
                    help="with --launch: rounds of launches, every variant once per round; the median counts")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)  # one variant, figures as JSON on stdout
    ap.add_argument("--cache", default=None, help=argparse.SUPPRESS)  # the child's embedding cache
    ap.add_argument("overrides", nargs="*", help="key=value, applied to every variant")
    args = ap.parse_args()
    if args.repeat < 1:
        raise SystemExit(f"--repeat {args.repeat} must be at least 1")
    if not 1 <= args.warmup < args.steps:
        raise SystemExit(f"--warmup {args.warmup} must be at least 1 and below --steps {args.steps}")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    if args.model:
        args.model = bc.model_spec(args.model, args.tokenizer)
        args.overrides = [f"model={args.model}", *args.overrides]  # first: the overrides win; children get it too
        args.model = None
    for spec in args.variant:
        try:
            name, overrides = parse_variant(spec)  # the same syntax as scripts/reproduce/generalisation.py's
        except ValueError as err:
            raise SystemExit(str(err)) from None
        VARIANTS[name] = [*VARIANTS["not_plus"], *overrides]  # on top of the recipe
    unknown = [n for n in args.only or [] if n not in VARIANTS]
    if unknown:
        raise SystemExit(f"--only {' '.join(unknown)}: no such variant here; there are {', '.join(VARIANTS)}")
    if args.child:
        work = bc.scratch("bench-not-aware-")
        r = run_variant(args.child, VARIANTS[args.child], args, work, Path(args.cache))
        print(json.dumps(r))
        return
    import torch

    extra = [parse_variant(spec)[0] for spec in args.variant]
    names = [n for n in VARIANTS if not args.only or n in args.only or n == "paper-not" or n in extra]
    work = bc.scratch("bench-not-aware-")
    results = {"device": torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu",
               "threads": torch.get_num_threads(), "batch": args.batch, "steps": args.steps,
               "warmup": args.warmup, "variants": {}}
    for name in names:
        print(f"--- {name}", flush=True)
        results["variants"][name] = run_variant(name, VARIANTS[name], args, work, work / f"cache-{name}")
        if args.json:
            Path(args.json).write_text(json.dumps(results, indent=2))
    if args.launch:
        for round_ in range(args.repeat):  # interleaved, so a slow spell of the machine hits every variant
            for name in names:
                for mode in LAUNCHES:
                    print(f"--- {name}: set-up from a fresh process, {mode} ({round_ + 1}/{args.repeat})", flush=True)
                    cache = work / f"cache-{name}" if mode == "warm" else Path(tempfile.mkdtemp(dir=work))
                    results["variants"][name].setdefault(f"launch_setups_{mode}_s", []).append(
                        launch_setup(name, args, cache))
        for r in results["variants"].values():
            for mode in LAUNCHES:
                r[f"launch_setup_{mode}_s"] = statistics.median(r[f"launch_setups_{mode}_s"])
    ref = results["variants"]["paper-not"]
    for r in results["variants"].values():
        r["time_per_step_ratio"] = r["s_per_step"] / ref["s_per_step"]
        r["setup_ratio"] = r["setup_s"] / ref["setup_s"]
        if args.launch:
            for mode in LAUNCHES:
                r[f"launch_setup_{mode}_ratio"] = r[f"launch_setup_{mode}_s"] / ref[f"launch_setup_{mode}_s"]
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    print(f"\n{results['device']}, {results['threads']} threads, batch {args.batch}, "
          f"steps {args.warmup + 1}..{args.steps} timed")
    print(f"{'variant':18} {'triples/s':>10} {'s/step':>8} {'x paper':>8} {'set-up s':>9} {'x paper':>8}"
          f"  {'start table s':>13} {'decomp s':>8} {'warm-up s':>9}")
    for name, r in results["variants"].items():
        print(f"{name:18} {r['triples_per_s']:10.2f} {r['s_per_step']:8.3f} {r['time_per_step_ratio']:7.2f}x "
              f"{r['setup_s']:9.1f} {r['setup_ratio']:7.2f}x  {r.get('start_table_s', 0):13.1f} "
              f"{r.get('decomposition_s', 0):8.1f} {r.get('warmup_s', 0):9.1f}")
    if args.launch:
        print("\nset-up from a fresh process's start to the first step (imports included)"
              + (f", median of {args.repeat} launches:" if args.repeat > 1 else ":"))
        for mode, what in LAUNCHES.items():
            print(f"{mode}: {what}")
            for name, r in results["variants"].items():
                runs = r[f"launch_setups_{mode}_s"]
                each = "  (" + ", ".join(f"{x:.1f}" for x in runs) + ")" if args.repeat > 1 else ""
                print(f"  {name:16} {r[f'launch_setup_{mode}_s']:9.1f} s {r[f'launch_setup_{mode}_ratio']:7.2f}x{each}")


if __name__ == "__main__":
    main()
