"""A model part of the way back to another of the same architecture: each weight w·A + (1 − w)·B.

Continued training on NOT questions and negated statements teaches the encoder what they need
and also moves it off the topics of text it was never shown (BIRCO's long arguments: see
"Two runs, one model" in docs/not_plus.md). Interpolating the trained weights with the
starting model's (WiSE-FT: Wortsman et al., "Robust fine-tuning of zero-shot models", 2022),
or with another run from the same start (a "model soup"), gives back much of what was lost for
a part of what was learned, and costs no training: one run can be scored at several weights.
`w` is the share of the first model (1: itself).

Weights are matched by name module by module: the encoder (module 0) must have every weight of
A in B with the same shape, or the two are not one architecture; a later module that only A
has (the scope head, when B is the start) stays as A has it, and one both have (two runs from
one start) is interpolated too. Integer buffers must agree; they are not averaged.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import torch

from boolcl.errors import ModelError
from boolcl.files import new_folder

RECORD = "interpolation.json"


def check_weight(weight: float) -> float:
    if not (isinstance(weight, (int, float)) and math.isfinite(weight) and 0.0 <= weight <= 1.0):
        raise ModelError(f"the interpolation weight is the first model's share, between 0 and 1; got {weight}")
    return float(weight)


def module_of(name: str) -> str:
    """'0.auto_model.embeddings.word_embeddings.weight' -> '0': the SentenceTransformer module a weight is in."""
    return name.split(".", 1)[0]


@torch.no_grad()
def interpolate_state(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor], weight: float,
                      names: tuple[str, str] = ("the model", "the other")) -> tuple[dict, dict]:
    """`a`'s tensors, each floating one w·a + (1 − w)·b where `b` has it; what was done, by module.

    Computed in float32 and cast back to `a`'s dtype, so a half-precision model gets no coarser
    mix than its own rounding."""
    weight = check_weight(weight)
    out, done = {}, {"interpolated": {}, "kept": {}}
    for key, x in a.items():
        y = b.get(key)
        module = module_of(key)
        if y is None:
            if module == "0":
                raise ModelError(f"{names[1]} has no encoder weight {key!r} that {names[0]} has: "
                                 "the two are not one architecture")
            out[key] = x
            done["kept"][module] = done["kept"].get(module, 0) + 1
            continue
        if x.shape != y.shape:
            raise ModelError(f"{key}: {tuple(x.shape)} in {names[0]}, {tuple(y.shape)} in {names[1]}: "
                             "the two are not one architecture")
        if not x.is_floating_point():
            if not torch.equal(x, y.to(x.device)):
                raise ModelError(f"{key}: an integer buffer that differs between {names[0]} and {names[1]}")
            out[key] = x
            continue
        mixed = weight * x.float() + (1.0 - weight) * y.to(x.device).float()
        out[key] = mixed.to(x.dtype)
        done["interpolated"][module] = done["interpolated"].get(module, 0) + 1
    if "0" not in done["interpolated"]:
        raise ModelError(f"{names[0]} has no encoder weights to interpolate")
    return out, done


def interpolate_model(model, other_state: dict[str, torch.Tensor], weight: float,
                      names: tuple[str, str] = ("the model", "the other")) -> dict:
    """Set `model`'s weights (a SentenceTransformer) to w·its own + (1 − w)·`other_state`, in place."""
    mixed, done = interpolate_state(model.state_dict(), other_state, weight, names)
    model.load_state_dict(mixed)
    return done


def start_spec(run: Path) -> str:
    """The model a boolcl run continued from (its config.yaml `model`)."""
    config = run / "config.yaml"
    if not config.is_file():
        raise ModelError(f"{run}: no config.yaml, so the model it started from is unknown; name the other model")
    from omegaconf import OmegaConf

    spec = OmegaConf.select(OmegaConf.load(config), "model")
    if not spec:
        raise ModelError(f"{config}: no `model` key, so the model it started from is unknown; name the other model")
    return str(spec)


def interpolate_folders(run: str, other: str | None, weight: float, out: Path) -> dict:
    """Write to `out` the model `run` moved `1 − weight` of the way to `other` (default: the model
    `run` was trained from), with `interpolation.json` saying what was mixed. `out` appears whole or
    not at all (written as `<out>.partial`, then renamed)."""
    from boolcl.retrieval.models import fingerprint, load_model

    weight = check_weight(weight)
    out = Path(out)
    if out.exists():  # before minutes of loading; new_folder checks again
        raise ModelError(f"{out} exists; choose another folder")
    other = other or start_spec(Path(run))
    model = load_model(run)
    start = load_model(other)
    record = {"model": run, "other": other, "weight": weight,
              "fingerprints": {"model": fingerprint(model), "other": fingerprint(start)}}
    record |= interpolate_model(model, start.state_dict(), weight, names=(run, other))
    record["fingerprints"]["result"] = fingerprint(model)
    with new_folder(out) as partial:
        model.save(str(partial), create_model_card=False)
        (partial / RECORD).write_text(json.dumps(record, indent=2) + "\n")
        (partial / "README.md").write_text(
            f"# {out.name}\n\n{weight:g} of `{run}` and {1 - weight:g} of `{other}`, weight by weight "
            f"(`boolcl interpolate`); {RECORD} lists what was mixed.\n")
    return record
