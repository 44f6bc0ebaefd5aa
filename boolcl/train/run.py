"""What `boolcl train` and train.py run: the training loop (loop.py), or, with
`train.negation.soup`, two runs of it and their mix (soup.py)."""
from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig

from boolcl.config import soup_on
from boolcl.train import loop, soup


def train(cfg: DictConfig) -> Path:
    return soup.train_soup(cfg) if soup_on(cfg.train) else loop.train(cfg)
