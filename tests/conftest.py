"""Shared fixtures: a tiny random encoder (shapes only) and small data files."""
from __future__ import annotations

import atexit
import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# Never ~/.cache; under pytest-xdist (`-n auto`) each worker a cache of its own, since tests count hits
_WORKER = os.environ.get("PYTEST_XDIST_WORKER")
if _WORKER or "BOOLCL_CACHE" not in os.environ:
    os.environ["BOOLCL_CACHE"] = tempfile.mkdtemp(prefix=f"boolcl-test-cache-{_WORKER or 'main'}-")
    # removed when the process ends, so repeated runs leave nothing in the temporary folder
    atexit.register(shutil.rmtree, os.environ["BOOLCL_CACHE"], ignore_errors=True)
# N workers each running torch (and the processes their tests start) on every core fight over
# them and run many times slower: each gets its share. Set before any test imports torch.
if int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")) > 1:
    _share = str(max(1, (os.cpu_count() or 1) // int(os.environ["PYTEST_XDIST_WORKER_COUNT"])))
    for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[_var] = _share

ROOT = Path(__file__).resolve().parents[1]


def load_script(path: str):
    """A script of the repository as a module, `path` relative to the root without `.py`
    (`scripts/reproduce/ablation`), so a test calls its main(argv) in this process: a fresh
    interpreter per call spends about 5 s importing torch and sentence-transformers."""
    import importlib.util
    import sys

    key = "boolcl_scripts_" + path.replace("/", "_")
    if key not in sys.modules:
        spec = importlib.util.spec_from_file_location(key, ROOT / f"{path}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[key] = module  # a dataclass in the script looks its module up there
        spec.loader.exec_module(module)
    return sys.modules[key]


def _make_tiny(root: Path, dropout: float) -> Path:
    """A randomly initialised 2-layer BERT saved as a SentenceTransformer folder (vocab of MiniLM)."""
    import torch
    from sentence_transformers import SentenceTransformer
    from transformers import AutoTokenizer, BertConfig, BertModel

    from boolcl.retrieval.models import packaged_model_dir

    torch.manual_seed(0)
    hf = root / "hf"
    # BOOLCL_TEST_TOKENIZER: a tokenizer folder, for a machine where the packaged MiniLM is not installed
    tokenizer = AutoTokenizer.from_pretrained(os.environ.get("BOOLCL_TEST_TOKENIZER") or str(packaged_model_dir()))
    config = BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=2,
                        num_attention_heads=2, intermediate_size=64, max_position_embeddings=128,
                        hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout)
    BertModel(config).save_pretrained(hf)
    tokenizer.save_pretrained(hf)
    model = SentenceTransformer(str(hf), device="cpu")
    model.max_seq_length = 64
    model.save(str(root / "st"))
    return root / "st"


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    """Shapes only: random weights, dropout on (so RNG handling is exercised)."""
    return _make_tiny(tmp_path_factory.mktemp("tiny"), dropout=0.1)


@pytest.fixture(scope="session")
def tiny_nodrop_dir(tmp_path_factory) -> Path:
    """As tiny_model_dir without dropout: runs on 1 and 2 processes must compute the same thing."""
    return _make_tiny(tmp_path_factory.mktemp("tiny-nodrop"), dropout=0.0)


def dump_jsonl(path: Path, rows) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows), encoding="utf-8")
    return path


def write_set(folder: Path, corpus, questions) -> Path:
    """A retrieval set in the project's layout: folder/corpus.jsonl and folder/eval.jsonl."""
    dump_jsonl(folder / "corpus.jsonl", corpus)
    dump_jsonl(folder / "eval.jsonl", questions)
    return folder


def write_evaluation(folder: Path, mrr: dict, ranking: dict) -> str:
    """A folder as `boolcl evaluate` leaves it: results.json (per-question MRR@10) and run.trec."""
    folder.mkdir(parents=True)
    (folder / "results.json").write_text(json.dumps({"per_query": {"MRR@10": mrr}}), encoding="utf-8")
    (folder / "run.trec").write_text("".join(f"{q} Q0 {p} {r} {1 - r / 10:.2f} m\n" for q, ps in ranking.items()
                                             for r, p in enumerate(ps, 1)), encoding="utf-8")
    return str(folder)


def write_pool(folder: Path, rows, small_set: Path) -> Path:
    """A training pool (train.jsonl) next to a copy of the small set's corpus, and, when its rows name
    clusters, their groups as `boolcl generate` writes them (train.groups.jsonl: the cluster's plain
    question as its topic, each passage's first three words as its name); returns train.jsonl."""
    dump_jsonl(folder / "train.jsonl", rows)
    corpus = (small_set / "corpus.jsonl").read_text()
    (folder / "corpus.jsonl").write_text(corpus)
    texts = {r["docid"]: r["doc"] for r in map(json.loads, corpus.splitlines())}
    groups: dict[str, dict] = {}
    for r in rows:
        prov = r.get("provenance") or {}
        if prov.get("cluster"):
            g = groups.setdefault(prov["cluster"], {"topic": prov.get("disjunctive", prov["cluster"]).rstrip("?"),
                                                    "ids": []})
            for c in r.get("positive_ctxs", []) + r.get("negative_ctxs", []):
                if c["passage_id"] not in g["ids"]:
                    g["ids"].append(c["passage_id"])
    if groups:
        dump_jsonl(folder / "train.groups.jsonl", [
            {"cluster": name, "topic": g["topic"], "passages": [
                {"docid": i, "name": " ".join(texts[i].split()[:3]), "text": texts[i]} for i in sorted(g["ids"])]}
            for name, g in groups.items()])
    return folder / "train.jsonl"


@pytest.fixture
def small_set(tmp_path) -> Path:
    """A folder in the project's layout: 2 topics x 3 passages, one question of each type."""
    docs = [{"docid": f"d{i}", "doc": text} for i, text in enumerate([
        "Gallstones are hard deposits in the gallbladder that cause pain after fatty meals.",
        "Hepatitis is an inflammation of the liver, often caused by a virus.",
        "A peptic ulcer is a sore in the lining of the stomach that burns between meals.",
        "The violin is a small bowed string instrument with four strings tuned in fifths.",
        "The cello is a large bowed string instrument played seated, held between the knees.",
        "The harp is a plucked string instrument with dozens of strings in a triangular frame.",
    ])]
    qs = [
        {"qid": "q-not", "question": "What causes upper abdominal pain that has nothing to do with the liver?",
         "question_type": "not", "positive_ctxs": [{"passage_id": "d0"}, {"passage_id": "d2"}],
         "negative_ctxs": [{"passage_id": "d1"}]},
        {"qid": "q-and", "question": "Which bowed string instrument is played seated?", "question_type": "and",
         "positive_ctxs": [{"passage_id": "d4"}], "negative_ctxs": [{"passage_id": "d3"}, {"passage_id": "d5"}]},
        {"qid": "q-or", "question": "Which instrument is plucked, or which is tuned in fifths?", "question_type": "or",
         "positive_ctxs": [{"passage_id": "d5"}, {"passage_id": "d3"}], "negative_ctxs": [{"passage_id": "d4"}]},
    ]
    return write_set(tmp_path / "set", docs, qs)


@pytest.fixture
def pool(tmp_path, small_set):
    """A training pool next to its corpus: one example of each kind on the small set's passages."""
    rows = [
        {"qid": "t-not", "question": "Which stomach problems are not about the liver?", "question_type": "not",
         "positive_ctxs": [{"passage_id": "d0"}, {"passage_id": "d2"}], "negative_ctxs": [{"passage_id": "d1"}]},
        {"qid": "t-not2", "question": "Which string instruments are not plucked?", "question_type": "not",
         "positive_ctxs": [{"passage_id": "d3"}, {"passage_id": "d4"}], "negative_ctxs": [{"passage_id": "d5"}]},
        {"qid": "t-s1", "question": "What is a cello?", "question_type": "simple",
         "positive_ctxs": [{"passage_id": "d4"}], "hard_negative_ctxs": [{"passage_id": "d3"}]},
        {"qid": "t-s2", "question": "What are gallstones?", "question_type": "simple",
         "positive_ctxs": [{"passage_id": "d0", "text": "Gallstones form in the gallbladder."}]},
    ]
    return write_pool(tmp_path / "pool", rows, small_set)


@pytest.fixture
def not_pool(tmp_path, small_set):
    """NOT questions with their plain (disjunctive) form, two clusters, plus simple questions."""
    def ctx(*ids):
        return [{"passage_id": i} for i in ids]

    stomach, strings = {"cluster": "stomach", "disjunctive": "What causes upper abdominal pain?"}, \
        {"cluster": "strings", "disjunctive": "Which string instruments are there?"}
    rows = [
        {"qid": "n1", "question": "What causes upper abdominal pain but not in the liver?", "question_type": "not",
         "positive_ctxs": ctx("d0", "d2"), "negative_ctxs": ctx("d1"), "provenance": stomach},
        {"qid": "n2", "question": "What causes upper abdominal pain apart from gallstones?", "question_type": "not",
         "positive_ctxs": ctx("d1", "d2"), "negative_ctxs": ctx("d0"), "provenance": stomach},
        {"qid": "n3", "question": "Which string instruments are not plucked?", "question_type": "not",
         "positive_ctxs": ctx("d3", "d4"), "negative_ctxs": ctx("d5"), "provenance": strings},
        {"qid": "n4", "question": "Which string instruments are not played seated?", "question_type": "not",
         "positive_ctxs": ctx("d3", "d5"), "negative_ctxs": ctx("d4"), "provenance": strings},
        {"qid": "s1", "question": "What is a cello?", "question_type": "simple", "positive_ctxs": ctx("d4"),
         "hard_negative_ctxs": ctx("d3")},
        {"qid": "s2", "question": "What are gallstones?", "question_type": "simple", "positive_ctxs": ctx("d0"),
         "hard_negative_ctxs": ctx("d2")},
    ]
    return write_pool(tmp_path / "pool", rows, small_set)


def pool_items(path: Path) -> list:
    """A training pool's questions as the trainer holds them for composing (parts and passage group)."""
    from types import SimpleNamespace

    from boolcl.data.schema import TrainingExample
    from boolcl.train.decomposition import not_parts

    rows = [TrainingExample.from_dict(json.loads(line)) for line in path.read_text(encoding="utf-8").splitlines()]
    return [SimpleNamespace(not_parts=not_parts(ex), group=ex.group) for ex in rows]


def plus_cfg(model_dir, pool, out, *extra):
    """not_plus_tiny on a tiny model and pool: batch 2, two epochs, two warm-up steps."""
    from boolcl.config import compose

    return compose(["recipe=not_plus_tiny", f"model={model_dir}", f"train.boolean={pool}", f"train.original={pool}",
                    "train.original_size=null", "train.batch_size=2", "train.epochs=2", "train.log_every=1",
                    "train.max_length=32", "train.decomposition.warmup_steps=2", "train.report_to=[]", f"out={out}",
                    *extra])
