"""What ranks above ArguAna's counter-argument: the question's own side, the other side, or other debates.

    python scripts/arguana_sides.py results/neg/birco/runs/base results/neg/birco/runs/neg160r-s{1,2,3} \\
        results/seed1/birco/runs/not_plus-s{1,2,3} [--birco ../shared/birco (or BOOLCL_BIRCO)] [--k 10]

An ArguAna question is an argument from a debate, and its one relevant passage is the
counterpoint written to answer it, which takes the other side. A model taught that a statement
and its negation differ (train.negation) might rank that counterpoint under passages that agree
with the question; a model that forgets topics ranks passages of other debates above it. The
passage ids tell the two apart: `<split>-<category>-<debate>-<pro|con><n><a|b>`, where `a` is a
point and `b` the counterpoint to it. For each run (a `boolcl evaluate` folder with `run.trec`,
or the file), this counts, per question, the passages ranked above its counterpoint within the
top k, by kind, and the share of questions whose counterpoint is first. Runs named NAME-s<seed>
are averaged over their seeds (docs/not_plus.md, "Keeping more of the start").
"""
from __future__ import annotations

import argparse
import os
import re
from collections import Counter, defaultdict
from pathlib import Path

from boolcl.data.birco import load_birco_files
from boolcl.errors import DataError
from boolcl.evaluate.runs import SEED_SUFFIX
from boolcl.scoring.report import read_trec_run

ARGUMENT = re.compile(r"^(?:test|training|validation)-[a-z0-9-]+?-([a-z0-9]+)-(pro|con)(\d+)([ab])$")
KINDS = ("own side, point", "own side, counterpoint", "other side, point", "other side, counterpoint",
         "other debate")


def kind(question: str, passage: str) -> str:
    """Which of KINDS `passage` is to `question`, from their ids (an id of another shape: another debate)."""
    q, p = ARGUMENT.match(question), ARGUMENT.match(passage)
    if q is None or p is None or q.group(1) != p.group(1):
        return "other debate"
    side = "own side" if q.group(2) == p.group(2) else "other side"
    return f"{side}, {'point' if p.group(4) == 'a' else 'counterpoint'}"


def read_run(path: Path) -> dict[str, list[str]]:
    """ArguAna's rankings in a TREC run file (ids without the `arguana/` prefix), best first, in
    the order trec_eval and the reported nDCG@10 read them."""
    try:
        run = read_trec_run(path)
    except DataError as err:
        raise SystemExit(str(err)) from None
    return {q.removeprefix("arguana/"): [pid for pid, _ in ranked] for q, ranked in run.items()
            if q.startswith("arguana/")}


def run_name(run: Path) -> str:
    """The name a run's seeds share (NAME-s1, NAME-s2 -> NAME), as `boolcl compare` groups them."""
    name = run.name if run.is_dir() else run.parent.name
    seeded = SEED_SUFFIX.match(name)
    return seeded.group("prefix") if seeded else name


def above_counterpoint(ranked: dict[str, list[str]], qrels: dict[str, dict], k: int) -> tuple[Counter, int, int]:
    """Passages of each kind ranked above the question's relevant passage within the top k (summed
    over questions), the questions whose relevant passage is first, and the questions counted."""
    above, first = Counter(), 0
    for qid, passages in ranked.items():
        relevant = {p for p, grade in qrels[qid].items() if grade > 0}
        at = next((i for i, p in enumerate(passages) if p in relevant), len(passages))
        first += at == 0
        above.update(kind(qid, p) for p in passages[:min(at, k)])
    return above, first, len(ranked)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", type=Path, help="evaluation folders with run.trec, or run files")
    ap.add_argument("--birco", type=Path, default=os.environ.get("BOOLCL_BIRCO") or
                    Path(__file__).resolve().parents[1].parent / "shared" / "birco",
                    help="BIRCO's release folder (default: $BOOLCL_BIRCO, else ../shared/birco, as "
                         "scripts/generalisation.py)")
    ap.add_argument("--k", type=int, default=10, help="count only within the top k (default 10)")
    args = ap.parse_args(argv)
    qrels = load_birco_files(args.birco, "arguana").qrels
    groups: dict[str, list[tuple[Counter, int, int]]] = defaultdict(list)
    for run in args.runs:
        path = run / "run.trec" if run.is_dir() else run
        if not path.is_file():
            raise SystemExit(f"{run}: no run.trec there (score it with boolcl evaluate data=birco-arguana first)")
        ranked = read_run(path)
        if not ranked:
            raise SystemExit(f"{path}: no ArguAna question in this run")
        unknown = sorted(set(ranked) - set(qrels))
        if unknown:
            raise SystemExit(f"{path}: question {unknown[0]} is not in BIRCO's ArguAna test set at {args.birco}")
        groups[run_name(run)].append(above_counterpoint(ranked, qrels, args.k))
    print(f"Passages ranked above the counterpoint within the top {args.k}, per question (mean over seeds):\n")
    print("| run | seeds | " + " | ".join(KINDS) + " | counterpoint first |")
    print("| --- | ---: | " + " | ".join("---:" for _ in KINDS) + " | ---: |")
    for name, results in groups.items():
        per_question = [sum(a[kd] for a, _, n in results) / sum(n for _, _, n in results) for kd in KINDS]
        first = 100 * sum(f for _, f, _ in results) / sum(n for _, _, n in results)
        print(f"| {name} | {len(results)} | " + " | ".join(f"{v:.2f}" for v in per_question) + f" | {first:.1f}% |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
