import json

import pytest
from conftest import dump_jsonl

from boolcl.data.jsonl import read_jsonl, write_jsonl
from boolcl.data.loaders import load_folder, load_retrieval_set, load_training_pool
from boolcl.data.schema import CorpusDoc, EvalQuestion, TrainingExample
from boolcl.errors import DataError

GOOD = {"qid": "q1", "question": "Which passages are not about X?", "question_type": "not",
        "positive_ctxs": [{"passage_id": "a"}], "negative_ctxs": [{"passage_id": "b"}]}


def test_round_trip_keeps_every_field(tmp_path):
    ex = TrainingExample.from_dict({**GOOD, "hard_negative_ctxs": [{"passage_id": "c", "text": "t"}],
                                    "provenance": {"cluster": "x", "operator": "not"}})
    write_jsonl(tmp_path / "x.jsonl", [ex])
    back = read_jsonl(tmp_path / "x.jsonl", TrainingExample.from_dict)
    assert back == [ex]
    assert [c.passage_id for c in ex.all_negatives] == ["b", "c"]


def test_integer_ids_are_read_as_strings():
    q = EvalQuestion.from_dict({**GOOD, "positive_ctxs": [{"passage_id": 7}]})
    assert q.positive_ctxs[0].passage_id == "7"
    assert CorpusDoc.from_dict({"docid": 3, "doc": "x"}).docid == "3"


@pytest.mark.parametrize("line,field,needle", [
    ('{"qid": "q2", "question": "x?"', None, "invalid JSON"),
    (json.dumps({**GOOD, "qid": "q2", "question_type": "xor"}), "question_type", "'xor' is not one of"),
    (json.dumps({k: v for k, v in GOOD.items() if k != "question"} | {"qid": "q2"}), "question", "is missing"),
    (json.dumps({**GOOD, "qid": "q2", "positive_ctxs": []}), "positive_ctxs", "at least one positive"),
    (json.dumps({**GOOD, "qid": "q2", "positive_ctxs": [{"id": "a"}]}), "positive_ctxs[0].passage_id", "is missing"),
    (json.dumps({**GOOD, "qid": "q2", "negative_ctxs": [{"passage_id": "a"}]}), "negative_ctxs", "also positives"),
    (json.dumps({**GOOD, "qid": "q2", "question": 5}), "question", "must be a string"),
    ('[1, 2]', "<row>", "must be a JSON object"),
])
def test_bad_row_names_file_line_and_field(tmp_path, line, field, needle):
    path = dump_jsonl(tmp_path / "eval.jsonl", [GOOD, "", line])  # blank line 2 is skipped, bad row is line 3
    with pytest.raises(DataError) as err:
        read_jsonl(path, EvalQuestion.from_dict)
    assert str(err.value).startswith(f"{path}:3: ")
    assert needle in str(err.value)
    assert err.value.line == 3 and err.value.field == field


def test_duplicate_ids_and_missing_files_are_errors(tmp_path):
    path = dump_jsonl(tmp_path / "eval.jsonl", [GOOD, GOOD])
    with pytest.raises(DataError, match="id 'q1' appears twice"):
        read_jsonl(path, EvalQuestion.from_dict, unique=lambda q: q.qid)
    with pytest.raises(DataError, match="file not found"):
        read_jsonl(tmp_path / "nope.jsonl", EvalQuestion.from_dict)


def test_write_is_atomic_and_leaves_no_temp_files(tmp_path):
    write_jsonl(tmp_path / "out.jsonl", [{"a": 1}])
    with pytest.raises(TypeError):
        write_jsonl(tmp_path / "out.jsonl", [{"a": object()}])  # fails while serialising
    assert (tmp_path / "out.jsonl").read_text() == '{"a": 1}\n'
    assert [p.name for p in tmp_path.iterdir()] == ["out.jsonl"]


def test_folder_loader_checks_references(small_set):
    rs = load_folder(small_set)
    assert len(rs.questions) == 3 and len(rs.corpus) == 6
    rows = [json.loads(x) for x in (small_set / "eval.jsonl").read_text().splitlines()]
    rows[1]["negative_ctxs"].append({"passage_id": "ghost"})
    dump_jsonl(small_set / "eval.jsonl", rows)
    with pytest.raises(DataError, match=r"eval.jsonl:2: field 'negative_ctxs': passage 'ghost'"):
        load_folder(small_set)


def test_unknown_data_spec_says_what_exists():
    with pytest.raises(DataError, match="use 'sample', 'boolquestions-msmarco'"):
        load_retrieval_set("no-such-set")


def test_bundled_sample_meets_its_promises():
    rs = load_retrieval_set("sample")
    by_type = {t: [q for q in rs.questions if q.question_type == t] for t in ("and", "or", "not")}
    assert len(rs.corpus) >= 300 and len(rs.questions) >= 150
    assert all(len(v) >= 40 for v in by_type.values())
    assert all(q.negative_ctxs for q in by_type["not"])
    clusters = [json.loads(x) for x in (rs.source and open(f"{rs.source}/clusters.jsonl")).read().splitlines()]
    assert len(clusters) >= 40 and all(len(c["docids"]) >= 3 for c in clusters)
    pool, corpus = load_training_pool("sample")
    eval_clusters = {c["cluster"] for c in clusters if c["split"] == "eval"}
    train_clusters = {e.provenance["cluster"] for e in pool}
    assert train_clusters and not (eval_clusters & train_clusters)
    assert {e.question_type for e in pool} == {"simple", "and", "or", "not"}
    assert corpus is not None and {c.passage_id for e in pool for c in e.positive_ctxs} <= set(corpus.ids)


def test_fingerprints_follow_the_data(small_set):
    a = load_folder(small_set)
    rows = (small_set / "corpus.jsonl").read_text().replace("Gallstones are hard", "Gallstones are firm")
    (small_set / "corpus.jsonl").write_text(rows)
    b = load_folder(small_set)
    assert a.corpus_fingerprint() != b.corpus_fingerprint() and a.questions_fingerprint() == b.questions_fingerprint()
    assert load_folder(small_set).corpus_fingerprint() == b.corpus_fingerprint()
