"""The `boolcl` command: one subcommand per stage, configured by `recipe=NAME key=value ...`."""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from rich.console import Console

import boolcl
from boolcl.errors import ConfigError, report_user_errors

# the subcommands that take Hydra-style overrides (recipe=NAME key=value ...); interpolate takes out=DIR only
CONFIGURED = ("demo", "train", "evaluate", "generate", "compare", "decompose", "explain", "config")

# what each subcommand must be told before it computes anything: any one of these keys, in words for the message
REQUIRED = {
    "train": (("recipe", "model"), "say what to train: recipe=NAME (`boolcl recipes` lists them) or model=..."),
    "generate": (("recipe", "generate.corpus"),
                 "say what to generate: recipe=NAME (it names the operators, the count and generated/NAME.jsonl) "
                 "or generate.corpus=..."),
    "decompose": (("recipe", "model"), "say which model retrieves: recipe=NAME or model=..."),
    "evaluate": (("recipe", "model", "run"),
                 "say what to evaluate: a MODEL (hub id, SentenceTransformer folder or checkpoint), model=..., "
                 "run=FILE (a ranking to score) or recipe=NAME (its model)"),
}

console = Console(stderr=True)


def configuration_epilog() -> str:
    """The help's closing paragraph, with the recipes that exist (read from the recipes folder)."""
    import textwrap

    from boolcl.config import available_recipes

    text = (f"configuration: {', '.join(CONFIGURED[:-1])} and {CONFIGURED[-1]} take Hydra-style overrides after "
            f"their arguments: recipe=NAME picks a recipe ({', '.join(available_recipes())}; `boolcl recipes` "
            "describes each), and any key can be set, e.g. model=PATH data=sample train.batch_size=32 eval.k=10 "
            "seed=1 out=DIR. Show the resolved config with `boolcl config recipe=not`.")
    return textwrap.fill(text, width=100, break_on_hyphens=False)


def _overrides(args) -> list[str]:
    bad = [o for o in args.overrides if "=" not in o]
    if bad:
        args.parser.error(f"expected key=value overrides, got {' '.join(bad)}")
    return list(args.overrides)


def _require(args, overrides: list[str], given: bool = False) -> None:
    """Print the subcommand's usage and exit 2 when none of the keys it needs is given."""
    from boolcl.config import overridden

    keys, message = REQUIRED[args.command]
    if not given and not overridden(overrides, *keys):
        args.parser.error(message)


# Each command composes and checks its config first and imports its stage (and torch) after,
# so `boolcl --help` and a wrong recipe, key or value answer at once.


def cmd_recipes(args) -> int:
    from boolcl.config import recipe_summaries, recipes_dir

    summaries = recipe_summaries()
    width = max(map(len, summaries))
    for name, summary in summaries.items():
        print(f"{name:<{width}}  {summary}")
    sys.stdout.flush()  # the list, then the note under it
    print(f"recipe=NAME picks one (files in {recipes_dir() / 'recipe'}); `boolcl config recipe=NAME` shows all "
          f"its settings", file=sys.stderr)
    return 0


def cmd_config(args) -> int:
    from boolcl.config import compose, to_yaml

    print(to_yaml(compose(_overrides(args))), end="")
    return 0


def cmd_demo(args) -> int:
    from boolcl.config import compose, overridden

    overrides = _overrides(args)
    compose(overrides if overridden(overrides, "recipe") else ["recipe=tiny", *overrides])  # the demo's own default
    from boolcl.demo import run_demo

    run_demo(overrides)
    return 0


def cmd_train(args) -> int:
    from boolcl.config import compose

    overrides = _overrides(args)
    _require(args, overrides)
    cfg = compose(overrides)
    from boolcl.train.command import train_config

    run_dir = train_config(cfg)
    console.print(f"[green]saved[/] {run_dir}")
    return 0


def cmd_evaluate(args) -> int:
    from boolcl.config import compose

    overrides = _overrides(args)
    _require(args, overrides, given=bool(args.model))
    cfg = compose(overrides)
    from boolcl.evaluate.command import run_evaluate
    from boolcl.scoring.report import print_table

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

    inputs = [a for a in args.runs if "=" not in a]
    if not inputs:
        args.parser.error("give the run folders, results.json files or models to compare")
    cfg = compose([a for a in args.runs if "=" in a])
    from boolcl.evaluate.compare import run_compare

    run_compare(inputs, cfg, cfg.out, seeds=cfg.compare.seeds)  # prints the table(s) and the files written
    return 0


def cmd_generate(args) -> int:
    from boolcl.config import compose

    overrides = _overrides(args)
    _require(args, overrides)
    cfg = compose(overrides)
    from boolcl.generate.pipeline import run_generate

    out = run_generate(cfg)
    console.print(f"[green]examples[/] {out}")
    return 0


def cmd_decompose(args) -> int:
    from boolcl.config import compose

    overrides = _overrides(args)
    _require(args, overrides)
    cfg = compose(overrides)
    from boolcl.baselines.run import run_decompose

    payload = run_decompose(cfg)
    console.print(f"written: {', '.join(str(p) for p in payload['paths'].values())}")
    return 0


def cmd_explain(args) -> int:
    from boolcl.config import compose

    cfg = compose(_overrides(args))
    from boolcl.evaluate.explain import explain

    explain(args.model, args.question, cfg, console=Console())
    return 0


OVERWRITE_VALUES = {"true": True, "false": False}


def interpolate_out(args) -> tuple[str, bool]:
    """interpolate's output folder, from out=DIR (--out DIR, kept for existing scripts, means the same),
    and whether overwrite=true lets it write into a folder that holds something else."""
    given = [o.split("=", 1)[1] for o in args.overrides if o.startswith("out=")]
    flags = [o.split("=", 1)[1].lower() for o in args.overrides if o.startswith("overwrite=")]
    other = [o for o in args.overrides if not o.startswith(("out=", "overwrite="))]
    if other:
        raise ConfigError(f"interpolate takes out=DIR and overwrite=true|false, not {' '.join(other)}; "
                          f"--weight and --part say how much of each model to take")
    if any(f not in OVERWRITE_VALUES for f in flags):
        raise ConfigError(f"overwrite: expected true or false, got {flags[0]!r}")
    if args.out is not None:
        given.append(args.out)
    if len(given) > 1:
        raise ConfigError(f"the new model folder is given {len(given)} times ({', '.join(given)}); give out=DIR once")
    if not given or not given[0]:
        args.parser.error("give the new model folder: out=DIR (a new or empty folder; overwrite=true for any other)")
    return given[0], bool(flags) and OVERWRITE_VALUES[flags[-1]]


def cmd_interpolate(args) -> int:
    if args.other and "=" in args.other:  # `boolcl interpolate MODEL out=DIR`: no OTHER
        args.overrides.insert(0, args.other)
        args.other = None
    _overrides(args)
    out, overwrite = interpolate_out(args)
    from boolcl.retrieval.interpolate import Shares, interpolate_folders, parse_parts

    shares = Shares(args.weight, parse_parts(args.part))
    record = interpolate_folders(args.model, args.other, shares, Path(out), overwrite=overwrite)
    mixed = ", ".join(f"module {m}: {n}" for m, n in record["interpolated"].items())
    parts = "".join(f"; {n} at {shares.parts[p]:g} ({p})" for p, n in record.get("by_part", {}).items())
    console.print(f"[green]saved[/] {out}: {record['weight']:g} of {record['model']} and "
                  f"{1 - record['weight']:g} of {record['other']}{parts} (weights mixed: {mixed})")
    return 0


def build_parser() -> argparse.ArgumentParser:
    epilog = configuration_epilog()
    parser = argparse.ArgumentParser(prog="boolcl", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=epilog)
    parser.add_argument("--version", action="version", version=f"boolcl {boolcl.__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def add(name: str, help: str, func, description: str | None = None):
        p = sub.add_parser(name, help=help, description=description or help,
                           epilog=epilog if name in CONFIGURED else None,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        p.set_defaults(func=func, parser=p)
        return p

    add("recipes", "list the recipes (recipe=NAME), one line each", cmd_recipes,
        "Lists each recipe with the opening of the comment its file starts with.\n"
        "`boolcl config recipe=NAME` prints every setting of one.")

    p = add("demo", "the main job offline: evaluate the packaged MiniLM on the bundled sample, train it on "
            "the sample's Boolean pool, evaluate again, print before/after", cmd_demo,
            "Runs recipe=tiny (or the recipe= given, e.g. not_plus_tiny) end to end on 2 CPU cores in a few\n"
            "minutes, no hub, GPU or API key:\n"
            "base evaluation -> contrastive training -> checkpoint evaluation -> before/after table.\n"
            "Writes checkpoints/<run>/ (a SentenceTransformer folder, config.yaml, results.json).")
    p.add_argument("overrides", nargs="*", help="key=value overrides (default recipe: tiny)")

    p = add("train", "continue training an encoder in this process "
            "(several GPUs: accelerate launch -m boolcl.train ...)", cmd_train,
            "Trains the recipe's model on its Boolean examples (train.boolean) mixed with original data\n"
            "(train.original) and writes a run folder (out=DIR, default checkpoints/<recipe>-<time>).\n"
            "Needs recipe=NAME or model=...; the training files must exist (`boolcl generate recipe=NAME`\n"
            "writes generated/NAME.jsonl). On 1..N GPUs: accelerate launch -m boolcl.train recipe=NAME ...")
    p.add_argument("overrides", nargs="*", help="recipe=NAME and key=value overrides")

    p = add("evaluate", "MRR@k and NegRecall@k per question type (ALL/AND/OR/NOT) for a model or checkpoint",
            cmd_evaluate,
            "Encodes the corpus and questions of data=... (sample, boolquestions-msmarco, boolquestions-nq,\n"
            "msmarco-dev, quest, birco-<task>, beir:PATH, nevir[:PATH], or a folder with eval.jsonl +\n"
            "corpus.jsonl), searches exactly, and writes results.json and a\n"
            "TREC run file to out=DIR (default: CHECKPOINT/eval/<data> or results/<model>-<data>).\n"
            "Needs a MODEL, model=..., run=FILE (a ranking to score instead of a model) or recipe=NAME (its model).\n"
            "Example: boolcl evaluate offline-default data=sample")
    p.add_argument("model", nargs="?", help="hub id, SentenceTransformer folder or checkpoint (or model=...)")
    p.add_argument("overrides", nargs="*", help="key=value overrides")

    p = add("generate", "generate AND/OR/NOT training examples from a corpus with an LLM", cmd_generate,
            "Groups passages by topic, asks the LLM for simple and broad questions, composes AND / OR / NOT\n"
            "questions, keeps those that pass the cyclic-consistency check, mines hard negatives, and writes\n"
            "generated/<recipe>.jsonl (or out=PATH) plus <name>.report.json. llm.backend=offline needs no\n"
            "network; llm.backend=openai talks to any OpenAI-compatible endpoint (llm.base_url, llm.model,\n"
            "key from the variable named by llm.api_key_env). Answers are cached: a killed run resumes.\n"
            "Needs recipe=NAME or generate.corpus=...")
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
            "decompose.soft_lambda), and writes OUT/hard and OUT/soft results.json + run.trec for compare.\n"
            "Needs recipe=NAME or model=...")
    p.add_argument("overrides", nargs="*", help="key=value overrides")

    p = add("explain", "show what a model retrieves for one question: the top 10 passages, excluded ones marked",
            cmd_explain,
            "Lists the top 10 passages of data=... (default: the bundled sample; a folder, boolquestions-*, ...)\n"
            "for the question, by the model's own similarity. When the question is one of that set's questions,\n"
            "its excluded passages (negative_ctxs) and positives are marked, and each excluded passage's rank in\n"
            "the whole corpus is printed, also when it is outside the top 10.\n"
            'Example: boolcl explain checkpoints/not_plus_tiny-... "Which instruments are bowed, other than the cello?" data=sample')
    p.add_argument("model", help="hub id, SentenceTransformer folder or checkpoint")
    p.add_argument("question", help="the question, quoted")
    p.add_argument("overrides", nargs="*", help="key=value overrides, e.g. data=sample eval.query_prompt=...")

    p = add("interpolate", "a model part of the way back to its start (or to another model): each weight "
            "w*MODEL + (1-w)*OTHER", cmd_interpolate,
            "Mixes two models of one architecture weight by weight (WiSE-FT) and writes a SentenceTransformer\n"
            "folder with interpolation.json. OTHER defaults to the model MODEL was trained from (its run's\n"
            "config.yaml); both must have the same modules. Training on NOT questions moves the encoder off\n"
            "the topics of text it never saw; part of the way back gives much of that back\n"
            "(docs/training.md: 'Part of the way back'). Score it like any model: boolcl evaluate OUT data=...\n"
            "It takes no recipe or config keys: out=DIR names the new folder, --weight and --part the mix.\n"
            "Example: boolcl interpolate checkpoints/not_plus-... --weight 0.7 out=checkpoints/not_plus-w0.7\n"
            "By part: boolcl interpolate A B --weight 0.4 --part layers:0-2=1 --part head=0.6 out=AB")
    p.add_argument("model", help="the trained model (a run folder or any SentenceTransformer folder)")
    p.add_argument("other", nargs="?", help="the model to move towards (default: the one MODEL was trained from)")
    p.add_argument("--weight", type=float, required=True, help="MODEL's share, 0..1 (1: MODEL itself)")
    p.add_argument("--part", action="append", default=[], metavar="PART=W",
                   help="a share of its own for a part: embeddings, head (the modules after the encoder), "
                        "layers:A-B or layers:A (counted from 0); repeatable, e.g. --part layers:0-2=1 --part head=0.6")
    p.add_argument("overrides", nargs="*", metavar="out=DIR",
                   help="the new model folder: new or empty, or this same mix; overwrite=true writes into any other")
    p.add_argument("--out", help=argparse.SUPPRESS)  # the same as out=DIR, for scripts written with the flag

    p = add("config", "print the resolved config for a recipe and overrides", cmd_config)
    p.add_argument("overrides", nargs="*", help="recipe=NAME and key=value overrides")
    return parser


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    parser = build_parser()
    # known args first: argparse leaves a key=value given after an option (interpolate's `--weight 0.7 out=DIR`)
    # unparsed, and it belongs with the overrides
    args, extra = parser.parse_known_args(argv)
    if extra:
        if any(e.startswith("-") for e in extra) or not hasattr(args, "overrides"):
            args.parser.error(f"unrecognized arguments: {' '.join(extra)}")
        args.overrides.extend(extra)
    if args.command == "evaluate" and args.model and "=" in args.model:  # `boolcl evaluate key=value`
        args.overrides.insert(0, args.model)
        args.model = None
    return report_user_errors(f"boolcl {args.command}", lambda: args.func(args))


if __name__ == "__main__":
    sys.exit(main())
