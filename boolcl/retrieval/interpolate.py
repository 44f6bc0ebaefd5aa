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

A part of the model may take a share of its own (`Shares`): the embeddings, a range of the
transformer's layers, or the head (every module after the encoder): what one kind of training
taught and what it cost need not sit in the same layers (docs/not_plus.md: "By layer" has what
that found on the NOT-aware recipe).
"""
from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
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


_PART = re.compile(r"^(embeddings|head|layers:(\d+)(?:-(\d+))?)$")
_LAYER = re.compile(r"\.layer\.(\d+)\.")  # BERT's encoder.layer.N. and DistilBERT's transformer.layer.N.


def part_of(name: str) -> tuple[str, int | None]:
    """What part of a SentenceTransformer a weight is in: ('head', None) after the encoder,
    ('embeddings', None), ('layers', N) for transformer layer N, ('other', None) for the rest
    (a pooler, a final norm)."""
    if module_of(name) != "0":
        return "head", None
    if ".embeddings." in name:
        return "embeddings", None
    m = _LAYER.search(name)
    return ("layers", int(m.group(1))) if m else ("other", None)


@dataclass(frozen=True)
class Shares:
    """The first model's share of each weight: `default`, or that of the part it is in
    (`parts`: 'embeddings', 'head', 'layers:A-B' or 'layers:A', each to a share)."""

    default: float
    parts: dict[str, float] = field(default_factory=dict)

    def __post_init__(self):
        check_weight(self.default)
        for part, w in self.parts.items():
            if not _PART.match(part):
                raise ModelError(f"{part!r}: a part is embeddings, head, layers:A-B or layers:A "
                                 "(layers counted from 0)")
            check_weight(w)
        seen: dict[int, str] = {}
        for part in self.parts:
            for n in self._layers(part):
                if n in seen:
                    raise ModelError(f"layer {n} is in both {seen[n]} and {part}: give each layer one share")
                seen[n] = part

    @staticmethod
    def _layers(part: str) -> range:
        m = _PART.match(part)
        if not m or not m.group(2):
            return range(0)
        lo, hi = int(m.group(2)), int(m.group(3) or m.group(2))
        if hi < lo:
            raise ModelError(f"{part}: the range runs backwards")
        return range(lo, hi + 1)

    def part(self, name: str) -> str | None:
        """The named part a weight falls in, None when it takes the default."""
        kind, n = part_of(name)
        if kind in ("embeddings", "head"):
            return kind if kind in self.parts else None
        if kind == "layers":
            return next((p for p in self.parts if n in self._layers(p)), None)
        return None

    @classmethod
    def of(cls, weight: float | Shares) -> Shares:
        """`weight` as Shares: a plain share applies to every weight."""
        return weight if isinstance(weight, Shares) else cls(check_weight(weight))

    def as_record(self) -> dict:
        """What interpolation.json and a report's soup record say of the shares."""
        return {"weight": self.default, **({"parts": self.parts} if self.parts else {})}

    def describe(self) -> str:
        return ", ".join([f"{self.default:g} by default"] + [f"{w:g} in {p}" for p, w in self.parts.items()])


def parse_parts(items: Sequence[str]) -> dict[str, float]:
    """['layers:0-2=1', 'head=0.6'] -> {'layers:0-2': 1.0, 'head': 0.6}; a bad item names itself."""
    parts: dict[str, float] = {}
    for item in items:
        part, eq, value = item.partition("=")
        try:
            w = float(value) if eq else None
        except ValueError:
            w = None
        if w is None:
            raise ModelError(f"{item!r}: expected PART=W, e.g. layers:0-2=1 or head=0.6")
        if part in parts:
            raise ModelError(f"{part} is given twice")
        parts[part] = w
    return parts


@torch.no_grad()
def interpolate_state(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor], weight: float | Shares,
                      names: tuple[str, str] = ("the model", "the other")) -> tuple[dict, dict]:
    """`a`'s tensors, each floating one w·a + (1 − w)·b where `b` has it (w: `weight`, or the share
    of the part the tensor is in); what was done, by module (and by part, when parts have shares).

    Computed in float32 and cast back to `a`'s dtype, so a half-precision model gets no coarser
    mix than its own rounding."""
    shares = Shares.of(weight)
    out, done = {}, {"interpolated": {}, "kept": {}}
    by_part = {p: 0 for p in shares.parts}
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
        part = shares.part(key)
        w = shares.default if part is None else shares.parts[part]
        if part is not None:
            by_part[part] += 1
        mixed = w * x.float() + (1.0 - w) * y.to(x.device).float()
        out[key] = mixed.to(x.dtype)
        done["interpolated"][module] = done["interpolated"].get(module, 0) + 1
    if "0" not in done["interpolated"]:
        raise ModelError(f"{names[0]} has no encoder weights to interpolate")
    empty = [p for p, n in by_part.items() if not n]
    if empty:  # a share the user gave that changed nothing: say so rather than mix the default
        layers = sorted({n for kind, n in map(part_of, a) if kind == "layers"})
        raise ModelError(f"{', '.join(empty)}: no weight of {names[0]} both models have is in that part"
                         + (f" (its layers: {layers[0]}-{layers[-1]})" if layers else " (it has no numbered layers)"))
    if shares.parts:
        done["by_part"] = by_part
    return out, done


def interpolate_model(model, other_state: dict[str, torch.Tensor], weight: float | Shares,
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


def interpolate_folders(run: str, other: str | None, weight: float | Shares, out: Path) -> dict:
    """Write to `out` the model `run` moved `1 − weight` of the way to `other` (default: the model
    `run` was trained from; `weight` may give parts shares of their own), with `interpolation.json`
    saying what was mixed. `out` appears whole or not at all (written as `<out>.partial`, then renamed)."""
    from boolcl.retrieval.models import fingerprint, load_model

    shares = Shares.of(weight)
    out = Path(out)
    if out.exists():  # before minutes of loading; new_folder checks again
        raise ModelError(f"{out} exists; choose another folder")
    other = other or start_spec(Path(run))
    model = load_model(run)
    start = load_model(other)
    record = {"model": run, "other": other, **shares.as_record(),
              "fingerprints": {"model": fingerprint(model), "other": fingerprint(start)}}
    record |= interpolate_model(model, start.state_dict(), shares, names=(run, other))
    record["fingerprints"]["result"] = fingerprint(model)
    with new_folder(out) as partial:
        model.save(str(partial), create_model_card=False)
        (partial / RECORD).write_text(json.dumps(record, indent=2) + "\n")
        (partial / "README.md").write_text(
            f"# {out.name}\n\n`{run}` and `{other}`, weight by weight (`boolcl interpolate`), the first's "
            f"share {shares.describe()}; {RECORD} lists what was mixed.\n")
    return record
