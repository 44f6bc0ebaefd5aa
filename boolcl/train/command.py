"""Training as a command of its own, the entry point `accelerate launch` runs from an installed boolcl:

    accelerate launch -m boolcl.train recipe=not [key=value ...]     # 1..N GPUs or CPU processes
    python -m boolcl.train recipe=tiny                                # one process
    boolcl-train recipe=tiny                                          # the same, as a console script

`boolcl train` (cli.py) runs the same `train_config` in one process. The config is composed,
validated and its training files checked before torch is imported, so a mistake there is
refused at once, not after the model has loaded.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from boolcl.config import compose, overridden, to_yaml
from boolcl.config.inputs import check_training_inputs
from boolcl.errors import report_user_errors

# what `train` must be told: the recipe (which names a model and its data) or at least the model
REQUIRED = ("recipe", "model")


def train_config(cfg) -> Path:
    """Check the config's training files, then train; returns the run folder. Under `accelerate launch`
    every process runs this and ends its process group cleanly."""
    check_training_inputs(cfg)
    from boolcl.train.run import train

    run_dir = train(cfg)
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()  # a clean exit for multi-process runs
    return run_dir


def program_name() -> str:
    """How this process was started, for usage lines: train.py, boolcl-train or python -m boolcl.train."""
    name = Path(sys.argv[0]).name if sys.argv and sys.argv[0] else ""
    return "python -m boolcl.train" if name in ("", "__main__.py", "-c", "command.py") else name


def build_parser(prog: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog, formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Continue training a dense retriever on Boolean questions. The same command runs on one CPU,\n"
                    "one GPU, or N GPUs: accelerate launch -m boolcl.train recipe=not [key=value ...]",
        epilog="recipe=NAME picks a recipe (`boolcl recipes` lists them); any key can then be set, e.g.\n"
               "train.lr=3e-5 seed=1 out=checkpoints/not-lr3e-5. `boolcl config recipe=not` shows the resolved config.")
    parser.add_argument("overrides", nargs="*", help="recipe=NAME and key=value overrides")
    parser.add_argument("--cfg", choices=["job"], help="print the resolved config and exit without training")
    return parser


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    prog = program_name()
    parser = build_parser(prog)
    args = parser.parse_args(argv)
    bad = [o for o in args.overrides if "=" not in o]
    if bad:
        parser.error(f"expected key=value overrides, got {' '.join(bad)}")
    if not overridden(args.overrides, *REQUIRED):
        parser.error("say what to train: recipe=NAME (`boolcl recipes` lists them) or model=...")
    return report_user_errors(prog, lambda: run(args))


def run(args) -> int:
    cfg = compose(args.overrides)
    if args.cfg:
        print(to_yaml(cfg), end="")
        return 0
    print(f"saved {train_config(cfg)}")
    return 0
