"""How far the decomposition target itself keeps excluded passages out, and how close a trained
model puts NOT questions to it.

    python scripts/reproduce/target_fit.py DATA [--target ANCHOR,DROP ...] [--model RUN ...]
    python scripts/reproduce/target_fit.py DATA --questions FILE --model RUN [RUN ...]

DATA is a folder in the project's layout (corpus.jsonl, eval.jsonl). Its NOT questions that the
offline rules split into "kept but not dropped" (the ones decomposition gives a target) are
embedded by the frozen starting model (--start, the recipes' packaged MiniLM by default) as
they are, and as the target

    v = anchor · T(question) + T(kept) - drop · T(dropped)

at each --target (default 0.5,1.25, the recipe's). For each, the table gives MRR@10 of the
answers and NegRecall@10 (the share of excluded passages in the top ten) over DATA's corpus
embedded by the same frozen model: where a student that reached its target exactly would rank,
if the passages stayed where the start put them.

Each --model then gets the mean cosine between its embedding of each question and the first
target: 1 is a student that reached its targets. Models named `<variant>-s<seed>` share one row,
the mean ± standard deviation over their seeds. --questions scores another question file
instead of DATA's eval.jsonl (a training pool, to compare questions trained on with questions
never seen); the ranking table needs DATA's corpus and is left out with --no-ranking.

Cosine similarity only, as the recipes that train decomposition use it; no prompts.
"""
from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from excluded_named import read_rows  # noqa: E402  (boolcl's JSONL reader, its error as the exit message)

from boolcl.scoring.metrics import neg_recall, reciprocal_rank  # noqa: E402
from boolcl.train.decomposition import rule_parts, teacher_targets  # noqa: E402

K = 10


def split_not_questions(rows: list[dict], source: Path) -> tuple[list[dict], list[tuple[str, str]]]:
    """The NOT questions the rules split, with their (kept, dropped) parts."""
    nots = [r for r in rows if r.get("question_type") == "not"]
    chosen, parts = [], []
    for r in nots:
        split = rule_parts(str(r.get("question", "")))
        if split is not None:
            chosen.append(r)
            parts.append(split)
    if not chosen:
        raise SystemExit(f"{source}: none of its {len(nots)} NOT questions splits into kept and dropped parts "
                         "by the offline rules, so none has a decomposition target")
    return chosen, parts


def parse_target(text: str) -> tuple[float, float]:
    try:
        anchor, drop = (float(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--target {text!r}: expected ANCHOR,DROP, two numbers") from None
    return anchor, drop


def encoder(spec: str, max_length: int):
    """texts -> unit-length float32 rows, from a boolcl model spec."""
    from boolcl.retrieval.models import load_model

    model = load_model(spec, similarity="cosine", max_length=max_length)

    def embed(texts: list[str]) -> torch.Tensor:
        return torch.from_numpy(np.asarray(model.encode(list(texts), batch_size=128, normalize_embeddings=True,
                                                        convert_to_numpy=True), dtype=np.float32))
    return embed


def ranking_figures(queries: torch.Tensor, passages: torch.Tensor, ids: list[str],
                    questions: list[dict]) -> tuple[float, float]:
    """MRR@10 and NegRecall@10 (percent, mean over questions) of unit-length query rows against
    unit-length passage rows."""
    top = (torch.nn.functional.normalize(queries, dim=-1) @ passages.T).topk(min(K, len(ids)), dim=-1).indices
    mrr, negr = [], []
    for q, row in zip(questions, top.tolist()):
        ranking = [ids[j] for j in row]
        mrr.append(reciprocal_rank(ranking, {str(c["passage_id"]): 1 for c in q["positive_ctxs"]}, K))
        nr = neg_recall(ranking, [str(c["passage_id"]) for c in q.get("negative_ctxs") or []], K)
        if nr is not None:
            negr.append(nr)
    return 100 * float(np.mean(mrr)), (100 * float(np.mean(negr)) if negr else float("nan"))


def mean_cosine(a: torch.Tensor, b: torch.Tensor) -> float:
    return float(torch.nn.functional.cosine_similarity(a, b, dim=-1).mean())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("data", type=Path, help="a folder with corpus.jsonl and eval.jsonl")
    ap.add_argument("--questions", type=Path, default=None, help="score this question file instead of eval.jsonl")
    ap.add_argument("--start", default="offline-default", help="the frozen starting model (default: offline-default)")
    ap.add_argument("--target", type=parse_target, action="append", default=None, metavar="ANCHOR,DROP",
                    help="a target's anchor and drop (repeatable; default 0.5,1.25, the recipe's)")
    ap.add_argument("--model", nargs="+", default=[], help="trained models whose fit to the first target to print")
    ap.add_argument("--max-length", type=int, default=128, help="tokens per text (default 128)")
    ap.add_argument("--no-ranking", action="store_true", help="only the fit of each --model")
    args = ap.parse_args(argv)
    targets = args.target or [(0.5, 1.25)]

    source = args.questions or args.data / "eval.jsonl"
    rows = read_rows(source)
    questions, parts = split_not_questions(rows, source)
    texts = [str(q["question"]) for q in questions]
    n_not = sum(1 for r in rows if r.get("question_type") == "not")
    print(f"{source}: {len(questions)} of {n_not} NOT questions split by the rules")

    if not args.no_ranking:  # checked before any model loads
        corpus = read_rows(args.data / "corpus.jsonl")
        ids = [str(r["docid"]) for r in corpus]
        known = set(ids)
        for q in questions:
            missing = [c["passage_id"] for c in [*q["positive_ctxs"], *(q.get("negative_ctxs") or [])]
                       if str(c["passage_id"]) not in known]
            if missing:
                raise SystemExit(f"{source}: question {q.get('qid')} names passage {missing[0]} "
                                 f"that {args.data / 'corpus.jsonl'} does not hold")

    start = encoder(args.start, args.max_length)
    as_is = start(texts)
    vectors = {f"target {a:g},{d:g}": teacher_targets(start, texts, parts, drop=d, anchor=a, normalize=True)
               for a, d in targets}
    first = next(iter(vectors))

    if not args.no_ranking:
        passages = start([str(r.get("doc", "")) for r in corpus])
        print(f"\nranked by the frozen start ({args.start}) over {len(ids)} passages")
        print("| query vector | MRR@10 | NegRecall@10 ↓ |\n| --- | ---: | ---: |")
        for name, v in {"the question as it is": as_is, **vectors}.items():
            mrr, negr = ranking_figures(v, passages, ids, questions)
            print(f"| {name} | {mrr:.1f} | {negr:.1f} |")

    print(f"\nmean cos(model(question), {first}) over the {len(questions)} questions")
    print("| model (seeds) | cos |\n| --- | ---: |")
    print(f"| {args.start} (the start) | {mean_cosine(as_is, vectors[first]):.3f} |")
    for name, fits in fit_rows(args.model, lambda spec: mean_cosine(encoder(spec, args.max_length)(texts),
                                                                     vectors[first])).items():
        spread = f" ± {statistics.stdev(fits):.3f}" if len(fits) > 1 else ""
        print(f"| {name} ({len(fits)}) | {statistics.mean(fits):.3f}{spread} |")
    return 0


def fit_rows(specs: list[str], fit) -> dict[str, list[float]]:
    """Row name -> each model's fit; models named `<variant>-s<seed>` share their variant's row."""
    from boolcl.evaluate.runs import seed_row

    rows: dict[str, list[float]] = {}
    for spec in specs:
        rows.setdefault(seed_row(Path(spec).name or spec), []).append(fit(spec))
    return rows


if __name__ == "__main__":
    sys.exit(main())
