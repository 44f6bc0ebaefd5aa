"""The library versions a result was made with.

Training at a high learning rate can land elsewhere under another torch or transformers, with the
same code and seed, so a run folder (data_manifest.json) and every results.json record them, and
the generalisation report says which versions its figures come from.
"""
from __future__ import annotations

import platform
from importlib import metadata

LIBRARIES = ("boolcl", "torch", "transformers", "sentence-transformers", "accelerate", "tokenizers", "numpy")


def library_versions() -> dict[str, str]:
    """{"python": ..., library: version} for Python and each of LIBRARIES; "absent" when one is not installed."""
    found = {"python": platform.python_version()}
    for name in LIBRARIES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = "absent"
    return found


def describe(versions: dict[str, str]) -> str:
    """One line: "python 3.11.7, torch 2.13.0+cpu, ..."."""
    return ", ".join(f"{name} {version}" for name, version in versions.items())
