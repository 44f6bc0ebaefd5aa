"""Reproduce the model list of BoolQuestions' Table 2 on BQ-MARCO and BQ-NQ (needs the hub and a GPU).

    python scripts/reproduce/table2.py [--corpus msmarco|nq|both] [--out results/table2] [key=value ...]

Each model is evaluated with `boolcl evaluate` (prompts as its model card asks: e5's
"query: "/"passage: ", bge's query instruction, the instruction the LLM embedders declare),
then `boolcl compare` puts them side by side per corpus. BQ-MARCO rows also get the
"original dataset" MRR@10 on the MS MARCO dev set. Offline it says so and stops.
Not covered: dpr-single-nq-base (separate question and passage encoders).
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

E5 = ["eval.query_prompt=query: ", "eval.passage_prompt=passage: "]
BGE = ["eval.query_prompt=Represent this sentence for searching relevant passages: "]
MODELS = {
    "msmarco": [
        ("sentence-transformers/msmarco-distilbert-cos-v5", []),
        ("sentence-transformers/msmarco-MiniLM-L12-cos-v5", []),
        ("sentence-transformers/msmarco-MiniLM-L6-cos-v5", []),
        ("intfloat/e5-base", E5),
        ("sentence-transformers/msmarco-distilbert-dot-v5", []),
        ("sentence-transformers/msmarco-bert-base-dot-v5", []),
        ("sentence-transformers/msmarco-distilbert-base-tas-b", []),
        ("intfloat/e5-large-v2", E5),
        ("BAAI/bge-large-en-v1.5", BGE),
        ("Alibaba-NLP/gte-Qwen2-7B-instruct", []),
    ],
    "nq": [
        ("sentence-transformers/nq-distilbert-base-v1", []),
        ("dunzhang/stella_en_1.5B_v5", []),
        ("BAAI/bge-large-en-v1.5", BGE),
        ("intfloat/e5-base-v2", E5),
        ("intfloat/e5-large-v2", E5),
        ("Alibaba-NLP/gte-Qwen2-7B-instruct", []),
    ],
}


def hub_reachable(timeout: float = 5.0) -> str | None:
    """None when the hub answers, else why not."""
    if os.environ.get("HF_HUB_OFFLINE", "0").lower() in {"1", "true", "yes"}:
        return "HF_HUB_OFFLINE is set"
    import urllib.request

    try:
        urllib.request.urlopen("https://huggingface.co/api/models?limit=1", timeout=timeout)
    except Exception as err:  # DNS, refused, timeout: all mean the same here
        return f"{type(err).__name__}: {err}"
    return None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", choices=["msmarco", "nq", "both"], default="both")
    ap.add_argument("--out", default="results/table2")
    ap.add_argument("overrides", nargs="*", help="key=value overrides for every evaluation (e.g. eval.batch_size=256)")
    args = ap.parse_args(argv)
    why = hub_reachable()
    if why is not None:
        print(f"table2: the Hugging Face hub is not reachable ({why}); Table 2 needs its models and the full "
              f"BoolQuestions corpora, so nothing was run.", file=sys.stderr)
        return 2
    from boolcl.config import compose
    from boolcl.evaluate.command import run_evaluate
    from boolcl.evaluate.compare import run_compare

    corpora = ["msmarco", "nq"] if args.corpus == "both" else [args.corpus]
    for corpus in corpora:
        datasets = [f"boolquestions-{corpus}"] + (["msmarco-dev"] if corpus == "msmarco" else [])
        results = []
        for model, prompts in MODELS[corpus]:
            for data in datasets:
                out = Path(args.out) / corpus / data / model.replace("/", "__")
                cfg = compose([f"model={model}", f"data={data}", *prompts, *args.overrides])
                run_evaluate(model, cfg, str(out))
                results.append(str(out / "results.json"))
        run_compare(results, compose(list(args.overrides)), str(Path(args.out) / corpus / "compare"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
