"""Name what the generated questions are about: each group's topic and its passages' subjects.

Training on passages a question names (`train.named`, boolcl/train/named.py) needs, per
group, a topic ("birds that migrate in winter") and short names of its passages ("Barn
swallow"). A corpus with titles has the names already; the others are asked of the LLM,
one request per group and per untitled passage, cached like every other answer. Only
the groups of kept examples are named. The result is written beside the examples as
`<stem>.groups.jsonl`, one row per group:

    {"cluster": GROUP, "topic": TOPIC, "passages": [{"docid": ID, "name": NAME, "text": TEXT}, ...]}

`topic` or a passage's `name` is left out where the LLM's answer could not be used
(counted in the report's `llm_answers`).
"""
from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path

from tqdm.auto import tqdm

from boolcl.generate import parse, prompts
from boolcl.generate.cluster import Group
from boolcl.generate.corpus import Passages
from boolcl.generate.process import Outcome
from boolcl.generate.report import ParseLog
from boolcl.llm.client import LLM

NAMED_PER_GROUP = 8  # passages named per group: enough for pairs of answers and three others as negatives
TOPIC_PASSAGES = 5  # passages shown when asking for a group's topic


@dataclass
class Naming:
    rows: list[dict]
    counts: dict = field(default_factory=dict)


def groups_path(out: Path) -> Path:
    """`generated/all.jsonl` -> `generated/all.groups.jsonl`."""
    return out.with_name(f"{out.stem}.groups.jsonl")


def named_groups(kept: list[Outcome], groups: list[Group]) -> list[Group]:
    """The groups of the kept examples, in the order the groups were made."""
    used = {o.draw.group for o in kept}
    return [g for g in groups if g.gid in used]


async def _ask(llm: LLM, kind: str, messages: list[dict], parses: ParseLog) -> str | None:
    comp = await llm.ask(messages)
    parsed = parse.phrase(comp.text, finish_reason=comp.finish_reason)
    parses.add(kind, parsed)
    return parsed.value


async def name_groups(cfg, llm: LLM, passages: Passages, groups: list[Group], *, parses: ParseLog,
                      show_progress: bool) -> Naming:
    """Topic and passage names of each group, through the draws' client (cache, counters, concurrency)."""
    limit = int(cfg.generate.max_passage_chars)

    def shown(i: int) -> prompts.Passage:
        d = passages.docs[i]
        return prompts.Passage(d.title, d.doc)

    bar = tqdm(total=len(groups), desc="name groups", unit="group", disable=not show_progress)

    async def one(g: Group) -> dict:
        members = g.members[:NAMED_PER_GROUP]
        titled = {i: passages.docs[i].title for i in members if passages.docs[i].title}
        asked = [i for i in members if i not in titled]
        answers = await asyncio.gather(
            _ask(llm, "topic", prompts.topic([shown(i) for i in members[:TOPIC_PASSAGES]], limit), parses),
            *(_ask(llm, "name", prompts.name(shown(i), limit), parses) for i in asked))
        found = titled | dict(zip(asked, answers[1:]))
        row = {"cluster": g.gid, **({"topic": answers[0]} if answers[0] else {})}
        row["passages"] = [{"docid": passages.ids[i], **({"name": found[i]} if found[i] else {}),
                            "text": passages.text(i)} for i in members]
        bar.update(1)
        return row

    try:
        rows = list(await asyncio.gather(*(one(g) for g in groups)))
    finally:
        bar.close()
    listed = [p for r in rows for p in r["passages"]]
    counts = {"groups": len(rows), "with_topic": sum("topic" in r for r in rows), "passages": len(listed),
              "named": sum("name" in p for p in listed),
              "from_titles": sum(bool(passages.docs[i].title) for g in groups for i in g.members[:NAMED_PER_GROUP])}
    return Naming(rows, counts)
