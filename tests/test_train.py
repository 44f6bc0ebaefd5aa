import json
import math
import os
import subprocess
import sys

import pytest
import torch
from conftest import ROOT, dump_jsonl

from boolcl.config import compose
from boolcl.errors import ConfigError, DataError, TrainingError
from boolcl.train.collate import Collator, ItemDataset
from boolcl.train.loop import train
from boolcl.train.losses import InfoNCE
from boolcl.train.mixing import Item


def tiny_cfg(tiny_model_dir, pool, out, *extra):
    return compose(["recipe=tiny", f"model={tiny_model_dir}", f"train.boolean={pool}", f"train.original={pool}",
                    "train.batch_size=2", "train.hard_negatives=1", "train.epochs=2", "train.log_every=1",
                    "train.max_length=32", f"out={out}", *extra])


def test_collator_and_loss_mask_other_queries_labelled_positives(tiny_model_dir):
    from boolcl.retrieval.models import load_model
    from boolcl.train.losses import false_negative_mask

    tok = load_model(str(tiny_model_dir)).tokenizer
    ds = ItemDataset([Item("q0", ["a", "b"], ["A", "B"], ["n"], ["N"], "not"),
                      Item("q1", ["b"], ["B"], [], [], "simple")], n_negatives=1)
    batch = Collator(tok, 16, 1)([ds[0], ds[1]])
    # passages: [q0's positive A, q1's positive B, q0's negative N, a placeholder (q1 has no negative)]
    assert batch.n_queries == 2 and batch.passage_features["input_ids"].shape[0] == 4
    assert batch.query_features["input_ids"].shape == (2, 4)  # [CLS] q 0 [SEP]: queries padded on their own
    mask = false_negative_mask(batch.positive_keys, batch.passage_keys, torch.arange(2))
    # B is a labelled positive of q0, so never its negative; the placeholder is nobody's negative
    assert mask.tolist() == [[False, True, False, True],
                             [False, False, False, True]]
    ds.set_epoch(1)
    assert ds[0]["positive"] == "B"  # positives rotate across epochs


def test_infonce_matches_cross_entropy_and_masks():
    torch.manual_seed(0)
    q, p = torch.randn(3, 8), torch.randn(6, 8)
    loss = InfoNCE("dot", scale=1.0)(q, p)
    assert loss.item() == pytest.approx(torch.nn.functional.cross_entropy(q @ p.T, torch.arange(3)).item(), rel=1e-6)
    passage_keys = torch.tensor([10, 11, 12, 13, 14, 15])
    positive_keys = torch.tensor([[10, 14], [11, -1], [12, -1]])  # passage 4 is also a positive of query 0
    masked = InfoNCE("dot", scale=1.0)(q, p, passage_keys, positive_keys)
    logits = q @ p.T
    row0 = -torch.log_softmax(torch.cat([logits[0, :4], logits[0, 5:]]), 0)[0]
    rest = torch.nn.functional.cross_entropy(logits[1:], torch.tensor([1, 2]), reduction="sum")
    assert masked.item() == pytest.approx(((row0 + rest) / 3).item(), rel=1e-6)
    cos = InfoNCE("cosine")
    assert cos.scale == 20.0 and cos(q, p).item() == pytest.approx(InfoNCE("cosine")(q * 5, p).item(), rel=1e-5)


def test_train_writes_a_loadable_checkpoint(tiny_model_dir, pool, tmp_path, monkeypatch):
    from sentence_transformers import SentenceTransformer

    monkeypatch.setenv("OPENAI_API_KEY", "sk-should-never-be-written-anywhere-123")
    out = train(tiny_cfg(tiny_model_dir, pool, tmp_path / "run"))
    model = SentenceTransformer(str(out))
    assert model.encode(["a question"]).shape == (1, 32)
    before = SentenceTransformer(str(tiny_model_dir))
    # trained on texts cut to 32 tokens, saved with the starting model's own length (64)
    assert before.max_seq_length == 64 and model.max_seq_length == 64
    for checkpoint in out.glob("checkpoint-*"):
        assert SentenceTransformer(str(checkpoint)).max_seq_length == 64, checkpoint
    assert "texts cut to 32 tokens in training" in (out / "README.md").read_text()
    changed = [n for (n, a), b in zip(model.state_dict().items(), before.state_dict().values()) if not torch.equal(a, b)]
    assert changed, "training changed no weight"
    log = [json.loads(x) for x in (out / "train_log.jsonl").read_text().splitlines()]
    # 2 NOT examples + the 4 rows of the pool as original data = 6 items, batch 2, 2 epochs
    assert [r["step"] for r in log] == [1, 2, 3, 4, 5, 6] and all(math.isfinite(r["loss"]) for r in log)
    assert {"lr", "grad_norm", "triples_per_s"} <= set(log[0])
    manifest = json.loads((out / "data_manifest.json").read_text())
    assert manifest["mix"]["boolean"]["examples"] == 2 and str(pool) in manifest["files"]
    for f in out.rglob("*"):
        if f.is_file():
            assert b"sk-should-never" not in f.read_bytes(), f


@pytest.mark.parametrize("extra", [[], ["train.grad_cache_chunk=1"]], ids=["plain", "grad-cache"])
def test_nan_loss_names_step_and_batch(tiny_model_dir, pool, tmp_path, extra):
    """A model whose weights hold a NaN (train.scale=nan is refused by the config checks); with
    gradient caching the loss is checked before its cached gradients are backpropagated."""
    from sentence_transformers import SentenceTransformer

    broken = SentenceTransformer(str(tiny_model_dir), device="cpu")
    with torch.no_grad():
        next(p for p in broken.parameters() if p.dim() == 2).fill_(float("nan"))
    broken.save(str(tmp_path / "nan-model"))
    with pytest.raises(TrainingError, match=r"loss is nan at step 1 \(epoch 0, batch 0\)"):
        train(tiny_cfg(tmp_path / "nan-model", pool, tmp_path / "run", *extra))


def test_impossible_configs_fail_before_compute(tiny_model_dir, pool, tmp_path):
    with pytest.raises(ConfigError, match="multiple of processes x grad_accum"):
        train(tiny_cfg(tiny_model_dir, pool, tmp_path / "a", "train.batch_size=3", "train.grad_accum=2"))
    with pytest.raises(DataError, match="file not found"):
        train(tiny_cfg(tiny_model_dir, tmp_path / "missing.jsonl", tmp_path / "b"))
    with pytest.raises(ConfigError, match="fewer than one global batch"):
        train(tiny_cfg(tiny_model_dir, pool, tmp_path / "c", "train.batch_size=64"))
    assert not (tmp_path / "a").exists() and not (tmp_path / "c").exists()


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _launch(args, cwd, timeout=300):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    # --multi_gpu on a machine without GPUs starts 2 CPU processes over gloo (torchrun underneath)
    cmd = [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2",
           "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no", "--main_process_port",
           str(_free_port()), *args]
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def test_all_ranks_agree_on_one_run_folder(tmp_path):
    res = _launch([str(ROOT / "tests" / "rundir_probe.py"), str(tmp_path)], cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    dirs = [(tmp_path / f"rank{r}.txt").read_text() for r in (0, 1)]
    assert dirs[0] == dirs[1] and dirs[0].startswith("checkpoints/tiny-")


def test_train_py_runs_on_two_processes(tiny_model_dir, pool, tmp_path):
    from sentence_transformers import SentenceTransformer

    res = _launch([str(ROOT / "train.py"), "recipe=tiny", f"model={tiny_model_dir}", f"train.boolean={pool}",
                   f"train.original={pool}", "train.batch_size=2", "train.max_steps=2", "train.max_length=32",
                   "train.hard_negatives=1"], cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    runs = list((tmp_path / "checkpoints").iterdir())
    assert len(runs) == 1 and (runs[0] / "config.yaml").is_file()
    assert SentenceTransformer(str(runs[0])).encode(["x"]).shape == (1, 32)


def _weights(folder):
    from safetensors.torch import load_file

    return load_file(str(next(folder.glob("model.safetensors"))))


@pytest.mark.parametrize("resume_step", [2, 3, 4])  # 3 steps per epoch: mid-epoch, boundary, next epoch
def test_resume_reaches_the_same_weights(tiny_model_dir, pool, tmp_path, resume_step):
    import shutil

    common = ["train.max_steps=6", "train.save_every=1", "train.keep_last=10", "train.report_to=[]"]
    full = train(tiny_cfg(tiny_model_dir, pool, tmp_path / "full", *common))
    resumed_dir = tmp_path / "resumed"
    resumed_dir.mkdir()
    shutil.copytree(full / f"checkpoint-{resume_step}", resumed_dir / f"checkpoint-{resume_step}")
    resumed = train(tiny_cfg(tiny_model_dir, pool, resumed_dir, *common, "train.resume=true"))
    a, b = _weights(full), _weights(resumed)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a), "resumed run diverged"
    steps = [json.loads(x)["step"] for x in (resumed / "train_log.jsonl").read_text().splitlines()]
    assert steps == list(range(resume_step + 1, 7))


def test_resume_with_lora_and_accumulation_reaches_the_same_weights(tiny_model_dir, pool, tmp_path):
    """The JSON/safetensors training state restores LoRA adapters, AdamW moments, the scheduler and
    Accelerate's accumulation counter exactly."""
    import shutil

    common = ["train.max_steps=3", "train.save_every=1", "train.keep_last=10", "train.report_to=[]",
              "train.lora.enabled=true", "train.lora.r=4", "train.lr=1e-2", "train.grad_accum=2"]
    full = train(tiny_cfg(tiny_model_dir, pool, tmp_path / "full", *common))
    resumed_dir = tmp_path / "resumed"
    resumed_dir.mkdir()
    shutil.copytree(full / "checkpoint-1", resumed_dir / "checkpoint-1")
    resumed = train(tiny_cfg(tiny_model_dir, pool, resumed_dir, *common, "train.resume=true"))
    a, b = _weights(full), _weights(resumed)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a), "resumed run diverged"


@pytest.mark.parametrize("extra", [[], ["train.grad_cache_chunk=1"]], ids=["plain", "grad-cache"])
def test_kill_9_then_resume_matches_an_uninterrupted_run(tiny_model_dir, pool, tmp_path, extra):
    """SIGKILL once a checkpoint is down, resume: the same weights to the bit as a run never stopped
    (dropout on, so with caching the replayed random state is part of what must survive)."""
    import signal
    import time

    args = ["recipe=tiny", f"model={tiny_model_dir}", f"train.boolean={pool}", f"train.original={pool}",
            "train.batch_size=2", "train.hard_negatives=1", "train.max_length=32", "train.max_steps=40",
            "train.save_every=5", "train.keep_last=2", "train.report_to=[]", "train.eval_every=0", *extra]
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    full = tmp_path / "full"
    res = subprocess.run([sys.executable, str(ROOT / "train.py"), *args, f"out={full}"], env=env,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    killed = tmp_path / "killed"
    proc = subprocess.Popen([sys.executable, str(ROOT / "train.py"), *args, f"out={killed}"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 240
    while not list(killed.glob("checkpoint-*/trainer_state.json")) and time.time() < deadline and proc.poll() is None:
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not (killed / "model.safetensors").exists(), "the run finished before it could be killed"
    res = subprocess.run([sys.executable, str(ROOT / "train.py"), *args, f"out={killed}", "train.resume=true"],
                         env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    a, b = _weights(full), _weights(killed)
    assert all(torch.equal(a[k], b[k]) for k in a)
    steps = [json.loads(x)["step"] for x in (killed / "train_log.jsonl").read_text().splitlines()]
    assert steps == sorted(set(steps)) and steps[-1] == 40
    assert len(list(killed.glob("checkpoint-*"))) <= 2 and not list(killed.glob(".tmp-*"))


def test_resume_errors_are_clear(tiny_model_dir, pool, tmp_path):
    with pytest.raises(ConfigError, match="has no complete checkpoint-N folder"):
        train(tiny_cfg(tiny_model_dir, pool, tmp_path / "nothing", "train.resume=true"))
    with pytest.raises(ConfigError, match="not a complete checkpoint"):
        train(tiny_cfg(tiny_model_dir, pool, tmp_path / "x", f"train.resume={tmp_path}"))


def test_tensorboard_curves_are_written(tiny_model_dir, pool, tmp_path):
    out = train(tiny_cfg(tiny_model_dir, pool, tmp_path / "tb"))
    assert list(out.glob("**/events.out.tfevents.*"))


def test_two_processes_shard_the_data_without_duplicates(tmp_path):
    res = _launch([str(ROOT / "tests" / "shard_probe.py"), str(tmp_path)], cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    per_rank = [(tmp_path / f"rank{r}.txt").read_text().split() for r in (0, 1)]
    assert not set(per_rank[0]) & set(per_rank[1])
    assert len(per_rank[0]) == len(per_rank[1]) == 9  # 23 items, global batch 6: 3 full steps, rest dropped


@pytest.mark.parametrize("packed", [False, True], ids=["padded", "packed"])
def test_two_processes_match_one_process(tiny_nodrop_dir, pool, tmp_path, packed):
    """Same global batch on 1 and 2 processes: same losses and weights, up to float reordering;
    with `packed`, the two processes run padding-free (train.packed) and still match the padded one."""
    args = ["recipe=tiny", f"model={tiny_nodrop_dir}", f"train.boolean={pool}", f"train.original={pool}",
            "train.batch_size=2", "train.hard_negatives=1", "train.max_length=32", "train.max_steps=3",
            "train.log_every=1", "train.report_to=[]"]
    one = tmp_path / "one"
    res = subprocess.run([sys.executable, str(ROOT / "train.py"), *args, f"out={one}"],
                         env={**os.environ, "HF_HUB_OFFLINE": "1"}, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    two = tmp_path / "two"
    res = _launch([str(ROOT / "train.py"), *args, f"out={two}", f"train.packed={str(packed).lower()}"], cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    log1 = [json.loads(x) for x in (one / "train_log.jsonl").read_text().splitlines()]
    log2 = [json.loads(x) for x in (two / "train_log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log2] == [1, 2, 3]  # rank 0 alone writes the log
    assert "processes: 2" in res.stdout + res.stderr  # really distributed, not two lone runs
    for a, b in zip(log1, log2):
        assert b["loss"] == pytest.approx(a["loss"], rel=1e-4, abs=1e-5)
    w1, w2 = _weights(one), _weights(two)
    assert all(torch.allclose(w1[k], w2[k], rtol=1e-4, atol=1e-6) for k in w1)


def test_margin_mse_matches_its_definition():
    from boolcl.train.losses import MarginMSE

    torch.manual_seed(1)
    q, p = torch.randn(2, 4), torch.randn(2 + 2 * 3, 4)  # 2 positives, then 3 negatives per query
    teacher = torch.randn(2, 3)
    expected = torch.stack([torch.stack([q[i] @ p[i] - q[i] @ p[2 + 3 * i + j] for j in range(3)]) for i in range(2)])
    assert MarginMSE("dot")(q, p, teacher).item() == pytest.approx(((expected - teacher) ** 2).mean().item(), rel=1e-5)


def test_margin_mse_trains_on_scored_data_and_refuses_unscored(tiny_model_dir, tmp_path, small_set):
    rows = [{"qid": f"m{i}", "question": f"question number {i}?", "question_type": "simple",
             "positive_ctxs": [{"passage_id": f"d{i % 3}", "score": 9.5}],
             "hard_negative_ctxs": [{"passage_id": f"d{3 + i % 3}", "score": 1.0 + i}]} for i in range(4)]
    scored = dump_jsonl(tmp_path / "scored" / "train.jsonl", rows)
    (tmp_path / "scored" / "corpus.jsonl").write_text((small_set / "corpus.jsonl").read_text())
    args = ["train.boolean=none", "train.loss=margin_mse", "train.max_steps=2"]
    out = train(tiny_cfg(tiny_model_dir, scored, tmp_path / "mm", *args, f"train.original={scored}"))
    log = [json.loads(x) for x in (out / "train_log.jsonl").read_text().splitlines()]
    assert len(log) == 2 and all(math.isfinite(r["loss"]) and r["loss"] > 0 for r in log)
    rows[2]["hard_negative_ctxs"][0].pop("score")
    dump_jsonl(scored, rows)
    with pytest.raises(DataError, match="needs a teacher 'score'.*1 examples lack one"):
        train(tiny_cfg(tiny_model_dir, scored, tmp_path / "mm2", *args, f"train.original={scored}"))


def test_lora_trains_adapters_and_saves_a_plain_model(tiny_model_dir, pool, tmp_path):
    from sentence_transformers import SentenceTransformer

    out = train(tiny_cfg(tiny_model_dir, pool, tmp_path / "lora", "train.lora.enabled=true", "train.lora.r=4",
                         "train.lr=1e-2", "train.max_steps=3"))
    trained, base = _weights(out), _weights(tiny_model_dir)
    assert trained.keys() == base.keys()  # merged: no lora_ tensors, loads without peft
    changed = [k for k in base if not torch.equal(base[k], trained[k])]
    assert changed and all("attention" in k for k in changed)  # only the adapted projections moved
    assert SentenceTransformer(str(out)).encode(["x"]).shape == (1, 32)


def test_group_by_length_makes_homogeneous_batches_in_random_order():
    from boolcl.train.sampling import EpochShuffle

    lengths = [(i * 37) % 101 for i in range(1000)]
    plain, grouped = EpochShuffle(1000, 0), EpochShuffle(1000, 0, lengths, batch_size=10)
    a, b = list(plain), list(grouped)
    assert sorted(b) == list(range(1000))  # every item once
    spread = lambda order: sum(max(lengths[i] for i in order[k:k + 10]) - min(lengths[i] for i in order[k:k + 10])  # noqa: E731
                               for k in range(0, 1000, 10))
    assert spread(b) < spread(a) / 5
    firsts = [lengths[b[k]] for k in range(0, 1000, 10)]
    assert firsts != sorted(firsts, reverse=True)  # batch order is shuffled, not longest-first
    grouped.set_epoch(1)
    assert list(grouped) != b


@pytest.mark.slow
def test_training_on_the_not_pool_teaches_negation(tmp_path):
    """The packaged MiniLM, trained on the sample's NOT pool, ranks excluded passages lower."""
    from boolcl.data.loaders import load_retrieval_set
    from boolcl.scoring.runner import evaluate_spec

    # no periodic evaluation or checkpoints, 64 tokens to train and 128 to score: the 16 steps are what is tested
    cfg = compose(["recipe=tiny", "train.operators=[not]", "train.original=none", "train.epochs=4",
                   "train.eval_every=0", "train.save_every=0", "train.max_length=64",
                   "eval.max_length=128", "train.report_to=[]", f"out={tmp_path / 'not'}"])
    rs = load_retrieval_set("sample")
    base, _ = evaluate_spec(cfg.model, rs, cfg, show_progress=False)  # tiny: similarity=cosine
    trained, _ = evaluate_spec(str(train(cfg)), rs, cfg, show_progress=False)
    before, after = (r.metrics["NegRecall@10"]["NOT"]["value"] for r in (base, trained))
    assert after < before - 0.03, (before, after)
    assert trained.metrics["MRR@10"]["NOT"]["value"] > base.metrics["MRR@10"]["NOT"]["value"]


def test_gradient_checkpointing_and_accumulation_run(tiny_model_dir, pool, tmp_path):
    out = train(tiny_cfg(tiny_model_dir, pool, tmp_path / "gc", "train.gradient_checkpointing=true",
                         "train.grad_accum=2", "train.max_steps=2", "train.group_by_length=true"))
    log = [json.loads(x) for x in (out / "train_log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log] == [1, 2] and all(math.isfinite(r["loss"]) for r in log)
