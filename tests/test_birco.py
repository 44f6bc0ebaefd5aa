"""BIRCO: the restricted unpickler, the release and hub layouts, pool ranking, and the
authors' published E5 figures on the real release files (skipped where they are absent)."""
from __future__ import annotations

import collections
import pickle
import textwrap
from pathlib import Path

import numpy as np
import pytest
from conftest import ROOT

from boolcl.config import compose
from boolcl.data import safe_pickle
from boolcl.data.birco import load_birco, load_rank_pickle
from boolcl.data.spec import parse_data_spec as parse_spec
from boolcl.errors import DataError
from boolcl.evaluate.benchmarks import evaluate_benchmark, read_trec_run

BIRCO_DIR = ROOT.parent / "shared" / "birco"
NO_BIRCO = f"{BIRCO_DIR} is absent: the real BIRCO release files are only on the project's workstation"
E5_NDCG10 = {"relic": 11.25, "arguana": 43.61, "clinical-trial": 29.42, "wtb": 36.80}  # ../shared/birco/README.md

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def cfg(*overrides):
    return compose(list(overrides))


# ----------------------------------------------------------------------------- fixtures in the release format

def release_set(task="relic"):
    """Three queries with numpy-string ids (as the release has), graded pools, one unjudged passage."""
    q = {np.str_("q1"): "Which passage completes the analysis of the whale?",
         np.str_("q2"): "A book about a girl and a dragon.",
         "q3": "Trials for adults with type 2 diabetes."}
    corpus = {f"c{i}": f"passage number {i} about {'whales' if i % 2 else 'dragons'}" for i in range(1, 9)}
    qrel = {np.str_("q1"): {"c1": 2, "c2": 1, "c3": 0, "c4": 0},
            np.str_("q2"): {"c4": 1, "c5": 0, "c6": 0},
            "q3": {"c6": np.int64(0), "c7": np.int64(1), "c1": np.int64(0)}}
    return {"query": q, "corpus": corpus, "qrel": qrel}


E5_LIKE = {np.str_("q1"): ["c3", "c1", "c2", "c4"], np.str_("q2"): ["c5", "c6", "c4"], "q3": ["c7", "c6", "c1"]}


def write_pickle(path: Path, obj) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(pickle.dumps(obj, protocol=4))
    return path


@pytest.fixture
def release(tmp_path) -> Path:
    root = tmp_path / "birco"
    write_pickle(root / "relic" / "test_set.pickle", release_set())
    write_pickle(root / "relic" / "dev_set.pickle", release_set())
    write_pickle(root / "ranks" / "relic" / "e5_rank.pickle", E5_LIKE)
    return root


# ----------------------------------------------------------------------------- the restricted unpickler

def test_safe_pickle_reads_numpy_scalars_and_plain_values():
    obj = {np.str_("q"): [np.int64(3), np.float64(0.5), np.bool_(True), np.float32(1.5), "x", 1, 2.0, None],
           "t": (1, 2), "s": {1}, "b": b"raw"}
    back = safe_pickle.loads(pickle.dumps(obj, protocol=4))
    assert back == obj and isinstance(next(iter(back)), np.str_)
    assert safe_pickle.loads(pickle.dumps(np.dtype("<U7"))) == np.dtype("<U7")


@pytest.mark.parametrize("payload, named", [
    (b"cos\nsystem\n(S'touch {marker}'\ntR.", "os.system"),
    (b"cposix\nsystem\n(S'touch {marker}'\ntR.", "posix.system"),
    (b"cbuiltins\neval\n(S'open(\"{marker}\", \"w\")'\ntR.", "builtins.eval"),
    (b"cbuiltins\ngetattr\n(cbuiltins\nobject\nS'__class__'\ntR.", "builtins.getattr"),
    (b"csubprocess\nPopen\n((S'touch'\nS'{marker}'\nltR.", "subprocess.Popen"),
])
def test_safe_pickle_refuses_any_other_callable_and_runs_nothing(tmp_path, payload, named):
    marker = tmp_path / "pwned"
    data = payload.replace(b"{marker}", str(marker).encode())
    with pytest.raises(safe_pickle.UnsafePickleError, match=rf"refusing to unpickle: it names {named}"):
        safe_pickle.loads(data)
    assert not marker.exists()
    path = tmp_path / "evil.pickle"
    path.write_bytes(data)
    with pytest.raises(DataError, match=rf"evil\.pickle: refusing to unpickle: it names {named}, which is not on "
                                        r"the allow-list \(numpy"):
        safe_pickle.load(path)
    assert not marker.exists()


def test_safe_pickle_refuses_harmless_looking_classes_too():
    with pytest.raises(safe_pickle.UnsafePickleError, match="collections.OrderedDict"):
        safe_pickle.loads(pickle.dumps(collections.OrderedDict(a=1)))
    with pytest.raises(safe_pickle.UnsafePickleError, match=r"numpy\.(_core|core)\.multiarray\._reconstruct"):
        safe_pickle.loads(pickle.dumps(np.array([1, 2])))  # arrays are not needed, so not allowed


def test_safe_pickle_refuses_object_dtypes_through_the_allowed_names():
    class ObjectScalar:
        def __reduce__(self):
            try:
                from numpy._core.multiarray import scalar
            except ImportError:  # numpy < 2
                from numpy.core.multiarray import scalar
            return scalar, (np.dtype(object), b"\0" * 8)

    with pytest.raises(safe_pickle.UnsafePickleError, match="not a plain string/number/bool dtype"):
        safe_pickle.loads(pickle.dumps(ObjectScalar()))


def test_safe_pickle_names_the_file_of_a_broken_pickle(tmp_path):
    bad = tmp_path / "text.pickle"
    bad.write_text("not a pickle at all")
    with pytest.raises(DataError, match=r"text\.pickle: not a readable pickle"):
        safe_pickle.load(bad)
    with pytest.raises(DataError, match=r"missing\.pickle: file not found"):
        safe_pickle.load(tmp_path / "missing.pickle")


# ----------------------------------------------------------------------------- loading

def test_release_files_load_with_pools_and_graded_relevance(release):
    task = load_birco("relic", str(release))
    assert task.name == "birco-relic" and task.split == "test"
    assert list(task.queries) == ["q1", "q2", "q3"] and all(type(q) is str for q in task.qrels)
    assert task.pool("q1") == ["c1", "c2", "c3", "c4"]
    assert task.qrels["q1"] == {"c1": 2, "c2": 1, "c3": 0, "c4": 0}
    assert type(task.qrels["q3"]["c7"]) is int
    info = task.describe()
    assert info["pool_size"] == {"min": 3, "max": 4, "mean": 10 / 3} and info["grades"] == [0, 1, 2]


def test_release_layouts(release, tmp_path):
    upstream = tmp_path / "BIRCO"  # the BIRCO repository: datasets/<task>/...
    write_pickle(upstream / "datasets" / "relic" / "test_set.pickle", release_set())
    assert load_birco("relic", str(upstream)).pool("q2") == ["c4", "c5", "c6"]
    assert load_birco("relic", str(release / "relic")).queries["q3"].startswith("Trials")
    assert load_birco("relic", str(release / "relic" / "test_set.pickle")).task == "relic"
    assert load_birco("relic", str(release), split="dev").name == "birco-relic-dev"
    with pytest.raises(DataError, match=r"no BIRCO wtb test set here; looked for .*wtb/test_set\.pickle"):
        load_birco("wtb", str(release))
    with pytest.raises(DataError, match="no such file or folder"):
        load_birco("relic", str(tmp_path / "nowhere"))
    with pytest.raises(DataError, match="unknown BIRCO task; tasks: arguana, clinical-trial"):
        load_birco("trec-covid", str(release))


def _broken(mutate):
    data = release_set()
    mutate(data)
    return data


@pytest.mark.parametrize("mutate, message", [
    (lambda d: d.pop("qrel"), r"field 'qrel': is missing"),
    (lambda d: d["qrel"]["q3"].update({"c99": 1}), r"field 'qrel': passage 'c99' \(pool of query 'q3'\) is not in 'corpus'"),
    (lambda d: d["qrel"].update({"q9": {"c1": 1}}), r"field 'qrel': query 'q9' is not in 'query'"),
    (lambda d: d["qrel"].pop("q3"), r"field 'qrel': 1 queries have no candidate pool"),
    (lambda d: d["qrel"]["q3"].update({"c1": "high"}), r"field 'qrel': grade of \('q3', 'c1'\) must be a finite number"),
    (lambda d: d["qrel"].update({"q3": {}}), r"field 'qrel': the pool of query 'q3' must be a non-empty dict"),
    (lambda d: d["query"].update({"q3": ""}), r"field 'query': text of 'q3' must be a non-empty string"),
    (lambda d: d["corpus"].update({3.5: "x"}), r"field 'corpus': id must be a string, got float"),
])
def test_malformed_release_files_name_file_and_field(tmp_path, mutate, message):
    path = write_pickle(tmp_path / "relic" / "test_set.pickle", _broken(mutate))
    with pytest.raises(DataError, match=rf"test_set\.pickle: {message}") as err:
        load_birco("relic", str(tmp_path))
    assert Path(err.value.path).resolve() == path.resolve()  # the very file, not only its name


def test_a_set_that_is_not_a_dict(tmp_path):
    write_pickle(tmp_path / "relic" / "test_set.pickle", [1, 2, 3])
    with pytest.raises(DataError, match="must hold a dict with 'query', 'corpus' and 'qrel', got list"):
        load_birco("relic", str(tmp_path))


def test_rank_pickle_is_validated(tmp_path):
    assert load_rank_pickle(write_pickle(tmp_path / "ok.pickle", E5_LIKE))["q1"] == ["c3", "c1", "c2", "c4"]
    with pytest.raises(DataError, match=r"dup\.pickle: field 'q1': passage 'c1' is ranked twice"):
        load_rank_pickle(write_pickle(tmp_path / "dup.pickle", {"q1": ["c1", "c2", "c1"]}))
    with pytest.raises(DataError, match=r"str\.pickle: field 'q1': the ranking must be a list"):
        load_rank_pickle(write_pickle(tmp_path / "str.pickle", {"q1": "c1 c2"}))
    with pytest.raises(DataError, match=r"list\.pickle: a rank file must be a non-empty dict"):
        load_rank_pickle(write_pickle(tmp_path / "list.pickle", [["c1"]]))


# ----------------------------------------------------------------------------- the hub copies (MTEB layout)

HUB_README = textwrap.dedent("""\
    ---
    configs:
    - config_name: corpus
      data_files:
      - split: test
        path: data/corpus/test-*.parquet
    - config_name: queries
      data_files:
      - split: test
        path: data/queries/test-*.parquet
    - config_name: default
      data_files:
      - split: test
        path: data/default/test-*.parquet
    ---
    Local copy of an MTEB BIRCO repository, for tests.
    """)


def write_hub_copy(root: Path, data: dict, *, keep_zero=True) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    root.mkdir(parents=True)
    (root / "README.md").write_text(HUB_README)
    tables = {
        "corpus": {"_id": list(data["corpus"]), "title": [""] * len(data["corpus"]), "text": list(data["corpus"].values())},
        "queries": {"_id": [str(q) for q in data["query"]], "text": list(data["query"].values())},
        "default": {"query-id": [], "corpus-id": [], "score": []},
    }
    for q, rel in data["qrel"].items():
        for c, g in rel.items():
            if keep_zero or g > 0:
                tables["default"]["query-id"].append(str(q))
                tables["default"]["corpus-id"].append(c)
                tables["default"]["score"].append(int(g))
    for config, columns in tables.items():
        (root / "data" / config).mkdir(parents=True)
        pq.write_table(pa.table(columns), root / "data" / config / "test-00000-of-00001.parquet")
    return root


def test_hub_copy_loads_through_datasets(tmp_path, monkeypatch):
    monkeypatch.setenv("BOOLCL_CACHE", str(tmp_path / "cache"))
    hub = write_hub_copy(tmp_path / "BIRCO-Relic-Test", release_set())
    task = load_birco("relic", str(hub))
    release = load_birco("relic", str(write_pickle(tmp_path / "r" / "relic" / "test_set.pickle", release_set())))
    assert task.qrels == release.qrels and task.queries == release.queries and task.corpus == release.corpus
    assert task.source.startswith(str(hub))


def test_hub_copy_without_zero_grades_cannot_give_pools(tmp_path, monkeypatch):
    monkeypatch.setenv("BOOLCL_CACHE", str(tmp_path / "cache"))
    hub = write_hub_copy(tmp_path / "BIRCO-Relic-Test", release_set(), keep_zero=False)
    with pytest.raises(DataError, match="candidate pools of the BIRCO protocol cannot be recovered"):
        load_birco("relic", str(hub))


def test_unreachable_hub_says_how_to_use_the_release_files(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "cache"))
    with pytest.raises(DataError, match=r"mteb/BIRCO-Relic-Test: could not load BIRCO relic .*"
                                        r"data=birco-relic:/path/to/birco"):
        evaluate_benchmark("birco-relic", None, cfg("run=unused.pickle"))
    with pytest.raises(DataError, match="hub copies hold only the test split"):
        load_birco("relic", None, split="dev")


# ----------------------------------------------------------------------------- specs and scoring

def test_specs():
    assert parse_spec("birco-clinical-trial-dev:/x").__dict__ == {"spec": "birco-clinical-trial-dev:/x",
        "kind": "birco", "name": "birco-clinical-trial-dev", "split": "dev", "task": "clinical-trial", "path": "/x"}
    assert parse_spec("birco-doris-mae").task == "doris-mae" and parse_spec("birco-doris-mae").path is None
    assert parse_spec("birco:/r").task is None
    assert not parse_spec("sample").is_benchmark and not parse_spec("boolquestions-msmarco").is_benchmark
    # one name for a set wherever it is read: evaluate's eval/<name>/ folder and compare's tables
    assert parse_spec("birco-relic:/x/y").name == "birco-relic" and parse_spec("sample").name == "sample"
    with pytest.raises(DataError, match="unknown BIRCO task 'scifact'"):
        parse_spec("birco-scifact")


def test_rank_pickle_scores_with_graded_ndcg(release):
    import ir_measures
    from ir_measures import RR, nDCG

    result, data = evaluate_benchmark(f"birco-relic:{release}", None,
                                      cfg(f"run={release / 'ranks' / 'relic' / 'e5_rank.pickle'}"))
    # q1: [c3, c1, c2, c4] with grades c1=2, c2=1: DCG = 2/log2(3) + 1/log2(4); IDCG = 2 + 1/log2(3)
    assert result.per_query["nDCG@10"]["q1"] == pytest.approx((2 / np.log2(3) + 0.5) / (2 + 1 / np.log2(3)))
    assert result.per_query["MRR@10"] == {"q1": 0.5, "q2": 1 / 3, "q3": 1.0}
    qrels = [ir_measures.Qrel(q, c, int(g)) for q, rel in load_birco("relic", str(release)).qrels.items()
             for c, g in rel.items()]
    run = [ir_measures.ScoredDoc(q, d, s) for q, lst in result.run.items() for d, s in lst]
    ref = ir_measures.calc_aggregate([nDCG @ 10, RR @ 10], qrels, run)
    assert result.metrics["nDCG@10"]["ALL"]["value"] == pytest.approx(ref[nDCG @ 10], abs=1e-12)
    assert result.metrics["MRR@10"]["RELIC"]["value"] == pytest.approx(ref[RR @ 10], abs=1e-12)
    assert result.question_types == {"q1": "relic", "q2": "relic", "q3": "relic"}
    assert result.metrics["NegRecall@10"]["ALL"] == {"value": None, "n": 0}
    assert data["name"] == "birco-relic" and data["questions"] == 3 and data["passages"] == 8
    assert result.settings["run"]["format"] == "birco-rank-pickle"


def test_trec_run_and_rank_pickle_agree(release, tmp_path):
    from boolcl.scoring.report import write_trec_run

    via_pickle, _ = evaluate_benchmark(f"birco-relic:{release}", None,
                                       cfg(f"run={release / 'ranks' / 'relic'}"))  # a folder of rank files
    write_trec_run(tmp_path / "run.trec", via_pickle.run, "e5")
    via_trec, _ = evaluate_benchmark(f"birco-relic:{release}", None, cfg(f"run={tmp_path / 'run.trec'}"))
    assert via_trec.per_query == via_pickle.per_query and via_trec.settings["run"]["format"] == "trec"


def test_trec_ties_break_by_docid_descending(tmp_path):
    (tmp_path / "run.trec").write_text("q1 Q0 c1 1 1.0 x\nq1 Q0 c2 2 1.0 x\nq1 Q0 c3 3 2.0 x\n")
    assert [d for d, _ in read_trec_run(tmp_path / "run.trec")["q1"]] == ["c3", "c2", "c1"]


@pytest.mark.parametrize("text, message", [
    ("q1 Q0 c1 1 1.0\n", r"run\.trec:1: a TREC run line has 6 columns"),
    ("q1 Q0 c1 1 1.0 x\nq1 Q0 c2 2 high x\n", r"run\.trec:2: field 'score': 'high' is not a finite number"),
    ("q1 Q0 c1 first 1.0 x\n", r"run\.trec:1: field 'rank': 'first' is not an integer"),
    ("q1 Q0 c1 1 1.0 x\n\nq1 Q0 c1 2 0.5 x\n", r"run\.trec:3: field 'docid': 'c1' is ranked twice"),
    ("\n", r"run\.trec: holds no ranking lines"),
])
def test_malformed_trec_runs(tmp_path, text, message):
    (tmp_path / "run.trec").write_text(text)
    with pytest.raises(DataError, match=message):
        read_trec_run(tmp_path / "run.trec")


def test_rankings_must_stay_in_the_pool_and_the_task(release, tmp_path):
    outside = write_pickle(tmp_path / "outside.pickle", {"q1": ["c1", "c8"]})
    with pytest.raises(DataError, match=r"outside\.pickle: passage 'c8' ranked for query 'q1' is not in its candidate pool"):
        evaluate_benchmark(f"birco-relic:{release}", None, cfg(f"run={outside}"))
    stranger = write_pickle(tmp_path / "stranger.pickle", {"q7": ["c1"]})
    with pytest.raises(DataError, match=r"query 'q7' is not in birco-relic"):
        evaluate_benchmark(f"birco-relic:{release}", None, cfg(f"run={stranger}"))


def test_a_query_without_ranking_scores_zero_and_is_reported(release, tmp_path):
    partial = write_pickle(tmp_path / "partial.pickle", {"q1": ["c1", "c2", "c3", "c4"]})
    with pytest.warns(UserWarning, match="2 of 3 queries have no ranking"):
        result, data = evaluate_benchmark(f"birco-relic:{release}", None, cfg(f"run={partial}"))
    assert result.per_query["nDCG@10"] == {"q1": 1.0, "q2": 0.0, "q3": 0.0}
    assert data["queries_without_ranking"] == {"relic": 2}


def test_all_tasks_of_a_root_with_the_task_average(release):
    write_pickle(release / "wtb" / "test_set.pickle", release_set())
    write_pickle(release / "ranks" / "wtb" / "e5_rank.pickle", {"q1": ["c1", "c2", "c3", "c4"], "q2": ["c4"], "q3": ["c7"]})
    result, data = evaluate_benchmark(f"birco:{release}", None, cfg(f"run={release / 'ranks'}"))
    assert set(result.question_types.values()) == {"relic", "wtb"} and "wtb/q2" in result.per_query["nDCG@10"]
    relic, wtb = (result.metrics["nDCG@10"][g]["value"] for g in ("RELIC", "WTB"))
    assert wtb == 1.0 and data["task_average"]["nDCG@10"] == pytest.approx((relic + wtb) / 2)
    with pytest.raises(DataError, match="one rank pickle holds one task"):
        evaluate_benchmark(f"birco:{release}", None, cfg(f"run={release / 'ranks' / 'wtb' / 'e5_rank.pickle'}"))


def test_tiny_model_ranks_each_pool_and_writes_results(release, tiny_model_dir, tmp_path):
    from sentence_transformers import SentenceTransformer

    from boolcl.scoring.report import write_results

    result, data = evaluate_benchmark(f"birco-relic:{release}", str(tiny_model_dir), cfg("eval.batch_size=2"))
    task = load_birco("relic", str(release))
    model = SentenceTransformer(str(tiny_model_dir), device="cpu")
    for qid, ranked in result.run.items():
        assert sorted(d for d, _ in ranked) == sorted(task.pool(qid))  # the pool, no more, no less
        q = model.encode([task.queries[qid]], normalize_embeddings=True)[0]
        p = model.encode([task.corpus[c] for c, _ in ranked], normalize_embeddings=True)
        assert [s for _, s in ranked] == pytest.approx(list(p @ q), abs=1e-4)
        assert [s for _, s in ranked] == sorted((s for _, s in ranked), reverse=True)
    assert result.settings["model"]["spec"] == str(tiny_model_dir) and len(result.settings["model"]["fingerprint"]) == 32
    payload = write_results(tmp_path / "out", result, model=result.settings["model"], data=data, k=10, tag="tiny")
    assert payload["question_types"]["q1"] == "relic" and payload["headline"]["MRR@10/ALL"] is not None
    assert len((tmp_path / "out" / "run.trec").read_text().splitlines()) == sum(len(p) for p in task.qrels.values())


def test_needs_a_model_or_a_run(release):
    with pytest.raises(ValueError, match="needs a model or run="):
        evaluate_benchmark(f"birco-relic:{release}", None, cfg())


# ----------------------------------------------------------------------------- the real release files

needs_birco = pytest.mark.skipif(not BIRCO_DIR.is_dir(), reason=NO_BIRCO)


@needs_birco
@pytest.mark.parametrize("task", sorted(E5_NDCG10))
def test_published_e5_rankings_reproduce_the_readme(task):
    result, data = evaluate_benchmark(f"birco-{task}:{BIRCO_DIR}", None,
                                      cfg(f"run={BIRCO_DIR / 'ranks' / task / 'e5_rank.pickle'}"))
    assert round(100 * result.metrics["nDCG@10"]["ALL"]["value"], 2) == E5_NDCG10[task]
    assert result.metrics["nDCG@10"][task.upper()]["n"] == data["questions"] == len(result.run)
    assert data["queries_without_ranking"] == {task: 0}


@needs_birco
def test_real_relic_agrees_with_ir_measures_and_with_its_trec_run(tmp_path):
    import ir_measures
    from ir_measures import nDCG

    from boolcl.scoring.report import write_trec_run

    spec = f"birco-relic:{BIRCO_DIR}"
    result, _ = evaluate_benchmark(spec, None, cfg(f"run={BIRCO_DIR / 'ranks'}"))
    task = load_birco("relic", str(BIRCO_DIR))
    qrels = [ir_measures.Qrel(q, c, g) for q, rel in task.qrels.items() for c, g in rel.items()]
    run = [ir_measures.ScoredDoc(q, d, s) for q, lst in result.run.items() for d, s in lst]
    assert result.metrics["nDCG@10"]["ALL"]["value"] == pytest.approx(
        ir_measures.calc_aggregate([nDCG @ 10], qrels, run)[nDCG @ 10], abs=1e-12)
    write_trec_run(tmp_path / "e5.trec", result.run, "e5")
    via_trec, _ = evaluate_benchmark(spec, None, cfg(f"run={tmp_path / 'e5.trec'}"))
    assert round(100 * via_trec.metrics["nDCG@10"]["ALL"]["value"], 2) == 11.25


@needs_birco
def test_real_files_all_tasks_and_dev_sets():
    result, data = evaluate_benchmark(f"birco:{BIRCO_DIR}", None, cfg(f"run={BIRCO_DIR / 'ranks'}"))
    assert set(data["tasks"]) == set(E5_NDCG10)  # doris-mae has no test set in this copy
    assert {t: round(100 * result.metrics["nDCG@10"][t.upper()]["value"], 2) for t in E5_NDCG10} == E5_NDCG10
    assert data["task_average"]["nDCG@10"] == pytest.approx(sum(E5_NDCG10.values()) / 400, abs=1e-4)
    clinical = load_birco("clinical-trial", str(BIRCO_DIR), split="dev")
    assert {g for rel in clinical.qrels.values() for g in rel.values()} == {0, 1, 2}
    doris = load_birco("doris-mae", str(BIRCO_DIR), split="dev")
    assert any(isinstance(g, float) for rel in doris.qrels.values() for g in rel.values())  # fractional grades
    with pytest.raises(DataError, match="no BIRCO doris-mae test set here"):
        load_birco("doris-mae", str(BIRCO_DIR))
