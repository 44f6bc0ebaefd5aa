"""A run folder's README.md describes that run (base, recipe, data, objective, results), hub-style."""
import hashlib
import json

import pytest
import yaml

from boolcl.config import compose
from boolcl.retrieval.card import hub_base_model, record_results, redact
from boolcl.retrieval.card import overrides as card_overrides
from boolcl.retrieval.models import PACKAGED_HUB_ID, load_eval_model

SECRET = "sk-card-test-never-in-a-file-0123456789"


def front_matter(path):
    """The YAML between the first two `---` lines, parsed as the hub parses it."""
    text = path.read_text(encoding="utf-8")
    assert text.startswith("---\n"), text[:200]
    head, body = text[4:].split("\n---\n", 1)
    return yaml.safe_load(head), body


def overrides(tiny_model_dir, pool, out, small_set):
    return ["recipe=tiny", f"model={tiny_model_dir}", f"train.boolean={pool}", f"train.original={pool}",
            "train.operators=[not]", "train.batch_size=2", "train.hard_negatives=1", "train.max_steps=2",
            "train.save_every=1", "train.keep_last=1", "train.log_every=1", "train.max_length=32",
            "train.lr=1e-4", "train.report_to=[]", f"data={small_set}", "eval.cache=false", f"out={out}"]


@pytest.fixture
def run(tiny_model_dir, pool, tmp_path, small_set, monkeypatch):
    from boolcl.train.loop import train

    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    cfg = compose(overrides(tiny_model_dir, pool, tmp_path / "run", small_set))
    return train(cfg), cfg


def test_trained_run_card_names_base_recipe_data_and_objective(run, tiny_model_dir, pool):
    from sentence_transformers import SentenceTransformer

    run_dir, cfg = run
    meta, body = front_matter(run_dir / "README.md")
    assert (run_dir / "README.md").read_text() != (tiny_model_dir / "README.md").read_text()
    assert meta["library_name"] == "sentence-transformers"
    assert {"sentence-transformers", "boolcl", "boolcl-recipe-tiny"} <= set(meta["tags"])
    assert "base_model" not in meta  # a local folder is no hub id; the boolcl block names it
    b = meta["boolcl"]
    assert b["recipe"] == "tiny" and b["run"] == run_dir.name
    assert b["base_model"]["spec"] == tiny_model_dir.name  # a local folder by its name; the fingerprint says which
    assert b["base_model"]["fingerprint"] == load_eval_model(str(tiny_model_dir), cfg)[1]["fingerprint"]
    assert b["overrides"]["train.lr"] == 1e-4 and b["overrides"]["train.max_steps"] == 2
    assert b["overrides"]["train.boolean"] == pool.name and b["overrides"]["out"] == "run"
    assert "train.epochs" not in b["overrides"]  # the recipe's own value is no override
    assert b["data"]["files"][pool.name]["sha256"] == hashlib.sha256(pool.read_bytes()).hexdigest()
    assert b["data"]["per_operator"][pool.name] == {"not": 2, "simple": 2}
    assert b["data"]["mix"]["boolean"]["examples"] == 2
    assert b["objective"] == {"contrastive": {"loss": "infonce", "weight": 1.0, "scale": None, "hard_negatives": 1}}
    assert b["training"]["steps"] == 2 and b["training"]["precision"] == "no" and b["training"]["processes"] == 1
    assert "model-index" not in meta  # not scored yet
    assert "## boolcl training run" in body and f"`{pool.name}`" in body and "## Model Details" in body
    # the intermediate checkpoint describes itself too, at its own step
    (ckpt,) = run_dir.glob("checkpoint-*")
    assert front_matter(ckpt / "README.md")[0]["boolcl"]["training"]["steps"] == 1
    assert SentenceTransformer(str(run_dir)).encode(["q"]).shape == (1, 32)  # the card does not break loading
    for f in run_dir.rglob("*"):
        if f.is_file():
            assert SECRET.encode() not in f.read_bytes(), f


def machine_paths(card: str, *roots) -> list[str]:
    """The absolute paths of `roots` (and any folder under them) that a card's text still names."""
    return [str(r) for r in roots if str(r) in card]


def test_card_names_files_by_name_and_hash_not_by_this_machines_paths(tiny_model_dir, pool, tmp_path, small_set):
    """A card is published: the bundled sample and a pool of one's own are named by file name and
    sha256, and no absolute path of the training machine (checkout, temp folders) is left in it."""
    from boolcl.data.loaders import SAMPLE_DIR
    from boolcl.train.loop import train

    out = tmp_path / "published"
    args = overrides(tiny_model_dir, pool, out, small_set)
    args[args.index(f"train.boolean={pool}")] = "train.boolean=sample"  # the demo's pool: the bundled sample
    args += ["train.max_steps=1", "train.save_every=0", f"train.eval_data=[sample,{small_set}]"]
    run_dir = train(compose(args))
    text = (run_dir / "README.md").read_text(encoding="utf-8")
    leaked = machine_paths(text, SAMPLE_DIR, SAMPLE_DIR.parents[2], tiny_model_dir, pool.parent, small_set, tmp_path)
    assert not leaked, f"the card names this machine's paths {leaked}"
    files = front_matter(run_dir / "README.md")[0]["boolcl"]["data"]["files"]
    want = {"sample/train.jsonl": SAMPLE_DIR / "train.jsonl", "sample/corpus.jsonl": SAMPLE_DIR / "corpus.jsonl",
            "pool/train.jsonl": pool, "pool/corpus.jsonl": pool.with_name("corpus.jsonl")}
    assert {name: f["sha256"] for name, f in files.items()} == {
        name: hashlib.sha256(path.read_bytes()).hexdigest() for name, path in want.items()}
    assert all(f"`{name}`" in text for name in want)  # the card's table names them as the front matter does


def test_public_values_and_short_names():
    from boolcl.retrieval.card import public, short_names

    assert public("/home/me/runs/not-s1") == "not-s1"
    assert public("nevir:/data/sets/nevir") == "nevir:nevir"
    assert public(["sample", "/x/y/eval"]) == ["sample", "eval"]
    for kept in ("generated/not.jsonl", "mteb/scifact", "http://127.0.0.1:8000/v1", "sample", "offline-default"):
        assert public(kept) == kept
    assert short_names(["/a/b/train.jsonl", "/a/c/train.jsonl", "/a/c/corpus.jsonl", "sample"]) == {
        "/a/b/train.jsonl": "b/train.jsonl", "/a/c/train.jsonl": "c/train.jsonl",
        "/a/c/corpus.jsonl": "corpus.jsonl", "sample": "sample"}


def test_evaluate_puts_results_json_into_model_index(run, tmp_path, tiny_model_dir):
    from boolcl.evaluate.command import run_evaluate

    run_dir, cfg = run
    for _ in range(2):  # a second evaluation of the same data replaces, never duplicates
        _, payload, out_dir = run_evaluate(str(run_dir), cfg, str(tmp_path / "eval"))
    results = json.loads((out_dir / "results.json").read_text())
    meta, body = front_matter(run_dir / "README.md")
    (entry,) = meta["model-index"]
    (scored,) = entry["results"]
    assert scored["dataset"]["type"] == results["data"]["name"] and scored["task"]["type"] == "retrieval"
    got = {m["name"]: m["value"] for m in scored["metrics"]}
    want = {k: v for k, v in results["headline"].items() if v is not None}
    assert got == pytest.approx(want) and len(got) == len(scored["metrics"]) and want
    assert f"{results['headline']['MRR@10/ALL']:.2f}" in body.split("<!-- boolcl:results -->")[1]
    assert meta["boolcl"]["recipe"] == "tiny"  # the rest of the card survives the refresh
    # a folder that is not a boolcl run keeps its README untouched
    before = (tiny_model_dir / "README.md").read_bytes()
    run_evaluate(str(tiny_model_dir), cfg, str(tmp_path / "eval-base"))
    assert (tiny_model_dir / "README.md").read_bytes() == before
    assert record_results(tiny_model_dir, payload) is False


def test_demo_card_has_before_and_after(tiny_model_dir, pool, tmp_path, small_set):
    from rich.console import Console

    from boolcl.demo import run_demo

    with open(tmp_path / "log.txt", "w") as log:
        payload = run_demo(overrides(tiny_model_dir, pool, tmp_path / "demo", small_set), console=Console(file=log))
    meta, body = front_matter(tmp_path / "demo" / "README.md")
    got = {m["name"]: m["value"] for m in meta["model-index"][0]["results"][0]["metrics"]}
    assert got == pytest.approx({k: v for k, v in payload["headline"].items() if v is not None})
    base = payload["base"]["headline"]["MRR@10/ALL"]
    assert "MRR@10 base" in body and f"{base:.2f}" in body and "MRR@10 Δ" in body
    assert meta["boolcl"]["base_model"]["fingerprint"] == payload["base"]["model"]["fingerprint"]


def test_base_model_id_and_secrets(monkeypatch, tiny_model_dir):
    assert hub_base_model("offline-default") == PACKAGED_HUB_ID
    assert hub_base_model("intfloat/e5-small-v2") == "intfloat/e5-small-v2"
    assert hub_base_model(str(tiny_model_dir)) is None
    monkeypatch.setenv("HF_TOKEN", "hf_abcdefghijklmnop")
    assert redact("token hf_abcdefghijklmnop here") == "token <redacted> here"


def test_overrides_inside_train_py_hydra_context():
    """train.py runs under @hydra.main: the card still finds the settings that differ from the recipe."""
    from hydra import initialize_config_dir
    from omegaconf import OmegaConf

    from boolcl.config.compose import recipes_dir

    cfg = OmegaConf.to_container(compose(["recipe=not_plus_tiny", "train.lr=0.5", "seed=7"]), resolve=True)
    with initialize_config_dir(config_dir=str(recipes_dir()), version_base="1.3"):
        recipe, changed = card_overrides(cfg)
    assert recipe == "not_plus_tiny" and changed == {"train.lr": 0.5, "seed": 7}
    assert card_overrides(cfg) == (recipe, changed)  # and outside it
