"""scripts/reproduce/leave_one_out.py: the table by which an addition keeps its place."""
import json
import statistics

import numpy as np
import pytest
from conftest import load_script

from boolcl.evaluate.significance import paired_test

TYPES = {"and": 30, "or": 30, "not": 40}


def write_run(out, dataset, name, rng, shift: float, neg_shift: float = 0.0):
    """A results.json as `boolcl evaluate` writes it (the keys the script reads), questions' values
    drawn around a common base so runs pair question by question."""
    base = np.random.default_rng(0)
    qtypes, mrr, neg = {}, {}, {}
    for kind, n in TYPES.items():
        for i in range(n):
            q = f"{kind}-{i}"
            qtypes[q] = kind
            mrr[q] = float(np.clip(base.uniform(0.2, 0.8) + shift + rng.normal(0, 0.05), 0, 1))
            if kind == "not":
                neg[q] = float(np.clip(base.uniform(0.2, 0.8) + neg_shift + rng.normal(0, 0.05), 0, 1))
    headline = {f"MRR@10/{k.upper()}": 100 * np.mean([mrr[q] for q in mrr if qtypes[q] == k]) for k in TYPES}
    headline["NegRecall@10/NOT"] = 100 * np.mean(list(neg.values()))
    folder = out / dataset / "runs" / name
    folder.mkdir(parents=True)
    (folder / "results.json").write_text(json.dumps({"headline": headline, "question_types": qtypes,
                                                     "per_query": {"MRR@10": mrr, "NegRecall@10": neg}}))
    return headline, mrr


def test_the_table_marks_a_loss_beyond_the_spread_and_agrees_with_boolcls_paired_test(tmp_path, capsys):
    script = load_script("scripts/reproduce/leave_one_out")
    rng = np.random.default_rng(1)
    heads, values = {}, {}
    for name, shift, neg_shift in [("recipe", 0.0, 0.0), ("no-big", -0.2, 0.2), ("no-small", 0.003, 0.0)]:
        for seed in (1, 2, 3):
            heads[name, seed], values[name, seed] = write_run(tmp_path, "wnbool", f"{name}-s{seed}", rng,
                                                              shift, neg_shift)
    assert script.main([str(tmp_path), "recipe", "no-big", "no-small"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0] == "| run | WN-Bool AND | OR | NOT | NegR NOT ↓ |"  # only the sets the folder has
    rows = {line.split(" | ")[0].lstrip("| "): line.strip("| ").split(" | ")[1:] for line in lines[2:]}
    ref_and = [heads["recipe", s]["MRR@10/AND"] for s in (1, 2, 3)]
    assert rows["recipe"][0] == f"{statistics.mean(ref_and):.1f} ± {statistics.stdev(ref_and):.1f}"
    assert all(c.startswith("**−") and c.endswith("‡**") for c in rows["no-big"][:3])  # MRR@10 lower: worse
    assert rows["no-big"][3].startswith("**+") and rows["no-big"][3].endswith("‡**")  # NegRecall@10 higher: worse
    assert not any(c.startswith("**") for c in rows["no-small"])

    def mean_over_seeds(name, kind):
        return {q: np.mean([values[name, s][q] for s in (1, 2, 3)]) for q in values[name, 1] if q.startswith(kind)}

    p = paired_test(mean_over_seeds("recipe", "and"), mean_over_seeds("no-small", "and"), samples=script.SAMPLES).p_value
    mark = "‡" if p < 0.01 else "†" if p < 0.05 else ""
    delta = statistics.mean(heads["no-small", s]["MRR@10/AND"] for s in (1, 2, 3)) - statistics.mean(ref_and)
    assert rows["no-small"][0] == f"{delta:+.1f}".replace("-", "−") + mark


def test_a_missing_run_is_named(tmp_path):
    script = load_script("scripts/reproduce/leave_one_out")
    rng = np.random.default_rng(2)
    for seed in (1, 2, 3):
        write_run(tmp_path, "sample", f"recipe-s{seed}", rng, 0.0)
    write_run(tmp_path, "sample", "no-x-s1", rng, 0.0)
    with pytest.raises(SystemExit, match=r"sample/runs/no-x-s2/results.json: no such evaluation"):
        script.main([str(tmp_path), "recipe", "no-x"])
    with pytest.raises(SystemExit, match="none of wnbool, foldoc, gcide, sample, unseen has runs"):
        script.main([str(tmp_path / "empty"), "recipe", "no-x"])
