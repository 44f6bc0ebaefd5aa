"""Leave-one-out ablation of the NOT-aware recipe: the base model, paper-style NOT training, the recipe, and
the recipe with each addition switched off in turn.

    python scripts/reproduce/ablation.py [--seeds 1 2 3] [--out results/ablation] [--only NAME ...] [key=value ...]

Every variant is `recipe=not_plus_tiny` (the packaged MiniLM, the bundled sample's
training clusters) with some of its additions switched off, trained once per seed and
evaluated on the sample's held-out clusters; then `boolcl compare` (seeds averaged:
mean ± std, paired p-values) writes compare.{json,md,png} against the base model to
OUT/compare and against the paper-style NOT recipe to OUT/compare-vs-paper. The recipe's
variants share its schedule, so only the switch differs. A finished run is kept
(OUT/runs/<variant>-s<seed>/results.json) and skipped on a rerun, so a killed ablation resumes
where it stopped. Extra key=value overrides apply to every run.
"""
from __future__ import annotations

import argparse
import os
import re
import sys
import time
from pathlib import Path

SWITCHES = {  # each addition of not_plus_tiny and the overrides that switch it off
    "retention": ["train.retention.weight=0"],
    "cluster-batches": ["train.group_by_cluster=false"],
    "decomposition": ["train.decomposition.weight=0", "train.decomposition.warmup_steps=0"],
    "warmup": ["train.decomposition.warmup_steps=0"],  # no steps of the decomposition term alone first
    # AND and OR questions in the mix; off: NOT questions only (with the simple ones), over the paper-style
    # recipe's 6 epochs
    "and-or": ["train.operators=[not]", "train.epochs=6"],
    "topics": ["train.named.topics=false"],  # no group topic as a negative of its Boolean questions
    "named-or": ["train.named.or_questions=0"],  # no questions joining two passages' names with "or"
}
# the paper-style recipe keeps 3e-4: its NOT MRR@10 on the development sets is higher there than at the recipe's 5e-5
PAPER_LR = "train.lr=3e-4"


def switched_off(*names: str) -> list[str]:
    return [o for name in names for o in SWITCHES[name]]


# name -> overrides on top of recipe=not_plus_tiny (None: the untrained base model): the base model,
# the paper-style recipe (every addition off), the recipe, and the recipe less each addition in turn
VARIANTS = {"base": None, "paper-not": [*switched_off(*SWITCHES), PAPER_LR], "not_plus": []}
VARIANTS |= {f"no-{name}": switched_off(name) for name in SWITCHES}
RECIPE = "recipe=not_plus_tiny"  # every variant's starting point (generalisation.py shares all of this)


NAME = re.compile(r"^[A-Za-z0-9_+.][A-Za-z0-9_+.-]*$")
SEEDED = re.compile(r"[-_.](?:s|seed)[-_=]?\d+$")  # compare reads such a suffix as a seed
NEXT_KEY = re.compile(r",(?=\s*[A-Za-z_][\w.]*=)")  # a comma that starts the next key=value


def parse_variant(text: str) -> tuple[str, list[str]]:
    """`NAME=key=value,key=value` -> (NAME, [key=value, ...]); commas inside a value ([not,and]) stay."""
    name, sep, rest = text.partition("=")
    name = name.strip()
    if not sep or not NAME.match(name) or SEEDED.search(name):
        raise ValueError(f"--variant {text!r}: expected NAME=key=value[,key=value...] with a NAME of letters, "
                         "digits, _ + . - that does not end like a seed (-s1)")
    overrides = [part.strip() for part in NEXT_KEY.split(rest) if part.strip()]
    bad = [o for o in overrides if "=" not in o]
    if bad:
        raise ValueError(f"--variant {text!r}: {bad[0]!r} is not key=value")
    return name, overrides


def run_config(overrides: list[str], extra: list[str], seed: int, folder: Path):
    """The training config of one (variant, seed): the recipe, the variant's switches, then `extra`."""
    from boolcl.config import compose

    return compose([RECIPE, *overrides, *extra, f"seed={seed}", f"out={folder}", "train.save_every=0",
                    "train.report_to=[]"])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--out", default="results/ablation")
    ap.add_argument("--only", nargs="+", choices=list(VARIANTS)[1:],
                    help="train only these variants (the base is always evaluated; compare reads every finished run)")
    ap.add_argument("overrides", nargs="*", help="key=value, applied to every run")
    args = ap.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    from rich.console import Console

    from boolcl.config import compose
    from boolcl.data.loaders import load_retrieval_set
    from boolcl.evaluate.compare import run_compare
    from boolcl.scoring.report import write_results
    from boolcl.scoring.runner import data_info, evaluate_spec
    from boolcl.train.run import train

    console = Console()
    out = Path(args.out)
    base_cfg = compose([RECIPE, *args.overrides])
    rset = load_retrieval_set(base_cfg.data)
    folders = []
    # seed by seed, so that a partial ablation already covers every variant
    plan = [(name, seed) for seed in args.seeds for name in VARIANTS if VARIANTS[name] is not None]
    for name, seed in [(n, None) for n in VARIANTS if VARIANTS[n] is None] + plan:
        overrides = VARIANTS[name]
        folder = out / "runs" / (name if seed is None else f"{name}-s{seed}")
        if (folder / "results.json").is_file():  # finished earlier: kept, not redone
            folders.append(str(folder))
            continue
        if args.only and overrides is not None and name not in args.only:
            continue
        started = time.perf_counter()
        if overrides is None:
            cfg, spec = base_cfg, base_cfg.model
        else:
            cfg = run_config(overrides, args.overrides, seed, folder)
            spec = str(train(cfg))
        console.rule(f"evaluate {folder.name}")
        result, info = evaluate_spec(spec, rset, cfg, show_progress=False)
        info["seed"] = seed
        info["overrides"] = overrides
        write_results(folder, result, model=info, data=data_info(rset), k=cfg.eval.k, tag=folder.name)
        folders.append(str(folder))
        console.print(f"{folder.name}: {time.perf_counter() - started:.0f} s")
    payload = run_compare(folders, base_cfg, str(out / "compare"), seeds=True)
    tables = [payload["files"]["md"]]
    paper = [Path(f).name for f in folders if Path(f).name.startswith("paper-not-")]
    if paper:  # is each variant better than the paper-style recipe? (one seed keeps its own name)
        name = "paper-not" if len(paper) > 1 else paper[0]
        versus = compose([RECIPE, *args.overrides, f"compare.baseline={name}"])
        tables.append(run_compare(folders, versus, str(out / "compare-vs-paper"), seeds=True)["files"]["md"])
    console.print("tables: " + "  ".join(tables))
    return 0


if __name__ == "__main__":
    sys.exit(main())
