"""`boolcl explain`: one question's top 10 passages of a set, its excluded passages and positives marked."""
import io

import numpy as np
import pytest
from rich.console import Console

from boolcl.cli import main
from boolcl.config import compose
from boolcl.data.loaders import load_folder
from boolcl.evaluate.explain import explain, top_passages
from boolcl.retrieval.models import fingerprint, load_model

NOT_Q = "What causes upper abdominal pain that has nothing to do with the liver?"


def console():
    return Console(file=io.StringIO(), width=220)


def cosine_order(model_dir, set_dir, question):
    """The corpus ids by the model's own cosine similarity to `question`, best first."""
    model = load_model(str(model_dir), device="cpu")
    rset = load_folder(set_dir)
    p = model.encode(rset.corpus.texts, normalize_embeddings=True)
    q = model.encode([question], normalize_embeddings=True)[0]
    return [rset.corpus.ids[i] for i in np.argsort(-(p @ q), kind="stable")]


def test_the_listing_is_the_models_ranking_with_the_labels_marked(tiny_model_dir, small_set):
    cfg = compose([f"model={tiny_model_dir}", "eval.cache=false"])
    con = console()
    out = explain(str(tiny_model_dir), NOT_Q, cfg, data=str(small_set), console=con)
    order = cosine_order(tiny_model_dir, small_set, NOT_Q)
    assert [h.docid for h in out["hits"]] == order  # the set has 6 passages, fewer than 10
    assert [h.rank for h in out["hits"]] == [1, 2, 3, 4, 5, 6]
    assert out["in_data"] and out["data"] == "set"
    assert {h.docid for h in out["hits"] if h.label == "excluded"} == {"d1"}
    assert {h.docid for h in out["hits"] if h.label == "positive"} == {"d0", "d2"}
    assert out["excluded_ranks"] == {"d1": order.index("d1") + 1}
    text = con.file.getvalue()
    assert NOT_Q in text  # the question heads the table
    (row,) = [line for line in text.splitlines() if " d1 " in line]
    assert "EXCLUDED" in row
    assert f"excluded passage d1: rank {order.index('d1') + 1} of 6" in text


def test_a_question_outside_the_set_is_listed_without_labels(tiny_model_dir, small_set):
    cfg = compose([f"model={tiny_model_dir}", "eval.cache=false"])
    con = console()
    question = "A question the set does not hold?"
    out = explain(str(tiny_model_dir), question, cfg, data=str(small_set), console=con)
    assert out["in_data"] is False and not any(h.label for h in out["hits"]) and out["excluded_ranks"] == {}
    assert [h.docid for h in out["hits"]] == cosine_order(tiny_model_dir, small_set, question)
    text = con.file.getvalue()
    assert "no labels to mark" in text and "EXCLUDED" not in text and "excluded passage" not in text


def test_an_excluded_passage_below_the_top_k_still_gets_its_rank(tiny_model_dir, small_set):
    cfg = compose([f"model={tiny_model_dir}", "eval.cache=false"])
    model = load_model(str(tiny_model_dir), device="cpu")
    order = cosine_order(tiny_model_dir, small_set, NOT_Q)
    rank = order.index("d1") + 1
    assert rank > 1  # the tiny model's ranking puts d1 below the first place, so k=1 leaves it out
    for k in range(1, 7):
        hits, ranks = top_passages(model, load_folder(small_set), NOT_Q, cfg, fingerprint(model), k=k)
        assert [h.docid for h in hits] == order[:k]
        assert ranks == {"d1": rank}, k  # in the listing or not, its rank in the whole corpus


def test_without_data_it_lists_the_configs_set(tiny_model_dir):
    """data= defaults to the config's evaluation set (the bundled sample), as for `boolcl evaluate`."""
    cfg = compose([f"model={tiny_model_dir}", "eval.cache=false"])
    question = "What can cause upper abdominal pain that has nothing to do with the liver?"  # a sample question
    out = explain(str(tiny_model_dir), question, cfg, console=console())
    assert out["data"] == "sample" and out["in_data"] and len(out["hits"]) == 10
    assert list(out["excluded_ranks"]) == ["p1-upper-abdominal-pain/hepatitis"]
    assert all(1 <= r <= 564 for r in out["excluded_ranks"].values())


def test_cli_explain(tiny_model_dir, small_set, capsys):
    assert main(["explain", str(tiny_model_dir), NOT_Q, f"data={small_set}", "eval.cache=false"]) == 0
    printed = capsys.readouterr().out
    assert "top 6 of set (6 passages)" in printed and "EXCLUDED" in printed and "excluded passage d1: rank" in printed
    with pytest.raises(SystemExit) as exit_:
        main(["explain", str(tiny_model_dir), NOT_Q, "data"])
    assert exit_.value.code == 2 and "expected key=value overrides, got data" in capsys.readouterr().err
