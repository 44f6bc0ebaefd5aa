"""train.scope.warmup_cache: the head the warm-up fitted, kept and read back to the bit."""
import json
import shutil
import warnings
from pathlib import Path

import pytest
import torch
from conftest import plus_cfg
from safetensors.torch import load, load_file, save

from boolcl.retrieval.cache import unpack
from boolcl.train.loop import train
from boolcl.train.scope_cache import HEAD, REPORT


def run(model_dir, pool, out, cache, *extra):
    """Two optimiser steps of not_plus_tiny on the tiny model, its warm-up (40 steps) included."""
    return train(plus_cfg(model_dir, pool, out, "train.max_steps=2", "train.scope.warmup=40",
                          f"eval.cache_dir={cache}", *extra))


def weights(folder):
    return {**load_file(folder / "model.safetensors"),
            **{f"head.{k}": v for k, v in load_file(folder / "1_ScopePooling" / "model.safetensors").items()}}


def warmup_record(folder):
    return json.loads((folder / "data_manifest.json").read_text())["mix"]["scope_warmup"]


def test_a_head_read_back_trains_to_the_weights_of_one_fitted_and_of_no_cache(tiny_model_dir, not_pool, tmp_path,
                                                                              capsys):
    fitted = run(tiny_model_dir, not_pool, tmp_path / "fitted", tmp_path / "cache")
    read = run(tiny_model_dir, not_pool, tmp_path / "read", tmp_path / "cache")
    plain = run(tiny_model_dir, not_pool, tmp_path / "plain", tmp_path / "other", "train.scope.warmup_cache=false")

    assert capsys.readouterr().out.count("(read from the cache, ") == 1
    first, second = warmup_record(fitted), warmup_record(read)
    assert first["cache"]["read"] is False and second["cache"]["read"] is True
    assert first["cache"]["folder"] == second["cache"]["folder"]
    assert {k: v for k, v in first.items() if k != "cache"} == {k: v for k, v in second.items() if k != "cache"}
    assert "cache" not in warmup_record(plain) and not list((tmp_path / "other").glob(f"*/{REPORT}"))
    # the same weights to the bit, encoder and head, whether the head was fitted, read back or never cached
    # (the warm-up's last gradient must not reach the first step, or a head read from the cache would train otherwise)
    a, b, c = weights(fitted), weights(read), weights(plain)
    assert set(a) == set(b) == set(c)
    assert all(torch.equal(a[k], b[k]) and torch.equal(a[k], c[k]) for k in a)


def test_another_seed_or_setting_fits_its_own_head_and_never_reads_another(tiny_model_dir, not_pool, tmp_path,
                                                                         capsys):
    cache = tmp_path / "cache"
    cases = {"a": [], "seed": ["seed=2"], "lr": ["train.scope.lr=0.02"], "rows": ["train.scope.warmup_rows=8"]}
    runs = {name: run(tiny_model_dir, not_pool, tmp_path / name, cache, *extra) for name, extra in cases.items()}
    folders = {name: Path(warmup_record(out)["cache"]["folder"]) for name, out in runs.items()}
    assert len(set(folders.values())) == 4
    assert sorted(p.name for p in cache.iterdir() if (p / HEAD).is_file()) == sorted(f.name for f in folders.values())

    # another seed's entry copied over the first one's, another setting's over the rows' one: head and report
    for mine, theirs in (("a", "seed"), ("rows", "lr")):
        for name in (HEAD, REPORT):
            shutil.copyfile(folders[theirs] / name, folders[mine] / name)
    capsys.readouterr()
    for mine in ("a", "rows"):
        with pytest.warns(UserWarning, match=rf"scope warm-up cache: .*{HEAD} was written under key \w+, not "
                                             rf"{folders[mine].name} .*; fitting the head again"):
            again = run(tiny_model_dir, not_pool, tmp_path / f"{mine}-again", cache, *cases[mine])
        record, first = warmup_record(again), warmup_record(runs[mine])
        assert record["cache"]["read"] is False  # fitted: its own figures, not the copied entry's
        assert {k: v for k, v in record.items() if k != "cache"} == {k: v for k, v in first.items() if k != "cache"}
        a, b = weights(runs[mine]), weights(again)  # the weights of the run that fitted it with no entry there
        assert all(torch.equal(a[k], b[k]) for k in a)
        assert unpack((folders[mine] / HEAD).read_bytes(), folders[mine].name)[0] is not None  # written over
    assert "(read from the cache, " not in capsys.readouterr().out


def _older(f):
    """The head as an older boolcl stored it: its weights alone, no key or checksum inside."""
    f.write_bytes(save(load(f.read_bytes())))


@pytest.mark.parametrize("damage, why", [
    (lambda f: f.write_bytes(f.read_bytes()[:-7] + b"garbage"), "does not match its checksum"),
    (_older, "has no checksum or key"),
])
def test_a_damaged_entry_is_fitted_again_with_a_warning(tiny_model_dir, not_pool, tmp_path, damage, why):
    cache = tmp_path / "cache"
    first = run(tiny_model_dir, not_pool, tmp_path / "a", cache)
    entry = tmp_path / "cache" / warmup_record(first)["cache"]["folder"].rsplit("/", 1)[-1]
    damage(entry / HEAD)
    with pytest.warns(UserWarning, match=rf"scope warm-up cache: .*{HEAD} {why}.*; fitting the head again"):
        again = run(tiny_model_dir, not_pool, tmp_path / "b", cache)
    assert warmup_record(again)["cache"]["read"] is False
    a, b = weights(first), weights(again)
    assert all(torch.equal(a[k], b[k]) for k in a)
    with warnings.catch_warnings():  # rewritten whole: the next run reads it without a word
        warnings.simplefilter("error")
        third = run(tiny_model_dir, not_pool, tmp_path / "c", cache)
    assert warmup_record(third)["cache"]["read"] is True
