"""benchmarks/bench_not_aware.py: what the NOT-aware additions cost, against the paper-style recipe.

Only the figures' structure is checked (which parts were timed, and the ratios' arithmetic),
never a speed: timings belong in the benchmark's own output, not in a test."""
import json
import os
import subprocess
import sys

import pytest
from conftest import ROOT, load_script


def test_the_paper_style_recipe_is_the_reference_and_not_plus_times_its_set_up(tiny_model_dir, tmp_path):
    out, scratch = tmp_path / "bench.json", tmp_path / "tmp"
    scratch.mkdir()
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_not_aware.py"), "--only", "paper-not",
                           "not_plus", "--steps", "3", "--warmup", "1", "--batch", "8", "--launch", "--json", str(out),
                           f"model={tiny_model_dir}", "train.decomposition.warmup_steps=5"],
                          capture_output=True, text=True, env={**os.environ, "TMPDIR": str(scratch)})
    assert done.returncode == 0, done.stderr[-3000:]
    assert not list(scratch.iterdir())  # its working folders, its children's too, are gone
    variants = json.loads(out.read_text())["variants"]
    assert list(variants) == ["paper-not", "not_plus"]
    paper, plus = variants["paper-not"], variants["not_plus"]
    # paper-not is the ablation's paper-style recipe (every addition off), not_plus the recipe
    ablation = load_script("scripts/reproduce/ablation")
    assert paper["overrides"] == ablation.VARIANTS["paper-not"]
    assert set(ablation.switched_off(*ablation.SWITCHES)) <= set(paper["overrides"])
    assert plus["overrides"] == []
    assert paper["window"] == plus["window"] == [2, 3]
    # the paper-style recipe has none of the additions' set-up; not_plus has each part
    assert "start_table_s" not in paper and "decomposition_s" not in paper
    assert plus["start_table_s"] > 0 and plus["decomposition_s"] > 0 and plus["warmup_s"] > 0
    assert "warmup_s" not in paper
    for r in (paper, plus):
        assert r["time_per_step_ratio"] == pytest.approx(r["s_per_step"] / paper["s_per_step"], rel=1e-12)
        assert r["triples_per_s"] == pytest.approx(8 / r["s_per_step"], rel=1e-9)
        for mode in ("cold", "warm"):
            assert len(r[f"launch_setups_{mode}_s"]) == 1 and r[f"launch_setup_{mode}_s"] > 0
            assert r[f"launch_setup_{mode}_ratio"] == pytest.approx(
                r[f"launch_setup_{mode}_s"] / paper[f"launch_setup_{mode}_s"], rel=1e-12)
    assert paper["setup_ratio"] == 1.0
    assert "cold:" in done.stdout and "warm:" in done.stdout  # the printed table has both launches


def test_each_addition_alone_is_a_valid_recipe_with_only_it_on():
    """`+NAME`: one addition on, the rest off; a sub-setting of the decomposition term (the warm-up)
    keeps the term on, else it would measure nothing."""
    from boolcl.config import compose

    bench = load_script("benchmarks/bench_not_aware")
    recipe = compose([bench.RECIPE]).train
    for name, overrides in bench.VARIANTS.items():
        t = compose([bench.RECIPE, *overrides]).train  # the config's own validation runs here
        on = {"retention": t.retention.weight > 0, "cluster-batches": t.group_by_cluster,
              "decomposition": t.decomposition.weight > 0,
              "warmup": t.decomposition.warmup_steps > 0, "and-or": list(t.operators) != ["not"],
              "topics": t.named.topics, "named-or": t.named.or_questions > 0}
        assert set(on) == set(bench.SWITCHES)
        if name.startswith("+"):
            alone = name[1:]
            assert {k for k, v in on.items() if v} == {alone, *([bench.NEEDS[alone]] if alone in bench.NEEDS else [])}
        if name == "+warmup":
            assert t.decomposition.warmup_steps == recipe.decomposition.warmup_steps
