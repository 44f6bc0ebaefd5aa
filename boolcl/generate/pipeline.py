"""`boolcl generate`: corpus -> groups -> atomic questions -> AND/OR/NOT -> cyclic filter -> negatives.

`run_generate(cfg)` writes the training examples (JSONL, passage text inline so
`train.boolean=<file>` works anywhere) and `<file stem>.report.json` beside them,
prints a summary, and returns the examples' path.

Every random choice comes from `seed` and every LLM answer from the cache once it
has been received, so a killed run resumes where it stopped and an unchanged
rerun makes no request at all. Draws run concurrently but are counted in draw
order, so the output never depends on timing (see `Generator.generate`).
"""
from __future__ import annotations

import asyncio
import math
import time
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from omegaconf import OmegaConf
from rich.console import Console
from tqdm.auto import tqdm

from boolcl.config import validate
from boolcl.data.jsonl import write_jsonl
from boolcl.data.schema import Context, TrainingExample
from boolcl.errors import ConfigError, DataError
from boolcl.files import atomic_write_text
from boolcl.generate import cluster as grouping
from boolcl.generate import parse, prompts
from boolcl.generate.compose import Draw, draw_stream, split_counts
from boolcl.generate.corpus import Passages, load_passages
from boolcl.generate.embed import Encoder
from boolcl.generate.filter import decide, needs_negatives
from boolcl.generate.negatives import mine
from boolcl.generate.offline import OFFLINE_MODEL, QUALITY_NOTE, OfflineBackend
from boolcl.generate.report import Funnel, ParseLog, cost, print_summary
from boolcl.llm.cache import AnswerCache
from boolcl.llm.client import LLM, LLMStats, OpenAIBackend, _observed

console = Console(stderr=True)
PRIOR_YIELD = 0.8  # expected share of draws that survive, before enough are observed
MIN_YIELD = 0.05
NO_YIELD_DRAWS = 100  # stop an operator when this many draws in a row gave nothing (a broken prompt or judge)


def output_path(cfg) -> Path:
    if cfg.out is None:
        return Path("generated") / f"{cfg.name}.jsonl"
    out = Path(str(cfg.out))
    return out if out.suffix == ".jsonl" else out / f"{cfg.name}.jsonl"


def report_path(out: Path) -> Path:
    return out.with_name(f"{out.stem}.report.json")


def _public_url(url: str | None) -> str | None:
    """The base URL without any user:password part."""
    if not url:
        return url
    parts = urlsplit(url)
    if parts.username or parts.password:
        host = parts.hostname or ""
        netloc = host + (f":{parts.port}" if parts.port else "")
        return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
    return url


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


class Generator:
    """One run's state: the passages, the LLM, the memo of atomic questions, the counters."""

    def __init__(self, cfg, passages: Passages, groups: list[grouping.Group], llm: LLM, show_progress: bool):
        self.cfg = cfg
        self.g = cfg.generate
        self.passages = passages
        self.groups = groups
        self.llm = llm
        self.show = show_progress
        self.limit = int(self.g.max_passage_chars)
        self.mode = str(self.g.filter)
        self.funnel = Funnel()
        self.parses = ParseLog()
        self.verdicts: dict = defaultdict(lambda: defaultdict(int))
        self._simple: dict[int, asyncio.Task] = {}
        self._broad: dict[tuple, asyncio.Task] = {}
        self.exhausted: list[str] = []
        self.stop_reason: dict[str, str] = {}
        self.hint: dict[str, int] = {}  # draws per operator that a previous identical run needed
        self.walked: dict[str, int] = {}
        self.labels: dict[str, tuple[set, set]] = {}

    def passage(self, i: int) -> prompts.Passage:
        d = self.passages.docs[i]
        return prompts.Passage(d.title, d.doc)

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
                    running[asyncio.ensure_future(self.process(d))] = d
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
                s = self.llm.stats
                bar.set_postfix_str(f"draws {sum(walked.values())} requests {s.requests} cached {s.cache_hits}",
                                    refresh=False)
                launch()
        finally:
            for t in running:
                t.cancel()
            memo = [t for t in [*self._simple.values(), *self._broad.values()] if not t.done()]
            for t in memo:
                t.cancel()
            await asyncio.gather(*running, *self._simple.values(), *self._broad.values(), return_exceptions=True)
            bar.close()
        self.exhausted = sorted(op for op in ops if not finished[op])
        self.walked = dict(walked)
        return {op: kept[op][: targets[op]] for op in ops}


def _make_groups(cfg, passages: Passages, strategy: str, encoder, seed: int):
    g = cfg.generate
    n = len(passages)
    if strategy == "cluster":
        pool = grouping.sample_indices(n, g.sample_size, seed)
        emb = encoder.encode([passages.text(i) for i in pool], "passages")
        row_of = {i: row for row, i in enumerate(pool)}
        groups = grouping.by_clustering(emb, list(range(len(pool))), cluster_size=int(g.cluster_size),
                                        svd_dim=int(g.svd_dim), seed=seed)
        groups = [grouping.Group(x.gid, [pool[m] for m in x.members]) for x in groups]
        return groups, pool, (emb, row_of)
    if strategy == "page":
        groups = grouping.by_page([d.title for d in passages.docs], list(range(n)), int(g.page_size))
    else:
        groups = grouping.by_prefix(passages.ids, list(range(n)))
    if g.sample_size is not None and n > g.sample_size:
        import random

        rng = random.Random(f"{seed}:sample")
        rng.shuffle(groups)
        chosen, total = [], 0
        for x in groups:
            if total >= g.sample_size:
                break
            chosen.append(x)
            total += len(x.members)
        groups = sorted(chosen, key=lambda x: x.members[0])
    pool = sorted(i for x in groups for i in x.members)
    return groups, pool, None


def run_identity(identity: dict, cfg, targets: dict, passages: Passages, groups: list[grouping.Group]) -> str:
    """A hash of everything that decides which draws a run makes and what they yield."""
    import hashlib
    import json

    g = cfg.generate
    h = hashlib.sha256()
    h.update(json.dumps({"llm": identity, "prompts": prompts.PROMPT_VERSION, "seed": int(cfg.seed),
                         "targets": targets, "filter": str(g.filter), "min_c": int(g.min_candidates),
                         "max_c": int(g.max_candidates), "limit": int(g.max_passage_chars),
                         "budget": float(g.max_draws_per_example)}, sort_keys=True).encode())
    for x in groups:
        h.update(x.gid.encode() + b"\x1e")
        for i in x.members:
            d = passages.docs[i]
            h.update(f"{d.docid}\x1f{d.title or ''}\x1f{d.doc}\x1e".encode())
    return h.hexdigest()[:32]


def _backend(cfg, stats: LLMStats):
    if cfg.llm.backend == "offline":
        return OfflineBackend(), {"backend": "offline", "base_url": "offline", "model": OFFLINE_MODEL,
                                  "temperature": 0.0, "max_tokens": 0}
    b = OpenAIBackend(cfg.llm, stats)
    return b, {"backend": "openai", "base_url": cfg.llm.base_url, "model": str(cfg.llm.model),
               "temperature": float(cfg.llm.temperature), "max_tokens": int(cfg.llm.max_tokens)}


def run_generate(cfg, *, show_progress: bool = True) -> Path:
    """Generate `generate.num_examples` Boolean training examples; return the JSONL path."""
    t0 = time.perf_counter()
    validate(cfg)
    g = cfg.generate
    seed = int(cfg.seed)
    out = output_path(cfg)
    offline = cfg.llm.backend == "offline"

    passages = load_passages(str(g.corpus), min_chars=int(g.min_passage_chars), exclude=g.exclude)
    strategy = grouping.choose_strategy(str(g.grouping), str(g.corpus), [d.title for d in passages.docs])
    cache_dir = Path(str(g.cache_dir)) if g.cache_dir else None
    encoder = None
    if strategy == "cluster" or g.hard_negatives > 0:

        encoder = Encoder(str(g.encoder or cfg.model), cache_dir, similarity=cfg.similarity,
                          show_progress=show_progress)
    groups, pool, pool_emb = _make_groups(cfg, passages, strategy, encoder, seed)
    if not groups:
        raise DataError(passages.source, None, f"no group of two or more passages (grouping={strategy}): "
                        f"{len(passages)} usable passages; try generate.grouping=cluster or a larger corpus")
    t_groups = time.perf_counter()

    stats = LLMStats()
    backend, identity = _backend(cfg, stats)
    cache = AnswerCache(cache_dir / "llm") if cache_dir is not None and not offline else None
    targets = split_counts(int(g.num_examples), list(g.operators))

    state = None
    if cache is not None:
        state = cache_dir / "runs" / f"{run_identity(identity, cfg, targets, passages, groups)}.json"

    async def main():
        llm = LLM(backend, stats, identity=identity, concurrency=int(cfg.llm.concurrency), cache=cache)
        gen = Generator(cfg, passages, groups, llm, show_progress)
        if state is not None and state.is_file():
            import json

            try:
                gen.hint = {op: int(n) for op, n in json.loads(state.read_text())["walked"].items()}
            except (ValueError, KeyError, TypeError):
                gen.hint = {}
        try:
            return gen, await gen.generate(targets, seed)
        finally:
            await llm.close()

    gen, chosen = asyncio.run(main())
    if state is not None:
        import json

        # lets an identical rerun stop launching draws exactly where this run stopped: zero requests
        atomic_write_text(state, json.dumps({"walked": gen.walked}))
    t_llm = time.perf_counter()

    # hard negatives, mined over the same pool of passages the groups came from
    ordered = [o for op in targets for o in chosen[op]]
    group_of = {x.gid: set(x.members) for x in groups}
    mined: list[list[int]] = [[] for _ in ordered]
    if encoder is not None and g.hard_negatives > 0 and ordered:
        if pool_emb is None:
            emb = encoder.encode([passages.text(i) for i in pool], "passages")
            row_of = {i: r for r, i in enumerate(pool)}
        else:
            emb, row_of = pool_emb
        p_emb = encoder.prepare(emb)
        q_emb = encoder.prepare(encoder.encode([o.question for o in ordered], "questions"))
        skip = []
        for o in ordered:
            pos, neg = gen.labels[o.draw.qid]
            banned = pos | neg | (group_of[o.draw.group] if o.draw.op == "not" else set())
            skip.append({row_of[i] for i in banned if i in row_of})
        rows = mine(q_emb, p_emb, skip=skip, k=int(g.hard_negatives), depth=int(g.mine_depth))
        mined = [[pool[r] for r in rr] for rr in rows]
    t_mine = time.perf_counter()

    llm_info = {"backend": identity["backend"], "model": identity["model"]}
    if not offline:
        llm_info["base_url"] = _public_url(cfg.llm.base_url) or "https://api.openai.com/v1"
    examples = []
    for o, hard in zip(ordered, mined):
        d = o.draw
        pos, neg = gen.labels[d.qid]
        ctx = lambda i: Context(passages.ids[i], text=passages.text(i))  # noqa: E731
        prov = {"generator": "boolcl generate", "operator": d.op, "group": d.group, "grouping": strategy,
                "corpus": passages.source, "passages": [passages.ids[i] for i in d.candidates],
                "simple_questions": {passages.ids[i]: q for i, q in zip(d.candidates, o.simple)},
                "broad_question": o.broad, "target": [passages.ids[d.candidates[t]] for t in d.target],
                "expression": prompts.expression(d.op, o.broad, [o.simple[t] for t in d.target]),
                "filter": {"mode": gen.mode, "pass_positives": o.pass_positives, "pass_strict": o.pass_strict},
                "llm": llm_info, "prompt_version": prompts.PROMPT_VERSION, "draw": d.index, "seed": seed,
                "offline": offline}
        if o.merged:
            prov["merged_draws"] = o.merged
        if offline:
            prov["quality"] = QUALITY_NOTE
        row = TrainingExample(qid=d.qid, question=o.question, question_type=d.op,
                              positive_ctxs=[ctx(i) for i in sorted(pos)], negative_ctxs=[ctx(i) for i in sorted(neg)],
                              hard_negative_ctxs=[ctx(i) for i in hard], provenance=prov)
        examples.append(TrainingExample.from_dict(row.to_dict()))  # validated like any reader would
    write_jsonl(out, examples)

    for op in targets:
        gen.funnel.final[op] = len(chosen[op])
    s = stats
    llm_cfg = cfg.llm
    shortfall = {op: f"{len(chosen[op])} of {n} ({gen.stop_reason.get(op, 'stopped early')})"
                 for op, n in targets.items() if len(chosen[op]) < n}
    report = {
        "name": str(cfg.name), "output": str(out), "report": str(report_path(out)),
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "offline": offline, "quality_note": QUALITY_NOTE if offline else None,
        "llm": {**llm_info, "prompt_version": prompts.PROMPT_VERSION, "concurrency": int(llm_cfg.concurrency),
                "temperature": identity["temperature"], "max_tokens": identity["max_tokens"],
                "api_key_env": str(llm_cfg.api_key_env) if not offline else None},
        "corpus": {"source": passages.source, "passages": passages.total, "usable": len(passages),
                   "skipped": dict(passages.skipped), "grouping": strategy, "groups": len(groups),
                   "pool": len(pool), "mean_group_size": round(sum(len(x.members) for x in groups) / len(groups), 2)},
        "requested": targets, "final_examples": len(examples),
        "per_operator": {op: len(chosen[op]) for op in targets},
        "shortfall": "; ".join(f"{op}: {v}" for op, v in shortfall.items()),
        "filter_mode": gen.mode,
        "operators": gen.funnel.to_dict(list(targets)),
        "llm_answers": gen.parses.to_dict(), "checks": {k: dict(v) for k, v in gen.verdicts.items()},
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
        "config": {"seed": seed, "generate": OmegaConf.to_container(g, resolve=True),
                   "llm": OmegaConf.to_container(llm_cfg, resolve=True)},
        "elapsed_s": {"grouping": round(t_groups - t0, 3), "llm": round(t_llm - t_groups, 3),
                      "llm_busy": round(s.busy_s, 3), "negatives": round(t_mine - t_llm, 3),
                      "total": round(time.perf_counter() - t0, 3)},
    }
    import json
    import os

    text = json.dumps(report, indent=2, ensure_ascii=False) + "\n"
    secret = os.environ.get(str(llm_cfg.api_key_env), "")
    if secret and len(secret) >= 8 and secret in text:  # cannot happen by construction; never risk it
        raise ConfigError("refusing to write a report that contains the API key")
    atomic_write_text(report_path(out), text)
    print_summary(report, console)
    return out
