"""The scope head as its warm-up left it, kept in the embedding cache (train.scope.warmup_cache).

The warm-up (scope.py) is a function of the starting encoder, the head's first weights, its
rows and its generator, and of nothing else: the recipe's second run (train.negation.soup
leaves the minimal pairs out of the warm-up), a rerun of the same seed, or a benchmark's second
launch fits the same head to the bit. So the fitted head is stored under a key made of all of
those, and a run that finds it loads it instead of fitting it again: about 4.5 s of every such
run's set-up on 2 CPU cores. The entry is one file, written as the embedding cache writes its
shards (retrieval/cache.py: `pack`): the head's weights, with the key they were fitted under, the
warm-up's report and their checksum in its metadata. A file that fails its checksum, was written
under another key (another fit's head copied in) or does not fit the head is fitted again, with
a warning, and overwritten, as a damaged shard of the embedding cache is encoded again.

    <cache>/<key>/head.safetensors   the head's weights after the warm-up, key, report, checksum (no code runs on load)
    <cache>/<key>/warmup.json        the report again, to read; written after the head and never read back
"""
from __future__ import annotations

import json
import warnings
from collections.abc import Callable
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load, save

from boolcl.files import atomic_write_bytes, atomic_write_text
from boolcl.retrieval.cache import cache_key, pack, unpack
from boolcl.retrieval.identity import embedding_identity, encoder_state
from boolcl.train.scope import FIT_VERSION, WarmUpRows

HEAD, REPORT = "head.safetensors", "warmup.json"


def warmup_key(model, drawn: WarmUpRows, settings: dict) -> str:
    """Everything the fitted head depends on: the model as it is before the warm-up (the encoder's
    weights and the head's first ones, each module's settings, the precision), the rows and the
    generator (`WarmUpRows.digest`), the fit's settings and code (scope.FIT_VERSION), the device and
    the torch version."""
    identity = embedding_identity(model, prompt=None, state=encoder_state(model, with_tokenizer=False))
    settings = {"kind": "scope-warmup", "fit": FIT_VERSION, "torch": torch.__version__, **settings}
    return cache_key(identity, drawn.digest(), settings)


def _read(folder: Path, key: str, head: torch.nn.Module) -> tuple[dict | None, str | None]:
    """The stored report after loading the stored weights into `head`, or None and why the entry
    cannot be used (None, None: there is no entry)."""
    try:
        data = (folder / HEAD).read_bytes()
    except FileNotFoundError:
        return None, None
    except OSError as err:
        return None, f"cannot be read ({err})"
    header, why = unpack(data, key)
    if header is None:
        return None, why
    try:
        weights, report = load(data), json.loads(header["report"])
    except (SafetensorError, KeyError, ValueError) as err:
        return None, f"is not a readable head ({err})"
    own = head.state_dict()
    if set(weights) != set(own) or any(weights[k].shape != own[k].shape or weights[k].dtype != own[k].dtype
                                       for k in own):
        return None, "holds weights of another shape than this head's"
    head.load_state_dict(weights)
    return report, None


def _write(folder: Path, key: str, head: torch.nn.Module, report: dict) -> None:
    weights = {k: v.detach().cpu().contiguous() for k, v in head.state_dict().items()}
    atomic_write_bytes(folder / HEAD, pack(save, weights, {"key": key, "report": json.dumps(report)}))
    atomic_write_text(folder / REPORT, json.dumps({"key": key, **report}, indent=2) + "\n")


def fitted(head: torch.nn.Module, folder: Path, fit: Callable[[], dict], write: bool = True,
           key: str | None = None) -> dict:
    """The head fitted by `fit()` (its report returned), or read from `folder` if an earlier run
    fitted it there under `key` (by default the folder's name: the caller names it by `warmup_key`);
    `write`: store a new fit (rank 0 under accelerate launch, so processes do not write the same
    files at once). The report says which (`cache`)."""
    key = folder.name if key is None else key
    report, why = _read(folder, key, head)
    if report is not None:
        return report | {"cache": {"folder": str(folder), "read": True}}
    if why is not None:
        warnings.warn(f"scope warm-up cache: {folder / HEAD} {why}; fitting the head again", stacklevel=2)
    report = fit()
    if write:
        _write(folder, key, head, report)
    return report | {"cache": {"folder": str(folder), "read": False}}
