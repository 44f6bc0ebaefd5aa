"""`boolcl compare`: several runs side by side, deltas against a baseline, paired tests, a plot.

    inputs ──find or evaluate──▶ results.json each ──same data?──▶ [seeds: mean ± std]
           ──per query, per type: values, deltas, paired p-values──▶ table, compare.{json,md,png}

An input is a results.json file, a run folder (its `results.json`, else
`eval/<data>/results.json`, the first whose data matches `data=`), or a model
(a folder without results, a hub id, `offline-default`), which is evaluated on `data=`
first (a model's earlier `results/<model>-<data>/results.json` is reused). A results.json
written by `boolcl demo` also holds its base model's results; that base becomes a row
of its own, placed before the run, once per base model.

Values come from the per-query figures of results.json, on the questions every run
has (normally all; see `check_same_data`), so a row equals `boolcl evaluate`'s table.
Deltas are run − baseline in percentage points (for NegRecall, lower is better) and
each p-value is a two-sided paired test over the questions of that type
(`significance.py`); p-values are not corrected for multiple comparisons.

Seeds (`seeds=True`): runs whose names differ only by a seed suffix (`not-s1`, `not-s2`,
`not_seed3`), or that record a `seed` (results' model/settings, or the run folder's
config.yaml) and differ only by the run folder's timestamp, become one row: mean ± std
(sample std) over the seeds, the p-value computed on per-query means over the seeds.
"""
from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np
from omegaconf import DictConfig, OmegaConf
from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from boolcl.config import validate
from boolcl.data.spec import parse_data_spec
from boolcl.errors import ConfigError, ModelError
from boolcl.evaluate.command import run_evaluate
from boolcl.evaluate.measures import (
    group_order,
    headline_measures,
    lower_is_better,
    measure_order,
)
from boolcl.evaluate.plot import plot_compare
from boolcl.evaluate.significance import paired_test
from boolcl.files import atomic_write_text

SEED_SUFFIX = re.compile(r"^(?P<prefix>.+)[-_.](?:s|seed)[-_=]?(?P<seed>\d+)$")
TIMESTAMP_SUFFIX = re.compile(r"-\d{8}-\d{6}$")  # train.py's run folders: <recipe>-YYYYmmdd-HHMMSS
MIN_OVERLAP = 0.5  # fewer questions in common than this share of the largest set: different data


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


# ---------------------------------------------------------------- checks


def check_same_data(runs: Sequence[Run]) -> tuple[list[str], list[str]]:
    """The questions every run has, and notes; CompareError when the runs are not comparable.

    Refused: different data names, k, corpus sizes, a question typed differently, runs
    without per-query values, or fewer than half the questions in common (different
    question sets under one name). When the sets differ by a few questions, the
    comparison is on the common ones and a note says so.
    """
    def listing(get) -> str:
        return "; ".join(f"{r.name}: {get(r)}" for r in runs)

    names = {(r.results.get("data") or {}).get("name") for r in runs}
    if len(names) > 1:
        raise CompareError("the runs were evaluated on different data (" + listing(
            lambda r: (r.results.get("data") or {}).get("name")) + "); evaluate them all on one set, "
            "e.g. `boolcl compare RUNS... data=NAME` evaluates the ones without results on NAME")
    ks = {(r.results.get("settings") or {}).get("k") for r in runs}
    if len(ks) > 1:
        raise CompareError("the runs were evaluated with different eval.k (" + listing(
            lambda r: (r.results.get("settings") or {}).get("k")) + ")")
    passages = {(r.results.get("data") or {}).get("passages") for r in runs} - {None}
    if len(passages) > 1:
        raise CompareError("the runs searched corpora of different sizes (" + listing(
            lambda r: (r.results.get("data") or {}).get("passages")) + " passages); "
            "use the same data= and eval.max_corpus= for all")
    for r in runs:
        if not r.per_query or not r.question_types:
            raise CompareError(f"{r.name} ({r.path or r.origin}): results.json has no per-query values "
                               "to test; evaluate it again with `boolcl evaluate`")
    sets = [set(r.question_types) for r in runs]
    common = set.intersection(*sets)
    largest = max(len(s) for s in sets)
    if len(common) < MIN_OVERLAP * largest:
        raise CompareError(f"the runs have different question sets ({len(common)} of up to {largest} "
                           "questions in common: " + listing(lambda r: f"{len(r.question_types)} questions")
                           + "); are they on the same data?")
    ref = runs[0]
    for r in runs[1:]:
        for q in common:
            if str(r.question_types[q]).upper() != str(ref.question_types[q]).upper():
                raise CompareError(f"question {q!r} is {ref.question_types[q]!r} in {ref.name} but "
                                   f"{r.question_types[q]!r} in {r.name}: not the same data")
    notes = []
    if any(len(s) != len(common) for s in sets):
        notes.append(f"compared on the {len(common)} questions all runs have (" +
                     listing(lambda r: f"{len(r.question_types)}") + ")")
    return sorted(common), notes


# ---------------------------------------------------------------- seeds


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


# ---------------------------------------------------------------- the comparison


def _cell_values(run: Run, measure: str, qids: Sequence[str]) -> list[float]:
    values = run.per_query.get(measure) or {}
    return [values[q] for q in qids if values.get(q) is not None]


def pick_baseline(runs: Sequence[Run], wanted: str | None) -> Run:
    """The run named `wanted` (its name, a seed member's name, or a path it was read from); else the first."""
    if not wanted:
        return runs[0]
    target = Path(wanted).resolve() if Path(wanted).exists() else None
    for r in runs:
        rows = [r, *r.members]
        if wanted in {x for row in rows for x in (row.name, row.given)}:
            return r
        paths = {Path(p).resolve() for row in rows for p in (row.path, row.given) if p and Path(p).exists()}
        paths |= {f.parent for f in list(paths) if f.name == "results.json"}
        paths |= {f.parent.parent for f in list(paths) if f.parent.name == "eval"}  # <run>/eval/<data>/
        if target is not None and target in paths:
            return r
    raise CompareError(f"baseline {wanted!r} is none of the runs: {', '.join(r.name for r in runs)} "
                       "(give a run's name or path)")


def compare_runs(runs: Sequence[Run], baseline: Run, qids: Sequence[str], *, test: str = "randomization",
                 samples: int = 10000, seed: int = 0, alpha: float = 0.05) -> dict:
    """Per run, measure and group: value (percent), std over seeds, n, delta vs baseline, p-value."""
    k = int((baseline.results.get("settings") or {}).get("k") or 10)
    types = baseline.question_types
    by_group: dict[str, list[str]] = {"ALL": list(qids)}
    for q in qids:
        by_group.setdefault(str(types[q]).upper(), []).append(q)
    groups = group_order(by_group)
    measures = measure_order(set.intersection(*(set(r.per_query) for r in runs)), k)
    ordered = [baseline] + [r for r in runs if r is not baseline]
    cells: dict[str, dict] = {}
    for run in ordered:
        cells[run.name] = {}
        for measure in measures:
            cells[run.name][measure] = {}
            for g in groups:
                cell: dict[str, Any] = {}
                if run.members:
                    per_seed = [_cell_values(m, measure, by_group[g]) for m in run.members]
                    means = [100 * float(np.mean(v)) for v in per_seed if v]
                    cell["value"] = float(np.mean(means)) if len(means) == len(per_seed) else None
                    cell["std"] = float(np.std(means, ddof=1)) if cell["value"] is not None else None
                    cell["n"] = min(len(v) for v in per_seed)
                    cell["seeds"] = [round(v, 6) for v in means]
                else:
                    vals = _cell_values(run, measure, by_group[g])
                    cell["value"] = 100 * float(np.mean(vals)) if vals else None
                    cell["std"] = None
                    cell["n"] = len(vals)
                if run is not baseline:
                    t = paired_test(baseline.per_query.get(measure) or {}, run.per_query.get(measure) or {},
                                    test=test, samples=samples, seed=seed, qids=by_group[g])
                    delta = None if t.delta is None else 100 * t.delta
                    cell.update(delta=delta, p=t.p_value, n_paired=t.n, only_baseline=t.only_a,
                                only_run=t.only_b, exact=t.exact,
                                significant=t.p_value is not None and t.p_value < alpha,
                                better=None if not delta else (delta < 0) == lower_is_better(measure))
                    if t.ci_low is not None:
                        cell["ci"] = [100 * t.ci_low, 100 * t.ci_high]
                cells[run.name][measure][g] = cell
    empty = [m for m in measures if all(cells[r.name][m]["ALL"]["n"] == 0 for r in ordered)]
    data = dict(baseline.results.get("data") or {})
    return {
        "data": data, "k": k, "baseline": baseline.name, "test": test, "samples": samples, "seed": seed,
        "alpha": alpha, "questions": len(qids), "groups": groups,
        "measures": [m for m in measures if m not in empty], "measures_without_values": empty,
        "group_sizes": {g: len(by_group[g]) for g in groups},
        "runs": [{"name": r.name, "origin": r.origin, "results": r.path or None, "input": r.given or None,
                  "model": (r.results.get("model") or {}) if not r.members else None,
                  "seeds": [{"name": m.name, "seed": m.seed, "results": m.path} for m in r.members] or None}
                 for r in ordered],
        "cells": cells,
    }


# ---------------------------------------------------------------- output


def fmt_value(cell: dict, std: bool = True) -> str:
    if cell.get("value") is None:
        return "—"
    if std and cell.get("std") is not None:
        return f"{cell['value']:.2f}±{cell['std']:.2f}"
    return f"{cell['value']:.2f}"


def fmt_delta(cell: dict) -> str:
    return "—" if cell.get("delta") is None else f"{cell['delta']:+.2f}"


def fmt_p(p: float | None, sign: bool = False) -> str:
    """0.034, or <0.001; with `sign`, `=0.034` / `<0.001` to follow a `p`."""
    if p is None:
        return "=—" if sign else "—"
    if p < 0.001:
        return "<0.001"
    return f"={p:.3f}" if sign else f"{p:.3f}"


def _short(measure: str) -> str:
    return measure.split("@")[0].replace("NegRecall", "NegR")


def _caption(payload: dict) -> str:
    test = "sign-flip randomization" if payload["test"] == "randomization" else "bootstrap"
    sizes = " · ".join(f"{g} {n}" for g, n in payload["group_sizes"].items())
    return (f"Δ: run − {payload['baseline']} in points · p: two-sided paired {test} test over questions "
            f"({payload['samples']:,} samples), * p < {payload['alpha']:g} · ↑ higher is better, "
            f"↓ lower is better · questions: {sizes}")


def table(payload: dict, measures: Sequence[str] | None = None) -> Table:
    """Rows per run (value, then Δ and p sub-rows), columns measure × group, as in Table 3."""
    measures = list(measures or headline_measures(payload))
    groups = payload["groups"]
    data = payload["data"]
    t = Table(box=box.SIMPLE_HEAD, padding=(0, 0, 0, 1), title=f"{data.get('name')}: {payload['questions']} questions"
                    + (f", {data['passages']} passages" if data.get("passages") else "")
                    + f" · baseline {payload['baseline']}",
              caption=_caption(payload), caption_justify="left")
    t.add_column("Run", overflow="fold")
    for m in measures:
        arrow = "↓" if lower_is_better(m) else "↑"
        for g in groups:
            t.add_column(f"{_short(m)} {arrow}\n{g}", justify="right", no_wrap=True)
    for i, (name, by_measure) in enumerate(payload["cells"].items()):
        cells = [by_measure[m][g] for m in measures for g in groups]
        seeded = any(c.get("std") is not None for c in cells)
        t.add_row(Text(name, style="bold" if i == 0 else ""), *[fmt_value(c, std=False) for c in cells],
                  end_section=i == 0 and not seeded)
        if seeded:
            t.add_row(Text("  ± std", style="dim"), *[Text("—" if c.get("std") is None else f"±{c['std']:.2f}",
                                                            style="dim") for c in cells], end_section=i == 0)
        if i == 0:
            continue
        deltas, ps = [], []
        for c in cells:
            style = "" if c.get("better") is None else ("green" if c["better"] else "red")
            strong = c.get("significant")
            deltas.append(Text(fmt_delta(c), style=f"bold {style}" if strong else f"{style} dim".strip()))
            ps.append(Text(fmt_p(c.get("p")) + ("*" if strong else " "), style="bold" if strong else "dim"))
        t.add_row(Text("  Δ", style="dim"), *deltas)
        t.add_row(Text("  p", style="dim"), *ps, end_section=True)
    return t


def markdown(payload: dict, measures: Sequence[str] | None = None) -> str:
    """A GitHub markdown table: value (Δ, p) per cell, † when p < alpha, and the settings below."""
    measures = list(measures or headline_measures(payload))
    groups = payload["groups"]
    data = payload["data"]
    head = ["Run"] + [f"{m} {g} {'↓' if lower_is_better(m) else '↑'}" for m in measures for g in groups]
    lines = [f"**{data.get('name')}** ({payload['questions']} questions"
             + (f", {data['passages']} passages" if data.get("passages") else "")
             + f"), baseline **{payload['baseline']}**", "",
             "| " + " | ".join(head) + " |", "| --- |" + " ---: |" * (len(head) - 1)]
    for i, (name, by_measure) in enumerate(payload["cells"].items()):
        row = [name.replace("|", "\\|")]
        for m in measures:
            for g in groups:
                c = by_measure[m][g]
                text = fmt_value(c)
                if i > 0 and c.get("delta") is not None:
                    mark = "†" if c.get("significant") else ""
                    text += f" ({fmt_delta(c)}, p{fmt_p(c.get('p'), sign=True)}){mark}"
                row.append(text)
        lines.append("| " + " | ".join(row) + " |")
    first = next(iter(payload["cells"].values()))
    lines.append("| *n* | " + " | ".join(str(first[m][g]["n"]) for m in measures for g in groups) + " |")
    test = "sign-flip randomization" if payload["test"] == "randomization" else "bootstrap"
    lines += ["", f"Values in percent (mean±std over seeds where given); Δ = run − {payload['baseline']} "
                  f"in points; p: two-sided paired {test} test over questions ({payload['samples']:,} "
                  f"samples, seed {payload['seed']}); † p < {payload['alpha']:g}. "
                  "↑ higher is better, ↓ lower is better; *n*: questions counted."]
    lines += [f"{note}." if not note.endswith(".") else note for note in payload.get("notes", [])]
    return "\n".join(lines) + "\n"


def default_out() -> Path:
    base = Path("compare") / time.strftime("%Y%m%d-%H%M%S")
    out, i = base, 2
    while out.exists():
        out, i = base.with_name(f"{base.name}-{i}"), i + 1
    return out


def run_compare(inputs: list[str], cfg: DictConfig, out: str | None = None, *, seeds: bool | None = None,
                embedded_base: bool = True, console: Console | None = None) -> dict:
    """Compare `inputs` (results.json files, run folders, models) against `cfg.compare.baseline`.

    Evaluates inputs without results on `cfg.data`, prints the table and writes
    compare.json, compare.md and compare.png to `out` (default compare/<timestamp>/).
    Results on several data sets (say the sample, BIRCO and QUEST) are compared per data
    set, one table each, side by side in compare.md and under `out/<data>/`. `seeds`
    (default: `cfg.compare.seeds`) averages runs that differ only by seed. Returns
    compare.json's content plus `files`.
    """
    console = console or Console()
    c = cfg.compare
    if seeds is None:
        seeds = bool(OmegaConf.select(cfg, "compare.seeds", default=False))
    validate(cfg)
    runs = load_runs(list(inputs), cfg, console=console, embedded_base=embedded_base)
    by_data: dict[str, list[Run]] = {}
    for r in runs:
        by_data.setdefault(str((r.results.get("data") or {}).get("name")), []).append(r)
    out_dir = Path(out) if out else default_out()
    if len(by_data) == 1:
        return _compare_group(runs, cfg, out_dir, console, seeds)
    # Several data sets: every check (same k, same corpus, same questions) holds within each.
    payloads = {}
    for name, group in by_data.items():
        console.rule(f"data: {name}")
        payloads[name] = _compare_group(group, cfg, out_dir / _slug(name), console, seeds)
    files = {"json": out_dir / "compare.json", "md": out_dir / "compare.md"}
    index = {"datasets": {n: {k: v for k, v in p.items() if k != "files"} for n, p in payloads.items()}}
    atomic_write_text(files["json"], json.dumps(index, indent=2) + "\n")
    atomic_write_text(files["md"], "\n".join(f"### {n}\n\n{markdown(p)}" for n, p in payloads.items()))
    index["files"] = {**{key: str(p) for key, p in files.items()},
                      **{f"{n}/{k}": v for n, p in payloads.items() for k, v in p["files"].items()}}
    return index


def _slug(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "-" for ch in name) or "data"


def _compare_group(runs: list[Run], cfg: DictConfig, out_dir: Path, console: Console, seeds: bool) -> dict:
    """One comparison: runs on one data set."""
    c = cfg.compare
    qids, notes = check_same_data(runs)
    if seeds:
        runs, seed_notes = aggregate_seeds(runs)
        notes += seed_notes
    if len(runs) < 2:
        notes.append("only one run: nothing to test against")
    baseline = pick_baseline(runs, c.baseline)
    payload = compare_runs(runs, baseline, qids, test=c.test, samples=int(c.samples), seed=int(cfg.seed),
                           alpha=float(c.alpha))
    if payload["measures_without_values"]:
        notes.append("no values for " + ", ".join(payload["measures_without_values"])
                     + " (no question has explicit negatives)")
    payload["notes"] = notes

    out_dir.mkdir(parents=True, exist_ok=True)
    files = {"json": out_dir / "compare.json", "md": out_dir / "compare.md", "png": out_dir / "compare.png"}
    atomic_write_text(files["json"], json.dumps(payload, indent=2) + "\n")
    atomic_write_text(files["md"], markdown(payload))
    plot_compare(payload, files["png"])

    console.print(table(payload))
    for note in notes:
        console.print(f"[yellow]note[/]: {note}")
    console.print(f"written: {files['json']}  {files['md']}  {files['png']}")
    payload["files"] = {key: str(p) for key, p in files.items()}
    return payload
