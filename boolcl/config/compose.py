"""Recipes + overrides -> one resolved config, as every subcommand and train.py see it.

`check_overrides` runs before Hydra so that a bad key or recipe is reported with the
list of what does exist (and a "did you mean").
"""
from __future__ import annotations

import difflib
import os
from dataclasses import fields, is_dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from boolcl.config.schema import BoolclConfig
from boolcl.config.validate import validate
from boolcl.errors import ConfigError


def recipes_dir() -> Path:
    """The recipes folder: installed as the package `boolcl.recipes`, or beside a source checkout."""
    try:
        return Path(str(resources.files("boolcl.recipes")))
    except ModuleNotFoundError:  # running from a checkout that was never pip-installed
        return Path(__file__).resolve().parents[2] / "recipes"


def available_recipes() -> list[str]:
    """Recipe names; a file starting with `_` (e.g. _paper.yaml) is a shared base, not a recipe."""
    return sorted(p.stem for p in (recipes_dir() / "recipe").glob("*.yaml") if not p.stem.startswith("_"))


def schema_keys(node: Any = BoolclConfig, prefix: str = "") -> dict[str, list[str]]:
    """Map each section ('' for the top) to the keys it accepts."""
    out: dict[str, list[str]] = {prefix: []}
    for f in fields(node):
        out[prefix].append(f.name)
        default = f.default_factory() if callable(f.default_factory) else f.default  # type: ignore[misc]
        if is_dataclass(default):
            out.update(schema_keys(type(default), f"{prefix}{f.name}."))
    return out


def check_overrides(overrides: list[str]) -> None:
    """Reject an unknown recipe or key with a message that lists what exists."""
    sections = schema_keys()
    for item in overrides:
        if item.startswith("-") or "=" not in item:
            continue
        key, value = item.split("=", 1)
        key = key.lstrip("+~")
        if key.startswith("hydra."):
            continue
        if key == "recipe":
            names = available_recipes()
            if value not in names:
                raise ConfigError(f"unknown recipe {value!r}; available recipes: {', '.join(names)} "
                                  f"(files in {recipes_dir() / 'recipe'})")
            continue
        section, _, leaf = key.rpartition(".")
        section = f"{section}." if section else ""
        if section not in sections or leaf not in sections[section]:
            if section in sections:
                known = sections[section]
                hint = difflib.get_close_matches(leaf, known, n=1)
                where = f"in '{section[:-1]}'" if section else "at the top level"
                msg = f"unknown config key {key!r}; keys {where}: {', '.join(known)}"
                if hint:
                    msg += f" (did you mean {section}{hint[0]}?)"
            else:
                groups = sorted(s[:-1] for s in sections if s)
                msg = f"unknown config section in {key!r}; sections: {', '.join(groups)}"
            raise ConfigError(msg)


def compose(overrides: list[str] | None = None) -> DictConfig:
    """The resolved config for `overrides` (Hydra syntax), as the CLI sees it."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    overrides = list(overrides or [])
    check_overrides(overrides)
    try:
        with initialize_config_dir(config_dir=str(recipes_dir()), version_base="1.3"):
            cfg = hydra_compose(config_name="config", overrides=overrides)
    except (HydraException, OmegaConfBaseException) as e:
        raise ConfigError(str(e)) from None
    validate(cfg)
    return cfg


def to_yaml(cfg: DictConfig) -> str:
    """The config as saved next to a checkpoint: resolved, without secrets.

    Only the *name* of the API-key variable is in the config; values of the
    environment never enter it, so there is nothing to scrub beyond a guard.
    """
    container = OmegaConf.to_container(cfg, resolve=True)
    assert isinstance(container, dict)
    for key in list(container):
        if key == "hydra":
            container.pop(key)
    text = OmegaConf.to_yaml(OmegaConf.create(container))
    secret = os.environ.get(str(cfg.llm.api_key_env), "")
    if secret and secret in text:
        raise ConfigError("refusing to write a config that contains the API key")
    return text


def setting(cfg, key: str, default=None):
    """`cfg`'s value at the dotted `key`, or `default` when absent or null; `cfg` may be a plain dict
    (the benchmarks are also called from scripts and tests with partial configs) or None."""
    if cfg is None:
        return default
    if not isinstance(cfg, DictConfig):
        cfg = OmegaConf.create(cfg)
    value = OmegaConf.select(cfg, key, default=default)
    return default if value is None else value
