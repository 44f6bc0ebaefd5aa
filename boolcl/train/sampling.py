"""The order in which the training items come, epoch by epoch.

Every order is drawn from a generator seeded by (seed, epoch) alone, so a resumed run sees
the items in the order the uninterrupted run saw them, whatever else used the RNG.
"""
from __future__ import annotations

from collections.abc import Sequence

import torch

WINDOW = 50  # length grouping sorts within windows of this many batches


def grouped_order(perm: list[int], groups: Sequence[str | None], g: torch.Generator) -> list[int]:
    """The items of a group one after another (in `perm`'s order), the groups in a random order.
    An item without a group is a group of one."""
    members: dict = {}
    for i in perm:
        members.setdefault(groups[i] if groups[i] is not None else ("item", i), []).append(i)
    keys = list(members)
    order = torch.randperm(len(keys), generator=g).tolist()
    return [i for k in order for i in members[keys[k]]]


def length_order(perm: list[int], lengths: Sequence[int], batch_size: int, g: torch.Generator) -> list[int]:
    """Sorted by length (longest first) within windows of WINDOW batches, then the full batches
    shuffled: batches of similar length pad less, and their order stays random."""
    n, bs = len(perm), batch_size
    window = bs * WINDOW
    ordered = [i for lo in range(0, n, window) for i in sorted(perm[lo:lo + window], key=lambda i: -lengths[i])]
    full = n // bs * bs
    batches = [ordered[lo:lo + bs] for lo in range(0, full, bs)]
    order = torch.randperm(len(batches), generator=g).tolist()
    return [i for b in order for i in batches[b]] + ordered[full:]  # a partial batch stays last


class EpochShuffle(torch.utils.data.Sampler):
    """A fresh permutation per epoch from (seed, epoch) alone: a resumed run sees the same order.

    With `lengths`, batches of similar length (`length_order`); with `groups` (one key or None
    per item), questions over the same passages share a batch (`grouped_order`).
    """

    def __init__(self, n: int, seed: int, lengths: Sequence[int] | None = None, batch_size: int = 1,
                 groups: Sequence[str | None] | None = None):
        if lengths is not None and groups is not None:
            raise ValueError("group by length or by passage group, not both")
        self.n, self.seed, self.epoch = n, seed, 0
        self.lengths, self.batch_size, self.groups = lengths, batch_size, groups

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return self.n

    def __iter__(self):
        g = torch.Generator().manual_seed(self.seed * 100_003 + self.epoch)
        perm = torch.randperm(self.n, generator=g).tolist()
        if self.groups is not None:
            return iter(grouped_order(perm, self.groups, g))
        if self.lengths is not None:
            return iter(length_order(perm, self.lengths, self.batch_size, g))
        return iter(perm)
