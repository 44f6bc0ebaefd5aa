"""Counting what happened, and saying it: the report JSON beside the examples and the terminal summary.

The report holds no secret: the LLM URL loses any user:password before it gets here, and
`write_report` refuses to write text that contains the API key all the same.
"""
from __future__ import annotations

import json
import os
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from omegaconf import OmegaConf
from rich.console import Console
from rich.table import Table

from boolcl.errors import ConfigError
from boolcl.files import atomic_write_text
from boolcl.generate import prompts
from boolcl.generate.cluster import Group
from boolcl.generate.corpus import Passages
from boolcl.generate.offline import QUALITY_NOTE
from boolcl.llm.client import LLMStats

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


def report_path(out: Path) -> Path:
    return out.with_name(f"{out.stem}.report.json")


def build_report(cfg, *, out: Path, identity: dict, llm_info: dict, passages: Passages, strategy: str,
                 groups: list[Group], pool: list[int], targets: dict[str, int], chosen: dict[str, list],
                 examples: int, sched, stats: LLMStats, mined: list[list[int]], encoder,
                 times: tuple[float, float, float, float], named: dict | None = None) -> dict:
    """The report of one run. `sched`: the finished Scheduler (funnel, stop reasons, and its
    DrawProcessor's answer counters); `times`: perf_counter at start, after grouping, after the
    LLM phase and after mining; `named`: what naming the groups found (None: not asked)."""
    g, llm_cfg, s = cfg.generate, cfg.llm, stats
    offline = llm_cfg.backend == "offline"
    work = sched.work
    t0, t_groups, t_llm, t_mine = times
    for op in targets:
        sched.funnel.final[op] = len(chosen[op])
    shortfall = {op: f"{len(chosen[op])} of {n} ({sched.stop_reason.get(op, 'stopped early')})"
                 for op, n in targets.items() if len(chosen[op]) < n}
    return {
        "name": str(cfg.name), "output": str(out), "report": str(report_path(out)),
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "offline": offline, "quality_note": QUALITY_NOTE if offline else None,
        "llm": {**llm_info, "prompt_version": prompts.PROMPT_VERSION, "concurrency": int(llm_cfg.concurrency),
                "temperature": identity["temperature"], "max_tokens": identity["max_tokens"],
                "api_key_env": str(llm_cfg.api_key_env) if not offline else None},
        "corpus": {"source": passages.source, "passages": passages.total, "usable": len(passages),
                   "skipped": dict(passages.skipped), "grouping": strategy, "groups": len(groups),
                   "pool": len(pool), "mean_group_size": round(sum(len(x.members) for x in groups) / len(groups), 2)},
        "requested": targets, "final_examples": examples,
        "per_operator": {op: len(chosen[op]) for op in targets},
        "shortfall": "; ".join(f"{op}: {v}" for op, v in shortfall.items()),
        "filter_mode": work.mode,
        "named": named,
        "operators": sched.funnel.to_dict(list(targets)),
        "llm_answers": work.parses.to_dict(), "checks": {k: dict(v) for k, v in work.verdicts.items()},
        "calls": s.to_dict(),
        "tokens": {"prompt": s.prompt_tokens, "completion": s.completion_tokens,
                   "cached_prompt": s.cached_prompt_tokens, "cached_completion": s.cached_completion_tokens,
                   "estimated": s.estimated_tokens},
        "cost_usd": {"this_run": cost(s.prompt_tokens, s.completion_tokens, llm_cfg.price_input, llm_cfg.price_output),
                     "whole_set": cost(s.prompt_tokens + s.cached_prompt_tokens,
                                       s.completion_tokens + s.cached_completion_tokens,
                                       llm_cfg.price_input, llm_cfg.price_output),
                     "prices_per_million": {"input": llm_cfg.price_input, "output": llm_cfg.price_output},
                     "note": ("estimate from token counts; whole_set: every distinct answer this run used or "
                              "made, from the cache or not" + (
                         "; offline: tokens guessed from text length, what llm.model would cost at these prices"
                         if offline else ""))},
        "negatives": {"per_example": int(g.hard_negatives), "depth": int(g.mine_depth),
                      "mined": sum(len(m) for m in mined),
                      "encoder": (str(g.encoder or cfg.model) if encoder is not None else None),
                      "texts_encoded": encoder.encoded if encoder is not None else 0},
        "config": {"seed": int(cfg.seed), "generate": OmegaConf.to_container(g, resolve=True),
                   "llm": OmegaConf.to_container(llm_cfg, resolve=True)},
        "elapsed_s": {"grouping": round(t_groups - t0, 3), "llm": round(t_llm - t_groups, 3),
                      "llm_busy": round(s.busy_s, 3), "negatives": round(t_mine - t_llm, 3),
                      "total": round(time.perf_counter() - t0, 3)},
    }


def write_report(report: dict, path: Path, api_key_env: str) -> None:
    """The report as JSON at `path`; refuses when the text would contain the key in `$api_key_env`."""
    text = json.dumps(report, indent=2, ensure_ascii=False) + "\n"
    secret = os.environ.get(api_key_env, "")
    if secret and len(secret) >= 8 and secret in text:  # cannot happen by construction; never risk it
        raise ConfigError("refusing to write a report that contains the API key")
    atomic_write_text(path, text)


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
    n = report.get("named")
    if n:
        console.print(f"named: {n['with_topic']} of {n['groups']} groups with a topic, {n['named']} of "
                      f"{n['passages']} passages with a name ({n['from_titles']} from titles)")
    if report["shortfall"]:
        console.print(f"[yellow]fewer examples than asked:[/] {report['shortfall']}")
    console.print(f"[green]wrote[/] {report['final_examples']} examples to {report['output']} "
                  f"(report: {report['report']}) in {report['elapsed_s']['total']:.1f}s")
