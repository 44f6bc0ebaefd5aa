"""Checkpoints and run folders that cannot hurt: resume unpickles nothing, a half-saved final model
is never a model, a full disk leaves the last good checkpoint, and an unwritable out= fails first."""
import errno
import json
import os
import pickle
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import ROOT, write_pool
from safetensors.torch import load_file

from boolcl.config import compose
from boolcl.errors import ConfigError, TrainingError
from boolcl.files import check_writable
from boolcl.retrieval.models import load_model
from boolcl.train import checkpoint
from boolcl.train.loop import build_model, train


class Evil:
    """Unpickling this creates `marker`: what a crafted checkpoint file would do."""

    def __init__(self, marker: Path):
        self.marker = str(marker)

    def __reduce__(self):
        return exec, (f"open({self.marker!r}, 'w').close()",)


@pytest.fixture
def pool(tmp_path, small_set):
    rows = [
        {"qid": "t-not", "question": "Which stomach problems are not about the liver?", "question_type": "not",
         "positive_ctxs": [{"passage_id": "d0"}, {"passage_id": "d2"}], "negative_ctxs": [{"passage_id": "d1"}]},
        {"qid": "t-s1", "question": "What is a cello?", "question_type": "simple",
         "positive_ctxs": [{"passage_id": "d4"}], "hard_negative_ctxs": [{"passage_id": "d3"}]},
        {"qid": "t-s2", "question": "What are gallstones?", "question_type": "simple",
         "positive_ctxs": [{"passage_id": "d0"}]},
    ]
    return write_pool(tmp_path / "pool", rows, small_set)


def cfg_for(tiny_model_dir, pool, out, *extra):
    return compose(["recipe=tiny", f"model={tiny_model_dir}", f"train.boolean={pool}", f"train.original={pool}",
                    "train.batch_size=2", "train.hard_negatives=1", "train.max_length=32", "train.report_to=[]",
                    "train.max_steps=2", "train.save_every=1", "train.keep_last=5", f"out={out}", *extra])


@pytest.fixture
def run(tiny_model_dir, pool, tmp_path):
    return train(cfg_for(tiny_model_dir, pool, tmp_path / "run"))


def test_checkpoint_state_holds_no_pickle_and_the_run_folder_a_whole_model(run):
    state = run / "checkpoint-1" / checkpoint.STATE_DIR
    names = sorted(p.name for p in state.iterdir())
    assert names == sorted([checkpoint.RESUME_FILE, checkpoint.MODEL_STATE, checkpoint.OPTIMIZER_STATE,
                            checkpoint.rng_file(0)])
    resume = json.loads((state / checkpoint.RESUME_FILE).read_text())
    assert resume["format"] == checkpoint.STATE_FORMAT and resume["scheduler"]["last_epoch"] == 1
    assert not list(run.rglob("*.pkl")) and not (run / checkpoint.FINAL_TMP).exists()
    assert (run / "modules.json").is_file() and (run / "README.md").is_file()
    assert load_model(str(run)).encode(["a question"]).shape == (1, 32)


def _poison(state: Path, marker: Path, zipped: bool) -> list[str]:
    """Every file of `state/` that is not JSON becomes a pickle that creates `marker` when loaded,
    plus the pickles an Accelerate checkpoint would carry."""
    names = [p.name for p in state.iterdir() if p.suffix != ".json"]
    names += ["custom_checkpoint_0.pkl", "random_states_0.pkl", "optimizer.bin", "scheduler.bin"]
    for name in names:
        if zipped:  # the torch.save container, as a crafted optimizer.pt would be
            torch.save(Evil(marker), state / name)
        else:
            (state / name).write_bytes(pickle.dumps(Evil(marker)))
    return names


@pytest.mark.parametrize("zipped", [False, True])
def test_resume_from_a_crafted_checkpoint_runs_no_code(run, tiny_model_dir, pool, tmp_path, zipped):
    crafted = tmp_path / "crafted"
    shutil.copytree(run / "checkpoint-1", crafted)
    marker = tmp_path / "ran.txt"
    _poison(crafted / checkpoint.STATE_DIR, marker, zipped)
    probe = tmp_path / "probe.txt"  # the crafted files really run code when unpickled
    pickle.loads(pickle.dumps(Evil(probe)))
    assert probe.exists()

    with pytest.raises(ConfigError, match=r"cannot be resumed from .*never as a pickle") as err:
        train(cfg_for(tiny_model_dir, pool, tmp_path / "again", f"train.resume={crafted}"))
    assert "model.safetensors" in str(err.value)  # the first file read, named
    assert not marker.exists()
    # with real weights back, the optimiser file is the one refused, still without running it
    shutil.copy(run / "checkpoint-1" / checkpoint.STATE_DIR / checkpoint.MODEL_STATE,
                crafted / checkpoint.STATE_DIR / checkpoint.MODEL_STATE)
    with pytest.raises(ConfigError, match=r"optimizer\.pt: cannot be resumed from"):
        train(cfg_for(tiny_model_dir, pool, tmp_path / "again2", f"train.resume={crafted}"))
    assert not marker.exists()


def test_an_older_pickled_checkpoint_is_refused_unread(run, tiny_model_dir, pool, tmp_path):
    old = tmp_path / "old"
    shutil.copytree(run / "checkpoint-1", old)
    state = old / checkpoint.STATE_DIR
    for p in state.iterdir():
        p.unlink()
    marker = tmp_path / "ran.txt"
    for name in ["custom_checkpoint_0.pkl", "random_states_0.pkl", "optimizer.bin"]:
        (state / name).write_bytes(pickle.dumps(Evil(marker)))
    with pytest.raises(ConfigError, match=r"older boolcl .*custom_checkpoint_0\.pkl.*cannot be resumed safely"):
        train(cfg_for(tiny_model_dir, pool, tmp_path / "again", f"train.resume={old}"))
    assert not marker.exists()


def test_a_tampered_json_state_names_its_file(run, tiny_model_dir, pool, tmp_path):
    bad = tmp_path / "bad"
    shutil.copytree(run / "checkpoint-1", bad)
    (bad / checkpoint.STATE_DIR / checkpoint.rng_file(0)).write_text('{"python": "nope"}')
    with pytest.raises(ConfigError, match=r"rng-0\.json: cannot be resumed from"):
        train(cfg_for(tiny_model_dir, pool, tmp_path / "again", f"train.resume={bad}"))


class Stop(Exception):
    pass


def _stop_after(k: int):
    calls = []

    def move(src, dst):
        if len(calls) == k:
            raise Stop(f"killed after {k} entries")
        calls.append(src)
        Path(src).replace(dst)
    return move


@pytest.mark.parametrize("earlier", [False, True])
def test_a_final_save_stopped_after_any_file_is_never_a_model(tiny_model_dir, tmp_path, earlier):
    """Moved entry by entry into a run folder (fresh, or holding an earlier model): at every point
    the folder has no modules.json, or it is the whole new model."""
    from sentence_transformers import SentenceTransformer

    new = SentenceTransformer(str(tiny_model_dir))
    with torch.no_grad():
        new[0].auto_model.embeddings.word_embeddings.weight.add_(1.0)  # tell new from old apart
    source = tmp_path / "source"
    new.save(str(source))
    expected = new.encode(["a question"])
    entries = len(list(source.iterdir()))
    assert entries >= 5
    for k in range(entries + 1):
        dest = tmp_path / f"run{k}"
        if earlier:
            shutil.copytree(tiny_model_dir, dest)
        else:
            dest.mkdir()
        (dest / "config.yaml").write_text("name: x\n")
        staged = tmp_path / f"staged{k}"
        shutil.copytree(source, staged)
        try:
            checkpoint.publish(staged, dest, move=_stop_after(k))
            finished = True
        except Stop:
            finished = False
        assert finished == (k == entries)
        if (dest / "modules.json").exists():
            assert finished, f"modules.json in place after {k} of {entries} entries"
            assert (load_model(str(dest)).encode(["a question"]) == expected).all()
        assert (dest / "config.yaml").is_file()  # the run's own files are left alone


def test_disk_full_during_a_checkpoint_keeps_the_last_good_one(tiny_model_dir, pool, tmp_path, monkeypatch):
    real_save, calls = torch.save, []

    def full_on_second(obj, f, *args, **kwargs):  # the disk fills while checkpoint-2's optimiser is written
        calls.append(f)
        if len(calls) == 2:
            raise OSError(errno.ENOSPC, "No space left on device", str(f))
        return real_save(obj, f, *args, **kwargs)

    monkeypatch.setattr(torch, "save", full_on_second)
    out = tmp_path / "run"
    with pytest.raises(TrainingError, match=r"disk full while writing checkpoint-2 .*last complete checkpoint is "
                                            r".*checkpoint-1 "):
        train(cfg_for(tiny_model_dir, pool, out, "train.max_steps=3"))
    assert [p.name for p in checkpoint.checkpoints(out)] == ["checkpoint-1"]
    assert not list(out.glob(".tmp-*")) and not (out / "modules.json").exists()
    monkeypatch.setattr(torch, "save", real_save)
    done = train(cfg_for(tiny_model_dir, pool, out, "train.max_steps=3", "train.resume=true"))
    assert (done / "modules.json").is_file()


def test_check_writable_refuses_a_path_under_a_file_and_a_disk_without_room(tmp_path):
    blocker = tmp_path / "file.txt"
    blocker.write_text("x")
    with pytest.raises(ConfigError, match=r"file\.txt/sub cannot be created: .*file\.txt exists and is not a folder"):
        check_writable(blocker / "sub", what="output folder")
    free = shutil.disk_usage(tmp_path).free
    with pytest.raises(ConfigError, match=r"run folder .*new has .* free on its disk but needs about .*"
                                          rf"\({free * 4} bytes\)"):
        check_writable(tmp_path / "new", need_bytes=free * 4, what="run folder")
    check_writable(tmp_path / "new" / "deeper", need_bytes=1)  # fine, and nothing is left behind
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file.txt"]


def test_training_into_an_unwritable_folder_fails_before_compute(tiny_model_dir, pool, tmp_path):
    (tmp_path / "file.txt").write_text("x")
    with pytest.raises(ConfigError, match=r"run folder \(out=\) .*file\.txt/run cannot be created"):
        train(cfg_for(tiny_model_dir, pool, tmp_path / "file.txt" / "run"))


def test_the_checkpoint_estimate_covers_a_real_checkpoint(run, tiny_model_dir, pool, tmp_path):
    model, _teacher = build_model(cfg_for(tiny_model_dir, pool, tmp_path / "x"))
    estimate = checkpoint.checkpoint_bytes(model)
    actual = sum(p.stat().st_size for p in (run / "checkpoint-1").rglob("*") if p.is_file())
    weights = sum(p.stat().st_size for p in (run / "checkpoint-1").rglob("*.safetensors"))
    weights += (run / "checkpoint-1" / checkpoint.STATE_DIR / checkpoint.OPTIMIZER_STATE).stat().st_size
    assert actual <= estimate
    assert estimate - checkpoint.CARD_SLACK <= weights * 1.05  # the weights part is not padded


def test_evaluate_and_generate_check_their_output_folder_first(tmp_path):
    from boolcl.evaluate.command import run_evaluate
    from boolcl.generate.pipeline import run_generate

    (tmp_path / "file.txt").write_text("x")
    # data that does not exist: the folder check must come before reading it, let alone encoding
    cfg = compose([f"data={tmp_path / 'missing'}", "model=offline-default", f"out={tmp_path / 'file.txt' / 'e'}"])
    with pytest.raises(ConfigError, match=r"file\.txt/e cannot be created"):
        run_evaluate("offline-default", cfg)
    cfg = compose(["llm.backend=offline", f"generate.corpus={tmp_path / 'missing.jsonl'}",
                   f"out={tmp_path / 'file.txt' / 'g'}"])
    with pytest.raises(ConfigError, match=r"file\.txt/g cannot be created"):
        run_generate(cfg, show_progress=False)


def test_two_processes_resume_to_the_same_weights(tiny_model_dir, pool, tmp_path):
    """Each rank restores its own RNG file, rank 0 the weights and optimiser: a 2-process run
    resumed from checkpoint-1 ends where the uninterrupted one does."""
    def launch(*args):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        cmd = [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2",
               "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no",
               "--main_process_port", str(port), str(ROOT / "train.py"), "recipe=tiny", f"model={tiny_model_dir}",
               f"train.boolean={pool}", f"train.original={pool}", "train.batch_size=2", "train.hard_negatives=1",
               "train.max_length=32", "train.max_steps=2", "train.save_every=1", "train.report_to=[]", *args]
        res = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False,
                             env={**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"})
        assert res.returncode == 0, res.stderr[-3000:]

    launch(f"out={tmp_path / 'full'}")
    state = tmp_path / "full" / "checkpoint-1" / checkpoint.STATE_DIR
    assert (state / checkpoint.rng_file(0)).is_file() and (state / checkpoint.rng_file(1)).is_file()
    resumed = tmp_path / "resumed"
    resumed.mkdir()
    shutil.copytree(tmp_path / "full" / "checkpoint-1", resumed / "checkpoint-1")
    launch(f"out={resumed}", "train.resume=true")
    a, b = load_file(str(tmp_path / "full" / "model.safetensors")), load_file(str(resumed / "model.safetensors"))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
