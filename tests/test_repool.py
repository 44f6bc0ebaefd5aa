"""scripts/reproduce/repool.py: a copy of a scope-pooled model that pools by another rule, everything else equal."""
import json
from typing import NamedTuple

import pytest
import torch
from conftest import load_script

from boolcl.pooling import install, scope_pooling
from boolcl.retrieval.models import load_model

TEXTS = ["Which string instruments are there, other than the ones that are plucked with a pick?",
         "A cello is a bowed string instrument."]


class Done(NamedTuple):
    returncode: int
    stderr: str


@pytest.fixture
def repool(capsys):
    """scripts/reproduce/repool.py's main, called as its command line would be; its exit code and stderr."""
    script = load_script("scripts/reproduce/repool")

    def run(*args) -> Done:
        try:
            code, message = script.main([str(a) for a in args]), ""
        except SystemExit as stop:  # argparse's usage errors and the script's own
            code, message = (stop.code, "") if isinstance(stop.code, int) else (1, str(stop.code))
        return Done(code, capsys.readouterr().err + message)
    return run


def scoped_model(model_dir, mode: str = "tokens"):
    """The tiny model with a scope head at drop 0.5 whose weights are random, not the untrained zeros."""
    model = load_model(str(model_dir))
    head = install(model, drop=0.5, hidden=4, mode=mode)
    torch.manual_seed(0)
    with torch.no_grad():
        for p in head.parameters():
            p.normal_()
    return model, head


def test_the_copy_pools_by_the_new_mode_and_the_original_is_untouched(tiny_model_dir, tmp_path, repool):
    model, head = scoped_model(tiny_model_dir)
    model.save(str(tmp_path / "run"))
    before = model.encode(TEXTS, convert_to_tensor=True)
    head.mode = "parts"  # what the copy must embed: the same weights pooled by parts
    expected = model.encode(TEXTS, convert_to_tensor=True)
    assert not torch.allclose(before, expected, atol=1e-4)

    done = repool(tmp_path / "run", tmp_path / "parts", "--mode", "parts")
    assert done.returncode == 0, done.stderr
    copy = load_model(str(tmp_path / "parts"))
    assert scope_pooling(copy).mode == "parts"
    assert torch.allclose(copy.encode(TEXTS, convert_to_tensor=True), expected, atol=1e-6)
    original = load_model(str(tmp_path / "run"))
    assert scope_pooling(original).mode == "tokens"
    assert torch.allclose(original.encode(TEXTS, convert_to_tensor=True), before, atol=1e-6)

    again = repool(tmp_path / "run", tmp_path / "parts", "--mode", "parts")
    assert again.returncode != 0 and "exists" in again.stderr
    bad = repool(tmp_path / "run", tmp_path / "other", "--mode", "spans")
    assert bad.returncode != 0 and "tokens, parts" in bad.stderr and not (tmp_path / "other").exists()
    plain = repool(tiny_model_dir, tmp_path / "plain", "--mode", "parts")
    assert plain.returncode != 0 and "no scope head" in plain.stderr


def test_drop_alone_changes_the_subtraction_and_nothing_else(tiny_model_dir, tmp_path, repool):
    model, head = scoped_model(tiny_model_dir, mode="parts")
    model.save(str(tmp_path / "run"))
    head.drop = 1.5  # what the copy must embed
    expected = model.encode(TEXTS, convert_to_tensor=True)

    done = repool(tmp_path / "run", tmp_path / "d15", "--drop", "1.5")
    assert done.returncode == 0, done.stderr
    copy = scope_pooling(load_model(str(tmp_path / "d15")))
    assert (copy.drop, copy.mode) == (1.5, "parts")
    assert torch.allclose(load_model(str(tmp_path / "d15")).encode(TEXTS, convert_to_tensor=True), expected, atol=1e-6)
    assert scope_pooling(load_model(str(tmp_path / "run"))).drop == 0.5
    for args, message in [((), "nothing to change"), (("--drop", "-1"), "--drop")]:
        bad = repool(tmp_path / "run", tmp_path / "bad", *args)
        assert bad.returncode != 0 and message in bad.stderr and not (tmp_path / "bad").exists()


def test_shift_adds_to_the_exclusion_logits_when_pooling_and_old_models_load_without_one(tiny_model_dir, tmp_path, repool):
    model, head = scoped_model(tiny_model_dir, mode="parts")
    logits = torch.randn(2, 5, 3)
    assert torch.equal(head.class_probabilities(logits), logits.softmax(-1))  # shift 0: the head's own
    head.shift = 1.5
    by_hand = (logits + torch.tensor([0.0, 1.5, 1.5])).softmax(-1)  # ORDINARY, MARKER, EXCLUDED
    assert torch.allclose(head.class_probabilities(logits), by_hand, atol=1e-7)
    tokens = torch.randn(2, 5, head.embedding_dimension)
    features = {"token_embeddings": tokens, "attention_mask": torch.ones(2, 5, dtype=torch.long)}
    embedded = {mode: head.train(mode)(dict(features))["sentence_embedding"] for mode in (True, False)}
    head.shift = 0.0
    assert torch.equal(embedded[True], head.eval()(dict(features))["sentence_embedding"])  # training: unshifted
    assert not torch.allclose(embedded[False], embedded[True], atol=1e-6)  # retrieval (eval mode): shifted
    model.save(str(tmp_path / "run"))
    before = model.encode(TEXTS, convert_to_tensor=True)
    head.shift = 1.5  # what the copy must embed
    expected = model.encode(TEXTS, convert_to_tensor=True)
    assert not torch.allclose(before, expected, atol=1e-4)

    done = repool(tmp_path / "run", tmp_path / "s15", "--shift", "1.5")
    assert done.returncode == 0, done.stderr
    copy = load_model(str(tmp_path / "s15"))
    assert (scope_pooling(copy).shift, scope_pooling(copy).drop) == (1.5, 0.5)
    assert torch.allclose(copy.encode(TEXTS, convert_to_tensor=True), expected, atol=1e-6)
    bad = repool(tmp_path / "run", tmp_path / "bad", "--shift", "nan")
    assert bad.returncode != 0 and "--shift" in bad.stderr and not (tmp_path / "bad").exists()

    config = next((tmp_path / "run").glob("*ScopePooling/config.json"))  # as saved before shift existed
    settings = json.loads(config.read_text())
    del settings["shift"]
    config.write_text(json.dumps(settings))
    old = load_model(str(tmp_path / "run"))
    assert scope_pooling(old).shift == 0.0
    assert torch.allclose(old.encode(TEXTS, convert_to_tensor=True), before, atol=1e-6)
