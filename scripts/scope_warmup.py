"""How well the scope head reads held-out questions after its warm-up alone, and what the warm-up costs.

    python scripts/scope_warmup.py                          # recipe=not_plus_tiny, seeds 1 2
    python scripts/scope_warmup.py train.scope.warmup_rows=1024 --seeds 1 2 3   # overrides before --seeds

Builds the model and training mix exactly as `train()` does (the same config, the same
set-up), fits the head with the warm-up `train()` runs (`loop.warm_up_scope`) once per seed, and scores it on the sample's
held-out clusters (`eval.jsonl`), against the decomposer's rules' spans:

- NOT questions: the share of tokens labelled as the rules label them, and of excluded
  tokens found;
- AND and OR questions: the share with any token marked excluded (they exclude nothing).

Time it alone: two torch processes on the same cores slow each other far more than twice.
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def held_out_quality(model, prompt: str | None) -> dict:
    import torch

    from boolcl.pooling import EXCLUDED, marks_exclusion
    from boolcl.train.scope import IGNORE, row_spans, token_labels

    rows = [json.loads(x) for x in (ROOT / "boolcl" / "data" / "sample" / "eval.jsonl").read_text().splitlines()]
    out = {}
    for kind in ("not", "and", "or"):
        questions = [r["question"] for r in rows if r["question_type"] == kind]
        f = dict(model.tokenizer([(prompt or "") + q for q in questions], padding=True, return_tensors="pt",
                                 return_offsets_mapping=True))
        labels = token_labels(row_spans(questions, [kind == "not"] * len(questions)), f.pop("offset_mapping"),
                              f["attention_mask"], len(prompt or ""))
        with torch.no_grad():
            logits = model(f)["scope_logits"]
        predicted = logits.argmax(-1)
        if kind == "not":
            known = labels != IGNORE
            out["not_token_accuracy"] = float((predicted[known] == labels[known]).float().mean())
            out["not_excluded_recall"] = float((predicted[labels == EXCLUDED] == EXCLUDED).float().mean())
        else:
            marked = marks_exclusion(logits, f["attention_mask"])
            out[f"{kind}_false_exclusions"] = float(marked.float().mean())
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", nargs="+", type=int, default=[1, 2])
    ap.add_argument("overrides", nargs="*", help="key=value on top of recipe=not_plus_tiny")
    args = ap.parse_args()

    import torch

    from boolcl.config import compose
    from boolcl.train import loop

    for seed in args.seeds:
        cfg = compose(["recipe=not_plus_tiny", "train.eval_every=0", "train.negation.pairs=0", f"seed={seed}",
                       *args.overrides])  # the warm-up leaves the minimal pairs out either way
        t = cfg.train
        torch.manual_seed(seed)  # the head's starting weights, as train() seeds them
        model, start_view = loop.build_model(cfg)  # the start, for the decomposition targets
        query_prompt, passage_prompt = loop.prompts_for(model, cfg.eval.query_prompt, cfg.eval.passage_prompt)
        data = loop.build_data(cfg, model, t.batch_size, query_prompt, passage_prompt, start_view)
        start = time.perf_counter()
        report = loop.warm_up_scope(cfg, model, data, query_prompt)
        seconds = time.perf_counter() - start
        quality = held_out_quality(model, query_prompt)
        print(json.dumps({"seed": seed, "seconds": round(seconds, 2), "steps": report["steps"], "rows": report["rows"],
                          **{k: round(v, 3) for k, v in quality.items()}}), flush=True)


if __name__ == "__main__":
    main()
