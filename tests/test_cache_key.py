"""The embedding cache's key follows everything that changes a vector .

Each case changes one thing about the tiny model (a tokenizer file, an added token, the
pooling mode, Normalize, a Dense layer and its activation, a prompt, the max length, the precision),
checks that the change really moves the vectors, and that evaluating through the cache
then misses (every shard encoded again) and scores like an evaluation without the cache.
"""
from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import torch

from boolcl.cli import main
from boolcl.data.loaders import load_retrieval_set
from boolcl.retrieval import identity as identity_module
from boolcl.retrieval.encode import encode
from boolcl.retrieval.identity import embedding_identity, encoder_state
from boolcl.retrieval.models import load_model, packaged_model_dir
from boolcl.scoring.runner import evaluate_model, headline

PROBE = ["Gallstones CAUSE pain after fatty meals.", "The violin has four strings tuned in fifths."]


def _modules():
    from sentence_transformers import SentenceTransformer

    try:
        from sentence_transformers.sentence_transformer.modules import (
            Normalize,
            Pooling,
        )
    except ImportError:  # sentence-transformers 5
        from sentence_transformers.models import Normalize, Pooling
    return SentenceTransformer, Pooling, Normalize


def _dense_class():
    try:
        from sentence_transformers.sentence_transformer.modules import Dense
    except ImportError:  # sentence-transformers 5
        from sentence_transformers.models import Dense
    return Dense


def _rebuilt(model, *modules):
    SentenceTransformer, _, _ = _modules()
    out = SentenceTransformer(modules=list(modules), device="cpu")
    out.max_seq_length = model.max_seq_length
    out.similarity_fn_name = model.similarity_fn_name
    return out


def _evaluate(model, rset, cache, **kw):
    return evaluate_model(model, rset, show_progress=False, cache_dir=cache, shard_size=2, **kw)


def _lowercase_off(folder):
    """A cased tokenizer: the flag in tokenizer_config.json (transformers 5 reads it) and tokenizer.json."""
    for name, edit in (("tokenizer_config.json", lambda c: c.update(do_lower_case=False)),
                       ("tokenizer.json", lambda c: c["normalizer"].update(lowercase=False))):
        spec = json.loads((folder / name).read_text())
        edit(spec)
        (folder / name).write_text(json.dumps(spec))


def test_same_model_twice_hits_and_each_change_misses(tiny_model_dir, small_set, tmp_path):
    _, Pooling, Normalize = _modules()
    Dense = _dense_class()
    rset = load_retrieval_set(str(small_set))
    cache = tmp_path / "emb"
    base = load_model(str(tiny_model_dir))
    first = _evaluate(base, rset, cache)
    assert first.settings["embedding_cache"]["encoded_here"] == 3  # 6 passages, shards of 2
    again = _evaluate(load_model(str(tiny_model_dir)), rset, cache)  # loaded afresh: same identity, a hit
    assert again.settings["embedding_cache"]["encoded_here"] == 0
    assert again.settings["embedding_identity"] == first.settings["embedding_identity"]
    copy = shutil.copytree(tiny_model_dir, tmp_path / "copy")  # another folder, same files: still a hit
    assert _evaluate(load_model(str(copy)), rset, cache).settings["embedding_cache"]["encoded_here"] == 0

    lower = shutil.copytree(tiny_model_dir, tmp_path / "cased")
    _lowercase_off(lower)
    added = load_model(str(tiny_model_dir))
    added.tokenizer.add_tokens(["gallstones"])  # a whole word, no longer split into pieces
    assert encoder_state(added, model_fp="w")["tokenizer"] != encoder_state(base, model_fp="w")["tokenizer"]
    inner = dict(added[0].named_children())
    (inner.get("model") or inner["auto_model"]).resize_token_embeddings(len(added.tokenizer))
    cls = load_model(str(tiny_model_dir))
    normalized = load_model(str(tiny_model_dir))
    short = load_model(str(tiny_model_dir))
    short.max_seq_length = 6
    dim = base[1].get_config_dict().get("embedding_dimension") or base[1].get_config_dict()["word_embedding_dimension"]
    dense = load_model(str(tiny_model_dir))
    torch.manual_seed(1)
    dense = _rebuilt(dense, dense[0], dense[1], Dense(dim, dim))  # a head with weights of its own
    cases = {
        "tokenizer file (lowercase off)": (load_model(str(lower)), {}),
        "added token": (added, {}),
        "pooling mean -> cls": (_rebuilt(cls, cls[0], Pooling(dim, "cls")), {}),
        "Normalize added": (_rebuilt(normalized, normalized[0], normalized[1], Normalize()), {}),
        "max length": (short, {}),
        "passage prompt": (load_model(str(tiny_model_dir)), {"passage_prompt": "passage: "}),
        "Dense added": (dense, {}),
    }
    ref = encode(base, PROBE, show_progress=False)
    seen = {first.settings["embedding_identity"]["passages"]}
    for name, (model, kw) in cases.items():
        moved = encode(model, [kw.get("passage_prompt", "") + t for t in PROBE], show_progress=False)
        assert not np.allclose(moved, ref, atol=1e-5), f"{name}: the change does not move the vectors"
        result = _evaluate(model, rset, cache, **kw)
        assert result.settings["embedding_cache"]["encoded_here"] == 3, f"{name}: read another model's vectors"
        ident = result.settings["embedding_identity"]["passages"]
        assert ident not in seen, name
        seen.add(ident)
        fresh = evaluate_model(model, rset, show_progress=False, **kw)
        assert headline(result) == headline(fresh), name

    # the Dense layer with the same weights and another activation, then Normalize removed again
    before = encode(dense, PROBE, show_progress=False)
    dense[2].activation_function = torch.nn.Identity()
    assert not np.allclose(encode(dense, PROBE, show_progress=False), before, atol=1e-5)
    linear = _evaluate(dense, rset, cache)
    assert linear.settings["embedding_cache"]["encoded_here"] == 3
    assert linear.settings["embedding_identity"]["passages"] not in seen
    plain = _rebuilt(normalized, normalized[0], normalized[1])
    assert _evaluate(plain, rset, cache).settings["embedding_cache"]["encoded_here"] == 0  # the base's entry


def test_precision_is_part_of_the_key(tiny_model_dir, small_set, tmp_path, monkeypatch):
    """On CPU boolcl encodes in full precision; a GPU run in bf16 writes and reads its own entry."""
    rset = load_retrieval_set(str(small_set))
    model = load_model(str(tiny_model_dir))
    full = _evaluate(model, rset, tmp_path / "emb")
    assert full.settings["precision"] == "none"
    monkeypatch.setattr(identity_module, "autocast_dtype", lambda device: torch.bfloat16)
    half = _evaluate(model, rset, tmp_path / "emb")
    assert half.settings["precision"] == "bfloat16"
    assert half.settings["embedding_cache"]["encoded_here"] == 3
    assert half.settings["embedding_identity"] != full.settings["embedding_identity"]
    state = encoder_state(model)
    assert embedding_identity(model, prompt="", state=state) == embedding_identity(model, prompt=None, state=state)
    assert embedding_identity(model, prompt="", state={**state, "precision": "float16"}) != \
        embedding_identity(model, prompt="", state=state)


def test_query_prompt_changes_the_recorded_identity_not_the_corpus_entry(tiny_model_dir, small_set, tmp_path):
    rset = load_retrieval_set(str(small_set))
    model = load_model(str(tiny_model_dir))
    a = _evaluate(model, rset, tmp_path / "emb")
    b = _evaluate(model, rset, tmp_path / "emb", query_prompt="query: ")
    assert b.settings["embedding_cache"]["encoded_here"] == 0  # passages encode the same
    assert a.settings["embedding_identity"]["passages"] == b.settings["embedding_identity"]["passages"]
    assert a.settings["embedding_identity"]["queries"] != b.settings["embedding_identity"]["queries"]


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_minilm_resaved_with_cls_pooling_does_not_read_the_mean_pooled_cache(small_set, tmp_path):
    """A model re-saved with CLS pooling: same weights, another pooling, so another cache key."""
    _, Pooling, _ = _modules()
    mean_dir = shutil.copytree(packaged_model_dir(), tmp_path / "minilm")
    model = load_model(str(mean_dir))
    model._modules["1"] = Pooling(384, "cls")  # MiniLM's width
    model.save(str(tmp_path / "minilm-cls"))
    args = [f"data={small_set}", f"eval.cache_dir={tmp_path / 'emb'}", "eval.shard_size=2"]
    assert main(["evaluate", str(mean_dir), *args, f"out={tmp_path / 'mean'}"]) == 0
    assert main(["evaluate", str(tmp_path / "minilm-cls"), *args, f"out={tmp_path / 'cls'}"]) == 0
    assert main(["evaluate", str(tmp_path / "minilm-cls"), *args, "eval.cache=false", f"out={tmp_path / 'fresh'}"]) == 0
    res = {x: json.loads((tmp_path / x / "results.json").read_text()) for x in ("mean", "cls", "fresh")}
    assert res["mean"]["model"]["fingerprint"] == res["cls"]["model"]["fingerprint"]  # the weights are the same
    assert res["cls"]["settings"]["embedding_cache"]["encoded_here"] == 3
    assert res["cls"]["settings"]["embedding_identity"] != res["mean"]["settings"]["embedding_identity"]
    runs = {x: [line.split() for line in (tmp_path / x / "run.trec").read_text().splitlines()]
            for x in ("mean", "cls", "fresh")}
    # the cached vectors were encoded two at a time, the fresh ones in one batch: the same up to float noise
    assert [r[:4] for r in runs["cls"]] == [r[:4] for r in runs["fresh"]]
    assert all(abs(float(a[4]) - float(b[4])) < 1e-5 for a, b in zip(runs["cls"], runs["fresh"]))
    assert [r[:4] for r in runs["cls"]] != [r[:4] for r in runs["mean"]] or \
        any(abs(float(a[4]) - float(b[4])) > 1e-3 for a, b in zip(runs["cls"], runs["mean"]))
    assert res["cls"]["headline"] == res["fresh"]["headline"]  # the same rankings, so the same measures
