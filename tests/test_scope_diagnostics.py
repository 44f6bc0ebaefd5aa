"""scripts/scope_diagnostics.py on a report folder written by hand: figures per wording and per
head-firing group, checked against values worked out here."""
import json

import torch
from conftest import load_script

from boolcl.pooling import install
from boolcl.retrieval.models import load_model

diagnostics = load_script("scope_diagnostics")
SAMPLE_EVAL, main, misses_table, wording_of = (diagnostics.SAMPLE_EVAL, diagnostics.main, diagnostics.misses_table,
                                               diagnostics.wording_of)


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


def test_the_tables_group_and_average_as_computed_by_hand(tiny_model_dir, tmp_path, capsys):
    root = tmp_path / "report"
    write_report(root, tiny_model_dir, tmp_path)
    main([str(root), "--runs", "plain", "headed"])
    out = capsys.readouterr().out
    plain, headed = out.split("unseen wordings, headed:")
    # skipping: a and b -> MRR (1 + 0.5) / 2, NegRecall (0 + 1) / 2; passing over: c alone; d is not NOT
    assert "| `{keep}, skipping {drop}?` | 2 | 75.00 | 50.00 | - |" in plain
    assert "| `{keep}, passing over {drop}?` | 1 | 25.00 | 100.00 | - |" in plain
    assert "nevir, plain: no results" in plain
    assert "| `{keep}, skipping {drop}?` | 2 | 75.00 | 50.00 | 100% |" in headed
    assert "| both | 4 | 50.00 |" in headed and "| neither |" not in headed
    # q2 says "no", q1 nothing that negates: 4 questions each, and the head fires on all of them
    assert "| with a negation word | 4 | 100% |" in headed and "| without one | 4 | 100% |" in headed
    (tmp_path / "nevir.json").unlink()
    main([str(root), "--runs", "headed"])
    out = capsys.readouterr().out
    assert "are not a file here" in out


def test_the_sample_misses_are_sorted_by_what_ranks_first(tmp_path):
    nots = [json.loads(x) for x in SAMPLE_EVAL.read_text().splitlines() if '"question_type": "not"' in x]
    a, b, c, d = nots[:4]
    other = next(r for r in nots if r["qid"].split("/")[0] != a["qid"].split("/")[0])
    lines = []
    for rank, (row, doc, score) in enumerate([  # a: a positive first (no miss); b: its excluded passage;
            (a, a["positive_ctxs"][0]["passage_id"], 0.9), (b, b["negative_ctxs"][0]["passage_id"], 0.8),
            (c, other["positive_ctxs"][0]["passage_id"], 0.2), (d, other["negative_ctxs"][0]["passage_id"], 0.4)]):
        lines += [f"{row['qid']} Q0 {doc} 1 {score} x", f"{row['qid']} Q0 {row['positive_ctxs'][1]['passage_id']} 2 0.1 x"]
    (tmp_path / "sample" / "runs" / "x").mkdir(parents=True)
    (tmp_path / "sample" / "runs" / "x" / "run.trec").write_text("\n".join(lines) + "\n")
    table = misses_table(tmp_path, "x")
    assert table[0].startswith("sample, x: of 4 NOT questions, 3 have something other than a positive first")
    # c and d have passages of another cluster first (scores 0.2 and 0.4: median 0.3); b its excluded passage
    assert "| a passage of another cluster | 2 | 0.300 |" in table
    assert "| the excluded passage | 1 | 0.800 |" in table
    (tmp_path / "sample" / "runs" / "x" / "run.trec").unlink()
    assert "no ranking" in misses_table(tmp_path, "x")[0]
