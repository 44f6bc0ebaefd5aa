"""scripts/reproduce/excluded_named.py: NOT questions split by whether an answer names what is excluded,
each run's MRR per group averaged over its seeds question by question."""
from __future__ import annotations

import json

import pytest

from conftest import dump_jsonl, load_script, write_set

CORPUS = [
    {"docid": "pascal", "doc": "Pascal: a teaching language."},
    {"docid": "opascal", "doc": "Object Pascal: an extension of Pascal with classes."},
    {"docid": "modula", "doc": "Modula-2: a successor language with modules."},
    {"docid": "c", "doc": "C: a systems language."},
    {"docid": "cpp", "doc": "C++: adds classes to C."},
    {"docid": "d", "doc": "D: a systems language.", "title": "D language"},
]
QUESTIONS = [
    {"qid": "n1", "question": "Wirth language not Pascal", "question_type": "not",
     "positive_ctxs": [{"passage_id": "opascal"}, {"passage_id": "modula"}], "negative_ctxs": [{"passage_id": "pascal"}]},
    {"qid": "n2", "question": "systems language not D", "question_type": "not",
     "positive_ctxs": [{"passage_id": "c"}], "negative_ctxs": [{"passage_id": "d"}]},  # the title "d language" is nowhere
    {"qid": "n3", "question": "language not C++", "question_type": "not",
     "positive_ctxs": [{"passage_id": "modula"}], "negative_ctxs": [{"passage_id": "cpp"}]},
    {"qid": "a1", "question": "C and classes", "question_type": "and",
     "positive_ctxs": [{"passage_id": "cpp"}], "negative_ctxs": [{"passage_id": "c"}]},
]


@pytest.fixture
def data(tmp_path):
    return write_set(tmp_path / "data", CORPUS, QUESTIONS)


def run(tmp_path, name, values):
    folder = tmp_path / "runs" / name
    folder.mkdir(parents=True)
    (folder / "results.json").write_text(json.dumps({"per_query": {"MRR@10": values}}), encoding="utf-8")
    return str(folder)


def test_groups_follow_names_in_positives(data, tmp_path, capsys):
    script = load_script("scripts/reproduce/excluded_named")
    assert script.split_not_questions(data) == {"n1": True, "n2": False, "n3": False}
    pool = tmp_path / "pool.jsonl"  # another question file over the same corpus, counted without runs
    dump_jsonl(pool, [QUESTIONS[0], {**QUESTIONS[0], "qid": "n4"}, QUESTIONS[2]])
    assert script.main([str(data), "--questions", str(pool)]) == 0
    assert capsys.readouterr().out.strip() == "2 of 3 NOT questions have an answer that names an excluded passage"


def test_seeds_are_averaged_per_question_and_groups_per_question(data, tmp_path, capsys):
    script = load_script("scripts/reproduce/excluded_named")
    base = run(tmp_path, "base", {"n1": 1.0, "n2": 0.5, "n3": 0.25, "a1": 1.0})
    s1 = run(tmp_path, "recipe-s1", {"n1": 0.2, "n2": 1.0, "n3": 0.5, "a1": 0.0})
    s2 = run(tmp_path, "recipe-s2", {"n1": 0.4, "n2": 0.0, "n3": 1.0, "a1": 0.0})
    assert script.main([str(data), base, s1, s2]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "| run (seeds) | MRR@10, answer names the excluded (1) | MRR@10, the others (2) |"
    assert lines[2] == "| base (1) | 100.0 | 37.5 |"
    assert lines[3] == "| recipe (2) | 30.0 | 62.5 |"  # n1: (0.2+0.4)/2; others: mean(0.5, 0.75)


def test_bad_input_names_what_is_wrong(data, tmp_path):
    script = load_script("scripts/reproduce/excluded_named")
    partial = run(tmp_path, "partial", {"n1": 1.0})
    with pytest.raises(SystemExit, match="partial: no MRR@10 for question n2"):
        script.main([str(data), partial])
    with pytest.raises(SystemExit, match="no results.json there"):
        script.main([str(data), str(tmp_path / "nowhere")])
    dump_jsonl(data / "eval.jsonl", [{**QUESTIONS[0], "negative_ctxs": [{"passage_id": "ghost"}]}])
    with pytest.raises(SystemExit, match="question n1 names passage 'ghost'"):
        script.split_not_questions(data)
    (data / "corpus.jsonl").write_text("{not json\n", encoding="utf-8")
    with pytest.raises(SystemExit, match=r"corpus.jsonl:1: invalid JSON"):
        script.split_not_questions(data)


def test_cosine_pairs_each_excluded_passage_with_each_answer(data, capsys):
    """Under the packaged MiniLM, the script's means are those of the pairs computed directly."""
    from sentence_transformers import SentenceTransformer

    from boolcl.retrieval.models import packaged_model_dir

    script = load_script("scripts/reproduce/excluded_named")
    sims = script.cosines(data, "offline-default")
    assert (len(sims[True]), len(sims[False])) == (1, 3)  # n1: opascal names Pascal; modula (n1), c (n2), modula (n3)
    model = SentenceTransformer(str(packaged_model_dir()), device="cpu")
    text = {r["docid"]: r["doc"] for r in CORPUS}
    vec = lambda i: model.encode(text[i], normalize_embeddings=True)  # noqa: E731
    direct = {True: [float(vec("pascal") @ vec("opascal"))],
              False: [float(vec(a) @ vec(b)) for a, b in (("pascal", "modula"), ("d", "c"), ("cpp", "modula"))]}
    for group in (True, False):
        assert sims[group] == pytest.approx(direct[group], abs=1e-5)
    assert script.main([str(data), "--cosine", "offline-default"]) == 0
    out = capsys.readouterr().out
    assert f"answers that name it {direct[True][0]:.3f} (1 pair)" in out
    assert f"the others {sum(direct[False]) / 3:.3f} (3 pairs)" in out


def test_cosine_with_a_model_that_is_not_there_says_so(data, tmp_path):
    script = load_script("scripts/reproduce/excluded_named")
    with pytest.raises(SystemExit, match="nowhere"):
        script.main([str(data), "--cosine", str(tmp_path / "nowhere")])
