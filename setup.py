"""Package discovery that pyproject.toml alone cannot express.

Every package under boolcl/ is found, not listed by hand, so a new subpackage ships
without anyone remembering to add it; the one exception is the recipes, which stay
at the top of the checkout (where users look for them) and are installed as
`boolcl.recipes` so that the console script finds them from any folder.
"""
from setuptools import find_packages, setup

setup(
    packages=[*find_packages(include=["boolcl", "boolcl.*"]), "boolcl.recipes"],
    package_dir={"boolcl.recipes": "recipes"},
)
