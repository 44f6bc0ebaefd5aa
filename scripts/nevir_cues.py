"""Could counting negation words pass NevIR? How the pairs' questions and documents differ in them.

    python scripts/nevir_cues.py ../shared/nevir          # a folder with NevIR_test.json, or the file

A retriever that only knew whether a text negates (a polarity channel beside the topic) could
tell a pair's two documents apart only where they differ in how many negation words they hold
(`boolcl.words.NEGATION_CUES`: not, no, never, n't, without, ...), and it would pass such a pair
only if the question with more of them went with the document with more of them. This counts
the pairs of each kind: no model, no training. If the questions go with the documents no more
often one way than the other, such a channel cannot beat random ordering on NevIR, and what
the benchmark asks is which statement is negated, not whether one is (docs/not_plus.md,
"Negated statements").
"""
from __future__ import annotations

import argparse
from collections import Counter

from boolcl.data.nevir import load_nevir
from boolcl.words import NEGATION_CUES

KINDS = ("documents alike", "questions alike", "with", "against")


def cues(text: str) -> int:
    return len(NEGATION_CUES.findall(text))


def kind(q1: str, doc1: str, q2: str, doc2: str) -> str:
    """`with`: the question with more negation words answers the document with more; `against`:
    the other way; `documents alike` / `questions alike`: no difference to go by."""
    docs, questions = cues(doc1) - cues(doc2), cues(q1) - cues(q2)
    if not docs:
        return "documents alike"
    if not questions:
        return "questions alike"
    return "with" if (docs > 0) == (questions > 0) else "against"


def count(pairs) -> Counter:
    return Counter(kind(p.q1, p.doc1, p.q2, p.doc2) for p in pairs)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("nevir", help="NevIR_test.json or the folder holding it")
    args = ap.parse_args(argv)
    pairs = load_nevir(args.nevir).pairs
    counts = count(pairs)
    print(f"NevIR pairs: {len(pairs)}; counted negation words: boolcl.words.NEGATION_CUES")
    print("| the pair's documents and questions | pairs |\n| --- | ---: |")
    labels = {"documents alike": "documents with as many negation words", "questions alike":
              "documents differ, questions with as many", "with": "the question with more goes with the document with more",
              "against": "the question with more goes with the document with fewer"}
    for name in KINDS:
        print(f"| {labels[name]} | {counts[name]} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
