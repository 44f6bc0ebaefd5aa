"""Which questions of one type a trained model answers worse than its base model, and what it ranks first instead.

    python scripts/reproduce/lost_answers.py DATA BASE RUN [RUN ...] [--type or] [--measure MRR@10] [--top 10]

DATA is a folder in the project's layout (corpus.jsonl, eval.jsonl); BASE and each RUN are
folders of `boolcl evaluate` on DATA (results.json and run.trec). The RUNs are averaged per
question (seeds of one recipe). The script counts the questions of the type that lose and gain,
then lists the `--top` that lose most, with the passage the base model ranks first and the one
the first RUN ranks first, each marked + (an answer) or - (not). A loss whose new first passage
is about a thing related to the answer's (a "chorister" for "choirmaster") is plain retrieval
drifting; one whose new first passage is an excluded one is an operator misread.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from excluded_named import read_rows  # noqa: E402  (boolcl's JSONL reader, its error as the exit message)

from boolcl.errors import DataError  # noqa: E402
from boolcl.scoring.report import read_trec_run  # noqa: E402


def per_question(folder: Path, measure: str) -> dict[str, float]:
    path = folder / "results.json"
    if not path.is_file():
        raise SystemExit(f"{folder}: no results.json there")
    values = json.loads(path.read_text(encoding="utf-8")).get("per_query", {}).get(measure)
    if values is None:
        raise SystemExit(f"{path}: no per-question {measure}")
    return values


def first_passages(folder: Path, qids: set[str]) -> dict[str, str]:
    """qid -> the passage ranked first in the folder's run.trec, read by boolcl's own TREC reader."""
    path = folder / "run.trec"
    if not path.is_file():
        raise SystemExit(f"{folder}: no run.trec there (boolcl evaluate writes one beside results.json)")
    try:
        run = read_trec_run(path)
    except DataError as e:
        raise SystemExit(str(e)) from None
    return {q: ranked[0][0] for q, ranked in run.items() if q in qids and ranked}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("data", help="the data folder the runs were scored on")
    ap.add_argument("base", help="the base model's evaluation folder")
    ap.add_argument("runs", nargs="+", help="the trained model's evaluation folders (its seeds)")
    ap.add_argument("--type", default="or", help="question type (and, or, not, ...)")
    ap.add_argument("--measure", default="MRR@10")
    ap.add_argument("--top", type=int, default=10, help="how many of the questions that lose most to list")
    args = ap.parse_args(argv)
    data = Path(args.data)
    corpus = {str(r["docid"]): str(r.get("doc", "")) for r in read_rows(data / "corpus.jsonl")}
    questions = {str(q["qid"]): q for q in read_rows(data / "eval.jsonl") if q.get("question_type") == args.type}
    if not questions:
        raise SystemExit(f"{data / 'eval.jsonl'}: no question of type {args.type!r}")
    base = per_question(Path(args.base), args.measure)
    seeds = [per_question(Path(r), args.measure) for r in args.runs]
    deltas = {}
    for qid in questions:
        if base.get(qid) is None or any(s.get(qid) is None for s in seeds):
            raise SystemExit(f"no {args.measure} for question {qid} in {args.base} or a run: were they scored on {data}?")
        deltas[qid] = statistics.mean(s[qid] for s in seeds) - base[qid]
    lose = sorted((q for q in deltas if deltas[q] < 0), key=lambda q: (deltas[q], q))
    gain = [q for q in deltas if deltas[q] > 0]
    was_first = [q for q in lose if base[q] == 1.0]
    mean = f" (mean {100 * statistics.mean(deltas[q] for q in lose):+.1f} points)" if lose else ""
    print(f"{len(questions)} {args.type.upper()} questions: {len(lose)} lose {args.measure}{mean}, {len(gain)} gain; "
          f"the base model ranks an answer first in {len(was_first)} of those that lose")
    listed = lose[:args.top]
    base_first = first_passages(Path(args.base), set(listed))
    run_first = first_passages(Path(args.runs[0]), set(listed))

    def show(qid: str, pid: str | None) -> str:
        if pid is None:
            return "-"
        answers = {str(c["passage_id"]) for c in questions[qid].get("positive_ctxs", [])}
        text = corpus.get(pid, "?").replace("|", "/")
        return f"{'+' if pid in answers else '-'} {text[:60]}"

    print(f"| question | base | run | base model's first | {Path(args.runs[0]).name}'s first |")
    print("| --- | ---: | ---: | --- | --- |")
    for q in listed:
        print(f"| {questions[q]['question'].replace('|', '/')} | {100 * base[q]:.0f} | "
              f"{100 * (base[q] + deltas[q]):.0f} | {show(q, base_first.get(q))} | {show(q, run_first.get(q))} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
