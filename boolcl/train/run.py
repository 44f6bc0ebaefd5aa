"""What `boolcl train` and train.py run: the training loop (loop.py), in a run folder that is its own.

An `out=` that holds anything is trained into only when it is this run's own (checkpoint.own_run:
the same settings in its config.yaml, or the checkpoint train.resume continues) or with
`overwrite=true`; the check reads files only, so a refusal comes before any model is loaded.
"""
from __future__ import annotations

from pathlib import Path

from accelerate import PartialState
from omegaconf import DictConfig

from boolcl.distributed import cpu_only_distributed
from boolcl.files import check_output_folder
from boolcl.train import checkpoint, loop


def check_run_folder(cfg: DictConfig) -> None:
    """Refuse an `out=` that is not this run's own (files.check_output_folder), on every process
    before any of them writes there."""
    if cfg.out:  # without out= the run folder is a new one, named by the time
        check_output_folder(Path(cfg.out), overwrite=bool(cfg.get("overwrite", False)), what="run folder (out=)",
                            own=lambda d: checkpoint.own_run(d, cfg))
    PartialState(cpu=cpu_only_distributed()).wait_for_everyone()


def train(cfg: DictConfig) -> Path:
    check_run_folder(cfg)
    return loop.train(cfg)
