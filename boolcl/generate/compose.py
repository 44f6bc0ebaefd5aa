"""Draws and labels: which passages a Boolean question is built from, and which are positive.

A draw picks a group, `generate.min_candidates` to `max_candidates` candidate passages
in it (the paper uses 2 or 3), and a target:

- AND: the broad question plus conditions only the target meets. Positive: the
  target; negatives: the other candidates.
- OR: two candidates' simple questions joined by OR. Positives: those two;
  negatives: the other candidates.
- NOT: the broad question minus one candidate's simple question. Negative: that
  candidate (the explicit negative); positives: the other candidates.

Draws come from one seeded stream per operator and never repeat, so a rerun (or a
resumed run) makes exactly the same draws in the same order.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Iterator

from boolcl.generate.cluster import Group

OPERATORS = ("and", "or", "not")


@dataclass(frozen=True)
class Draw:
    op: str
    index: int  # position in this operator's stream: the order of the output
    group: str
    candidates: tuple[int, ...]  # passage indices, corpus order
    target: tuple[int, ...]  # positions in `candidates`: 1 for AND / NOT, 2 for OR

    @property
    def qid(self) -> str:
        return f"{self.op}-{self.index:06d}"

    def labels(self) -> tuple[list[int], list[int]]:
        """(positive passage indices, negative passage indices)."""
        chosen = [self.candidates[t] for t in self.target]
        rest = [c for c in self.candidates if c not in chosen]
        if self.op == "not":
            return rest, chosen
        return chosen, rest


def draw_stream(groups: list[Group], op: str, *, seed: int, min_candidates: int = 2, max_candidates: int = 3,
                patience: int = 2000) -> Iterator[Draw]:
    """Unique draws for `op`, forever or until `patience` draws in a row were repeats."""
    if op not in OPERATORS:
        raise ValueError(f"unknown operator {op!r}")
    usable = [g for g in groups if len(g.members) >= 2]
    if not usable:
        return
    rng = random.Random(f"{seed}:{op}:draws")
    seen: set[tuple] = set()
    misses = 0
    index = 0
    lo = max(2, min_candidates)
    while misses < patience:
        g = usable[rng.randrange(len(usable))]
        hi = max(lo, min(max_candidates, len(g.members)))
        n = min(rng.randint(lo, hi), len(g.members))
        cands = tuple(sorted(rng.sample(g.members, n)))
        target = tuple(sorted(rng.sample(range(n), 2))) if op == "or" else (rng.randrange(n),)
        key = (g.gid, cands, target)
        if key in seen:
            misses += 1
            continue
        misses = 0
        seen.add(key)
        yield Draw(op, index, g.gid, cands, target)
        index += 1


def split_counts(total: int, operators: list[str]) -> dict[str, int]:
    """`total` examples split evenly over the operators (the first ones take the remainder)."""
    ops = list(dict.fromkeys(operators))
    base, extra = divmod(total, len(ops))
    return {op: base + (1 if i < extra else 0) for i, op in enumerate(ops)}
