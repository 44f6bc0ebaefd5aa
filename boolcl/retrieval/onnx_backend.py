"""`eval.backend=onnx`: the model's transformer run by ONNX Runtime on the CPU, the rest left in torch.

Only the transformer (token ids -> token embeddings) is exported; every module after it (mean
pooling, Normalize, a Dense layer) stays the torch module it was. The SentenceTransformer keeps its
tokenizer and modules; only the transformer's inner model is replaced by `OnnxEncoder`, which
`encode` calls as before.

sentence-transformers' own `backend="onnx"` goes through optimum-onnx, whose releases pin
transformers below 5 while sentence-transformers 6 needs 5 or newer; so the export here is
torch's own exporter and the run is onnxruntime's, with nothing else in between.

The export is written once per transformer under the cache root (`$BOOLCL_CACHE/onnx/<key>/`),
never into the model's folder, keyed by the transformer's weights and configuration, its input
names, the quantisation and the export recipe's version. A checksum beside it is checked before
every use; a file that does not match is exported again. Model folders are loaded as always
(`load_model`: no code from the folder); an ONNX file found in a model folder is never used.

Quantisation (`eval.onnx_quantize=int8`) is onnxruntime's dynamic int8, per channel: faster,
and approximate (docs/performance.md, "ONNX Runtime", has what it costs in metrics on the sample).
"""
from __future__ import annotations

import hashlib
import inspect
import json
import logging
import os
import shutil
import sys
import tempfile
import warnings
from pathlib import Path

import torch

from boolcl.errors import ModelError
from boolcl.files import cache_root, file_digest
from boolcl.retrieval.models import hash_weights, inner_model, load_eval_model, set_encoder

QUANTIZE = ("none", "int8")
EXPORT_VERSION = 1  # bump when the export recipe changes: older exports are then not read
INSTALL_HINT = "pip install 'boolcl[onnx]'"
_OPSET = 17


def require_onnxruntime():
    """onnxruntime, or a ModelError naming the extra that provides it.

    onnxruntime (1.2x on) keeps a device id and an event store under ~/.cache/Microsoft for its
    telemetry unless ORT_DISABLE_TELEMETRY is set when it is first imported: boolcl sets it (an
    explicit value of the user's is kept), so evaluating writes nothing outside boolcl's cache."""
    if "onnxruntime" not in sys.modules:
        os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")
    try:
        import onnxruntime
    except ImportError as err:
        raise ModelError(f"eval.backend=onnx needs onnxruntime and onnx, which are not installed "
                         f"({type(err).__name__}: {err}); install them with {INSTALL_HINT}, "
                         f"or use eval.backend=torch") from None
    return onnxruntime


def _sha(folder: Path) -> dict:
    return {path.name: file_digest(path, lambda: hashlib.blake2b(digest_size=16))
            for path in sorted(p for p in folder.iterdir() if p.is_file() and p.name != "meta.json")}


def _transformer(model):
    """The SentenceTransformer's first module and the torch model inside it."""
    first = model[0]
    inner = inner_model(first)
    if inner is None or not hasattr(inner, "config"):
        raise ModelError("eval.backend=onnx needs a model whose first module is a transformer "
                         f"(found {type(first).__name__})")
    modality = getattr(first, "modality_config", None)
    text = modality.get("text") if isinstance(modality, dict) else None
    if text is not None and (text.get("method"), text.get("method_output_name")) != ("forward", "last_hidden_state"):
        raise ModelError(f"eval.backend=onnx exports transformers whose text embeddings are forward()'s "
                         f"last_hidden_state; this one uses {text}")
    return first, inner


def _input_names(model, inner) -> list[str]:
    """The tokenizer's outputs the transformer takes (input_ids, attention_mask, token_type_ids if any)."""
    sample = model.tokenizer(["a b c", "d"], padding=True, truncation=True, return_tensors="pt")
    params = inspect.signature(inner.forward).parameters
    names = [k for k in sample if k in params]
    if "input_ids" not in names or "attention_mask" not in names:
        raise ModelError(f"eval.backend=onnx needs a transformer taking input_ids and attention_mask; "
                         f"the tokenizer gives {list(sample)}")
    return names


def export_key(inner, names: list[str], quantize: str) -> str:
    """Which export a transformer needs: its weights and configuration, inputs, quantisation, recipe."""
    h = hash_weights(inner.state_dict())
    config = {k: v for k, v in inner.config.to_dict().items() if k not in ("_name_or_path", "transformers_version")}
    h.update(json.dumps({"class": type(inner).__name__, "config": config, "inputs": names, "quantize": quantize,
                         "export": EXPORT_VERSION, "opset": _OPSET}, sort_keys=True, default=str).encode())
    return h.hexdigest()


class _Export(torch.nn.Module):
    """The transformer as a function of positional tensors, for the exporter."""

    def __init__(self, inner, names: list[str]):
        super().__init__()
        self.inner, self.names = inner, names

    def forward(self, *tensors):
        return self.inner(**dict(zip(self.names, tensors)), return_dict=True).last_hidden_state


def _export(inner, tokenizer, names: list[str], quantize: str, folder: Path) -> None:
    """Write model.onnx (fp32, or int8 when asked) into `folder`."""
    sample = tokenizer(["an export sample sentence", "a second"], padding=True, return_tensors="pt")
    args = tuple(sample[n] for n in names)
    axes = {n: {0: "batch", 1: "tokens"} for n in names + ["last_hidden_state"]}
    fp32 = folder / ("model.onnx" if quantize == "none" else "fp32.onnx")
    setter = getattr(inner, "set_attn_implementation", None)
    before = getattr(inner.config, "_attn_implementation", None)
    try:
        if setter is not None:  # plain attention exports to a graph onnxruntime runs (and quantises) fastest
            try:
                setter("eager")
            except (ValueError, NotImplementedError, AttributeError):
                pass
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")  # the tracer's notes on shapes it keeps dynamic
            export = _Export(inner, names).eval()
            kwargs = dict(input_names=names, output_names=["last_hidden_state"], dynamic_axes=axes,
                          opset_version=_OPSET, do_constant_folding=True)
            try:
                torch.onnx.export(export, args, str(fp32), dynamo=False, **kwargs)
            except TypeError:  # a torch without the switch: its only exporter
                torch.onnx.export(export, args, str(fp32), **kwargs)
    finally:
        if setter is not None and before is not None:
            try:
                setter(before)
            except (ValueError, NotImplementedError, AttributeError):
                pass
    if quantize == "int8":
        import onnx
        from onnxruntime.quantization import QuantType, quantize_dynamic

        root, quiet = logging.getLogger(), logging.NullHandler()
        previous = logging.root.manager.disable
        root.addHandler(quiet)  # the quantiser logs advice through the root logger; not the user's concern
        logging.disable(logging.WARNING)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                quantize_dynamic(str(fp32), str(folder / "model.onnx"), weight_type=QuantType.QInt8,
                                 per_channel=True, extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})
        finally:
            logging.disable(previous)
            root.removeHandler(quiet)
        fp32.unlink()


def exported(model, quantize: str = "none", *, root: Path | None = None) -> tuple[Path, list[str]]:
    """The cached ONNX export of `model`'s transformer (made if missing or damaged) and its input names."""
    require_onnxruntime()
    if quantize not in QUANTIZE:
        raise ModelError(f"eval.onnx_quantize={quantize!r} is not one of {', '.join(QUANTIZE)}")
    _, inner = _transformer(model)
    names = _input_names(model, inner)
    parent = Path(root) if root is not None else cache_root() / "onnx"
    folder = parent / export_key(inner, names, quantize)
    meta = folder / "meta.json"
    if meta.is_file():
        try:
            ok = json.loads(meta.read_text(encoding="utf-8"))["files"] == _sha(folder)
        except (OSError, ValueError, KeyError, TypeError):
            ok = False
        if ok:
            return folder, names
        warnings.warn(f"{folder}: the ONNX export does not match its checksum; exporting it again", stacklevel=2)
    if folder.exists():  # damaged, or left by an older boolcl: out of the way first, then removed
        trash = Path(tempfile.mkdtemp(dir=parent, prefix=f".{folder.name}.old."))
        try:
            os.replace(folder, trash / "x")
        except FileNotFoundError:  # another process moved it already
            pass
        shutil.rmtree(trash, ignore_errors=True)
    parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=parent, prefix=f".{folder.name}.tmp."))
    try:
        _export(inner, model.tokenizer, names, quantize, tmp)
        (tmp / "meta.json").write_text(json.dumps(
            {"files": _sha(tmp), "inputs": names, "quantize": quantize, "export": EXPORT_VERSION,
             "transformer": type(inner).__name__, "torch": torch.__version__}, indent=2), encoding="utf-8")
        try:
            os.replace(tmp, folder)  # a folder appears whole or not at all
        except OSError:  # another process finished the same export first: keep theirs
            if not (folder / "meta.json").is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return folder, names


class OnnxEncoder(torch.nn.Module):
    """Stands in for the transformer's inner model: same inputs, `last_hidden_state` out, run by onnxruntime.

    It has no parameters; `config` is the replaced model's, so the transformer module and the
    embedding identity read the same settings as before. CPU only, for inference."""

    def __init__(self, path: Path, names: list[str], config, *, threads: int | None = None):
        super().__init__()
        ort = require_onnxruntime()
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads or torch.get_num_threads()  # the cores torch would use
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        self.session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        self.names, self.config = names, config

    @property
    def device(self) -> torch.device:
        return torch.device("cpu")

    def forward(self, input_ids=None, attention_mask=None, **kwargs):
        given = {"input_ids": input_ids, "attention_mask": attention_mask, **kwargs}
        feeds = {n: given[n].detach().cpu().to(torch.int64).numpy() for n in self.names}
        (hidden,) = self.session.run(["last_hidden_state"], feeds)
        return {"last_hidden_state": torch.from_numpy(hidden)}


def use_onnx(model, quantize: str = "none", *, root: Path | None = None):
    """Run `model`'s transformer with onnxruntime from now on (in place; returns the model).

    The model moves to the CPU; its modules after the transformer (pooling, Normalize, a Dense
    layer) keep running in torch. `fingerprint(model)` stays what it was (the same weights), and the
    embedding identity gains `backend`, so cached embeddings of the two backends never mix."""
    if getattr(model, "boolcl_backend", None):
        return model
    model.to("cpu")
    folder, names = exported(model, quantize, root=root)
    _, inner = _transformer(model)
    model.boolcl_weights_hash = hash_weights(model.state_dict())  # fingerprint() reads it: the weights left the model
    set_encoder(model, OnnxEncoder(folder / "model.onnx", names, inner.config))
    model.boolcl_backend = {"name": "onnx", "quantize": quantize}
    model.eval()
    return model


def load_encoder(model_spec: str, cfg) -> tuple:
    """`load_eval_model` with `eval.backend` applied: for callers that only encode (never train).

    Under eval.backend=onnx a missing extra is named before any weights load, and the model's
    description for results.json gains `backend`."""
    from omegaconf import OmegaConf

    onnx = str(OmegaConf.select(cfg, "eval.backend", default="torch")) == "onnx"
    if onnx:
        require_onnxruntime()
    model, info = load_eval_model(model_spec, cfg)
    if onnx:
        use_onnx(model, str(OmegaConf.select(cfg, "eval.onnx_quantize", default="none")))
        info["backend"] = dict(model.boolcl_backend)
    return model, info
