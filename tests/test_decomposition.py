"""Decomposition distillation: NOT questions split into parts, targets from the frozen start, the loss, batches."""
import pytest
import torch
import torch.nn.functional as F
from conftest import pool_items

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


def sample_items():
    """The bundled sample's training questions as the trainer holds them (parts and passage group)."""
    from boolcl.data.loaders import SAMPLE_DIR

    return pool_items(SAMPLE_DIR / "train.jsonl")


def test_composed_questions_split_back_into_the_parts_they_were_built_from():
    from boolcl.logic.grammar import Not
    from boolcl.logic.rules import rule_decompose
    from boolcl.train.decomposition import compose_questions
    from boolcl.words import COMPOSE_INFIX, COMPOSE_PREFIX

    items = sample_items()
    questions, parts = compose_questions(items, 600)
    assert len(questions) == len(parts) == 600 and len(set(questions)) == 600
    kept = {it.not_parts[0].rstrip("?") for it in items if it.not_parts}
    prefixed = 0
    for q, (keep, drop) in zip(questions, parts):
        expr = rule_decompose(q)
        assert isinstance(expr, Not) and (expr.pos.text, expr.neg.text) == (keep, drop), q
        assert keep.rstrip("?") in kept  # the kept part is a pool question's, as written
        low = q.lower()
        prefixed += low.startswith(tuple(COMPOSE_PREFIX))
        assert low.startswith(tuple(COMPOSE_PREFIX)) or any(f", {m} " in low for m in COMPOSE_INFIX), q
    assert 0.1 < prefixed / 600 < 0.3  # about a fifth put the exclusion first
    assert compose_questions(items, 600) == (questions, parts)  # same pool, same questions
    assert compose_questions(items, 600, seed=1)[0] != questions
    assert compose_questions([it for it in items if it.not_parts is None], 10) == ([], [])


def test_composed_questions_prefer_a_dropped_part_over_the_same_passages():
    from boolcl.train.decomposition import compose_questions

    items = sample_items()
    group_of_drop, group_of_keep = {}, {}
    for it in items:
        if it.not_parts:
            group_of_keep.setdefault(it.not_parts[0].rstrip("?"), set()).add(it.group)
            group_of_drop.setdefault(it.not_parts[1].rstrip("?"), set()).add(it.group)

    def same_group_share(share: float) -> float:
        questions, parts = compose_questions(items, 400, same_group=share, prefix=0.0)
        near = [bool(group_of_keep[k.rstrip("?")] & group_of_drop.get(d.rstrip("?"), set())) for k, d in parts]
        return sum(near) / len(near)

    assert same_group_share(1.0) > 0.95  # a few dropped parts are re-split and lose their group
    assert same_group_share(0.0) < 0.2


def test_the_warm_ups_composed_questions_get_the_starts_arithmetic_as_target(tiny_model_dir, not_pool, tmp_path):
    """Composed questions serve the warm-up only: they have targets from the frozen start, as the pool's
    NOT questions do, and no batch of the training run carries them."""
    from conftest import plus_cfg

    from boolcl.retrieval.models import load_model
    from boolcl.train.loop import build_data, build_model

    with pytest.raises(ConfigError, match="unknown config key 'train.decomposition.composed'"):
        compose(["recipe=not_plus_tiny", "train.decomposition.composed=16"])
    cfg = plus_cfg(tiny_model_dir, not_pool, tmp_path / "run", "train.decomposition.warmup_steps=1")
    torch.manual_seed(cfg.seed)
    model, start = build_model(cfg)
    data = build_data(cfg, model, 2, None, None, start)
    term = data.terms[-1]
    assert term.name == "decomposition" and data.mix["decomposition"]["composed"] == len(term.composed) > 4
    assert term.composed_targets.shape[0] == len(term.composed)
    plain = load_model(str(tiny_model_dir), similarity="cosine", max_length=32).eval()
    enc = lambda xs: plain.encode(xs, convert_to_tensor=True, normalize_embeddings=True).float().cpu()
    d = cfg.train.decomposition
    questions, parts = term.composed[:4], term.composed_parts[:4]
    expected = d.anchor * enc(questions) + enc([k for k, _ in parts]) - d.drop * enc([x for _, x in parts])
    assert torch.allclose(term.composed_targets[:4], expected, atol=1e-5)
    batch = data.loader.collate_fn([data.dataset[i] for i in range(len(data.dataset))])
    assert batch.query_features["input_ids"].shape[0] == len(data.dataset) and batch.rows["decomposition"] == (
        len(data.dataset), len(data.dataset))  # the batch's own queries, nothing composed
    nots = [i for i in range(len(data.dataset)) if data.dataset[i].get("target") is not None]
    assert batch.extra["decomposition"]["rows"].tolist() == nots and nots

    off = build_data(plus_cfg(tiny_model_dir, not_pool, tmp_path / "off", "train.decomposition.warmup_steps=0"),
                     model, 2, None, None, start)
    assert off.terms[-1].composed == [] and off.mix["decomposition"]["composed"] == 0  # no warm-up: none composed
