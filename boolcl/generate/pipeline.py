"""`boolcl generate`: corpus -> groups -> atomic questions -> AND/OR/NOT -> cyclic filter -> negatives.

`run_generate(cfg)` writes the training examples (JSONL, passage text inline so
`train.boolean=<file>` works anywhere), `<file stem>.groups.jsonl` (each group's topic and
passage names, `generate.named`) and `<file stem>.report.json` beside them, prints a
summary, and returns the examples' path. Each step lives in its own module;
this one only passes the data along, in the order it flows.

Every random choice comes from `seed` and every LLM answer from the cache once it
has been received, so a killed run resumes where it stopped and an unchanged
rerun makes no request at all. Draws run concurrently but are counted in draw
order, so the output never depends on timing (see `boolcl.generate.schedule`).

A generated set costs LLM calls, so an earlier one is never replaced unnoticed: an `out=` folder
that holds anything, or an examples, groups or report file that exists, is written only when its
report says it came from the same settings, or with `overwrite=true`.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

from omegaconf import OmegaConf
from rich.console import Console

from boolcl.config import validate
from boolcl.data.jsonl import write_jsonl
from boolcl.errors import ConfigError
from boolcl.files import OVERWRITE, check_output_folder, check_writable
from boolcl.generate import cluster as grouping
from boolcl.generate.assemble import build_examples, output_path
from boolcl.generate.compose import split_counts
from boolcl.generate.corpus import load_passages
from boolcl.generate.embed import Encoder
from boolcl.generate.identity import (
    llm_backend,
    llm_info,
    read_hint,
    run_identity,
    save_walked,
    state_path,
)
from boolcl.generate.naming import groups_path, name_groups, named_groups
from boolcl.generate.negatives import hard_negatives
from boolcl.generate.report import (
    build_report,
    print_summary,
    report_path,
    write_report,
)
from boolcl.generate.schedule import run_draws
from boolcl.llm.cache import AnswerCache
from boolcl.llm.client import LLMStats

console = Console(stderr=True)


def same_run(report: Path, cfg) -> bool:
    """Whether the report `report` is of a run with this name, seed and `generate` / `llm` settings."""
    try:
        saved = json.loads(report.read_text(encoding="utf-8"))
        want = {"seed": int(cfg.seed), "generate": OmegaConf.to_container(cfg.generate, resolve=True),
                "llm": OmegaConf.to_container(cfg.llm, resolve=True)}
        return saved.get("name") == str(cfg.name) and saved.get("config") == json.loads(json.dumps(want))
    except (OSError, ValueError, AttributeError):
        return False


def check_output(cfg, out: Path) -> None:
    """Refuse, before any work, to replace what this run would not write itself: a non-empty `out=`
    folder, or (out= a file, or the default generated/) an examples file or report of other settings."""
    overwrite = bool(cfg.get("overwrite", False))
    if cfg.out is not None and out.parent == Path(str(cfg.out)):
        check_output_folder(out.parent, overwrite=overwrite, own=lambda _: same_run(report_path(out), cfg),
                            whose="this generation's (the same name and settings)")
        return
    if overwrite or same_run(report_path(out), cfg):
        return
    for path in (out, groups_path(out), report_path(out)):
        if path.exists():
            raise ConfigError(f"{path} exists and is not from a run with these settings (its report says otherwise, "
                              f"or there is none): choose another out=, or set {OVERWRITE} to replace it")


def run_generate(cfg, *, show_progress: bool = True) -> Path:
    """Generate `generate.num_examples` Boolean training examples; return the JSONL path."""
    t0 = time.perf_counter()
    validate(cfg)
    g = cfg.generate
    seed = int(cfg.seed)
    out = output_path(cfg)
    check_writable(out.parent, what="output folder (out=)")  # before any passage is read or any LLM call
    check_output(cfg, out)
    offline = cfg.llm.backend == "offline"
    cache_dir = Path(str(g.cache_dir)) if g.cache_dir else None

    # passages and their groups; the encoder only when clustering or mining needs it
    passages = load_passages(str(g.corpus), min_chars=int(g.min_passage_chars), exclude=g.exclude)
    strategy = grouping.choose_strategy(str(g.grouping), str(g.corpus), [d.title for d in passages.docs])
    encoder = None
    if strategy == "cluster" or g.hard_negatives > 0:
        encoder = Encoder(str(g.encoder or cfg.model), cache_dir, similarity=cfg.similarity,
                          show_progress=show_progress)
    groups, pool, pool_emb = grouping.make_groups(cfg, passages, strategy, encoder, seed)
    t_groups = time.perf_counter()

    # the LLM phase: draws until every operator has its examples (answers cached, run state kept)
    stats = LLMStats()
    backend, identity = llm_backend(cfg, stats)
    cache = AnswerCache(cache_dir / "llm") if cache_dir is not None and not offline else None
    targets = split_counts(int(g.num_examples), list(g.operators))
    state = None
    if cache is not None:
        state = state_path(cache_dir, run_identity(identity, cfg, targets, passages, groups))

    async def naming(llm, sched, chosen):  # each kept group's topic and passage names, same client
        if not g.named:
            return None
        kept = named_groups([o for op in targets for o in chosen[op]], groups)
        return await name_groups(cfg, llm, passages, kept, parses=sched.work.parses, show_progress=show_progress)

    sched, chosen, named = run_draws(cfg, passages, groups, targets, backend=backend, stats=stats,
                                     identity=identity, cache=cache, hint=read_hint(state),
                                     show_progress=show_progress, then=naming)
    if state is not None:
        save_walked(state, sched.walked)  # an identical rerun stops launching draws exactly here
    t_llm = time.perf_counter()

    # hard negatives, mined over the same pool of passages the groups came from
    ordered = [o for op in targets for o in chosen[op]]
    mined = hard_negatives(ordered, sched.labels, groups, passages, pool, pool_emb, encoder,
                           k=int(g.hard_negatives), depth=int(g.mine_depth))
    t_mine = time.perf_counter()

    info = llm_info(cfg, identity)
    examples = build_examples(ordered, mined, sched.labels, passages, strategy=strategy, mode=sched.work.mode,
                              llm_info=info, seed=seed, offline=offline)
    write_jsonl(out, examples)
    if named is not None:
        write_jsonl(groups_path(out), named.rows)
    else:
        groups_path(out).unlink(missing_ok=True)  # an earlier run's groups would not match these examples

    report = build_report(cfg, out=out, identity=identity, llm_info=info, passages=passages, strategy=strategy,
                          groups=groups, pool=pool, targets=targets, chosen=chosen, examples=len(examples),
                          sched=sched, stats=stats, mined=mined, encoder=encoder,
                          named=named.counts if named is not None else None,
                          times=(t0, t_groups, t_llm, t_mine))
    write_report(report, report_path(out), str(cfg.llm.api_key_env))
    print_summary(report, console)
    return out
