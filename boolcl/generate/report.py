"""Counting what happened, and saying it: the report JSON and the terminal summary."""
from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field

from rich.console import Console
from rich.table import Table

STAGES = ("atomic", "compose", "filter", "dedup")


@dataclass
class Funnel:
    """Per operator: draws made, and how many each stage dropped, by reason."""

    drawn: Counter = field(default_factory=Counter)
    dropped: dict = field(default_factory=lambda: defaultdict(lambda: defaultdict(Counter)))  # op -> stage -> reason
    filtered: Counter = field(default_factory=Counter)  # op -> questions that reached the filter
    pass_positives: Counter = field(default_factory=Counter)
    pass_strict: Counter = field(default_factory=Counter)
    kept: Counter = field(default_factory=Counter)  # after filter and dedup
    merged: Counter = field(default_factory=Counter)
    final: Counter = field(default_factory=Counter)

    def drop(self, op: str, stage: str, reason: str) -> None:
        self.dropped[op][stage][reason] += 1

    def to_dict(self, ops: list[str]) -> dict:
        out = {}
        for op in ops:
            stages = {s: dict(sorted(self.dropped[op][s].items())) for s in STAGES if self.dropped[op][s]}
            out[op] = {"drawn": self.drawn[op],
                       "dropped": {s: {"total": sum(r.values()), "reasons": r} for s, r in stages.items()},
                       "filter": {"checked": self.filtered[op], "pass_positives_rule": self.pass_positives[op],
                                  "pass_strict_rule": self.pass_strict[op]},
                       "merged_duplicates": self.merged[op], "kept": self.kept[op], "final": self.final[op]}
        return out


@dataclass
class ParseLog:
    """Per kind of LLM answer: parsed fine, dropped (by reason), normalised (by what was fixed)."""

    ok: Counter = field(default_factory=Counter)
    dropped: dict = field(default_factory=lambda: defaultdict(Counter))
    normalised: dict = field(default_factory=lambda: defaultdict(Counter))

    def add(self, kind: str, parsed) -> None:
        if parsed.ok:
            self.ok[kind] += 1
        else:
            self.dropped[kind][parsed.reason] += 1
        for note in set(parsed.notes):
            self.normalised[kind][note] += 1

    def to_dict(self) -> dict:
        kinds = sorted(set(self.ok) | set(self.dropped) | set(self.normalised))
        return {k: {"ok": self.ok[k], "dropped": dict(sorted(self.dropped[k].items())),
                    "normalised": dict(sorted(self.normalised[k].items()))} for k in kinds}


def cost(prompt_tokens: int, completion_tokens: int, price_in: float, price_out: float) -> float:
    return round(prompt_tokens / 1e6 * price_in + completion_tokens / 1e6 * price_out, 6)


def print_summary(report: dict, console: Console | None = None) -> None:
    console = console or Console(stderr=True)
    if report["offline"]:
        console.print(f"[yellow]offline backend:[/] {report['quality_note']}")
    table = Table(title=f"boolcl generate: {report['name']}", title_justify="left")
    for col in ("operator", "asked", "drawn", "atomic drop", "compose drop", "filter drop", "merged", "final"):
        table.add_column(col, justify="right" if col != "operator" else "left")
    for op, f in report["operators"].items():
        d = f["dropped"]
        table.add_row(op, str(report["requested"][op]), str(f["drawn"]),
                      *(str(d.get(s, {}).get("total", 0)) for s in ("atomic", "compose", "filter")),
                      str(f["merged_duplicates"]), f"[bold]{f['final']}[/]")
    console.print(table)
    reasons = Counter()
    for f in report["operators"].values():
        for stage, d in f["dropped"].items():
            for r, n in d["reasons"].items():
                reasons[f"{stage}: {r}"] += n
    if reasons:
        console.print("dropped: " + "; ".join(f"{r} x{n}" for r, n in reasons.most_common(8)))
    fl = {op: f["filter"] for op, f in report["operators"].items()}
    console.print("filter (" + report["filter_mode"] + "): " + "; ".join(
        f"{op} {v['pass_positives_rule']}/{v['checked']} pass positives, {v['pass_strict_rule']} pass strict"
        for op, v in fl.items()))
    c, t = report["calls"], report["tokens"]
    retries = ", ".join(f"{k} x{v}" for k, v in c["retries"].items()) or "none"
    console.print(f"LLM: {c['answers']} answers from {report['llm']['backend']} ({c['requests']} requests), "
                  f"{c['cache_hits']} from cache, retries: {retries}; tokens this run "
                  f"{t['prompt'] + t['completion']:,}{' (estimated)' if t['estimated'] else ''}, cost "
                  f"${report['cost_usd']['this_run']:.4f} (whole set ${report['cost_usd']['whole_set']:.4f})")
    if report["shortfall"]:
        console.print(f"[yellow]fewer examples than asked:[/] {report['shortfall']}")
    console.print(f"[green]wrote[/] {report['final_examples']} examples to {report['output']} "
                  f"(report: {report['report']}) in {report['elapsed_s']['total']:.1f}s")
