import importlib
import importlib.metadata
import json
import os
import subprocess
import sys
from pathlib import Path

import ir_measures
import pytest

from boolcl.cli import build_parser, main
from boolcl.config import available_recipes, compose
from boolcl.config.inputs import check_training_inputs
from boolcl.errors import ConfigError

SUBCOMMANDS = ["generate", "train", "evaluate", "compare", "decompose", "demo", "explain", "config"]
ROOT = Path(__file__).resolve().parents[1]


def cli(*args: str, cwd: Path | None = None, entry: tuple[str, ...] = ("-m", "boolcl.cli"), timeout: int = 60):
    """The real command in a process of its own, with -X importtime, so that the test can see every module it
    imported. Returns (exit code, stdout, the stderr lines that are not import times, imported module names)."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    res = subprocess.run([sys.executable, "-X", "importtime", *entry, *args], cwd=cwd, env=env, capture_output=True,
                         text=True, timeout=timeout)
    imported = {line.rsplit("|", 1)[1].strip() for line in res.stderr.splitlines() if line.startswith("import time:")}
    said = [line for line in res.stderr.splitlines() if not line.startswith("import time:")]
    return res.returncode, res.stdout, said, imported


@pytest.mark.parametrize("sub", SUBCOMMANDS)
def test_every_subcommand_has_help(sub, capsys):
    with pytest.raises(SystemExit) as e:
        main([sub, "--help"])
    assert e.value.code == 0
    assert "key=value" in capsys.readouterr().out


def test_console_script_is_installed():
    res = subprocess.run([sys.executable, "-m", "boolcl.cli", "--help"], capture_output=True, text=True)
    assert res.returncode == 0 and all(s in res.stdout for s in SUBCOMMANDS)


def test_config_errors_are_reported_not_raised(capsys):
    assert main(["config", "recipe=nope"]) == 2
    assert "available recipes: all, and, not, not_plus, not_plus_tiny, or, tiny" in capsys.readouterr().err
    assert main(["config", "recipe=not", "train.bach_size=2"]) == 2
    assert "did you mean train.batch_size" in capsys.readouterr().err


def test_evaluate_writes_results_and_a_rescorable_run(tiny_model_dir, small_set, tmp_path, capsys):
    out = tmp_path / "eval"
    assert main(["evaluate", str(tiny_model_dir), f"data={small_set}", f"out={out}", "eval.k=3"]) == 0
    printed = capsys.readouterr().out
    res = json.loads((out / "results.json").read_text())
    data = res["data"]
    assert {k: data[k] for k in ("name", "source", "questions", "passages")} == \
        {"name": "set", "source": str(small_set), "questions": 3, "passages": 6}
    assert len(data["corpus_fingerprint"]) == len(data["questions_fingerprint"]) == 32
    assert res["model"]["origin"] == "folder" and len(res["model"]["fingerprint"]) == 32
    mrr = res["headline"]["MRR@3/ALL"]
    assert f"{mrr:.2f}" in printed
    # anyone can re-score the TREC run file with other tools and get the same figure
    qrels = [ir_measures.Qrel(q, p, 1) for q, ps in {"q-not": ["d0", "d2"], "q-and": ["d4"], "q-or": ["d5", "d3"]}.items()
             for p in ps]
    run = list(ir_measures.read_trec_run(str(out / "run.trec")))
    assert ir_measures.calc_aggregate([ir_measures.RR @ 3], qrels, run)[ir_measures.RR @ 3] * 100 == pytest.approx(mrr, abs=1e-9)


def test_bad_data_file_is_reported_with_line(tiny_model_dir, small_set, capsys):
    with (small_set / "eval.jsonl").open("a") as fh:
        fh.write('{"qid": "broken", "question": \n')
    assert main(["evaluate", str(tiny_model_dir), f"data={small_set}"]) == 2
    assert f"{small_set / 'eval.jsonl'}:4: invalid JSON" in capsys.readouterr().err


def test_evaluate_scores_a_ranking_file_and_compare_reads_both(tiny_model_dir, small_set, tmp_path, capsys):
    model_out = tmp_path / "model"
    assert main(["evaluate", str(tiny_model_dir), f"data={small_set}", f"out={model_out}"]) == 0
    # the model's own run file, scored without the model, gives the same figures
    run_out = tmp_path / "run"
    assert main(["evaluate", f"data={small_set}", f"run={model_out / 'run.trec'}", f"out={run_out}"]) == 0
    a = json.loads((model_out / "results.json").read_text())
    b = json.loads((run_out / "results.json").read_text())
    assert a["headline"] == b["headline"] and b["model"] == {"run": str(model_out / "run.trec")}
    capsys.readouterr()
    cmp_out = tmp_path / "cmp"
    assert main(["compare", str(model_out / "results.json"), str(run_out / "results.json"), f"data={small_set}",
                 f"out={cmp_out}"]) == 0
    assert (cmp_out / "compare.png").stat().st_size > 1000 and (cmp_out / "compare.md").is_file()
    payload = json.loads((cmp_out / "compare.json").read_text())
    assert payload["runs"][1]["name"] != payload["runs"][0]["name"]


def test_model_and_run_together_is_an_error(tiny_model_dir, small_set, tmp_path, capsys):
    run = tmp_path / "x.trec"
    run.write_text("q-not Q0 d0 1 1.0 x\n")
    assert main(["evaluate", str(tiny_model_dir), f"data={small_set}", f"run={run}"]) == 2
    assert "not both" in capsys.readouterr().err


def test_compare_puts_birco_next_to_a_boolean_set(tiny_model_dir, small_set, tmp_path, capsys):
    from conftest import ROOT

    birco = ROOT.parent / "shared" / "birco"
    if not (birco / "relic" / "test_set.pickle").is_file():
        pytest.skip(f"the real BIRCO files are not at {birco} (they are not shipped with boolcl)")
    assert main(["evaluate", str(tiny_model_dir), f"data={small_set}", f"out={tmp_path / 'bool'}"]) == 0
    assert main(["evaluate", f"data=birco-relic:{birco}", f"run={birco / 'ranks'}", f"out={tmp_path / 'relic'}"]) == 0
    relic = json.loads((tmp_path / "relic" / "results.json").read_text())
    assert round(relic["headline"]["nDCG@10/ALL"], 2) == 11.25  # the published E5 ranking, as the BIRCO README says
    capsys.readouterr()
    out = tmp_path / "cmp"
    assert main(["compare", str(tmp_path / "bool" / "results.json"), str(tmp_path / "relic" / "results.json"),
                 f"out={out}"]) == 0
    printed = capsys.readouterr().out
    assert "data: set" in printed and "data: birco-relic" in printed
    assert (out / "compare.md").read_text().count("### ") == 2


def test_max_corpus_keeps_labelled_passages_and_says_so(tiny_model_dir, small_set, tmp_path):
    with (small_set / "corpus.jsonl").open("a") as fh:
        for i in range(30):
            fh.write(json.dumps({"docid": f"extra{i}", "doc": f"unrelated filler passage number {i}"}) + "\n")
    out = tmp_path / "quick"
    assert main(["evaluate", str(tiny_model_dir), f"data={small_set}", "eval.max_corpus=10", f"out={out}"]) == 0
    res = json.loads((out / "results.json").read_text())
    assert res["data"]["passages"] == 10
    assert res["data"]["corpus_sample"] == {"max_corpus": 10, "seed": 42, "labelled_kept": 6, "others_sampled": 4, "of": 36}


def test_table2_script_stops_offline_and_says_why():
    from conftest import ROOT

    res = subprocess.run([sys.executable, str(ROOT / "scripts" / "reproduce" / "table2.py")], capture_output=True, text=True,
                         env={**__import__("os").environ, "HF_HUB_OFFLINE": "1"}, timeout=60)
    assert res.returncode == 2 and "hub is not reachable (HF_HUB_OFFLINE is set)" in res.stderr
    assert "nothing was run" in res.stderr


def test_decompose_writes_both_variants_and_compare_reads_them(tiny_model_dir, small_set, tmp_path, capsys):
    out = tmp_path / "dec"
    assert main(["decompose", f"model={tiny_model_dir}", f"data={small_set}", f"out={out}"]) == 0
    for variant in ("hard", "soft"):
        res = json.loads((out / variant / "results.json").read_text())
        assert res["data"]["name"] == "set" and (out / variant / "run.trec").is_file()
    report = json.loads((out / "decomposition_report.json").read_text())
    assert report  # counts of parsed / fallen back questions
    assert main(["evaluate", str(tiny_model_dir), f"data={small_set}", f"out={tmp_path / 'base'}"]) == 0
    capsys.readouterr()
    assert main(["compare", str(tmp_path / "base"), str(out / "hard"), str(out / "soft"), f"data={small_set}",
                 f"out={tmp_path / 'cmp'}"]) == 0
    names = [r["name"] for r in json.loads((tmp_path / "cmp" / "compare.json").read_text())["runs"]]
    assert len(names) == 3 and len(set(names)) == 3


def test_version_is_the_installed_package_version():
    code, out, said, _ = cli("--version")
    assert code == 0 and out.strip() == f"boolcl {importlib.metadata.version('boolcl')}"


def test_recipes_lists_every_recipe_with_its_description():
    code, out, said, imported = cli("recipes")
    assert code == 0 and "torch" not in imported
    lines = dict(line.split(None, 1) for line in out.splitlines())
    assert sorted(lines) == available_recipes() and "_paper" not in lines
    assert "NOT-aware recipe at the paper's scale" in lines["not_plus"]
    assert lines["not"].startswith("The paper's Boolean contrastive continual training on NOT questions")
    assert all(text.strip() for text in lines.values())


def _recipes_folder(tmp_path, recipes: dict[str, str]) -> Path:
    (tmp_path / "recipe").mkdir()
    for name, text in recipes.items():
        (tmp_path / "recipe" / f"{name}.yaml").write_text(text)
    return tmp_path


def test_recipe_description_is_the_opening_clause_of_its_comment(tmp_path, monkeypatch):
    compose_module = importlib.import_module("boolcl.config.compose")  # the package exports a function of that name

    folder = _recipes_folder(tmp_path, {
        "mine": "# @package _global_\n# My recipe (e.g. for a test: two words) on\n# two lines: the rest. More.\n"
                "name: mine\n",
        "plain": "# A recipe, i.e. one without a colon. Another sentence.\nname: plain\n",
        "bare": "name: bare\n# a comment after the first key is not the description\n",
        "_base": "# a shared base, not a recipe\n"})
    monkeypatch.setattr(compose_module, "recipes_dir", lambda: folder)
    assert compose_module.recipe_summaries() == {
        "bare": "", "mine": "My recipe (e.g. for a test: two words) on two lines",
        "plain": "A recipe, i.e. one without a colon"}


def test_help_lists_the_recipes_that_exist(tmp_path, monkeypatch):
    compose_module = importlib.import_module("boolcl.config.compose")  # the package exports a function of that name

    code, out, _, imported = cli("--help")
    assert code == 0 and "torch" not in imported
    flat = " ".join(out.split())
    assert f"({', '.join(available_recipes())};" in flat  # every recipe, not_plus and not_plus_tiny among them
    folder = _recipes_folder(tmp_path, {"brand_new": "# a recipe added by a user\nname: brand_new\n"})
    monkeypatch.setattr(compose_module, "recipes_dir", lambda: folder)
    assert "(brand_new;" in build_parser().format_help()


@pytest.mark.parametrize("args", [
    ["evaluate"], ["evaluate", "data=sample"], ["train"], ["train", "train.lr=1e-5"], ["generate"], ["decompose"],
    ["compare", "data=sample"], ["interpolate", "A", "--weight", "0.5"], ["explain", "MODEL"]],
    ids=lambda a: "-".join(a))
def test_a_missing_argument_prints_usage_and_computes_nothing(args):
    code, out, said, imported = cli(*args)
    assert code == 2 and said[0].startswith(f"usage: boolcl {args[0]}")
    assert said[-1].startswith(f"boolcl {args[0]}: error: ")
    assert "torch" not in imported


@pytest.mark.parametrize("args,message", [
    (["train", "recipe=nope"], "unknown recipe 'nope'; available recipes: all, and"),
    (["train", "recipe=tiny", "train.bach_size=2"], "did you mean train.batch_size?"),
    (["train", "recipe=tiny", "train.lr=abc"], "train.lr: expected a float, got 'abc'"),
    (["train", "recipe=tiny", "train.lr=-1"], "train.lr"),  # validate.py words the range
    (["evaluate", "offline-default", "data=sample", "eval.k=ten"], "eval.k: expected an integer, got 'ten'"),
    (["demo", "recipe=nope"], "unknown recipe 'nope'"),
    (["generate", "recipe=nope"], "unknown recipe 'nope'"),
    (["decompose", "recipe=not", "decompose.soft_rule=x"], "decompose.soft_rule"),
    (["explain", "MODEL", "question", "recipe=nope"], "unknown recipe 'nope'"),
    (["compare", "a", "b", "compare.alpha=x"], "compare.alpha: expected a float, got 'x'")],
    ids=lambda a: "-".join(a) if isinstance(a, list) else "")
def test_a_wrong_recipe_key_or_value_is_refused_before_torch_is_imported(args, message):
    code, out, said, imported = cli(*args)
    assert code == 2 and len(said) == 1 and said[0].startswith(f"boolcl {args[0]}: ConfigError: ")
    assert message in said[0]
    assert "torch" not in imported, "the config was checked after torch was imported"


@pytest.mark.parametrize("override,expected", [
    ("train.lr=abc", "train.lr: expected a float, got 'abc'"),
    ("train.batch_size=1.5", "train.batch_size: expected an integer, got '1.5'"),
    ("train.compile=maybe", "train.compile: expected true or false, got 'maybe'"),
    ("train.operators=not", "train.operators: expected a list such as [a,b], got 'not'"),
    ("train.original_size=abc", "train.original_size: expected an integer or null, got 'abc'"),
    ("eval.k=null", "eval.k: expected an integer, got 'null'"),
    ("train.retention=3", "train.retention: expected a section (set its keys one by one, e.g. train.retention.weight"),
    ("train.lr=[", "cannot parse 'train.lr=['")])
def test_a_value_of_the_wrong_type_names_the_type_expected(override, expected, capsys):
    assert main(["config", "recipe=not", override]) == 2
    err = capsys.readouterr().err
    assert expected in err and len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize("entry", [("-m", "boolcl.cli", "train"), ("-m", "boolcl.train"), (str(ROOT / "train.py"),)],
                         ids=["boolcl-train", "python-m-boolcl.train", "train.py"])
def test_train_names_the_command_that_makes_a_missing_training_file(entry, tmp_path):
    prog = {"-m boolcl.cli train": "boolcl train", "-m boolcl.train": "python -m boolcl.train"}.get(
        " ".join(entry), "train.py")
    code, out, said, imported = cli("recipe=not", cwd=tmp_path, entry=entry)
    assert code == 2 and said == [f"{prog}: ConfigError: train.boolean: generated/not.jsonl (looked up in {tmp_path}) "
                                  f"does not exist; make it with `boolcl generate recipe=not`, or set train.boolean "
                                  f"to a JSONL file of training examples, sample (the bundled pool) or none"]
    assert "torch" not in imported, "the training files were checked after torch was imported"


@pytest.mark.parametrize("overrides,message", [
    (["recipe=not_plus"], "generated/all.jsonl (looked up in {cwd}) does not exist; make it with "
                          "`boolcl generate recipe=all`"),
    (["recipe=not", "train.boolean=mine/bool.jsonl"], "make it with `boolcl generate recipe=not out=mine/bool.jsonl`"),
    (["recipe=tiny", "train.boolean=generated"], "train.boolean: generated is a folder"),
    (["recipe=tiny", "train.original=/no/such/original.jsonl"],
     "train.original: /no/such/original.jsonl does not exist; set train.original to a JSONL file"),
    (["recipe=tiny", "train.resume=checkpoint-7"], "train.resume: checkpoint-7 (looked up in {cwd}) is not a folder")])
def test_training_files_are_checked_before_any_model_loads(overrides, message, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "generated").mkdir()
    with pytest.raises(ConfigError) as e:
        check_training_inputs(compose(overrides))
    assert message.format(cwd=tmp_path) in str(e.value)


def test_training_files_that_exist_pass(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "generated").mkdir()
    (tmp_path / "generated" / "all.jsonl").write_text("")
    (tmp_path / "original.jsonl").write_text("")
    (tmp_path / "checkpoint-7").mkdir()
    check_training_inputs(compose(["recipe=not_plus", "train.original=original.jsonl"]))
    check_training_inputs(compose(["recipe=tiny", "train.resume=checkpoint-7"]))


def _moved_copy(model_dir: Path, to: Path) -> Path:
    """`model_dir` with its weights moved a little, as a trained model would be."""
    import shutil

    from safetensors.torch import load_file, save_file

    shutil.copytree(model_dir, to)
    weights = load_file(str(to / "model.safetensors"))
    save_file({k: v + 0.01 if v.is_floating_point() else v for k, v in weights.items()}, str(to / "model.safetensors"))
    return to


def test_interpolate_writes_to_out_like_every_other_subcommand(tiny_model_dir, tmp_path, capsys):
    trained = _moved_copy(tiny_model_dir, tmp_path / "trained")
    assert main(["interpolate", str(trained), str(tiny_model_dir), "--weight", "0.5", f"out={tmp_path / 'a'}"]) == 0
    assert main(["interpolate", "--weight", "0.25", str(trained), str(tiny_model_dir), f"out={tmp_path / 'c'}"]) == 0
    from safetensors.torch import load_file

    base = load_file(str(tiny_model_dir / "model.safetensors"))
    for name, weight in (("a", 0.5), ("c", 0.25)):
        record = json.loads((tmp_path / name / "interpolation.json").read_text())
        assert record["weight"] == weight and record["other"] == str(tiny_model_dir)
        mixed = load_file(str(tmp_path / name / "model.safetensors"))
        assert all((mixed[k] - base[k] - weight * 0.01).abs().max() < 1e-6 for k in base if base[k].is_floating_point())
    capsys.readouterr()
    assert main(["interpolate", str(trained), str(tiny_model_dir), "--weight", "0.5", f"out={tmp_path / 'd'}",
                 "recipe=not"]) == 2
    assert "interpolate takes out=DIR and overwrite=true|false, not recipe=not" in capsys.readouterr().err
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("a user's file")
    assert main(["interpolate", str(trained), str(tiny_model_dir), "--weight", "0.5", f"out={tmp_path / 'mine'}"]) == 2
    assert "overwrite=true" in capsys.readouterr().err and not (tmp_path / "mine" / "model.safetensors").exists()
    assert main(["interpolate", str(trained), str(tiny_model_dir), "--weight", "0.5", f"out={tmp_path / 'mine'}",
                 "overwrite=true"]) == 0
    assert (tmp_path / "mine" / "model.safetensors").is_file()
    assert (tmp_path / "mine" / "notes.txt").read_text() == "a user's file"
    assert main(["interpolate", str(trained), str(tiny_model_dir), "--weight", "0.5", f"out={tmp_path / 'd'}",
                 "--out", str(tmp_path / "e")]) == 2
    assert "give out=DIR once" in capsys.readouterr().err
    assert not (tmp_path / "d").exists() and not (tmp_path / "e").exists()


def test_interpolate_help_says_it_takes_out_and_no_recipe():
    text = " ".join(build_parser()._subparsers._group_actions[0].choices["interpolate"].format_help().split())
    assert "out=DIR" in text and "--out" not in text and "It takes no recipe or config keys" in text
    top = " ".join(build_parser().format_help().split())
    assert "every subcommand" not in top and "interpolate take" not in top


def test_train_module_and_shim_print_usage_without_arguments(tmp_path):
    for entry in (("-m", "boolcl.train"), (str(ROOT / "train.py"),)):
        code, out, said, imported = cli(cwd=tmp_path, entry=entry)
        assert code == 2 and said[0].startswith("usage: ") and "say what to train: recipe=NAME" in said[-1]
        assert "torch" not in imported and not list(tmp_path.iterdir())
