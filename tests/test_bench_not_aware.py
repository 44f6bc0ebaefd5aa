"""benchmarks/bench_not_aware.py: what the NOT-aware additions cost, against the paper-style recipe.

Only the figures' structure is checked (which parts were timed, and the ratios' arithmetic),
never a speed: timings belong in the benchmark's own output, not in a test."""
import json
import subprocess
import sys

import pytest
from conftest import ROOT, load_script


def test_the_paper_style_recipe_is_the_reference_and_not_plus_times_its_set_up(tiny_model_dir, tmp_path):
    out = tmp_path / "bench.json"
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_not_aware.py"), "--only", "paper-not",
                           "not_plus", "--steps", "3", "--warmup", "1", "--batch", "8", "--launch", "--json", str(out),
                           f"model={tiny_model_dir}"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
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
    assert plus["start_table_s"] > 0 and plus["decomposition_s"] > 0
    for r in (paper, plus):
        assert r["time_per_step_ratio"] == pytest.approx(r["s_per_step"] / paper["s_per_step"], rel=1e-12)
        assert r["triples_per_s"] == pytest.approx(8 / r["s_per_step"], rel=1e-9)
        for mode in ("cold", "warm"):
            assert len(r[f"launch_setups_{mode}_s"]) == 1 and r[f"launch_setup_{mode}_s"] > 0
            assert r[f"launch_setup_{mode}_ratio"] == pytest.approx(
                r[f"launch_setup_{mode}_s"] / paper[f"launch_setup_{mode}_s"], rel=1e-12)
    assert paper["setup_ratio"] == 1.0
    assert "cold:" in done.stdout and "warm:" in done.stdout  # the printed table has both launches
