"""The sample's held-out NOT questions, reworded with exclusion words that boolcl never trains on.

    python scripts/reproduce/unseen_wordings.py OUT            # writes OUT/eval.jsonl and OUT/corpus.jsonl
    boolcl evaluate MODEL data=OUT eval.k=10

The NOT-aware recipe trains on exclusions worded as the training questions and the
decomposer's rules word them; this set asks how far what it learns carries to exclusion words
it never saw. Each NOT question of the sample's evaluation split is split by the rules into its
kept question and its excluded part, and joined again through one of UNSEEN_WORDINGS (chosen by
a fixed seed), none of which is in the rules' marker list or the offline generator's.
Passages and labels are unchanged.
"""
from __future__ import annotations

import argparse
import json
import random
import shutil
from pathlib import Path

from boolcl.data.loaders import SAMPLE_DIR
from boolcl.logic.rules import negation_span
from boolcl.words import UNSEEN_WORDINGS

SAMPLE = SAMPLE_DIR


def reword(question: str, rng: random.Random) -> str | None:
    span = negation_span(question)
    if span is None:
        return None
    (m0, _), (x0, x1) = span
    if m0 == 0:  # "Besides X, which Y?"
        keep = question[x1:].lstrip(" ,").rstrip("?. ")
        keep = keep[:1].upper() + keep[1:]
    else:
        keep = question[:m0].rstrip(" ,")
    return rng.choice(UNSEEN_WORDINGS).format(keep=keep, drop=question[x0:x1].strip(" ,"))


def build(out: Path, seed: int = 0) -> tuple[int, int]:
    """Write the set to `out` (eval.jsonl, corpus.jsonl); return (questions written, left out)."""
    rng = random.Random(seed)
    rows, skipped = [], 0
    for line in (SAMPLE / "eval.jsonl").read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        if row["question_type"] != "not":
            continue
        question = reword(row["question"], rng)
        if question is None:
            skipped += 1
            continue
        rows.append(row | {"question": question})
    out.mkdir(parents=True, exist_ok=True)
    shutil.copy(SAMPLE / "corpus.jsonl", out / "corpus.jsonl")
    (out / "eval.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return len(rows), skipped


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", type=Path)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    written, skipped = build(args.out, args.seed)
    print(f"{written} NOT questions reworded ({skipped} the rules cannot split, left out) -> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
