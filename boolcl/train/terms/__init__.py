"""The training objective's terms, one module each, built from the config (`build`).

Every run has the contrastive term; each NOT-aware term is on when its section's `weight`
is (train.<name>.weight). Adding a term is a module here, its config section in
config/schema.py and one entry in TERMS; the collator, the start table and the loop take
whatever the terms declare (base.py).
"""
from __future__ import annotations

from boolcl.train.terms.base import Core, Extra, Term
from boolcl.train.terms.contrastive import Contrastive
from boolcl.train.terms.decomposition import DecompositionDistill
from boolcl.train.terms.retention import Retention

TERMS = (Retention, DecompositionDistill)  # their order in the sum and the log


def build(t, similarity: str) -> list[Term]:
    """The terms `t` (cfg.train) switches on, contrastive first."""
    return [Contrastive.from_config(t, similarity)] + [
        term.from_config(t, similarity) for term in TERMS if t[term.name].weight]


def reads_start(t) -> bool:
    """Whether a term `t` switches on compares with the frozen starting model."""
    return any(term.reads_start and t[term.name].weight for term in TERMS)


__all__ = ["TERMS", "Core", "Extra", "Term", "build", "reads_start"]
