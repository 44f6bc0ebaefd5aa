"""Scores while training (train.eval_every / eval_data / keep_best): what is logged, that it is what
`boolcl evaluate` says, that it leaves the run alone, and which model best/ keeps."""
import json
import os
import random
import socket
import subprocess
import sys

import numpy as np
import pytest
import torch
from conftest import ROOT

from boolcl.config import compose
from boolcl.errors import ConfigError, DataError
from boolcl.train import periodic_eval
from boolcl.train.loop import train

GROUPS = ("ALL", "AND", "OR", "NOT")


def cfg_for(model_dir, pool, out, *extra):
    """6 training items, batch 2: 3 steps per epoch, 6 steps in all; no scores unless `extra` asks
    (the tiny recipes score the sample)."""
    return compose(["recipe=tiny", f"model={model_dir}", f"train.boolean={pool}", f"train.original={pool}",
                    "train.batch_size=2", "train.hard_negatives=1", "train.epochs=2", "train.max_length=32",
                    "train.report_to=[]", "eval.cache=false", "train.eval_every=0", f"out={out}", *extra])


def read_log(run):
    return [json.loads(x) for x in (run / "train_log.jsonl").read_text().splitlines()]


def weights(folder):
    from safetensors.torch import load_file

    return load_file(str(folder / "model.safetensors"))


def same_weights(a, b) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


# ---------------------------------------------------------------- what is logged, and that it is evaluate's


def test_scores_land_in_the_log_and_tensorboard_at_the_right_steps(tiny_model_dir, pool, small_set, tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    run = train(cfg_for(tiny_model_dir, pool, tmp_path / "run", "train.eval_every=4", "train.log_every=5",
                        f"train.eval_data={small_set}", "train.report_to=[tensorboard]"))
    log = read_log(run)
    assert [r["step"] for r in log] == [4, 5, 6]  # 5: log_every; 4: eval_every (a record of its own); 6: the last
    wanted = {f"eval/set/{m}@10/{g}" for m in ("MRR", "NegRecall") for g in GROUPS}
    for record in log:
        scored = {k for k in record if k.startswith("eval/")}
        assert scored == (wanted if record["step"] in (4, 6) else set()), record["step"]
        assert "loss" in record and ("eval_s" in record) == (record["step"] in (4, 6))
    assert all(0 <= log[0][k] <= 100 for k in wanted)
    events = EventAccumulator(str(next(run.glob("logs/**/events.out.tfevents.*")).parent))
    events.Reload()
    tags = set(events.Tags()["scalars"])
    assert {f"eval/set/MRR@10/{g}" for g in GROUPS} <= tags
    assert [e.step for e in events.Scalars("eval/set/NegRecall@10/NOT")] == [4, 6]
    assert not (run / "best").exists()  # no train.keep_best: no best/


def test_the_last_steps_scores_are_what_boolcl_evaluate_gives(tiny_model_dir, pool, small_set, tmp_path):
    from boolcl.evaluate.command import run_evaluate

    run = train(cfg_for(tiny_model_dir, pool, tmp_path / "run", "train.eval_every=3", "train.log_every=1",
                        f"train.eval_data=[{small_set},sample]"))
    last = read_log(run)[-1]
    assert last["step"] == 6
    for data, name in ((small_set, "set"), ("sample", "sample")):
        cfg = compose(["recipe=tiny", f"data={data}", "eval.cache=false", f"out={tmp_path / ('ev-' + name)}"])
        _, payload, _ = run_evaluate(str(run), cfg)
        expected = {k: v for k, v in payload["headline"].items()
                    if k.split("@")[0] in ("MRR", "NegRecall") and v is not None}
        got = {k[len(f"eval/{name}/"):]: v for k, v in last.items() if k.startswith(f"eval/{name}/")}
        assert got.keys() == expected.keys() and got == pytest.approx(expected, abs=1e-9), name


# ---------------------------------------------------------------- it leaves the run alone


@pytest.mark.parametrize("recipe", ["tiny", "not_plus_tiny"])
def test_scoring_does_not_change_the_final_weights(tiny_model_dir, pool, small_set, tmp_path, recipe):
    """Dropout is on in the tiny model: a scorer that left the model in eval mode or moved a
    random generator would show here."""
    extra = [f"recipe={recipe}", "train.original_size=null", "train.lr=1e-3",
             "train.named.topics=false", "train.named.or_questions=0"]  # this pool names no groups
    plain = train(cfg_for(tiny_model_dir, pool, tmp_path / "plain", *extra))
    scored = train(cfg_for(tiny_model_dir, pool, tmp_path / "scored", *extra, "train.eval_every=1",
                           f"train.eval_data={small_set}", "train.keep_best=MRR@10/NOT"))
    assert not any("eval_s" in r for r in read_log(plain))
    assert same_weights(weights(plain), weights(scored))
    assert len([r for r in read_log(scored) if "eval/set/MRR@10/ALL" in r]) == 6


def test_a_score_puts_back_every_generator_and_mode(tiny_model_dir, small_set, tmp_path):
    from accelerate import Accelerator
    from sentence_transformers import SentenceTransformer

    from boolcl.distributed import cpu_only_distributed

    cfg = compose(["recipe=tiny", "train.eval_every=1", f"train.eval_data={small_set}", f"out={tmp_path}"])
    accelerator = Accelerator(cpu=cpu_only_distributed())
    scorer = periodic_eval.PeriodicEval(cfg, accelerator, tmp_path, None)
    model = SentenceTransformer(str(tiny_model_dir), device="cpu")
    model.train()
    model[0].auto_model.pooler.eval()  # one module deliberately left in eval mode: it stays so
    modes = {name: m.training for name, m in model.named_modules()}
    random.seed(3), np.random.seed(3), torch.manual_seed(3)
    before = (random.getstate(), np.random.get_state()[1].copy(), torch.get_rng_state().clone())
    scores = scorer.maybe_score(model, step=1, epoch=0, total_steps=10)
    assert scores["eval/set/MRR@10/ALL"] >= 0
    assert random.getstate() == before[0] and np.array_equal(np.random.get_state()[1], before[1])
    assert torch.equal(torch.get_rng_state(), before[2])
    assert {name: m.training for name, m in model.named_modules()} == modes
    assert model.max_seq_length == 64  # the eval length (eval.max_length) was only borrowed
    assert scorer.maybe_score(model, step=2, epoch=0, total_steps=10) != {}
    off = periodic_eval.PeriodicEval(compose(["recipe=tiny", "train.eval_every=0"]), accelerator, tmp_path, None)
    assert off.sets == [] and off.maybe_score(model, step=1, epoch=0, total_steps=1) == {}


# ---------------------------------------------------------------- keep_best

SCRIPT = {  # the scores of steps 1..6, scripted: the model's own are noise
    "MRR@10/NOT": [10.0, 30.0, 20.0, 25.0, 5.0, 29.0],  # highest at step 2
    "NegRecall@10/NOT": [50.0, 40.0, 45.0, 10.0, 30.0, 10.0],  # lowest at step 4 (step 6 only ties it)
}


def scripted(monkeypatch, start_step=1):
    """PeriodicEval.score returns SCRIPT's values, step after step from `start_step`."""
    calls = iter(range(start_step - 1, 6))

    def score(self, model, rset):
        i = next(calls)
        return {metric: values[i] for metric, values in SCRIPT.items()}

    monkeypatch.setattr(periodic_eval.PeriodicEval, "score", score)


@pytest.mark.parametrize("metric, step", [("MRR@10/NOT", 2), ("NegRecall@10/NOT", 4)])
def test_keep_best_keeps_the_best_step_and_it_loads(tiny_model_dir, pool, small_set, tmp_path, monkeypatch,
                                                    metric, step):
    from sentence_transformers import SentenceTransformer

    scripted(monkeypatch)
    run = train(cfg_for(tiny_model_dir, pool, tmp_path / "run", "train.eval_every=1", f"train.eval_data={small_set}",
                        f"train.keep_best={metric}", "train.save_every=1", "train.keep_last=10"))
    record = json.loads((run / "best" / "best.json").read_text())
    assert record["step"] == step and record["value"] == SCRIPT[metric][step - 1]
    assert record["metric"] == f"set/{metric}" and record["lower_is_better"] == metric.startswith("NegRecall")
    assert same_weights(weights(run / "best"), weights(run / f"checkpoint-{step}"))  # the model of that step
    assert SentenceTransformer(str(run / "best")).encode(["a question"]).shape == (1, 32)
    assert not (run / ".best-tmp").exists()
    states = {int(p.name.split("-")[1]): json.loads((p / "trainer_state.json").read_text())
              for p in run.glob("checkpoint-*")}
    assert states[1]["best"]["step"] == 1 and states[5]["best"]["step"] == step  # each knows the best so far


def test_a_resumed_run_knows_the_best_so_far(tiny_model_dir, pool, small_set, tmp_path, monkeypatch):
    common = ["train.eval_every=1", f"train.eval_data={small_set}", "train.keep_best=MRR@10/NOT",
              "train.save_every=3", "train.log_every=1"]
    scripted(monkeypatch)
    run = train(cfg_for(tiny_model_dir, pool, tmp_path / "run", *common))
    assert json.loads((run / "checkpoint-3" / "trainer_state.json").read_text())["best"]["step"] == 2
    scripted(monkeypatch, start_step=4)  # steps 4..6 score 25, 5, 29: none beats step 2's 30
    resumed = train(cfg_for(tiny_model_dir, pool, run, *common, "train.resume=true"))
    record = json.loads((resumed / "best" / "best.json").read_text())
    assert (record["step"], record["value"]) == (2, 30.0)  # forgetting the record would keep step 4's 25
    scored = [r["step"] for r in read_log(resumed) if "eval/set/MRR@10/NOT" in r]
    assert scored == [1, 2, 3, 4, 5, 6]  # the log reads as one run


# ---------------------------------------------------------------- refused before any compute


@pytest.mark.parametrize("overrides, message", [
    (["train.keep_best=MRR@10/XOR"], "NegRecall@10/NOT"),  # the message lists the valid names
    (["train.keep_best=Recall@10/ALL"], "MRR@10/ALL"),
    (["train.keep_best=MRR@5/NOT"], "MEASURE@eval.k/TYPE"),
    (["train.eval_every=0", "train.keep_best=MRR@10/NOT"], "set train.eval_every > 0"),
    (["train.eval_every=-2"], "train.eval_every"),
    (["train.eval_data=[]"], "train.eval_data"),
    (["train.eval_max_corpus=0"], "train.eval_max_corpus"),
])
def test_bad_settings_are_refused_by_the_config(overrides, message):
    with pytest.raises(ConfigError, match=message.replace(".", r"\.")):
        compose(["recipe=tiny", "train.eval_every=5", *overrides])


def test_bad_sets_are_refused_before_the_model_loads(tiny_model_dir, pool, small_set, tmp_path):
    cases = [
        ([f"train.eval_data={tmp_path / 'missing'}"], DataError, "unknown data set"),
        (["train.eval_data=birco-doris-mae"], ConfigError, "boolcl evaluate. after training"),
        ([f"train.eval_data=[{small_set},{small_set}]"], ConfigError, "share a name"),
        ([f"train.eval_data={small_set}", "train.keep_best=nope/MRR@10/NOT"], ConfigError, "no eval set named 'nope'"),
        ([f"train.eval_data={small_set}", "train.keep_best=NegRecall@10/SIMPLE"], ConfigError,
         "has no SIMPLE questions with explicit negatives"),
    ]
    for i, (overrides, error, message) in enumerate(cases):
        with pytest.raises(error, match=message):
            train(cfg_for(tiny_model_dir, pool, tmp_path / f"run{i}", "train.eval_every=2", *overrides))
        assert not (tmp_path / f"run{i}").exists()


def test_a_dev_slice_keeps_the_labelled_passages(small_set):
    sets = periodic_eval.load_eval_sets(compose(["recipe=tiny", "train.eval_every=1", "train.eval_data=sample",
                                                 "train.eval_max_corpus=400"]))
    labelled = {c.passage_id for q in sets[0].questions for c in q.positive_ctxs + q.negative_ctxs}
    assert len(sets[0].corpus) == max(400, len(labelled)) and labelled <= set(sets[0].corpus.ids)


@pytest.mark.parametrize("recipe, every", [("tiny", 12), ("not_plus_tiny", 25)])
def test_the_tiny_recipes_score_the_held_out_clusters(recipe, every):
    cfg = compose([f"recipe={recipe}"])
    assert (cfg.train.eval_every, cfg.train.eval_data, cfg.train.keep_best) == (every, "sample", None)


# ---------------------------------------------------------------- several processes


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def launch_two(args, cwd):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2",
                           "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no",
                           "--main_process_port", str(_free_port()), *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


def test_each_process_encodes_its_own_slice_and_all_get_every_row(tmp_path):
    res = launch_two([str(ROOT / "tests" / "shared_encode_probe.py"), str(tmp_path)], cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert [r["7"]["seen"] for r in ranks] == [["0", "1", "2", "3"], ["4", "5", "6"]]
    assert [r["1"]["seen"] for r in ranks] == [["0"], []]
    for r in ranks:
        assert r["7"]["rows"] == [[float(i), -float(i)] for i in range(7)] and r["1"]["rows"] == [[0.0, -0.0]]


def test_two_processes_share_the_encoding_and_agree_with_one(tiny_nodrop_dir, pool, small_set, tmp_path):
    args = ["recipe=tiny", f"model={tiny_nodrop_dir}", f"train.boolean={pool}", f"train.original={pool}",
            "train.batch_size=2", "train.hard_negatives=1", "train.max_length=32", "train.max_steps=3",
            "train.log_every=1", "train.report_to=[]", "train.eval_every=2", f"train.eval_data=[{small_set},sample]",
            "train.keep_best=sample/MRR@10/ALL"]
    one = train(compose([*args, f"out={tmp_path / 'one'}"]))
    res = launch_two([str(ROOT / "train.py"), *args, f"out={tmp_path / 'two'}"], cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "processes: 2" in res.stdout + res.stderr
    log1, log2 = read_log(one), read_log(tmp_path / "two")
    assert [r["step"] for r in log2] == [1, 2, 3]
    for a, b in zip(log1, log2):
        keys = {k for k in a if k.startswith("eval/")}
        assert keys == {k for k in b if k.startswith("eval/")} and bool(keys) == (a["step"] in (2, 3))
        assert {k: b[k] for k in keys} == pytest.approx({k: a[k] for k in keys}, abs=1e-6)
    best1 = json.loads((one / "best" / "best.json").read_text())
    best2 = json.loads((tmp_path / "two" / "best" / "best.json").read_text())
    assert best1["step"] == best2["step"] and best1["value"] == pytest.approx(best2["value"], abs=1e-6)
