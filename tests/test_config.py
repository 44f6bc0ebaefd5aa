import re
import subprocess
import sys

import pytest
from conftest import ROOT

from boolcl.config import available_recipes, check_overrides, compose, to_yaml
from boolcl.errors import ConfigError


def test_every_recipe_composes_and_validates():
    assert set(available_recipes()) >= {"not", "and", "or", "all", "tiny"}
    for name in available_recipes():
        cfg = compose([f"recipe={name}"])
        assert cfg.name == name


@pytest.mark.parametrize("op", ["not", "and", "or"])
def test_paper_recipes_carry_the_papers_settings(op):
    cfg = compose([f"recipe={op}"])
    assert cfg.model == "sentence-transformers/msmarco-distilbert-dot-v5"
    assert cfg.similarity == "dot"
    t = cfg.train
    assert (t.batch_size, t.lr, t.max_length, t.num_examples) == (64, 2e-5, 300, 2000)
    assert list(t.operators) == [op] and t.original == "msmarco" and t.warmup_ratio > 0
    assert cfg.generate.num_examples == 2000 and list(cfg.generate.operators) == [op]


def test_all_recipe_mixes_every_operator():
    cfg = compose(["recipe=all"])
    assert sorted(cfg.train.operators) == ["and", "not", "or"]


def test_tiny_recipe_is_offline():
    cfg = compose(["recipe=tiny"])
    assert cfg.model == "offline-default" and cfg.data == "sample" and cfg.train.original == "sample"


def test_overrides_apply():
    cfg = compose(["recipe=not", "train.batch_size=32", "eval.k=20", "seed=7", "model=some/folder"])
    assert (cfg.train.batch_size, cfg.eval.k, cfg.seed, cfg.model) == (32, 20, 7, "some/folder")


def test_unknown_recipe_lists_the_available_ones():
    with pytest.raises(ConfigError, match=r"unknown recipe 'nope'.*all, and, not, not_plus, not_plus_tiny, or, tiny"):
        compose(["recipe=nope"])


def test_unknown_key_lists_the_keys_and_suggests():
    with pytest.raises(ConfigError, match=r"train.bach_size.*batch_size.*did you mean train.batch_size"):
        check_overrides(["train.bach_size=3"])
    with pytest.raises(ConfigError, match=r"sections: compare, decompose, eval, generate, llm, train"):
        check_overrides(["trian.lr=1"])
    with pytest.raises(ConfigError, match=r"keys at the top level: name, model"):
        check_overrides(["modle=x"])


@pytest.mark.parametrize("override,message", [
    ("train.batch_size=0", "train.batch_size=0 must be >= 1"),
    ("similarity=manhattan", "similarity='manhattan' is not one of"),
    ("train.operators=[xor]", "train.operators"),
    ("train.lr=abc", "lr"),  # type error from the structured schema
])
def test_invalid_values_name_the_key(override, message):
    with pytest.raises(ConfigError, match=message):
        compose(["recipe=tiny", override])


@pytest.mark.parametrize("override", [
    "train.log_every=0", "train.save_every=-1", "train.num_examples=-1", "train.original_size=-5",
    "train.max_steps=0", "train.max_grad_norm=0", "train.scale=0", "train.weight_decay=-0.1", "train.num_workers=-1",
    "train.lora.r=0", "train.lora.dropout=1.0", "eval.batch_size=0", "eval.shard_size=0", "eval.max_length=0",
    "eval.max_corpus=0", "llm.temperature=-1", "llm.price_output=-1",
])
def test_counts_and_intervals_are_checked_before_any_work(override):
    key, value = override.split("=")
    with pytest.raises(ConfigError, match=rf"^{re.escape(key)}={re.escape(value)}\b.* must be "):
        compose(["recipe=tiny", override])


@pytest.mark.parametrize("override", ["train.num_examples=0", "train.save_every=0", "train.log_every=1",
                                      "eval.shard_size=1", "train.max_steps=-1", "train.max_steps=3"])
def test_the_edge_values_are_allowed(override):
    compose(["recipe=tiny", override])


def test_saved_config_never_holds_the_api_key(monkeypatch):
    monkeypatch.setenv("BOOLCL_TEST_KEY", "sk-test-secret-value-1234567890")
    cfg = compose(["recipe=tiny", "llm.api_key_env=BOOLCL_TEST_KEY"])
    text = to_yaml(cfg)
    assert "BOOLCL_TEST_KEY" in text and "sk-test-secret" not in text


def _train_py(*args):
    return subprocess.run([sys.executable, "train.py", *args], cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_train_py_prints_the_papers_settings():
    res = _train_py("recipe=not", "--cfg", "job")
    assert res.returncode == 0, res.stderr
    assert "msmarco-distilbert-dot-v5" in res.stdout and "batch_size: 64" in res.stdout
    assert "lr: 2.0e-05" in res.stdout and "max_length: 300" in res.stdout


def test_train_py_rejects_unknown_recipe_and_key():
    res = _train_py("recipe=nope")
    assert res.returncode != 0 and "available recipes: all, and, not, not_plus, not_plus_tiny, or, tiny" in res.stderr
    res = _train_py("recipe=not", "train.bach_size=3")
    assert res.returncode != 0 and "did you mean train.batch_size" in res.stderr


def test_resume_is_read_the_same_way_everywhere():
    """The training-files check (config/inputs.py) and checkpoint.find_resume read train.resume alike."""
    from boolcl.config import resume_flag

    assert [resume_flag(v) for v in (True, "true", "True")] == [True] * 3
    assert [resume_flag(v) for v in (False, "false", "False", None)] == [False] * 4
    assert resume_flag("runs/x/checkpoint-4") is None
    assert resume_flag("TRUE") is None  # a folder named TRUE, as find_resume then reads it
