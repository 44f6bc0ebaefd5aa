"""Gradient caching (train.grad_cache_chunk, train/grad_cache.py): the cached step gives the loss and the
weight gradients of the whole batch's graph, whatever the objective's terms, the model's adapters or
packing; it trains and refuses what it cannot do; its memory follows the chunk, not the batch. Resuming
after a kill with caching on: test_train's kill -9 test."""
import json
import os
import subprocess
import sys
import weakref
from types import SimpleNamespace

import pytest
import torch
from conftest import ROOT, dump_jsonl, plus_cfg
from test_train import _launch, _weights, tiny_cfg

from boolcl.config import compose
from boolcl.errors import ConfigError
from boolcl.train import grad_cache, terms
from boolcl.train.loop import build_data, build_model, out_of_memory, per_device_batch, train
from boolcl.train.objective import Objective


def components(cfg):
    """What train() builds for a step (model in training mode, objective, accelerator), and one
    batch of every training item, so each term the config switches on has rows to score."""
    from accelerate import Accelerator

    torch.manual_seed(cfg.seed)
    model, start = build_model(cfg)
    data = build_data(cfg, model, cfg.train.batch_size, None, None, start)
    batch = data.loader.collate_fn([data.dataset[i] for i in range(len(data.dataset))])
    return model.train(), Accelerator(cpu=True), Objective(data.terms), batch


def whole_graph(model, accelerator, objective, batch, chunk):
    """The reference: every chunk encoded with its graph kept, in the cached step's order (so with
    dropout on, the same masks), the objective over them all, one backward."""
    embedded = [model(features)["sentence_embedding"] for features in grad_cache.pieces(batch, chunk)]
    queries = grad_cache.query_chunks(batch, chunk)
    loss, parts = objective(torch.cat(embedded[:queries]), torch.cat(embedded[queries:]), batch)
    accelerator.backward(loss)
    return loss.detach(), {k: v.detach() for k, v in parts.items()}


def gradients(model):
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    model.zero_grad(set_to_none=True)
    return grads


def both_ways(model, accelerator, objective, batch, chunk):
    torch.manual_seed(7)
    ref = whole_graph(model, accelerator, objective, batch, chunk)
    ref_grads = gradients(model)
    torch.manual_seed(7)
    got = grad_cache.step(model, model, accelerator, objective, batch, chunk)
    return ref, ref_grads, got, gradients(model)


def scored_pool(folder, small_set):
    rows = [{"qid": f"m{i}", "question": f"question number {i}?", "question_type": "simple",
             "positive_ctxs": [{"passage_id": f"d{i % 3}", "score": 9.5}],
             "hard_negative_ctxs": [{"passage_id": f"d{3 + i % 3}", "score": 1.0 + i}]} for i in range(5)]
    (folder / "corpus.jsonl").parent.mkdir(parents=True, exist_ok=True)
    (folder / "corpus.jsonl").write_text((small_set / "corpus.jsonl").read_text())
    return dump_jsonl(folder / "train.jsonl", rows)


VARIANTS = {  # name: (pool fixture, overrides, terms the step must report)
    "infonce": ("pool", [], {"contrastive"}),
    "margin_mse": ("scored", ["train.loss=margin_mse", "train.boolean=none"], {"contrastive"}),
    "lora": ("pool", ["train.lora.enabled=true", "train.lora.r=4"], {"contrastive"}),
    "packed": ("pool", ["train.packed=true"], {"contrastive"}),
    "not_terms": ("not_pool", [], {"contrastive", "retention", "decomposition"}),
}


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_cached_step_gives_the_whole_graphs_loss_and_gradients(variant, tiny_model_dir, request, tmp_path,
                                                               small_set, monkeypatch):
    """Dropout on (the tiny model's and LoRA's): only the replayed random state makes the second pass
    draw the first pass's masks, and without it the gradients differ."""
    source, extra, names = VARIANTS[variant]
    pool = scored_pool(tmp_path / "scored", small_set) if source == "scored" else request.getfixturevalue(source)
    chunk = 3  # uneven: the last chunk of each kind is shorter
    if source == "not_pool":
        cfg = plus_cfg(tiny_model_dir, pool, tmp_path / "run", "train.batch_size=4", *extra)
    else:
        cfg = tiny_cfg(tiny_model_dir, pool, tmp_path / "run", "train.batch_size=4", *extra)
    model, accelerator, objective, batch = components(cfg)
    assert batch.query_features["input_ids"].shape[0] > chunk and batch.passage_features["input_ids"].shape[0] > chunk
    (ref_loss, ref_parts), ref, (loss, parts), got = both_ways(model, accelerator, objective, batch, chunk)
    assert set(parts) == set(ref_parts) == names
    assert loss.item() == pytest.approx(ref_loss.item(), rel=1e-6)
    for k in names:
        assert parts[k].item() == pytest.approx(ref_parts[k].item(), rel=1e-5, abs=1e-7), k
    assert ref and ref.keys() == got.keys()
    if variant == "lora":
        assert all("lora_" in k for k in ref)
    for k in ref:
        torch.testing.assert_close(got[k], ref[k], rtol=1e-4, atol=1e-6, msg=k)

    monkeypatch.setattr(grad_cache.RandomState, "restore", lambda self: None)  # no replay: other dropout masks
    *_, (loss, _), unreplayed = both_ways(model, accelerator, objective, batch, chunk)
    assert loss.item() == pytest.approx(ref_loss.item(), rel=1e-6)  # the first pass is as before
    assert max(float((unreplayed[k] - ref[k]).abs().max() / ref[k].abs().max().clamp(min=1e-12)) for k in ref) > 1e-2


class Restated(terms.Term):
    """A term with query rows of its own (each question again, reworded), the way a term declares them."""
    name = "restated"

    def collate(self, core):
        return terms.Extra(queries=[f"in other words: {pick['query']}" for pick in core.picks])

    def forward(self, q, p, batch):
        return (1 - torch.nn.functional.cosine_similarity(q[batch.rows_of(self.name)], q[:batch.n_queries])).mean()


def test_a_terms_own_query_rows_go_through_the_cached_step(tiny_model_dir, not_pool, tmp_path):
    """Rows a term adds after the batch's queries are chunked, cached and replayed like the batch's own."""
    from accelerate import Accelerator

    from boolcl.train.collate import Collator

    cfg = plus_cfg(tiny_model_dir, not_pool, tmp_path / "run", "train.batch_size=4")
    torch.manual_seed(cfg.seed)
    model, start = build_model(cfg)
    data = build_data(cfg, model, cfg.train.batch_size, None, None, start)
    own = data.loader.collate_fn
    added = [*data.terms, Restated()]
    collate = Collator(own.tokenizer, own.max_length, own.n_negatives, own.query_prompt, own.passage_prompt,
                       terms=added)
    batch = collate([data.dataset[i] for i in range(len(data.dataset))])
    n = batch.n_queries
    assert batch.rows["restated"] == (n, 2 * n) and batch.query_features["input_ids"].shape[0] == 2 * n
    (ref_loss, ref_parts), ref, (loss, parts), got = both_ways(model.train(), Accelerator(cpu=True),
                                                               Objective(added), batch, 3)
    assert set(parts) == set(ref_parts) == {"contrastive", "retention", "decomposition", "restated"}
    assert loss.item() == pytest.approx(ref_loss.item(), rel=1e-6)
    assert parts["restated"].item() == pytest.approx(ref_parts["restated"].item(), rel=1e-5)
    for k in ref:
        torch.testing.assert_close(got[k], ref[k], rtol=1e-4, atol=1e-6, msg=k)


def test_chunks_cut_trailing_padding_and_keep_every_row():
    mask = torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0], [1, 0, 0, 0]])
    features = {"input_ids": torch.arange(12).view(3, 4), "attention_mask": mask}
    pieces = list(grad_cache.chunks(features, 2))
    assert [p["attention_mask"].tolist() for p in pieces] == [[[1, 1, 1], [1, 1, 0]], [[1]]]
    assert pieces[1]["input_ids"].tolist() == [[8]]
    left = {"input_ids": torch.arange(4).view(2, 2), "attention_mask": torch.tensor([[0, 1], [0, 1]])}
    assert next(grad_cache.chunks(left, 1))["input_ids"].tolist() == [[0, 1]]  # left padding stays


def test_two_processes_gathering_negatives_get_the_whole_graphs_gradients(tiny_model_dir, pool, tmp_path):
    """Each process's passages are the other's negatives: their gradient comes back through the
    gather's backward in the second pass's cache. One all-reduce per step, as without caching."""
    res = _launch([str(ROOT / "tests" / "grad_cache_probe.py"), str(tiny_model_dir), str(pool), str(tmp_path), "2"],
                  cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    for rank in (0, 1):
        r = json.loads((tmp_path / f"rank{rank}.json").read_text())
        assert r["chunks"] == 5  # 3 queries in 2 chunks, 6 passages in 3
        assert r["cached_loss"] == pytest.approx(r["reference_loss"], rel=1e-6)
        assert r["same_keys"] and r["max_diff"] <= 1e-5 * r["max_grad"] + 1e-7, r
        assert r["cached_reduces"] == r["reference_reduces"] >= 1, r  # only the last chunk synchronises
        assert r["max_diff_without_gather"] > 1e-3 * r["max_grad"], r  # the gathered negatives matter


def test_two_cached_processes_train_as_one_without_caching(tiny_nodrop_dir, pool, tmp_path):
    """The loop under DDP: two processes with caching, gathering each other's passages, reach the
    weights of one process without it (no dropout: the same computation)."""
    args = ["recipe=tiny", f"model={tiny_nodrop_dir}", f"train.boolean={pool}", f"train.original={pool}",
            "train.batch_size=2", "train.hard_negatives=1", "train.max_length=32", "train.max_steps=3",
            "train.log_every=1", "train.report_to=[]"]
    one = train(compose([*args, f"out={tmp_path / 'one'}"]))
    two = tmp_path / "two"
    res = _launch([str(ROOT / "train.py"), *args, f"out={two}", "train.grad_cache_chunk=1"], cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "processes: 2" in res.stdout + res.stderr
    logs = [[json.loads(x) for x in (run / "train_log.jsonl").read_text().splitlines()] for run in (one, two)]
    assert [r["step"] for r in logs[1]] == [1, 2, 3]
    for a, b in zip(*logs):
        assert b["loss"] == pytest.approx(a["loss"], rel=1e-4, abs=1e-5)
        assert b["grad_norm"] == pytest.approx(a["grad_norm"], rel=1e-4)
    w1, w2 = _weights(one), _weights(two)
    for k in w1:
        torch.testing.assert_close(w2[k], w1[k], rtol=1e-4, atol=1e-6, msg=k)


def test_training_with_and_without_caching_reaches_the_same_weights(tiny_nodrop_dir, pool, tmp_path, monkeypatch):
    """No dropout (a chunk's masks cannot be the whole batch's), gradient accumulation on: the same losses,
    gradient norms and weights, and the cached step really ran."""
    common = ["train.batch_size=4", "train.grad_accum=2", "train.max_steps=3", "train.report_to=[]"]
    plain = train(tiny_cfg(tiny_nodrop_dir, pool, tmp_path / "plain", *common))
    calls = []
    step = grad_cache.step
    monkeypatch.setattr(grad_cache, "step", lambda *a: calls.append(a[-1]) or step(*a))
    cached = train(tiny_cfg(tiny_nodrop_dir, pool, tmp_path / "cached", *common, "train.grad_cache_chunk=1"))
    assert calls == [1] * 6  # 3 steps x 2 micro-batches
    logs = [[json.loads(x) for x in (run / "train_log.jsonl").read_text().splitlines()] for run in (plain, cached)]
    assert [r["step"] for r in logs[1]] == [1, 2, 3]
    for a, b in zip(*logs):
        assert b["loss"] == pytest.approx(a["loss"], rel=1e-5)
        assert b["grad_norm"] == pytest.approx(a["grad_norm"], rel=1e-4)
    w1, w2 = _weights(plain), _weights(cached)
    assert any(not torch.equal(w1[k], _weights(tiny_nodrop_dir)[k]) for k in w1)
    for k in w1:
        torch.testing.assert_close(w2[k], w1[k], rtol=1e-4, atol=1e-6, msg=k)


class Held:
    def __init__(self, t):
        self.t = t


class StepMemory:
    """The most bytes a step holds at once of what grows with the rows it encodes: the tensors
    autograd keeps for backward (counted as they are saved, and as their graphs are freed; weights
    left out) and the token embeddings of encoder forwards that are still referenced, sampled
    after every encoder forward."""

    def __init__(self, model):
        self.weights = {p.untyped_storage().data_ptr() for p in model.parameters()}
        self.saved = self.peak = 0
        self.outputs = []  # weak references to every forward's token embeddings
        self.hook = model[0].register_forward_hook(self.sample)

    def pack(self, t):
        holder = Held(t)
        if t.untyped_storage().data_ptr() not in self.weights:
            size = t.numel() * t.element_size()
            self.saved += size
            weakref.finalize(holder, self.free, size)
        return holder

    def free(self, size):
        self.saved -= size

    @staticmethod
    def unpack(holder):
        return holder.t

    def sample(self, module, args, output):
        self.outputs.append(weakref.ref(output["token_embeddings"]))
        held = sum(t.numel() * t.element_size() for t in (r() for r in self.outputs) if t is not None)
        self.peak = max(self.peak, self.saved + held)


def test_memory_of_a_step_follows_the_chunk_not_the_batch(tiny_nodrop_dir, tmp_path):
    from accelerate import Accelerator

    from boolcl.train.collate import Collator, ItemDataset
    from boolcl.train.mixing import Item

    cfg = compose(["recipe=tiny", f"model={tiny_nodrop_dir}", "train.max_length=32"])
    torch.manual_seed(0)
    model, _ = build_model(cfg)
    model.train()
    accelerator, objective = Accelerator(cpu=True), Objective(terms.build(cfg.train, "cosine"))
    words = "alpha beta gamma delta epsilon zeta eta theta iota kappa".split()

    def text(i, n):  # n words each: every row the same length
        return " ".join(words[(i + j) % len(words)] for j in range(n))

    items = [Item(text(i, 6), [f"p{i}"], [text(i + 1, 20)], [f"n{i}"], [text(i + 2, 20)], "simple") for i in range(32)]
    collate = Collator(model.tokenizer, 32, 1)

    def uncached(batch):
        q, p = model(batch.query_features), model(batch.passage_features)
        accelerator.backward(objective(q["sentence_embedding"], p["sentence_embedding"], batch)[0])

    def peak(rows, chunk):
        batch = collate([ItemDataset(items, 1)[i] for i in range(rows)])
        meter = StepMemory(model)
        with torch.autograd.graph.saved_tensors_hooks(meter.pack, meter.unpack):
            if chunk:
                grad_cache.step(model, model, accelerator, objective, batch, chunk)
            else:
                uncached(batch)
        meter.hook.remove()
        model.zero_grad(set_to_none=True)
        return meter.peak

    plain8, plain32, cached8, cached32 = peak(8, 0), peak(32, 0), peak(8, 4), peak(32, 4)
    assert plain32 > 3.5 * plain8  # without caching, 4x the batch holds about 4x as much
    assert cached32 < 1.1 * cached8  # with it, about the same: one chunk at a time
    assert cached32 < plain32 / 5


def test_bad_chunk_sizes_are_configuration_errors_naming_the_key(tiny_model_dir, pool, tmp_path):
    def cfg(*extra):
        return tiny_cfg(tiny_model_dir, pool, tmp_path / "run", *extra)

    assert cfg().train.grad_cache_chunk is None and cfg("train.grad_cache_chunk=null").train.grad_cache_chunk is None
    for bad in (0, -1):  # no silent fallback to the uncached step
        with pytest.raises(ConfigError, match=rf"train\.grad_cache_chunk={bad} must be >= 1 or null \(off\)"):
            cfg(f"train.grad_cache_chunk={bad}")
    with pytest.raises(ConfigError, match=r"train\.grad_cache_chunk=3 must be at most .*: 2 "):
        cfg("train.grad_cache_chunk=3")  # train.batch_size=2
    with pytest.raises(ConfigError, match=r"train\.grad_cache_chunk=3 must be at most .*: 2 \(.*grad_accum=2"):
        cfg("train.batch_size=4", "train.grad_accum=2", "train.grad_cache_chunk=3")
    four = cfg("train.batch_size=4", "train.grad_cache_chunk=4")
    assert per_device_batch(four, 1) == 4
    with pytest.raises(ConfigError, match=r"train\.grad_cache_chunk=4 must be at most .*: 2 \(.*2 processes"):
        per_device_batch(four, 2)  # what the loop checks once it knows how many processes run


def test_deepspeed_is_refused_before_any_forward(tiny_model_dir, pool, tmp_path):
    from accelerate.utils import DistributedType

    model, _, objective, batch = components(tiny_cfg(tiny_model_dir, pool, tmp_path / "run"))

    def forward(features):
        raise AssertionError("encoded before refusing")
    with pytest.raises(ConfigError, match="train.grad_cache_chunk does not run under DeepSpeed"):
        grad_cache.step(model, forward, SimpleNamespace(distributed_type=DistributedType.DEEPSPEED), objective,
                        batch, 1)


def test_out_of_memory_advice_says_what_accumulation_changes():
    t = compose(["recipe=tiny"]).train
    message = str(out_of_memory(t, 3, 32))
    assert "set train.grad_cache_chunk=N" in message and "not the objective" in message
    assert "same global batch" not in message
    t.grad_cache_chunk = 8
    assert "lower train.grad_cache_chunk=8" in str(out_of_memory(t, 3, 32))


def test_benchmark_runs_each_configuration_in_its_own_process(tiny_model_dir, tmp_path):
    """Only the figures' structure is checked, never a speed or a size."""
    out, scratch = tmp_path / "bench.json", tmp_path / "tmp"
    scratch.mkdir()
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_grad_cache.py"), "--batches", "4",
                           "--chunk", "2", "--steps", "2", "--max-length", "16", "--model", str(tiny_model_dir),
                           "--json", str(out)], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "TMPDIR": str(scratch)})
    assert done.returncode == 0, done.stderr[-3000:]
    assert not list(scratch.iterdir())  # its working folders (model copies, pools) are gone
    results = json.loads(out.read_text())
    assert [r["batch"] for r in results["runs"]] == [4]
    for r in results["runs"]:
        plain, cached = r["plain"], r["cached"]
        assert plain["fits"] and cached["fits"] and cached["chunk"] == 2 and plain["chunk"] == 0
        assert plain["pid"] != cached["pid"]  # a fresh process each, so peaks do not mix
        assert r["peak_ratio"] == pytest.approx(cached["peak_mb"] / plain["peak_mb"], rel=1e-9)
        assert r["speed_ratio"] == pytest.approx(cached["examples_per_s"] / plain["examples_per_s"], rel=1e-9)
    assert "cached/plain" in done.stdout
