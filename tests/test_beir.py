"""BEIR-layout sets: the folder reader, the MTEB hub layout through `datasets`, graded scoring, bad input."""
import json
import math
import textwrap
from pathlib import Path

import pytest
from conftest import dump_jsonl

from boolcl.config import compose
from boolcl.data.beir import load_beir
from boolcl.data.loaders import load_folder, load_retrieval_set
from boolcl.data.spec import parse_data_spec
from boolcl.errors import DataError
from boolcl.evaluate.command import run_evaluate
from boolcl.scoring import metrics

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

CORPUS = [
    {"_id": "d0", "title": "Violin", "text": "The violin is a bowed string instrument with four strings."},
    {"_id": "d1", "title": "Cello", "text": "The cello is played seated and held between the knees."},
    {"_id": "d2", "title": "", "text": "The harp is plucked and has dozens of strings."},
    {"_id": "d3", "title": "Bread", "text": "Bread dough rises for about an hour before baking."},
    {"_id": "d4", "text": "Sourdough uses a starter instead of commercial yeast."},
    {"_id": "d5", "title": "Gold", "text": "Gold is a metal that does not rust."},
]
QUERIES = [
    {"_id": "q1", "text": "which string instrument is bowed"},
    {"_id": "q2", "text": "how is bread made"},
    {"_id": "q3", "text": "a metal that never rusts"},
    {"_id": "q4", "text": "a query only judged in dev"},
]
TEST_QRELS = ("query-id\tcorpus-id\tscore\n"  # graded; d2 is an explicit negative of q1, d0 judged 0 for q3
              "q1\td0\t2\nq1\td1\t1\nq1\td2\t-1\nq2\td3\t1\nq2\td4\t2\nq3\td5\t1\nq3\td0\t0\n")


def beir_folder(root: Path, qrels: str = TEST_QRELS) -> Path:
    dump_jsonl(root / "corpus.jsonl", CORPUS)
    dump_jsonl(root / "queries.jsonl", QUERIES)
    (root / "qrels").mkdir(parents=True, exist_ok=True)
    (root / "qrels" / "test.tsv").write_text(qrels)
    (root / "qrels" / "dev.tsv").write_text("query-id\tcorpus-id\tscore\nq4\td2\t1\n")
    return root


def evaluate(model, *overrides):
    cfg = compose(list(overrides))
    return run_evaluate(model, cfg, cfg.out)


def test_spec_names():
    ds = parse_data_spec("beir:/data/scifact")
    assert (ds.kind, ds.name, ds.path, ds.split, ds.is_benchmark) == ("beir", "beir-scifact", "/data/scifact",
                                                                       "test", True)
    assert parse_data_spec("beir-dev:/data/scifact/").name == "beir-scifact-dev"
    assert parse_data_spec("beir:mteb/nfcorpus").name == "beir-nfcorpus"
    with pytest.raises(DataError, match="needs its location"):
        parse_data_spec("beir")
    with pytest.raises(DataError, match="unknown BEIR split 'val'"):
        parse_data_spec("beir-val:/x")


def test_reads_a_folder(tmp_path):
    bset = load_beir(str(beir_folder(tmp_path / "toy")))
    rs = bset.rset
    assert rs.name == "beir-toy" and bset.layout == "files"
    assert rs.corpus.ids == [d["_id"] for d in CORPUS]
    # passages are `title text`, the text alone without a title
    assert rs.corpus.texts[0] == "Violin The violin is a bowed string instrument with four strings."
    assert rs.corpus.texts[2] == CORPUS[2]["text"] and rs.corpus.texts[4] == CORPUS[4]["text"]
    assert [q.qid for q in rs.questions] == ["q1", "q2", "q3"]  # q4 is judged in dev only
    assert bset.qrels == {"q1": {"d0": 2, "d1": 1}, "q2": {"d3": 1, "d4": 2}, "q3": {"d5": 1}}
    assert bset.negatives == {"q1": ["d2"], "q2": [], "q3": []}
    assert [c.passage_id for c in rs.questions[0].negative_ctxs] == ["d2"]
    assert bset.counts["with_explicit_negatives"] == 1
    dev = load_beir(str(tmp_path / "toy"), "dev")
    assert [q.qid for q in dev.rset.questions] == ["q4"]
    assert load_retrieval_set(f"beir:{tmp_path / 'toy'}").corpus.ids == rs.corpus.ids


def test_evaluate_graded_metrics_by_hand(tmp_path):
    """A ranking file is scored with the graded qrels: nDCG uses the grades, NegRecall the grade -1."""
    folder = beir_folder(tmp_path / "toy")
    run = tmp_path / "run.trec"
    # q1: the negative d2 first, then d1 (grade 1), then d0 (grade 2); q2: d4 (grade 2) first; q3 not ranked.
    run.write_text("q1 Q0 d2 1 3 t\nq1 Q0 d1 2 2 t\nq1 Q0 d0 3 1 t\nq2 Q0 d4 1 5 t\nq2 Q0 q2 2 4 t\nq2 Q0 d3 3 3 t\n")
    out = tmp_path / "out"
    with pytest.warns(UserWarning, match="1 of 3 queries have no ranking"):
        _, res, _ = evaluate(None, f"data=beir:{folder}", f"run={run}", f"out={out}")
    pq = res["per_query"]
    assert pq["MRR@10"] == {"q1": 0.5, "q2": 1.0, "q3": 0.0}
    idcg_q1 = 2 + 1 / math.log2(3)
    assert pq["nDCG@10"]["q1"] == pytest.approx((1 / math.log2(3) + 2 / math.log2(4)) / idcg_q1)
    # q2's own id in the ranking is dropped (BEIR's ignore_identical_ids), so d3 is at rank 2
    assert pq["nDCG@10"]["q2"] == pytest.approx((2 + 1 / math.log2(3)) / (2 + 1 / math.log2(3)))
    assert pq["Recall@100"] == {"q1": 1.0, "q2": 1.0, "q3": 0.0}
    assert pq["NegRecall@10"] == {"q1": 1.0}  # only q1 names an explicit negative
    assert res["metrics"]["nDCG@10"]["ALL"]["n"] == 3 and set(res["metrics"]["MRR@10"]) == {"ALL", "SIMPLE"}
    assert res["data"]["name"] == "beir-toy" and res["data"]["split"] == "test"
    assert json.loads((out / "results.json").read_text())["per_query"] == pq


def test_evaluate_a_model(tmp_path, tiny_model_dir):
    folder = beir_folder(tmp_path / "toy")
    out = tmp_path / "out"
    result, res, _ = evaluate(str(tiny_model_dir), f"data=beir:{folder}", f"out={out}")
    ranked = {q: [d for d, _ in lst] for q, lst in result.run.items()}
    assert all(len(r) == len(CORPUS) for r in ranked.values())
    # the reported values are the graded metrics of the model's own ranking
    expect = metrics.per_query(ranked, {"q1": {"d0": 2, "d1": 1}, "q2": {"d3": 1, "d4": 2}, "q3": {"d5": 1}},
                               {"q1": ["d2"]}, k=10)
    assert res["per_query"]["nDCG@10"] == pytest.approx(expect["nDCG@10"])
    assert res["per_query"]["NegRecall@10"] == expect["NegRecall@10"]
    assert {"MRR@10", "nDCG@10", "Recall@100", "NegRecall@10"} <= set(res["metrics"])
    assert (out / "results.json").is_file() and (out / "run.trec").is_file()


MTEB_README = textwrap.dedent("""\
    ---
    configs:
    - config_name: default
      data_files:
      - split: test
        path: qrels/test.jsonl
    - config_name: corpus
      data_files:
      - split: corpus
        path: corpus/corpus.jsonl
    - config_name: queries
      data_files:
      - split: queries
        path: queries/queries.jsonl
    ---
    Local copy of an MTEB retrieval task for tests.
    """)


def mteb_copy(root: Path, corpus=CORPUS) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "README.md").write_text(MTEB_README)
    dump_jsonl(root / "corpus" / "corpus.jsonl", corpus)
    dump_jsonl(root / "queries" / "queries.jsonl", QUERIES)
    rows = [line.split("\t") for line in TEST_QRELS.strip().split("\n")[1:]]
    dump_jsonl(root / "qrels" / "test.jsonl", [{"query-id": q, "corpus-id": d, "score": int(s)} for q, d, s in rows])
    return root


def test_mteb_hub_layout_matches_the_folder(tmp_path):
    hub = load_beir(str(mteb_copy(tmp_path / "toy-hub")))
    files = load_beir(str(beir_folder(tmp_path / "toy")))
    assert hub.layout == "datasets" and files.layout == "files"
    assert hub.qrels == files.qrels and hub.negatives == files.negatives
    assert hub.rset.corpus.ids == files.rset.corpus.ids and hub.rset.corpus.texts == files.rset.corpus.texts
    assert [q.question for q in hub.rset.questions] == [q.question for q in files.rset.questions]


def test_mteb_hub_layout_bad_row(tmp_path):
    corpus = [dict(d) for d in CORPUS]
    corpus[3]["text"] = None
    with pytest.raises(DataError, match=r"\[corpus\] row:4: field 'text': is missing") as e:
        load_beir(str(mteb_copy(tmp_path / "bad-hub", corpus)))
    assert e.value.field == "text"


@pytest.mark.parametrize("qrels,line,match", [
    ("query-id\tcorpus-id\tscore\nq1\td0\t1\nq2\td3\n", 3, "3 tab-separated columns"),
    ("q1\td0\t1\nq2\td3\t1\textra\n", 2, "3 tab-separated columns 'query-id corpus-id score', this one has 4"),
    ("query-id\tcorpus-id\tscore\nq1\td0\thigh\n", 2, "field 'score': 'high' is not an integer grade"),
    ("query-id\tcorpus-id\tscore\nq1\td0\t1.5\n", 2, "field 'score': '1.5' is not an integer grade"),
    ("query-id\tcorpus-id\tscore\nq1\td0\t1\nq1\td0\t2\n", 3, "judged twice"),
])
def test_bad_qrels_line(tmp_path, tiny_model_dir, qrels, line, match):
    folder = beir_folder(tmp_path / "toy", qrels)
    out = tmp_path / "out"
    with pytest.raises(DataError, match=match) as e:
        evaluate(str(tiny_model_dir), f"data=beir:{folder}", f"out={out}")
    assert e.value.path.endswith("test.tsv") and e.value.line == line
    assert not out.exists()


@pytest.mark.parametrize("file,row,field", [("corpus.jsonl", {"title": "x", "text": "no id"}, "_id"),
                                            ("corpus.jsonl", {"_id": "d9", "title": "no text"}, "text"),
                                            ("queries.jsonl", {"_id": "q9"}, "text"),
                                            ("queries.jsonl", {"text": "no id"}, "_id")])
def test_row_missing_a_field(tmp_path, file, row, field):
    folder = beir_folder(tmp_path / "toy")
    rows = (CORPUS if file == "corpus.jsonl" else QUERIES)[:2] + [row]
    dump_jsonl(folder / file, rows)
    with pytest.raises(DataError, match=rf"{file}:3: field '{field}': is missing") as e:
        load_beir(str(folder))
    assert e.value.field == field and e.value.line == 3


@pytest.mark.parametrize("missing", ["corpus.jsonl", "queries.jsonl", "qrels/test.tsv"])
def test_missing_file(tmp_path, missing):
    folder = beir_folder(tmp_path / "toy")
    (folder / missing).unlink()
    out = tmp_path / "out"
    with pytest.raises(DataError, match=rf"{missing}: file not found"):
        evaluate("offline-default", f"data=beir:{folder}", f"out={out}")
    assert not out.exists()
    with pytest.raises(DataError, match="folder not found"):
        load_beir(str(tmp_path / "nowhere"))


def test_project_folder_with_a_beir_corpus_says_so(tmp_path, small_set):
    dump_jsonl(small_set / "corpus.jsonl", CORPUS)
    with pytest.raises(DataError, match=r"corpus.jsonl:1: field 'docid': is missing: "
                                         r"this looks like a BEIR corpus: use data=beir:PATH"):
        load_folder(small_set)
    folder = beir_folder(tmp_path / "toy")  # a BEIR folder given as a plain folder
    with pytest.raises(DataError, match="this looks like a BEIR corpus: use data=beir:PATH"):
        load_retrieval_set(str(folder))
