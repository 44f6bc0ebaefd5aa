"""One draw through the LLM: its atomic questions, the Boolean rewrite, the cyclic check -> an `Outcome`.

The simple question of a passage and the broad question of a candidate set are asked
once and shared by every draw that needs them (one task each, memoised here), so
overlapping draws cost no extra requests. What the answers looked like is counted in
`parses` and `verdicts` for the report.
"""
from __future__ import annotations

import asyncio
from collections import defaultdict
from dataclasses import dataclass, field

from boolcl.generate import parse, prompts
from boolcl.generate.compose import Draw
from boolcl.generate.corpus import Passages
from boolcl.generate.filter import decide, needs_negatives
from boolcl.generate.report import ParseLog
from boolcl.llm.client import LLM, _observed


@dataclass
class Outcome:
    draw: Draw
    question: str | None = None
    simple: list[str] = field(default_factory=list)
    broad: str | None = None
    stage: str | None = None  # where it was dropped
    reason: str | None = None
    pass_positives: bool = False
    pass_strict: bool = False
    checked: bool = False
    merged: list[int] = field(default_factory=list)  # draws whose labels were merged into this one


class DrawProcessor:
    """Turns draws into outcomes; holds the memo of atomic questions and the answer counters."""

    def __init__(self, cfg, passages: Passages, llm: LLM):
        self.passages = passages
        self.llm = llm
        self.limit = int(cfg.generate.max_passage_chars)
        self.mode = str(cfg.generate.filter)
        self.parses = ParseLog()
        self.verdicts: dict = defaultdict(lambda: defaultdict(int))
        self._simple: dict[int, asyncio.Task] = {}
        self._broad: dict[tuple, asyncio.Task] = {}

    def passage(self, i: int) -> prompts.Passage:
        d = self.passages.docs[i]
        return prompts.Passage(d.title, d.doc)

    def memo(self) -> list[asyncio.Task]:
        """Every atomic-question task started so far (the scheduler cancels and awaits them at the end)."""
        return [*self._simple.values(), *self._broad.values()]

    async def _question(self, kind: str, messages: list[dict]) -> parse.Parsed:
        comp = await self.llm.ask(messages)
        parsed = parse.question(comp.text, finish_reason=comp.finish_reason)
        self.parses.add(kind, parsed)
        return parsed

    def simple(self, i: int) -> asyncio.Task:
        if i not in self._simple:
            self._simple[i] = asyncio.ensure_future(
                self._question("simple", prompts.simple(self.passage(i), self.limit)))
            self._simple[i].add_done_callback(_observed)
        return self._simple[i]

    def broad(self, cands: tuple[int, ...]) -> asyncio.Task:
        if cands not in self._broad:
            msgs = prompts.disjunctive([self.passage(i) for i in cands], self.limit)
            self._broad[cands] = asyncio.ensure_future(self._question("broad", msgs))
            self._broad[cands].add_done_callback(_observed)
        return self._broad[cands]

    async def check(self, question: str, i: int) -> str:
        comp = await self.llm.ask(prompts.answer(question, self.passage(i), self.limit))
        verdict, reason = parse.verdict(comp.text)
        self.verdicts["check"][verdict if reason is None else f"{verdict}: {reason}"] += 1
        return verdict

    async def process(self, d: Draw) -> Outcome:
        out = Outcome(d)
        broad_task = self.broad(d.candidates) if d.op in ("and", "not") else None  # asked alongside the simple ones
        simple = await asyncio.gather(*(asyncio.shield(self.simple(i)) for i in d.candidates))
        bad = next((p for p in simple if not p.ok), None)
        if bad is not None:
            out.stage, out.reason = "atomic", f"simple question: {bad.reason}"
            return out
        out.simple = [p.value for p in simple]
        if broad_task is not None:
            broad = await asyncio.shield(broad_task)
            if not broad.ok:
                out.stage, out.reason = "atomic", f"broad question: {broad.reason}"
                return out
            out.broad = broad.value
        if d.op == "and":
            msgs = prompts.conjunction(out.broad, [self.passage(i) for i in d.candidates], d.target[0], self.limit)
        elif d.op == "or":
            msgs = prompts.disjunction(out.simple[d.target[0]], out.simple[d.target[1]])
        else:
            msgs = prompts.negation(out.broad, out.simple[d.target[0]])
        q = await self._question(d.op, msgs)
        if not q.ok:
            out.stage, out.reason = "compose", q.reason
            return out
        lost = parse.check_operator(d.op, q.value, out.broad)
        if lost:
            out.stage, out.reason = "compose", lost
            return out
        out.question = q.value
        pos, neg = d.labels()
        if self.mode == "off":
            out.pass_positives = out.pass_strict = True
            return out
        checked_neg = neg if needs_negatives(d.op, self.mode) else []
        verdicts = await asyncio.gather(*(self.check(q.value, i) for i in pos + checked_neg))
        decision = decide(d.op, list(verdicts[:len(pos)]), list(verdicts[len(pos):]), self.mode)
        out.checked = True
        out.pass_positives, out.pass_strict = decision.pass_positives, decision.pass_strict
        if not decision.keep:
            out.stage, out.reason = "filter", decision.reason
        return out
