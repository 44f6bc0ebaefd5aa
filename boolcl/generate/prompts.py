"""The prompts, versioned: changing any wording must change PROMPT_VERSION.

Six kinds of request after the BoolQuestions recipe: a simple question per passage,
one broad ("disjunctive") question that each candidate passage answers on its own,
the three Boolean rewrites (AND / OR / NOT), and the answer check used by the
cyclic-consistency filter. Two more name what the questions are about, for training on
passages a question names (`boolcl.generate.naming`): a group's topic and a passage's
subject. The wording is this project's own.

Every prompt is two chat messages (system + user). The first line of the user
message names the task, so `kind_of` can tell requests apart and `fields_of` can
read the material back out (the offline backend answers from that).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

PROMPT_VERSION = "boolcl-gen-v2"
CANNOT = "CANNOT ANSWER"

SYSTEM = ("You help build a test collection for search engines. You write questions that real users "
          "could type, and you check whether a passage answers a question. Reply with exactly the "
          "requested text and nothing else: no preamble, no numbering, no quotes, no explanation.")

HEADS = {
    "simple": "Task: write one question answered by the passage.",
    "disjunctive": "Task: write one broad question that each passage answers by itself.",
    "and": "Task: narrow a broad question down to one passage.",
    "or": "Task: merge two questions into one question that asks for either.",
    "not": "Task: turn a question with an exclusion into natural language.",
    "answer": "Task: answer a question from one passage, or say that it cannot.",
    "topic": "Task: name the subject that related passages share.",
    "name": "Task: name the subject of one passage.",
}

RULES = {
    "simple": ("Read the passage and ask one specific question that it answers. Someone who has never "
               "seen the passage must understand the question, so name the subject instead of saying "
               "\"the passage\" or \"this text\". Reply with the question only."),
    "disjunctive": ("The passages below are about related subjects. Ask one more general question for "
                    "which every passage, read alone, gives a good answer. Do not refer to the passages "
                    "or to how many there are. Reply with the question only."),
    "and": ("Each passage below answers the broad question. Rewrite the broad question by adding one or "
            "more conditions that only passage {k} satisfies, so that passage {k} still answers it and "
            "none of the other passages does. Keep it one natural question. Reply with the question only."),
    "or": ("Write one natural question that asks for A or B: whoever can answer either of the two "
           "questions can answer it. Keep the specific details of both. Reply with the question only."),
    "not": ("Write one natural question that asks what the first part asks for while plainly leaving out "
            "whatever answers the second part. Keep the exclusion explicit (say \"other than\", "
            "\"excluding\", \"that is not\" or the like). Reply with the question only."),
    "answer": ("Using only the passage, answer the question in one short sentence. The passage answers "
               "only if it meets every condition in the question, exclusions included: a passage about "
               "the very thing the question excludes does not answer it. When the question offers "
               "alternatives joined by \"or\", answering one of them is enough. If the passage does not "
               f"answer the question, reply exactly: {CANNOT}"),
    "topic": ("The passages below are about related subjects. Name, in a short noun phrase of two to eight "
              "words, the subject they have in common, the way a heading in an encyclopedia would (for "
              "example: birds that migrate in winter). Reply with the phrase only."),
    "name": ("Name the subject of the passage below in one to five words, the way the title of an "
             "encyclopedia article would (for example: Barn swallow). Reply with the name only."),
}


@dataclass
class Passage:
    """What a prompt shows of a passage."""

    title: str | None
    text: str


@dataclass
class Fields:
    """The material inside a prompt, as `fields_of` reads it back."""

    kind: str
    passages: list[Passage] = field(default_factory=list)
    questions: dict[str, str] = field(default_factory=dict)
    target: int | None = None  # AND: the passage (1-based) that must remain


def _clean(text: str, limit: int | None = None) -> str:
    text = " ".join(str(text).split())
    if limit and len(text) > limit:
        cut = text[:limit].rsplit(" ", 1)[0]
        text = cut + " ..."
    return text


def _passages(passages: list[Passage], limit: int | None) -> str:
    blocks = []
    for i, p in enumerate(passages, 1):
        title = f" {_clean(p.title)}" if p.title and p.title.strip() else ""
        blocks.append(f"[Passage {i}]{title}\n{_clean(p.text, limit)}")
    return "\n\n".join(blocks)


def _messages(kind: str, body: str) -> list[dict]:
    return [{"role": "system", "content": SYSTEM},
            {"role": "user", "content": f"{HEADS[kind]}\n{body}"}]


def simple(passage: Passage, limit: int | None = None) -> list[dict]:
    return _messages("simple", f"{RULES['simple']}\n\n{_passages([passage], limit)}")


def disjunctive(passages: list[Passage], limit: int | None = None) -> list[dict]:
    return _messages("disjunctive", f"{RULES['disjunctive']}\n\n{_passages(passages, limit)}")


def conjunction(broad: str, passages: list[Passage], target: int, limit: int | None = None) -> list[dict]:
    """AND: `target` is 0-based; the prompt counts passages from 1."""
    rules = RULES["and"].format(k=target + 1)
    return _messages("and", f"{rules}\n\nBroad question: {_clean(broad)}\n\n{_passages(passages, limit)}")


def disjunction(a: str, b: str) -> list[dict]:
    body = (f"{RULES['or']}\n\nA: {_clean(a)}\nB: {_clean(b)}\n"
            f"Logical form: ({_clean(a)}) OR ({_clean(b)})")
    return _messages("or", body)


def negation(broad: str, excluded: str) -> list[dict]:
    body = (f"{RULES['not']}\n\nFirst part: {_clean(broad)}\nSecond part: {_clean(excluded)}\n"
            f"Logical form: ({_clean(broad)}) AND NOT ({_clean(excluded)})")
    return _messages("not", body)


def answer(question: str, passage: Passage, limit: int | None = None) -> list[dict]:
    body = f"{RULES['answer']}\n\nQuestion: {_clean(question)}\n\n{_passages([passage], limit)}"
    return _messages("answer", body)


def topic(passages: list[Passage], limit: int | None = None) -> list[dict]:
    return _messages("topic", f"{RULES['topic']}\n\n{_passages(passages, limit)}")


def name(passage: Passage, limit: int | None = None) -> list[dict]:
    return _messages("name", f"{RULES['name']}\n\n{_passages([passage], limit)}")


def expression(op: str, broad: str | None, simples: list[str]) -> str:
    """The Boolean form a question was made from, for provenance."""
    if op == "and":
        return f"({broad}) AND (only: {simples[0]})"
    if op == "or":
        return f"({simples[0]}) OR ({simples[1]})"
    return f"({broad}) AND NOT ({simples[0]})"


# --- reading prompts back (offline backend, test server) ---------------------------------

_PASSAGE_RE = re.compile(r"\[Passage (\d+)\]([^\n]*)\n(.*?)(?=\n\n\[Passage \d+\]|\Z)", re.S)


def kind_of(messages: list[dict]) -> str | None:
    user = next((m.get("content") or "" for m in messages if m.get("role") == "user"), "")
    first = user.split("\n", 1)[0].strip()
    for kind, head in HEADS.items():
        if first == head:
            return kind
    return None


def _line(body: str, label: str) -> str:
    m = re.search(rf"^{re.escape(label)}: (.*)$", body, re.M)
    return m.group(1).strip() if m else ""


def fields_of(messages: list[dict]) -> Fields | None:
    """The material of a prompt built here; None for anything else."""
    kind = kind_of(messages)
    if kind is None:
        return None
    body = next(m["content"] for m in messages if m.get("role") == "user")
    out = Fields(kind)
    for m in _PASSAGE_RE.finditer(body):
        title = m.group(2).strip() or None
        out.passages.append(Passage(title, m.group(3).strip()))
    if kind == "and":
        out.questions["broad"] = _line(body, "Broad question")
        k = re.search(r"only passage (\d+) satisfies", body)
        out.target = int(k.group(1)) - 1 if k else 0
    elif kind == "or":
        out.questions["a"], out.questions["b"] = _line(body, "A"), _line(body, "B")
    elif kind == "not":
        out.questions["broad"], out.questions["excluded"] = _line(body, "First part"), _line(body, "Second part")
    elif kind == "answer":
        out.questions["question"] = _line(body, "Question")
    return out
