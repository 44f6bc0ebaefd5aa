"""Decomposition distillation: NOT questions split into parts, targets from the frozen start, the loss, batches."""
import pytest
import torch
import torch.nn.functional as F

from boolcl.config import compose
from boolcl.data.schema import TrainingExample
from boolcl.errors import ConfigError
from boolcl.train.collate import Collator, ItemDataset
from boolcl.train.decomposition import not_parts, teacher_targets
from boolcl.train.mixing import Item
from boolcl.train.terms.decomposition import DecompositionDistill


def example(question, qtype="not", provenance=None):
    return TrainingExample.from_dict({"qid": "q", "question": question, "question_type": qtype,
                                      "positive_ctxs": [{"passage_id": "a"}], "negative_ctxs": [{"passage_id": "b"}],
                                      "provenance": provenance or {}})


def test_not_parts_prefers_the_rules_then_falls_back_to_provenance():
    assert not_parts(example("Which string instruments are there, other than the cello?")) == (
        "Which string instruments are there?", "The cello?", "rules")
    assert not_parts(example("Apart from gallstones, what causes upper abdominal pain?")) == (
        "What causes upper abdominal pain?", "Gallstones?", "rules")
    # a wording the rules cannot split: the sample's provenance, then boolcl generate's
    odd = "Setting aside the cello, which string instruments exist?"
    assert not_parts(example(odd)) is None
    sample = {"disjunctive": "Which string instruments exist?", "excluded_question": "What is a cello?"}
    assert not_parts(example(odd, provenance=sample)) == ("Which string instruments exist?", "What is a cello?",
                                                          "provenance")
    generated = {"broad_question": "Which string instruments exist?", "target": ["d4"],
                 "simple_questions": {"d3": "What is a violin?", "d4": "What is a cello?"}}
    assert not_parts(example(odd, provenance=generated))[1] == "What is a cello?"
    assert not_parts(example("Which instruments have strings?", qtype="simple")) is None


@pytest.mark.parametrize("similarity", ["cosine", "dot"])
def test_teacher_targets_are_the_decomposition_arithmetic_on_the_start(tiny_model_dir, similarity):
    from boolcl.retrieval.models import load_model
    from boolcl.train.collate import Collator
    from boolcl.train.start_table import StartTable, StartView

    model = load_model(str(tiny_model_dir), similarity=similarity)
    qs, parts = ["a, but not b?", "c other than d?"], [("A?", "B?"), ("C?", "D?")]
    collator = Collator(model.tokenizer, model.max_seq_length, 1)
    rows = ["q: " + x for x in [*qs, "A?", "C?", "B?", "D?"]]
    table = StartTable(StartView(model), rows, collator)
    v = teacher_targets(table.embed, qs, parts, drop=1.5, anchor=0.25, normalize=similarity == "cosine",
                        prompt="q: ")
    enc = lambda xs: model.encode(xs, prompt="q: ", convert_to_tensor=True,
                                  normalize_embeddings=similarity == "cosine").float().cpu()
    expected = 0.25 * enc(qs) + enc(["A?", "C?"]) - 1.5 * enc(["B?", "D?"])
    assert v.shape == expected.shape and torch.allclose(v, expected, atol=1e-5)
    assert not torch.allclose(v, 0.25 * enc(qs) + enc(["A?", "C?"]) - 1.0 * enc(["B?", "D?"]), atol=1e-3)


def test_decomposition_loss_is_one_minus_cosine_and_pulls_towards_the_target():
    from boolcl.train.collate import Batch

    torch.manual_seed(0)
    target = torch.randn(3, 8)
    term = DecompositionDistill(1.0)

    def loss(q, targets):  # every row has a target
        extra = {"decomposition": {"rows": torch.arange(len(q)), "targets": targets}}
        return term(q, torch.zeros(0, 8), Batch({}, {}, len(q), 0, torch.zeros(0), torch.zeros(0), extra=extra))

    assert loss(4.0 * target, target).item() == pytest.approx(0.0, abs=1e-6)  # direction only
    q = torch.randn(3, 8, requires_grad=True)
    value = loss(q, target)
    assert value.item() == pytest.approx((1 - F.cosine_similarity(q, target)).mean().item(), rel=1e-6)
    value.backward()
    with torch.no_grad():
        assert loss(q - 0.1 * q.grad, target).item() < value.item()
    empty = {"decomposition": {"rows": torch.zeros(0, dtype=torch.long), "targets": torch.zeros((0, 0))}}
    assert term(q, q, Batch({}, {}, 3, 0, torch.zeros(0), torch.zeros(0), extra=empty)) is None  # nothing to score


def test_collator_gives_the_rows_with_a_target(tiny_model_dir):
    from boolcl.retrieval.models import load_model

    tok = load_model(str(tiny_model_dir)).tokenizer
    t0, t1 = (torch.full((4,), float(x)) for x in range(2))
    items = [Item("not q", ["a"], ["A"], ["x"], ["X"], "not", n_explicit=1, target=t0),
             Item("simple q", ["c"], ["C"], ["d"], ["D"], "simple"),
             Item("not r", ["d"], ["D"], ["c"], ["C"], "not", n_explicit=1, target=t1)]
    ds = ItemDataset(items, 1)
    batch = Collator(tok, 16, 1, terms=[DecompositionDistill(1.0)])([ds[i] for i in range(3)])
    assert batch.query_features["input_ids"].shape[0] == 3  # no rows of its own: the NOT items have targets
    assert batch.extra["decomposition"]["rows"].tolist() == [0, 2]
    assert batch.extra["decomposition"]["targets"][:, 0].tolist() == [0.0, 1.0]
    off = Collator(tok, 16, 1)([ds[i] for i in range(3)])
    assert off.query_features["input_ids"].shape[0] == 3 and "decomposition" not in off.extra


def test_decomposition_config_errors_name_the_key():
    with pytest.raises(ConfigError, match="train.decomposition.weight must be >= 0"):
        compose(["recipe=not_plus_tiny", "train.decomposition.weight=-1"])
    with pytest.raises(ConfigError, match="infonce only"):
        compose(["recipe=tiny", "train.loss=margin_mse", "train.decomposition.weight=1"])


def test_decomposition_targets_without_the_start_are_refused(tiny_model_dir):
    from boolcl.train import loop

    cfg = compose(["recipe=not_plus_tiny", f"model={tiny_model_dir}", "train.eval_every=0"])
    model, _ = loop.build_model(cfg)
    with pytest.raises(ValueError, match="pass `start`"):
        loop.build_data(cfg, model, cfg.train.batch_size, None, None)
