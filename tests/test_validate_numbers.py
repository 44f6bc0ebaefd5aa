"""Every numeric setting is checked for finiteness and range at compose time, naming the key,
without importing torch. The cases are drawn from the schema and from validate.RANGES, so a
new numeric key is covered as soon as it is added (or this file fails until it has a range)."""
import re
import subprocess
import sys
import typing

import pytest
from conftest import ROOT

from boolcl.config import compose
from boolcl.config.schema import BoolclConfig
from boolcl.config.validate import FREE, NUMERIC, RANGES
from boolcl.errors import ConfigError


def _floats(cls=BoolclConfig, prefix=""):
    import dataclasses

    for f in dataclasses.fields(cls):
        kind = typing.get_type_hints(cls)[f.name]
        if dataclasses.is_dataclass(kind):
            yield from _floats(kind, f"{prefix}{f.name}.")
        elif kind in (float, typing.Optional[float]):
            yield prefix + f.name


def _outside(need: str):
    """A value just outside the bound `need` opens with."""
    interval = re.match(r"in ([\[(])(\S+), (\S+?)([\])])", need)
    if interval:
        high, right = float(interval.group(3)), interval.group(4)
        return high + 0.5 if right == "]" else high
    op, bound = need.split()[:2]
    return (int(bound) - 1 if op == ">=" else int(bound)) if bound.lstrip("-").isdigit() else float(bound) - 1.0


def test_every_numeric_key_of_the_schema_has_a_range_or_is_free():
    assert set(NUMERIC) == set(RANGES) | set(FREE)
    assert not set(RANGES) & set(FREE)
    assert {"train.lr", "train.retention.weight", "train.max_length", "eval.max_length"} <= set(RANGES)


@pytest.mark.parametrize("key", sorted(_floats()))
@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_every_float_must_be_finite(key, value):
    with pytest.raises(ConfigError, match=rf"^{re.escape(key)}={re.escape(value)} must be a finite number$"):
        compose(["recipe=tiny", f"{key}={value}"])


@pytest.mark.parametrize("key", sorted(RANGES))
def test_every_range_is_enforced_naming_the_key(key):
    value = _outside(RANGES[key])
    with pytest.raises(ConfigError, match=re.escape(key)):
        compose(["recipe=tiny", f"{key}={value}"])


@pytest.mark.parametrize("override, message", [
    ("train.lr=nan", "train.lr=nan must be a finite number"),
    ("train.retention.weight=inf", "train.retention.weight=inf must be a finite number"),
    ("train.max_length=1", "train.max_length=1 must be >= 8"),
    ("eval.max_length=4", "eval.max_length=4 must be >= 8"),
    ("train.lr=0", "train.lr=0.0 must be > 0"),
    ("train.lr=-1e-5", "train.lr=-1e-05 must be > 0"),
    ("train.batch_size=0", "train.batch_size=0 must be >= 1"),
    ("train.warmup_ratio=1", r"train.warmup_ratio=1.0 must be in [0, 1)"),
    ("compare.alpha=0", r"compare.alpha=0.0 must be in (0, 1)"),
    ("train.decomposition.anchor=-inf", "train.decomposition.anchor=-inf must be a finite number"),
    ("generate.min_candidates=5", "generate.min_candidates=5 must be <= generate.max_candidates=3"),
])
def test_the_reported_cases_are_refused_in_one_line(override, message):
    with pytest.raises(ConfigError) as err:
        compose(["recipe=not_plus_tiny", override])
    assert str(err.value).startswith(message) and "\n" not in str(err.value)


@pytest.mark.parametrize("override", [
    "train.max_length=8", "eval.max_length=8", "train.lr=1e-9", "train.warmup_ratio=0", "compare.alpha=0.5",
    "train.scale=null", "train.decomposition.drop=0",
    "eval.max_corpus=null", "seed=0", "train.retention.weight=0",
])
def test_values_at_the_edges_are_allowed(override):
    compose(["recipe=not_plus_tiny", override])


def test_validation_refuses_before_torch_is_imported():
    code = ("import sys\n"
            "from boolcl.config import compose\n"
            "from boolcl.errors import ConfigError\n"
            "for bad in ('train.lr=nan', 'train.retention.weight=inf', 'train.max_length=1'):\n"
            "    try:\n"
            "        compose(['recipe=not_plus_tiny', bad])\n"
            "    except ConfigError as err:\n"
            "        print(err)\n"
            "print(sorted(m for m in ('torch', 'transformers', 'sentence_transformers') if m in sys.modules))\n")
    res = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    lines = res.stdout.splitlines()
    assert [line.split()[0] for line in lines[:3]] == ["train.lr=nan", "train.retention.weight=inf",
                                                       "train.max_length=1"]
    assert lines[3] == "[]"
