"""Boolean expressions over simple questions: the data type, two written forms, a strict parser.

An expression is a tree of four node types:

    Term(text)          one simple question, answered by retrieval
    And(args)           two or more sub-expressions, all must hold
    Or(args)            two or more sub-expressions, any may hold
    Not(pos, neg)       what `pos` finds, minus what `neg` finds (set difference)

NOT is binary on purpose: retrieval cannot enumerate "everything that is not X", so an
exclusion always says what it is excluded from.

Written forms (both accepted by `parse`):

JSON (what the LLM prompt asks for)::

    {"op": "not", "args": [POS, NEG]}
    {"op": "and" | "or", "args": [E1, E2, ...]}        # two or more
    "a simple question"   or   {"q": "a simple question"}

Infix (handy by hand and in tests); questions are double-quoted, operators upper case::

    expr    := or
    or      := and ("OR" and)*
    and     := atom (("AND" | "AND NOT" | "NOT") atom)*
    atom    := "quoted question" | "(" expr ")"

`A AND NOT B` (or `A NOT B`) is Not(A, B); `A AND B AND NOT C` is Not(And(A, B), C).
A NOT with nothing before it is an error.

`parse(text)` first normalises what models actually return: a ```json fence, prose before
or after, a wrapper object such as {"expression": ...}, a trailing full stop. Anything it
cannot read raises `GrammarError` with the reason and, for infix, the position.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Union

MAX_TERMS = 8  # a decomposition of one question into more simple questions than this is not one
MAX_TERM_CHARS = 300


class GrammarError(ValueError):
    """The text is not an expression of this grammar; the message says why."""


@dataclass(frozen=True)
class Term:
    text: str


@dataclass(frozen=True)
class And:
    args: tuple


@dataclass(frozen=True)
class Or:
    args: tuple


@dataclass(frozen=True)
class Not:
    pos: "Expr"
    neg: "Expr"


Expr = Union[Term, And, Or, Not]


# --- inspection / printing ------------------------------------------------------------------

def terms(e: Expr) -> list[str]:
    """The simple questions, left to right (duplicates kept)."""
    if isinstance(e, Term):
        return [e.text]
    if isinstance(e, Not):
        return terms(e.pos) + terms(e.neg)
    return [t for a in e.args for t in terms(a)]


def operators(e: Expr) -> list[str]:
    """Every operator node, outermost first: e.g. ['not', 'and']."""
    if isinstance(e, Term):
        return []
    if isinstance(e, Not):
        return ["not"] + operators(e.pos) + operators(e.neg)
    return [type(e).__name__.lower()] + [o for a in e.args for o in operators(a)]


def to_json(e: Expr):
    if isinstance(e, Term):
        return e.text
    if isinstance(e, Not):
        return {"op": "not", "args": [to_json(e.pos), to_json(e.neg)]}
    return {"op": type(e).__name__.lower(), "args": [to_json(a) for a in e.args]}


def to_infix(e: Expr, top: bool = True) -> str:
    if isinstance(e, Term):
        return json.dumps(e.text, ensure_ascii=False)
    if isinstance(e, Not):
        s = f"{to_infix(e.pos, False)} AND NOT {to_infix(e.neg, False)}"
    else:
        s = f" {type(e).__name__.upper()} ".join(to_infix(a, False) for a in e.args)
    return s if top else f"({s})"


# --- construction with checks -----------------------------------------------------------------

def _term(text, where: str) -> Term:
    if not isinstance(text, str):
        raise GrammarError(f"{where}: a question must be a string, got {type(text).__name__}")
    t = " ".join(text.split())
    if not t:
        raise GrammarError(f"{where}: empty question")
    if len(t) > MAX_TERM_CHARS:
        raise GrammarError(f"{where}: question longer than {MAX_TERM_CHARS} characters")
    return Term(t)


def _flat(cls, args: list[Expr]) -> Expr:
    """And(And(a, b), c) -> And(a, b, c); same for Or."""
    out: list[Expr] = []
    for a in args:
        out.extend(a.args if isinstance(a, cls) else [a])
    return cls(tuple(out))


def _checked(e: Expr) -> Expr:
    n = len(terms(e))
    if n > MAX_TERMS:
        raise GrammarError(f"{n} simple questions; at most {MAX_TERMS} are allowed")
    return e


# --- JSON form --------------------------------------------------------------------------------

OPS = ("and", "or", "not")
WRAPPERS = ("expression", "expr", "query", "decomposition", "result", "answer")


def from_json(obj, where: str = "$") -> Expr:
    if isinstance(obj, str):
        return _term(obj, where)
    if not isinstance(obj, dict):
        raise GrammarError(f"{where}: expected a question string or an object, got {type(obj).__name__}")
    if set(obj) == {"q"} or set(obj) == {"question"}:
        return _term(next(iter(obj.values())), where)
    if "op" not in obj:
        raise GrammarError(f"{where}: an object needs 'op' (and/or/not) and 'args', got keys {sorted(obj)}")
    extra = set(obj) - {"op", "args"}
    if extra:
        raise GrammarError(f"{where}: unexpected keys {sorted(extra)} (only 'op' and 'args')")
    op = obj["op"]
    if not isinstance(op, str) or op.strip().lower() not in OPS:
        raise GrammarError(f"{where}.op: {op!r} is not one of and, or, not")
    op = op.strip().lower()
    args = obj.get("args")
    if not isinstance(args, list):
        raise GrammarError(f"{where}.args: expected a list")
    parsed = [from_json(a, f"{where}.args[{i}]") for i, a in enumerate(args)]
    if op == "not":
        if len(parsed) != 2:
            raise GrammarError(f"{where}: 'not' takes exactly 2 args [kept, excluded], got {len(parsed)}")
        return Not(parsed[0], parsed[1])
    if len(parsed) < 2:
        raise GrammarError(f"{where}: '{op}' takes 2 or more args, got {len(parsed)}")
    return _flat(And if op == "and" else Or, parsed)


# --- infix form -------------------------------------------------------------------------------

_TOKEN = re.compile(r'\s*(?:(?P<q>"(?:[^"\\]|\\.)*")|(?P<lp>\()|(?P<rp>\))|(?P<op>AND|OR|NOT)\b|(?P<bad>\S+))')


def _tokens(text: str) -> list[tuple[str, str, int]]:
    out = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            break
        kind = m.lastgroup
        value = m.group(kind)
        if kind == "bad":
            raise GrammarError(f"at character {m.start(kind)}: unexpected {value[:20]!r} "
                               f"(questions must be double-quoted; operators are AND, OR, NOT)")
        if kind == "q":
            try:
                value = json.loads(value)
            except json.JSONDecodeError:
                raise GrammarError(f"at character {m.start(kind)}: bad string escape") from None
        out.append((kind, value, m.start(kind)))
        pos = m.end()
    return out


def parse_infix(text: str) -> Expr:
    toks = _tokens(text)
    i = 0

    def peek(kind=None, value=None):
        if i >= len(toks):
            return None
        t = toks[i]
        if (kind is None or t[0] == kind) and (value is None or t[1] == value):
            return t
        return None

    def where() -> str:
        return f"at character {toks[i][2]}" if i < len(toks) else "at the end"

    def atom() -> Expr:
        nonlocal i
        t = peek()
        if t is None:
            raise GrammarError(f"{where()}: expected a question or '('")
        if t[0] == "q":
            i += 1
            return _term(t[1], f"at character {t[2]}")
        if t[0] == "lp":
            i += 1
            e = or_expr()
            if not peek("rp"):
                raise GrammarError(f"{where()}: expected ')'")
            i += 1
            return e
        if t[0] == "op" and t[1] == "NOT":
            raise GrammarError(f"{where()}: NOT needs a left side (write A AND NOT B)")
        raise GrammarError(f"{where()}: expected a question or '(', got {t[1]!r}")

    def and_expr() -> Expr:
        nonlocal i
        left = atom()
        parts, negs = [left], []
        while True:
            if peek("op", "AND"):
                i += 1
                if peek("op", "NOT"):
                    i += 1
                    negs.append(atom())
                else:
                    if negs:  # A AND NOT B AND C: keep it unambiguous
                        raise GrammarError(f"{where()}: put AND NOT parts last, or use parentheses")
                    parts.append(atom())
            elif peek("op", "NOT"):
                i += 1
                negs.append(atom())
            else:
                break
        e = parts[0] if len(parts) == 1 else _flat(And, parts)
        if negs:
            e = Not(e, negs[0] if len(negs) == 1 else _flat(Or, negs))
        return e

    def or_expr() -> Expr:
        nonlocal i
        parts = [and_expr()]
        while peek("op", "OR"):
            i += 1
            parts.append(and_expr())
        return parts[0] if len(parts) == 1 else _flat(Or, parts)

    if not toks:
        raise GrammarError("empty expression")
    e = or_expr()
    if i < len(toks):
        raise GrammarError(f"{where()}: unexpected {toks[i][1]!r} after a complete expression")
    return e


# --- normalisation of model output ------------------------------------------------------------

_FENCE = re.compile(r"```[A-Za-z0-9_-]*\s*\n?(.*?)```", re.S)


def _json_candidates(text: str):
    """Every JSON object embedded in `text`, in order (balanced, via raw_decode)."""
    dec = json.JSONDecoder()
    for m in re.finditer(r"\{", text):
        try:
            obj, _ = dec.raw_decode(text, m.start())
        except json.JSONDecodeError:
            continue
        yield obj


def _unwrap(obj):
    if isinstance(obj, dict) and "op" not in obj and len(obj) == 1:
        (key, value), = obj.items()
        if key.lower() in WRAPPERS:
            return value
    return obj


def parse(text: str | None) -> Expr:
    """An expression from raw model output (JSON or infix, possibly fenced or wrapped in prose)."""
    if text is None:
        raise GrammarError("no text (the model returned nothing)")
    raw = text.strip()
    if not raw:
        raise GrammarError("empty answer")
    fenced = _FENCE.findall(raw)
    bodies = [b.strip() for b in fenced] + [raw]
    errors: list[str] = []
    for body in bodies:
        try:
            return _checked(from_json(_unwrap(json.loads(body))))
        except json.JSONDecodeError:
            pass
        except GrammarError as e:
            errors.append(f"JSON: {e}")
        for obj in _json_candidates(body):
            try:
                return _checked(from_json(_unwrap(obj)))
            except GrammarError as e:
                errors.append(f"JSON: {e}")
        # infix: the whole body, then line by line (prose around it), labels like "Expression:" dropped
        lines = [body] + [ln.strip() for ln in body.splitlines() if ln.strip()]
        for ln in lines:
            ln = re.sub(r"^[A-Za-z ]{1,30}:\s*(?=[\"(])", "", ln).rstrip(". ")
            if '"' not in ln:
                continue
            try:
                return _checked(parse_infix(ln))
            except GrammarError as e:
                errors.append(f"infix: {e}")
        if errors:
            break  # the fence held an attempt: report its problems, not the prose around it
    detail = errors[0] if errors else "no JSON object and no quoted questions found"
    raise GrammarError(f"not a Boolean expression ({detail})")
