"""The leave-one-out table of a generalisation report: the recipe's figures, then each variant's
difference from them, with the paired test and the seeds' spread that decide whether an addition
keeps its place.

    python scripts/reproduce/leave_one_out.py OUT REFERENCE VARIANT [VARIANT ...] [--seeds 1 2 3]

OUT is a folder of scripts/reproduce/generalisation.py (OUT/<set>/runs/<variant>-s<seed>/results.json).
Per development set and column (MRR@10 per type, NOT NegRecall@10): REFERENCE's mean ± std over
the seeds, then each VARIANT's mean minus REFERENCE's, in points. ‡ p < 0.01, † p < 0.05 in a
paired sign-flip randomization test over questions (boolcl.evaluate.significance, each question's
value averaged over the seeds first, as `boolcl compare` averages them). A difference is printed in
bold when the variant is worse (lower MRR@10, higher NegRecall@10) with p < 0.05 and by more than
the seeds' spread, the larger of the two runs' standard deviations: the rule by which an addition
stays.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import NamedTuple

from boolcl.evaluate.runs import Run, aggregate_seeds
from boolcl.evaluate.significance import paired_test

# (set folder, label, columns): a column is a question type's MRR@10, or "neg" for NOT NegRecall@10
TABLES = [
    [("wnbool", "WN-Bool", ["AND", "OR", "NOT", "neg"]), ("foldoc", "FOLDOC", ["AND", "OR", "NOT", "neg"]),
     ("gcide", "GCIDE-Excl", ["NOT", "neg"])],
    [("sample", "sample", ["AND", "OR", "NOT", "neg"]), ("unseen", "unseen wordings", ["NOT", "neg"])],
]
SAMPLES = 20000  # sign patterns drawn per test


def metric_of(column: str) -> tuple[str, str]:
    """(metric, question type) of a column."""
    return ("NegRecall@10", "NOT") if column == "neg" else ("MRR@10", column)


class Seeds(NamedTuple):
    """A variant's evaluations on one set: each seed's results.json, and the per-query seed mean."""
    results: list[dict]
    mean: Run


def load(out: Path, dataset: str, variant: str, seeds: list[int]) -> Seeds:
    """The variant's results on one set, one per seed, and their seed mean; an error names the first
    that is missing."""
    runs = []
    for seed in seeds:
        path = out / dataset / "runs" / f"{variant}-s{seed}" / "results.json"
        if not path.is_file():
            raise SystemExit(f"{path}: no such evaluation (run scripts/reproduce/generalisation.py --out {out} first)")
        runs.append(json.loads(path.read_text(encoding="utf-8")))
    return Seeds(runs, seed_mean(runs, variant, seeds))


def seed_mean(runs: list[dict], variant: str, seeds: list[int]) -> Run:
    """One row of per-query values averaged over the seeds (boolcl.evaluate.runs, as `boolcl compare`)."""
    rows, _ = aggregate_seeds([Run(f"{variant}-s{seed}", r, "", "file") for seed, r in zip(seeds, runs)])
    return rows[0]


def per_question(row: Run, metric: str, qtype: str) -> dict[str, float]:
    """Each question of the type: its value averaged over the seeds."""
    return {q: v for q, v in row.per_query[metric].items() if row.question_types[q] == qtype.lower()}


def cell(ref: Seeds, runs: Seeds, column: str, *, is_reference: bool) -> str:
    metric, qtype = metric_of(column)
    key = f"{metric}/{qtype}"
    a = [r["headline"][key] for r in ref.results]
    if is_reference:
        return f"{statistics.mean(a):.1f} ± {statistics.stdev(a):.1f}"
    b = [r["headline"][key] for r in runs.results]
    test = paired_test(per_question(ref.mean, metric, qtype), per_question(runs.mean, metric, qtype), samples=SAMPLES)
    delta = statistics.mean(b) - statistics.mean(a)
    mark = "‡" if test.p_value < 0.01 else "†" if test.p_value < 0.05 else ""
    text = f"{delta:+.1f}".replace("-", "−") + mark
    worse = delta > 0 if column == "neg" else delta < 0
    spread = max(statistics.stdev(a), statistics.stdev(b))
    return f"**{text}**" if worse and test.p_value < 0.05 and abs(delta) > spread else text


def table(out: Path, sets: list, reference: str, variants: list[str], seeds: list[int]) -> str:
    present = [(d, label, cols) for d, label, cols in sets if (out / d / "runs").is_dir()]
    if not present:
        return ""
    head = ["run"]
    for _, label, cols in present:  # the set's name on its first column
        names = ["NegR NOT ↓" if c == "neg" else c for c in cols]
        head += [f"{label} {names[0]}", *names[1:]]
    lines = ["| " + " | ".join(head) + " |", "| --- |" + " ---: |" * (len(head) - 1)]
    ref = {d: load(out, d, reference, seeds) for d, _, _ in present}
    for name in [reference, *variants]:
        runs = {d: ref[d] if name == reference else load(out, d, name, seeds) for d, _, _ in present}
        cells = [cell(ref[d], runs[d], c, is_reference=name == reference) for d, _, cols in present for c in cols]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path, help="a generalisation report's folder")
    parser.add_argument("reference", help="the recipe's variant name (not_plus)")
    parser.add_argument("variants", nargs="+", help="variants to set against it (no-retention ...)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    args = parser.parse_args(argv)
    if len(args.seeds) < 2:
        parser.error("--seeds: at least two, for the seeds' spread")
    tables = [table(args.out, sets, args.reference, args.variants, args.seeds) for sets in TABLES]
    tables = [t for t in tables if t]
    if not tables:
        raise SystemExit(f"{args.out}: none of {', '.join(d for s in TABLES for d, _, _ in s)} has runs")
    print("\n\n".join(tables))
    return 0


if __name__ == "__main__":
    sys.exit(main())
