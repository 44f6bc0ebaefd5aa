"""The files a training config names, checked before any model loads or downloads.

`boolcl train` and `python -m boolcl.train` call `check_training_inputs` right after
composing the config: a missing `generated/not.jsonl` is reported in a fraction of a
second with the command that makes it, not after the model has been loaded. Only
existence is checked here; the loaders (boolcl.data) still check each file's contents.
"""
from __future__ import annotations

from pathlib import Path

from boolcl.config.compose import available_recipes
from boolcl.config.validate import resume_flag
from boolcl.errors import ConfigError

# values of train.boolean / train.original that name no file
BOOLEAN_NAMES = ("sample", "none")
ORIGINAL_NAMES = ("sample", "msmarco", "none")


def where(given: str) -> str:
    """A path as the config gives it, with the folder a relative one was looked up in."""
    return given if Path(given).is_absolute() else f"{given} (looked up in {Path.cwd()})"


def generate_command(given: str, recipe: str) -> str:
    """The `boolcl generate` command that writes `path`: generate writes generated/<recipe>.jsonl
    by default, so a path of that form names its recipe; any other path is given as out=."""
    path = Path(given)
    if path.parent == Path("generated") and path.suffix == ".jsonl" and path.stem in available_recipes():
        return f"boolcl generate recipe={path.stem}"
    named = f"recipe={recipe}" if recipe in available_recipes() else "recipe=NAME"
    return f"boolcl generate {named} out={given}"


def check_training_inputs(cfg) -> None:
    """Raise ConfigError, naming the key and what to do, when a file the training config reads is missing."""
    t = cfg.train
    boolean = str(t.boolean)
    if boolean not in BOOLEAN_NAMES:
        path = Path(boolean)
        if not path.exists():
            raise ConfigError(f"train.boolean: {where(boolean)} does not exist; make it with "
                              f"`{generate_command(boolean, str(cfg.name))}`, or set train.boolean to a JSONL file of "
                              f"training examples, sample (the bundled pool) or none")
        if not path.is_file():
            raise ConfigError(f"train.boolean: {boolean} is a folder; give the JSONL file of training examples in it")
    original = str(t.original)
    if original not in ORIGINAL_NAMES:
        path = Path(original)
        if not path.is_file():
            state = "is a folder" if path.is_dir() else "does not exist"
            raise ConfigError(f"train.original: {where(original)} {state}; set train.original to a JSONL file of "
                              f"training examples, sample, msmarco (the hub's MS MARCO triples) or none")
    if resume_flag(t.resume) is None:
        path = Path(str(t.resume))
        if not path.is_dir():
            raise ConfigError(f"train.resume: {where(str(t.resume))} is not a folder; give a checkpoint-N folder of an "
                              f"earlier run, or train.resume=true with out= that run's folder (its latest checkpoint)")
