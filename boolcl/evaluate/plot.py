"""compare.png: grouped bars per question type, one panel per headline measure, one bar per run.

The baseline is the first (grey) bar of each group; every bar carries its value, with `*`
when its difference from the baseline is significant, and an error bar when the row is a
mean over seeds (± std). Rendered with matplotlib's Agg backend, so it works headless.
"""
from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Sequence

import matplotlib

from boolcl.evaluate.measures import headline_measures
from boolcl.files import atomic_write_bytes

matplotlib.use("Agg")  # no display needed; set before pyplot is imported
import matplotlib.pyplot as plt  # noqa: E402

BASELINE_COLOR = "#9e9e9e"
PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf",
           "#bcbd22", "#393b79"]


def _panel(ax, payload: dict, measure: str, runs: Sequence[str], colors: Sequence[str], rotate: bool) -> None:
    groups = payload["groups"]
    n_runs = len(runs)
    width = 0.8 / n_runs
    lower = measure.startswith("NegRecall")
    top = max([c["value"] + (c.get("std") or 0) for r in runs for c in payload["cells"][r][measure].values()
               if c.get("value") is not None] or [1.0])
    for i, (run, color) in enumerate(zip(runs, colors)):
        xs, heights, errs = [], [], []
        for j, g in enumerate(groups):
            cell = payload["cells"][run][measure][g]
            x = j - 0.4 + width * (i + 0.5)
            if cell.get("value") is None:
                ax.text(x, 0, "n/a", ha="center", va="bottom", fontsize=7, color="#777777", rotation=90)
                continue
            xs.append(x)
            heights.append(cell["value"])
            errs.append(cell.get("std") or 0.0)
            label = f"{cell['value']:.1f}" + ("*" if cell.get("significant") else "")
            y = cell["value"] + (cell.get("std") or 0.0) + top * 0.015
            ax.text(x, y, label, ha="center", va="bottom", fontsize=7.5 if rotate else 8.5,
                    rotation=90 if rotate else 0,
                    fontweight="bold" if cell.get("significant") else "normal")
        ax.bar(xs, heights, width * 0.92, color=color, edgecolor="white", linewidth=0.5,
               yerr=errs if any(errs) else None, error_kw={"elinewidth": 1, "capsize": 2, "ecolor": "#333333"},
               label=run, zorder=3)
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels([f"{g}\n(n={payload['cells'][runs[0]][measure][g]['n']})" for g in groups], fontsize=9)
    ax.set_xlim(-0.5, len(groups) - 0.5)
    ax.set_ylim(0, top * (1.25 if rotate else 1.15) if top > 0 else 1.0)  # room for the labels
    ax.set_yticks([t for t in ax.get_yticks() if 0 <= t <= 100])  # no "110 %" tick above a full bar
    ax.set_ylabel("%", fontsize=9)
    ax.set_title(f"{measure}  ({'↓ lower' if lower else '↑ higher'} is better)", fontsize=11)
    ax.grid(axis="y", color="#e6e6e6", zorder=0)
    ax.spines[["top", "right"]].set_visible(False)
    ax.tick_params(axis="y", labelsize=8)


def plot_compare(payload: dict, path: str | os.PathLike, measures: Sequence[str] | None = None) -> Path:
    """Write the comparison's bar chart (MRR@k and NegRecall@k panels) to `path` (PNG); return it."""
    path = Path(path)
    measures = list(measures or headline_measures(payload))
    runs = list(payload["cells"])  # baseline first
    colors = [BASELINE_COLOR] + [PALETTE[i % len(PALETTE)] for i in range(len(runs) - 1)]
    n_groups = len(payload["groups"])
    # Side by side while that stays under ~15 in wide; else one panel above the other.
    panel_w = max(4.5, n_groups * (0.6 + 0.34 * len(runs)))
    stacked = len(measures) > 1 and panel_w * len(measures) > 15
    if stacked:
        panel_w = min(max(panel_w, 8.0), 15.0)
    rotate = panel_w / n_groups * 0.8 / len(runs) < 0.36  # bar narrower than its label
    nrows, ncols = (len(measures), 1) if stacked else (1, len(measures))
    legend_rows = (len(runs) + 5) // 6
    height = 4.0 * nrows + 0.6 + 0.3 * legend_rows
    fig, axes = plt.subplots(nrows, ncols, figsize=(panel_w * ncols + 0.6, height), squeeze=False,
                             layout="constrained")
    fig.get_layout_engine().set(h_pad=0.08, w_pad=0.1)
    try:
        for ax, measure in zip(axes.flat, measures):
            _panel(ax, payload, measure, runs, colors, rotate)
        handles, labels = axes.flat[0].get_legend_handles_labels()
        labels = [f"{lab} (baseline)" if i == 0 else lab for i, lab in enumerate(labels)]
        test = "randomization" if payload["test"] == "randomization" else "bootstrap"
        data = payload["data"].get("name")
        fig.suptitle(f"{data}: {payload['questions']} questions  ·  * p < {payload['alpha']:g} vs "
                     f"{payload['baseline']} (paired {test} test)", fontsize=11)
        fig.legend(handles, labels, loc="outside lower center", ncol=min(len(runs), 6), frameon=False, fontsize=9)
        png = io.BytesIO()
        fig.savefig(png, format="png", dpi=150)
        atomic_write_bytes(path, png.getvalue())
    finally:
        plt.close(fig)
    return path
