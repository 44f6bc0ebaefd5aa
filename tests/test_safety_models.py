"""Model folders: no code they name runs unless the user opts in, and a half-saved folder is refused.

The crafted folders carry code whose import writes a marker file; every test that must not run
it checks the marker is absent, and one opts in to show the same folder does run it (so the
absence means something).
"""
import json
import os
import re
import shutil
import subprocess
import sys

import pytest
from conftest import ROOT

from boolcl.cli import main
from boolcl.errors import ModelError
from boolcl.retrieval.models import load_model

EVIL = """\
from pathlib import Path
Path({marker!r}).write_text("ran")
from transformers import BertModel, BertTokenizerFast


class EvilModel(BertModel):
    pass


class EvilTok(BertTokenizerFast):
    pass
"""


def _crafted(source, tmp_path):
    """A copy of `source` with auto_map entries (model, tokenizer) naming code in another folder."""
    code, folder, marker = tmp_path / "elsewhere", tmp_path / "model", tmp_path / "marker"
    code.mkdir()
    (code / "evil.py").write_text(EVIL.format(marker=str(marker)))
    shutil.copytree(source, folder)
    config = json.loads((folder / "config.json").read_text())
    config["auto_map"] = {"AutoModel": f"{code}--evil.EvilModel"}
    (folder / "config.json").write_text(json.dumps(config))
    tok = json.loads((folder / "tokenizer_config.json").read_text())
    tok["auto_map"] = {"AutoTokenizer": [None, f"{code}--evil.EvilTok"]}
    (folder / "tokenizer_config.json").write_text(json.dumps(tok))
    return folder, marker


@pytest.mark.parametrize("kind", ["plain", "dense"])
def test_auto_map_elsewhere_on_disk_is_never_imported(kind, tiny_model_dir, tmp_path):
    """A folder with a module after the pooling that loads weights of its own (Dense) is loaded
    the same way: load_model must not run the code its auto_map names, any more than for a plain one."""
    source = tiny_model_dir if kind == "plain" else _dense_folder(tiny_model_dir, tmp_path)
    folder, marker = _crafted(source, tmp_path)
    model = load_model(str(folder))
    assert not marker.exists()
    assert type(model[0].auto_model).__name__ == "BertModel"  # the plain architecture from config.json
    assert model.encode(["a question"]).shape == (1, 32 if kind == "plain" else 8)


def test_evaluate_a_crafted_folder_runs_none_of_its_code(tiny_model_dir, tmp_path, small_set):
    folder, marker = _crafted(tiny_model_dir, tmp_path)
    assert main(["evaluate", str(folder), f"data={small_set}", f"out={tmp_path / 'out'}", "eval.k=3"]) == 0
    assert not marker.exists()
    assert (tmp_path / "out" / "results.json").is_file()


def test_the_user_can_opt_in_and_then_the_code_runs(tiny_model_dir, tmp_path, small_set):
    """The same folder with model_trust_remote_code=true: the marker appears, so the tests above can fail."""
    folder, marker = _crafted(tiny_model_dir, tmp_path)
    env = {**os.environ, "HF_MODULES_CACHE": str(tmp_path / "hf-modules"), "OMP_NUM_THREADS": "1"}
    res = subprocess.run([sys.executable, "-m", "boolcl.cli", "evaluate", str(folder), f"data={small_set}",
                          f"out={tmp_path / 'out'}", "eval.k=3", "model_trust_remote_code=true"],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert marker.exists(), res.stderr[-3000:]
    assert res.returncode == 0, res.stderr[-3000:]  # and the trusted model is then evaluated


def test_a_foreign_module_type_is_refused_and_names_the_setting(tiny_model_dir, tmp_path):
    folder, marker = tmp_path / "model", tmp_path / "marker"
    shutil.copytree(tiny_model_dir, folder)
    (folder / "evil.py").write_text(EVIL.format(marker=str(marker)))
    modules = json.loads((folder / "modules.json").read_text())
    modules[1]["type"] = "evil.EvilModel"
    (folder / "modules.json").write_text(json.dumps(modules))
    with pytest.raises(ModelError, match=r"modules\.json: module 1 has type 'evil\.EvilModel'.*"
                                         r"model_trust_remote_code=true"):
        load_model(str(folder))
    assert not marker.exists()


@pytest.mark.parametrize("class_ref", ["boolcl.pooling.ScopePooling", "boolcl.evil.Module"])
def test_a_module_type_named_like_boolcls_is_refused_and_code_beside_it_stays_put(class_ref, tiny_model_dir,
                                                                                  tmp_path):
    """boolcl has no module types of its own: a folder that names a type under boolcl's name is
    refused like any type outside sentence-transformers, before anything is imported, also with a
    look-alike of the named module in the folder."""
    folder, marker = tmp_path / "model", tmp_path / "marker"
    shutil.copytree(tiny_model_dir, folder)
    module_path, _, _ = class_ref.rpartition(".")
    look_alike = folder / (module_path.replace(".", "/") + ".py")
    for place in (folder / "evil.py", folder / "1_Pooling" / "evil.py", look_alike):
        place.parent.mkdir(parents=True, exist_ok=True)
        place.write_text(EVIL.format(marker=str(marker)))
    modules = json.loads((folder / "modules.json").read_text())
    real, modules[1]["type"] = modules[1]["type"], class_ref
    (folder / "modules.json").write_text(json.dumps(modules))
    with pytest.raises(ModelError, match=rf"modules\.json: module 1 has type '{re.escape(class_ref)}', which is not "
                                         r"one of sentence-transformers' modules; .*model_trust_remote_code=true"):
        load_model(str(folder))
    assert not marker.exists()
    modules[1]["type"] = real  # the same folder naming sentence-transformers' own pooling loads
    (folder / "modules.json").write_text(json.dumps(modules))
    assert load_model(str(folder)).encode(["a question"]).shape == (1, 32)
    assert not marker.exists()


def _dense_folder(tiny_model_dir, tmp_path):
    """The tiny model with a Dense layer (32 -> 8, weights of its own) after its pooling."""
    try:
        from sentence_transformers.sentence_transformer.modules import Dense
    except ImportError:  # sentence-transformers 5
        from sentence_transformers.models import Dense

    model = load_model(str(tiny_model_dir))
    model.append(Dense(32, 8))
    model.save(str(tmp_path / "dense"))
    return tmp_path / "dense"


def _saved_files(folder):
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file() and p.name != "README.md")


@pytest.mark.parametrize("kind", ["plain", "dense"])
def test_a_folder_missing_any_saved_file_is_refused_by_name(kind, tiny_model_dir, tmp_path):
    """As if a save stopped before each file: every file the save writes (the model card aside) is needed,
    a Dense layer's weights and config too."""
    source = tiny_model_dir if kind == "plain" else _dense_folder(tiny_model_dir, tmp_path)
    load_model(str(source))  # the whole folder loads
    files = _saved_files(source)
    assert {"modules.json", "model.safetensors", "tokenizer.json"} <= set(files)
    for name in files:
        broken = tmp_path / f"without-{name.replace('/', '-')}"
        shutil.copytree(source, broken)
        (broken / name).unlink()
        with pytest.raises(ModelError, match=rf"incomplete model folder: missing .*{name.replace('.', '[.]')}"):
            load_model(str(broken))


def test_a_plain_transformers_folder_needs_weights_and_a_tokenizer(tmp_path, tiny_model_dir):
    """Without modules.json (a transformers save), the transformer's own files are still checked."""
    folder = tmp_path / "hf"
    folder.mkdir()
    for name in ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"):
        shutil.copy(tiny_model_dir / name, folder / name)
    assert load_model(str(folder)).encode(["x"]).shape == (1, 32)
    (folder / "tokenizer.json").unlink()
    with pytest.raises(ModelError, match=r"missing tokenizer\.json"):
        load_model(str(folder))


def test_a_model_that_only_loads_with_its_code_is_refused_and_names_the_setting(tiny_model_dir, tmp_path):
    """An architecture transformers does not know, with auto_map naming code: a clear refusal, nothing run."""
    folder, marker = _crafted(tiny_model_dir, tmp_path)
    config = json.loads((folder / "config.json").read_text())
    config["model_type"] = "evilbert"
    config["auto_map"]["AutoConfig"] = f"{tmp_path / 'elsewhere'}--evil.EvilConfig"
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(ModelError, match=r"needs code of its own to load .*model_trust_remote_code=true"):
        load_model(str(folder))
    assert not marker.exists()
