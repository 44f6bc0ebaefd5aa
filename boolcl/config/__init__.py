"""Configuration: the schema (schema.py), its checks (validate.py), recipes + overrides (compose.py)
and the training files a config names (inputs.py)."""
from boolcl.config.compose import (
    available_recipes,
    check_overrides,
    compose,
    overridden,
    recipe_summaries,
    recipes_dir,
    setting,
    to_yaml,
)
from boolcl.config.validate import resume_flag, validate

__all__ = ["available_recipes", "check_overrides", "compose", "overridden", "recipe_summaries", "recipes_dir",
           "resume_flag", "setting", "to_yaml", "validate"]
