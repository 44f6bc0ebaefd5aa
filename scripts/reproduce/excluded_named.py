"""NOT questions whose answers name what is excluded: does a model rank those answers down too?

    python scripts/reproduce/excluded_named.py DATA RUN [RUN ...] [--measure MRR@10]
    python scripts/reproduce/excluded_named.py boolcl/data/sample --questions boolcl/data/sample/train.jsonl

DATA is a folder in the project's layout (corpus.jsonl, eval.jsonl) whose passages read
"<name>: <text>" (WN-Bool-dev, FOLDOC-Bool-dev) or carry a "title". RUN is a results.json of
`boolcl evaluate` on DATA, or the folder that holds it; runs named `<variant>-s<seed>` are
averaged per question over their seeds into one row. Without runs it counts the questions of
each group (--questions: another question file over DATA's corpus, such as a training pool).

A NOT question goes to the first group when one of its positives names one of its excluded
passages (the name, case-insensitive, inside the positive's text): an answer that mentions the
excluded thing, such as "Object Pascal" for a language "not Pascal". A model that learnt "rank
low whatever names the excluded thing" loses its MRR there and keeps it in the second group.
"""
from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from collections import defaultdict
from pathlib import Path

from boolcl.data.jsonl import read_jsonl
from boolcl.errors import DataError

SEED = re.compile(r"-s\d+$")


def read_rows(path: Path) -> list[dict]:
    """boolcl's own JSONL reader (UTF-8, bounded lines, file:line errors), its error as the exit message."""
    try:
        return read_jsonl(path, dict)
    except DataError as e:
        raise SystemExit(str(e)) from None


def passage_name(row: dict) -> str:
    """The passage's own name: its title, else the text before the first colon."""
    title = row.get("title")
    return (title if title else str(row.get("doc", "")).split(":", 1)[0]).strip().lower()


def split_not_questions(data: Path, questions: Path | None = None) -> dict[str, bool]:
    """qid -> whether a positive of that NOT question names one of its excluded passages."""
    corpus = {str(r["docid"]): r for r in read_rows(data / "corpus.jsonl")}
    questions = questions or data / "eval.jsonl"
    groups = {}
    for q in read_rows(questions):
        if q.get("question_type") != "not" or not q.get("negative_ctxs"):
            continue
        try:
            names = [passage_name(corpus[str(c["passage_id"])]) for c in q["negative_ctxs"]]
            texts = [str(corpus[str(c["passage_id"])].get("doc", "")).lower() for c in q["positive_ctxs"]]
        except KeyError as e:
            raise SystemExit(f"{questions}: question {q.get('qid')} names passage {e} "
                             f"that {data / 'corpus.jsonl'} does not hold") from None
        groups[str(q["qid"])] = any(name and name in text for name in names for text in texts)
    return groups


def load_runs(paths: list[str], measure: str) -> dict[str, list[dict[str, float]]]:
    """Row name -> per-question values of each seed's results.json."""
    rows: dict[str, list[dict[str, float]]] = defaultdict(list)
    for given in paths:
        path = Path(given)
        path = path / "results.json" if path.is_dir() else path
        if not path.is_file():
            raise SystemExit(f"{given}: no results.json there")
        results = json.loads(path.read_text(encoding="utf-8"))
        per_query = results.get("per_query", {}).get(measure)
        if per_query is None:
            raise SystemExit(f"{path}: no per-question {measure}")
        rows[SEED.sub("", path.parent.name)].append(per_query)
    return rows


def table(groups: dict[str, bool], rows: dict[str, list[dict[str, float]]], measure: str) -> list[str]:
    named = [q for q, g in groups.items() if g]
    other = [q for q, g in groups.items() if not g]
    lines = [f"| run (seeds) | {measure}, answer names the excluded ({len(named)}) | {measure}, the others ({len(other)}) |",
             "| --- | ---: | ---: |"]
    for name, seeds in rows.items():
        cells = []
        for qids in (named, other):
            missing = [q for q in qids if any(q not in s or s[q] is None for s in seeds)]
            if missing:
                raise SystemExit(f"{name}: no {measure} for question {missing[0]}: was it scored on this data?")
            cells.append(f"{100 * statistics.mean(statistics.mean(s[q] for s in seeds) for q in qids):.1f}"
                         if qids else "-")
        lines.append(f"| {name} ({len(seeds)}) | {cells[0]} | {cells[1]} |")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("data", help="the data folder the runs were scored on")
    ap.add_argument("runs", nargs="*", help="results.json files or their folders")
    ap.add_argument("--measure", default="MRR@10")
    ap.add_argument("--questions", help="the question file (default: DATA/eval.jsonl)")
    args = ap.parse_args(argv)
    groups = split_not_questions(Path(args.data), Path(args.questions) if args.questions else None)
    if not groups:
        raise SystemExit(f"{args.questions or args.data}: no NOT question with an excluded passage")
    if not args.runs:
        print(f"{sum(groups.values())} of {len(groups)} NOT questions have an answer that names an excluded passage")
        return 0
    print("\n".join(table(groups, load_runs(args.runs, args.measure), args.measure)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
