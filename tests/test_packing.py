"""Padding-free forwards (train.packed, retrieval/packing.py): the same embeddings and gradients as
padded batches, nothing of it saved with the model, and a training run that matches a padded one."""
import json
import os

import pytest
import torch
from conftest import write_pool

from boolcl.config import compose
from boolcl.retrieval import packing
from boolcl.retrieval.models import inner_model, load_model, packaged_model_dir
from boolcl.train.loop import train

TEXTS = ["Which string instruments are not plucked?",
         "A cello is a large bowed string instrument played seated, held between the knees.",
         "Harp?", "What causes upper abdominal pain but not in the liver?"]


@pytest.fixture(scope="module")
def tiny_distilbert_dir(tmp_path_factory):
    from sentence_transformers import SentenceTransformer
    from transformers import AutoTokenizer, DistilBertConfig, DistilBertModel

    root = tmp_path_factory.mktemp("tiny-distilbert")
    torch.manual_seed(0)
    DistilBertModel(DistilBertConfig(dim=32, n_layers=2, n_heads=2, hidden_dim=64, dropout=0.0,
                                     attention_dropout=0.0, max_position_embeddings=128)).save_pretrained(root / "hf")
    tokenizer = os.environ.get("BOOLCL_TEST_TOKENIZER") or str(packaged_model_dir())  # as conftest's
    AutoTokenizer.from_pretrained(tokenizer).save_pretrained(root / "hf")
    SentenceTransformer(str(root / "hf"), device="cpu").save(str(root / "st"))
    return root / "st"


def forward_and_grads(model, features):
    model.zero_grad(set_to_none=True)
    out = model({k: v for k, v in features.items()})
    emb = out["sentence_embedding"]
    (emb * torch.linspace(-1, 1, emb.shape[-1])).sum().backward()  # a loss that reads every dimension
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    return out, grads


@pytest.mark.parametrize("family", ["bert", "distilbert"])
@pytest.mark.parametrize("side", ["right", "left"])
def test_packed_forward_gives_the_padded_embeddings_and_gradients(tiny_nodrop_dir, tiny_distilbert_dir, family, side):
    model = load_model(str(tiny_nodrop_dir if family == "bert" else tiny_distilbert_dir))
    model.train()
    model.tokenizer.padding_side = side
    features = model.preprocess(TEXTS)
    mask = features["attention_mask"].bool()
    assert not bool(mask.all())  # the batch has padding to leave out
    padded, padded_grads = forward_and_grads(model, features)
    padded_tokens = padded["token_embeddings"].detach().clone()
    padded_emb = padded["sentence_embedding"].detach().clone()

    hooks = packing.install(model)
    assert inner_model(model[0]).config._attn_implementation.startswith(packing.PACKED)
    packed, packed_grads = forward_and_grads(model, features)
    assert packed["token_embeddings"].shape == padded_tokens.shape
    assert torch.allclose(packed["token_embeddings"][mask], padded_tokens[mask], atol=1e-5)
    assert not bool(packed["token_embeddings"][~mask].any())  # zero at padding
    assert torch.allclose(packed["sentence_embedding"], padded_emb, atol=1e-5)
    assert packed_grads.keys() == padded_grads.keys()
    for name, g in padded_grads.items():
        assert torch.allclose(packed_grads[name], g, atol=1e-5), name

    # texts that attend across their neighbours would not give these: drop the boundaries and see
    hooks.remove()
    model.zero_grad(set_to_none=True)
    with torch.no_grad():
        whole = model({"input_ids": features["input_ids"][mask][None],
                       "attention_mask": torch.ones((1, int(mask.sum())), dtype=torch.long)})
    first = int(mask[0].sum())
    assert not torch.allclose(whole["token_embeddings"][0, :first], padded_tokens[0][mask[0]], atol=1e-3)


def test_an_unpadded_batch_runs_as_it_is_and_nothing_is_saved(tiny_nodrop_dir, tmp_path):
    model = load_model(str(tiny_nodrop_dir))
    plain = model.encode(TEXTS, convert_to_tensor=True)
    packing.install(model)
    assert torch.allclose(model.encode(TEXTS, convert_to_tensor=True), plain, atol=1e-5)
    one = model.preprocess(TEXTS[:1])  # one text: no padding, so no packing
    assert torch.allclose(model(one)["sentence_embedding"][0], plain[0], atol=1e-5)
    model.save(str(tmp_path / "m"))
    config = json.loads((tmp_path / "m" / "config.json").read_text())
    assert not any(packing.PACKED in json.dumps(v) for v in config.values())
    again = load_model(str(tmp_path / "m"))
    assert not inner_model(again[0]).config._attn_implementation.startswith(packing.PACKED)
    assert torch.allclose(again.encode(TEXTS, convert_to_tensor=True), plain, atol=1e-5)


def test_both_cpu_attention_paths_keep_each_text_to_itself():
    torch.manual_seed(0)
    lengths = [3, 7, 1, 5]
    cu = torch.tensor([0, 3, 10, 11, 16], dtype=torch.int32)
    q, k, v = (torch.randn(16, 2, 4) for _ in range(3))
    # by hand: attention over the whole row with every pair of tokens from different texts masked out
    text = torch.repeat_interleave(torch.arange(4), torch.tensor(lengths))
    scores = torch.einsum("thd,shd->hts", q, k) * 0.5
    scores = scores.masked_fill(text[None, :, None] != text[None, None, :], float("-inf"))
    by_hand = torch.einsum("hts,shd->thd", scores.softmax(-1), v)
    assert torch.allclose(packing.attention_per_text(q, k, v, cu, 0.0, 0.5), by_hand, atol=1e-6)
    assert torch.allclose(packing.padded_attention(q, k, v, cu, 7, 0.0, 0.5), by_hand, atol=1e-6)


def test_a_forward_that_raises_leaves_nothing_behind(tiny_nodrop_dir):
    model = load_model(str(tiny_nodrop_dir))
    hooks = packing.install(model)
    features = model.preprocess(TEXTS)
    bad = dict(features, input_ids=features["input_ids"].clone())
    bad["input_ids"][0, 1] = 10**7  # no such token: the embedding lookup raises
    with pytest.raises(IndexError):
        model(bad)
    assert hooks.pending == []
    assert model(dict(features))["token_embeddings"].shape[:2] == features["attention_mask"].shape


def run_cfg(model_dir, pool, out, *extra):
    return compose(["recipe=tiny", f"model={model_dir}", "train.boolean=none", f"train.original={pool}",
                    "train.original_size=null", "train.batch_size=4", "train.hard_negatives=1", "train.epochs=1",
                    "train.log_every=1", "train.max_length=48", "train.report_to=[]", "train.save_every=0",
                    f"out={out}", *extra])


@pytest.mark.parametrize("extra", [(), ("train.lora.enabled=true", "train.lora.dropout=0")], ids=["full", "lora"])
def test_a_packed_run_trains_like_a_padded_one(tiny_nodrop_dir, small_set, tmp_path, extra):
    rows = [{"qid": f"q{i}", "question": q, "question_type": "simple",
             "positive_ctxs": [{"passage_id": f"d{i % 6}"}], "hard_negative_ctxs": [{"passage_id": f"d{(i + 1) % 6}"}]}
            for i, q in enumerate(TEXTS * 2)]
    pool = write_pool(tmp_path / "pool", rows, small_set)
    logs = {}
    for packed in (False, True):
        out = train(run_cfg(tiny_nodrop_dir, pool, tmp_path / f"run-{packed}", f"train.packed={str(packed).lower()}",
                            *extra))
        logs[packed] = [json.loads(x)["loss"] for x in (out / "train_log.jsonl").read_text().splitlines()]
    assert len(logs[True]) == 2
    assert logs[True] == pytest.approx(logs[False], rel=1e-4)
    assert logs[True][0] != logs[True][1]  # the weights moved between the steps


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_packed_forward_on_cuda_matches_padded(tiny_nodrop_dir, dtype):
    """bf16: torch's varlen flash kernel; float32: scaled-dot-product attention over a nested tensor."""
    model = load_model(str(tiny_nodrop_dir), device="cuda")
    features = {k: v.to("cuda") if hasattr(v, "to") else v for k, v in model.preprocess(TEXTS).items()}
    with torch.no_grad(), torch.autocast("cuda", dtype=dtype, enabled=dtype != torch.float32):
        padded = model(dict(features))["sentence_embedding"].float().clone()
        packing.install(model)
        packed = model(dict(features))["sentence_embedding"].float()
    assert torch.allclose(packed, padded, atol=3e-2 if dtype == torch.bfloat16 else 1e-5)
