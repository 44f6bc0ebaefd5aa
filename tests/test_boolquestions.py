"""BoolQuestions through `datasets.load_dataset`, on a local copy laid out like the hub repository."""
import json
import textwrap

import pytest
from conftest import dump_jsonl

from boolcl.data.loaders import load_retrieval_set
from boolcl.errors import DataError

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

README = textwrap.dedent("""\
    ---
    configs:
    - config_name: MSMARCO
      data_files:
      - split: eval
        path: MSMARCO/eval.json
    - config_name: MSMARCO-corpus
      data_files:
      - split: corpus
        path: MSMARCO/corpus.jsonl
    - config_name: NaturalQuestions
      data_files:
      - split: eval
        path: NaturalQuestions/eval.json
    - config_name: NaturalQuestions-corpus
      data_files:
      - split: corpus
        path: NaturalQuestions/corpus.jsonl
    ---
    Local copy of ustc-zhangzm/BoolQuestions for tests.
    """)


def question(qid, qtype, pos, neg):
    return {"qid": qid, "question": f"question {qid}?", "question_type": qtype,
            "positive_ctxs": [{"passage_id": p, "title": "", "text": ""} for p in pos],
            "negative_ctxs": [{"passage_id": n, "title": "", "text": ""} for n in neg]}


@pytest.fixture
def hub_copy(tmp_path):
    root = tmp_path / "BoolQuestions"
    (root / "README.md").parent.mkdir(parents=True)
    (root / "README.md").write_text(README)
    dump_jsonl(root / "MSMARCO" / "eval.json",
                [question("1", "not", ["10", "11"], ["12"]), question("2", "and", ["12"], ["10"])])
    dump_jsonl(root / "MSMARCO" / "corpus.jsonl",
                [{"docid": str(i), "doc": f"passage number {i}"} for i in range(10, 14)])
    dump_jsonl(root / "NaturalQuestions" / "eval.json", [question("7", "or", ["a", "b"], ["c"])])
    dump_jsonl(root / "NaturalQuestions" / "corpus.jsonl",
                [{"docid": x, "doc": f"text {x}", "title": f"Page {x.upper()}"} for x in "abc"])
    return root


def test_msmarco_from_a_local_copy(hub_copy):
    rs = load_retrieval_set(f"boolquestions-msmarco:{hub_copy}")
    assert [q.qid for q in rs.questions] == ["1", "2"]
    assert [c.passage_id for c in rs.questions[0].negative_ctxs] == ["12"]
    assert rs.corpus.ids == ["10", "11", "12", "13"] and rs.corpus.texts[0] == "passage number 10"
    assert rs.source.endswith("[MSMARCO]")


def test_nq_passages_are_title_sep_doc(hub_copy):
    rs = load_retrieval_set(f"boolquestions-nq:{hub_copy}")
    assert rs.corpus.texts == ["Page A [SEP] text a", "Page B [SEP] text b", "Page C [SEP] text c"]


def test_bad_hub_row_names_the_row_and_field(hub_copy):
    path = hub_copy / "MSMARCO" / "eval.json"
    rows = [json.loads(x) for x in path.read_text().splitlines()]
    rows[1]["question_type"] = "exclusive-or"  # a new size: datasets' cache keys on path, size and mtime
    dump_jsonl(path, rows)
    with pytest.raises(DataError, match=r"\[MSMARCO\] eval row:2: field 'question_type'"):
        load_retrieval_set(f"boolquestions-msmarco:{hub_copy}")


def test_unreachable_hub_says_how_to_use_local_files(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "cache"))
    with pytest.raises(DataError, match=r"data=boolquestions-msmarco:/path/to/BoolQuestions"):
        load_retrieval_set("boolquestions-msmarco")


def test_two_local_copies_never_share_a_cache(hub_copy, tmp_path):
    first = load_retrieval_set(f"boolquestions-msmarco:{hub_copy}")
    other = tmp_path / "elsewhere" / "BoolQuestions"  # same folder name, same sizes, other content
    other.mkdir(parents=True)
    (other / "README.md").write_text(README)
    dump_jsonl(other / "MSMARCO" / "eval.json",
               [question("1", "and", ["10", "11"], ["12"]), question("2", "not", ["12"], ["10"])])
    dump_jsonl(other / "MSMARCO" / "corpus.jsonl",
               [{"docid": str(i), "doc": f"passage number {i}"} for i in range(20, 24)])
    second = load_retrieval_set(f"boolquestions-msmarco:{other}")
    assert [q.question_type for q in first.questions] == ["not", "and"]
    assert [q.question_type for q in second.questions] == ["and", "not"]
    assert second.corpus.ids == ["20", "21", "22", "23"]


MSMARCO_README = textwrap.dedent("""\
    ---
    configs:
    - config_name: default
      data_files:
      - split: dev
        path: qrels/dev.jsonl
    - config_name: corpus
      data_files:
      - split: corpus
        path: corpus.jsonl
    - config_name: queries
      data_files:
      - split: queries
        path: queries.jsonl
    ---
    Local copy of mteb/msmarco for tests.
    """)


def test_original_msmarco_dev_from_a_local_copy(tmp_path, tiny_model_dir):
    from boolcl.cli import main

    root = tmp_path / "msmarco"
    root.mkdir()
    (root / "README.md").write_text(MSMARCO_README)
    dump_jsonl(root / "qrels" / "dev.jsonl", [{"query-id": "q1", "corpus-id": "p1", "score": 1},
                                              {"query-id": "q2", "corpus-id": "p3", "score": 1}])
    dump_jsonl(root / "queries.jsonl", [{"_id": "q1", "text": "what is a cello"}, {"_id": "q2", "text": "harp strings"},
                                        {"_id": "q9", "text": "a train query without dev judgements"}])
    dump_jsonl(root / "corpus.jsonl", [{"_id": f"p{i}", "title": "", "text": f"passage {i} text"} for i in range(5)])
    rs = load_retrieval_set(f"msmarco-dev:{root}")
    assert [(q.qid, q.question_type, [c.passage_id for c in q.positive_ctxs]) for q in rs.questions] == \
        [("q1", "simple", ["p1"]), ("q2", "simple", ["p3"])]
    assert len(rs.corpus) == 5
    out = tmp_path / "eval"
    assert main(["evaluate", str(tiny_model_dir), f"data=msmarco-dev:{root}", f"out={out}"]) == 0
    res = json.loads((out / "results.json").read_text())
    assert set(res["metrics"]["MRR@10"]) == {"ALL", "SIMPLE"} and res["data"]["name"] == "msmarco-dev"
