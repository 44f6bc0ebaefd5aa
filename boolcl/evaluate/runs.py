"""The runs a comparison reads: finding or producing each input's results.json, and seed groups.

An input is a results.json file, a run folder (its `results.json`, else
`eval/<data>/results.json`, the first whose data matches `data=`), or a model
(a folder without results, a hub id, `offline-default`), which is evaluated on `data=`
first (a model's earlier `results/<model>-<data>/results.json` is reused). A results.json
written by `boolcl demo` also holds its base model's results; that base becomes a row
of its own, placed before the run, once per base model.

Seeds: runs whose names differ only by a seed suffix (`not-s1`, `not-s2`, `not_seed3`),
or that record a `seed` (results' model/settings, or the run folder's config.yaml) and
differ only by the run folder's timestamp, become one row whose per-query values are
the means over the seeds.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np
from omegaconf import DictConfig, OmegaConf
from rich.console import Console

from boolcl.data.spec import parse_data_spec
from boolcl.errors import ConfigError, ModelError
from boolcl.evaluate.command import run_evaluate

SEED_SUFFIX = re.compile(r"^(?P<prefix>.+)[-_.](?:s|seed)[-_=]?(?P<seed>\d+)$")
TIMESTAMP_SUFFIX = re.compile(r"-\d{8}-\d{6}$")  # train.py's run folders: <recipe>-YYYYmmdd-HHMMSS


class CompareError(ConfigError):
    """Runs that cannot be compared (different data, missing per-query values, unknown baseline)."""


@dataclass
class Run:
    """One row of the comparison: a results.json, or several seeds' averaged."""

    name: str
    results: dict
    path: str  # the results.json read (or written) for this row; "" for an embedded base
    origin: str  # file | folder | evaluated | reused | base of <run> | seeds
    given: str = ""  # the input as typed
    seed: int | None = None
    members: list["Run"] = field(default_factory=list)  # the seed runs behind an aggregated row

    @property
    def per_query(self) -> dict:
        return self.results.get("per_query") or {}

    @property
    def question_types(self) -> dict:
        return self.results.get("question_types") or {}


# ---------------------------------------------------------------- finding results


def data_name(spec: str) -> str:
    """The name `boolcl evaluate` gives the set `spec` (its eval/<name>/ folder), without loading it."""
    return parse_data_spec(spec).name


def _read(path: Path) -> dict:
    try:
        payload = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as e:
        raise CompareError(f"{path}: cannot read results ({e})") from None
    if not isinstance(payload, dict) or "metrics" not in payload:
        raise CompareError(f"{path}: not a boolcl results.json (no 'metrics')")
    return payload


def _name_for_file(path: Path) -> str:
    path = path.resolve()
    if path.name != "results.json":
        return path.stem
    if path.parent.parent.name == "eval":  # <checkpoint>/eval/<data>/results.json
        return path.parent.parent.parent.name
    return path.parent.name


def find_results(spec: str, cfg: DictConfig) -> tuple[Path | None, str]:
    """Where the results of `spec` already are: (results.json or None, origin)."""
    want = data_name(cfg.data)
    path = Path(spec)
    if path.is_file():
        return path, "file"
    if spec.endswith(".json"):
        raise CompareError(f"{spec}: no such file")
    if path.is_dir():
        found = [p for p in (path / "results.json", path / "eval" / want / "results.json") if p.is_file()]
        for p in found:  # the first on the data asked for, else the first there is
            if (_read(p).get("data") or {}).get("name") == want:
                return p, "folder"
        return (found[0], "folder") if found else (None, "folder")
    earlier = Path("results") / f"{path.name}-{want}" / "results.json"  # run_evaluate's default for a model
    return (earlier, "reused") if earlier.is_file() else (None, "model")


def _config_seed(folder: Path) -> int | None:
    cfg_file = folder / "config.yaml"
    if not cfg_file.is_file():
        return None
    try:
        seed = OmegaConf.load(cfg_file).get("seed")
    except Exception:  # a foreign config.yaml: no seed to learn from it
        return None
    return int(seed) if isinstance(seed, int) else None


def _recorded_seed(results: dict, folder: Path | None) -> int | None:
    for section in ("model", "settings"):
        seed = (results.get(section) or {}).get("seed")
        if isinstance(seed, int):
            return seed
    spec = (results.get("model") or {}).get("spec")
    for candidate in (folder, Path(spec) if spec else None):
        if candidate is not None and candidate.is_dir():
            seed = _config_seed(candidate)
            if seed is not None:
                return seed
    return None


def load_runs(inputs: Sequence[str], cfg: DictConfig, *, console: Console | None = None,
              embedded_base: bool = True) -> list[Run]:
    """A Run per input (evaluating the ones without results), plus embedded bases; names unique."""

    console = console or Console()
    if not inputs:
        raise CompareError("nothing to compare: give run folders, results.json files or models")
    runs: list[Run] = []
    for spec in inputs:
        path, origin = find_results(spec, cfg)
        folder = Path(spec) if Path(spec).is_dir() else None
        if path is None:
            console.print(f"[bold]evaluating[/] {spec} on data={cfg.data} (no results.json found)")
            try:
                _, payload, out_dir = run_evaluate(spec, cfg, None)
            except ModelError as e:
                looked = (f"no results.json or eval/{data_name(cfg.data)}/results.json in it"
                          if folder is not None else "no results for it")
                raise CompareError(f"{spec}: {looked}, and it cannot be evaluated as a model ({e})") from None
            path, origin, results = out_dir / "results.json", "evaluated", payload
        else:
            results = _read(path)
        name = Path(spec).resolve().name if folder is not None else (
            _name_for_file(path) if origin == "file" else Path(spec).name)
        runs.append(Run(name or spec, results, str(path), origin, given=spec,
                        seed=_recorded_seed(results, folder)))
    if embedded_base:
        runs = _with_embedded_bases(runs)
    _unique_names(runs)
    return runs


def _with_embedded_bases(runs: list[Run]) -> list[Run]:
    seen = {(r.results.get("model") or {}).get("fingerprint") for r in runs} - {None}
    out: list[Run] = []
    for run in runs:
        base = run.results.get("base")
        fp = ((base or {}).get("model") or {}).get("fingerprint")
        if isinstance(base, dict) and "metrics" in base and fp not in seen:
            seen.add(fp)
            spec = (base.get("model") or {}).get("spec") or "base"
            out.append(Run(Path(str(spec)).name, base, "", f"base of {run.name}"))
        out.append(run)
    return out


def _unique_names(runs: list[Run]) -> None:
    """Two runs called alike (`a/ckpt`, `b/ckpt`) get their parent folder's name in front; then #2, #3."""
    counts: dict[str, int] = {}
    for r in runs:
        counts[r.name] = counts.get(r.name, 0) + 1
    for r in runs:
        where = r.path or r.given
        if counts[r.name] > 1 and where and Path(where).exists():
            p = Path(where).resolve()
            folder = next((a for a in [p, *p.parents] if a.name == r.name), None)
            r.name = f"{(folder.parent if folder else p.parent).name}/{r.name}"
    taken: set[str] = set()
    for r in runs:
        name, i = r.name, 2
        while name in taken:
            name, i = f"{r.name}#{i}", i + 1
        r.name = name
        taken.add(name)


# ---------------------------------------------------------------- seeds


def seed_row(name: str) -> str:
    """The row a run named `<variant>-s<seed>` shares with its other seeds (the variant); any other name is its own."""
    seeded = SEED_SUFFIX.match(name)
    return seeded.group("prefix") if seeded else name


def seed_groups(runs: Sequence[Run]) -> dict[str, list[Run]]:
    """Runs that differ only by seed, by the name they share: `{prefix: [runs]}` (2 or more each)."""
    groups: dict[str, list[Run]] = {}
    for r in runs:
        if r.members:
            continue
        m = SEED_SUFFIX.match(r.name)
        if m:
            key = m.group("prefix")
            if r.seed is None:
                r.seed = int(m.group("seed"))
        elif r.seed is not None:
            key = TIMESTAMP_SUFFIX.sub("", r.name)
        else:
            continue
        groups.setdefault(key, []).append(r)
    return {k: v for k, v in groups.items() if len(v) > 1}


def aggregate_seeds(runs: list[Run]) -> tuple[list[Run], list[str]]:
    """Replace each group of seed runs by one row (at the first member's place)."""
    groups, notes = {}, []
    for key, members in seed_groups(runs).items():
        if len({m.seed for m in members}) == len(members):
            groups[key] = members
        else:  # the same seed twice: these runs differ by something else, keep them apart
            notes.append(f"{key}: not averaged, runs share a seed ("
                         + ", ".join(f"{m.name}: {m.seed}" for m in members) + ")")
    member_of = {id(r): key for key, members in groups.items() for r in members}
    out = []
    for r in runs:
        key = member_of.get(id(r))
        if key is None:
            out.append(r)
        elif groups[key][0] is r:
            members = groups[key]
            seeds = ", ".join(str(m.seed) for m in members)
            out.append(Run(f"{key} ({len(members)} seeds)", _mean_results(members), "", "seeds",
                           given=key, members=members))
            notes.append(f"{key}: mean ± std over seeds {seeds} ({', '.join(m.name for m in members)})")
    return out, notes


def _mean_results(members: Sequence[Run]) -> dict:
    """A results-like dict whose per-query values are means over the members (queries all have)."""
    first = members[0].results
    per_query = {}
    for measure in first["per_query"]:
        maps = [m.per_query.get(measure) or {} for m in members]
        qids = set.intersection(*(set(q for q, v in mp.items() if v is not None) for mp in maps))
        per_query[measure] = {q: float(np.mean([mp[q] for mp in maps])) for q in sorted(qids)}
    return {"model": {"seeds": [m.name for m in members]}, "data": first.get("data"),
            "settings": first.get("settings"), "question_types": first["question_types"],
            "per_query": per_query, "metrics": {}}
