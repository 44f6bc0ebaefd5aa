"""Recipes + overrides -> one resolved config, as every subcommand and train.py see it.

`check_overrides` runs before Hydra so that a bad key or recipe is reported with the
list of what does exist (and a "did you mean"); a value of the wrong type is reported
with the type the schema expects. Nothing here imports torch, so a config mistake is
refused in a fraction of a second.
"""
from __future__ import annotations

import difflib
import os
import re
import types
import typing
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


def recipe_summary(name: str) -> str:
    """A recipe's one-line description: the opening clause of the comment that starts its file (up to
    the first ': ', '; ' or '. ' outside brackets), `# @package` lines skipped; '' without a comment."""
    lines = []
    for line in (recipes_dir() / "recipe" / f"{name}.yaml").read_text(encoding="utf-8").splitlines():
        if not line.startswith("#"):
            break
        text = line.lstrip("#").strip()
        if not text.startswith("@package"):
            lines.append(text)
    text = " ".join(t for t in lines if t)
    depth = 0
    for i, ch in enumerate(text):
        depth += {"(": 1, "[": 1, ")": -1, "]": -1}.get(ch, 0)
        ends = ch in ":;." and text[i + 1:i + 2] in (" ", "")
        # "e.g." and "i.e." inside the clause are not its end
        if ends and depth <= 0 and not text[max(0, i - 3):i + 1].lower() in ("e.g.", "i.e."):
            return text[:i]
    return text


def recipe_summaries() -> dict[str, str]:
    """Each recipe's name and one-line description (`boolcl recipes`)."""
    return {name: recipe_summary(name) for name in available_recipes()}


def overridden(overrides: list[str], *keys: str) -> bool:
    """Whether `overrides` set any of `keys` (e.g. `recipe`, `model`), with or without Hydra's +/++ prefix."""
    return any(o.split("=", 1)[0].lstrip("+~") in keys for o in overrides if "=" in o)


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
        raise override_error(e, overrides) from None
    validate(cfg)
    return cfg


def expected_type(key: str) -> str | None:
    """What the schema accepts at the dotted `key`, in words ("a float", "an integer or null"); None when
    the key is not in the schema or takes any value."""
    node: Any = BoolclConfig
    hint: Any = None
    for part in key.split("."):
        if not is_dataclass(node):
            return None
        hints = typing.get_type_hints(node)
        if part not in hints:
            return None
        hint = node = hints[part]
    return _describe(hint, key)


def _describe(hint: Any, key: str) -> str | None:
    args = typing.get_args(hint)
    if typing.get_origin(hint) in (typing.Union, types.UnionType) and type(None) in args:
        inner = [a for a in args if a is not type(None)]
        word = _describe(inner[0], key) if len(inner) == 1 else None
        return f"{word} or null" if word else None
    if hint is bool:
        return "true or false"
    if hint is int:
        return "an integer"
    if hint is float:
        return "a float"
    if hint is str:
        return "a string"
    if hint is list or typing.get_origin(hint) is list:
        return "a list such as [a,b]"
    if is_dataclass(hint):
        return f"a section (set its keys one by one, e.g. {key}.{fields(hint)[0].name}=...)"
    return None


def _first_line(text: str) -> str:
    return next((line.strip() for line in str(text).splitlines() if line.strip()), "")


def override_error(err: Exception, overrides: list[str]) -> ConfigError:
    """A Hydra / OmegaConf composition error as one line that names the key, what it takes and what it got."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import OverrideParseException
    from omegaconf.errors import ValidationError

    if isinstance(err, OverrideParseException):
        for item in overrides:  # Hydra does not say which one it could not parse
            try:
                OverridesParser.create().parse_overrides([item])
            except OverrideParseException as e:
                return ConfigError(f"cannot parse {item!r}: {_first_line(e)} (overrides are key=value, a list "
                                   f"key=[a,b]; quote a value that holds spaces, commas or brackets)")
        return ConfigError(_first_line(err))
    cause = err.__cause__ if err.__cause__ is not None else err
    key = getattr(cause, "full_key", None)
    if isinstance(cause, ValidationError) and key:
        given = [o.split("=", 1)[1] for o in overrides if "=" in o and o.split("=", 1)[0].lstrip("+~") == key]
        got = given[-1] if given else getattr(cause, "value", None)
        expected = expected_type(key)
        if expected:
            return ConfigError(f"{key}: expected {expected}, got {got!r}")
        return ConfigError(f"{key}: {_first_line(re.sub(r'full_key:.*', '', str(cause)))} (got {got!r})")
    return ConfigError(_first_line(cause) or _first_line(err))


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
