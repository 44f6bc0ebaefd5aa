"""Which measures and groups a comparison shows, in which order, and which way is better."""
from __future__ import annotations

BOOLEAN_ORDER = ("AND", "OR", "NOT")


def group_order(names) -> list[str]:
    """ALL, then AND/OR/NOT as in the paper, then any other groups (e.g. BIRCO tasks) sorted."""
    names = set(names) - {"ALL"}
    return ["ALL"] + [g for g in BOOLEAN_ORDER if g in names] + sorted(names - set(BOOLEAN_ORDER))


def measure_order(measures, k: int) -> list[str]:
    first = [m for m in (f"MRR@{k}", f"NegRecall@{k}") if m in measures]
    return first + sorted(set(measures) - set(first))


def lower_is_better(measure: str) -> bool:
    return measure.startswith("NegRecall")


def headline_measures(payload: dict) -> list[str]:
    k = payload["k"]
    return [m for m in (f"MRR@{k}", f"NegRecall@{k}") if m in payload["measures"]] or payload["measures"][:2]
