"""The offline decomposer: a question's exclusion, alternatives and conjunction found by rules.

It splits on the wordings the bundled sample (and ordinary English) uses, listed in
boolcl/words.py. The decomposed-query baseline (`boolcl decompose`, labelled
`offline-rules`) and the trainer (decomposition targets) both read questions through it,
so they share one notion of where an exclusion lies. A stand-in for demos and tests, not a
model of language.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from boolcl.logic.grammar import And, Expr, Not, Or, Term, to_json
from boolcl.words import EXCLUSION_INFIX, EXCLUSION_PREFIX

OFFLINE_NAME = "offline-rules"


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



_VERBS = set("""is are was were be has have had can could does do did will would may might should must
lives live lies lie makes make causes cause involves involve protects protect prevents prevent uses use
forms form contains contain carries carry helps help runs run eats eat hunts hunt grows grow looks look
comes come needs need means mean belongs belong""".split())

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
    question there (and so do the trainer's decomposition targets, through it), and
    scripts/reproduce/unseen_wordings.py rewords the exclusion there."""
    m = EXCLUSION_PREFIX.match(q)
    if m:
        return (m.start(), m.start("neg")), m.span("neg")
    low = q.lower()
    best = None
    for marker in EXCLUSION_INFIX:
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
