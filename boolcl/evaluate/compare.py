"""`boolcl compare`: several runs side by side, deltas against a baseline, paired tests, a plot.

    inputs ──find or evaluate──▶ results.json each ──same data?──▶ [seeds: mean ± std]
           ──per query, per type: values, deltas, paired p-values──▶ table, compare.{json,md,png}

The steps live in their own modules: `runs` (finding or evaluating each input's results,
seed groups), `comparison` (the shared questions, the baseline, the paired cells),
`tables` (terminal table and markdown), `plot` (compare.png), `significance` (the tests).
"""
from __future__ import annotations

import json
import time
from pathlib import Path

from omegaconf import DictConfig, OmegaConf
from rich.console import Console

from boolcl.config import validate
from boolcl.evaluate.comparison import check_same_data, compare_runs, pick_baseline
from boolcl.evaluate.plot import plot_compare
from boolcl.evaluate.runs import Run, aggregate_seeds, load_runs
from boolcl.evaluate.tables import markdown, table
from boolcl.files import atomic_write_text


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
