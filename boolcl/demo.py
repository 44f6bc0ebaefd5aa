"""`boolcl demo`: the whole method on the bundled sample, offline, in a few minutes.

base model ──evaluate──▶ before; base ──train (recipe=tiny)──▶ checkpoint ──evaluate──▶ after.
"""
from __future__ import annotations

import json
import time

from rich.console import Console

from boolcl.config import compose
from boolcl.data.loaders import load_retrieval_set
from boolcl.files import atomic_write_text
from boolcl.retrieval.card import record_results
from boolcl.scoring.report import print_table, results_dict
from boolcl.scoring.runner import data_info, evaluate_spec
from boolcl.train.run import train


def demo_config(overrides: list[str]):
    """recipe=tiny unless the overrides name a recipe (`boolcl demo recipe=not_plus_tiny`)."""
    recipe = [] if any(o.startswith("recipe=") for o in overrides) else ["recipe=tiny"]
    return compose([*recipe, *overrides])


def run_demo(overrides: list[str], console: Console | None = None) -> dict:
    console = console or Console()
    cfg = demo_config(overrides)
    started = time.perf_counter()
    rset = load_retrieval_set(cfg.data)
    console.print(f"[bold]boolcl demo[/]: model {cfg.model}, data {rset.name} "
                  f"({len(rset.questions)} questions, {len(rset.corpus)} passages)")

    console.rule("1/3 evaluate the base model")
    before, base_info = evaluate_spec(cfg.model, rset, cfg)

    console.rule("2/3 train")
    run_dir = train(cfg)

    console.rule("3/3 evaluate the checkpoint")
    after, ckpt_info = evaluate_spec(str(run_dir), rset, cfg)

    k = cfg.eval.k
    payload = results_dict(after, model=ckpt_info, data=data_info(rset), k=k)
    payload["base"] = results_dict(before, model=base_info, data=data_info(rset), k=k)
    payload["demo_seconds"] = time.perf_counter() - started
    atomic_write_text(run_dir / "results.json", json.dumps(payload, indent=2) + "\n")
    record_results(run_dir, payload, base=payload["base"])  # the card shows before / after too

    b, a = payload["base"]["headline"], payload["headline"]
    delta = {key: (a[key] - b[key]) if a[key] is not None and b[key] is not None else None for key in a}
    print_table({"base": b, "trained": a, "Δ": delta}, k, console=console,
                title=f"{rset.name}: before and after training ({cfg.name})")
    console.print(f"checkpoint: {run_dir}  (SentenceTransformer('{run_dir}'))")
    console.print(f"results:    {run_dir / 'results.json'}  ({payload['demo_seconds']:.0f} s)")
    return payload
