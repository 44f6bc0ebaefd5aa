"""The comparison as text: the rich table printed to the terminal and compare.md's markdown."""
from __future__ import annotations

from typing import Sequence

from rich import box
from rich.table import Table
from rich.text import Text

from boolcl.evaluate.measures import headline_measures, lower_is_better


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
