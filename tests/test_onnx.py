"""eval.backend=onnx: a real export of the packaged MiniLM, run by onnxruntime, against the torch path.

The exports go where boolcl keeps them, under this pytest run's cache root (conftest sets
$BOOLCL_CACHE), so the MiniLM is exported once in fp32 and once in int8 for all the tests here.
"""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from boolcl.config.compose import compose
from boolcl.errors import ConfigError

HAVE_ORT = importlib.util.find_spec("onnxruntime") is not None and importlib.util.find_spec("onnx") is not None
needs_ort = pytest.mark.skipif(not HAVE_ORT, reason="onnxruntime/onnx not installed (pip install 'boolcl[onnx]'); "
                                                    "CI installs them (.ci/run)")
ROOT = Path(__file__).resolve().parents[1]
TEXTS = ["What can cause upper abdominal pain that has nothing to do with the liver?",
         "Hepatitis is an inflammation of the liver, often caused by a virus.",
         "Which big cats live in Africa, other than the lion?",
         "long " * 400]  # truncated at the model's max length: the export's shapes are not the trace's


@pytest.fixture(scope="module")
def onnx_root() -> Path:
    from boolcl.files import cache_root

    return cache_root() / "onnx"


def _minilm():
    from boolcl.retrieval.models import OFFLINE_DEFAULT, load_model

    return load_model(OFFLINE_DEFAULT, device="cpu")


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


@needs_ort
def test_packaged_minilm_exports_and_embeds_like_torch(onnx_root):
    from boolcl.retrieval.encode import encode
    from boolcl.retrieval.identity import embedding_identity
    from boolcl.retrieval.models import fingerprint, packaged_model_dir
    from boolcl.retrieval.onnx_backend import OnnxEncoder, exported, use_onnx

    torch_model, onnx_model = _minilm(), _minilm()
    before = sorted(p.name for p in packaged_model_dir().rglob("*"))
    folder, names = exported(torch_model, "none")
    assert folder.parent == onnx_root and names == ["input_ids", "token_type_ids", "attention_mask"]
    use_onnx(onnx_model, "none")
    assert isinstance(onnx_model[0].model, OnnxEncoder)
    assert sorted(p.name for p in packaged_model_dir().rglob("*")) == before  # nothing written into the model folder
    assert (folder / "model.onnx").is_file() and json.loads((folder / "meta.json").read_text())["quantize"] == "none"

    a = encode(torch_model, TEXTS, batch_size=2, show_progress=False)
    b = encode(onnx_model, TEXTS, batch_size=2, show_progress=False)
    assert np.abs(a - b).max() < 1e-5

    # same weights, same fingerprint; a different embedding identity (the cache key's model part)
    assert fingerprint(onnx_model) == fingerprint(torch_model)
    assert embedding_identity(onnx_model, prompt=None) != embedding_identity(torch_model, prompt=None)

    # the export is read back, not made again; a damaged one is noticed and made again
    stamp = (folder / "model.onnx").stat().st_mtime_ns
    again = use_onnx(_minilm(), "none")
    assert (folder / "model.onnx").stat().st_mtime_ns == stamp
    with (folder / "model.onnx").open("r+b") as fh:
        fh.seek(-64, os.SEEK_END)
        fh.write(b"\0" * 64)
    with pytest.warns(UserWarning, match="does not match its checksum"):
        use_onnx(_minilm(), "none")
    assert np.abs(encode(again, TEXTS[:2], show_progress=False) - a[:2]).max() < 1e-5


@needs_ort
def test_int8_is_close_and_keyed_apart_from_fp32_and_torch():
    from boolcl.retrieval.cache import cache_key
    from boolcl.retrieval.encode import encode
    from boolcl.retrieval.identity import embedding_identity, encoder_state
    from boolcl.retrieval.onnx_backend import use_onnx

    models = {"torch": _minilm(), "none": use_onnx(_minilm(), "none"),
              "int8": use_onnx(_minilm(), "int8")}
    assert encoder_state(models["int8"])["precision"] == "int8"
    assert encoder_state(models["none"])["backend"] == {"name": "onnx", "quantize": "none"}
    assert "backend" not in encoder_state(models["torch"])  # torch's keys are what they were before the option
    keys = {name: cache_key(embedding_identity(m, prompt=None), "corpus", {"shard_size": 10})
            for name, m in models.items()}
    assert len(set(keys.values())) == 3
    a = encode(models["torch"], TEXTS, show_progress=False)
    b = encode(models["int8"], TEXTS, show_progress=False)
    assert _cosines(a, b).min() > 0.9  # int8 is approximate: close, not equal
    assert np.abs(a - b).max() > 1e-4


@needs_ort
def test_modules_after_the_transformer_still_run_in_torch_over_the_onnx_transformer(tmp_path):
    import torch

    try:
        from sentence_transformers.sentence_transformer.modules import Dense
    except ImportError:  # sentence-transformers 5
        from sentence_transformers.models import Dense

    from boolcl.retrieval.encode import encode
    from boolcl.retrieval.models import load_model
    from boolcl.retrieval.onnx_backend import use_onnx

    base = _minilm()
    torch.manual_seed(0)
    base.append(Dense(384, 64))  # a head with weights of its own, after pooling and Normalize
    base.save(str(tmp_path / "dense"))
    torch_model = load_model(str(tmp_path / "dense"), device="cpu")
    onnx_model = use_onnx(load_model(str(tmp_path / "dense"), device="cpu"), "none")
    heads = [m for m in onnx_model.children() if isinstance(m, Dense)]
    assert len(heads) == 1
    calls = []
    heads[0].register_forward_hook(lambda module, args, out: calls.append(out["sentence_embedding"].shape))
    a = encode(torch_model, TEXTS, batch_size=4, show_progress=False)
    b = encode(onnx_model, TEXTS, batch_size=4, show_progress=False)
    assert calls and tuple(calls[0]) == (len(TEXTS), 64)  # the head ran, in torch, over the ONNX transformer's output
    assert a.shape == (len(TEXTS), 64) and np.abs(a - b).max() < 1e-4


@needs_ort
def test_sample_metrics_match_the_torch_path(tmp_path):
    from boolcl.data.loaders import load_retrieval_set
    from boolcl.scoring.runner import evaluate_spec, headline

    rset = load_retrieval_set("sample")
    results = {}
    for backend in ("torch", "onnx"):
        cfg = compose(["model=offline-default", "data=sample", f"eval.backend={backend}",
                       f"eval.cache_dir={tmp_path / 'emb'}", "eval.batch_size=128",
                       "eval.max_length=128"])  # both backends at one length: 128 is enough to compare
        result, info = evaluate_spec("offline-default", rset, cfg, show_progress=False)
        results[backend] = (headline(result), result.settings, info)
    (t, t_settings, t_info), (o, o_settings, o_info) = results["torch"], results["onnx"]
    for key in t:
        if key.split("@")[0] in ("MRR", "NegRecall"):
            assert abs(t[key] - o[key]) <= 0.1, key
    assert o_info["backend"] == {"name": "onnx", "quantize": "none"} and "backend" not in t_info
    assert o_info["fingerprint"] == t_info["fingerprint"]
    assert (o_settings["embedding_cache"]["identity"] != t_settings["embedding_cache"]["identity"])
    assert len([p for p in (tmp_path / "emb").iterdir() if p.is_dir()]) == 2  # one cache folder per backend


def test_backend_settings_are_checked():
    assert compose([]).eval.backend == "torch"
    with pytest.raises(ConfigError, match=r"eval.backend='tensorrt' is not one of: onnx, torch"):
        compose(["eval.backend=tensorrt"])
    with pytest.raises(ConfigError, match=r"eval.onnx_quantize='int4' is not one of: int8, none"):
        compose(["eval.onnx_quantize=int4"])


def test_missing_extra_names_the_install_command(tmp_path):
    """In a Python where onnxruntime cannot be imported (sitecustomize blocks it), both the config
    check and the loader say which extra to install."""
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "sitecustomize.py").write_text(
        "import sys\nsys.modules['onnxruntime'] = None  # import onnxruntime -> ImportError\n")
    child = textwrap.dedent("""
        import sys
        from omegaconf import OmegaConf
        from boolcl.cli import main
        from boolcl.errors import ModelError
        from boolcl.scoring.runner import evaluate_spec
        try:
            import onnxruntime
        except ImportError:
            print("BLOCKED")
        print("EXIT", main(["evaluate", "offline-default", "data=sample", "eval.backend=onnx", "out=%s"]))
        try:
            evaluate_spec("offline-default", None, OmegaConf.create({"eval": {"backend": "onnx"}}))
        except ModelError as err:
            print("LOADER", err)
    """ % (tmp_path / "out"))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path / "site"), str(ROOT)]))
    done = subprocess.run([sys.executable, "-c", child], env=env, capture_output=True, text=True, timeout=120)
    out = done.stdout + done.stderr
    assert "BLOCKED" in done.stdout, out
    assert "EXIT 2" in done.stdout, out
    assert "eval.backend=onnx needs onnxruntime" in done.stderr and "pip install 'boolcl[onnx]'" in done.stderr, out
    loader = [line for line in done.stdout.splitlines() if line.startswith("LOADER")]
    assert loader and "pip install 'boolcl[onnx]'" in loader[0], out
    assert not (tmp_path / "out").exists()


@needs_ort
def test_onnxruntime_writes_no_telemetry_store(tmp_path):
    """onnxruntime keeps a device id and an event store in ~/.cache/Microsoft unless told not to when
    first imported; through boolcl it writes nothing there."""
    child = textwrap.dedent("""
        import onnx
        from onnx import TensorProto, helper
        from boolcl.retrieval.onnx_backend import require_onnxruntime
        ort = require_onnxruntime()
        io = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1]) for n in ("x", "y")]
        graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g", io[:1], io[1:])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        model.ir_version = 8
        ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        print("SESSION")
    """)
    env = {k: v for k, v in os.environ.items() if k != "ORT_DISABLE_TELEMETRY"} | {"HOME": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", child], env=env, capture_output=True, text=True, timeout=120)
    assert "SESSION" in done.stdout, done.stdout + done.stderr
    assert not [p for p in tmp_path.rglob("*") if p.is_file()]
