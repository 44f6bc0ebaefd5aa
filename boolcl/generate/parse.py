"""Turn what an LLM really returns into one clean question or a verdict, never an exception.

`question(text)` returns a `Parsed`: the question (or None) plus the reason it was
dropped and the normalisations applied, so the report can count both. `phrase(text)` does
the same for a short name (a group's topic, a passage's subject). `verdict(text)` reads the
answer check of the cyclic filter as answered / cannot / unusable.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from boolcl.words import NEGATION_CUES

MAX_WORDS = 60
MAX_CHARS = 400
MIN_WORDS = 3

_THINK = re.compile(r"<think>.*?(</think>|\Z)", re.S | re.I)
_FENCE = re.compile(r"```[a-zA-Z]*")
_BULLET = re.compile(r"^\s*(?:\(?\d{1,2}[.):]\s*|\(?[a-zA-Z][.)]\s+|[-*\u2022>]+\s*|#+\s*)")
_LABEL = re.compile(r"^\s*(?:\*\*)?\s*(?:simple |broad |rewritten |new |final |natural |merged |combined )?"
                    r"(?:question|q|query|answer)\s*\d*\s*(?:\*\*)?\s*[:\-.]\s*(?:\*\*)?\s*", re.I)
_PREAMBLE = re.compile(r"^\s*(?:sure|certainly|of course|okay|ok|absolutely|here(?:'s| is| are)|below is)\b[^:?]*[:.!]\s*",
                       re.I)
_QUOTES = "\"'\u201c\u201d\u2018\u2019`\u00ab\u00bb*_"
_REFUSAL = re.compile(r"^\s*(?:i'?m sorry|i am sorry|sorry\b|i apologi[sz]e|i (?:cannot|can't|can ?not|am unable|"
                      r"won't|will not|am not able)|as an ai\b|unfortunately\b|i do not feel)", re.I)
_NO_ANSWER = re.compile(
    r"cannot answer|can'?t answer|can ?not answer|cannot be answered|can'?t be answered|not answerable|"
    r"unanswerable|no answer\b|(?:passage|text|paragraph|document|it|this)\s+(?:does|did)(?: not|n'?t)\s+"
    r"(?:\w+\s+)?(?:answer|contain|say|mention|provide|include|specify|state|address|discuss|describe|give|"
    r"cover|tell)|not (?:mentioned|stated|specified|provided|given|covered|"
    r"addressed|discussed)\b|no (?:relevant )?information|(?:insufficient|not enough) information|"
    r"^\s*(?:n/?a|none|unknown|no)\s*[.!]?\s*$", re.I)
_WH = {"what", "which", "who", "whom", "whose", "where", "when", "why", "how", "is", "are", "was", "were", "do",
       "does", "did", "can", "could", "should", "would", "will", "has", "have", "had", "in", "at", "on", "for",
       "from", "to", "of", "by", "under", "during", "among", "besides", "apart", "aside", "other", "excluding",
       "name", "list", "give", "identify", "tell", "describe", "explain", "find"}
_SELF_REF = re.compile(r"\b(?:the|this|these|above|given|provided|following) (?:passage|passages|text|paragraph|"
                       r"article|excerpt|document)s?\b", re.I)

DISJUNCTION_CUES = re.compile(r"\b(?:or|either|whether)\b", re.I)


@dataclass
class Parsed:
    value: str | None
    reason: str | None = None  # why it was dropped; None when kept
    notes: list[str] = field(default_factory=list)  # normalisations applied

    @property
    def ok(self) -> bool:
        return self.value is not None


def _strip_wrappers(line: str, notes: list[str]) -> str:
    before = line
    for _ in range(3):
        line = _BULLET.sub("", line, count=1)
        line = _LABEL.sub("", line, count=1)
    if line != before:
        notes.append("numbering or label")
    stripped = line.strip().strip(_QUOTES).strip()
    # a quoted question followed by its own punctuation, e.g. "What is X?".
    stripped = re.sub(r"^[\"'\u201c\u2018](.*\?)[\"'\u201d\u2019]\s*\.?$", r"\1", stripped)
    if stripped != line.strip():
        notes.append("quotes or markup")
    return stripped


def _first_question(text: str, notes: list[str]) -> str | None:
    """The first question-like sentence among lines; notes when there were several."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    found: list[str] = []
    for ln in lines:
        ln2 = _PREAMBLE.sub("", ln, count=1) if not ln.rstrip().endswith("?") or ":" in ln else ln
        if ln2 != ln:
            if not ln2.strip():
                notes.append("preamble")
                continue
            notes.append("preamble")
        ln2 = _strip_wrappers(ln2, notes)
        if not ln2:
            continue
        parts = [p.strip() for p in re.split(r"(?<=\?)\s+(?=[\"'\u201c(]?[A-Z0-9])", ln2) if p.strip()]
        found.extend(p for p in parts if p.endswith("?") or p is parts[-1])
    questions = [f for f in found if "?" in f]
    if len(questions) > 1:
        notes.append("several questions: kept the first")
        return questions[0]
    if questions:
        if len(found) > 1:
            notes.append("extra text around the question")
        return questions[0]
    return found[0] if found else None


def question(text: str | None, *, finish_reason: str | None = None) -> Parsed:
    """One clean, stand-alone question out of an LLM reply, or a counted reason to drop it."""
    notes: list[str] = []
    if text is None or not str(text).strip():
        return Parsed(None, "empty answer")
    raw = str(text)
    if _THINK.search(raw):
        raw = _THINK.sub(" ", raw)
        notes.append("reasoning block removed")
        if not raw.strip():
            return Parsed(None, "empty answer", notes)
    raw = _FENCE.sub("\n", raw).replace("\r", "\n")
    if _REFUSAL.match(raw):
        return Parsed(None, "refusal", notes)
    if _NO_ANSWER.search(raw) and "?" not in raw:
        return Parsed(None, "says it cannot", notes)
    q = _first_question(raw, notes)
    if not q:
        return Parsed(None, "empty answer", notes)
    q = " ".join(q.split()).strip(_QUOTES + " ")
    if finish_reason == "length" and not q.endswith("?"):
        return Parsed(None, "cut off (max_tokens)", notes)
    if "?" in q:
        q = q[: q.index("?") + 1] if q.count("?") == 1 else q
    else:
        first = re.sub(r"[^a-z]", "", q.split()[0].lower()) if q.split() else ""
        if first not in _WH:
            return Parsed(None, "not a question", notes)
        q = q.rstrip(" .!:;") + "?"
        notes.append("question mark added")
    words = q.split()
    if len(words) > MAX_WORDS or len(q) > MAX_CHARS:
        return Parsed(None, "too long", notes)
    if len(words) < MIN_WORDS:
        return Parsed(None, "too short", notes)
    if _SELF_REF.search(q):
        return Parsed(None, "refers to the passage", notes)
    q = q[0].upper() + q[1:]
    return Parsed(q, None, notes)


MAX_PHRASE_WORDS = 10
_PHRASE_LABEL = re.compile(r"^\s*(?:\*\*)?\s*(?:topic|subject|name|title|heading)\s*(?:\*\*)?\s*:\s*", re.I)


def phrase(text: str | None, *, finish_reason: str | None = None) -> Parsed:
    """One short name out of an LLM reply (its first non-empty line, labels and quotes removed),
    or a counted reason to drop it."""
    notes: list[str] = []
    if text is None or not str(text).strip():
        return Parsed(None, "empty answer")
    raw = _FENCE.sub("\n", _THINK.sub(" ", str(text))).replace("\r", "\n")
    if _REFUSAL.match(raw) or _NO_ANSWER.search(raw):
        return Parsed(None, "refusal")
    if finish_reason == "length":
        return Parsed(None, "cut off (max_tokens)")
    line = next((ln for ln in raw.splitlines() if ln.strip()), "")
    cleaned = _PHRASE_LABEL.sub("", _PREAMBLE.sub("", _BULLET.sub("", line, count=1), count=1), count=1)
    if cleaned != line:
        notes.append("label removed")
    name = " ".join(cleaned.split()).rstrip(" .!;:").strip(_QUOTES + " ").rstrip(" .!;:")
    if not name:
        return Parsed(None, "empty answer", notes)
    if "?" in name:
        return Parsed(None, "a question, not a name", notes)
    if len(name.split()) > MAX_PHRASE_WORDS:
        return Parsed(None, "too long", notes)
    if _SELF_REF.search(name):
        return Parsed(None, "refers to the passage", notes)
    return Parsed(name, None, notes)


def check_operator(op: str, q: str, broad: str | None = None) -> str | None:
    """Why a composed question lost its operator, or None when it looks right."""
    if op == "not" and not NEGATION_CUES.search(q):
        return "negation lost"
    if op == "or" and not DISJUNCTION_CUES.search(q):
        return "disjunction lost"
    if op == "and" and broad is not None and _norm(q) == _norm(broad):
        return "no constraint added"
    return None


def _norm(text: str) -> str:
    return " ".join(re.sub(r"[^\w\s]", " ", text.lower()).split())


def key(text: str) -> str:
    """A normal form for spotting duplicate questions."""
    return _norm(text)


ANSWERED, CANNOT, UNUSABLE = "answered", "cannot", "unusable"


def verdict(text: str | None) -> tuple[str, str | None]:
    """(answered | cannot | unusable, reason) for one answer of the filter's check."""
    if text is None or not str(text).strip():
        return UNUSABLE, "empty answer"
    raw = _THINK.sub(" ", str(text)).strip()
    if not raw:
        return UNUSABLE, "empty answer"
    head = raw[:300]
    if _NO_ANSWER.search(head):
        return CANNOT, None
    if _REFUSAL.match(head):
        return UNUSABLE, "refusal"
    return ANSWERED, None
