"""`boolcl explain`: the scope head's token weights as it pools them, and the top 10 with labels."""
import io

import numpy as np
import pytest
import torch
from rich.console import Console

from boolcl import pooling
from boolcl.cli import main
from boolcl.config import compose
from boolcl.evaluate.explain import explain, token_weights
from boolcl.retrieval.models import load_model

NOT_Q = "What causes upper abdominal pain that has nothing to do with the liver?"


def scoped(tiny_model_dir, randomise: bool):
    model = load_model(str(tiny_model_dir), device="cpu")
    torch.manual_seed(3)  # the head's GRU is drawn here: the same head whatever ran before
    head = pooling.install(model, drop=0.5)
    if randomise:  # a head that tells tokens apart, so the check below is not one of equal weights
        with torch.no_grad():
            head.head.weight.normal_(0, 2.0)
            head.head.bias.copy_(torch.tensor([0.5, 0.0, 0.2]))
    return model.eval(), head


def console():
    return Console(file=io.StringIO(), width=220)


def test_fresh_head_gives_the_mean_pooling_weights(tiny_model_dir):
    model, _ = scoped(tiny_model_dir, randomise=False)
    weights = token_weights(model, NOT_Q)
    p = torch.tensor([pooling.START_BIAS, 0.0, 0.0]).softmax(0)
    expected = float(p[0] - 0.5 * p[2])
    assert len(weights) == len(model.tokenizer(NOT_Q)["input_ids"])
    assert all(w.weight == pytest.approx(expected, abs=1e-6) for w in weights)


def test_weights_are_what_the_head_pools_with(tiny_model_dir):
    model, head = scoped(tiny_model_dir, randomise=True)
    weights = token_weights(model, NOT_Q)
    features = model.tokenize([NOT_Q])
    with torch.no_grad():
        out = model(dict(features))
    p = out["scope_logits"][0].softmax(-1)
    direct = p[:, pooling.ORDINARY] - head.drop * p[:, pooling.EXCLUDED]
    got = torch.tensor([w.weight for w in weights])
    assert torch.allclose(got, direct, atol=1e-5)
    assert got.std() > 0.05  # the weights differ between tokens
    assert torch.allclose(torch.tensor([w.p_marker for w in weights]), p[:, pooling.MARKER], atol=1e-5)
    # the sentence embedding is the mean of the token embeddings under exactly these weights
    tokens = out["token_embeddings"][0]
    assert torch.allclose((got[:, None] * tokens).sum(0) / len(weights), out["sentence_embedding"][0], atol=1e-5)
    assert [w.token for w in weights] == model.tokenizer.convert_ids_to_tokens(features["input_ids"][0])


def test_explain_prints_tokens_and_marks_the_excluded_passage(tiny_model_dir, small_set, tmp_path):
    model, _ = scoped(tiny_model_dir, randomise=True)
    model.save(str(tmp_path / "scoped"))
    cfg = compose([f"model={tiny_model_dir}", "eval.cache=false"])
    con = console()
    out = explain(str(tmp_path / "scoped"), NOT_Q, cfg, data=str(small_set), console=con)
    text = con.file.getvalue()
    for w in out["tokens"]:
        assert f"{w.weight:+.3f}" in text
    assert out["in_data"] and len(out["hits"]) == 6  # the set has 6 passages, fewer than 10
    assert {h.docid for h in out["hits"] if h.label == "excluded"} == {"d1"}
    assert {h.docid for h in out["hits"] if h.label == "positive"} == {"d0", "d2"}
    (row,) = [line for line in text.splitlines() if " d1 " in line]
    assert "EXCLUDED" in row


def test_plain_model_has_no_head_and_still_ranks(tiny_model_dir, small_set):
    from boolcl.data.loaders import load_folder

    cfg = compose([f"model={tiny_model_dir}", "eval.cache=false"])
    con = console()
    out = explain(str(tiny_model_dir), NOT_Q, cfg, data=str(small_set), console=con)
    assert out["tokens"] is None and "has no scope head to show" in con.file.getvalue()
    # the listing is the model's own cosine ranking of the corpus
    model = load_model(str(tiny_model_dir), device="cpu")
    rset = load_folder(small_set)
    p = model.encode(rset.corpus.texts, normalize_embeddings=True)
    q = model.encode([NOT_Q], normalize_embeddings=True)[0]
    order = [rset.corpus.ids[i] for i in np.argsort(-(p @ q), kind="stable")]
    assert [h.docid for h in out["hits"]] == order
    assert [h.label for h in out["hits"] if h.docid == "d1"] == ["excluded"]
    assert out["excluded_ranks"] == {"d1": order.index("d1") + 1}
    assert f"excluded passage d1: rank {order.index('d1') + 1} of 6" in con.file.getvalue()
    other = explain(str(tiny_model_dir), "A question the set does not hold?", cfg, data=str(small_set),
                    console=console())
    assert other["in_data"] is False and not any(h.label for h in other["hits"])


def test_cli_explain(tiny_model_dir, small_set, capsys):
    assert main(["explain", str(tiny_model_dir), NOT_Q, f"data={small_set}", "eval.cache=false"]) == 0
    printed = capsys.readouterr().out
    assert "no scope head" in printed and "d1" in printed
    with pytest.raises(SystemExit) as exit_:
        main(["explain", str(tiny_model_dir), NOT_Q, "data"])
    assert exit_.value.code == 2 and "expected key=value overrides, got data" in capsys.readouterr().err
