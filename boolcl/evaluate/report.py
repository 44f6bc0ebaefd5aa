"""Write and show results: results.json, TREC run files, and tables in the paper's layout."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Mapping

from rich.console import Console
from rich.table import Table

from ..data.jsonl import atomic_write_text
from .runner import EvalResult, headline

GROUPS = ("ALL", "AND", "OR", "NOT")


def write_trec_run(path: str | Path, run: Mapping[str, list[tuple[str, float]]], tag: str) -> None:
    """`qid Q0 docid rank score tag`, one line per retrieved passage."""
    lines = [f"{qid} Q0 {doc} {r} {score:.6f} {tag}"
             for qid, ranked in run.items() for r, (doc, score) in enumerate(ranked, 1)]
    atomic_write_text(path, "\n".join(lines) + "\n")


def results_dict(result: EvalResult, *, model: dict, data: dict, k: int) -> dict:
    """The results.json layout; `per_query` and `question_types` let `compare` run paired tests."""
    return {"model": model, "data": data, "settings": result.settings, "timings": result.timings,
            "metrics": result.metrics, "headline": headline(result, k),
            "question_types": result.question_types, "per_query": result.per_query}


def write_results(out_dir: str | Path, result: EvalResult, *, model: dict, data: dict, k: int, tag: str) -> dict:
    out_dir = Path(out_dir)
    payload = results_dict(result, model=model, data=data, k=k)
    atomic_write_text(out_dir / "results.json", json.dumps(payload, indent=2) + "\n")
    write_trec_run(out_dir / "run.trec", result.run, tag)
    return payload


def _fmt(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}"


def table(rows: Mapping[str, Mapping[str, float | None]], k: int = 10, title: str | None = None) -> Table:
    """Rows of `headline()` dicts as MRR@k ↑ | NegRecall@k ↓ per ALL/AND/OR/NOT, in percent."""
    t = Table(title=title, caption=f"MRR@{k} ↑ higher is better · NegRecall@{k} ↓ lower is better (%)")
    t.add_column("Model", no_wrap=True)
    for short in ("MRR", "NegR"):
        for g in GROUPS:
            t.add_column(f"{short}\n{g}", justify="right", no_wrap=True)
    for name, h in rows.items():
        t.add_row(name, *[_fmt(h.get(f"{m}/{g}")) for m in (f"MRR@{k}", f"NegRecall@{k}") for g in GROUPS])
    return t


def print_table(rows: Mapping[str, Mapping[str, float | None]], k: int = 10, title: str | None = None,
                console: Console | None = None) -> None:
    (console or Console()).print(table(rows, k, title))
