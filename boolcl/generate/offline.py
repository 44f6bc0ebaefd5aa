"""`llm.backend=offline`: a deterministic, rule-based stand-in for the LLM. No network.

It answers the same prompts as a real model (it reads their material back with
`prompts.fields_of`), so the whole pipeline — grouping, composition, the cyclic
filter, mining, the report — runs anywhere, in the demo and in the tests. It is
clearly weaker than an LLM: simple and broad questions, a group's topic and a
passage's name come from the bundled sample's hand-written material where the passages
are the sample's, and from templates elsewhere (shared words, a passage's first words);
AND / OR / NOT questions are templates; the answer check is word overlap. Every example it
makes says so in its provenance and in the report.
"""
from __future__ import annotations

import hashlib
import json
import re
from functools import lru_cache

from boolcl.data.loaders import SAMPLE_DIR
from boolcl.generate import prompts
from boolcl.llm.client import Completion
from boolcl.words import OFFLINE_NOT_MARKERS

OFFLINE_MODEL = "boolcl-offline-rules-v1"
QUALITY_NOTE = ("offline stand-in (rules and templates, no LLM): fine for demos and tests, "
                "lower quality than LLM-generated data")

_STOP = set("""a an the of in on at to for from by with and or but not no nor is are was were be been being has have
had do does did can could should would will shall may might must this that these those it its it's they them their
there here which what who whom whose where when why how some any all each every other than such as into onto
about above below over under after before during between among through per also very most more much many one
ones known called same own only just apart excluding counting leaving whatever answers particular specifically
aside besides except""".split())


def _stem(w: str) -> str:
    for suf in ("ies", "es", "s", "ing", "ed"):
        if len(w) > len(suf) + 3 and w.endswith(suf):
            return w[: -len(suf)] + ("y" if suf == "ies" else "")
    return w


def content(text: str) -> set[str]:
    return {_stem(w) for w in re.findall(r"[a-z0-9]+", text.lower()) if len(w) > 2 and w not in _STOP}


def coverage(part: str, passage: str) -> float:
    """Share of the part's content words (compared on their first five letters) found in the passage."""
    words = {w[:5] for w in content(part)}
    if not words:
        return 0.0
    return len(words & {w[:5] for w in content(passage)}) / len(words)


def _h(*parts: str) -> int:
    return int(hashlib.sha1("\x1f".join(parts).encode()).hexdigest()[:8], 16)


def _core(q: str) -> str:
    return q.strip().rstrip("?").rstrip(" .").strip()


def _lower_first(s: str) -> str:
    return s[:1].lower() + s[1:] if s[:2] != s[:2].upper() else s


@lru_cache(maxsize=1)
def _sample_material() -> tuple[dict, dict, dict, dict, dict]:
    """(doc text -> docid, docid -> simple question, cluster -> broad question, cluster -> topic,
    docid -> title) from the bundled sample."""

    by_text, simple, broad, topic, title = {}, {}, {}, {}, {}
    try:
        for line in (SAMPLE_DIR / "corpus.jsonl").read_text(encoding="utf-8").splitlines():
            if line.strip():
                row = json.loads(line)
                by_text[" ".join(row["doc"].split())] = row["docid"]
                if row.get("title"):
                    title[row["docid"]] = row["title"]
        for line in (SAMPLE_DIR / "train.jsonl").read_text(encoding="utf-8").splitlines():
            if line.strip():
                row = json.loads(line)
                if row["question_type"] == "simple" and len(row["positive_ctxs"]) == 1:
                    simple[row["positive_ctxs"][0]["passage_id"]] = row["question"]
        for line in (SAMPLE_DIR / "clusters.jsonl").read_text(encoding="utf-8").splitlines():
            if line.strip():
                row = json.loads(line)
                if row.get("disjunctive"):
                    broad[row["cluster"]] = row["disjunctive"]
                if row.get("topic"):
                    topic[row["cluster"]] = row["topic"]
    except (OSError, ValueError, KeyError):
        pass
    return by_text, simple, broad, topic, title


def _docid(p: prompts.Passage) -> str | None:
    text = p.text[:-4] if p.text.endswith(" ...") else p.text
    return _sample_material()[0].get(" ".join(text.split()))


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in re.split(r"(?<=[.!?])\s+", text) if s.strip()]


def simple_question(p: prompts.Passage) -> str:
    docid = _docid(p)
    if docid and docid in _sample_material()[1]:
        return _sample_material()[1][docid]
    if p.title:
        return f"What is {p.title} known for?"
    words = [w for w in re.findall(r"[A-Za-z][\w'-]*", p.text)][:6]
    return f"What is known about {' '.join(words)}?"


def _sample_cluster(passages: list[prompts.Passage]) -> str | None:
    """The sample's cluster when every passage is one of that cluster's, else None."""
    ids = [_docid(p) for p in passages]
    clusters = {i.rsplit("/", 1)[0] for i in ids if i}
    return clusters.pop() if len(clusters) == 1 and None not in ids else None


def _shared_words(passages: list[prompts.Passage]) -> list[str]:
    """Up to three content words every passage has (longest first), in alphabetical order."""
    shared = set.intersection(*(content(p.text) for p in passages)) if passages else set()
    return sorted(sorted(shared, key=lambda w: (-len(w), w))[:3])


def broad_question(passages: list[prompts.Passage]) -> str:
    found = _sample_material()[2].get(_sample_cluster(passages))
    if found:
        return found
    words = _shared_words(passages)
    if words:
        return f"What is there to know about {', '.join(words)}?"
    return "What topics do these subjects share?"


def topic_phrase(passages: list[prompts.Passage]) -> str:
    found = _sample_material()[3].get(_sample_cluster(passages))
    if found:
        return found
    words = _shared_words(passages)
    return " and ".join(words) if words else "related subjects"


def passage_name(p: prompts.Passage) -> str:
    if p.title:
        return p.title
    docid = _docid(p)
    if docid and docid in _sample_material()[4]:
        return _sample_material()[4][docid]
    words = re.findall(r"[A-Za-z][\w'-]*", p.text)[:3]
    return " ".join(words) or "Untitled"


_AUX = {"is", "are", "was", "were", "has", "have", "had", "can", "could", "will", "would"}


def noun_phrase(q: str) -> str | None:
    """'Which river flows past X?' -> 'the river that flows past X'; None when no rule fits."""
    c = _core(q)
    m = re.match(r"(?i)which ([\w-]+(?: [\w-]+){0,2})'s (.+)$", c)
    if m:
        return f"the {m.group(1)} whose {m.group(2)}"
    words = c.split()
    if len(words) < 3 or words[0].lower() != "which":
        return None
    rest = words[1:]
    for j in range(1, min(4, len(rest))):
        w = rest[j]
        if w in _AUX:
            return f"the {' '.join(rest[:j])} that {' '.join(rest[j:])}"
        verb_like = w.islower() and w.isalpha() and (w.endswith("s") or w.endswith("ed")) and not w.endswith("ss")
        nxt = rest[j + 1] if j + 1 < len(rest) else ""
        next_verb_like = nxt.islower() and nxt.isalpha() and (nxt.endswith("s") or nxt.endswith("ed"))
        if verb_like and not (next_verb_like and j + 1 < 4):
            return f"the {' '.join(rest[:j])} that {' '.join(rest[j:])}"
    return None


def compose_not(broad: str, excluded: str) -> str:
    core = _core(broad)
    np = noun_phrase(excluded)
    if np is None:
        return f"{core}, leaving out whatever answers \"{_core(excluded)}\"?"
    forms = [f"{core}, other than {np}?", f"{core}, excluding {np}?", f"Apart from {np}, {_lower_first(core)}?",
             f"{core}, not counting {np}?"]
    return forms[_h(broad, excluded) % len(forms)]


def compose_and(broad: str, target_question: str) -> str:
    np = noun_phrase(target_question)
    if np is None:
        return f"{_core(broad)}, in particular the one that answers \"{_core(target_question)}\"?"
    return f"{_core(broad)}, in particular {np}?"


def compose_or(a: str, b: str) -> str:
    return f"{_core(a)}, or {_lower_first(_core(b))}?"


def judge(question: str, passage: prompts.Passage) -> str:
    """Word-overlap answer check: an exclusion the passage matches, or too little overlap, is a no."""
    text = f"{passage.title or ''} {passage.text}"
    q = _core(question)
    main, excluded = q, None
    m = OFFLINE_NOT_MARKERS.search(q)
    if m:
        before, after = q[: m.start()].strip(" ,"), q[m.end():].strip(" ,")
        if not before:  # "Apart from X, what ...": the exclusion ends at the first comma
            excluded, _, main = after.partition(",")
        else:
            main, excluded = before, after
    if excluded is not None and coverage(excluded, text) >= 0.6:
        return prompts.CANNOT
    ok = False
    if ", in particular " in main:
        base, constraint = main.split(", in particular ", 1)
        ok = coverage(constraint, text) >= 0.6 and coverage(base, text) >= 0.2
    elif ", or " in main:
        ok = any(coverage(alt, text) >= 0.6 for alt in main.split(", or "))
    else:
        ok = coverage(main, text) >= (0.2 if excluded is not None else 0.5)
    if not ok:
        return prompts.CANNOT
    words = content(q)
    best = max(_sentences(passage.text) or [passage.text], key=lambda s: len(content(s) & words))
    return " ".join(best.split()[:30])


def respond(messages: list[dict]) -> str:
    """The offline answer to one of our prompts (also what the test server says by default)."""
    f = prompts.fields_of(messages)
    if f is None:
        return "I can only help with the generator's own prompts."
    if f.kind == "simple":
        return simple_question(f.passages[0])
    if f.kind == "disjunctive":
        return broad_question(f.passages)
    if f.kind == "and":
        target = f.passages[f.target or 0] if f.passages else prompts.Passage(None, "")
        return compose_and(f.questions["broad"], simple_question(target))
    if f.kind == "or":
        return compose_or(f.questions["a"], f.questions["b"])
    if f.kind == "not":
        return compose_not(f.questions["broad"], f.questions["excluded"])
    if f.kind == "topic":
        return topic_phrase(f.passages)
    if f.kind == "name":
        return passage_name(f.passages[0]) if f.passages else "Untitled"
    return judge(f.questions["question"], f.passages[0]) if f.passages else prompts.CANNOT


class OfflineBackend:
    name = "offline"
    model = OFFLINE_MODEL
    where = "offline"

    async def complete(self, messages: list[dict]) -> Completion:
        text = respond(messages)
        prompt_chars = sum(len(m.get("content") or "") for m in messages)
        return Completion(text, "stop", prompt_chars // 4 + 4, len(text) // 4 + 1, estimated=True)
