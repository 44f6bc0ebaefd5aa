"""The NOT-aware additions (recipe=not_plus): losses against hand computation, collation, batching, runs."""
import json
import math

import pytest
import torch
import torch.nn.functional as F
from conftest import load_script, plus_cfg

from boolcl.config import compose, soup_on
from boolcl.errors import ConfigError
from boolcl.train.collate import Collator, ItemDataset, passage_key
from boolcl.train.loop import train
from boolcl.train.mixing import Item, build_mix
from boolcl.train.not_aware import ExclusionMargin, QueryContrast, Retention
from boolcl.train.sampling import EpochShuffle


# ---------------------------------------------------------------- losses, by hand

def test_exclusion_margin_matches_hand_computation_and_vanishes_when_met():
    # 2 queries, 1 negative each; passages [pos0, pos1, neg0, neg1]; query 0's neg is excluded, query 1's is not
    q = torch.tensor([[1.0, 0.0], [0.0, 1.0]], requires_grad=True)
    p = torch.tensor([[0.5, 0.0], [0.0, 1.0], [0.9, 0.0], [0.0, 3.0]])
    keys = torch.tensor([10, 11, 12, 13])
    positive_keys = torch.tensor([[10, 11], [11, -1]])  # pos1 is also a labelled positive of query 0
    excluded = torch.tensor([[True], [False]])
    loss = ExclusionMargin("dot", margin=0.2)(q, p, keys, positive_keys, excluded)
    # query 0: s(pos0)=0.5, s(pos1)=0, s(neg0)=0.9 -> relu(0.2-(0.5-0.9)) = 0.6, relu(0.2-(0-0.9)) = 1.1
    assert loss.item() == pytest.approx((0.6 + 1.1) / 2)
    loss.backward()
    assert q.grad[1].abs().sum() == 0  # query 1 has no excluded passage
    assert (q.grad[0] @ torch.tensor([0.9, 0.0])).item() > 0  # descending lowers s(q0, neg0)
    far = torch.tensor([[5.0, 0.0], [0.0, 5.0], [-1.0, 0.0], [0.0, 3.0]])
    assert ExclusionMargin("dot", margin=0.2)(q, far, keys, positive_keys, excluded).item() == 0.0
    assert ExclusionMargin("dot")(q, p, keys, positive_keys, torch.zeros(2, 1, dtype=torch.bool)).item() == 0.0


def test_query_contrast_is_the_logistic_loss_of_the_score_gap():
    torch.manual_seed(0)
    q_not, q_plain, e = torch.randn(3, 4), torch.randn(3, 4), torch.randn(3, 4)
    expected = F.softplus(-2.0 * ((q_plain * e).sum(-1) - (q_not * e).sum(-1))).mean()
    assert QueryContrast("dot", 2.0)(q_not, q_plain, e).item() == pytest.approx(expected.item(), rel=1e-6)
    cos = QueryContrast("cosine", 20.0)
    assert cos(q_not, q_plain, e).item() == pytest.approx(cos(3 * q_not, q_plain, e * 2).item(), rel=1e-5)


def test_retention_operators_add_those_boolean_questions_to_the_retained_rows():
    cfg = compose(["recipe=not_plus_tiny", "train.operators=[not,and,or]", "train.retention.operators=[and,or]"])
    items, mix = build_mix(cfg)
    assert all(it.retain == (it.question_type in ("simple", "and", "or")) for it in items)  # simple: the original data
    assert {it.question_type for it in items if it.retain} == {"and", "or", "simple"}
    assert mix["boolean"]["retained"] == sum(it.question_type in ("and", "or") for it in items) > 0
    plain, _ = build_mix(compose(["recipe=not_plus_tiny", "train.operators=[not,and,or]"]))
    assert {it.question_type for it in plain if it.retain} == {"simple"}  # by default: the original data only
    with pytest.raises(ConfigError, match=r"train\.retention\.operators"):
        compose(["recipe=not_plus_tiny", "train.operators=[not]", "train.retention.operators=[and]"])  # NOT only


def test_retention_is_kl_to_the_teacher_on_chosen_rows_only():
    torch.manual_seed(0)
    q, p = torch.randn(2, 4), torch.randn(4, 4)
    keys, positive_keys = torch.tensor([1, 2, 3, 4]), torch.tensor([[1, -1], [2, -1]])
    rows = torch.tensor([True, False])
    ret = Retention("dot", 1.0)
    assert ret(q, p, q, p, rows, keys, positive_keys).item() == pytest.approx(0.0, abs=1e-7)
    tq = torch.randn(2, 4)
    t, s = F.softmax(tq[0] @ p.T, -1), F.log_softmax(q[0] @ p.T, -1)
    expected = (t * (t.log() - s)).sum()
    assert ret(q, p, tq, p, rows, keys, positive_keys).item() == pytest.approx(expected.item(), rel=1e-5)
    # a change to query 1 (not a chosen row) changes nothing
    q2 = q.clone()
    q2[1] += 5
    assert ret(q2, p, tq, p, rows, keys, positive_keys).item() == pytest.approx(expected.item(), rel=1e-5)
    assert ret(q, p, tq, p, torch.tensor([False, False]), keys, positive_keys).item() == 0.0


def test_cached_teacher_gives_the_loss_of_a_teacher_forward_per_step(tiny_model_dir, not_pool, tmp_path):
    """The retention term from embeddings computed once equals the one from a frozen copy of the
    model, scope head included, run on every batch, on a real batch once the student has moved."""
    import copy

    from boolcl import pooling
    from boolcl.train.loop import build_data, build_model
    from boolcl.train.objective import Objective

    cfg = plus_cfg(tiny_model_dir, not_pool, tmp_path / "run")
    torch.manual_seed(cfg.seed)
    model, start = build_model(cfg)
    assert pooling.scope_pooling(model) is not None
    assert not any(isinstance(m, pooling.ScopePooling) for m in start.stages)
    old_teacher = copy.deepcopy(model).eval().requires_grad_(False)  # what Objective used to keep
    data = build_data(cfg, model, 2, None, None, start)
    objective = Objective(cfg.train, "cosine", data.start_table, scope_head=pooling.scope_pooling(model))
    with torch.no_grad():  # the student moves away from its start, so the KL is not zero
        gen = torch.Generator().manual_seed(0)
        for w in model[0].parameters():
            w.add_(0.05 * torch.randn(w.shape, generator=gen))
    model.eval()
    data.dataset.set_epoch(1)
    batch = data.loader.collate_fn([data.dataset[i] for i in range(len(data.dataset))])
    assert 0 < int(batch.retained.sum()) < batch.n_queries
    q_out, p_out = model(dict(batch.query_features)), model(dict(batch.passage_features))
    q, p = q_out["sentence_embedding"], p_out["sentence_embedding"]
    _, parts = objective(q, p, batch, (q_out["scope_logits"], p_out["scope_logits"]), q_out["token_embeddings"])
    b = batch.n_queries
    with torch.no_grad():
        teacher_q = old_teacher(dict(batch.query_features))["sentence_embedding"][:b]
        teacher_p = old_teacher(dict(batch.passage_features))["sentence_embedding"]
    expected = cfg.train.retention.weight * objective.retention(q[:b], p, teacher_q, teacher_p, batch.retained,
                                                                batch.passage_keys, batch.positive_keys)
    assert expected.item() > 1e-4
    assert parts["retention"].item() == pytest.approx(expected.item(), rel=1e-5)
    parts["retention"].backward()  # the gradient reaches the student, as before
    assert any(w.grad is not None and bool(w.grad.abs().sum() > 0) for w in model[0].parameters())


@pytest.mark.parametrize("extra", [[], ["train.lora.enabled=true", "train.lora.r=4"]], ids=["full", "lora"])
def test_the_teacher_view_is_the_plain_start_and_leaves_the_student_alone(tiny_model_dir, not_pool, tmp_path, extra):
    """The teacher is a view of the student's own modules, not a copy: it must embed exactly as a
    frozen copy of the plain starting model does (the scope head and LoRA installed after it change
    nothing it computes), give every module back its mode, and draw no random numbers."""
    from boolcl.retrieval.models import load_model
    from boolcl.train.loop import build_model

    def student(*more):
        cfg = plus_cfg(tiny_model_dir, not_pool, tmp_path / "run", *extra, *more)
        torch.manual_seed(cfg.seed)
        model, teacher = build_model(cfg)
        return model, teacher, torch.rand(3)

    model, teacher, after = student()
    without, none, after_without = student("train.retention.weight=0", "train.decomposition.weight=0")
    assert none is None and teacher is not None
    state, state_without = model.state_dict(), without.state_dict()
    assert state.keys() == state_without.keys() and all(torch.equal(state[k], state_without[k]) for k in state)
    assert torch.equal(after, after_without)  # the scope head's initialisation drew the same numbers

    plain = load_model(str(tiny_model_dir), similarity="cosine", max_length=32).eval()
    features = model.tokenizer(["which rivers, other than the Nile?", "a passage about the Amazon river"],
                               padding=True, return_tensors="pt")
    model.train()
    model[0].eval()  # a mix of modes, each of which must come back as it was
    modes = [m.training for m in model.modules()]
    with torch.no_grad():
        viewed = teacher(dict(features))
        assert [m.training for m in model.modules()] == modes  # every module has its mode back
        expected = plain(dict(features))["sentence_embedding"]
    assert torch.equal(viewed["sentence_embedding"], expected)
    assert "scope_logits" not in viewed  # the student's own forward runs the head; the view does not


def test_a_text_the_teacher_never_embedded_is_an_error(tiny_model_dir, not_pool, tmp_path):
    from boolcl.errors import TrainingError
    from boolcl.retrieval.models import load_model
    from boolcl.train.start_table import StartTable, StartView, retention_rows

    model = load_model(str(tiny_model_dir))
    items = [Item("simple q", ["c"], ["C"], ["d"], ["D"], "simple", retain=True)]
    collator = Collator(model.tokenizer, 16, 1)
    cache = StartTable(StartView(model), retention_rows(items, collator), collator)
    assert len(cache) == 4  # the query, its two passages and the empty filler
    known = collator._tokenize(["C", "D"])
    with torch.no_grad():
        direct = model.eval()(dict(known))["sentence_embedding"]
    assert torch.allclose(cache.lookup(known), direct, atol=1e-6)
    with pytest.raises(TrainingError, match="never embedded"):
        cache.lookup(collator._tokenize(["C", "an unseen passage"]))
    assert retention_rows([Item("q", ["c"], ["C"], [], [], "not")], collator) == []  # nothing retained
    assert len(StartTable(StartView(model), [], collator)) == 0
    assert torch.equal(cache.embed(["C"]), cache.lookup(collator._tokenize(["C"])))  # by text, as decomposition reads it
    with pytest.raises(TrainingError, match="never embedded"):
        cache.embed(["an unseen passage"])


def test_the_start_table_is_cached_and_read_back_to_the_bit(tiny_model_dir, tmp_path):
    from boolcl.retrieval.models import load_model
    from boolcl.train.start_table import StartTable, StartView, retention_rows

    model = load_model(str(tiny_model_dir))
    items = [Item("simple q", ["c"], ["C"], ["d"], ["D"], "simple", retain=True),
             Item("another q", ["e"], ["E passage"], ["c"], ["C"], "simple", retain=True)]
    collator = Collator(model.tokenizer, 16, 1)
    rows = retention_rows(items, collator) + ["a NOT question?", "its kept part?"]
    plain = StartTable(StartView(model), rows, collator, batch_size=2)
    assert plain.cache is None and len(plain) == len(rows)
    first = StartTable(StartView(model), rows, collator, batch_size=2, cache_dir=tmp_path, identity="start")
    assert first.cache["encoded_here"] == 1 and torch.equal(first.table, plain.table)

    def no_forward(features):
        raise AssertionError("a cached table needs no forward of the start")

    again = StartTable(no_forward, rows, collator, batch_size=2, cache_dir=tmp_path, identity="start")
    assert again.cache["read"] == 1 and torch.equal(again.table, plain.table) and again.index == plain.index
    with pytest.raises(AssertionError, match="no forward"):  # another starting model: its own entry
        StartTable(no_forward, rows, collator, batch_size=2, cache_dir=tmp_path, identity="other start")
    with pytest.raises(AssertionError, match="no forward"):  # other texts: their own entry
        StartTable(no_forward, rows[:-1], collator, batch_size=2, cache_dir=tmp_path, identity="start")
    with pytest.raises(ValueError, match="identity"):
        StartTable(StartView(model), rows, collator, cache_dir=tmp_path)


# ---------------------------------------------------------------- data

def test_labelled_negatives_are_always_chosen_first():
    item = Item("q", ["a"], ["A"], ["x", "m1", "m2"], ["X", "M1", "M2"], "not", n_explicit=1)
    ds = ItemDataset([item], n_negatives=2)
    for epoch in range(4):
        ds.set_epoch(epoch)
        negs = ds[0]["negatives"]
        assert negs[0][0] == "x" and negs[1][0] in {"m1", "m2"} and ds[0]["n_explicit"] == 1
    seen = set()
    for epoch in range(2):
        ds.set_epoch(epoch)
        seen.add(ds[0]["negatives"][1][0])
    assert seen == {"m1", "m2"}  # mined negatives still rotate


def test_collator_adds_plain_questions_with_the_excluded_passage_as_target(tiny_model_dir):
    from boolcl.retrieval.models import load_model

    tok = load_model(str(tiny_model_dir)).tokenizer
    items = [Item("not q", ["a", "b"], ["A", "B"], ["x", "m"], ["X", "M"], "not", n_explicit=1, partner="plain q"),
             Item("simple q", ["c"], ["C"], ["d"], ["D"], "simple", retain=True),
             Item("and q", ["d"], ["D"], ["c"], ["C"], "and", n_explicit=1)]
    ds = ItemDataset(items, n_negatives=2)
    batch = Collator(tok, 16, 2, pairs=True)([ds[i] for i in range(3)])
    assert batch.query_features["input_ids"].shape[0] == 4  # 3 queries + 1 plain question
    assert batch.pair_rows.tolist() == [0]
    target = batch.pair_targets[0].item()
    assert target == 3 and batch.passage_keys[target].item() == passage_key("x")  # the first item's first negative
    assert set(batch.pair_positive_keys[0].tolist()) == {passage_key("a"), passage_key("b"), passage_key("x")}
    # the exclusion margin applies to NOT items' labelled negatives only (not the AND item's)
    assert batch.excluded.tolist() == [[True, False], [False, False], [False, False]]
    assert batch.retained.tolist() == [False, True, False]
    plain = Collator(tok, 16, 2)([ds[i] for i in range(3)])
    assert plain.query_features["input_ids"].shape[0] == 3 and plain.pair_rows is None


def test_cluster_batches_keep_groups_together_and_vary_by_epoch():
    groups = [f"c{i % 7}" for i in range(70)] + [None] * 5
    sampler = EpochShuffle(75, 0, batch_size=10, groups=groups)
    order = list(sampler)
    assert sorted(order) == list(range(75))
    runs = [groups[i] for i in order if groups[i] is not None]
    changes = sum(a != b for a, b in zip(runs, runs[1:]))
    assert changes == 6  # 7 groups, each one contiguous run
    assert list(EpochShuffle(75, 0, batch_size=10, groups=groups)) == order  # (seed, epoch) decides
    sampler.set_epoch(1)
    assert list(sampler) != order


def test_not_aware_config_errors_are_clear():
    with pytest.raises(ConfigError, match="train.exclusion.weight must be >= 0"):
        compose(["recipe=not_plus_tiny", "train.exclusion.weight=-1"])
    with pytest.raises(ConfigError, match="pick one"):
        compose(["recipe=not_plus_tiny", "train.group_by_length=true"])
    with pytest.raises(ConfigError, match="infonce only"):
        compose(["recipe=not_plus_tiny", "train.loss=margin_mse"])
    with pytest.raises(ConfigError, match="train.hard_negatives >= 1"):
        compose(["recipe=not_plus_tiny", "train.hard_negatives=0"])
    with pytest.raises(ConfigError, match="train.exclusion.operators"):
        compose(["recipe=not_plus_tiny", "train.exclusion.operators=[xor]"])
    for removed in ("retention.passages=1", "decomposition.synthetic=1", "decomposition.templates=[]",
                    "scope.synthetic=1"):
        with pytest.raises(ConfigError, match=f"unknown config key 'train.{removed.split('=')[0]}'"):
            compose(["recipe=not_plus_tiny", f"train.{removed}"])
    # the recipe's negated statements are two runs and a mix; pairs=0 alone switches them off (one run)
    assert soup_on(compose(["recipe=not_plus_tiny"]).train) and soup_on(compose(["recipe=not_plus"]).train)
    assert not soup_on(compose(["recipe=not_plus_tiny", "train.negation.pairs=0"]).train)
    assert not soup_on(compose(["recipe=not_plus_tiny", "train.negation.soup.weight=0"]).train)  # pairs in one run
    cfg = compose(["recipe=not_plus"])
    assert cfg.model == "sentence-transformers/msmarco-distilbert-dot-v5" and cfg.train.exclusion.weight > 0


def test_demo_takes_the_recipe_it_is_given():
    from boolcl.demo import demo_config

    assert demo_config([]).name == "tiny"
    assert demo_config(["recipe=not_plus_tiny"]).train.exclusion.weight > 0


# ---------------------------------------------------------------- runs

def test_not_plus_trains_and_logs_each_term(tiny_model_dir, not_pool, tmp_path):
    out = train(plus_cfg(tiny_model_dir, not_pool, tmp_path / "run"))
    log = [json.loads(x) for x in (out / "train_log.jsonl").read_text().splitlines()]
    # 4 NOT + 6 original items, batch 2: 5 steps per epoch, 2 epochs
    assert [r["step"] for r in log] == list(range(1, 11))
    terms = {k for r in log for k in r if k.startswith("loss_")}
    assert terms == {"loss_contrastive", "loss_exclusion", "loss_pairs", "loss_retention", "loss_decomposition",
                     "loss_scope", "loss_scope_hidden"}
    mix = json.loads((out / "data_manifest.json").read_text())["mix"]
    # the pool is also the original data here, so its 4 NOT questions come twice
    assert mix["decomposition"] == {"rules": 8, "provenance": 0, "unsplit": 0}
    # the scope head was fitted alone first, on the 10 questions and practice sentences up to warmup_rows
    w = mix["scope_warmup"]
    assert w["rows"] == 512 and 0 < w["steps"] <= 300
    # it ran every step, or stopped once every class's recall reached warmup_until
    assert w["steps"] == 300 or min(w[f"recall_{c}"] for c in ("ordinary", "marker", "excluded")) >= 0.99
    assert json.loads((out / "modules.json").read_text())[1]["type"] == "boolcl.pooling.ScopePooling"
    for r in log:
        parts = sum(v for k, v in r.items() if k.startswith("loss_"))
        assert math.isfinite(r["loss"]) and r["loss"] == pytest.approx(parts, rel=1e-5)


def bridge_pairs(path, n: int):
    """`n` short minimal pairs in NevIR's layout: whole within any training length the tests use."""
    from conftest import dump_jsonl

    return dump_jsonl(path, [
        {"id": f"p{i}", "q1": f"Which bridge did open in {1900 + i}?", "doc1": f"The bridge opened in {1900 + i}.",
         "q2": f"Which bridge did not open in {1900 + i}?", "doc2": f"The bridge did not open in {1900 + i}."}
        for i in range(n)])


def test_written_negation_pairs_join_the_mix_and_train(tiny_model_dir, not_pool, tmp_path):
    """train.negation.source: pairs in NevIR's layout become two items each and train with the rest."""
    pairs = bridge_pairs(tmp_path / "pairs.jsonl", 3)
    out = train(plus_cfg(tiny_model_dir, not_pool, tmp_path / "run", "train.max_steps=2", "train.negation.pairs=2",
                         f"train.negation.source={pairs}", f"eval.cache_dir={tmp_path / 'cache'}"))
    mix = json.loads((out / "data_manifest.json").read_text())["mix"]
    assert mix["negation"] == {"pairs": 2, "asked": 2, "source": str(pairs), "cut_off": 0}
    assert all(math.isfinite(json.loads(x)["loss"]) for x in (out / "train_log.jsonl").read_text().splitlines())
    # the scope head's practice (and warm-up) is about exclusions: the pairs' questions are not in it
    from boolcl.retrieval.models import load_model
    from boolcl.train.loop import build_data

    cfg = plus_cfg(tiny_model_dir, not_pool, tmp_path / "x", "train.negation.pairs=2", f"train.negation.source={pairs}",
                   "train.decomposition.weight=0", "train.retention.weight=0")
    data = build_data(cfg, load_model(str(tiny_model_dir)), 2, None, None)
    statements = {it.query.rstrip("?") for it in data.items if it.question_type == "statement"}
    assert len(statements) == 4 and not statements & set(data.practice.keeps)
    assert {it.query.rstrip("?") for it in data.items if it.question_type == "simple"} <= set(data.practice.keeps)


def test_pairs_all_past_the_cut_stop_the_run_naming_the_length(tiny_model_dir, not_pool, tmp_path):
    from conftest import dump_jsonl

    from boolcl.retrieval.models import load_model
    from boolcl.train.loop import build_data

    long = " ".join(["The valley was green and the river ran wide."] * 6)
    pairs = dump_jsonl(tmp_path / "pairs.jsonl", [
        {"id": f"p{i}", "q1": "Did it rain?", "doc1": f"{long} It rained {i}.", "q2": "Did it stay dry?",
         "doc2": f"{long} It did not rain {i}."} for i in range(2)])
    for spread in ("false", "true"):
        cfg = plus_cfg(tiny_model_dir, not_pool, tmp_path / "x", "train.negation.pairs=2", "train.max_length=16",
                       f"train.negation.source={pairs}", f"train.negation.spread={spread}",
                       "train.decomposition.weight=0", "train.retention.weight=0")
        with pytest.raises(ConfigError, match=r"no minimal pair is left.*2 read from .*pairs\.jsonl.*max_length=16"):
            build_data(cfg, load_model(str(tiny_model_dir)), 2, None, None)


def test_spread_pairs_come_once_per_run_and_resume_exactly(tiny_model_dir, not_pool, tmp_path):
    """train.negation.spread: each pair in one epoch only, every other item in every epoch; the
    steps count one part per epoch, and a resume in the second epoch lands on the same weights."""
    import shutil

    from safetensors.torch import load_file

    from boolcl.retrieval.models import load_model
    from boolcl.train.loop import build_data

    pairs = bridge_pairs(tmp_path / "pairs.jsonl", 4)
    common = ["train.negation.pairs=4", f"train.negation.source={pairs}", "train.negation.spread=true",
              "train.decomposition.weight=0", f"eval.cache_dir={tmp_path / 'cache'}"]
    data = build_data(plus_cfg(tiny_model_dir, not_pool, tmp_path / "x", *common, "train.retention.weight=0"),
                      load_model(str(tiny_model_dir)), 2, None, None)
    statements = {i for i, it in enumerate(data.items) if it.question_type == "statement"}
    assert len(data.items) == 18 and len(statements) == 8  # 4 NOT + 6 original questions, 4 pairs
    seen = []
    for epoch in (0, 1):
        data.loader.sampler.set_epoch(epoch)
        order = list(data.loader.sampler)
        assert set(order) - statements == set(range(18)) - statements  # the rest in every epoch
        seen.append(set(order) & statements)
    assert [len(s) for s in seen] == [4, 4] and seen[0] | seen[1] == statements  # each pair once

    full = train(plus_cfg(tiny_model_dir, not_pool, tmp_path / "full", *common, "train.save_every=1",
                          "train.keep_last=20"))
    assert json.loads((full / "data_manifest.json").read_text())["mix"]["negation"] == {
        "pairs": 4, "asked": 4, "source": str(pairs), "cut_off": 0, "per_epoch": 2}
    log = [json.loads(x) for x in (full / "train_log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log] == list(range(1, 15))  # (10 + 2 x 2) / 2 = 7 steps per epoch, not 9
    resumed_dir = tmp_path / "resumed"
    resumed_dir.mkdir()
    shutil.copytree(full / "checkpoint-9", resumed_dir / "checkpoint-9")
    resumed = train(plus_cfg(tiny_model_dir, not_pool, resumed_dir, *common, "train.resume=true"))
    a, b = (load_file(str(f / "model.safetensors")) for f in (full, resumed))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_not_plus_resumes_to_the_same_weights(tiny_model_dir, not_pool, tmp_path):
    """The frozen teacher, the plain questions, cluster batches, the decomposition targets (from
    the starting model, also on resume) and the scope head (fitted once, before the first step;
    then restored with the rest) keep resume exact; negated statements and hidden markers (drawn
    from the per-step seed) included."""
    import shutil

    from safetensors.torch import load_file

    pairs = bridge_pairs(tmp_path / "pairs.jsonl", 3)
    common = ["train.max_steps=6", "train.save_every=1", "train.keep_last=10", "train.negation.pairs=2",
              f"train.negation.source={pairs}", "train.scope.hide_markers=0.5", f"eval.cache_dir={tmp_path / 'cache'}"]
    full = train(plus_cfg(tiny_model_dir, not_pool, tmp_path / "full", *common))
    mix = json.loads((full / "data_manifest.json").read_text())["mix"]
    assert mix["negation"] == {"pairs": 2, "asked": 2, "source": str(pairs), "cut_off": 0}
    assert mix["start_table"]["encoded_here"] == 1  # the start's table, encoded and cached
    hidden = [json.loads(x).get("loss_scope_hidden") for x in (full / "train_log.jsonl").read_text().splitlines()]
    assert all(h is not None for h in hidden) and any(h > 0 for h in hidden)
    resumed_dir = tmp_path / "resumed"
    resumed_dir.mkdir()
    shutil.copytree(full / "checkpoint-3", resumed_dir / "checkpoint-3")
    resumed = train(plus_cfg(tiny_model_dir, not_pool, resumed_dir, *common, "train.resume=true"))
    cached = json.loads((resumed / "data_manifest.json").read_text())["mix"]["start_table"]
    assert cached["encoded_here"] == 0 and cached["read"] == 1  # read back: the same weights to the bit
    a, b = (load_file(str(f / "model.safetensors")) for f in (full, resumed))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_ablation_script_runs_resumes_and_compares(tiny_model_dir, tmp_path, monkeypatch, capsys):
    """Two variants, one seed, a tiny model and a few steps: the table is written, a rerun trains nothing."""
    out = tmp_path / "ablation"
    args = ["--seeds", "1", "--only", "paper-not", "not_plus", "--out", str(out), f"model={tiny_model_dir}",
            "train.max_steps=2", "train.batch_size=8", "train.negation.soup.start=['layers:1=0.9']"]  # 2 layers
    monkeypatch.chdir(tmp_path)
    ablation = load_script("scripts/reproduce/ablation")  # its command line, in this process (no start-up per run)
    assert ablation.main(args) == 0
    capsys.readouterr()
    runs = sorted(p.name for p in (out / "runs").iterdir())
    assert runs == ["base", "not_plus-s1", "paper-not-s1"]
    # the recipe is a soup of two runs; the paper-style recipe one run without the pairs
    assert json.loads((out / "runs" / "not_plus-s1" / "soup.json").read_text())["weight"] == 0.6
    assert not (out / "runs" / "paper-not-s1" / "branches").exists()
    table = (out / "compare" / "compare.md").read_text()
    assert "paper-not" in table and "not_plus" in table and "NOT" in table
    assert (out / "compare" / "compare.png").is_file()
    versus = json.loads((out / "compare-vs-paper" / "compare.json").read_text())
    assert versus["baseline"] == "paper-not-s1"  # one seed: the run keeps its own name
    stamp = (out / "runs" / "not_plus-s1" / "results.json").stat().st_mtime_ns
    assert ablation.main(args) == 0
    assert "training" not in capsys.readouterr().out
    assert (out / "runs" / "not_plus-s1" / "results.json").stat().st_mtime_ns == stamp
