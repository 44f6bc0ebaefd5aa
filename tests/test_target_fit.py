"""scripts/reproduce/target_fit.py: where the decomposition target ranks, and how close a model
puts NOT questions to it."""
from __future__ import annotations

import pytest
import torch

from boolcl.train.decomposition import teacher_targets
from conftest import dump_jsonl, load_script, write_set

CORPUS = [
    {"docid": "p1", "doc": "Rivers: water flowing to the sea."},
    {"docid": "p2", "doc": "Lakes: still water inland."},
    {"docid": "p3", "doc": "Mountains: high ground."},
]
QUESTIONS = [
    {"qid": "n1", "question": "water bodies, but not lakes", "question_type": "not",
     "positive_ctxs": [{"passage_id": "p1"}], "negative_ctxs": [{"passage_id": "p2"}]},
    {"qid": "n2", "question": "what is high ground?", "question_type": "not",  # the rules do not split it
     "positive_ctxs": [{"passage_id": "p3"}], "negative_ctxs": [{"passage_id": "p1"}]},
    {"qid": "a1", "question": "rivers and lakes", "question_type": "and",
     "positive_ctxs": [{"passage_id": "p1"}, {"passage_id": "p2"}]},
]


@pytest.fixture
def data(tmp_path):
    return write_set(tmp_path / "data", CORPUS, QUESTIONS)


def test_ranking_figures_follow_the_vectors():
    script = load_script("scripts/reproduce/target_fit")
    ids = [f"p{i}" for i in range(1, 13)]  # twelve passages on the axes: two can fall out of the top ten
    passages = torch.eye(12)
    questions = [QUESTIONS[0], {**QUESTIONS[0], "qid": "n3"}]  # answer p1, excluded p2
    queries = torch.zeros(2, 12)
    queries[0, :2] = torch.tensor([0.5, 1.0])  # p2 first, the answer second
    queries[1, :3] = torch.tensor([1.0, -1.0, 0.2])  # the answer first, p2 last of twelve
    mrr, negr = script.ranking_figures(queries, passages, ids, questions)
    assert mrr == pytest.approx(100 * (0.5 + 1.0) / 2, abs=1e-9)
    assert negr == pytest.approx(100 * (1.0 + 0.0) / 2, abs=1e-9)
    # a question without an excluded passage is left out of NegRecall, not counted as zero
    mrr, negr = script.ranking_figures(queries[:1], passages, ids, [QUESTIONS[2]])
    assert mrr == pytest.approx(100.0) and negr != negr  # nan


def test_only_questions_the_rules_split_are_scored(data):
    script = load_script("scripts/reproduce/target_fit")
    chosen, parts = script.split_not_questions(QUESTIONS, data / "eval.jsonl")
    assert [q["qid"] for q in chosen] == ["n1"]
    assert parts == [("Water bodies?", "Lakes?")]  # the rules' own wording of each part
    with pytest.raises(SystemExit, match=r"eval.jsonl: none of its 1 NOT questions splits"):
        script.split_not_questions([QUESTIONS[1], QUESTIONS[2]], data / "eval.jsonl")


def test_the_start_fits_its_own_target_as_the_table_says(data, tiny_model_dir, capsys):
    """Run end to end on a tiny model: the start's own row and a --model row of the same model agree,
    and the fit is the cosine to boolcl's own teacher_targets."""
    script = load_script("scripts/reproduce/target_fit")
    spec = str(tiny_model_dir)
    assert script.main([str(data), "--start", spec, "--target", "0.5,1.25", "--target", "1,0",
                        "--model", spec, spec]) == 0
    out = capsys.readouterr().out
    assert "1 of 2 NOT questions split by the rules" in out
    assert "| target 0.5,1.25 |" in out and "| target 1,0 |" in out and "| the question as it is |" in out
    start_row = next(line for line in out.splitlines() if "(the start)" in line)
    model_row = next(line for line in out.splitlines() if line.startswith(f"| {tiny_model_dir.name} (2) |"))
    embed = script.encoder(spec, 128)
    target = teacher_targets(embed, ["water bodies, but not lakes"], [("Water bodies?", "Lakes?")],
                             drop=1.25, anchor=0.5, normalize=True)
    expected = float(torch.nn.functional.cosine_similarity(embed(["water bodies, but not lakes"]), target).mean())
    assert start_row.endswith(f"| {expected:.3f} |")
    assert model_row == f"| {tiny_model_dir.name} (2) | {expected:.3f} ± 0.000 |"


def test_bad_input_names_the_file(data, tmp_path):
    script = load_script("scripts/reproduce/target_fit")
    (data / "eval.jsonl").write_text('{"qid": "n1", "question": \n', encoding="utf-8")
    with pytest.raises(SystemExit, match=r"eval.jsonl:1"):
        script.main([str(data), "--no-ranking"])
    with pytest.raises(SystemExit):
        script.main([str(data), "--target", "0.5"])  # argparse: ANCHOR,DROP
    dump_jsonl(data / "eval.jsonl", [{**QUESTIONS[0], "negative_ctxs": [{"passage_id": "gone"}]}])
    with pytest.raises(SystemExit, match=r"names passage gone that .*corpus.jsonl does not hold"):
        script.main([str(data), "--start", "offline-default"])


def test_whole_set_keeps_unsplit_questions_as_they_are(data, tiny_model_dir):
    """--whole-set ranks every NOT question: a target row differs from the question's own vector only
    where the rules split the question."""
    script = load_script("scripts/reproduce/target_fit")
    rows = [q for q in QUESTIONS if q["question_type"] == "not"]
    chosen, parts = script.split_not_questions(QUESTIONS, data / "eval.jsonl")
    embed = script.encoder(str(tiny_model_dir), 128)
    vectors = script.query_vectors(embed, rows, chosen, parts, [(0.5, 1.25)])
    as_is, target = vectors["the question as it is"], vectors["target 0.5,1.25"]
    assert target.shape == as_is.shape == (2, as_is.shape[1])
    assert torch.allclose(target[1], as_is[1])  # "what is high ground?": not split
    expected = teacher_targets(embed, [rows[0]["question"]], parts, drop=1.25, anchor=0.5, normalize=True)[0]
    assert torch.allclose(target[0], torch.nn.functional.normalize(expected, dim=-1), atol=1e-6)
    assert not torch.allclose(target[0], as_is[0])


def test_several_starts_give_mean_and_spread(data, tiny_model_dir, capsys):
    script = load_script("scripts/reproduce/target_fit")
    spec = str(tiny_model_dir)
    assert script.main([str(data), "--whole-set", "--start", spec, spec]) == 0
    out = capsys.readouterr().out
    assert "ranked by 2 models, mean ± std over 3 passages: all 2 NOT questions (the 1 the rules" in out
    row = next(line for line in out.splitlines() if line.startswith("| target 0.5,1.25 |"))
    assert row.count("± 0.0") == 2  # the same model twice: no spread
    assert "mean cos" not in out  # the fit compares with one start's targets
    with pytest.raises(SystemExit, match="give a single --start"):
        script.main([str(data), "--start", spec, spec, "--model", spec])
