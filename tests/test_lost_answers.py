"""scripts/reproduce/lost_answers.py: the questions of one type a trained model answers worse than
its base model, seeds averaged per question, with what each model ranks first."""
from __future__ import annotations

import pytest

from conftest import dump_jsonl, load_script, write_evaluation as evaluation, write_set

CORPUS = [
    {"docid": "cm", "doc": "choirmaster: the musical director of a choir"},
    {"docid": "ch", "doc": "chorister: a singer in a choir"},
    {"docid": "hb", "doc": "Herbert: a composer and conductor"},
    {"docid": "lt", "doc": "letterer: a painter of letters"},
    {"docid": "ml", "doc": "mailer: a person who mails something"},
]
QUESTIONS = [
    {"qid": "o1", "question": "Herbert or choirmaster", "question_type": "or",
     "positive_ctxs": [{"passage_id": "cm"}, {"passage_id": "hb"}]},
    {"qid": "o2", "question": "What is a letterer?", "question_type": "or", "positive_ctxs": [{"passage_id": "lt"}]},
    {"qid": "o3", "question": "mailer or chorister", "question_type": "or",
     "positive_ctxs": [{"passage_id": "ml"}, {"passage_id": "ch"}]},
    {"qid": "a1", "question": "a singer that is a director", "question_type": "and", "positive_ctxs": [{"passage_id": "cm"}]},
]


@pytest.fixture
def setup(tmp_path):
    data = write_set(tmp_path / "data", CORPUS, QUESTIONS)
    base = evaluation(tmp_path / "base", {"o1": 1.0, "o2": 1.0, "o3": 0.5, "a1": 1.0},
                      {"o1": ["cm", "ch"], "o2": ["lt", "ml"], "o3": ["cm", "ml"], "a1": ["cm"]})
    s1 = evaluation(tmp_path / "r-s1", {"o1": 0.5, "o2": 1.0, "o3": 1.0, "a1": 1.0},
                    {"o1": ["ch", "cm"], "o2": ["lt"], "o3": ["ml"], "a1": ["cm"]})
    s2 = evaluation(tmp_path / "r-s2", {"o1": 0.0, "o2": 0.5, "o3": 1.0, "a1": 1.0},
                    {"o1": ["ch", "lt"], "o2": ["ml", "lt"], "o3": ["ml"], "a1": ["cm"]})
    return data, base, s1, s2


def test_lists_the_questions_that_lose_most_with_what_each_model_ranks_first(setup, capsys):
    data, base, s1, s2 = setup
    assert load_script("scripts/reproduce/lost_answers").main([str(data), base, s1, s2]) == 0
    out = capsys.readouterr().out.splitlines()
    # o1: (0.5 + 0) / 2 - 1 = -0.75; o2: 0.75 - 1 = -0.25; o3 gains; the AND question is not counted
    assert out[0] == ("3 OR questions: 2 lose MRR@10 (mean -50.0 points), 1 gain; "
                      "the base model ranks an answer first in 2 of those that lose")
    assert out[3] == ("| Herbert or choirmaster | 100 | 25 | + choirmaster: the musical director of a choir "
                      "| - chorister: a singer in a choir |")
    assert out[4].startswith("| What is a letterer? | 100 | 75 | + letterer")
    assert len(out) == 5
    assert load_script("scripts/reproduce/lost_answers").main([str(data), base, s1, "--top", "1"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("3 OR questions: 1 lose MRR@10 (mean -50.0 points), 1 gain") and len(out) == 4


def test_bad_input_names_what_is_missing(setup, tmp_path):
    data, base, s1, s2 = setup
    script = load_script("scripts/reproduce/lost_answers")
    with pytest.raises(SystemExit, match="no question of type 'xor'"):
        script.main([str(data), base, s1, "--type", "xor"])
    with pytest.raises(SystemExit, match=r"nowhere: no results.json there"):
        script.main([str(data), base, str(tmp_path / "nowhere")])
    with pytest.raises(SystemExit, match="no per-question nDCG@10"):
        script.main([str(data), base, s1, "--measure", "nDCG@10"])
    (tmp_path / "r-s1" / "run.trec").unlink()
    with pytest.raises(SystemExit, match="r-s1: no run.trec there"):
        script.main([str(data), base, s1])
    (tmp_path / "base" / "run.trec").write_text("o1 Q0 cm first 1.0 m\n", encoding="utf-8")
    with pytest.raises(SystemExit, match=r"run.trec:1: field 'rank': 'first' is not an integer"):
        script.main([str(data), base, s2])
    dump_jsonl(data / "eval.jsonl", [*QUESTIONS, '{"qid": "o9", "question": "x", "question_type": "or"}'])
    with pytest.raises(SystemExit, match="no MRR@10 for question o9"):
        script.main([str(data), base, base])
