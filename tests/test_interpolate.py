"""boolcl interpolate: a model part of the way back to its start, weight by weight."""
import json
import re
import shutil

import pytest
import torch
from safetensors.torch import load_file

from boolcl.cli import main
from boolcl.errors import ConfigError, ModelError
from boolcl.files import TEMP_MARK
from boolcl.retrieval.interpolate import interpolate_folders, interpolate_state
from boolcl.retrieval.models import load_model

TEXTS = ["Which string instruments are there, other than the ones that are plucked?",
         "A cello is a bowed string instrument."]


HEAD_FILE = "2_Dense/model.safetensors"  # a head's weights: a Dense layer after the pooling


def moved(model_dir, tmp_path, name: str, seed: int, head: bool = False):
    """The tiny model with every weight moved at random (a 'trained' model), saved as `name`;
    with `head`, a Dense layer after the pooling (module 2, 32 -> 4), with weights of its own."""
    try:
        from sentence_transformers.sentence_transformer.modules import Dense
    except ImportError:  # sentence-transformers 5
        from sentence_transformers.models import Dense

    model = load_model(str(model_dir))
    if head:
        torch.manual_seed(0)  # the same layer in every model, then moved like the rest
        model.append(Dense(32, 4))
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=gen) * 0.1)
    model.save(str(tmp_path / name))
    return tmp_path / name


def run_cli(capsys, *args) -> tuple[int, str]:
    code = main(["interpolate", *map(str, args)])
    return code, capsys.readouterr().err


def test_each_weight_is_the_mix(tiny_model_dir, tmp_path, capsys):
    trained = moved(tiny_model_dir, tmp_path, "trained", seed=1)
    code, err = run_cli(capsys, trained, tiny_model_dir, "--weight", 0.25, "--out", tmp_path / "mix")
    assert code == 0, err

    a, b = load_file(trained / "model.safetensors"), load_file(tiny_model_dir / "model.safetensors")
    got = load_file(tmp_path / "mix" / "model.safetensors")
    assert set(got) == set(a)
    for key, x in a.items():  # by hand, from the files
        want = 0.25 * x + 0.75 * b[key] if x.is_floating_point() else x
        assert torch.allclose(got[key], want, atol=1e-6), key
    moved_keys = [k for k in a if a[k].is_floating_point() and not torch.equal(a[k], b[k])]
    assert moved_keys and not any(torch.allclose(got[k], a[k]) for k in moved_keys)

    record = json.loads((tmp_path / "mix" / "interpolation.json").read_text())
    assert record["weight"] == 0.25 and record["other"] == str(tiny_model_dir)
    assert record["interpolated"] == {"0": sum(1 for x in a.values() if x.is_floating_point())}
    assert record["modules"]["model"] == record["modules"]["other"]
    assert "0.25 of" in err


def test_weight_one_is_the_model_and_zero_the_other(tiny_model_dir, tmp_path, capsys):
    trained = moved(tiny_model_dir, tmp_path, "trained", seed=2)
    assert run_cli(capsys, trained, tiny_model_dir, "--weight", 1, "--out", tmp_path / "w1")[0] == 0
    assert run_cli(capsys, trained, tiny_model_dir, "--weight", 0, "--out", tmp_path / "w0")[0] == 0
    same = load_model(str(tmp_path / "w1")).encode(TEXTS, convert_to_tensor=True)
    assert torch.equal(same, load_model(str(trained)).encode(TEXTS, convert_to_tensor=True))
    back = load_model(str(tmp_path / "w0")).encode(TEXTS, convert_to_tensor=True)
    assert torch.equal(back, load_model(str(tiny_model_dir)).encode(TEXTS, convert_to_tensor=True))
    assert all(torch.equal(v, load_file(tiny_model_dir / "model.safetensors")[k])
               for k, v in load_file(tmp_path / "w0" / "model.safetensors").items())


def test_two_runs_with_heads_are_mixed_heads_and_all(tiny_model_dir, tmp_path, capsys):
    one = moved(tiny_model_dir, tmp_path, "one", seed=3, head=True)
    two = moved(tiny_model_dir, tmp_path, "two", seed=4, head=True)
    assert run_cli(capsys, one, two, "--weight", 0.5, "--out", tmp_path / "soup")[0] == 0
    x, y = load_file(one / HEAD_FILE), load_file(two / HEAD_FILE)
    got = load_file(tmp_path / "soup" / HEAD_FILE)
    assert got.keys() == x.keys() and not any(torch.equal(x[k], y[k]) for k in x)
    assert all(torch.allclose(got[k], 0.5 * (x[k] + y[k]), atol=1e-6) for k in x)
    record = json.loads((tmp_path / "soup" / "interpolation.json").read_text())
    assert record["interpolated"]["2"] == 2  # the Dense layer's weight and bias


def test_the_other_defaults_to_the_runs_start(tiny_model_dir, tmp_path, capsys):
    run = moved(tiny_model_dir, tmp_path, "run", seed=5)
    (run / "config.yaml").write_text(f"model: {tiny_model_dir}\nseed: 1\n")
    code, err = run_cli(capsys, run, "--weight", 0.5, "--out", tmp_path / "half")
    assert code == 0, err
    assert json.loads((tmp_path / "half" / "interpolation.json").read_text())["other"] == str(tiny_model_dir)


def test_bad_requests_fail_clearly_and_write_nothing(tiny_model_dir, tmp_path, capsys):
    run = moved(tiny_model_dir, tmp_path, "run", seed=6)
    code, err = run_cli(capsys, run, "--weight", 0.5, "--out", tmp_path / "x")
    assert code == 2 and "no config.yaml" in err and "name the other model" in err
    code, err = run_cli(capsys, run, tiny_model_dir, "--weight", 1.5, "--out", tmp_path / "x")
    assert code == 2 and "between 0 and 1" in err
    code, err = run_cli(capsys, run, tiny_model_dir, "--weight", "nan", "--out", tmp_path / "x")
    assert code == 2 and "between 0 and 1" in err
    code, err = run_cli(capsys, run, tiny_model_dir, "--weight", 0.5, "--out", run)
    assert code == 2 and "exists" in err
    assert not (tmp_path / "x").exists() and not (tmp_path / "x.partial").exists()


def test_different_architectures_are_refused_by_name():
    a = {"0.auto_model.w": torch.ones(2, 3), "0.auto_model.ids": torch.arange(3)}
    with pytest.raises(ModelError, match=r"0\.auto_model\.w: \(2, 3\) in the model, \(3, 2\) in the other"):
        interpolate_state(a, {"0.auto_model.w": torch.ones(3, 2), "0.auto_model.ids": torch.arange(3)}, 0.5)
    with pytest.raises(ModelError, match="no encoder weight '0.auto_model.w'"):
        interpolate_state(a, {"0.auto_model.ids": torch.arange(3)}, 0.5)
    with pytest.raises(ModelError, match="integer buffer that differs"):
        interpolate_state(a, {"0.auto_model.w": torch.ones(2, 3), "0.auto_model.ids": torch.arange(1, 4)}, 0.5)
    mixed, done = interpolate_state({**a, "0.auto_model.h": torch.zeros(1, dtype=torch.float16)},
                                    {**a, "0.auto_model.w": torch.zeros(2, 3),
                                     "0.auto_model.h": torch.ones(1, dtype=torch.float16)}, 0.75)
    assert torch.equal(mixed["0.auto_model.w"], torch.full((2, 3), 0.75))
    assert mixed["0.auto_model.h"].dtype == torch.float16 and float(mixed["0.auto_model.h"]) == 0.25
    assert done == {"interpolated": {"0": 2}}


def test_parts_take_shares_of_their_own(tiny_model_dir, tmp_path, capsys):
    one = moved(tiny_model_dir, tmp_path, "one", seed=7, head=True)
    two = moved(tiny_model_dir, tmp_path, "two", seed=8, head=True)
    code, err = run_cli(capsys, one, two, "--weight", 0.25, "--part", "layers:1=1", "--part", "embeddings=0",
                        "--part", "head=0.5", "--out", tmp_path / "parts")
    assert code == 0, err
    a, b = load_file(one / "model.safetensors"), load_file(two / "model.safetensors")
    got = load_file(tmp_path / "parts" / "model.safetensors")
    counts = {"layer 1": 0, "embeddings": 0, "rest": 0}
    for key, x in a.items():  # by hand: which share each weight should have, from its name alone
        if not x.is_floating_point():
            continue
        name = "." + key  # the file's names start at the encoder's own (embeddings., encoder.layer.N.)
        if ".encoder.layer.1." in name:
            share, counts["layer 1"] = 1.0, counts["layer 1"] + 1
        elif ".embeddings." in name:
            share, counts["embeddings"] = 0.0, counts["embeddings"] + 1
        else:
            share, counts["rest"] = 0.25, counts["rest"] + 1
        assert torch.allclose(got[key], share * x + (1 - share) * b[key], atol=1e-6), key
    assert all(counts.values())  # each kind of weight was there to check
    x, y, h = (load_file(m / HEAD_FILE) for m in (one, two, tmp_path / "parts"))
    assert all(torch.allclose(h[k], 0.5 * (x[k] + y[k]), atol=1e-6) for k in x)
    record = json.loads((tmp_path / "parts" / "interpolation.json").read_text())
    assert record["parts"] == {"layers:1": 1.0, "embeddings": 0.0, "head": 0.5}
    assert record["by_part"] == {"layers:1": counts["layer 1"], "embeddings": counts["embeddings"], "head": 2}
    assert "(layers:1)" in err and "(head)" in err


@pytest.mark.parametrize("parts, message", [
    (["layers:2=1"], r"layers:2: no weight of .* is in that part \(its layers: 0-1\)"),
    (["layers:0-1=1", "layers:1=0"], "layer 1 is in both layers:0-1 and layers:1"),
    (["layer:0=1"], "a part is embeddings, head, layers:A-B or layers:A"),
    (["head=x"], "expected PART=W"),
    (["head=1.5"], "between 0 and 1"),
    (["layers:1-0=1"], "runs backwards"),
    (["head=1", "head=0"], "head is given twice"),
])
def test_bad_parts_fail_clearly_and_write_nothing(tiny_model_dir, tmp_path, capsys, parts, message):
    one = moved(tiny_model_dir, tmp_path, "one", seed=9)
    code, err = run_cli(capsys, one, tiny_model_dir, "--weight", 0.5,
                        *[a for p in parts for a in ("--part", p)], "--out", tmp_path / "x")
    assert code == 2 and re.search(message, " ".join(err.split())), err
    assert not (tmp_path / "x").exists() and not (tmp_path / "x.partial").exists()


# ---------------------------------------------------------------- one architecture, whichever comes first


def fewer_layers(model_dir, tmp_path, name: str):
    """A copy of the model with its last transformer layer removed (a shallower model of the same kind)."""
    model = load_model(str(model_dir))
    encoder = model[0].auto_model
    encoder.encoder.layer = encoder.encoder.layer[:-1]
    encoder.config.num_hidden_layers -= 1
    model.save(str(tmp_path / name))
    return tmp_path / name


@pytest.mark.parametrize("shallow_first", [True, False])
def test_models_of_different_depth_are_refused_in_either_order(tiny_model_dir, tmp_path, shallow_first):
    shallow = fewer_layers(tiny_model_dir, tmp_path, "shallow")
    deep = moved(tiny_model_dir, tmp_path, "deep", seed=10)
    first, second = (shallow, deep) if shallow_first else (deep, shallow)
    with pytest.raises(ModelError, match=r"module 0 .*num_hidden_layers=.* not one architecture"):
        interpolate_folders(str(first), str(second), 0.5, tmp_path / "mix")
    assert not (tmp_path / "mix").exists() and not (tmp_path / "mix.partial").exists()


def test_weight_names_must_match_whichever_state_has_more():
    a = {"0.auto_model.layer.0.w": torch.ones(2), "0.auto_model.layer.1.w": torch.ones(2)}
    short = {"0.auto_model.layer.0.w": torch.ones(2)}
    with pytest.raises(ModelError, match=r"the other has no encoder weight '0.auto_model.layer.1.w' that the model has"):
        interpolate_state(a, short, 0.5)
    with pytest.raises(ModelError, match=r"the model has no encoder weight '0.auto_model.layer.1.w' that the other has"):
        interpolate_state(short, a, 0.5)
    head = {"1.head.weight": torch.ones(3), "1.head.bias": torch.ones(3)}
    with pytest.raises(ModelError, match=r"the other has no weight '1.head.bias' that the model has \(and 1 more\)"):
        interpolate_state({**short, **head}, short, 0.5)  # a head only the first has
    with pytest.raises(ModelError, match=r"the model has no weight '1.head.bias' that the other has \(and 1 more\)"):
        interpolate_state(short, {**short, **head}, 0.5)  # a head only the second has
    mixed, done = interpolate_state({**short, **head}, {**short, "1.head.weight": torch.zeros(3),
                                                        "1.head.bias": torch.zeros(3)}, 0.5)  # both: mixed
    assert torch.equal(mixed["1.head.weight"], torch.full((3,), 0.5)) and done["interpolated"] == {"0": 1, "1": 2}


@pytest.mark.parametrize("head_first", [True, False])
def test_a_module_only_one_model_has_is_refused_in_either_order(tiny_model_dir, tmp_path, head_first):
    with_head = moved(tiny_model_dir, tmp_path, "trained", seed=11, head=True)
    first, second = (with_head, tiny_model_dir) if head_first else (tiny_model_dir, with_head)
    this, that = ("Dense", "none") if head_first else ("none", "Dense")
    with pytest.raises(ModelError, match=rf"module 2: .*{this} in .*, .*{that} in .*: the two are not one architecture"):
        interpolate_folders(str(first), str(second), 0.5, tmp_path / "mix")
    assert not (tmp_path / "mix").exists() and not (tmp_path / "mix.partial").exists()


def test_modules_with_other_settings_are_refused(tiny_model_dir, tmp_path):
    config = json.loads((tiny_model_dir / "1_Pooling" / "config.json").read_text())
    shutil.copytree(tiny_model_dir, tmp_path / "cls")
    (tmp_path / "cls" / "1_Pooling" / "config.json").write_text(json.dumps(config | {"pooling_mode": "cls"}))
    with pytest.raises(ModelError, match=r"module 1 \(.*Pooling\): pooling_mode='mean' in .*, pooling_mode='cls' in"):
        interpolate_folders(str(tiny_model_dir), str(tmp_path / "cls"), 0.5, tmp_path / "mix")
    act = load_model(str(tiny_model_dir))
    act[0].auto_model.config.hidden_act = "relu"
    act.save(str(tmp_path / "relu"))
    with pytest.raises(ModelError, match=r"module 0 .*hidden_act='gelu' in .*, hidden_act='relu' in"):
        interpolate_folders(str(tiny_model_dir), str(tmp_path / "relu"), 0.5, tmp_path / "mix")


def test_a_missing_model_folder_is_named_as_missing(tiny_model_dir, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for spec, other in (("run3", None), (str(tmp_path / "run3"), None), (str(tmp_path / "run3"), str(tiny_model_dir)),
                        (str(tiny_model_dir), str(tmp_path / "run3"))):
        with pytest.raises(ModelError, match=r"run3: no such model folder") as err:
            interpolate_folders(spec, other, 0.5, tmp_path / "mix")
        assert "config.yaml" not in str(err.value)


# ---------------------------------------------------------------- the output folder


def test_a_users_partial_folder_is_refused_and_kept(tiny_model_dir, tmp_path):
    run = moved(tiny_model_dir, tmp_path, "run", seed=12)
    mine = tmp_path / "o.partial"
    mine.mkdir()
    (mine / "mine.txt").write_text("precious")
    with pytest.raises(ConfigError, match=r"o\.partial is in the way .* not made by boolcl"):
        interpolate_folders(str(run), str(tiny_model_dir), 0.5, tmp_path / "o")
    assert (mine / "mine.txt").read_text() == "precious" and not (tmp_path / "o").exists()


def test_a_non_empty_out_is_written_only_for_the_same_mix_or_with_overwrite(tiny_model_dir, tmp_path, capsys):
    run = moved(tiny_model_dir, tmp_path, "run", seed=13)
    out = tmp_path / "project"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    with pytest.raises(ConfigError, match=r"project exists, is not empty .* set overwrite=true"):
        interpolate_folders(str(run), str(tiny_model_dir), 0.5, out)
    assert [p.name for p in out.iterdir()] == ["notes.txt"] and not (tmp_path / "project.partial").exists()
    interpolate_folders(str(run), str(tiny_model_dir), 0.5, out, overwrite=True)
    assert (out / "notes.txt").read_text() == "mine" and (out / "interpolation.json").is_file()

    done = tmp_path / "mix"
    interpolate_folders(str(run), str(tiny_model_dir), 0.5, done)
    interpolate_folders(str(run), str(tiny_model_dir), 0.5, done)  # the same mix again: its own folder
    with pytest.raises(ConfigError, match=r"mix exists, is not empty .* overwrite=true"):
        interpolate_folders(str(run), str(tiny_model_dir), 0.25, done)  # another mix's folder
    assert json.loads((done / "interpolation.json").read_text())["weight"] == 0.5
    assert not any(p.name == TEMP_MARK for p in done.rglob("*"))
