"""The package's shape: layers with one direction (pyproject's import contract) and no import circles."""
from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import grimp

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


def test_a_stage_importing_another_stage_breaks_it(tmp_path):
    root = _copy(tmp_path)
    losses = root / "boolcl" / "train" / "losses.py"
    losses.write_text(losses.read_text() + "\nfrom boolcl.evaluate import compare  # noqa\n")
    res = lint_imports(root)
    assert res.returncode != 0 and "boolcl.train.losses -> boolcl.evaluate.compare" in res.stdout, res.stdout


def test_a_lower_layer_importing_a_higher_one_breaks_it(tmp_path):
    root = _copy(tmp_path)
    errors = root / "boolcl" / "data" / "schema.py"
    errors.write_text(errors.read_text() + "\n\ndef _late():\n    from boolcl.retrieval import models  # noqa\n")
    res = lint_imports(root)
    assert res.returncode != 0 and "boolcl.data.schema -> boolcl.retrieval.models" in res.stdout, res.stdout


def cycles(graph) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan), function-level imports included."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.find_modules_directly_imported_by(v):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(graph.modules):
        if v not in index:
            visit(v)
    return out


def test_no_import_circles():
    graph = grimp.build_graph("boolcl")
    assert cycles(graph) == []


def test_the_cycle_check_finds_one(tmp_path):
    root = _copy(tmp_path)
    files = root / "boolcl" / "files.py"
    files.write_text(files.read_text() + "\n\ndef _late():\n    from boolcl.data import jsonl  # noqa\n")
    sys.path.insert(0, str(root))
    try:
        for name in [m for m in sys.modules if m == "boolcl" or m.startswith("boolcl.")]:
            sys.modules.pop(name)
        graph = grimp.build_graph("boolcl", cache_dir=None)
        assert importlib.util.find_spec("boolcl").origin.startswith(str(root))  # the copy, not the checkout
        found = cycles(graph)
    finally:
        sys.path.remove(str(root))
        for name in [m for m in sys.modules if m == "boolcl" or m.startswith("boolcl.")]:
            sys.modules.pop(name)
    assert any("boolcl.files" in c and "boolcl.data.jsonl" in c for c in found), found
