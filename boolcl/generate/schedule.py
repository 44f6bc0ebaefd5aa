"""The ordered async scheduler: many draws in flight at once, counted strictly in draw order.

Draws run concurrently, but an operator is done at the first prefix of its draws that
holds enough kept examples, so which examples come out depends on the seed only, never
on timing, a kill or the cache. Counting in order is also where equal questions are
merged (or dropped when their labels conflict) and the funnel is filled.
"""
from __future__ import annotations

import asyncio
import math
from typing import Any

from tqdm.auto import tqdm

from boolcl.generate import parse
from boolcl.generate.cluster import Group
from boolcl.generate.compose import Draw, draw_stream
from boolcl.generate.corpus import Passages
from boolcl.generate.process import DrawProcessor, Outcome
from boolcl.generate.report import Funnel
from boolcl.llm.client import LLM

PRIOR_YIELD = 0.8  # expected share of draws that survive, before enough are observed
MIN_YIELD = 0.05
NO_YIELD_DRAWS = 100  # stop an operator when this many draws in a row gave nothing (a broken prompt or judge)


class Scheduler:
    """One run's draw loop: the funnel, the labels of kept questions, and why an operator stopped."""

    def __init__(self, cfg, groups: list[Group], work: DrawProcessor, show_progress: bool,
                 hint: dict[str, int] | None = None):
        self.cfg = cfg
        self.g = cfg.generate
        self.groups = groups
        self.work = work
        self.show = show_progress
        self.funnel = Funnel()
        self.exhausted: list[str] = []
        self.stop_reason: dict[str, str] = {}
        self.hint: dict[str, int] = hint or {}  # draws per operator that a previous identical run needed
        self.walked: dict[str, int] = {}
        self.labels: dict[str, tuple[set, set]] = {}

    def _walk(self, o: Outcome, kept: list[Outcome], by_question: dict) -> None:
        """Count one outcome, in draw order; keep it, merge it into an equal question, or drop it."""
        op = o.draw.op
        self.funnel.drawn[op] += 1
        if o.checked:
            self.funnel.filtered[op] += 1
            self.funnel.pass_positives[op] += o.pass_positives
            self.funnel.pass_strict[op] += o.pass_strict
        if o.stage is not None:
            self.funnel.drop(op, o.stage, o.reason)
            return
        pos, neg = (set(x) for x in o.draw.labels())
        key = (op, parse.key(o.question))
        first = by_question.get(key)
        if first is not None:
            fpos, fneg = self.labels[first.draw.qid]
            if (fpos | pos) & (fneg | neg):
                self.funnel.drop(op, "dedup", "same question, conflicting labels")
            else:
                fpos |= pos
                fneg |= neg
                self.funnel.merged[op] += 1
                first.merged.append(o.draw.index)
            return
        by_question[key] = o
        self.labels[o.draw.qid] = (pos, neg)
        kept.append(o)
        self.funnel.kept[op] += 1

    async def generate(self, targets: dict[str, int], seed: int) -> dict[str, list[Outcome]]:
        """Process draws until each operator has its examples; the result depends on the seed only.

        Draws are started in index order, up to a window of them in flight, and their
        outcomes are counted strictly in index order: an operator is done at the first
        prefix of its draws that holds enough kept examples, and draws after that prefix
        are ignored (cancelled if still running). Timing, a kill or the cache never
        change which examples come out.
        """
        ops = list(targets)
        streams = {op: draw_stream(self.groups, op, seed=seed, min_candidates=int(self.g.min_candidates),
                                   max_candidates=int(self.g.max_candidates)) for op in ops}
        budget = {op: max(1, math.ceil(float(self.g.max_draws_per_example) * targets[op])) for op in ops}
        kept: dict[str, list[Outcome]] = {op: [] for op in ops}
        by_question: dict[tuple[str, str], Outcome] = {}
        launched = {op: 0 for op in ops}
        walked = {op: 0 for op in ops}
        waiting: dict[str, dict[int, Outcome]] = {op: {} for op in ops}
        finished = {op: targets[op] <= 0 for op in ops}
        exhausted: set[str] = set()
        running: dict[asyncio.Task, Draw] = {}
        window = max(8, 4 * int(self.cfg.llm.concurrency))
        bar = tqdm(total=sum(targets.values()), desc="generate", unit="example", disable=not self.show)

        def rate(op: str) -> float:
            if walked[op] < 10:
                return PRIOR_YIELD
            return max(MIN_YIELD, self.funnel.kept[op] / walked[op])

        def launch() -> None:
            progress = True
            while progress and len(running) < window:
                progress = False
                for op in ops:
                    if finished[op] or op in exhausted or len(running) >= window:
                        continue
                    in_flight = launched[op] - walked[op]
                    if len(kept[op]) + in_flight * rate(op) >= targets[op] + 1:
                        continue  # enough on the way; wait for outcomes before drawing more
                    hint = self.hint.get(op)
                    if hint is not None and launched[op] >= hint and walked[op] < launched[op]:
                        continue  # a finished run with these inputs stopped here: see if it suffices
                    if launched[op] >= budget[op]:
                        exhausted.add(op)
                        self.stop_reason[op] = (f"generate.max_draws_per_example={self.g.max_draws_per_example} "
                                                f"reached ({budget[op]} draws)")
                        continue
                    if walked[op] >= NO_YIELD_DRAWS and not kept[op]:
                        exhausted.add(op)
                        self.stop_reason[op] = (f"none of the first {walked[op]} draws survived: see the drop "
                                                f"reasons before spending more")
                        continue
                    d = next(streams[op], None)
                    if d is None:
                        exhausted.add(op)
                        self.stop_reason[op] = f"the corpus ran out of distinct draws after {launched[op]}"
                        continue
                    launched[op] += 1
                    running[asyncio.ensure_future(self.work.process(d))] = d
                    progress = True

        try:
            launch()
            while running:
                done, _ = await asyncio.wait(list(running), return_when=asyncio.FIRST_COMPLETED)
                for t in done:
                    d = running.pop(t)
                    if t.cancelled():
                        continue
                    waiting[d.op][d.index] = t.result()  # an LLMError stops the run here
                for op in ops:
                    while not finished[op] and walked[op] in waiting[op]:
                        before = len(kept[op])
                        self._walk(waiting[op].pop(walked[op]), kept[op], by_question)
                        walked[op] += 1
                        bar.update(len(kept[op]) - before)
                        if len(kept[op]) >= targets[op]:
                            finished[op] = True
                    if finished[op]:  # later draws of this operator can no longer matter
                        waiting[op].clear()
                        for t, d in list(running.items()):
                            if d.op == op:
                                t.cancel()
                s = self.work.llm.stats
                bar.set_postfix_str(f"draws {sum(walked.values())} requests {s.requests} cached {s.cache_hits}",
                                    refresh=False)
                launch()
        finally:
            for t in running:
                t.cancel()
            memo = self.work.memo()
            for t in memo:
                if not t.done():
                    t.cancel()
            await asyncio.gather(*running, *memo, return_exceptions=True)
            bar.close()
        self.exhausted = sorted(op for op in ops if not finished[op])
        self.walked = dict(walked)
        return {op: kept[op][: targets[op]] for op in ops}


def run_draws(cfg, passages: Passages, groups: list[Group], targets: dict[str, int], *, backend, stats, identity: dict,
              cache, hint: dict[str, int], show_progress: bool, then=None) -> tuple[Scheduler, dict[str, list[Outcome]], Any]:
    """The whole LLM phase in one event loop: (the scheduler with its counters, the kept outcomes per
    operator, what `then(llm, sched, kept)` returned: further requests through the same client, or None).

    The client is built inside the loop it serves and closed even when a request fails.
    """
    async def main():
        llm = LLM(backend, stats, identity=identity, concurrency=int(cfg.llm.concurrency), cache=cache)
        sched = Scheduler(cfg, groups, DrawProcessor(cfg, passages, llm), show_progress, hint=hint)
        try:
            kept = await sched.generate(targets, int(cfg.seed))
            return sched, kept, (await then(llm, sched, kept) if then is not None else None)
        finally:
            await llm.close()

    return asyncio.run(main())
