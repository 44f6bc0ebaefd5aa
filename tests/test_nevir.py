"""NevIR: the pair reader, paired accuracy against similarities computed here, results.json for compare."""
import io
import json
import os
import textwrap
from pathlib import Path

import numpy as np
import pytest
from conftest import ROOT, dump_jsonl

from boolcl.cli import main
from boolcl.config import compose
from boolcl.data.nevir import load_nevir
from boolcl.data.spec import parse_data_spec
from boolcl.errors import DataError
from boolcl.evaluate.command import run_evaluate
from boolcl.evaluate.nevir import outcomes

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

NEVIR_DIR = Path(os.environ.get("BOOLCL_NEVIR") or ROOT.parent / "shared" / "nevir")
NEVIR_FILE = NEVIR_DIR / "NevIR_test.json"
needs_real = pytest.mark.skipif(not NEVIR_FILE.is_file(), reason=f"the NevIR test split is not at {NEVIR_FILE} "
                                "(set BOOLCL_NEVIR to the folder holding NevIR_test.json)")

# Pairs written for this test: doc1 answers q1, doc2 answers q2; the two passages differ by a negation,
# and a few pairs are easy (different topics) so that the model gets some right.
PAIRS = [
    {"id": "p1", "q1": "Which bird can fly?", "doc1": "The sparrow is a bird that can fly.",
     "q2": "Which bird cannot fly?", "doc2": "The penguin is a bird that cannot fly."},
    {"id": "p2", "q1": "Who won the race?", "doc1": "Anna won the race on Sunday.",
     "q2": "Who did not win the race?", "doc2": "Anna did not win the race on Sunday."},
    {"id": "p3", "q1": "What instrument has four strings tuned in fifths?",
     "doc1": "The violin has four strings tuned in fifths.",
     "q2": "How long does bread dough rise?", "doc2": "Bread dough usually rises for about an hour."},
    {"id": "p4", "q1": "Which metal does not rust?", "doc1": "Gold is a metal that does not rust.",
     "q2": "Which metal rusts?", "doc2": "Iron is a metal that rusts in damp air."},
    {"id": "p5", "q1": "Is the museum open on Mondays?", "doc1": "The museum is open on Mondays.",
     "q2": "Is the museum closed on Mondays?", "doc2": "The museum is not open on Mondays."},
]


def evaluate(model, *overrides):
    """`boolcl evaluate` without the CLI's error printing, so a test sees the DataError itself."""
    cfg = compose(list(overrides))
    return run_evaluate(model, cfg, cfg.out)


def write_pairs(path: Path, pairs=PAIRS) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(pairs), encoding="utf-8")
    return path


def test_outcomes_by_hand():
    # sim(q1,d1), sim(q1,d2), sim(q2,d1), sim(q2,d2)
    sims = np.array([[0.9, 0.1, 0.2, 0.8],   # both right -> pair right
                     [0.9, 0.1, 0.8, 0.2],   # q1 right, q2 picks doc1 -> pair wrong
                     [0.1, 0.9, 0.2, 0.8],   # q2 right only
                     [0.5, 0.5, 0.3, 0.7],   # tie on q1 counts as wrong
                     [0.1, 0.9, 0.8, 0.2]])  # both wrong
    got = outcomes(sims)
    assert got["PairedAcc"].tolist() == [1, 0, 0, 0, 0]
    assert got["Q1Acc"].tolist() == [1, 1, 0, 0, 0]
    assert got["Q2Acc"].tolist() == [1, 0, 1, 1, 0]


def test_spec():
    assert parse_data_spec("nevir").kind == "nevir" and parse_data_spec("nevir").path is None
    ds = parse_data_spec("nevir:/some/where")
    assert (ds.kind, ds.name, ds.path, ds.is_benchmark) == ("nevir", "nevir", "/some/where", True)


def test_paired_accuracy_matches_sentence_transformers(tmp_path):
    """The four similarities computed here with sentence-transformers give the counts evaluate reports."""
    from sentence_transformers import SentenceTransformer

    from boolcl.retrieval.models import packaged_model_dir

    model = SentenceTransformer(str(packaged_model_dir()), device="cpu")
    expected = {}
    for p in PAIRS:
        q = model.encode([p["q1"], p["q2"]], normalize_embeddings=True)
        d = model.encode([p["doc1"], p["doc2"]], normalize_embeddings=True)
        s = q @ d.T  # rows q1, q2; columns doc1, doc2
        q1_ok, q2_ok = s[0, 0] > s[0, 1], s[1, 1] > s[1, 0]
        expected[p["id"]] = (float(q1_ok and q2_ok), float(q1_ok), float(q2_ok))
    paired = sum(v[0] for v in expected.values())
    assert 0 < paired < len(PAIRS), "the constructed pairs should separate right from wrong"

    data = write_pairs(tmp_path / "pairs.json")
    out = tmp_path / "eval"
    assert main(["evaluate", "offline-default", f"data=nevir:{data}", f"out={out}", "eval.batch_size=4"]) == 0
    res = json.loads((out / "results.json").read_text())
    got = {pid: (res["per_query"]["PairedAcc"][pid], res["per_query"]["Q1Acc"][pid], res["per_query"]["Q2Acc"][pid])
           for pid in expected}
    assert got == expected
    for i, m in enumerate(("PairedAcc", "Q1Acc", "Q2Acc")):
        assert res["metrics"][m]["ALL"]["value"] == pytest.approx(sum(v[i] for v in expected.values()) / len(PAIRS))
        assert res["metrics"][m]["ALL"]["n"] == len(PAIRS)
    assert res["headline"]["PairedAcc/ALL"] == pytest.approx(100 * paired / len(PAIRS))
    assert res["data"]["name"] == "nevir" and res["data"]["pairs"] == len(PAIRS)
    assert res["question_types"] == {p["id"]: "pair" for p in PAIRS}

    # run.trec holds the similarities; scoring it again (run=) gives the same per-pair values
    lines = (out / "run.trec").read_text().split("\n")
    assert sum(1 for line in lines if line.strip()) == 4 * len(PAIRS)
    again = tmp_path / "again"
    assert main(["evaluate", f"data=nevir:{data}", f"run={out / 'run.trec'}", f"out={again}"]) == 0
    assert json.loads((again / "results.json").read_text())["per_query"] == res["per_query"]


def test_run_file_scored_by_hand(tmp_path):
    data = write_pairs(tmp_path / "pairs.json", PAIRS[:2])
    run = tmp_path / "run.trec"
    run.write_text("p1/q1 Q0 p1/doc1 1 0.9 x\np1/q1 Q0 p1/doc2 2 0.1 x\n"
                   "p1/q2 Q0 p1/doc2 1 0.8 x\np1/q2 Q0 p1/doc1 2 0.2 x\n"
                   "p2/q1 Q0 p2/doc1 1 0.7 x\np2/q1 Q0 p2/doc2 2 0.6 x\n"
                   "p2/q2 Q0 p2/doc1 1 0.7 x\np2/q2 Q0 p2/doc2 2 0.6 x\n")
    out = tmp_path / "eval"
    assert main(["evaluate", f"data=nevir:{data}", f"run={run}", f"out={out}"]) == 0
    res = json.loads((out / "results.json").read_text())
    assert res["per_query"]["PairedAcc"] == {"p1": 1.0, "p2": 0.0}
    assert res["per_query"]["Q2Acc"] == {"p1": 1.0, "p2": 0.0}
    assert res["metrics"]["Q1Acc"]["ALL"]["value"] == 1.0

    run.write_text("p1/q1 Q0 p1/doc1 1 0.9 x\n")  # a pair without all four scores
    with pytest.raises(DataError, match=r"no score for query p1/q1 and passage p1/doc2"):
        evaluate(None, f"data=nevir:{data}", f"run={run}", f"out={tmp_path / 'bad'}")
    assert not (tmp_path / "bad").exists()


@pytest.mark.parametrize("drop", ["doc2", "q1", "id"])
def test_missing_field_names_row_and_field(tmp_path, drop):
    pairs = [dict(p) for p in PAIRS[:3]]
    del pairs[1][drop]
    data = write_pairs(tmp_path / "pairs.json", pairs)
    out = tmp_path / "eval"
    with pytest.raises(DataError, match=rf"pairs.json: row 2.*field '{drop}': is missing") as e:
        evaluate("offline-default", f"data=nevir:{data}", f"out={out}")
    assert e.value.field == drop
    assert not out.exists()


def test_bad_files(tmp_path):
    with pytest.raises(DataError, match=r"row 1 \(id 'p1'\): field 'doc1': is empty"):
        load_nevir(str(write_pairs(tmp_path / "a.json", [dict(PAIRS[0], doc1="  ")])))
    with pytest.raises(DataError, match="JSON list of pairs"):
        load_nevir(str(write_pairs(tmp_path / "b.json", PAIRS[0])))
    with pytest.raises(DataError, match="pair id 'p1' also on row 1"):
        load_nevir(str(write_pairs(tmp_path / "c.json", [PAIRS[0], PAIRS[0]])))
    with pytest.raises(DataError, match="no NevIR file here"):
        load_nevir(str(tmp_path))
    with pytest.raises(DataError, match="not found"):
        load_nevir(str(tmp_path / "nowhere.json"))
    dump_jsonl(tmp_path / "d.jsonl", [PAIRS[0], {"id": 7, "q1": "a", "doc1": "b", "q2": "c"}])
    with pytest.raises(DataError, match=r"row 2 \(id 7\): field 'doc2': is missing"):
        load_nevir(str(tmp_path / "d.jsonl"))


HUB_README = textwrap.dedent("""\
    ---
    configs:
    - config_name: default
      data_files:
      - split: test
        path: data/test.jsonl
      - split: validation
        path: data/validation.jsonl
    ---
    Local copy of orionweller/NevIR for tests.
    """)


def test_hub_like_copy(tmp_path):
    root = tmp_path / "NevIR"
    root.mkdir()
    (root / "README.md").write_text(HUB_README)
    extra = [dict(p, WorkerId="w", version=1) for p in PAIRS]  # the hub copy has more columns
    dump_jsonl(root / "data" / "test.jsonl", extra)
    dump_jsonl(root / "data" / "validation.jsonl", extra[:1])
    nset = load_nevir(str(root))
    assert [p.id for p in nset.pairs] == [p["id"] for p in PAIRS]
    assert nset.pairs[2].doc2 == PAIRS[2]["doc2"] and nset.source.endswith("[test]")

    without_q2 = [{k: v for k, v in p.items() if k != "q2"} for p in PAIRS]
    dump_jsonl(root / "data" / "test.jsonl", without_q2)
    dump_jsonl(root / "data" / "validation.jsonl", without_q2[:1])
    with pytest.raises(DataError, match=r"lacks column\(s\) \['q2'\]"):
        load_nevir(str(root))


def test_compare_pairs_two_runs(tmp_path):
    """Two NevIR results (run files) go through `boolcl compare`, tested over pairs."""
    from omegaconf import OmegaConf
    from rich.console import Console

    from boolcl.evaluate.compare import run_compare

    data = write_pairs(tmp_path / "pairs.json")
    rng = np.random.default_rng(0)
    folders = []
    for name, bias in (("plain", 0.0), ("better", 1.0)):
        lines = []
        for p in PAIRS:
            s = rng.random(4) + np.array([bias, 0, 0, bias])
            for q, d, v in (("q1", "doc1", s[0]), ("q1", "doc2", s[1]), ("q2", "doc1", s[2]), ("q2", "doc2", s[3])):
                lines.append(f"{p['id']}/{q} Q0 {p['id']}/{d} 0 {v:.6f} {name}")
        run = tmp_path / f"{name}.trec"
        run.write_text("\n".join(lines) + "\n")
        out = tmp_path / name
        assert main(["evaluate", f"data=nevir:{data}", f"run={run}", f"out={out}"]) == 0
        folders.append(out)
    better = json.loads((folders[1] / "results.json").read_text())
    assert better["metrics"]["PairedAcc"]["ALL"]["value"] == 1.0  # bias 1 puts the right passage first
    cfg = compose([f"data=nevir:{data}"])
    payload = run_compare([str(f / "results.json") for f in folders], cfg, str(tmp_path / "cmp"),
                          console=Console(file=io.StringIO(), width=200))
    cell = payload["cells"]["better"]["PairedAcc"]["ALL"]
    plain = json.loads((folders[0] / "results.json").read_text())["metrics"]["PairedAcc"]["ALL"]["value"]
    assert cell["n_paired"] == len(PAIRS) and cell["p"] is not None
    assert cell["delta"] == pytest.approx(100 * (1.0 - plain))
    assert OmegaConf.select(cfg, "data") == f"nevir:{data}"


@needs_real
def test_real_split_reads():
    nset = load_nevir(str(NEVIR_DIR))
    assert len(nset.pairs) == 1383
    assert len({p.id for p in nset.pairs}) == 1383
    assert all(p.doc1 != p.doc2 for p in nset.pairs)


@needs_real
@pytest.mark.slow
def test_real_split_packaged_minilm(tmp_path):
    """offline-default on the real test split: every pair scored, accuracies consistent, run.trec complete."""
    out = tmp_path / "eval"
    assert main(["evaluate", "offline-default", f"data=nevir:{NEVIR_DIR}", f"out={out}"]) == 0
    res = json.loads((out / "results.json").read_text())
    pq = res["per_query"]
    assert len(pq["PairedAcc"]) == 1383
    assert all(pq["PairedAcc"][k] == pq["Q1Acc"][k] * pq["Q2Acc"][k] for k in pq["PairedAcc"])
    paired = res["metrics"]["PairedAcc"]["ALL"]["value"]
    # the NevIR paper: MS MARCO bi-encoders land well below random (25%); anything near 100% is a bug
    assert 0.0 < paired < 0.5
    q1, q2 = (res["metrics"][m]["ALL"]["value"] for m in ("Q1Acc", "Q2Acc"))
    print(f"NevIR test, offline-default: paired {100 * paired:.2f}, q1 {100 * q1:.2f}, q2 {100 * q2:.2f}")


def test_pairs_whose_documents_only_differ_past_the_cut_are_reported(tmp_path):
    """Cut to max_length tokens, two documents that differ only at their end are the same text:
    the pair cannot count, and evaluate says so (and how many) instead of scoring it as a miss."""
    shared = "The orchestra rehearsed for many weeks in the old hall by the river before the season. "
    pairs = [*PAIRS[:2], {"id": "late", "q1": "Did the concert sell out?", "doc1": shared + "The concert sold out.",
                          "q2": "Did the concert not sell out?", "doc2": shared + "The concert did not sell out."}]
    data = write_pairs(tmp_path / "pairs.json", pairs)
    with pytest.warns(UserWarning, match=r"1 of 3 pairs are the same text once cut to 16 tokens"):
        evaluate("offline-default", f"data=nevir:{data}", f"out={tmp_path / 'short'}", "eval.max_length=16")
    short = json.loads((tmp_path / "short" / "results.json").read_text())
    assert short["settings"]["pairs_same_after_truncation"] == 1
    assert short["per_query"]["PairedAcc"]["late"] == 0.0  # a tie is wrong
    evaluate("offline-default", f"data=nevir:{data}", f"out={tmp_path / 'long'}", "eval.max_length=64")
    assert json.loads((tmp_path / "long" / "results.json").read_text())["settings"]["pairs_same_after_truncation"] == 0
