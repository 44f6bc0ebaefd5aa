"""The paired comparison: which questions the runs share, the baseline, and per cell the
value, delta and p-value that compare.json holds.

Values come from the per-query figures of results.json, on the questions every run
has (normally all; see `check_same_data`), so a row equals `boolcl evaluate`'s table.
Deltas are run − baseline in percentage points (for NegRecall, lower is better) and
each p-value is a two-sided paired test over the questions of that type
(`significance.py`); p-values are not corrected for multiple comparisons. A row averaged
over seeds shows mean ± std (sample std); its p-value is computed on per-query means.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import numpy as np

from boolcl.evaluate.measures import group_order, lower_is_better, measure_order
from boolcl.evaluate.runs import CompareError, Run
from boolcl.evaluate.significance import paired_test

MIN_OVERLAP = 0.5  # fewer questions in common than this share of the largest set: different data


def check_same_data(runs: Sequence[Run]) -> tuple[list[str], list[str]]:
    """The questions every run has, and notes; CompareError when the runs are not comparable.

    Refused: different data names, k, corpus sizes, a question typed differently, runs
    without per-query values, or fewer than half the questions in common (different
    question sets under one name). When the sets differ by a few questions, the
    comparison is on the common ones and a note says so.
    """
    def listing(get) -> str:
        return "; ".join(f"{r.name}: {get(r)}" for r in runs)

    names = {(r.results.get("data") or {}).get("name") for r in runs}
    if len(names) > 1:
        raise CompareError("the runs were evaluated on different data (" + listing(
            lambda r: (r.results.get("data") or {}).get("name")) + "); evaluate them all on one set, "
            "e.g. `boolcl compare RUNS... data=NAME` evaluates the ones without results on NAME")
    ks = {(r.results.get("settings") or {}).get("k") for r in runs}
    if len(ks) > 1:
        raise CompareError("the runs were evaluated with different eval.k (" + listing(
            lambda r: (r.results.get("settings") or {}).get("k")) + ")")
    passages = {(r.results.get("data") or {}).get("passages") for r in runs} - {None}
    if len(passages) > 1:
        raise CompareError("the runs searched corpora of different sizes (" + listing(
            lambda r: (r.results.get("data") or {}).get("passages")) + " passages); "
            "use the same data= and eval.max_corpus= for all")
    for r in runs:
        if not r.per_query or not r.question_types:
            raise CompareError(f"{r.name} ({r.path or r.origin}): results.json has no per-query values "
                               "to test; evaluate it again with `boolcl evaluate`")
    sets = [set(r.question_types) for r in runs]
    common = set.intersection(*sets)
    largest = max(len(s) for s in sets)
    if len(common) < MIN_OVERLAP * largest:
        raise CompareError(f"the runs have different question sets ({len(common)} of up to {largest} "
                           "questions in common: " + listing(lambda r: f"{len(r.question_types)} questions")
                           + "); are they on the same data?")
    ref = runs[0]
    for r in runs[1:]:
        for q in common:
            if str(r.question_types[q]).upper() != str(ref.question_types[q]).upper():
                raise CompareError(f"question {q!r} is {ref.question_types[q]!r} in {ref.name} but "
                                   f"{r.question_types[q]!r} in {r.name}: not the same data")
    notes = []
    if any(len(s) != len(common) for s in sets):
        notes.append(f"compared on the {len(common)} questions all runs have (" +
                     listing(lambda r: f"{len(r.question_types)}") + ")")
    return sorted(common), notes


def _cell_values(run: Run, measure: str, qids: Sequence[str]) -> list[float]:
    values = run.per_query.get(measure) or {}
    return [values[q] for q in qids if values.get(q) is not None]


def pick_baseline(runs: Sequence[Run], wanted: str | None) -> Run:
    """The run named `wanted` (its name, a seed member's name, or a path it was read from); else the first."""
    if not wanted:
        return runs[0]
    target = Path(wanted).resolve() if Path(wanted).exists() else None
    for r in runs:
        rows = [r, *r.members]
        if wanted in {x for row in rows for x in (row.name, row.given)}:
            return r
        paths = {Path(p).resolve() for row in rows for p in (row.path, row.given) if p and Path(p).exists()}
        paths |= {f.parent for f in list(paths) if f.name == "results.json"}
        paths |= {f.parent.parent for f in list(paths) if f.parent.name == "eval"}  # <run>/eval/<data>/
        if target is not None and target in paths:
            return r
    raise CompareError(f"baseline {wanted!r} is none of the runs: {', '.join(r.name for r in runs)} "
                       "(give a run's name or path)")


def compare_runs(runs: Sequence[Run], baseline: Run, qids: Sequence[str], *, test: str = "randomization",
                 samples: int = 10000, seed: int = 0, alpha: float = 0.05) -> dict:
    """Per run, measure and group: value (percent), std over seeds, n, delta vs baseline, p-value."""
    k = int((baseline.results.get("settings") or {}).get("k") or 10)
    types = baseline.question_types
    by_group: dict[str, list[str]] = {"ALL": list(qids)}
    for q in qids:
        by_group.setdefault(str(types[q]).upper(), []).append(q)
    groups = group_order(by_group)
    measures = measure_order(set.intersection(*(set(r.per_query) for r in runs)), k)
    ordered = [baseline] + [r for r in runs if r is not baseline]
    cells: dict[str, dict] = {}
    for run in ordered:
        cells[run.name] = {}
        for measure in measures:
            cells[run.name][measure] = {}
            for g in groups:
                cell: dict[str, Any] = {}
                if run.members:
                    per_seed = [_cell_values(m, measure, by_group[g]) for m in run.members]
                    means = [100 * float(np.mean(v)) for v in per_seed if v]
                    cell["value"] = float(np.mean(means)) if len(means) == len(per_seed) else None
                    cell["std"] = float(np.std(means, ddof=1)) if cell["value"] is not None else None
                    cell["n"] = min(len(v) for v in per_seed)
                    cell["seeds"] = [round(v, 6) for v in means]
                else:
                    vals = _cell_values(run, measure, by_group[g])
                    cell["value"] = 100 * float(np.mean(vals)) if vals else None
                    cell["std"] = None
                    cell["n"] = len(vals)
                if run is not baseline:
                    t = paired_test(baseline.per_query.get(measure) or {}, run.per_query.get(measure) or {},
                                    test=test, samples=samples, seed=seed, qids=by_group[g])
                    delta = None if t.delta is None else 100 * t.delta
                    cell.update(delta=delta, p=t.p_value, n_paired=t.n, only_baseline=t.only_a,
                                only_run=t.only_b, exact=t.exact,
                                significant=t.p_value is not None and t.p_value < alpha,
                                better=None if not delta else (delta < 0) == lower_is_better(measure))
                    if t.ci_low is not None:
                        cell["ci"] = [100 * t.ci_low, 100 * t.ci_high]
                cells[run.name][measure][g] = cell
    empty = [m for m in measures if all(cells[r.name][m]["ALL"]["n"] == 0 for r in ordered)]
    data = dict(baseline.results.get("data") or {})
    return {
        "data": data, "k": k, "baseline": baseline.name, "test": test, "samples": samples, "seed": seed,
        "alpha": alpha, "questions": len(qids), "groups": groups,
        "measures": [m for m in measures if m not in empty], "measures_without_values": empty,
        "group_sizes": {g: len(by_group[g]) for g in groups},
        "runs": [{"name": r.name, "origin": r.origin, "results": r.path or None, "input": r.given or None,
                  "model": (r.results.get("model") or {}) if not r.members else None,
                  "seeds": [{"name": m.name, "seed": m.seed, "results": m.path} for m in r.members] or None}
                 for r in ordered],
        "cells": cells,
    }
