"""The README's main job, end to end with the real packaged MiniLM on the bundled sample."""
import json
import re
import subprocess
import sys

import pytest


@pytest.mark.slow
def test_demo_prints_before_after_and_writes_a_loadable_checkpoint(tmp_path):
    from sentence_transformers import SentenceTransformer

    # the README's command cut to 6 steps at 64 tokens (128 to score), without periodic evaluation or
    # checkpoints:
    # the test checks what the demo prints and writes, not how far two epochs move the model (the
    # README's table is the full command's)
    res = subprocess.run([sys.executable, "-m", "boolcl.cli", "demo", "train.max_steps=6", "train.eval_every=0",
                          "train.save_every=0", "train.max_length=64", "eval.max_length=128"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=900, env={**__import__("os").environ, "COLUMNS": "160"})
    assert res.returncode == 0, res.stderr[-3000:]
    out = res.stdout
    runs = list((tmp_path / "checkpoints").iterdir())
    assert len(runs) == 1
    run = runs[0]
    model = SentenceTransformer(str(run))  # a plain SentenceTransformer folder
    assert model.encode(["a question"]).shape == (1, 384)
    assert (run / "config.yaml").read_text().startswith("name: tiny")
    results = json.loads((run / "results.json").read_text())
    rows = {}
    for line in out.splitlines():
        cells = [c.strip() for c in line.split("│") if c.strip()]
        if cells and cells[0] in ("base", "trained"):
            rows[cells[0]] = cells[1:]
    assert set(rows) == {"base", "trained"}, out
    order = [f"{m}@10/{g}" for m in ("MRR", "NegRecall") for g in ("ALL", "AND", "OR", "NOT")]
    for name, head in (("base", results["base"]["headline"]), ("trained", results["headline"])):
        assert rows[name] == [f"{head[key]:.2f}" for key in order], name  # the table is results.json
    assert results["model"]["fingerprint"] != results["base"]["model"]["fingerprint"]
    assert re.search(r"checkpoint: .*checkpoints/tiny-", out)
