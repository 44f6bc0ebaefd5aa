"""Question -> Boolean expression over simple questions: by an LLM, or by rules (offline).

LLM path: one request per question through the generator's client (`generate.llm.LLM`:
cache, single flight, concurrency cap, back-off on 429/5xx/timeouts). An answer the
grammar cannot read is asked again once, with the bad answer and the parser's complaint
in the conversation (so the retry is a different request, not a cache hit); if that fails
too, the question falls back to itself as a single term. `DecompositionReport` counts all
of it.

Offline path: `rule_decompose` splits on the wordings the bundled sample (and ordinary
English) uses for exclusion, alternatives and conjunction. It is a stand-in for demos and
tests, labelled `offline-rules` in every output, not a model of language.
"""
from __future__ import annotations

import asyncio
import re
from collections import Counter
from dataclasses import dataclass, field

from .grammar import And, Expr, GrammarError, Not, Or, Term, operators, parse, to_json

OFFLINE_NAME = "offline-rules"
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
class Decomposition:
    qid: str
    question: str
    expr: Expr
    status: str  # parsed | retried (parsed on the second try) | fallback | rules
    errors: list = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"qid": self.qid, "question": self.question, "expression": to_json(self.expr),
                "status": self.status, "errors": self.errors}


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
    from pathlib import Path

    from ..generate.cache import AnswerCache
    from ..generate.llm import LLM, LLMStats, OpenAIBackend

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


# --- offline rules -----------------------------------------------------------------------------

_VERBS = set("""is are was were be has have had can could does do did will would may might should must
lives live lies lie makes make causes cause involves involve protects protect prevents prevent uses use
forms form contains contain carries carry helps help runs run eats eat hunts hunt grows grow looks look
comes come needs need means mean belongs belong""".split())

# exclusions after the kept part: longest first at any one position
_NOT_INFIX = sorted(["other than", "apart from", "aside from", "besides", "excluding", "except for", "except",
                     "rather than", "leaving aside", "leaving out", "unrelated to", "without",
                     "that has nothing to do with", "that have nothing to do with", "have nothing to do with",
                     "has nothing to do with", "have no connection to", "has no connection to",
                     "that are not", "that is not", "that aren't", "that isn't", "that weren't", "that were not",
                     "that don't", "that do not", "that doesn't", "that does not", "that never",
                     "are not", "aren't", "is not", "isn't", "were not", "weren't", "do not", "don't",
                     "does not", "doesn't", "never", "not"], key=len, reverse=True)
_NOT_PREFIX = re.compile(r"^(?:besides|other than|apart from|aside from|except for|excluding)\s+(?P<neg>[^,]+),\s*"
                         r"(?P<pos>.+)$", re.I)
_OR_WHICH = re.compile(r",?\s+(?:and|or)\s+(?=(?:which|what)\b)", re.I)
_EITHER = re.compile(r"^(?P<pre>.*?)\s+either\s+(?P<a>.+?)\s+or\s+(?P<b>.+)$", re.I)
_AND = re.compile(r"\s+and also\s+|,\s+and\s+|\s+and\s+(?=(?:%s)\b)" % "|".join(sorted(_VERBS)), re.I)
_TRAIL = re.compile(r"[\s,]+(?:and|but|or)?\s*$", re.I)


def _q(text: str) -> str:
    t = _TRAIL.sub("", text.strip().rstrip("?.").strip(" ,"))
    t = " ".join(t.split())
    return (t[:1].upper() + t[1:] + "?") if t else ""


def _head(clause: str) -> str:
    """The subject part of a question: its words up to the first verb (at most 4), else 3 words."""
    words = clause.split()
    for i, w in enumerate(words[:5]):
        if i >= 2 and w.lower() in _VERBS:
            return " ".join(words[:i])
    return " ".join(words[:3])


def _with_head(head: str, part: str) -> str:
    part = re.sub(r"^(?:which|what)\s+(?:one|ones|kind|type)?\s*", "", part.strip(), flags=re.I)
    return _q(f"{head} {part}")


def negation_span(q: str) -> tuple[tuple[int, int], tuple[int, int]] | None:
    """Character spans (marker, excluded part) of a question's exclusion, or None.

    The rules' single notion of where a NOT question's exclusion lies: `_rule_not` splits the
    question there, and the trainer's scope labels (train/scope.py) mark those tokens."""
    m = _NOT_PREFIX.match(q)
    if m:
        return (m.start(), m.start("neg")), m.span("neg")
    low = q.lower()
    best = None
    for marker in _NOT_INFIX:
        for m in re.finditer(r"(?:^|[\s,])" + re.escape(marker) + r"\s+", low):
            if m.start() == 0:
                continue
            if best is None or m.start() < best[0]:
                best = (m.start(), m.end())
            break
    if best is None:
        return None
    return best, (best[1], len(q.rstrip().rstrip("?.").rstrip()))


def _rule_not(q: str) -> Expr | None:
    span = negation_span(q)
    if span is None:
        return None
    (start, end), (neg_start, neg_end) = span
    if start == 0:  # exclusion first: "Besides X, which Y?"
        return Not(Term(_q(q[neg_end:].lstrip(" ,"))), Term(_q(q[neg_start:neg_end])))
    pos, neg = _q(q[:start]), _q(q[end:])
    if len(pos.split()) < 2 or not neg:
        return None
    return Not(Term(pos), Term(neg))


def _rule_or(q: str) -> Expr | None:
    m = _EITHER.match(q.rstrip("?"))
    if m:
        return Or((Term(_q(f"{m['pre']} {m['a']}")), Term(_q(f"{m['pre']} {m['b']}"))))
    parts = _OR_WHICH.split(q)
    if len(parts) == 2 and len(parts[0].split()) >= 3:
        first = _q(parts[0])
        return Or((Term(first), Term(_with_head(_head(parts[0]), parts[1]))))
    parts = re.split(r"\s+or\s+", q, maxsplit=1, flags=re.I)
    if len(parts) == 2 and len(parts[0].split()) >= 4:
        return Or((Term(_q(parts[0])), Term(_with_head(_head(parts[0]), parts[1]))))
    return None


def _rule_and(q: str) -> Expr | None:
    parts = _AND.split(q, maxsplit=1)
    if len(parts) == 2 and len(parts[0].split()) >= 3 and parts[1].strip(" ?"):
        return And((Term(_q(parts[0])), Term(_with_head(_head(parts[0]), parts[1]))))
    return None


def rule_decompose(question: str) -> Expr:
    """The offline decomposer: OR wordings first, then exclusion, then conjunction; else the question."""
    q = " ".join(question.split())
    for rule in (_rule_or, _rule_not, _rule_and):
        e = rule(q)
        if e is not None:
            return e
    return Term(q)


def offline_decompose(questions: list[tuple[str, str]]) -> list[Decomposition]:
    return [Decomposition(qid, q, rule_decompose(q), "rules") for qid, q in questions]
