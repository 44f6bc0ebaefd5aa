"""What a term of the training objective is: what it adds to a batch, and its loss on the batch.

A term has a name (its config section, train.<name>, whose `weight` switches it on), may add
query rows and tensors to each batch (`collate`: the collator appends its rows after the
batch's own queries, encodes them in the same forward, and files its tensors under its
name), and may read the frozen starting model (`start_rows`, then `attach`: one pass of
the start over every text the terms ask for, before the first step), and may train alone
before the first step (`before_training`). Its loss reads the embeddings of every query and
passage row and the `Batch`; `None` means "nothing to score in this batch" and leaves the
term out of the sum and the log.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from boolcl.train.collate import Batch, Core


@dataclass
class Extra:
    """What a term adds to one batch: query texts (encoded after the batch's queries, prompt
    added by the collator) and tensors (`Batch.extra[term.name]`)."""
    queries: list[str] = field(default_factory=list)
    tensors: dict[str, torch.Tensor] = field(default_factory=dict)


class Term(torch.nn.Module):
    name = ""  # the config section, train.<name>, and the name in the log (loss_<name>)
    reads_start = False  # whether it compares with the frozen starting model (start_table.py)

    def __init__(self, weight: float = 1.0):
        super().__init__()
        self.weight = weight

    def collate(self, core: Core) -> Extra:
        return Extra()

    def start_rows(self, items, collator) -> list[str]:
        """Texts (prompts included) whose starting-model embeddings this term reads."""
        return []

    def attach(self, table, items) -> dict:
        """Take what it needs from the start's table; returns what to record in data_manifest.json."""
        return {}

    def before_training(self, model, items, t, seed: int, accelerator) -> str | None:
        """Steps of this term alone, once, before the first training step of a run that is not
        resumed; returns a line for the console, or None when it has none."""
        return None

    def forward(self, q: torch.Tensor, p: torch.Tensor, batch: Batch) -> torch.Tensor | None:
        raise NotImplementedError
