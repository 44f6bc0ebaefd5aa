"""The `boolcl` command: one subcommand per stage, configured by `recipe=NAME key=value ...`."""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from rich.console import Console

EPILOG = """\
configuration: every subcommand takes the same Hydra-style overrides after its
arguments: recipe=not|and|or|all|tiny picks a recipe from recipes/recipe/, and any
key can be set, e.g. model=PATH data=sample train.batch_size=32 eval.k=10 seed=1.
Show the resolved config with `boolcl config recipe=not`."""

console = Console(stderr=True)


def _overrides(args) -> list[str]:
    bad = [o for o in args.overrides if "=" not in o]
    if bad:
        raise SystemExit(f"boolcl: expected key=value overrides, got {' '.join(bad)}")
    return list(args.overrides)


# Each command imports its stage when it runs, so `boolcl --help` starts without torch or Hydra.


def cmd_config(args) -> int:
    from boolcl.config import compose, to_yaml

    print(to_yaml(compose(_overrides(args))), end="")
    return 0


def cmd_demo(args) -> int:
    from boolcl.demo import run_demo

    run_demo(_overrides(args))
    return 0


def cmd_train(args) -> int:
    from boolcl.config import compose
    from boolcl.train.run import train

    run_dir = train(compose(_overrides(args)))
    console.print(f"[green]saved[/] {run_dir}")
    return 0


def cmd_evaluate(args) -> int:
    from boolcl.config import compose
    from boolcl.evaluate.command import run_evaluate
    from boolcl.scoring.report import print_table

    cfg = compose(_overrides(args))
    model = None if cfg.run and not args.model else (args.model or cfg.model)
    result, payload, out_dir = run_evaluate(model, cfg, cfg.out)
    from boolcl.distributed import process_state

    if not process_state().is_main_process:  # `accelerate launch boolcl ...`: rank 0 reports
        return 0
    label = Path(cfg.run).name if cfg.run else Path(model).name
    print_table({label: payload["headline"]}, cfg.eval.k,
                title=f"{payload['data']['name']}: {payload['data']['questions']} questions, "
                      f"{payload['data']['passages']} passages")
    console.print(f"results: {out_dir / 'results.json'}  run: {out_dir / 'run.trec'}")
    return 0


def cmd_compare(args) -> int:
    from boolcl.config import compose
    from boolcl.evaluate.compare import run_compare

    inputs = [a for a in args.runs if "=" not in a]
    cfg = compose([a for a in args.runs if "=" in a])
    if not inputs:
        raise SystemExit("boolcl compare: give run folders, results.json files or models to compare")
    run_compare(inputs, cfg, cfg.out, seeds=cfg.compare.seeds)  # prints the table(s) and the files written
    return 0


def cmd_generate(args) -> int:
    from boolcl.config import compose
    from boolcl.generate.pipeline import run_generate

    out = run_generate(compose(_overrides(args)))
    console.print(f"[green]examples[/] {out}")
    return 0


def cmd_decompose(args) -> int:
    from boolcl.baselines.run import run_decompose
    from boolcl.config import compose

    payload = run_decompose(compose(_overrides(args)))
    console.print(f"written: {', '.join(str(p) for p in payload['paths'].values())}")
    return 0


def cmd_explain(args) -> int:
    from boolcl.config import compose
    from boolcl.evaluate.explain import explain

    overrides = _overrides(args)
    data = next((o.split("=", 1)[1] for o in reversed(overrides) if o.startswith("data=")), None)
    explain(args.model, args.question, compose(overrides), data=data, console=Console())
    return 0


def cmd_interpolate(args) -> int:
    from boolcl.retrieval.interpolate import Shares, interpolate_folders, parse_parts

    shares = Shares(args.weight, parse_parts(args.part))
    record = interpolate_folders(args.model, args.other, shares, Path(args.out))
    mixed = ", ".join(f"module {m}: {n}" for m, n in record["interpolated"].items())
    kept = ", ".join(f"module {m}: {n}" for m, n in record["kept"].items())
    parts = "".join(f"; {n} at {shares.parts[p]:g} ({p})" for p, n in record.get("by_part", {}).items())
    console.print(f"[green]saved[/] {args.out}: {record['weight']:g} of {record['model']} and "
                  f"{1 - record['weight']:g} of {record['other']}{parts} (weights mixed: {mixed}"
                  + (f"; kept as the model has them: {kept}" if kept else "") + ")")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="boolcl", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=EPILOG)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def add(name: str, help: str, func, description: str | None = None):
        p = sub.add_parser(name, help=help, description=description or help, epilog=EPILOG,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        p.set_defaults(func=func)
        return p

    p = add("demo", "the main job offline: evaluate the packaged MiniLM on the bundled sample, train it on "
            "the sample's Boolean pool, evaluate again, print before/after", cmd_demo,
            "Runs recipe=tiny (or the recipe= given, e.g. not_plus_tiny) end to end on 2 CPU cores in a few\n"
            "minutes, no hub, GPU or API key:\n"
            "base evaluation -> contrastive training -> checkpoint evaluation -> before/after table.\n"
            "Writes checkpoints/<run>/ (a SentenceTransformer folder, config.yaml, results.json).")
    p.add_argument("overrides", nargs="*", help="key=value overrides (default recipe: tiny)")

    p = add("train", "continue training an encoder in this process (multi-GPU: accelerate launch train.py)",
            cmd_train)
    p.add_argument("overrides", nargs="*", help="recipe=NAME and key=value overrides")

    p = add("evaluate", "MRR@k and NegRecall@k per question type (ALL/AND/OR/NOT) for a model or checkpoint",
            cmd_evaluate,
            "Encodes the corpus and questions of data=... (sample, boolquestions-msmarco, boolquestions-nq,\n"
            "msmarco-dev, quest, birco-<task>, beir:PATH, nevir[:PATH], or a folder with eval.jsonl +\n"
            "corpus.jsonl), searches exactly, and writes results.json and a\n"
            "TREC run file to out=DIR (default: CHECKPOINT/eval/<data> or results/<model>-<data>).")
    p.add_argument("model", nargs="?", help="hub id, SentenceTransformer folder or checkpoint (default: model=...)")
    p.add_argument("overrides", nargs="*", help="key=value overrides")

    p = add("generate", "generate AND/OR/NOT training examples from a corpus with an LLM", cmd_generate,
            "Groups passages by topic, asks the LLM for simple and broad questions, composes AND / OR / NOT\n"
            "questions, keeps those that pass the cyclic-consistency check, mines hard negatives, and writes\n"
            "generated/<recipe>.jsonl (or out=PATH) plus <name>.report.json. llm.backend=offline needs no\n"
            "network; llm.backend=openai talks to any OpenAI-compatible endpoint (llm.base_url, llm.model,\n"
            "key from the variable named by llm.api_key_env). Answers are cached: a killed run resumes.")
    p.add_argument("overrides", nargs="*", help="key=value overrides, e.g. llm.base_url=... out=PATH")

    p = add("compare", "compare checkpoints side by side: deltas, paired significance tests, plot", cmd_compare,
            "Reads results.json of each run (a results.json file, a run folder, or a model, evaluated on\n"
            "data=... when it has none), prints MRR@10 / NegRecall@10 per type with deltas against\n"
            "compare.baseline (default: the first) and p-values of a paired test over questions\n"
            "(compare.test=randomization|bootstrap), and writes compare.json, compare.md and compare.png\n"
            "to out=DIR. compare.seeds=true averages runs that differ only by seed (mean ± std).")
    p.add_argument("runs", nargs="*", help="run folders, results.json files or models, then key=value overrides")

    p = add("decompose", "decomposed-query Boolean baseline: LLM decomposition + set operations", cmd_decompose,
            "Rewrites each question as a Boolean expression over simple questions (decompose.backend=llm\n"
            "through the llm endpoint, or offline rules), retrieves each simple question's top 2k, merges\n"
            "the lists hard (intersection/union/difference, as the paper) and soft (weighted scores,\n"
            "decompose.soft_lambda), and writes OUT/hard and OUT/soft results.json + run.trec for compare.")
    p.add_argument("overrides", nargs="*", help="key=value overrides")

    p = add("explain", "show what a model reads in one question: scope-pooling weights per token, top 10 passages",
            cmd_explain,
            "For a model with scope pooling (train.scope), prints each token of the question with the head's\n"
            "probabilities (ordinary / negation marker / excluded) and its pooling weight (p(ordinary) -\n"
            "drop*p(excluded) in the default mode); a mean-pooled model has no head to show. With data=... (sample,\n"
            "a folder, boolquestions-*) it also lists the top 10 passages, marking the excluded passage\n"
            "(negative_ctxs) and the positives when the question is one of that set's questions.\n"
            'Example: boolcl explain checkpoints/not_plus_tiny-... "Which instruments are bowed, other than the cello?" data=sample')
    p.add_argument("model", help="hub id, SentenceTransformer folder or checkpoint")
    p.add_argument("question", help="the question, quoted")
    p.add_argument("overrides", nargs="*", help="key=value overrides, e.g. data=sample eval.query_prompt=...")

    p = add("interpolate", "a model part of the way back to its start (or to another model): each weight "
            "w*MODEL + (1-w)*OTHER", cmd_interpolate,
            "Mixes two models of one architecture weight by weight (WiSE-FT) and writes a SentenceTransformer\n"
            "folder with interpolation.json. OTHER defaults to the model MODEL was trained from (its run's\n"
            "config.yaml). A scope head only MODEL has is kept as trained. Training on NOT questions moves\n"
            "the encoder off the topics of text it never saw; part of the way back gives much of that back\n"
            "(docs/not_plus.md: 'Two runs, one model'). Score it like any model: boolcl evaluate OUT data=...\n"
            "Example: boolcl interpolate checkpoints/not_plus-... --weight 0.7 --out checkpoints/not_plus-w0.7\n"
            "By part: boolcl interpolate A B --weight 0.4 --part layers:0-2=1 --part head=0.6 --out AB")
    p.add_argument("model", help="the trained model (a run folder or any SentenceTransformer folder)")
    p.add_argument("other", nargs="?", help="the model to move towards (default: the one MODEL was trained from)")
    p.add_argument("--weight", type=float, required=True, help="MODEL's share, 0..1 (1: MODEL itself)")
    p.add_argument("--part", action="append", default=[], metavar="PART=W",
                   help="a share of its own for a part: embeddings, head (the modules after the encoder), "
                        "layers:A-B or layers:A (counted from 0); repeatable, e.g. --part layers:0-2=1 --part head=0.6")
    p.add_argument("--out", required=True, help="the new model folder (must not exist)")

    p = add("config", "print the resolved config for a recipe and overrides", cmd_config)
    p.add_argument("overrides", nargs="*", help="recipe=NAME and key=value overrides")
    return parser


def main(argv: list[str] | None = None) -> int:
    from boolcl.errors import ConfigError, DataError, ModelError, TrainingError

    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    args = build_parser().parse_args(argv)
    if getattr(args, "model", None) and "=" in args.model and hasattr(args, "overrides"):  # `boolcl evaluate key=value`
        args.overrides.insert(0, args.model)
        args.model = None
    try:
        return args.func(args)
    except (ConfigError, DataError, ModelError, TrainingError) as e:
        # plain text, never wrapped: paths and line numbers must survive copy-paste and grep
        print(f"boolcl {args.command}: {type(e).__name__}: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
