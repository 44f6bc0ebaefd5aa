"""out=: a folder that holds anything is used only when it is the command's own, or with overwrite=true;
a temporary folder is removed only when boolcl made it."""
from __future__ import annotations

import json
import re
import shutil

import pytest

from boolcl.cli import main
from boolcl.config import compose
from boolcl.errors import ConfigError
from boolcl.files import TEMP_MARK, check_output_folder, make_temp_folder, new_folder, remove_temp_folder

MISSING_MODEL = "/nonexistent/boolcl-model"  # loading it fails: an error about out= proves nothing was loaded


def users_folder(path):
    """A folder of the user's: their README.md and config.yaml."""
    path.mkdir(parents=True)
    (path / "README.md").write_text("my project\n")
    (path / "config.yaml").write_text("mine: true\n")
    return path


def untouched(path) -> bool:
    return sorted(p.name for p in path.iterdir()) == ["README.md", "config.yaml"] \
        and (path / "README.md").read_text() == "my project\n" and (path / "config.yaml").read_text() == "mine: true\n"


def refused(capsys, folder, *args) -> str:
    """Run the CLI, expect exit 2 and one line naming `folder` and the setting."""
    capsys.readouterr()  # what earlier commands printed
    code = main([str(a) for a in args])
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert str(folder) in err and "overwrite=true" in err and "ConfigError" in err, err
    return err


# ---------------------------------------------------------------- files.py


def test_a_folder_that_holds_anything_is_used_only_when_own_or_overwritten(tmp_path):
    check_output_folder(tmp_path / "new")  # absent
    (tmp_path / "empty").mkdir()
    check_output_folder(tmp_path / "empty")
    full = users_folder(tmp_path / "full")
    with pytest.raises(ConfigError, match=rf"{re.escape(str(full))} exists, is not empty .* set overwrite=true"):
        check_output_folder(full)
    with pytest.raises(ConfigError):
        check_output_folder(full, own=lambda d: json.loads((d / "README.md").read_text()))  # unreadable: not own
    check_output_folder(full, own=lambda d: (d / "README.md").is_file())
    check_output_folder(full, overwrite=True)
    assert untouched(full)


def test_a_partial_folder_of_the_users_is_refused_and_kept(tmp_path):
    out = tmp_path / "o"
    mine = tmp_path / "o.partial"
    mine.mkdir()
    (mine / "mine.txt").write_text("precious")
    with pytest.raises(ConfigError, match=rf"{re.escape(str(mine))} is in the way .* not made by boolcl"):
        with new_folder(out):
            pass
    assert (mine / "mine.txt").read_text() == "precious" and not out.exists()
    with pytest.raises(ConfigError):
        remove_temp_folder(mine)
    assert (mine / "mine.txt").read_text() == "precious"


def test_a_partial_folder_boolcl_left_is_removed_and_the_mark_comes_first(tmp_path):
    out = tmp_path / "model"
    with pytest.raises(RuntimeError, match="killed"):
        with new_folder(out) as partial:
            assert [p.name for p in partial.iterdir()] == [TEMP_MARK]  # before anything of the command's
            (partial / "weights").write_text("half")
            raise RuntimeError("killed")
    assert not out.exists() and not partial.exists()
    left = make_temp_folder(tmp_path / "model.partial")  # what a killed process leaves
    (left / "stale").write_text("x")
    with new_folder(out) as partial:
        assert sorted(p.name for p in partial.iterdir()) == [TEMP_MARK]
        (partial / "weights").write_text("whole")
    assert sorted(p.name for p in out.iterdir()) == ["weights"] and not partial.exists()


def test_a_model_folder_written_into_a_users_folder_keeps_what_it_does_not_replace(tmp_path):
    out = users_folder(tmp_path / "out")
    with pytest.raises(ConfigError, match="overwrite=true"):
        with new_folder(out):
            pass
    assert untouched(out) and not (tmp_path / "out.partial").exists()
    with new_folder(out, overwrite=True) as partial:
        (partial / "README.md").write_text("card\n")
        (partial / "weights").write_text("w")
    assert sorted(p.name for p in out.iterdir()) == ["README.md", "config.yaml", "weights"]
    assert (out / "README.md").read_text() == "card\n" and (out / "config.yaml").read_text() == "mine: true\n"


# ---------------------------------------------------------------- train


def train_args(model, pool, out, *extra):
    return [f"model={model}", "recipe=tiny", f"train.boolean={pool}", f"train.original={pool}", "train.batch_size=2",
            "train.hard_negatives=1", "train.max_length=32", "train.report_to=[]", "train.max_steps=1",
            "train.save_every=0", "train.eval_every=0", f"out={out}", *extra]


def test_train_refuses_a_users_folder_before_loading_the_model(tmp_path, pool, capsys):
    out = users_folder(tmp_path / "project")
    refused(capsys, out, "train", *train_args(MISSING_MODEL, pool, out))
    assert untouched(out)


def test_train_finishes_its_own_folder_refuses_another_runs_and_overwrites_when_told(tiny_model_dir, pool, tmp_path,
                                                                                      capsys):
    from boolcl.train.run import train

    out = tmp_path / "run"
    train(compose(train_args(tiny_model_dir, pool, out)))
    stamp = (out / "model.safetensors").stat().st_mtime_ns
    (out / "modules.json").unlink()  # as a run killed while saving leaves it
    train(compose(train_args(tiny_model_dir, pool, out)))  # the same command again: its own folder
    assert (out / "modules.json").is_file() and (out / "model.safetensors").stat().st_mtime_ns != stamp

    saved = (out / "config.yaml").read_text()
    refused(capsys, out, "train", *train_args(tiny_model_dir, pool, out, "seed=7"))  # another run's folder
    assert (out / "config.yaml").read_text() == saved

    mine = users_folder(tmp_path / "project")
    train(compose(train_args(tiny_model_dir, pool, mine, "overwrite=true")))
    assert (mine / "modules.json").is_file() and "mine: true" not in (mine / "config.yaml").read_text()


def test_train_resume_continues_a_run_folder_with_a_checkpoint(tiny_model_dir, pool, tmp_path):
    from boolcl.train import checkpoint
    from boolcl.train.run import train

    out = tmp_path / "run"
    train(compose(train_args(tiny_model_dir, pool, out, "train.max_steps=2", "train.save_every=1")))
    assert checkpoint.checkpoints(out)
    other = ["train.max_steps=3", "train.save_every=1"]  # resumed for longer: other settings, its own checkpoint
    with pytest.raises(ConfigError, match="overwrite=true"):
        train(compose(train_args(tiny_model_dir, pool, out, *other)))
    train(compose(train_args(tiny_model_dir, pool, out, *other, "train.resume=true")))
    assert json.loads((out / "checkpoint-2" / checkpoint.STATE_FILE).read_text())["step"] == 2


# ---------------------------------------------------------------- evaluate, generate, decompose


def test_evaluate_writes_its_own_folder_again_and_refuses_others(tiny_model_dir, small_set, tmp_path, capsys):
    args = [f"data={small_set}", "eval.cache=false"]
    out = users_folder(tmp_path / "project")
    refused(capsys, out, "evaluate", MISSING_MODEL, *args, f"out={out}")
    assert untouched(out)

    out = tmp_path / "eval"
    for _ in range(2):  # the same evaluation again: its own folder
        assert main(["evaluate", str(tiny_model_dir), *args, f"out={out}"]) == 0
    assert json.loads((out / "results.json").read_text())["data"]["spec"] == str(small_set)
    other = tmp_path / "other-model"
    shutil.copytree(tiny_model_dir, other)
    refused(capsys, out, "evaluate", other, *args, f"out={out}")  # another model's results
    assert json.loads((out / "results.json").read_text())["model"]["spec"] == str(tiny_model_dir)
    assert main(["evaluate", str(other), *args, f"out={out}", "overwrite=true"]) == 0
    assert json.loads((out / "results.json").read_text())["model"]["spec"] == str(other)


def gen_args(tmp_path, out, *extra):
    return ["recipe=tiny", f"out={out}", f"generate.cache_dir={tmp_path / 'cache'}", "generate.exclude=sample",
            "generate.num_examples=6", "generate.hard_negatives=0", *extra]


def test_generate_refuses_a_users_folder_and_a_set_of_other_settings(tmp_path, capsys):
    out = users_folder(tmp_path / "project")
    refused(capsys, out, "generate", *gen_args(tmp_path, out, "generate.corpus=/nonexistent/corpus.jsonl"))
    assert untouched(out)

    target = tmp_path / "sets" / "gen.jsonl"
    target.parent.mkdir()
    target.write_text("a file of the user's\n")
    refused(capsys, target, "generate", *gen_args(tmp_path, target))
    assert target.read_text() == "a file of the user's\n"
    target.unlink()

    assert main(["generate", *gen_args(tmp_path, target)]) == 0
    assert main(["generate", *gen_args(tmp_path, target)]) == 0  # the same command again
    first = target.read_text()
    refused(capsys, target, "generate", *gen_args(tmp_path, target, "seed=3"))
    assert target.read_text() == first
    assert main(["generate", *gen_args(tmp_path, target, "seed=3", "overwrite=true")]) == 0


def test_decompose_writes_its_own_folder_again_and_refuses_a_users(tiny_model_dir, small_set, tmp_path, capsys):
    args = [f"data={small_set}", "eval.cache=false"]
    out = users_folder(tmp_path / "project")
    refused(capsys, out, "decompose", f"model={MISSING_MODEL}", *args, f"out={out}")
    assert untouched(out)

    out = tmp_path / "dec"
    for _ in range(2):  # the same command again: its own folder
        assert main(["decompose", f"model={tiny_model_dir}", *args, f"out={out}"]) == 0
    other = tmp_path / "other-model"
    shutil.copytree(tiny_model_dir, other)
    refused(capsys, out, "decompose", f"model={other}", *args, f"out={out}")
    assert json.loads((out / "decomposition_report.json").read_text())["model"] == str(tiny_model_dir)
