"""Generalisation report: each variant trained once per seed, then scored on every data set at hand.

    python scripts/reproduce/generalisation.py [--seeds 1 2 3] [--out results/generalisation]
        [--variants base paper-not not_plus] [--variant NAME=key=value,key=value ...] [--soup NAME=A+B@W ...]
        [--only-data sample unseen wnbool foldoc gcide nevir birco] [--wnbool PATH] [--foldoc PATH] [--gcide PATH]
        [--nevir PATH] [--birco PATH] [key=value ...]

Variants are scripts/reproduce/ablation.py's (`recipe=not_plus_tiny` with some additions switched off;
`base` is the untrained model); `--variant NAME=k=v,k=v` adds one more, its overrides on top
of the recipe (all additions on), e.g. `--variant lr3=train.lr=3e-4`; `--soup
NAME=A+B@W` adds a row that trains nothing: per seed, W of variant A's model and 1 - W of B's,
weight by weight (`boolcl interpolate`; B may be base, the starting model), and `--soup
NAME=A+B@W,PART=W,...` gives parts of the model shares of their own (`boolcl interpolate
--part`: embeddings, head, layers:A-B), e.g. `lay=not_plus+base@0.4,embeddings=1,layers:0-2=1,head=0.6`. Each
(variant, seed) is trained once into OUT/runs/<variant>-s<seed>/ and that checkpoint is
evaluated on each data set:

development sets (settings are chosen on these; MRR@10, NegRecall@10 per question type):
  sample  the bundled sample's held-out clusters
  unseen  its NOT questions reworded with exclusion words boolcl never trains on
          (scripts/reproduce/unseen_wordings.py, written once to OUT/data/unseen/)
  wnbool  WN-Bool-dev: AND/OR/NOT questions over WordNet's noun glosses
          (--wnbool, else $BOOLCL_WNBOOL, else ../shared/wnbool-dev)
  foldoc  FOLDOC-Bool-dev: AND/OR/NOT questions over the Free On-line Dictionary of Computing
          (--foldoc, else $BOOLCL_FOLDOC, else built once into OUT/data/foldoc/ by
          scripts/devsets/foldoc.py from Debian's dict-foldoc)
  gcide   GCIDE-Excl-dev: "A, but not B" questions over Webster's 1913 science entries, where one of
          the two passages names the other (--gcide, else $BOOLCL_GCIDE, else built once into
          OUT/data/gcide/ by scripts/devsets/gcide_exclusion.py from Debian's dict-gcide)
test sets (reported, never used to choose):
  nevir   NevIR's test pairs, paired accuracy (--nevir, else $BOOLCL_NEVIR, else ../shared/nevir)
  birco   BIRCO's test tasks found there, nDCG@10 per task: does plain retrieval survive?
          (--birco, else $BOOLCL_BIRCO, else ../shared/birco)

A data set whose files are absent is skipped with the reason printed. Results land in
OUT/<data>/runs/<run>/results.json; then `boolcl compare` (seeds averaged: mean ± std,
paired tests over questions) writes OUT/<data>/compare/ against the base model and
OUT/<data>/compare-vs-paper/ against the paper-style recipe, and OUT/summary.md gathers the
headline figures of every data set in one page. A finished training run (its model saved)
and a finished evaluation (its results.json) are kept and skipped on a rerun, so a killed
report resumes; a run folder trained with other settings stops the report rather than being
mixed in. Extra key=value overrides apply to every run (e.g. train.max_steps=2 for a smoke test).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ablation import RECIPE, VARIANTS, parse_variant, run_config  # noqa: E402

if TYPE_CHECKING:
    from boolcl.retrieval.interpolate import Shares

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared"
DATASETS = ("sample", "unseen", "wnbool", "foldoc", "gcide", "nevir", "birco")
DEVELOPMENT = ("sample", "unseen", "wnbool", "foldoc", "gcide")  # for choosing settings; the rest are test sets, reported only
DEFAULT_VARIANTS = ("base", "paper-not", "not_plus")
BASE, PAPER = "base", "paper-not"
RUN_FILE = "variant.json"  # in each checkpoint folder: what it was trained with


# ---------------------------------------------------------------- variants


def resolve_variants(names: list[str], extra: list[str]) -> dict[str, list[str] | None]:
    """Name -> overrides on top of the recipe (None: the untrained base), base first."""
    chosen: dict[str, list[str] | None] = {BASE: None}
    for name in names:
        if name not in VARIANTS:
            raise ValueError(f"unknown variant {name!r}; known: {', '.join(VARIANTS)} "
                             "(or add one with --variant NAME=key=value,...)")
        chosen[name] = VARIANTS[name]
    for text in extra:
        name, overrides = parse_variant(text)
        if name in chosen or name in VARIANTS:
            raise ValueError(f"--variant {name}: that name is taken by the variants of "
                             "scripts/reproduce/ablation.py; pick another")
        chosen[name] = overrides
    return chosen


def parse_soup(text: str, variants: dict) -> tuple[str, tuple[str, str, float | Shares]]:
    """NAME=A+B@W[,PART=W...] -> (NAME, (A, B, W)): per seed, W of A's model and 1 - W of B's,
    weight by weight (`boolcl interpolate`), or with parts (embeddings, head, layers:A-B) at
    shares of their own (W is then a `Shares`); A and B are variants of this report or soups
    named before this one (B may be base)."""
    from boolcl.errors import ModelError
    from boolcl.retrieval.interpolate import Shares, parse_parts

    name, sep, spec = text.partition("=")
    mix, at, shares = spec.rpartition("@")
    weight, *parts = shares.split(",")
    a, plus, b = mix.partition("+")
    if not (sep and at and plus and name and a and b):
        raise ValueError(f"--soup {text}: expected NAME=A+B@W, e.g. wise=not_plus+base@0.7")
    if name in variants or name in VARIANTS:
        raise ValueError(f"--soup {name}: that name is taken by a variant; pick another")
    for v in (a, b):
        if v not in variants:
            raise ValueError(f"--soup {text}: {v} is not a variant of this report ({', '.join(variants)})")
    if variants[a] is None:
        raise ValueError(f"--soup {text}: the first model must be a trained variant, not {a}")
    try:
        w = float(weight)
    except ValueError:
        w = float("nan")
    if not 0.0 <= w <= 1.0:
        raise ValueError(f"--soup {text}: W is A's share, between 0 and 1; got {weight}")
    if parts:
        try:
            return name, (a, b, Shares(w, parse_parts(parts)))
        except ModelError as err:
            raise ValueError(f"--soup {text}: {err}") from None
    return name, (a, b, w)


# ---------------------------------------------------------------- data sets


@dataclass
class DataSet:
    name: str  # OUT/<name>/
    spec: str | None  # the data= value; None: not here
    reason: str = ""  # why it is skipped, or what was found
    measures: list[str] = field(default_factory=list)  # compare.md's columns ([]: compare's headline)
    overrides: list[str] = field(default_factory=list)  # evaluation settings of this data set (yours still win)


# NevIR's passages are Wikipedia paragraphs (median 149 MiniLM tokens): cut at the tiny recipe's 128,
# the two documents of 15.8% of its pairs are the same text, which no model can order. At 256 none are.
NEVIR_EVAL = ["eval.max_length=256"]


def nevir_source(given: str | None) -> tuple[str | None, str]:
    from boolcl.data.nevir import file_names

    names = file_names("test")
    path = Path(given or os.environ.get("BOOLCL_NEVIR") or SHARED / "nevir")
    if path.is_file() or (path.is_dir() and any((path / f).is_file() for f in names)):
        return str(path), f"NevIR test pairs from {path}"
    return None, (f"no NevIR test split at {path} (a folder with {names[0]}, or the file; "
                  "give --nevir PATH or BOOLCL_NEVIR)")


def wnbool_source(given: str | None) -> tuple[str | None, str]:
    path = Path(given or os.environ.get("BOOLCL_WNBOOL") or SHARED / "wnbool-dev")
    if (path / "corpus.jsonl").is_file() and (path / "eval.jsonl").is_file():
        return str(path), f"WN-Bool development questions from {path}"
    return None, (f"no WN-Bool development set at {path} (corpus.jsonl and eval.jsonl; "
                  "give --wnbool PATH or BOOLCL_WNBOOL)")


# Development sets built from Debian's dictionaries by scripts/devsets/: data name -> (builder module,
# its error class, label, Debian package, environment variable)
BUILT_SETS = {
    "foldoc": ("foldoc", "FoldocError", "FOLDOC-Bool", "dict-foldoc", "BOOLCL_FOLDOC"),
    "gcide": ("gcide_exclusion", "GcideError", "GCIDE-Excl", "dict-gcide", "BOOLCL_GCIDE"),
}


def built_source(name: str, given: str | None, out: Path) -> tuple[str | None, str]:
    """A development set of scripts/devsets/: a folder given, else built once into the report's
    data/ from its Debian dictionary, else skipped, saying how to get it."""
    module, error, label, package, env = BUILT_SETS[name]
    path = given or os.environ.get(env)
    if path:
        if (Path(path) / "eval.jsonl").is_file():
            return str(path), f"{label} development questions from {path}"
        return None, f"no {label} development set at {path} (corpus.jsonl and eval.jsonl)"
    folder = out / "data" / name
    if (folder / "eval.jsonl").is_file():
        return str(folder), f"{label} development questions from {folder} (built earlier)"
    builder_dir = str(ROOT / "scripts" / "devsets")
    if builder_dir not in sys.path:
        sys.path.insert(0, builder_dir)
    import importlib

    builder = importlib.import_module(module)
    if not (builder.DEFAULT_DICT.is_file() and builder.DEFAULT_INDEX.is_file()):
        return None, (f"no {package} dictionary at {builder.DEFAULT_INDEX.parent} (apt-get install {package}), "
                      f"nor --{name} PATH / {env}")
    try:
        stats = builder.build(builder.DEFAULT_DICT, builder.DEFAULT_INDEX, folder)
    except getattr(builder, error) as e:  # a damaged dictionary: this set is skipped, the others still run
        return None, f"{label} could not be built: {e}"
    return str(folder), f"{stats['total_questions']} {label} questions built -> {folder}"


def birco_source(given: str | None) -> tuple[str | None, str]:
    from boolcl.data.birco import TASKS, available_tasks

    path = Path(given or os.environ.get("BOOLCL_BIRCO") or SHARED / "birco")
    tasks = available_tasks(path, "test") if path.is_dir() else []
    if not tasks:
        return None, (f"no BIRCO test sets at {path} (<task>/test_set.pickle with a task of {', '.join(TASKS)}; "
                      "give --birco PATH or BOOLCL_BIRCO)")
    return str(path), f"BIRCO test tasks {', '.join(tasks)} from {path}"


def unseen_set(out: Path) -> tuple[str, str]:
    """The unseen-wordings set, written once (a rerun scores the very same questions)."""
    import unseen_wordings

    folder = out / "data" / "unseen"
    if not (folder / "eval.jsonl").is_file():
        from boolcl.files import new_folder

        with new_folder(folder, overwrite=True) as partial:  # the report's own folder, never a user's
            written, skipped = unseen_wordings.build(partial)
        return str(folder), f"{written} held-out NOT questions reworded ({skipped} left out) -> {folder}"
    return str(folder), f"unseen wordings from {folder} (written earlier)"


def find_datasets(args, out: Path) -> list[DataSet]:
    found = []
    for name in args.only_data or DATASETS:
        if name == "sample":
            found.append(DataSet("sample", "sample", "the bundled sample's held-out clusters"))
        elif name == "unseen":
            found.append(DataSet("unseen", *unseen_set(out)))
        elif name == "wnbool":
            path, why = wnbool_source(args.wnbool)
            found.append(DataSet("wnbool", path, why))
        elif name in BUILT_SETS:
            path, why = built_source(name, getattr(args, name), out)
            found.append(DataSet(name, path, why))
        elif name == "nevir":
            path, why = nevir_source(args.nevir)
            found.append(DataSet("nevir", path and f"nevir:{path}", why, ["PairedAcc", "Q1Acc", "Q2Acc"], NEVIR_EVAL))
        else:
            path, why = birco_source(args.birco)
            found.append(DataSet("birco", path and f"birco:{path}", why, ["nDCG@10", "MRR@10"]))
    return found


# ---------------------------------------------------------------- training and evaluation


def run_name(variant: str, seed: int | None) -> str:
    return variant if seed is None else f"{variant}-s{seed}"


def code_version() -> str | None:
    """The checkout's commit, `+dirty` when tracked files differ from it; None outside git."""
    import subprocess

    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              timeout=30)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                               capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    if head.returncode:
        return None
    return head.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


def versions_lines(trained: list[Path], results: list[Path]) -> list[str]:
    """The summary's word on library versions: one line when every training run (its
    data_manifest.json) and every evaluation (its results.json) recorded the same, else each set
    with the runs and evaluations made with it. Figures made under other versions can differ
    with the same code and seed, so a report that mixes them says so."""
    from boolcl.versions import describe

    made: dict[str, list[str]] = {}
    for path, key in [(p / "data_manifest.json", f"runs/{p.name}") for p in trained] + \
                     [(p, f"{p.parent.parent.parent.name}/runs/{p.parent.name}") for p in results]:
        try:
            versions = json.loads(path.read_text(encoding="utf-8")).get("versions")
        except (OSError, json.JSONDecodeError):
            versions = None
        made.setdefault(describe(versions) if isinstance(versions, dict) else "not recorded", []).append(key)
    if not made:
        return []
    if len(made) == 1:
        return [f"Library versions (every trained model and every evaluation): {next(iter(made))}.", ""]
    lines = ["Library versions differ between the models and evaluations gathered here (folders under the "
             "report's):", ""]
    for described, keys in made.items():
        lines.append(f"- {described}: {', '.join(keys)}")
    return lines + [""]


def train_once(name: str, seed: int, overrides: list[str], extra: list[str], folder: Path, console) -> bool:
    """Train (variant, seed) into `folder` unless its model is already there; True when it trained."""
    record = {"recipe": RECIPE, "variant": name, "seed": seed, "overrides": overrides, "extra": extra}
    recorded = folder / RUN_FILE
    code = code_version()
    if (folder / "modules.json").is_file() and recorded.is_file():  # the final save publishes modules.json last
        earlier = json.loads(recorded.read_text(encoding="utf-8"))
        then = earlier.pop("code", None)
        if earlier != record:
            raise SystemExit(f"{folder} was trained with {earlier}, not {record}: remove it or use another --out")
        if then != code and console is not None:  # a resumed report after a commit: say so, keep the run
            console.print(f"[yellow]note[/]: {folder.name} was trained at {then}, the code is now at {code}; "
                          "remove the folder to train it again")
        return False
    from boolcl.train.run import train

    console.rule(f"train {folder.name}")
    t0 = time.perf_counter()
    folder.mkdir(parents=True, exist_ok=True)
    recorded.unlink(missing_ok=True)
    train(run_config(overrides, extra, seed, folder))
    recorded.write_text(json.dumps(record | {"code": code}, indent=2) + "\n", encoding="utf-8")
    console.print(f"{folder.name} trained: {time.perf_counter() - t0:.0f} s")
    return True


def soup_once(name: str, seed: int, a: Path, b: str, weight: float | Shares, folder: Path, console) -> bool:
    """Interpolate the seed's two models into `folder` unless it holds that mix of those very
    weights (their files' digests are recorded); True when it mixed them."""
    from boolcl.files import file_digest
    from boolcl.retrieval.interpolate import Shares, interpolate_folders
    from boolcl.retrieval.models import resolve

    weights = [Path(resolve(str(m)).path) / "model.safetensors" for m in (a, b)]
    record = {"soup": name, "seed": seed, "model": str(a), "other": b, **Shares.of(weight).as_record(),
              "digests": [file_digest(w) if w.is_file() else None for w in weights]}
    recorded = folder / RUN_FILE
    if (folder / "modules.json").is_file() and recorded.is_file():
        if json.loads(recorded.read_text(encoding="utf-8")) == record:
            return False
    console.rule(f"interpolate {folder.name}")
    interpolate_folders(str(a), b, weight, folder, overwrite=True)  # a run folder of this report's
    recorded.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    return True


def evaluate_once(model: str, cfg, folder: Path, console) -> bool:
    """Score `model` on cfg.data into folder/results.json unless it is there; True when it evaluated."""
    from boolcl.evaluate.command import run_evaluate

    done = folder / "results.json"
    if done.is_file():
        kept = json.loads(done.read_text()).get("settings", {}).get("max_seq_length")
        if kept is None or cfg.eval.max_length in (None, kept):  # None: the model's own length
            return False
        console.print(f"{folder}: scored at max length {kept}, now {cfg.eval.max_length}: scoring it again")
    console.rule(f"evaluate {folder.name} on {folder.parent.parent.name}")
    run_evaluate(model, cfg, str(folder))  # results.json is written whole (atomic), run.trec after it
    return True


# ---------------------------------------------------------------- comparison and summary


def compare(ds: DataSet, folders: list[str], baseline: str, out: Path, extra: list[str], console) -> dict:
    from boolcl.config import compose
    from boolcl.evaluate.compare import run_compare
    from boolcl.evaluate.plot import plot_compare
    from boolcl.evaluate.tables import markdown
    from boolcl.files import atomic_write_text

    cfg = compose([RECIPE, *extra, f"data={ds.spec}", f"compare.baseline={baseline}"])
    payload = run_compare(folders, cfg, str(out), seeds=True, console=console)
    measures = [m for m in ds.measures if m in payload["measures"]]
    if measures:  # the data set's own measures, not compare's MRR/NegRecall default
        atomic_write_text(Path(payload["files"]["md"]), markdown(payload, measures))
        plot_compare(payload, payload["files"]["png"], measures)
    return payload


def seed_row(variant: str, seeds: list[int], done: set[str]) -> str | None:
    """The row name compare gives (variant): the averaged row, or a single seed's own name."""
    names = [run_name(variant, s) for s in seeds if run_name(variant, s) in done]
    if not names:
        return None
    return names[0] if len(names) == 1 else f"{variant} ({len(names)} seeds)"


def summary_columns(ds: DataSet, payload: dict) -> list[tuple[str, str, str]]:
    """(measure, group, heading) of the summary's columns for one data set."""
    k = payload["k"]
    groups = payload["groups"]
    sizes = payload["group_sizes"]
    if ds.name == "nevir":
        return [(m, "ALL", h) for m, h in (("PairedAcc", "paired accuracy ↑"), ("Q1Acc", "q1 side ↑"),
                                              ("Q2Acc", "q2 side ↑")) if m in payload["measures"]]
    if ds.name == "birco":
        return [("nDCG@10", g, f"nDCG@10 {g.lower()} ↑") for g in groups if g != "ALL"
                and "nDCG@10" in payload["measures"]]
    if len(groups) == 2 and sizes[groups[0]] == sizes[groups[1]]:
        groups = groups[1:]  # one question type (the unseen set: NOT only): ALL repeats it
    return [(m, g, f"{m} {g} {'↓' if m.startswith('NegRecall') else '↑'}")
            for m in (f"MRR@{k}", f"NegRecall@{k}") if m in payload["measures"] for g in groups]


def summary_table(ds: DataSet, rows: list[tuple[str, str]], vs_base: dict, vs_paper: dict | None) -> str:
    """Markdown: per variant the mean ± std of each headline measure, † / ‡: p < alpha vs base / paper."""
    from boolcl.evaluate.tables import fmt_value

    columns = summary_columns(ds, vs_base)
    lines = ["| run | " + " | ".join(h for _, _, h in columns) + " |", "| --- |" + " ---: |" * len(columns)]
    for label, row in rows:
        cells = []
        for measure, group, _ in columns:
            cell = vs_base["cells"][row][measure][group]
            text = fmt_value(cell)
            if cell.get("significant"):
                text += "†"
            other = ((vs_paper or {}).get("cells", {}).get(row) or {}).get(measure, {}).get(group, {})
            if other.get("significant") and row != BASE:  # base vs paper-not is paper-not's † already
                text += "‡"
            cells.append(text)
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    d = vs_base["data"]
    what = f"{vs_base['questions']} {'pairs' if ds.name == 'nevir' else 'questions'}"
    return f"**{ds.name}** ({d.get('name')}, {what})\n\n" + "\n".join(lines) + "\n"


# ---------------------------------------------------------------- main


def parse_args(argv: list[str] | None = None) -> tuple[argparse.Namespace, dict[str, list[str] | None]]:
    """The options, and the variants they name (base first)."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--out", default="results/generalisation")
    ap.add_argument("--variants", nargs="*", default=list(DEFAULT_VARIANTS),
                    help=f"variants of scripts/reproduce/ablation.py to train (known: {', '.join(VARIANTS)}); "
                         "base is always in")
    ap.add_argument("--variant", action="append", default=[], metavar="NAME=key=value,...",
                    help="one more variant: overrides on top of recipe=not_plus_tiny (repeatable)")
    ap.add_argument("--soup", action="append", default=[], metavar="NAME=A+B@W[,PART=W...]",
                    help="one more row: per seed, W of variant A's model and 1-W of B's, weight by weight "
                         "(boolcl interpolate; B may be base), parts at shares of their own after the commas "
                         "(embeddings=W, head=W, layers:A-B=W); repeatable")
    ap.add_argument("--only-data", nargs="+", metavar="DATA", help=f"evaluate on these only ({', '.join(DATASETS)})")
    ap.add_argument("--nevir", help="NevIR_test.json or its folder (default $BOOLCL_NEVIR, else ../shared/nevir)")
    ap.add_argument("--wnbool", help="WN-Bool development folder (default $BOOLCL_WNBOOL, else ../shared/wnbool-dev)")
    ap.add_argument("--foldoc", help="FOLDOC-Bool development folder (default $BOOLCL_FOLDOC, else built into "
                                     "OUT/data/foldoc from Debian's dict-foldoc)")
    ap.add_argument("--gcide", help="GCIDE-Excl development folder (default $BOOLCL_GCIDE, else built into "
                                    "OUT/data/gcide from Debian's dict-gcide)")
    ap.add_argument("--birco", help="BIRCO release root (default $BOOLCL_BIRCO, else ../shared/birco)")
    ap.add_argument("overrides", nargs="*", help="key=value, applied to every run")
    args = ap.parse_args(argv)
    for key in ("variants", "only_data"):  # key=value after a list option belongs to the overrides
        values = getattr(args, key) or []
        args.overrides += [v for v in values if "=" in v]
        setattr(args, key, [v for v in values if "=" not in v] or (None if key == "only_data" else []))
    given = sys.argv[1:] if argv is None else list(argv)
    args.overrides.sort(key=lambda o: given.index(o) if o in given else len(given))  # as typed: later wins
    unknown = sorted(set(args.only_data or []) - set(DATASETS))
    if unknown:
        ap.error(f"--only-data: unknown {', '.join(unknown)}; choose from {', '.join(DATASETS)}")
    try:
        variants = resolve_variants(args.variants, args.variant)
        args.soups = {}
        for text in args.soup:  # a soup may mix an earlier one (A+B, then that with base)
            name, mix = parse_soup(text, variants | {soup: [] for soup in args.soups})
            args.soups[name] = mix
    except ValueError as e:
        ap.error(str(e))
    return args, variants


def main(argv: list[str] | None = None) -> int:
    args, variants = parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    from rich.console import Console

    import boolcl.evaluate.benchmarks as benchmarks
    from boolcl.config import compose

    benchmarks.SHOW_PROGRESS = False
    console = Console(soft_wrap=True)  # a path is printed whole, never broken across lines
    out = Path(args.out)
    started = time.perf_counter()
    datasets = find_datasets(args, out)
    for ds in datasets:
        console.print(f"[bold]{ds.name}[/]: " + (ds.reason if ds.spec else f"[yellow]skipped[/]: {ds.reason}"))
    datasets = [ds for ds in datasets if ds.spec]

    base_cfg = compose([RECIPE, *args.overrides])
    trained = [v for v in variants if variants[v] is not None]
    plan = [(BASE, None)] + [(v, s) for s in args.seeds for v in [*trained, *args.soups]]  # seed by seed
    variants |= {soup: [] for soup in args.soups}  # rows of the tables, after the trained variants
    counts = {"trained": 0, "evaluated": 0, "kept": 0}
    for variant, seed in plan:
        name = run_name(variant, seed)
        folder = out / "runs" / name
        overrides = variants[variant] or []
        if variant == BASE:
            model = str(base_cfg.model)
            eval_over = list(args.overrides)  # the embedding cache serves the base model on reruns
        elif variant in args.soups:
            a, b, weight = args.soups[variant]
            other = str(base_cfg.model) if b == BASE else str(out / "runs" / run_name(b, seed))
            if soup_once(variant, seed, out / "runs" / run_name(a, seed), other, weight, folder, console):
                for ds in datasets:
                    shutil.rmtree(out / ds.name / "runs" / name, ignore_errors=True)
            model = str(folder)
            eval_over = [*args.overrides, f"seed={seed}", "eval.cache=false"]
        else:
            if train_once(variant, seed, overrides, args.overrides, folder, console):
                counts["trained"] += 1
                for ds in datasets:  # results of an earlier model in this folder are stale now
                    shutil.rmtree(out / ds.name / "runs" / name, ignore_errors=True)
            model = str(folder)
            eval_over = [*overrides, *args.overrides, f"seed={seed}", "eval.cache=false"]
        for ds in datasets:
            t0 = time.perf_counter()
            cfg = compose([RECIPE, *ds.overrides, *eval_over, f"data={ds.spec}"])  # the data set's first: yours win
            if evaluate_once(model, cfg, out / ds.name / "runs" / name, console):
                counts["evaluated"] += 1
                console.print(f"{name} on {ds.name}: {time.perf_counter() - t0:.0f} s")
            else:
                counts["kept"] += 1

    sections, tables = {True: [], False: []}, []  # development sets, test sets
    for ds in datasets:
        runs_dir = out / ds.name / "runs"
        done = {p.name for p in runs_dir.iterdir() if (p / "results.json").is_file()} if runs_dir.is_dir() else set()
        order = [run_name(v, s) for v in variants for s in ([None] if variants[v] is None else args.seeds)]
        folders = [str(runs_dir / n) for n in order if n in done]  # base, then each variant's seeds together
        if BASE not in done or len(folders) < 2:
            console.print(f"[yellow]{ds.name}[/]: nothing to compare yet")
            continue
        console.rule(f"compare on {ds.name}")
        t0 = time.perf_counter()
        vs_base = compare(ds, folders, BASE, out / ds.name / "compare", args.overrides, console)
        tables.append(vs_base["files"]["md"])
        paper = seed_row(PAPER, args.seeds, done) if PAPER in variants else None
        vs_paper = None
        if paper is not None:
            baseline = PAPER if paper.endswith("seeds)") else paper
            vs_paper = compare(ds, folders, baseline, out / ds.name / "compare-vs-paper", args.overrides, console)
            tables.append(vs_paper["files"]["md"])
        rows = [(v, seed_row(v, args.seeds, done) if variants[v] is not None else BASE) for v in variants]
        rows = [(label, row) for label, row in rows if row in vs_base["cells"]]
        sections[ds.name in DEVELOPMENT].append(summary_table(ds, rows, vs_base, vs_paper))
        console.print(f"compared on {ds.name}: {time.perf_counter() - t0:.0f} s")

    seeds = " ".join(str(s) for s in args.seeds)
    head = [f"Generalisation report: `{RECIPE}` variants, seeds {seeds}; mean±std over seeds in percent. "
            f"† p < {base_cfg.compare.alpha:g} against the base model, ‡ against the paper-style recipe "
            "(paper-not), paired "
            "sign-flip randomization tests over questions (pairs for NevIR), not corrected for multiple "
            "comparisons. The full tables (values, deltas, p-values): "
            f"{out}/<data>/compare/compare.md and {out}/<data>/compare-vs-paper/compare.md.",
            "", "Command: `python scripts/reproduce/generalisation.py "
            + " ".join(sys.argv[1:] if argv is None else argv) + "`",
            ""]
    trained = [out / "runs" / run_name(v, s) for v in variants if variants[v] is not None for s in args.seeds]
    head += versions_lines([p for p in trained if (p / "data_manifest.json").is_file()],
                           sorted(out.glob("*/runs/*/results.json")))
    parts = ["## Development sets (settings are chosen on these)", "", *sections[True],
             "## Test sets (reported, never used to choose)", "", *sections[False]]
    summary = "\n".join(head + parts)
    (out / "summary.md").parent.mkdir(parents=True, exist_ok=True)
    from boolcl.files import atomic_write_text

    atomic_write_text(out / "summary.md", summary)
    console.print(summary, markup=False, highlight=False)
    console.print(f"tables: {'  '.join(tables)}")
    console.print(f"summary: {out / 'summary.md'}  ({counts['trained']} trained, {counts['evaluated']} evaluated, "
                  f"{counts['kept']} evaluations kept; {time.perf_counter() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
