"""NOT questions whose answers name what is excluded: does a model rank those answers down too?

    python scripts/reproduce/excluded_named.py DATA RUN [RUN ...] [--measure MRR@10]
    python scripts/reproduce/excluded_named.py boolcl/data/sample --questions boolcl/data/sample/train.jsonl
    python scripts/reproduce/excluded_named.py DATA --cosine offline-default

DATA is a folder in the project's layout (corpus.jsonl, eval.jsonl) whose passages read
"<name>: <text>" (WN-Bool-dev, FOLDOC-Bool-dev) or carry a "title". RUN is a results.json of
`boolcl evaluate` on DATA, or the folder that holds it; runs named `<variant>-s<seed>` are
averaged per question over their seeds into one row. Without runs it counts the questions of
each group (--questions: another question file over DATA's corpus, such as a training pool);
--cosine MODEL prints how close each excluded passage and its answers are under MODEL.

A NOT question goes to the first group when one of its positives names one of its excluded
passages (the name, case-insensitive, inside the positive's text): an answer that mentions the
excluded thing, such as "Object Pascal" for a language "not Pascal". A model that learnt "rank
low whatever names the excluded thing" loses its MRR there and keeps it in the second group.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path

from boolcl.data.jsonl import read_jsonl
from boolcl.errors import DataError, ModelError


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


def not_pairs(data: Path, questions: Path | None = None) -> dict[str, list[tuple[str, str, bool]]]:
    """qid -> (excluded passage, answer, whether the answer names it) for each NOT question's pairs."""
    corpus = {str(r["docid"]): r for r in read_rows(data / "corpus.jsonl")}
    questions = questions or data / "eval.jsonl"
    pairs = {}
    for q in read_rows(questions):
        if q.get("question_type") != "not" or not q.get("negative_ctxs"):
            continue
        try:
            excluded = [(str(c["passage_id"]), passage_name(corpus[str(c["passage_id"])])) for c in q["negative_ctxs"]]
            answers = [(str(c["passage_id"]), str(corpus[str(c["passage_id"])].get("doc", "")).lower())
                       for c in q["positive_ctxs"]]
        except KeyError as e:
            raise SystemExit(f"{questions}: question {q.get('qid')} names passage {e} "
                             f"that {data / 'corpus.jsonl'} does not hold") from None
        pairs[str(q["qid"])] = [(ex, pos, bool(name) and name in text) for ex, name in excluded for pos, text in answers]
    return pairs


def split_not_questions(data: Path, questions: Path | None = None) -> dict[str, bool]:
    """qid -> whether a positive of that NOT question names one of its excluded passages."""
    return {qid: any(named for _, _, named in ps) for qid, ps in not_pairs(data, questions).items()}


def cosines(data: Path, model_spec: str, questions: Path | None = None) -> dict[bool, list[float]]:
    """Cosine of each (excluded passage, answer) pair under a model, by whether the answer names it.

    Answers that name the excluded thing sit close to it; a query that pushes the one down pulls the
    other down with it, which is why those answers lose most."""
    from boolcl.retrieval.models import load_model

    corpus = {str(r["docid"]): str(r.get("doc", "")) for r in read_rows(data / "corpus.jsonl")}
    pairs = [p for ps in not_pairs(data, questions).values() for p in ps]
    ids = sorted({i for ex, pos, _ in pairs for i in (ex, pos)})
    vectors = load_model(model_spec).encode([corpus[i] for i in ids], normalize_embeddings=True,
                                            convert_to_numpy=True, show_progress_bar=len(ids) > 1000)
    index = {i: n for n, i in enumerate(ids)}
    out: dict[bool, list[float]] = {True: [], False: []}
    for ex, pos, named in pairs:
        out[named].append(float(vectors[index[ex]] @ vectors[index[pos]]))
    return out


def load_runs(paths: list[str], measure: str) -> dict[str, list[dict[str, float]]]:
    """Row name -> per-question values of each seed's results.json."""
    from boolcl.evaluate.runs import seed_row  # imported here: it brings torch, which counting needs not

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
        rows[seed_row(path.parent.name)].append(per_query)  # seeds grouped as `boolcl compare` groups them
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
    ap.add_argument("--cosine", metavar="MODEL",
                    help="print the mean cosine between each excluded passage and each answer under MODEL, "
                         "answers that name it apart from the others")
    args = ap.parse_args(argv)
    if args.cosine:
        try:
            sims = cosines(Path(args.data), args.cosine, Path(args.questions) if args.questions else None)
        except ModelError as e:
            raise SystemExit(str(e)) from None
        cells = [(f"{statistics.mean(v):.3f}" if v else "-") + f" ({len(v)} pair{'' if len(v) == 1 else 's'})"
                 for v in (sims[True], sims[False])]
        print(f"cosine(excluded passage, answer) under {args.cosine}: answers that name it {cells[0]}, "
              f"the others {cells[1]}")
        return 0
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
