"""Validate the hand-written cluster files that the bundled sample is built from.

Usage: python scripts/maintainer/check_sample_source.py data/sample_source/part_*.jsonl
Each line of a part file is one topic cluster (see data/sample_source/README.md).
"""
from __future__ import annotations

import json
import re
import sys

PASSAGES_PER_CLUSTER = (6, 12)  # training clusters have 6; evaluation clusters are extended to 12
COUNTS = {"and": 3, "or": 3, "not": 4}


def check_cluster(c: dict, where: str) -> list[str]:
    errs: list[str] = []
    for field in ("cluster", "topic", "passages", "simple", "disjunctive", "and", "or", "not"):
        if field not in c:
            errs.append(f"{where}: missing field {field!r}")
    if errs:
        return errs
    if not re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", c["cluster"]):
        errs.append(f"{where}: cluster slug {c['cluster']!r} must be lowercase-with-dashes")
    keys = [p.get("key") for p in c["passages"]]
    if len(keys) not in PASSAGES_PER_CLUSTER:
        errs.append(f"{where}: expected 6 or 12 passages, got {len(keys)}")
    if len(set(keys)) != len(keys):
        errs.append(f"{where}: duplicate passage keys {keys}")
    for p in c["passages"]:
        for f in ("key", "title", "text"):
            if not isinstance(p.get(f), str) or not p.get(f).strip():
                errs.append(f"{where}: passage {p.get('key')!r} needs a non-empty {f!r}")
        n = len(str(p.get("text", "")).split())
        if not 40 <= n <= 130:
            errs.append(f"{where}: passage {p.get('key')!r} has {n} words (want 40..130)")
    if set(c["simple"]) != set(keys):
        errs.append(f"{where}: 'simple' must have exactly one question per passage key")
    questions = list(c["simple"].values()) + [c["disjunctive"]]
    for op, n in COUNTS.items():
        items = c[op]
        if len(items) != n:
            errs.append(f"{where}: expected {n} {op!r} questions, got {len(items)}")
        for i, q in enumerate(items):
            if not isinstance(q.get("question"), str) or not q["question"].strip().endswith("?"):
                errs.append(f"{where}: {op}[{i}] needs a 'question' ending with '?'")
            questions.append(q.get("question", ""))
            if op == "and" and q.get("positive") not in keys:
                errs.append(f"{where}: and[{i}].positive must be one passage key")
            if op == "or":
                pos = q.get("positives", [])
                if len(pos) != 2 or len(set(pos)) != 2 or not set(pos) <= set(keys):
                    errs.append(f"{where}: or[{i}].positives must be two different passage keys")
            if op == "not" and q.get("excluded") not in keys:
                errs.append(f"{where}: not[{i}].excluded must be one passage key")
    if len(set(questions)) != len(questions):
        errs.append(f"{where}: a question text is repeated")
    return errs


def main(paths: list[str]) -> int:
    errs: list[str] = []
    seen: set[str] = set()
    total = 0
    for path in paths:
        with open(path, encoding="utf-8") as fh:
            for lineno, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                where = f"{path}:{lineno}"
                try:
                    c = json.loads(line)
                except json.JSONDecodeError as e:
                    errs.append(f"{where}: invalid JSON ({e})")
                    continue
                errs += check_cluster(c, where)
                if c.get("cluster") in seen:
                    errs.append(f"{where}: cluster slug {c.get('cluster')!r} used twice")
                seen.add(c.get("cluster"))
                total += 1
    for e in errs:
        print(e)
    print(f"{total} clusters checked, {len(errs)} problems")
    return 1 if errs else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
