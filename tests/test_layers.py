"""The package's shape: layers with one direction (pyproject's import contract) and no import circles."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT


def lint_imports(root: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run([str(Path(sys.executable).parent / "lint-imports"), "--no-cache"], cwd=root, env=env,
                          capture_output=True, text=True, timeout=300)


def _copy(tmp_path: Path) -> Path:
    shutil.copytree(ROOT / "boolcl", tmp_path / "boolcl", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def test_the_import_contract_is_kept():
    res = lint_imports(ROOT)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "1 kept, 0 broken" in res.stdout


@pytest.mark.parametrize("module, added, broken", [
    # a stage reaching into another stage
    ("train/losses.py", "\nfrom boolcl.evaluate import compare  # noqa\n", "boolcl.train.losses -> boolcl.evaluate.compare"),
    # a lower layer importing a higher one, even inside a function
    ("data/schema.py", "\n\ndef _late():\n    from boolcl.retrieval import models  # noqa\n",
     "boolcl.data.schema -> boolcl.retrieval.models"),
])
def test_a_forbidden_import_breaks_the_contract(tmp_path, module, added, broken):
    root = _copy(tmp_path)
    path = root / "boolcl" / module
    path.write_text(path.read_text() + added)
    res = lint_imports(root)
    assert res.returncode != 0 and broken in res.stdout, res.stdout


def import_cycles(root: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(root)}
    res = subprocess.run([sys.executable, str(ROOT / "tests" / "import_cycles.py")], cwd=root, env=env,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def test_no_import_circles():
    found = import_cycles(ROOT)
    assert found["origin"].startswith(str(ROOT)) and found["cycles"] == []


def test_the_cycle_check_finds_one(tmp_path):
    root = _copy(tmp_path)
    files = root / "boolcl" / "files.py"
    files.write_text(files.read_text() + "\n\ndef _late():\n    from boolcl.data import jsonl  # noqa\n")
    found = import_cycles(root)
    assert found["origin"].startswith(str(root))  # the copy, not the checkout
    assert any("boolcl.files" in c and "boolcl.data.jsonl" in c for c in found["cycles"]), found
