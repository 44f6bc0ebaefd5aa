"""What a model ranks first, per question type: an answer, an excluded passage, a passage the
question names that is neither, or another passage.

    python scripts/reproduce/first_ranked.py DATA RUN [RUN ...]

DATA is a folder in the project's layout (corpus.jsonl, eval.jsonl) whose passages carry a
"title" or read "<name>, <name>: <text>" (WN-Bool-dev, FOLDOC-Bool-dev). RUN is a folder of
`boolcl evaluate` on DATA (its run.trec); runs named `<variant>-s<seed>` form one row, their
counts averaged over the seeds. A question names a passage when one of the passage's names
(three letters or more) is a word of the question, in the singular or the plural.

Why: whether the passage a question names is an answer depends on the set's operator. In
WN-Bool-dev's OR questions ("Serologists or immunologists") the named passages are answers; in
its AND and NOT questions ("Give an example of a wrestler that is not a sumo wrestler") they are
the categories asked about, and the answers are their members. A model that ranks named
passages higher or lower moves OR against AND and NOT, whatever it learnt of the operators.
"""
from __future__ import annotations

import re
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from excluded_named import passage_name, read_rows  # noqa: E402  (boolcl's JSONL reader; a passage's name)
from lost_answers import first_passages  # noqa: E402  (the first passage of each question in run.trec)

KINDS = ("answer", "excluded", "named, neither", "other")


def passage_names(row: dict) -> list[str]:
    """The passage's names: its title, or each comma-separated name before the first colon."""
    return [n.strip() for n in passage_name(row).replace("_", " ").split(",") if len(n.strip()) >= 3]


def names_in(question: str, names: list[str]) -> bool:
    """Whether one of `names` is a word of `question` (case-insensitive), as it is or in a plural."""
    text = question.lower()
    for name in names:
        forms = [re.escape(name) + "(?:s|es)?"] + ([re.escape(name[:-1]) + "ies"] if name.endswith("y") else [])
        if re.search(r"\b(?:%s)\b" % "|".join(forms), text):
            return True
    return False


def kind_of(question: dict, pid: str, names: dict[str, list[str]]) -> str:
    if pid in {str(c["passage_id"]) for c in question.get("positive_ctxs", [])}:
        return "answer"
    if pid in {str(c["passage_id"]) for c in question.get("negative_ctxs", [])}:
        return "excluded"
    return "named, neither" if names_in(str(question.get("question", "")), names.get(pid, [])) else "other"


def group_runs(runs: list[str]) -> dict[str, list[Path]]:
    """Row name -> its folders: `<variant>-s<seed>` grouped as `boolcl compare` groups seeds."""
    from boolcl.evaluate.runs import seed_row  # imported here: it brings torch

    groups: dict[str, list[Path]] = defaultdict(list)
    for given in runs:
        folder = Path(given)
        groups[seed_row(folder.name)].append(folder)
    return dict(groups)


def count(data: Path, groups: dict[str, list[Path]]) -> dict[str, dict[str, dict[str, float]]]:
    """Row -> question type -> kind -> percent of that type's questions, seeds averaged."""
    names = {str(r["docid"]): passage_names(r) for r in read_rows(data / "corpus.jsonl")}
    questions = {str(q["qid"]): q for q in read_rows(data / "eval.jsonl")}
    if not questions:
        raise SystemExit(f"{data / 'eval.jsonl'}: no questions")
    sizes: dict[str, int] = defaultdict(int)
    for q in questions.values():
        sizes[str(q.get("question_type"))] += 1
    table: dict[str, dict[str, dict[str, float]]] = {}
    for row, folders in groups.items():
        tally: dict[str, dict[str, float]] = defaultdict(lambda: dict.fromkeys(KINDS, 0.0))
        for folder in folders:
            first = first_passages(folder, set(questions))
            missing = sorted(set(questions) - set(first))
            if missing:
                raise SystemExit(f"{folder}: run.trec ranks nothing for question {missing[0]}: was it scored on {data}?")
            for qid, pid in first.items():
                tally[str(questions[qid].get("question_type"))][kind_of(questions[qid], pid, names)] += 1
        table[row] = {t: {k: 100 * v / (sizes[t] * len(folders)) for k, v in kinds.items()}
                      for t, kinds in sorted(tally.items())}
    return table


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("data", help="the data folder the runs were scored on")
    ap.add_argument("runs", nargs="+", help="folders of `boolcl evaluate` on DATA (results.json, run.trec)")
    args = ap.parse_args(argv)
    groups = group_runs(args.runs)
    table = count(Path(args.data), groups)
    print("| run (seeds) | type | " + " | ".join(f"first: {k} (%)" for k in KINDS) + " |")
    print("| --- | --- | " + " | ".join("---:" for _ in KINDS) + " |")
    for row, types in table.items():
        for t, kinds in types.items():
            print(f"| {row} ({len(groups[row])}) | {t.upper()} | " + " | ".join(f"{kinds[k]:.1f}" for k in KINDS) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
