"""train.negation.soup: the recipe trained with the minimal pairs and without, mixed weight by weight."""
import errno
import json
import re

import pytest
import torch
from conftest import ROOT, dump_jsonl, plus_cfg
from omegaconf import OmegaConf
from safetensors.torch import load_file

from boolcl.errors import ConfigError, TrainingError
from boolcl.train.run import train

HEAD = "1_ScopePooling/model.safetensors"


@pytest.fixture
def pairs_file(tmp_path):
    return dump_jsonl(tmp_path / "pairs.jsonl", [
        {"id": f"p{i}", "q1": f"Which bridge did open in {1900 + i}?", "doc1": f"The bridge opened in {1900 + i}.",
         "q2": f"Which bridge did not open in {1900 + i}?", "doc2": f"The bridge did not open in {1900 + i}."}
        for i in range(3)])


def soup_cfg(model_dir, pool, out, pairs, *extra, start="train.negation.soup.start=['layers:1=0.5']"):
    return plus_cfg(model_dir, pool, out, "train.max_steps=2", "train.negation.pairs=2",
                    f"train.negation.source={pairs}", "train.negation.soup.weight=0.6", *([start] if start else []),
                    f"eval.cache_dir={out.parent / 'cache'}", *extra)


def test_the_soup_is_both_runs_mixed_and_a_rerun_keeps_them(tiny_model_dir, not_pool, pairs_file, tmp_path):
    run = train(soup_cfg(tiny_model_dir, not_pool, tmp_path / "soup", pairs_file))
    plain, pairs = run / "branches" / "plain", run / "branches" / "pairs"

    # two ordinary runs: the recipe without the pairs, and with them plus pairs_run (retention on AND and OR)
    mixes = {b.name: json.loads((b / "data_manifest.json").read_text())["mix"] for b in (plain, pairs)}
    assert "negation" not in mixes["plain"] and mixes["pairs"]["negation"]["pairs"] == 2
    # the pairs are left out of the warm-up, so the second run reads the head the first one fitted
    assert [mixes[b]["scope_warmup"]["cache"]["read"] for b in ("plain", "pairs")] == [False, True]
    retained = {b.name: list(OmegaConf.load(b / "config.yaml").train.retention.operators) for b in (plain, pairs)}
    assert retained == {"plain": [], "pairs": ["and", "or"]}

    # every weight by hand, from the saved files: 0.6 pairs + 0.4 plain, then layer 1 half of it and half the start
    a, b, s = (load_file(f / "model.safetensors") for f in (pairs, plain, tiny_model_dir))
    got = load_file(run / "model.safetensors")
    assert set(got) == set(a)
    in_layer_1 = [k for k in a if re.search(r"\.layer\.1\.", k)]
    assert in_layer_1
    for key, x in a.items():
        want = 0.6 * x + 0.4 * b[key] if x.is_floating_point() else x
        if key in in_layer_1:
            want = 0.5 * want + 0.5 * s[key]
        assert torch.allclose(got[key], want, atol=1e-6), key
    moved = [k for k in a if a[k].is_floating_point() and not torch.equal(a[k], b[k])]
    assert moved and any(not torch.equal(got[k], a[k]) and not torch.equal(got[k], b[k]) for k in moved)
    ha, hb, hgot = (load_file(f / HEAD) for f in (pairs, plain, run))  # the start has no head: the mix's is kept
    assert all(torch.allclose(hgot[k], 0.6 * ha[k] + 0.4 * hb[k], atol=1e-6) for k in ha)

    record = json.loads((run / "soup.json").read_text())
    assert record["weight"] == 0.6 and record["start"] == ["layers:1=0.5"]
    assert record["branches"] == {"plain": str(plain), "pairs": str(pairs)}
    assert json.loads((run / "data_manifest.json").read_text())["soup"]["fingerprints"] == record["fingerprints"]
    assert "train.negation.soup.weight" in (run / "README.md").read_text()

    # run again into the same folder: both runs are kept (not trained again), the mix is the same to the bit
    stamps = {f: (f / "model.safetensors").stat().st_mtime_ns for f in (plain, pairs)}
    train(soup_cfg(tiny_model_dir, not_pool, tmp_path / "soup", pairs_file))
    assert {f: (f / "model.safetensors").stat().st_mtime_ns for f in (plain, pairs)} == stamps
    assert all(torch.equal(v, got[k]) for k, v in load_file(run / "model.safetensors").items())

    # a run killed in its second branch: the first is kept, the second trained again, the same soup
    (pairs / "modules.json").unlink()
    train(soup_cfg(tiny_model_dir, not_pool, tmp_path / "soup", pairs_file))
    assert (plain / "model.safetensors").stat().st_mtime_ns == stamps[plain]
    assert (pairs / "model.safetensors").stat().st_mtime_ns != stamps[pairs]
    assert all(torch.equal(v, got[k]) for k, v in load_file(run / "model.safetensors").items())

    # other settings into the same folder: refused, naming the branch, before anything is trained
    with pytest.raises(ConfigError, match=r"branches/plain holds a finished run with other settings"):
        train(soup_cfg(tiny_model_dir, not_pool, tmp_path / "soup", pairs_file, "train.lr=1e-3"))


@pytest.mark.parametrize("extra, message", [
    (["train.negation.soup.weight=1.5"], r"soup\.weight .* in \[0, 1\]"),
    (["train.keep_best=MRR@10/NOT"], r"train\.keep_best"),
    (["train.resume=somewhere/checkpoint-4"], r"train\.resume=true"),
])
def test_soup_settings_that_cannot_work_are_refused_at_compose(tiny_model_dir, not_pool, pairs_file, tmp_path,
                                                               extra, message):
    with pytest.raises(ConfigError, match=message):
        soup_cfg(tiny_model_dir, not_pool, tmp_path / "soup", pairs_file, *extra)


def test_no_pairs_is_one_run_and_the_loop_refuses_a_soup(tiny_model_dir, not_pool, pairs_file, tmp_path):
    """The recipe makes a soup; train.negation.pairs=0 alone makes it one plain run again (its
    spread and soup settings then do nothing), and the loop never trains a soup's config as one run."""
    from boolcl.train import loop

    run = train(soup_cfg(tiny_model_dir, not_pool, tmp_path / "one", pairs_file, "train.negation.pairs=0",
                         "train.negation.spread=true"))
    assert (run / "modules.json").is_file() and not (run / "branches").exists() and not (run / "soup.json").exists()
    assert "negation" not in json.loads((run / "data_manifest.json").read_text())["mix"]
    with pytest.raises(ValueError, match=r"loop\.train trains one run.*boolcl\.train\.run\.train"):
        loop.train(soup_cfg(tiny_model_dir, not_pool, tmp_path / "soup", pairs_file))
    assert not (tmp_path / "soup").exists()


def test_a_disk_that_fills_while_the_soup_is_saved_keeps_both_runs_and_the_last_soup(tiny_model_dir, not_pool,
                                                                                       pairs_file, tmp_path,
                                                                                       monkeypatch):
    import transformers.modeling_utils as modeling

    run = train(soup_cfg(tiny_model_dir, not_pool, tmp_path / "soup", pairs_file))
    first = load_file(run / "model.safetensors")
    real_save = modeling.safe_save_file

    def full(*args, **kwargs):  # the disk fills while the mix's encoder weights are written
        raise OSError(errno.ENOSPC, "No space left on device", str(args[1]))

    monkeypatch.setattr(modeling, "safe_save_file", full)
    with pytest.raises(TrainingError, match=r"disk full while saving the soup into .*soup \(No space left on device\); "
                                            r"both runs are kept in branches/, and the same command mixes them again$"):
        train(soup_cfg(tiny_model_dir, not_pool, tmp_path / "soup", pairs_file))
    assert not (run / ".final-tmp").exists()  # nothing half-written; the earlier soup still loads as it was
    assert all(torch.equal(v, first[k]) for k, v in load_file(run / "model.safetensors").items())
    assert (run / "modules.json").is_file()
    monkeypatch.setattr(modeling, "safe_save_file", real_save)
    train(soup_cfg(tiny_model_dir, not_pool, tmp_path / "soup", pairs_file))  # the branches are kept: mixed again
    assert all(torch.equal(v, first[k]) for k, v in load_file(run / "model.safetensors").items())


@pytest.mark.parametrize("extra, message", [
    (["train.negation.soup.pairs_run=['train.retention.nope=1']"], r"pairs_run: unknown config key 'train\.retention\.nope'"),
    (["train.negation.soup.pairs_run=['seed=2']"], r"pairs_run: 'seed=2' .* may not set"),
    (["train.negation.soup.start=['layers:7-5=1']"], r"soup\.start: layers:7-5: the range runs backwards"),
    (["train.negation.soup.start=['top=1']"], r"soup\.start: 'top'"),
    ([], r"soup\.start: layers:3-5: no weight .* \(its layers: 0-1\)"),  # the default is MiniLM's upper half
])
def test_soup_settings_are_checked_before_the_first_run(tiny_model_dir, not_pool, pairs_file, tmp_path, extra,
                                                        message):
    cfg = soup_cfg(tiny_model_dir, not_pool, tmp_path / "soup", pairs_file, *extra, start=None)
    with pytest.raises(ConfigError, match=message):
        train(cfg)
    assert not (tmp_path / "soup" / "branches").exists()


def test_train_py_makes_the_soup_on_two_processes(tiny_model_dir, pool, pairs_file, tmp_path):
    """Under accelerate launch both runs train on every process and rank 0 alone mixes."""
    from test_train import _launch

    out = tmp_path / "soup"
    res = _launch([str(ROOT / "train.py"), "recipe=tiny", f"model={tiny_model_dir}", f"train.boolean={pool}",
                   f"train.original={pool}", "train.batch_size=2", "train.max_steps=2", "train.max_length=32",
                   "train.report_to=[]", f"out={out}", "train.negation.pairs=2", f"train.negation.source={pairs_file}",
                   "train.negation.soup.weight=0.5", "train.negation.soup.start=['layers:1=0.5']"], cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    a, b, s = (load_file(f / "model.safetensors") for f in (out / "branches" / "pairs", out / "branches" / "plain",
                                                             tiny_model_dir))
    got = load_file(out / "model.safetensors")
    for key, x in a.items():
        want = 0.5 * x + 0.5 * b[key] if x.is_floating_point() else x
        if re.search(r"\.layer\.1\.", key):
            want = 0.5 * want + 0.5 * s[key]
        assert torch.allclose(got[key], want, atol=1e-6), key
    assert res.stdout.count("soup: 0.5 of the pairs' run") == 1  # one process mixed
