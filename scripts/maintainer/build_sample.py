"""Build the bundled sample (boolcl/data/sample/) from the hand-written clusters.

    python scripts/maintainer/build_sample.py            # rewrite the sample
    python scripts/maintainer/build_sample.py --check    # fail if the committed sample is stale

Clusters extended to twelve passages form the evaluation split, those with six the
training pool (they alternate within each source file, so both cover every domain);
no cluster is in both.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "data" / "sample_source"
TARGET = ROOT / "boolcl" / "data" / "sample"
sys.path.insert(0, str(Path(__file__).resolve().parent))
from check_sample_source import check_cluster  # noqa: E402


def load_clusters() -> list[dict]:
    clusters = []
    for path in sorted(SOURCE.glob("part_*.jsonl")):
        rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        for i, c in enumerate(rows):
            errs = check_cluster(c, f"{path.name}:{i + 1}")
            if errs:
                raise SystemExit("\n".join(errs))
            c["split"] = "eval" if len(c["passages"]) == 12 else "train"
            clusters.append(c)
    return clusters


def pid(c: dict, key: str) -> str:
    return f"{c['cluster']}/{key}"


def ctx(c: dict, keys) -> list[dict]:
    return [{"passage_id": pid(c, k)} for k in keys]


def boolean_rows(c: dict) -> list[dict]:
    """AND/OR/NOT rows labelled as in BoolQuestions: the other passages of the cluster are negatives."""
    keys = [p["key"] for p in c["passages"]]
    rows = []
    for i, q in enumerate(c["and"]):
        rows.append(dict(qid=f"{c['cluster']}/and-{i}", question=q["question"], question_type="and",
                         positive_ctxs=ctx(c, [q["positive"]]),
                         negative_ctxs=ctx(c, [k for k in keys if k != q["positive"]]),
                         provenance={"disjunctive": c["disjunctive"], "constrained_to": q["positive"]}))
    for i, q in enumerate(c["or"]):
        rows.append(dict(qid=f"{c['cluster']}/or-{i}", question=q["question"], question_type="or",
                         positive_ctxs=ctx(c, q["positives"]),
                         negative_ctxs=ctx(c, [k for k in keys if k not in q["positives"]]),
                         provenance={"simple_questions": [c["simple"][k] for k in q["positives"]]}))
    for i, q in enumerate(c["not"]):
        rows.append(dict(qid=f"{c['cluster']}/not-{i}", question=q["question"], question_type="not",
                         positive_ctxs=ctx(c, [k for k in keys if k != q["excluded"]]),
                         negative_ctxs=ctx(c, [q["excluded"]]),
                         provenance={"disjunctive": c["disjunctive"], "excluded_question": c["simple"][q["excluded"]]}))
    for r in rows:
        r["provenance"].update(cluster=c["cluster"], operator=r["question_type"], source="hand-written sample")
    return rows


def build() -> dict[str, str]:
    clusters = load_clusters()
    corpus, evals, train, index = [], [], [], []
    for c in clusters:
        keys = [p["key"] for p in c["passages"]]
        for p in c["passages"]:
            corpus.append({"docid": pid(c, p["key"]), "doc": p["text"], "title": p["title"]})
        index.append({"cluster": c["cluster"], "topic": c["topic"], "split": c["split"],
                      "docids": [pid(c, k) for k in keys], "disjunctive": c["disjunctive"]})
        rows = boolean_rows(c)
        if c["split"] == "eval":
            evals += [{k: v for k, v in r.items() if k != "provenance"} for r in rows]
            continue
        for k in keys:  # the atomic questions stand in for the original (non-Boolean) training data
            train.append(dict(qid=f"{c['cluster']}/simple-{k}", question=c["simple"][k], question_type="simple",
                              positive_ctxs=ctx(c, [k]), negative_ctxs=[],
                              hard_negative_ctxs=ctx(c, [o for o in keys if o != k]),
                              provenance={"cluster": c["cluster"], "operator": "simple",
                                          "source": "hand-written sample"}))
        for r in rows:
            train.append({**r, "hard_negative_ctxs": []})
    dump = lambda rows: "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)  # noqa: E731
    return {"corpus.jsonl": dump(corpus), "eval.jsonl": dump(evals), "train.jsonl": dump(train),
            "clusters.jsonl": dump(index)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="compare with the committed files instead of writing")
    args = ap.parse_args()
    files = build()
    if args.check:
        stale = [n for n, text in files.items() if not (TARGET / n).is_file() or (TARGET / n).read_text() != text]
        if stale:
            print(f"stale sample files: {', '.join(stale)}; run python scripts/maintainer/build_sample.py")
            return 1
        print("sample is up to date")
        return 0
    TARGET.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (TARGET / name).write_text(text, encoding="utf-8")
        print(f"{TARGET / name}: {text.count(chr(10))} rows")
    return 0


if __name__ == "__main__":
    sys.exit(main())
