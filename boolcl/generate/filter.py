"""Cyclic-consistency filter: does each labelled passage answer the question it is labelled for?

The LLM answers every generated question once from each labelled passage (or says
it cannot). Two rules are computed for every question, whatever the setting, so the
report can show both counts:

- positives: every positive passage answers (the paper's rule);
- strict: that, and for AND / NOT no labelled negative answers (the excluded
  passage of a NOT question must not satisfy it).

`generate.filter` picks which rule decides (`off` keeps everything that parsed).
An unusable check answer (empty, refusal) fails the question: no label is trusted
that the model could not confirm.
"""
from __future__ import annotations

from dataclasses import dataclass

from boolcl.generate.parse import ANSWERED, CANNOT, UNUSABLE

MODES = ("strict", "positives", "off")
STRICT_OPS = ("and", "not")


@dataclass
class Decision:
    keep: bool
    pass_positives: bool
    pass_strict: bool
    reason: str | None  # why it was dropped under the chosen mode


def needs_negatives(op: str, mode: str) -> bool:
    """Whether the labelled negatives are checked at all (both counts need them under any mode but off)."""
    return mode != "off" and op in STRICT_OPS


def decide(op: str, positives: list[str], negatives: list[str], mode: str) -> Decision:
    """`positives` / `negatives`: verdicts (answered | cannot | unusable) per labelled passage."""
    if mode not in MODES:
        raise ValueError(f"filter mode {mode!r} is not one of {MODES}")
    pos_ok = all(v == ANSWERED for v in positives)
    neg_ok = all(v == CANNOT for v in negatives) if op in STRICT_OPS else True
    strict_ok = pos_ok and neg_ok
    if mode == "off":
        return Decision(True, pos_ok, strict_ok, None)
    keep = strict_ok if mode == "strict" else pos_ok
    reason = None
    if not pos_ok:
        reason = "unusable check answer" if UNUSABLE in positives else "a positive passage does not answer"
    elif not keep:
        reason = "unusable check answer" if UNUSABLE in negatives else "a negative passage answers"
    return Decision(keep, pos_ok, strict_ok, reason)
