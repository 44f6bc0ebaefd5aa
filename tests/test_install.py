"""The package as users get it: a built wheel, installed without -e, run from another folder.

The suite itself runs against an editable install, which sees every file of the checkout;
a module missing from the wheel only shows up here.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from conftest import ROOT

# what a fresh clone has and a build needs; caches, outputs and environments stay behind
IGNORE = shutil.ignore_patterns(".git", ".venv", "venv", "build", "dist", "*.egg-info", "__pycache__",
                                ".pytest_cache", ".boolcl_cache", "checkpoints", "results", "runs",
                                "compare", "generated", "outputs")


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """A virtual environment holding only the wheel; the dependencies come from this
    interpreter's site-packages through a .pth line (their .pth files, among them the
    editable install's finder, are not processed from there, so the checkout stays unseen)."""
    root = tmp_path_factory.mktemp("wheel")
    src = root / "src"
    shutil.copytree(ROOT, src, ignore=IGNORE)
    sh(sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(root / "dist"), str(src))
    wheel, = (root / "dist").glob("boolcl-*.whl")
    env_dir = root / "env"
    sh(sys.executable, "-m", "venv", "--without-pip", str(env_dir))
    python = env_dir / "bin" / "python"
    sh(sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-deps", str(wheel))
    site = Path(sh(str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").stdout.strip())
    deps = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (site / "zz_test_dependencies.pth").write_text("".join(f"{d}\n" for d in sorted(deps)))
    return env_dir


def sh(*args: str) -> subprocess.CompletedProcess:
    res = subprocess.run(args, capture_output=True, text=True)
    assert res.returncode == 0, f"{' '.join(args)} failed:\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}"
    return res


def run(env_dir: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env |= {"HF_HUB_OFFLINE": "1", "BOOLCL_CACHE": str(cwd / "cache"), "PATH": f"{env_dir / 'bin'}:{env['PATH']}"}
    return subprocess.run([str(env_dir / "bin" / args[0]), *args[1:]], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=600)


def test_wheel_holds_every_package(installed, tmp_path):
    res = run(installed, tmp_path, "python", "-c", "import boolcl, pkgutil; print(boolcl.__file__); "
              "print(*sorted(m.name for m in pkgutil.walk_packages(boolcl.__path__, 'boolcl.')))")
    assert res.returncode == 0, res.stderr
    where, modules = res.stdout.splitlines()
    assert where.startswith(str(installed)), f"imported from {where}, not from the wheel"
    shipped = {"boolcl", *modules.split()}
    in_checkout = {".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
                   for p in (ROOT / "boolcl").rglob("*.py")}
    assert in_checkout <= shipped, f"missing from the wheel: {sorted(in_checkout - shipped)}"
    assert "boolcl.recipes" in shipped


def test_console_script_runs_from_another_folder(installed, tmp_path):
    res = run(installed, tmp_path, "boolcl", "--help")
    assert res.returncode == 0, res.stderr
    assert "evaluate" in res.stdout and "generate" in res.stdout
    res = run(installed, tmp_path, "boolcl", "config", "recipe=not")
    assert res.returncode == 0, res.stderr
    assert "name: not" in res.stdout and "msmarco-distilbert-dot-v5" in res.stdout


def test_evaluate_the_packaged_model_on_the_sample(installed, tmp_path):
    res = run(installed, tmp_path, "boolcl", "evaluate", "offline-default", "data=sample", "out=out")
    assert res.returncode == 0, res.stderr
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    assert results["data"]["questions"] == 300 and results["data"]["passages"] == 564
    assert 0 < results["headline"]["MRR@10/ALL"] <= 100
    assert f"{results['headline']['MRR@10/ALL']:.2f}" in res.stdout


def test_version_and_recipes_come_from_the_installed_package(installed, tmp_path):
    res = run(installed, tmp_path, "python", "-c",
              "import importlib.metadata; print(importlib.metadata.version('boolcl'))")
    assert res.returncode == 0, res.stderr
    version = res.stdout.strip()
    res = run(installed, tmp_path, "boolcl", "--version")
    assert res.returncode == 0 and res.stdout.strip() == f"boolcl {version}", res.stdout + res.stderr
    res = run(installed, tmp_path, "boolcl", "recipes")
    assert res.returncode == 0, res.stderr
    shipped = sorted(p.stem for p in (ROOT / "recipes" / "recipe").glob("*.yaml") if not p.stem.startswith("_"))
    assert [line.split()[0] for line in res.stdout.splitlines()] == shipped
    assert str(installed) in res.stderr  # the recipe files it read are the wheel's


def test_the_training_entry_point_is_installed(installed, tmp_path):
    res = run(installed, tmp_path, "python", "-m", "boolcl.train", "--help")
    assert res.returncode == 0 and "accelerate launch -m boolcl.train recipe=not" in res.stdout, res.stderr
    res = run(installed, tmp_path, "boolcl-train")
    assert res.returncode == 2 and res.stderr.startswith("usage: boolcl-train"), res.stderr
    res = run(installed, tmp_path, "boolcl-train", "recipe=not")
    assert res.returncode == 2 and "make it with `boolcl generate recipe=not`" in res.stderr, res.stderr
    assert len(res.stderr.strip().splitlines()) == 1


def test_accelerate_launch_trains_from_the_wheel(installed, tmp_path):
    """`accelerate launch -m boolcl.train`, the multi-GPU command, run here as one CPU process for one step."""
    res = run(installed, tmp_path, "python", "-m", "accelerate.commands.launch", "--num_processes", "1",
              "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no", "--cpu",
              "-m", "boolcl.train", "recipe=tiny", "train.max_steps=1", "train.batch_size=2", "train.max_length=32",
              "train.eval_every=0", "train.report_to=[]", "out=run")
    assert res.returncode == 0, res.stderr[-3000:]
    assert "saved run" in res.stdout
    assert (tmp_path / "run" / "model.safetensors").is_file() and (tmp_path / "run" / "config.yaml").is_file()
