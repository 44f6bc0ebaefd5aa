"""Two runs, one model (`train.negation.soup`): negated statements without forgetting.

Minimal pairs ("the bridge opened" / "the bridge did not open") teach the encoder to bind a
negation to what it negates (NevIR), and a run trained on them also forgets some plain retrieval
(ArguAna) and AND questions. The recipe trained twice from the same start and seed, once with
the pairs and once without, and mixed weight by weight keeps most of both; mixing a tenth of the
start back into the upper layers returns what plain retrieval lost there. No single run found
so far does as well (docs/method.md, "Negated statements: two runs, one model").

    <out>/branches/plain/   the recipe without the pairs: an ordinary run folder
    <out>/branches/pairs/   the recipe with them and `soup.pairs_run`'s overrides
    <out>/                  W·pairs + (1 − W)·plain, then the `soup.start` parts mixed with the
                            start (`boolcl interpolate`'s arithmetic); soup.json says what was mixed

Each branch is an ordinary run, so it resumes on its own (`train.resume=true out=<the soup>`),
and a finished branch with the same settings is kept when the soup runs again: a killed soup
loses at most what one branch did since its last checkpoint. An `out=` that holds anything else
than this soup's own runs is refused before either starts, unless `overwrite=true`.
"""
from __future__ import annotations

import json
from pathlib import Path

from accelerate import PartialState
from omegaconf import DictConfig, OmegaConf

from boolcl.config import check_overrides, resume_flag, to_yaml, validate
from boolcl.distributed import cpu_only_distributed
from boolcl.errors import ConfigError, ModelError
from boolcl.files import atomic_write_text, check_output_folder, make_temp_folder
from boolcl.retrieval.card import write_train_card
from boolcl.retrieval.interpolate import Shares, interpolate_model, interpolate_state, parse_parts
from boolcl.train import checkpoint, loop

BRANCHES = ("plain", "pairs")
RECORD = "soup.json"
NOT_IN_PAIRS_RUN = ("out", "seed", "model", "train.resume", "train.negation.soup", "train.negation.pairs")


def start_shares(cfg: DictConfig) -> Shares:
    """`soup.start` as the mix's share against the start, part by part (1 elsewhere), checked
    against the start's own weights: a part that holds none fails now, not after two runs."""
    try:
        shares = Shares(1.0, parse_parts(list(cfg.train.negation.soup.start)))
        if shares.parts:  # a dry mix of the start with itself: the check interpolation itself makes
            from boolcl.retrieval.models import load_model

            state = load_model(str(cfg.model)).state_dict()
            interpolate_state(state, state, shares, names=(str(cfg.model), str(cfg.model)))
    except ModelError as err:
        raise ConfigError(f"train.negation.soup.start: {err}") from None
    return shares


def branch_overrides(cfg: DictConfig) -> dict[str, list[str]]:
    """What each run changes in the recipe: no pairs in one, `pairs_run` in the other, no soup in
    either (benchmarks/bench_not_aware.py times the two runs from these)."""
    pairs_run = [str(x) for x in cfg.train.negation.soup.pairs_run]
    for item in pairs_run:
        key = item.partition("=")[0].lstrip("+~")
        if "=" not in item or any(key == k or key.startswith(k + ".") for k in NOT_IN_PAIRS_RUN):
            raise ConfigError(f"train.negation.soup.pairs_run: {item!r} must be key=value and may not set "
                              f"{', '.join(NOT_IN_PAIRS_RUN)} (the soup sets those for both runs)")
    try:
        check_overrides(pairs_run)
    except ConfigError as err:
        raise ConfigError(f"train.negation.soup.pairs_run: {err}") from None
    own = {"plain": ["train.negation.pairs=0", "train.negation.spread=false"], "pairs": pairs_run}
    return {name: ["train.negation.soup.weight=0", *own[name]] for name in BRANCHES}


def branch_configs(cfg: DictConfig, run_dir: Path) -> dict[str, DictConfig]:
    """The two runs' configs: the recipe without the pairs, and with them plus `pairs_run`."""
    out = {}
    for name, changes in branch_overrides(cfg).items():
        changes = [f"out={run_dir / 'branches' / name}", *changes]
        branch = OmegaConf.merge(cfg, OmegaConf.from_dotlist(changes))
        validate(branch)
        out[name] = branch
    return out


def own_folder(run_dir: Path, cfg: DictConfig, branches: dict[str, DictConfig]) -> bool:
    """Whether `run_dir` is this soup's: its mix with these settings (config.yaml), or, before the
    mix, nothing but branches/ whose runs are this soup's (each empty or `checkpoint.own_run`)."""
    if checkpoint.own_run(run_dir, cfg):
        return True
    if {p.name for p in run_dir.iterdir() if not p.name.startswith(".")} != {"branches"}:
        return False
    def own_branch(p: Path) -> bool:
        return p.name in branches and p.is_dir() and (not any(p.iterdir()) or checkpoint.own_run(p, branches[p.name]))

    return all(own_branch(p) for p in (run_dir / "branches").iterdir())


def finished(name: str, cfg: DictConfig) -> bool:
    """A branch whose model is saved: kept if it ran with these settings, refused otherwise (trained
    again over it with `overwrite=true`)."""
    folder = Path(cfg.out)
    if not (folder / checkpoint.MODULES_FILE).is_file():
        return False
    if not checkpoint.same_settings(folder / "config.yaml", cfg):
        if cfg.get("overwrite", False):
            return False
        raise ConfigError(f"{folder} holds a finished run with other settings than this soup's {name} run; "
                          "give the soup another out=, or set overwrite=true to train it again there")
    return True


def mix(cfg: DictConfig, run_dir: Path, branches: dict[str, DictConfig], shares: Shares, processes: int) -> dict:
    """The soup's model into the run folder, staged and published like a run's final model."""
    from boolcl.retrieval.models import fingerprint, load_model

    w = float(cfg.train.negation.soup.weight)
    folders = {name: Path(b.out) for name, b in branches.items()}
    model, plain, start = load_model(str(folders["pairs"])), load_model(str(folders["plain"])), load_model(str(cfg.model))
    record = {"weight": w, "start": list(cfg.train.negation.soup.start),
              "pairs_run": list(cfg.train.negation.soup.pairs_run),
              "branches": {name: str(f) for name, f in folders.items()}, "model": str(cfg.model),
              "fingerprints": {"pairs": fingerprint(model), "plain": fingerprint(plain), "start": fingerprint(start)}}
    record["pairs_and_plain"] = interpolate_model(model, plain.state_dict(), w, names=(str(folders["pairs"]),
                                                                                      str(folders["plain"])))
    record["with_the_start"] = interpolate_model(model, start.state_dict(), shares,
                                                 names=("the mix", str(cfg.model)))
    record["fingerprints"]["result"] = fingerprint(model)

    manifest = json.loads((folders["pairs"] / "data_manifest.json").read_text())
    staged = run_dir / checkpoint.FINAL_TMP
    with checkpoint.removed_if_disk_full(staged, None, f"saving the soup into {run_dir}",
                                         "both runs are kept in branches/, and the same command mixes them again"):
        make_temp_folder(staged)
        atomic_write_text(run_dir / "config.yaml", to_yaml(cfg))
        atomic_write_text(run_dir / "data_manifest.json", json.dumps(manifest | {"soup": record}, indent=2) + "\n")
        model.save(str(staged), create_model_card=False)
        atomic_write_text(staged / RECORD, json.dumps(record, indent=2) + "\n")
        write_train_card(model, staged, run_dir, precision=loop.mixed_precision(cfg.train.mixed_precision),
                         processes=processes)
        checkpoint.publish(staged, run_dir)
    return record


def train_soup(cfg: DictConfig) -> Path:
    state = PartialState(cpu=cpu_only_distributed())
    run_dir = loop.agree_on_run_dir(state, cfg)
    branches = branch_configs(cfg, run_dir)  # every setting is checked before the first run starts
    if cfg.out:  # a folder named by the user; without out= it is a new one, named by the time
        for name, branch in branches.items():
            finished(name, branch)  # a finished run of other settings is named first
        check_output_folder(run_dir, overwrite=bool(cfg.get("overwrite", False)), what="run folder (out=)",
                            own=lambda d: own_folder(d, cfg, branches), whose="this soup's")
    state.wait_for_everyone()  # every process has looked before any writes
    shares = start_shares(cfg)
    for name, branch in branches.items():
        if finished(name, branch):
            if state.is_main_process:
                print(f"soup: the {name} run in {branch.out} is finished with these settings; kept", flush=True)
            continue
        resume = resume_flag(cfg.train.resume) is True and bool(checkpoint.checkpoints(Path(branch.out)))
        if state.is_main_process:
            print(f"soup: the {name} run -> {branch.out}" + (" (resuming)" if resume else ""), flush=True)
        loop.train(OmegaConf.merge(branch, OmegaConf.from_dotlist([f"train.resume={str(resume).lower()}"])))
    if state.is_main_process:
        record = mix(cfg, run_dir, branches, shares, state.num_processes)
        print(f"soup: {record['weight']:g} of the pairs' run and {1 - record['weight']:g} of the plain one, "
              f"then {shares.describe()} against the start -> {run_dir}", flush=True)
    state.wait_for_everyone()
    return run_dir

