"""How far the decomposition target itself keeps excluded passages out, and how close a trained
model puts NOT questions to it.

    python scripts/reproduce/target_fit.py DATA [--target ANCHOR,DROP ...] [--start MODEL ...] [--whole-set] [--model RUN ...]
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

--start may name several models (a trained recipe's seeds, say): each then does its own
arithmetic over the corpus as it embeds it, and the ranking table gives the mean ± standard
deviation over them. --whole-set ranks every NOT question of DATA, those the rules do not split
as they are in every row, so that the figures compare with the evaluator's (NegRecall@10 over
all NOT questions).

Each --model then gets the mean cosine between its embedding of each question and the first
target: 1 is a student that reached its targets. Models named `<variant>-s<seed>` share one row,
the mean ± standard deviation over their seeds. --questions scores another question file
instead of DATA's eval.jsonl (a training pool, to compare questions trained on with questions
never seen); the ranking table needs DATA's corpus and is left out with --no-ranking.

Cosine similarity only, as the recipes that train decomposition use it; no prompts.
"""
from __future__ import annotations

import argparse
import functools
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


@functools.lru_cache(maxsize=None)
def encoder(spec: str, max_length: int):
    """texts -> unit-length float32 rows, from a boolcl model spec (loaded once per spec)."""
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
    ap.add_argument("--start", nargs="+", default=["offline-default"],
                    help="the model(s) whose arithmetic ranks (default: offline-default, the frozen start); "
                         "several: the ranking table's mean ± std over them")
    ap.add_argument("--whole-set", action="store_true",
                    help="rank every NOT question; those the rules do not split as they are")
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
    nots = [r for r in rows if r.get("question_type") == "not"]
    print(f"{source}: {len(questions)} of {len(nots)} NOT questions split by the rules")
    if len(args.start) > 1 and (args.model or args.no_ranking):
        raise SystemExit("--model and --no-ranking compare with one start's targets: give a single --start")
    ranked = nots if args.whole_set else questions

    if not args.no_ranking:  # checked before any model loads
        corpus = read_rows(args.data / "corpus.jsonl")
        ids = [str(r["docid"]) for r in corpus]
        known = set(ids)
        for q in ranked:
            missing = [c["passage_id"] for c in [*q["positive_ctxs"], *(q.get("negative_ctxs") or [])]
                       if str(c["passage_id"]) not in known]
            if missing:
                raise SystemExit(f"{source}: question {q.get('qid')} names passage {missing[0]} "
                                 f"that {args.data / 'corpus.jsonl'} does not hold")
        figures: dict[str, list[tuple[float, float]]] = {}
        for spec in args.start:
            embed = encoder(spec, args.max_length)
            passages = embed([str(r.get("doc", "")) for r in corpus])
            for name, v in query_vectors(embed, ranked, questions, parts, targets).items():
                figures.setdefault(name, []).append(ranking_figures(v, passages, ids, ranked))
        starts = args.start[0] if len(args.start) == 1 else f"{len(args.start)} models, mean ± std"
        scope = (f"all {len(ranked)} NOT questions (the {len(ranked) - len(questions)} the rules do not split "
                 "as they are)" if args.whole_set else f"the {len(questions)} NOT questions the rules split")
        print(f"\nranked by {starts} over {len(ids)} passages: {scope}")
        print("| query vector | MRR@10 | NegRecall@10 ↓ |\n| --- | ---: | ---: |")
        for name, pairs in figures.items():
            print(f"| {name} | {_spread([m for m, _ in pairs])} | {_spread([n for _, n in pairs])} |")
        if len(args.start) > 1:
            return 0

    start = encoder(args.start[0], args.max_length)
    as_is = start(texts)
    first = target_name(*targets[0])
    target = teacher_targets(start, texts, parts, drop=targets[0][1], anchor=targets[0][0], normalize=True)
    print(f"\nmean cos(model(question), {first}) over the {len(questions)} questions")
    print("| model (seeds) | cos |\n| --- | ---: |")
    print(f"| {args.start[0]} (the start) | {mean_cosine(as_is, target):.3f} |")
    for name, fits in fit_rows(args.model, lambda spec: mean_cosine(encoder(spec, args.max_length)(texts),
                                                                     target)).items():
        print(f"| {name} ({len(fits)}) | {_spread(fits, digits=3)} |")
    return 0


def target_name(anchor: float, drop: float) -> str:
    return f"target {anchor:g},{drop:g}"


def query_vectors(embed, ranked: list[dict], questions: list[dict], parts: list[tuple[str, str]],
                  targets: list[tuple[float, float]]) -> dict[str, torch.Tensor]:
    """Row name -> one query vector per ranked question: the question as it is, then each target;
    a ranked question the rules do not split stays as it is in every row."""
    as_is = embed([str(q["question"]) for q in ranked])
    at = {id(q): i for i, q in enumerate(ranked)}
    rows = [at[id(q)] for q in questions]
    texts = [str(q["question"]) for q in questions]
    vectors = {"the question as it is": as_is}
    for anchor, drop in targets:
        v = torch.nn.functional.normalize(as_is, dim=-1).clone()
        v[rows] = torch.nn.functional.normalize(
            teacher_targets(embed, texts, parts, drop=drop, anchor=anchor, normalize=True), dim=-1)
        vectors[target_name(anchor, drop)] = v
    return vectors


def _spread(xs: list[float], digits: int = 1) -> str:
    """The mean, and ± the standard deviation when there are several."""
    return f"{statistics.mean(xs):.{digits}f}" + (f" ± {statistics.stdev(xs):.{digits}f}" if len(xs) > 1 else "")


def fit_rows(specs: list[str], fit) -> dict[str, list[float]]:
    """Row name -> each model's fit; models named `<variant>-s<seed>` share their variant's row."""
    from boolcl.evaluate.runs import seed_row

    rows: dict[str, list[float]] = {}
    for spec in specs:
        rows.setdefault(seed_row(Path(spec).name or spec), []).append(fit(spec))
    return rows


if __name__ == "__main__":
    sys.exit(main())
