"""The NOT-aware additions (recipe=not_plus): losses against hand computation, collation, batching, runs."""
import json
import math

import pytest
import torch
import torch.nn.functional as F
from conftest import load_script, plus_cfg, pool_items

from boolcl.config import compose
from boolcl.errors import ConfigError
from boolcl.train.collate import Collator, ItemDataset, passage_key
from boolcl.train.loop import train
from boolcl.train.mixing import Item, build_mix
from boolcl.train.sampling import EpochShuffle
from boolcl.train.terms.base import Extra, Term
from boolcl.train.terms.retention import Retention, masked_kl


# ---------------------------------------------------------------- losses, by hand

def test_retention_scores_the_original_data_only():
    items, mix = build_mix(compose(["recipe=not_plus_tiny"]))
    assert {it.question_type for it in items if it.retain} == {"simple"}
    assert sum(it.retain for it in items) == mix["original"]["examples"] > 0


def test_retention_is_kl_to_the_teacher_over_unmasked_passages():
    torch.manual_seed(0)
    student, teacher = torch.randn(2, 4), torch.randn(2, 4)
    none = torch.zeros(2, 4, dtype=torch.bool)
    assert masked_kl(teacher, teacher, none).item() == pytest.approx(0.0, abs=1e-7)
    t, s = F.softmax(teacher, -1), F.log_softmax(student, -1)
    assert masked_kl(student, teacher, none).item() == pytest.approx((t * (t.log() - s)).sum(-1).mean().item(), rel=1e-5)
    mask = torch.tensor([[False, True, False, False], [False, False, False, False]])  # a false negative of row 0
    keep = [0, 2, 3]
    t0, s0 = F.softmax(teacher[0, keep], -1), F.log_softmax(student[0, keep], -1)
    expected = ((t0 * (t0.log() - s0)).sum() + (t[1] * (t[1].log() - s[1])).sum()) / 2
    assert masked_kl(student, teacher, mask).item() == pytest.approx(expected.item(), rel=1e-5)
    moved = student.clone()
    moved[0, 1] += 5  # a masked column changes nothing
    assert masked_kl(moved, teacher, mask).item() == pytest.approx(expected.item(), rel=1e-5)


def test_cached_teacher_gives_the_loss_of_a_teacher_forward_per_step(tiny_model_dir, not_pool, tmp_path):
    """The retention term from embeddings computed once equals the KL to a frozen copy of the
    starting model run on every batch, on a real batch once the student has moved."""
    import copy

    from boolcl.train.loop import build_data, build_model
    from boolcl.train.losses import false_negative_mask, similarity
    from boolcl.train.objective import Objective

    cfg = plus_cfg(tiny_model_dir, not_pool, tmp_path / "run")
    torch.manual_seed(cfg.seed)
    model, start = build_model(cfg)
    old_teacher = copy.deepcopy(model).eval().requires_grad_(False)  # a teacher forward on every step
    data = build_data(cfg, model, 2, None, None, start)
    assert [t.name for t in data.terms] == ["contrastive", "retention", "decomposition"]
    objective = Objective(data.terms)
    with torch.no_grad():  # the student moves away from its start, so the KL is not zero
        gen = torch.Generator().manual_seed(0)
        for w in model[0].parameters():
            w.add_(0.05 * torch.randn(w.shape, generator=gen))
    model.eval()
    data.dataset.set_epoch(1)
    batch = data.loader.collate_fn([data.dataset[i] for i in range(len(data.dataset))])
    rows = batch.extra["retention"]["rows"]
    assert 0 < int(rows.sum()) < batch.n_queries
    q = model(dict(batch.query_features))["sentence_embedding"]
    p = model(dict(batch.passage_features))["sentence_embedding"]
    _, parts = objective(q, p, batch)
    idx = torch.nonzero(rows).flatten()
    with torch.no_grad():
        teacher_q = old_teacher(dict(batch.query_features))["sentence_embedding"][idx]
        teacher_p = old_teacher(dict(batch.passage_features))["sentence_embedding"]
    scale, mask = 20.0, false_negative_mask(batch.positive_keys[idx], batch.passage_keys, idx)
    expected = cfg.train.retention.weight * masked_kl(scale * similarity(q[idx], p, "cosine"),
                                                      scale * similarity(teacher_q, teacher_p, "cosine"), mask)
    assert expected.item() > 1e-4
    assert parts["retention"].item() == pytest.approx(expected.item(), rel=1e-5)
    parts["retention"].backward()  # the gradient reaches the student
    assert any(w.grad is not None and bool(w.grad.abs().sum() > 0) for w in model[0].parameters())


@pytest.mark.parametrize("extra", [[], ["train.lora.enabled=true", "train.lora.r=4"]], ids=["full", "lora"])
def test_the_teacher_view_is_the_plain_start_and_leaves_the_student_alone(tiny_model_dir, not_pool, tmp_path, extra):
    """The teacher is a view of the student's own modules, not a copy: it must embed exactly as a
    frozen copy of the plain starting model does (LoRA installed after it changes nothing it
    computes), give every module back its mode, and draw no random numbers."""
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
    assert torch.equal(after, after_without)  # the view drew no random numbers

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


class PlainForm(Term):
    """A term with query rows of its own (each NOT question without its "not "), as a term declares them."""
    name = "plain"

    def collate(self, core):
        rows = [i for i, pick in enumerate(core.picks) if pick["query"].startswith("not")]
        return Extra(queries=[core.picks[i]["query"].removeprefix("not ") for i in rows],
                     tensors={"rows": torch.tensor(rows, dtype=torch.long)})

    def forward(self, q, p, batch):
        return (q[batch.rows_of(self.name)] - q[batch.extra[self.name]["rows"]]).pow(2).sum()


def test_collator_encodes_each_terms_rows_after_the_batchs_own_and_files_its_tensors(tiny_model_dir):
    from boolcl.retrieval.models import load_model

    model = load_model(str(tiny_model_dir))
    items = [Item("not q", ["a", "b"], ["A", "B"], ["x", "m"], ["X", "M"], "not", n_explicit=1),
             Item("simple q", ["c"], ["C"], ["d"], ["D"], "simple", retain=True),
             Item("not r", ["d"], ["D"], ["c"], ["C"], "not", n_explicit=1)]
    ds = ItemDataset(items, n_negatives=2)
    terms = [PlainForm(), Retention(1.0, "cosine")]
    batch = Collator(model.tokenizer, 16, 2, terms=terms)([ds[i] for i in range(3)])
    assert batch.query_features["input_ids"].shape[0] == 5  # 3 queries, then the term's 2 rows
    assert batch.rows == {"plain": (3, 5), "retention": (5, 5)}
    texts = [model.tokenizer.decode(ids, skip_special_tokens=True) for ids in batch.query_features["input_ids"][3:]]
    assert texts == ["q", "r"]
    assert batch.extra["plain"]["rows"].tolist() == [0, 2]
    assert batch.extra["retention"]["rows"].tolist() == [False, True, False]
    assert batch.passage_keys[3].item() == passage_key("x")  # passages: the 3 positives, then each item's negatives
    with torch.no_grad():
        q = model(dict(batch.query_features))["sentence_embedding"]
    from boolcl.train.objective import Objective

    _, parts = Objective([PlainForm()])(q, q, batch)
    expected = (q[3] - q[0]).pow(2).sum() + (q[4] - q[2]).pow(2).sum()
    assert parts["plain"].item() == pytest.approx(expected.item(), rel=1e-6)
    plain = Collator(model.tokenizer, 16, 2)([ds[i] for i in range(3)])
    assert plain.query_features["input_ids"].shape[0] == 3 and plain.extra == {} and plain.rows == {}


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
    with pytest.raises(ConfigError, match="train.retention.weight must be >= 0"):
        compose(["recipe=not_plus_tiny", "train.retention.weight=-1"])
    with pytest.raises(ConfigError, match="pick one"):
        compose(["recipe=not_plus_tiny", "train.group_by_length=true"])
    with pytest.raises(ConfigError, match="infonce only"):
        compose(["recipe=not_plus_tiny", "train.loss=margin_mse"])
    for removed in ("retention.passages=1", "retention.operators=[and]", "decomposition.synthetic=1",
                    "decomposition.templates=[]"):
        with pytest.raises(ConfigError, match=f"unknown config key 'train.{removed.split('=')[0]}'"):
            compose(["recipe=not_plus_tiny", f"train.{removed}"])
    for section in ("scope.weight=1", "exclusion.weight=10", "pairs.weight=1", "negation.pairs=480"):
        with pytest.raises(ConfigError, match=f"unknown config section in 'train.{section.split('=')[0]}'"):
            compose(["recipe=not_plus_tiny", f"train.{section}"])
    # weight 0 switches the whole term off, its warm-up with it: one key, as for the others
    from boolcl.train import terms

    off = compose(["recipe=not_plus_tiny", "train.decomposition.weight=0"]).train
    assert off.decomposition.warmup_steps > 0
    assert [term.name for term in terms.build(off, "cosine")] == ["contrastive", "retention"]
    assert "decomposition" in [term.name for term in terms.build(compose(["recipe=not_plus_tiny"]).train, "cosine")]
    with pytest.raises(ConfigError, match="train.decomposition.warmup_steps"):
        compose(["recipe=not_plus_tiny", "train.decomposition.warmup_steps=-1"])
    cfg = compose(["recipe=not_plus"])
    assert cfg.model == "sentence-transformers/msmarco-distilbert-dot-v5" and cfg.train.decomposition.weight > 0


def test_the_paper_scale_recipe_carries_the_tiny_recipes_additions():
    """recipe=not_plus is not_plus_tiny's additions on the paper's model and data: every switch the
    ablation measures is set alike in both."""
    from omegaconf import OmegaConf

    ablation = load_script("scripts/reproduce/ablation")
    paper_scale, tiny = compose(["recipe=not_plus"]).train, compose(["recipe=not_plus_tiny"]).train
    keys = {o.split("=")[0] for o in ablation.switched_off(*ablation.SWITCHES)} - {"train.epochs"}
    assert {"train.decomposition.warmup_steps", "train.retention.weight"} <= keys
    for key in sorted(keys):
        path = key.split(".")[1:]
        got = [OmegaConf.select(t, ".".join(path)) for t in (paper_scale, tiny)]
        assert got[0] == got[1], (key, got)


def test_demo_takes_the_recipe_it_is_given():
    from boolcl.demo import demo_config

    assert demo_config([]).name == "tiny"
    assert demo_config(["recipe=not_plus_tiny"]).train.decomposition.weight > 0


# ---------------------------------------------------------------- runs

def composable(pool) -> int:
    """How many composed questions the recipe's warm-up can build from a pool's NOT questions."""
    from boolcl.train.decomposition import compose_questions
    from boolcl.train.terms.decomposition import COMPOSED_SET

    questions, _ = compose_questions(pool_items(pool), COMPOSED_SET)
    assert questions  # the pool's NOT questions do compose
    return len(questions)


def test_not_plus_trains_and_logs_each_term(tiny_model_dir, not_pool, tmp_path):
    out = train(plus_cfg(tiny_model_dir, not_pool, tmp_path / "run"))
    log = [json.loads(x) for x in (out / "train_log.jsonl").read_text().splitlines()]
    # 4 NOT + 6 named OR (3 per cluster) + 6 original items, batch 2: 8 steps per epoch, 2 epochs
    assert [r["step"] for r in log] == list(range(1, 17))
    terms = {k for r in log for k in r if k.startswith("loss_")}
    assert terms == {"loss_contrastive", "loss_retention", "loss_decomposition"}
    mix = json.loads((out / "data_manifest.json").read_text())["mix"]
    # the pool is also the original data here, so its 4 NOT questions come twice; the recipe's
    # warm-up composes more from their parts (duplicates give no new parts)
    assert mix["decomposition"] == {"rules": 8, "provenance": 0, "unsplit": 0, "composed": composable(not_pool)}
    assert mix["named"] == {"file": str(not_pool.with_name("train.groups.jsonl")), "groups": 2, "topic_negatives": 4,
                            "or_questions": 6}
    assert str(not_pool.with_name("train.groups.jsonl")) in json.loads((out / "data_manifest.json").read_text())["files"]
    assert "4 topic negatives, 6 named OR questions" in (out / "README.md").read_text()
    assert json.loads((out / "modules.json").read_text())[1]["type"].endswith(".Pooling")  # sentence-transformers
    for r in log:
        parts = sum(v for k, v in r.items() if k.startswith("loss_"))
        assert math.isfinite(r["loss"]) and r["loss"] == pytest.approx(parts, rel=1e-5)


def test_the_decomposition_warm_up_moves_not_questions_towards_their_targets(tiny_model_dir, not_pool, tmp_path):
    """Steps of the decomposition term alone: the pool's and the composed NOT questions end
    closer to their targets, the model alone changes, and with 0 steps nothing happens."""
    from accelerate import Accelerator

    from boolcl.train.loop import build_data, build_model

    def fit(model, term, items) -> float:
        questions = term.composed + [it.query for it in items if it.target is not None]
        targets = torch.cat([term.composed_targets] + [it.target[None] for it in items if it.target is not None])
        features = model.tokenizer(questions, padding=True, truncation=True, max_length=32, return_tensors="pt")
        with torch.no_grad():
            return F.cosine_similarity(model(dict(features))["sentence_embedding"], targets, dim=-1).mean().item()

    cfg = plus_cfg(tiny_model_dir, not_pool, tmp_path / "run", "train.decomposition.warmup_steps=40", "train.lr=1e-3")
    torch.manual_seed(cfg.seed)
    model, start = build_model(cfg)
    data = build_data(cfg, model, 2, None, None, start)
    term = data.terms[-1]
    assert term.name == "decomposition" and term.warmup_steps == 40 and len(term.composed) == composable(not_pool)
    before_fit, before = fit(model.eval(), term, data.items), {k: v.clone() for k, v in model.state_dict().items()}
    model.train()
    said = term.before_training(model, data.items, cfg.train, cfg.seed, Accelerator(cpu=True))
    questions = len(term.composed) + sum(it.target is not None for it in data.items)
    assert said.startswith(f"decomposition warm-up: 40 steps over {questions} NOT questions, 1 - cos ")
    first, last = (float(x) for x in said.rsplit(" ", 3)[1::2])
    assert last < first
    assert fit(model.eval(), term, data.items) > before_fit + 0.05
    assert all(p.grad is None for p in model.parameters())  # the training run starts with no gradient
    after = model.state_dict()
    assert any(not torch.equal(before[k], after[k]) for k in before)
    term.warmup_steps = 0
    assert term.before_training(model, data.items, cfg.train, cfg.seed, Accelerator(cpu=True)) is None
    assert all(torch.equal(after[k], v) for k, v in model.state_dict().items())

    from boolcl.errors import TrainingError
    from boolcl.train.terms.decomposition import DecompositionDistill

    with pytest.raises(TrainingError, match="no NOT question with a decomposition target to warm up on"):
        DecompositionDistill(1.0, warmup_steps=2).before_training(model, [], cfg.train, cfg.seed, Accelerator(cpu=True))


@pytest.mark.parametrize("extra", [["train.decomposition.warmup_steps=0"], ["train.decomposition.warmup_steps=3"]],
                         ids=["no warm-up", "warm-up"])
def test_not_plus_resumes_to_the_same_weights(tiny_model_dir, not_pool, tmp_path, extra):
    """The frozen teacher, the plain questions, cluster batches and the decomposition targets (from
    the starting model, also on resume) keep resume exact; a resumed run does not warm up again."""
    import shutil

    from safetensors.torch import load_file

    common = ["train.max_steps=6", "train.save_every=1", "train.keep_last=10", f"eval.cache_dir={tmp_path / 'cache'}",
              *extra]
    full = train(plus_cfg(tiny_model_dir, not_pool, tmp_path / "full", *common))
    mix = json.loads((full / "data_manifest.json").read_text())["mix"]
    assert mix["start_table"]["encoded_here"] == 1  # the start's table, encoded and cached
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
            "train.max_steps=2", "train.batch_size=8"]
    monkeypatch.chdir(tmp_path)
    ablation = load_script("scripts/reproduce/ablation")  # its command line, in this process (no start-up per run)
    assert ablation.main(args) == 0
    capsys.readouterr()
    runs = sorted(p.name for p in (out / "runs").iterdir())
    assert runs == ["base", "not_plus-s1", "paper-not-s1"]
    # the paper-style recipe: NOT questions alone, every addition off, at its own learning rate
    from omegaconf import OmegaConf

    paper = OmegaConf.load(out / "runs" / "paper-not-s1" / "config.yaml").train
    assert list(paper.operators) == ["not"] and paper.lr == 3e-4 and paper.retention.weight == 0
    assert paper.decomposition.weight == 0 and paper.decomposition.warmup_steps == 0
    recipe = OmegaConf.load(out / "runs" / "not_plus-s1" / "config.yaml").train
    assert recipe.lr == compose(["recipe=not_plus_tiny"]).train.lr and recipe.retention.weight > 0
    assert recipe.decomposition.warmup_steps == compose(["recipe=not_plus_tiny"]).train.decomposition.warmup_steps > 0
    table = (out / "compare" / "compare.md").read_text()
    assert "paper-not" in table and "not_plus" in table and "NOT" in table
    assert (out / "compare" / "compare.png").is_file()
    versus = json.loads((out / "compare-vs-paper" / "compare.json").read_text())
    assert versus["baseline"] == "paper-not-s1"  # one seed: the run keeps its own name
    stamp = (out / "runs" / "not_plus-s1" / "results.json").stat().st_mtime_ns
    assert ablation.main(args) == 0
    assert "training" not in capsys.readouterr().out
    assert (out / "runs" / "not_plus-s1" / "results.json").stat().st_mtime_ns == stamp
