"""scripts/reproduce/first_ranked.py: what a model ranks first per question type (an answer, an
excluded passage, a passage the question names that is neither, another), seeds averaged."""
from __future__ import annotations

import pytest

from conftest import load_script, write_evaluation as evaluation, write_set

CORPUS = [
    {"docid": "ww", "doc": "woodworker, woodsman: a person who works with wood"},
    {"docid": "cp", "doc": "carpenter: a woodworker who builds frames"},
    {"docid": "jn", "doc": "joiner: a woodworker who makes furniture"},
    {"docid": "sc", "doc": "scatology: the study of excrement"},
    {"docid": "ch", "doc": "chemical analysis: the study of substances"},
    {"docid": "go", "doc": "go: a board game", "title": "Go"},
]
QUESTIONS = [
    {"qid": "n1", "question": "Which woodworker is not a carpenter?", "question_type": "not",
     "positive_ctxs": [{"passage_id": "jn"}], "negative_ctxs": [{"passage_id": "cp"}]},
    {"qid": "n2", "question": "What kinds of chemical analysis are not scatologies?", "question_type": "not",
     "positive_ctxs": [{"passage_id": "jn"}], "negative_ctxs": [{"passage_id": "cp"}]},
    {"qid": "o1", "question": "Woodsmen or joiners", "question_type": "or",
     "positive_ctxs": [{"passage_id": "ww"}, {"passage_id": "jn"}]},
    {"qid": "o2", "question": "Let us go or stay", "question_type": "or", "positive_ctxs": [{"passage_id": "jn"}]},
]


@pytest.fixture
def runs(tmp_path):
    data = write_set(tmp_path / "data", CORPUS, QUESTIONS)
    base = evaluation(tmp_path / "base", {}, {"n1": ["cp", "jn"], "n2": ["sc"], "o1": ["ww"], "o2": ["go"]})
    s1 = evaluation(tmp_path / "r-s1", {}, {"n1": ["ww"], "n2": ["ch"], "o1": ["jn"], "o2": ["cp"]})
    s2 = evaluation(tmp_path / "r-s2", {}, {"n1": ["jn"], "n2": ["ch"], "o1": ["cp"], "o2": ["jn"]})
    return data, base, s1, s2


def test_names_are_words_of_the_question_in_the_singular_or_the_plural():
    fr = load_script("scripts/reproduce/first_ranked")
    assert fr.passage_names(CORPUS[0]) == ["woodworker", "woodsman"]
    assert fr.passage_names(CORPUS[5]) == []  # a title of two letters names nothing
    assert fr.names_in("Which woodworkers build?", ["woodworker"])
    assert fr.names_in("Are they scatologies?", ["scatology"])
    assert not fr.names_in("A woodworking shop", ["woodworker"])
    assert not fr.names_in("a carpenter", ["woodworker", "joiner"])


def test_counts_what_each_run_ranks_first_per_type_seeds_averaged(runs, capsys):
    data, base, s1, s2 = runs
    assert load_script("scripts/reproduce/first_ranked").main([str(data), base, s1, s2]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("| run (seeds) | type | first: answer (%) | first: excluded (%) | first: named, neither")
    rows = {tuple(c.strip() for c in line.split("|")[1:3]): [float(c) for c in line.split("|")[3:7]]
            for line in out[2:]}
    # base: n1 excluded, n2 the named "scatology" (neither answer nor excluded); o1 an answer, o2 another
    assert rows[("base (1)", "NOT")] == [0.0, 50.0, 50.0, 0.0]
    assert rows[("base (1)", "OR")] == [50.0, 0.0, 0.0, 50.0]
    # r, seeds 1 and 2 (four NOT firsts): n1 the named woodworker, then the answer; n2 "chemical analysis" twice
    assert rows[("r (2)", "NOT")] == [25.0, 0.0, 75.0, 0.0]
    assert rows[("r (2)", "OR")] == [50.0, 0.0, 0.0, 50.0]
    assert len(out) == 6


def test_a_run_that_misses_a_question_or_its_ranking_is_named(runs, tmp_path):
    data, base, *_ = runs
    short = evaluation(tmp_path / "short", {}, {"n1": ["jn"]})
    with pytest.raises(SystemExit, match=r"short: run.trec ranks nothing for question n2"):
        load_script("scripts/reproduce/first_ranked").main([str(data), short])
    (tmp_path / "bare").mkdir()
    with pytest.raises(SystemExit, match=r"bare: no run.trec there"):
        load_script("scripts/reproduce/first_ranked").main([str(data), str(tmp_path / "bare")])
