"""A model part of the way back to another of the same architecture: each weight w·A + (1 − w)·B.

Continued training on NOT questions teaches the encoder what they need and also moves it off
the topics of text it was never shown (BIRCO's long arguments). Interpolating the trained weights with the
starting model's (WiSE-FT: Wortsman et al., "Robust fine-tuning of zero-shot models", 2022),
or with another run from the same start (a "model soup"), gives back much of what was lost for
a part of what was learned, and costs no training: one run can be scored at several weights.
`w` is the share of the first model (1: itself).

The two must be one architecture, whichever is given first: the same modules in the same order
with the same settings, the same encoder configuration, and the same weight names with the same
shapes. Every weight is interpolated, the modules after the encoder (a Dense layer) too. Integer
buffers must agree; they are not averaged.

A part of the model may take a share of its own (`Shares`): the embeddings, a range of the
transformer's layers, or the head (every module after the encoder): what one kind of training
taught and what it cost need not sit in the same layers.
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

# an encoder configuration's bookkeeping, not what it computes
CONFIG_BOOKKEEPING = frozenset({"transformers_version", "torch_dtype", "dtype", "architectures", "name_or_path"})

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


def check_same_names(a: dict, b: dict, names: tuple[str, str]) -> None:
    """Refuse two state dicts that differ in a weight's name, naming one such weight."""
    for mine, theirs, (has, lacks) in ((a, b, names), (b, a, names[::-1])):
        only = sorted(mine.keys() - theirs.keys())
        if only:
            what = "encoder weight" if module_of(only[0]) == "0" else "weight"
            raise ModelError(f"{lacks} has no {what} {only[0]!r} that {has} has"
                             + (f" (and {len(only) - 1} more)" if len(only) > 1 else "")
                             + ": the two are not one architecture")


def encoder_config(module) -> dict:
    """The configuration of a Transformer module's model (layers, sizes, activation, ...), without
    `CONFIG_BOOKKEEPING` and private keys."""
    from boolcl.retrieval.models import inner_model

    inner = inner_model(module)
    config = getattr(inner, "config", None)
    if config is None:
        return {}
    return {k: v for k, v in config.to_dict().items() if not k.startswith("_") and k not in CONFIG_BOOKKEEPING}


def module_settings(module) -> dict:
    """A sentence-transformers module's own settings (pooling mode, a head's sizes), for comparing."""
    get = getattr(module, "get_config_dict", None)
    return get() if callable(get) else {}


def kind(module) -> str:
    return f"{type(module).__module__}.{type(module).__qualname__}"


def check_architecture(model, other, names: tuple[str, str] = ("the model", "the other")) -> None:
    """Refuse two SentenceTransformers that are not one architecture: the same module types in the
    same order and settings, the encoder's configuration alike."""
    mods_a, mods_b = list(model), list(other)
    for i in range(max(len(mods_a), len(mods_b))):
        x = mods_a[i] if i < len(mods_a) else None
        y = mods_b[i] if i < len(mods_b) else None
        if x is None or y is None or kind(x) != kind(y):
            raise ModelError(f"module {i}: {kind(x) if x is not None else 'none'} in {names[0]}, "
                             f"{kind(y) if y is not None else 'none'} in {names[1]}: the two are not one architecture")
        if i == 0:
            ca, cb = encoder_config(x), encoder_config(y)
        else:
            ca, cb = module_settings(x), module_settings(y)
        diff = sorted(k for k in ca.keys() | cb.keys() if ca.get(k) != cb.get(k))
        if diff:
            k = diff[0]
            raise ModelError(f"module {i} ({kind(x)}): {k}={ca.get(k)!r} in {names[0]}, {k}={cb.get(k)!r} in "
                             f"{names[1]}" + (f" (and {len(diff) - 1} more)" if len(diff) > 1 else "")
                             + ": the two are not one architecture")


@torch.no_grad()
def interpolate_state(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor], weight: float | Shares,
                      names: tuple[str, str] = ("the model", "the other")) -> tuple[dict, dict]:
    """`a`'s tensors, each floating one w·a + (1 − w)·b where `b` has it (w: `weight`, or the share
    of the part the tensor is in); what was done, by module (and by part, when parts have shares).

    Computed in float32 and cast back to `a`'s dtype, so a half-precision model gets no coarser
    mix than its own rounding."""
    shares = Shares.of(weight)
    check_same_names(a, b, names)
    out, done = {}, {"interpolated": {}}
    by_part = {p: 0 for p in shares.parts}
    for key, x in a.items():
        y = b[key]  # check_same_names: the same names in both
        module = module_of(key)
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
    if not run.exists():
        raise ModelError(f"{run}: no such model folder (it does not exist)")
    config = run / "config.yaml"
    if not config.is_file():
        raise ModelError(f"{run}: no config.yaml, so the model it started from is unknown; name the other model")
    from omegaconf import OmegaConf

    spec = OmegaConf.select(OmegaConf.load(config), "model")
    if not spec:
        raise ModelError(f"{config}: no `model` key, so the model it started from is unknown; name the other model")
    return str(spec)


def earlier_mix(run: str, other: str, shares: Shares):
    """A test for a folder: its interpolation.json is of the same two models and shares."""
    def own(folder: Path) -> bool:
        record = json.loads((folder / RECORD).read_text(encoding="utf-8"))
        return {k: record.get(k) for k in ("model", "other", "weight", "parts")} == \
            {"model": run, "other": other, "parts": None, **shares.as_record()}
    return own


def interpolate_folders(run: str, other: str | None, weight: float | Shares, out: Path, *,
                        overwrite: bool = False) -> dict:
    """Write to `out` the model `run` moved `1 − weight` of the way to `other` (default: the model
    `run` was trained from; `weight` may give parts shares of their own), with `interpolation.json`
    saying what was mixed. `out` appears whole or not at all (written as `<out>.partial`, then moved).
    An `out` that holds anything is refused before any model is loaded, unless it holds this same
    mix (the command run again) or `overwrite` is set."""
    from boolcl.retrieval.models import fingerprint, load_model, resolve

    shares = Shares.of(weight)
    out = Path(out)
    resolve(run)  # a missing folder is named now, not as a missing config.yaml
    other = other or start_spec(Path(run))
    resolve(other)
    own = earlier_mix(run, other, shares)
    with new_folder(out, overwrite=overwrite, own=own,  # checks `out` before minutes of loading
                    whose="this interpolation's (the same models and shares)") as partial:
        model = load_model(run)
        start = load_model(other)
        check_architecture(model, start, names=(run, other))
        record = {"model": run, "other": other, **shares.as_record(),
                  "fingerprints": {"model": fingerprint(model), "other": fingerprint(start)},
                  "modules": {"model": [kind(m) for m in model], "other": [kind(m) for m in start]}}
        record |= interpolate_model(model, start.state_dict(), shares, names=(run, other))
        record["fingerprints"]["result"] = fingerprint(model)
        model.save(str(partial), create_model_card=False)
        (partial / RECORD).write_text(json.dumps(record, indent=2) + "\n")
        (partial / "README.md").write_text(
            f"# {out.name}\n\n`{run}` and `{other}`, weight by weight (`boolcl interpolate`), the first's "
            f"share {shares.describe()}; {RECORD} lists what was mixed.\n")
    return record
