"""Question -> Boolean expression over simple questions through an LLM, and the report of both paths.

One request per question through the shared client (`boolcl.llm.client.LLM`:
cache, single flight, concurrency cap, back-off on 429/5xx/timeouts). An answer the
grammar cannot read is asked again once, with the bad answer and the parser's complaint
in the conversation (so the retry is a different request, not a cache hit); if that fails
too, the question falls back to itself as a single term. `DecompositionReport` counts all
of it.

The offline path is boolcl.logic.rules (`offline_decompose`), labelled `offline-rules`.
"""
from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from boolcl.llm.cache import AnswerCache
from boolcl.llm.client import LLM, LLMStats, OpenAIBackend
from boolcl.logic.grammar import GrammarError, Term, operators, parse
from boolcl.logic.rules import OFFLINE_NAME, Decomposition

PROMPT_VERSION = "decompose-v1"

# --- prompt (LLM path) -------------------------------------------------------------------------

PROMPT_HEAD = "Break the search question below into simple questions joined by Boolean operators."

SYSTEM = ("You turn complex search questions into Boolean expressions over short, self-contained questions "
          "that a search engine can answer one at a time. You answer with JSON only.")

INSTRUCTIONS = """Use this JSON shape and nothing else:
- a simple question is a string;
- {"op": "and", "args": [A, B, ...]}: passages must satisfy every part;
- {"op": "or", "args": [A, B, ...]}: passages may satisfy any part;
- {"op": "not", "args": [KEEP, DROP]}: passages for KEEP, minus those about DROP.
Parts may nest. Every simple question must make sense on its own (repeat the subject).
If the question has no Boolean structure, answer with the question itself as one string.

Example: "Which fruits are sweet but not citrus?" ->
{"op": "not", "args": ["Which fruits are sweet?", "Which fruits are citrus fruits?"]}"""


def messages_for(question: str) -> list[dict]:
    return [{"role": "system", "content": SYSTEM},
            {"role": "user", "content": f"{PROMPT_HEAD}\n\n{INSTRUCTIONS}\n\nQuestion: {question}"}]


def retry_messages(question: str, bad: str | None, error: str) -> list[dict]:
    return messages_for(question) + [
        {"role": "assistant", "content": bad or ""},
        {"role": "user", "content": f"That answer could not be read: {error}. Reply again with only the JSON "
                                    f"expression, no explanation and no code fence."}]


# --- report ------------------------------------------------------------------------------------

@dataclass
class DecompositionReport:
    decomposer: str  # offline-rules | llm:<model>
    questions: int = 0
    parsed: int = 0  # usable on the first answer
    retried: int = 0  # first answer unreadable, so asked again
    retry_parsed: int = 0  # ... and the second answer was usable
    rules: int = 0  # decomposed by the offline rules (no LLM)
    fell_back: int = 0  # both unreadable: the original question as a single term
    single_term: int = 0  # usable answers with no operator at all (rules: no wording matched)
    top_operator: Counter = field(default_factory=Counter)  # and | or | not | term, per question
    operators: Counter = field(default_factory=Counter)  # every operator node
    by_type: dict = field(default_factory=dict)  # question_type -> Counter of top operators
    llm: dict | None = None  # requests, cache hits, retries (LLMStats.to_dict)

    def add(self, d: Decomposition, qtype: str | None) -> None:
        self.questions += 1
        if d.status == "parsed":
            self.parsed += 1
        elif d.status == "retried":
            self.retried += 1
            self.retry_parsed += 1
        elif d.status == "fallback":
            self.retried += 1
            self.fell_back += 1
        elif d.status == "rules":
            self.rules += 1
        ops = operators(d.expr)
        top = ops[0] if ops else "term"
        if not ops and d.status != "fallback":
            self.single_term += 1
        self.top_operator[top] += 1
        self.operators.update(ops)
        self.by_type.setdefault(qtype or "?", Counter())[top] += 1

    def to_dict(self) -> dict:
        return {"decomposer": self.decomposer, "offline": self.decomposer == OFFLINE_NAME,
                "questions": self.questions, "parsed": self.parsed, "retried": self.retried,
                "retry_parsed": self.retry_parsed, "rules": self.rules, "fell_back": self.fell_back, "single_term": self.single_term,
                "top_operator": dict(sorted(self.top_operator.items())),
                "operators": dict(sorted(self.operators.items())),
                "by_question_type": {k: dict(sorted(v.items())) for k, v in sorted(self.by_type.items())},
                "llm": self.llm, "prompt_version": None if self.decomposer == OFFLINE_NAME else PROMPT_VERSION}


# --- LLM path ----------------------------------------------------------------------------------

async def _one(llm, qid: str, question: str) -> Decomposition:
    comp = await llm.ask(messages_for(question))
    try:
        return Decomposition(qid, question, parse(comp.text), "parsed")
    except GrammarError as e:
        first = str(e)
    comp2 = await llm.ask(retry_messages(question, comp.text, first))
    try:
        return Decomposition(qid, question, parse(comp2.text), "retried", [first])
    except GrammarError as e:
        return Decomposition(qid, question, Term(" ".join(question.split())), "fallback", [first, str(e)])


def llm_decompose(questions: list[tuple[str, str]], llm_cfg, cache_dir=None) -> tuple[list[Decomposition], dict]:
    """Decompose `(qid, question)` pairs through an OpenAI-compatible endpoint; (results, LLM stats)."""
    stats = LLMStats()
    backend = OpenAIBackend(llm_cfg, stats)
    identity = {"backend": "openai", "base_url": llm_cfg.base_url, "model": str(llm_cfg.model),
                "temperature": float(llm_cfg.temperature), "max_tokens": int(llm_cfg.max_tokens)}
    cache = AnswerCache(Path(str(cache_dir)) / "llm") if cache_dir else None

    async def main():
        llm = LLM(backend, stats, identity=identity, concurrency=int(llm_cfg.concurrency), cache=cache)
        try:
            return await asyncio.gather(*(_one(llm, qid, q) for qid, q in questions))
        finally:
            await llm.close()

    results = asyncio.run(main())
    return list(results), stats.to_dict()
