"""Write and show results: results.json, TREC run files, and tables in the paper's layout."""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Mapping

from rich.console import Console
from rich.table import Table

from boolcl.data.jsonl import iter_lines
from boolcl.errors import DataError
from boolcl.files import atomic_write_text
from boolcl.scoring import metrics
from boolcl.scoring.runner import EvalResult, headline
from boolcl.versions import library_versions

GROUPS = ("ALL", "AND", "OR", "NOT")


def write_trec_run(path: str | Path, run: Mapping[str, list[tuple[str, float]]], tag: str) -> None:
    """`qid Q0 docid rank score tag`, one line per retrieved passage."""
    lines = [f"{qid} Q0 {doc} {r} {score:.6f} {tag}"
             for qid, ranked in run.items() for r, (doc, score) in enumerate(ranked, 1)]
    atomic_write_text(path, "\n".join(lines) + "\n")


def read_trec_run(path: str | Path) -> dict[str, list[tuple[str, float]]]:
    """A TREC run as `{qid: [(docid, score), ...]}`, ordered by score as trec_eval orders it."""
    path = Path(path)
    run: dict[str, list[tuple[str, float]]] = {}
    seen: set[tuple[str, str]] = set()
    for lineno, line in iter_lines(path):  # UTF-8 checked, line length bounded
        if not line.strip():
            continue
        parts = line.split()
        if len(parts) != 6:
            raise DataError(path, lineno, f"a TREC run line has 6 columns 'qid Q0 docid rank score tag', "
                            f"this one has {len(parts)}", field="columns")
        qid, _, docid, rank, score, _ = parts
        try:
            int(rank)
        except ValueError:
            raise DataError(path, lineno, f"field 'rank': {rank!r} is not an integer", field="rank") from None
        try:
            value = float(score)
        except ValueError:
            value = math.nan
        if not math.isfinite(value):
            raise DataError(path, lineno, f"field 'score': {score!r} is not a finite number", field="score")
        if (qid, docid) in seen:
            raise DataError(path, lineno, f"field 'docid': {docid!r} is ranked twice for query {qid!r}",
                            field="docid")
        seen.add((qid, docid))
        run.setdefault(qid, []).append((docid, value))
    if not run:
        raise DataError(path, None, "holds no ranking lines")
    return {qid: metrics.rank(lst) for qid, lst in run.items()}


def results_dict(result: EvalResult, *, model: dict, data: dict, k: int) -> dict:
    """The results.json layout; `per_query` and `question_types` let `compare` run paired tests."""
    return {"model": model, "data": data, "settings": result.settings, "versions": library_versions(),
            "timings": result.timings,
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


def _layout(rows: Mapping[str, Mapping[str, float | None]], k: int) -> tuple[list[str], list[str]]:
    """Measures and groups to show: the paper's MRR / NegRecall when present, groups ALL, AND, OR, NOT first."""
    keys = {key for h in rows.values() for key, v in h.items() if v is not None}
    measures = sorted({key.split("/")[0] for key in keys})
    if f"NegRecall@{k}" in measures:  # Boolean sets: the paper's Table 3
        paper = [m for m in (f"MRR@{k}", f"NegRecall@{k}") if m in measures]
    else:  # no explicit negatives (BIRCO): graded nDCG leads, as in the BIRCO paper
        paper = [m for m in (f"nDCG@{k}", f"MRR@{k}") if m in measures]
    groups = sorted({key.split("/", 1)[1] for key in keys})
    first = [g for g in ("ALL",) + GROUPS[1:] if g in groups]
    return paper or measures, first + [g for g in groups if g not in first]


def table(rows: Mapping[str, Mapping[str, float | None]], k: int = 10, title: str | None = None) -> Table:
    """Rows of `headline()` dicts, in percent: the paper's Table 3 layout (MRR@k ↑, NegRecall@k ↓ per type)."""
    measures, groups = _layout(rows, k)
    short = {f"MRR@{k}": "MRR", f"NegRecall@{k}": "NegR", f"nDCG@{k}": f"nDCG@{k}"}
    caption = " · ".join(f"{m} {'↓ lower' if m.startswith('NegRecall') else '↑ higher'} is better" for m in measures)
    t = Table(title=title, caption=caption + " (%)")
    t.add_column("Model", no_wrap=True)
    for m in measures:
        for g in groups:
            t.add_column(f"{short.get(m, m)}\n{g}", justify="right", no_wrap=True)
    for name, h in rows.items():
        t.add_row(name, *[_fmt(h.get(f"{m}/{g}")) for m in measures for g in groups])
    return t


def print_table(rows: Mapping[str, Mapping[str, float | None]], k: int = 10, title: str | None = None,
                console: Console | None = None) -> None:
    (console or Console()).print(table(rows, k, title))
