"""scripts/scope_diagnostics.py on a report folder written by hand: figures per wording and per
head-firing group, checked against values worked out here."""
import json
import subprocess
import sys

import torch
from conftest import ROOT

from boolcl.pooling import install
from boolcl.retrieval.models import load_model

sys.path.insert(0, str(ROOT / "scripts"))
from scope_diagnostics import wording_of  # noqa: E402


def test_each_unseen_wording_is_recognised_and_nothing_else():
    assert wording_of("What big cats are there, passing over the striped ones?") == "{keep}, passing over {drop}?"
    assert wording_of("Which snakes, with the sea snakes ruled out?") == "{keep}, with {drop} ruled out?"
    assert wording_of("Which snakes other than sea snakes?") is None


def write_report(root, model_dir, tmp_path):
    questions = [("a", "Which snakes, skipping the sea snakes?"), ("b", "Which cats, skipping lions?"),
                 ("c", "Which birds, passing over owls?"), ("d", "Which birds fly?")]
    (root / "data" / "unseen").mkdir(parents=True)
    (root / "data" / "unseen" / "eval.jsonl").write_text("".join(
        json.dumps({"qid": q, "question": text, "question_type": "and" if q == "d" else "not"}) + "\n"
        for q, text in questions))
    for run in ("plain", "headed"):
        (root / "unseen" / "runs" / run).mkdir(parents=True)
        (root / "unseen" / "runs" / run / "results.json").write_text(json.dumps({"per_query": {
            "MRR@10": {"a": 1.0, "b": 0.5, "c": 0.25, "d": 1.0},
            "NegRecall@10": {"a": 0.0, "b": 1.0, "c": 1.0, "d": 0.0}}}))
    nevir = tmp_path / "nevir.json"
    nevir.write_text(json.dumps([{"id": f"p{i}", "q1": "Who had love for music?", "q2": "Who had no love for music?",
                                  "doc1": "x", "doc2": "y"} for i in range(4)]))
    (root / "nevir" / "runs" / "headed").mkdir(parents=True)
    (root / "nevir" / "runs" / "headed" / "results.json").write_text(json.dumps({
        "data": {"source": str(nevir)}, "per_query": {"PairedAcc": {"p0": 1.0, "p1": 0.0, "p2": 0.0, "p3": 1.0}}}))
    model = load_model(str(model_dir))
    head = install(model, drop=1.0, hidden=4)
    with torch.no_grad():  # every token excluded: the head fires on every question
        head.head.weight.zero_()
        head.head.bias.copy_(torch.tensor([0.0, 0.0, 10.0]))
    model.save(str(root / "runs" / "headed"))


def test_the_tables_group_and_average_as_computed_by_hand(tiny_model_dir, tmp_path):
    root = tmp_path / "report"
    write_report(root, tiny_model_dir, tmp_path)
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "scope_diagnostics.py"), str(root),
                          "--runs", "plain", "headed"], capture_output=True, text=True, check=True).stdout
    plain, headed = out.split("unseen wordings, headed:")
    # skipping: a and b -> MRR (1 + 0.5) / 2, NegRecall (0 + 1) / 2; passing over: c alone; d is not NOT
    assert "| `{keep}, skipping {drop}?` | 2 | 75.00 | 50.00 | - |" in plain
    assert "| `{keep}, passing over {drop}?` | 1 | 25.00 | 100.00 | - |" in plain
    assert "nevir, plain: no results" in plain
    assert "| `{keep}, skipping {drop}?` | 2 | 75.00 | 50.00 | 100% |" in headed
    assert "| both | 4 | 50.00 |" in headed and "| neither |" not in headed
    (tmp_path / "nevir.json").unlink()
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "scope_diagnostics.py"), str(root),
                          "--runs", "headed"], capture_output=True, text=True, check=True).stdout
    assert "are not a file here" in out
