"""What makes one embedding differ from another: the identity that keys the embedding cache.

Two encoders with the same weights still give different vectors when their tokenizer
differs (vocabulary, lowercasing, added tokens), when a module is set differently (mean
versus CLS pooling, a Normalize added or removed, a Dense layer's activation), or when the
prompt, the max length, the similarity, the precision of the encoding or the backend that runs
the transformer (torch or ONNX Runtime, fp32 or int8) differ. The cache
key and results.json both take their model part from `embedding_identity`, so a cache entry
is only ever read by an encoder that would have written the same vectors, and two runs
that read different vectors never show the same identity.
"""
from __future__ import annotations

import hashlib
import json

from boolcl.retrieval.encode import autocast_dtype
from boolcl.retrieval.models import fingerprint, inner_model

# Per-call settings and paths: encode() sets truncation and padding on every call, and a
# copy of a model in another folder embeds exactly like the original.
_TOKENIZER_PER_CALL = ("truncation", "padding")
_HF_CONFIG_PATHS = ("_name_or_path", "transformers_version")
_MODULE_ATTRS = ("max_seq_length", "do_lower_case")


def _digest(obj) -> str:
    payload = json.dumps(obj, sort_keys=True, default=str, ensure_ascii=False)
    return hashlib.blake2b(payload.encode(), digest_size=16).hexdigest()


def tokenizer_state(tokenizer) -> dict:
    """The tokenizer as it tokenizes: its full rules (normaliser, vocabulary, added and special
    tokens, post-processor) plus the settings kept outside them (padding and truncation side)."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        rules = json.loads(backend.to_str())
        for key in _TOKENIZER_PER_CALL:
            rules.pop(key, None)
    else:  # a slow (pure Python) tokenizer: its vocabulary and its own flags
        rules = {"vocab": sorted(tokenizer.get_vocab().items()),
                 "do_lower_case": getattr(tokenizer, "do_lower_case", None)}
    return {"class": type(tokenizer).__name__, "rules": _digest(rules),
            "special": {k: str(v) for k, v in tokenizer.special_tokens_map.items()},
            "added": sorted(tokenizer.get_added_vocab().items()),
            "padding_side": getattr(tokenizer, "padding_side", None),
            "truncation_side": getattr(tokenizer, "truncation_side", None)}


def _module_state(name: str, module) -> dict:
    cls = type(module)
    state: dict = {"name": name, "type": f"{cls.__module__}.{cls.__qualname__}"}
    if hasattr(module, "get_config_dict"):
        state["config"] = module.get_config_dict()
    else:
        state["config"] = {k: getattr(module, k, None) for k in getattr(module, "config_keys", [])}
    for attr in _MODULE_ATTRS:
        if hasattr(module, attr):
            state[attr] = getattr(module, attr)
    hf_config = getattr(inner_model(module), "config", None)  # the Transformer's torch model
    if hf_config is not None and hasattr(hf_config, "to_dict"):  # activation, eps, position embeddings...
        state["hf_config"] = {k: v for k, v in hf_config.to_dict().items() if k not in _HF_CONFIG_PATHS}
    return state


def precision_of(model) -> str:
    """The precision `encode` runs `model` in: its autocast dtype, or 'none' (full precision);
    under eval.backend=onnx, the export's quantisation ('int8') or 'none'."""
    backend = getattr(model, "boolcl_backend", None)
    if backend:
        return str(backend.get("quantize", "none"))
    dtype = autocast_dtype(model.device)
    return "none" if dtype is None else str(dtype).removeprefix("torch.")


def encoder_state(model, *, model_fp: str | None = None, precision: str | None = None,
                  with_tokenizer: bool = True) -> dict:
    """Everything about `model` that changes a vector except the prompt (see `embedding_identity`).
    `with_tokenizer=False` leaves the tokenizer out, for a cache keyed by token ids already
    (train/start_table.py), where describing it would only cost time."""
    tokenizer = getattr(model, "tokenizer", None) if with_tokenizer else None
    state = {"weights": model_fp or fingerprint(model),
            "tokenizer": None if tokenizer is None else tokenizer_state(tokenizer),
            "modules": [_module_state(name, m) for name, m in model._modules.items()],
            "max_seq_length": model.max_seq_length,
            "similarity": model.similarity_fn_name or "cosine",
            "precision": precision if precision is not None else precision_of(model)}
    backend = getattr(model, "boolcl_backend", None)
    if backend:  # eval.backend=onnx (torch, the default, adds nothing: its keys stay what they were)
        state["backend"] = dict(backend)
    return json.loads(json.dumps(state, sort_keys=True, default=str))  # plain JSON: meta.json records it


def embedding_identity(model, *, prompt: str | None, model_fp: str | None = None, precision: str | None = None,
                       state: dict | None = None) -> str:
    """A hash of everything that decides the vectors `model` gives for texts encoded with `prompt`.

    `state` (from `encoder_state`) saves recomputing the model's part for a second prompt."""
    if state is None:
        state = encoder_state(model, model_fp=model_fp, precision=precision)
    return _digest({**state, "prompt": prompt or ""})
