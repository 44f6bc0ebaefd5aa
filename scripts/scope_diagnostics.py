"""Where the scope head fires, and what that does to the data sets nobody here wrote.

    python scripts/scope_diagnostics.py results/generalisation --runs paper-not-s1 not_plus-s1

Reads the folder `scripts/generalisation.py` wrote (its results and checkpoints) and prints,
for each run named:

- unseen wordings: NOT questions' MRR@10 and NegRecall@10 per exclusion wording, and the share
  of them in which the run's scope head marks any token as excluded;
- NevIR: paired accuracy by whether the head marks an exclusion in the pair's first question,
  its second, both or neither; and how often it marks one in questions with a negation word
  (`boolcl.words.NEGATION_CUES`: not, no, never, without, ...) and without one;
- the sample: NOT questions whose first hit is not a positive, by what ranks first instead
  (the excluded passage, another passage of the question's cluster, a passage of another
  cluster) and at what score: a query that subtracts too much leaves its topic, and passages
  of unrelated clusters come first at low similarity.

A run without a scope head (`base`, the paper-style recipe) has no firing to report; its
figures per wording are still printed. Nothing is trained or encoded but the questions.
"""
from __future__ import annotations

import argparse
import json
import re
import statistics
from collections import defaultdict
from pathlib import Path

from boolcl.data.loaders import SAMPLE_DIR
from boolcl.words import NEGATION_CUES, UNSEEN_WORDINGS

FIELD = re.compile(r"\{(?:keep|keep_lc|drop)\}")


def wording_of(question: str) -> str | None:
    """The UNSEEN_WORDINGS template a question was written with: the one whose literal words all
    occur in it, in order (None if no template fits)."""
    low = question.lower()
    for template in UNSEEN_WORDINGS:
        pieces = [p.strip(" ,?").lower() for p in FIELD.split(template)]
        at, found = 0, True
        for piece in (p for p in pieces if p):
            at = low.find(piece, at)
            if at < 0:
                found = False
                break
            at += len(piece)
        if found:
            return template
    return None


def load_headed(model_dir: Path):
    """The run's model when it has a scope head (loaded once per run), else None."""
    modules = model_dir / "modules.json"
    if not modules.exists() or "ScopePooling" not in modules.read_text():
        return None
    from boolcl.retrieval.models import load_model

    return load_model(str(model_dir)).eval()


def head_fires(model, questions: list[str]) -> list[bool] | None:
    """Per question, whether the model's scope head marks any token EXCLUDED; None without a head."""
    if model is None:
        return None
    import torch

    from boolcl.pooling import marks_exclusion

    out = []
    for lo in range(0, len(questions), 256):
        f = dict(model.tokenizer(questions[lo:lo + 256], padding=True, truncation=True,
                                 max_length=model.max_seq_length, return_tensors="pt"))
        with torch.no_grad():
            logits = model(dict(f))["scope_logits"]
        out += marks_exclusion(logits, f["attention_mask"]).tolist()
    return out


def per_query(results: Path) -> dict:
    return json.loads(results.read_text())["per_query"]


def unseen_table(root: Path, run: str, model) -> list[str]:
    rows = [json.loads(x) for x in (root / "data" / "unseen" / "eval.jsonl").read_text().splitlines() if x.strip()]
    rows = [r for r in rows if r["question_type"] == "not"]
    scores = per_query(root / "unseen" / "runs" / run / "results.json")
    fires = head_fires(model, [r["question"] for r in rows])
    groups: dict = defaultdict(list)
    for i, r in enumerate(rows):
        groups[wording_of(r["question"]) or "(other)"].append(i)
    lines = [f"unseen wordings, {run}:", "| wording | questions | MRR@10 NOT | NegRecall@10 NOT | head marks an exclusion |",
             "| --- | ---: | ---: | ---: | ---: |"]
    for template, idx in sorted(groups.items()):
        mrr = 100 * sum(scores["MRR@10"][rows[i]["qid"]] for i in idx) / len(idx)
        neg = 100 * sum(scores["NegRecall@10"][rows[i]["qid"]] for i in idx) / len(idx)
        fired = "-" if fires is None else f"{100 * sum(fires[i] for i in idx) / len(idx):.0f}%"
        lines.append(f"| `{template}` | {len(idx)} | {mrr:.2f} | {neg:.2f} | {fired} |")
    return lines


def nevir_table(root: Path, run: str, model) -> list[str]:
    results = json.loads((root / "nevir" / "runs" / run / "results.json").read_text())
    source = Path(results["data"]["source"])
    if not source.is_file():  # scored from the hub, or the file moved: the questions are needed here
        return [f"NevIR, {run}: the pairs it was scored on ({source}) are not a file here"]
    pairs = json.loads(source.read_text())
    paired = results["per_query"]["PairedAcc"]
    fires = head_fires(model, [p["q1"] for p in pairs] + [p["q2"] for p in pairs])
    if fires is None:
        return [f"NevIR, {run}: no scope head; paired accuracy {100 * sum(paired.values()) / len(paired):.2f}"]
    groups: dict = defaultdict(list)
    for p, a, b in zip(pairs, fires[:len(pairs)], fires[len(pairs):]):
        groups[(a, b)].append(paired[p["id"]])
    names = {(False, False): "neither", (True, False): "q1 only", (False, True): "q2 only", (True, True): "both"}
    lines = [f"NevIR, {run}:", "| head marks an exclusion in | pairs | paired accuracy |", "| --- | ---: | ---: |"]
    for key in names:
        if groups[key]:
            lines.append(f"| {names[key]} | {len(groups[key])} | {100 * sum(groups[key]) / len(groups[key]):.2f} |")
    questions = [p["q1"] for p in pairs] + [p["q2"] for p in pairs]  # how often it fires where nothing negates
    cued = [bool(NEGATION_CUES.search(q)) for q in questions]
    lines += ["", f"NevIR questions, {run}:", "| question | questions | head marks an exclusion |", "| --- | ---: | ---: |"]
    for label, want in (("with a negation word", True), ("without one", False)):
        idx = [i for i, c in enumerate(cued) if c == want]
        if idx:
            lines.append(f"| {label} | {len(idx)} | {100 * sum(fires[i] for i in idx) / len(idx):.0f}% |")
    return lines


SAMPLE_EVAL = SAMPLE_DIR / "eval.jsonl"


def misses_table(root: Path, run: str, model=None) -> list[str]:
    trec = root / "sample" / "runs" / run / "run.trec"
    if not trec.is_file():  # results.json is written first: a run stopped between the two has no ranking
        return [f"sample, {run}: no ranking ({trec} is missing); rerun its evaluation"]
    from boolcl.scoring.report import read_trec_run

    rows = [json.loads(x) for x in SAMPLE_EVAL.read_text().splitlines() if x.strip()]
    ranked = read_trec_run(trec)  # {qid: [(passage, score), ...]}, best first
    rows = [r for r in rows if r["question_type"] == "not" and ranked.get(r["qid"])]
    groups: dict = defaultdict(list)
    for r in rows:
        positives = {c["passage_id"] for c in r["positive_ctxs"]}
        excluded = {c["passage_id"] for c in r["negative_ctxs"]}
        top, score = ranked[r["qid"]][0]
        if top in positives:
            continue
        cluster = r["qid"].split("/")[0]
        kind = ("the excluded passage" if top in excluded else
                "another passage of its cluster" if top.split("/")[0] == cluster else "a passage of another cluster")
        groups[kind].append(score)
    lines = [f"sample, {run}: of {len(rows)} NOT questions, {sum(map(len, groups.values()))} have something "
             "other than a positive first", "| first instead | questions | its score, median |", "| --- | ---: | ---: |"]
    for kind, scores in sorted(groups.items()):
        lines.append(f"| {kind} | {len(scores)} | {statistics.median(scores):.3f} |")
    return lines


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("report", type=Path, help="the folder scripts/generalisation.py wrote (--out)")
    ap.add_argument("--runs", nargs="+", required=True, help="run names, e.g. not_plus-s1 (base: the untrained model)")
    args = ap.parse_args(argv)
    for run in args.runs:
        model = load_headed(args.report / "runs" / run)
        for table, needs in ((unseen_table, "unseen"), (nevir_table, "nevir"), (misses_table, "sample")):
            if not (args.report / needs / "runs" / run / "results.json").exists():
                print(f"{needs}, {run}: no results in {args.report / needs / 'runs' / run}\n")
                continue
            print("\n".join(table(args.report, run, model)) + "\n")


if __name__ == "__main__":
    main()
