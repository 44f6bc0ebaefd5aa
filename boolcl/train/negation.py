"""Negated statements: minimal pairs of passages that differ by a negation, one question for each.

An exclusion ("X other than Y") asks the retriever to leave a passage out; a negated
statement ("Einstein did not enjoy it at that age") asks it to tell two nearly identical
passages apart by one word. Mean pooling over a hundred tokens barely moves when "not"
is added, so a bi-encoder scores both passages alike, and NevIR's paired accuracy falls below
random. `train.negation.pairs=N` turns N passages of the training pool into two items each:

    question about sentence S of passage P     positive P,  hard negative P' (S negated in it)
    the same question negated (about S')       positive P', hard negative P

("What are hardened deposits of digestive fluid?" / "What are not hardened deposits of
digestive fluid?"), so the only way to rank both right is to read the negation, in the
question and in the passage.
S is negated by rule: "not" goes in after the first auxiliary or form of "be" ("is" -> "is not",
"can" -> "cannot"), or an existing negation is taken out ("does not" -> "does"). No labels,
no LLM, and nothing from NevIR: only the training pool's passages, which never include the
evaluation clusters'. Measured on the sample, training on these leaves NevIR where it was.

`train.negation.source` reads the pairs instead, in NevIR's layout (`written_pairs`): the ones
written for boolcl, or a user's own. Those raise it (docs/method.md, "Negated statements: two
runs, one model").
"""
from __future__ import annotations

import hashlib
import random
import re
from pathlib import Path

from boolcl.data.nevir import file_names, load_nevir
from boolcl.errors import ConfigError
from boolcl.train.mixing import Item

QUESTION_TYPE = "statement"  # not "not": these rows get no exclusion, decomposition or retention, and the
# scope head learns them as ordinary throughout or not at all (train.negation.head), never in its warm-up

# minimal pairs written for boolcl in NevIR's layout (train.negation.source=written; never NevIR's own)
WRITTEN = Path(__file__).resolve().parent.parent / "data" / "negation_pairs.jsonl"

_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"'(])")
_AUXILIARY = ("is", "are", "was", "were", "can", "could", "will", "would", "should", "may", "might", "must",
              "does", "do", "did", "has been", "have been", "had been")
_ADD = re.compile(r"\b(" + "|".join(a.replace(" ", r"\s+") for a in _AUXILIARY) + r")\b(?!\s+not\b)", re.IGNORECASE)
_CONTRACTED = {"isn't": "is", "aren't": "are", "wasn't": "was", "weren't": "were", "can't": "can",
               "couldn't": "could", "won't": "will", "wouldn't": "would", "shouldn't": "should",
               "doesn't": "does", "don't": "do", "didn't": "did", "hasn't": "has", "haven't": "have",
               "hadn't": "had", "mustn't": "must"}
_REMOVE = re.compile(r"\b(cannot|" + "|".join(re.escape(c) for c in _CONTRACTED) + r"|(?:"
                     + "|".join(sorted({a.split()[0] for a in _AUXILIARY})) + r")\s+not)\b", re.IGNORECASE)


def negate(sentence: str) -> str | None:
    """The sentence with its polarity flipped at its first negation or auxiliary, or None when
    the rules find neither (a sentence with only a main verb: "Attacks begin after meals")."""
    m = _REMOVE.search(sentence)
    if m:
        word = m.group(1)
        low = word.lower()
        plain = "can" if low == "cannot" else _CONTRACTED.get(low) or re.sub(r"\s+not$", "", word, flags=re.I)
        plain = plain[:1].upper() + plain[1:] if word[:1].isupper() else plain
        return sentence[:m.start()] + plain + sentence[m.end():]
    m = _ADD.search(sentence)
    if m is None:
        return None
    word = m.group(1)
    first, *rest = word.split()
    added = ("cannot" if word.lower() == "can" else "Cannot" if word == "Can"
             else " ".join([first, "not", *rest]))  # "has been" -> "has not been"
    return sentence[:m.start()] + added + sentence[m.end():]


def question_pair(sentence: str, flipped: str) -> tuple[str, str]:
    """The two versions as questions about their subject, asked the same way: "Gallstones are
    hardened deposits." / "... are not ..." -> "What are hardened deposits?" / "What are not
    hardened deposits?". Both keep the words from the auxiliary on, so they differ only by the
    negation, as the passages do, and neither contains its passage's sentence word for word."""
    i = next((k for k, (a, b) in enumerate(zip(sentence, flipped)) if a != b), min(len(sentence), len(flipped)))
    start = max(sentence.rfind(" ", 0, i), 0)  # the word the edit is in...
    if i and sentence[i - 1] == " ":  # ...or, when the edit starts a word, the auxiliary before it
        start = max(sentence.rfind(" ", 0, i - 1), 0)
    ask = lambda text: "What " + text[start:].strip().rstrip(".!;:") + "?"  # noqa: E731
    return ask(sentence), ask(flipped)


def _passage_id(passage_id: str, sentence: int) -> str:
    return f"{passage_id}#negated-{sentence}-" + hashlib.blake2b(passage_id.encode(), digest_size=4).hexdigest()


def statement_pairs(items: list[Item], n: int, seed: int, questions: bool = True) -> list[Item]:
    """2 x min(n, passages that have a sentence the rules can negate) items, from the
    positives of `items` (the training mix, so no evaluation passage), in an order fixed by `seed`.
    The queries are `question_pair`'s questions, or with `questions=False` the two sentences."""
    passages = sorted({(pid, text) for it in items for pid, text in zip(it.positive_ids, it.positives)})
    rng = random.Random(f"negation/{seed}")
    rng.shuffle(passages)
    out: list[Item] = []
    for pid, text in passages:
        if len(out) >= 2 * n:
            break
        sentences = _SENTENCE.split(text.strip())
        choices = [(i, s, negate(s)) for i, s in enumerate(sentences) if len(s.split()) >= 5 and not s.endswith("?")]
        choices = [c for c in choices if c[2] is not None]
        if not choices:
            continue
        i, s, flipped = rng.choice(choices)
        other = " ".join(sentences[:i] + [flipped] + sentences[i + 1:])
        oid, group = _passage_id(pid, i), f"negation/{pid}"
        q, q_flipped = question_pair(s, flipped) if questions else (s, flipped)
        out.append(Item(q, [pid], [text], [oid], [other], QUESTION_TYPE, n_explicit=1, group=group))
        out.append(Item(q_flipped, [oid], [other], [pid], [text], QUESTION_TYPE, n_explicit=1, group=group))
    return out


def written_pairs(source: str, n: int, seed: int, split: str = "train") -> tuple[list[Item], str]:
    """2 x min(n, available) items from minimal pairs in NevIR's layout ({id, q1, doc1, q2, doc2}:
    doc1 answers q1, doc2 answers q2), drawn in an order fixed by `seed` (n < 0: all of them).

    `source` is anything data/nevir.py reads: "written" (the 640 pairs bundled with boolcl,
    written for it, none from NevIR: docs/data-formats.md, "Written negation pairs"), a .json/.jsonl file, a
    folder, or a hub id with `split` (NevIR's own training split, `orionweller/NevIR`, for
    users who can reach the hub). Rule negations cover one auxiliary; written pairs move a
    negation, swap an antonym or negate a verb, which is what NevIR's passages do. NevIR's test
    split (asked for, or a file named as the authors name it) is refused: it is the benchmark.
    Also returns where the pairs came from."""
    label = source
    if source == "written":
        source = str(WRITTEN)
    elif split == "test":
        raise ConfigError("train.negation.split=test: NevIR's test split is the benchmark; train on your own "
                          "pairs, `written` or the hub's `train` split")
    pairs = load_nevir(source, split)
    if label != "written" and Path(pairs.source).name in file_names("test"):
        raise ConfigError(f"train.negation.source={label}: {pairs.source} is NevIR's test split, the benchmark; "
                          "train on your own pairs, `written` or the hub's `train` split")
    chosen = list(pairs.pairs)
    random.Random(f"negation-written/{seed}").shuffle(chosen)
    if n >= 0:
        chosen = chosen[:n]
    out: list[Item] = []
    for p in chosen:
        group = f"negation/{p.id}"
        id1, id2 = f"{group}#1", f"{group}#2"
        out.append(Item(p.q1, [id1], [p.doc1], [id2], [p.doc2], QUESTION_TYPE, n_explicit=1, group=group))
        out.append(Item(p.q2, [id2], [p.doc2], [id1], [p.doc1], QUESTION_TYPE, n_explicit=1, group=group))
    return out, "written" if label == "written" else pairs.source


def without_statements(items: list[Item]) -> list[Item]:
    """The items less the pairs' questions: what the scope head's warm-up and practice sentences
    are drawn from, since both are about exclusions."""
    return [it for it in items if it.question_type != QUESTION_TYPE]


def within_length(items: list[Item], tokenizer, max_length: int) -> list[Item]:
    """The pairs whose two passages still differ once cut to `max_length` tokens: a negation
    past the cut leaves two identical passages, one labelled right and one wrong."""
    keep = []
    for a, b in zip(items[::2], items[1::2]):
        ids = tokenizer([a.positives[0], b.positives[0]], truncation=True, max_length=max_length)["input_ids"]
        if ids[0] != ids[1]:
            keep += [a, b]
    return keep
