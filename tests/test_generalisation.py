"""scripts/reproduce/generalisation.py end to end on a tiny model: every variant trained once, scored on each
data set (the sample, a NevIR-like and a BIRCO-like set written here), compare tables whose figures
are the runs' own, a summary, a rerun that trains and scores nothing, an absent set skipped."""
from __future__ import annotations

import io
import json
import pickle
from importlib.metadata import version as package_version
from pathlib import Path
from platform import python_version

import pytest
import torch
from conftest import load_script
from rich.console import Console
from safetensors.torch import load_file

from boolcl.versions import describe, library_versions

PAIRS = [  # doc1 answers q1, doc2 answers q2
    {"id": "n1", "q1": "Which bird can fly?", "doc1": "The sparrow is a bird that can fly.",
     "q2": "Which bird cannot fly?", "doc2": "The penguin is a bird that cannot fly."},
    {"id": "n2", "q1": "Who won the race?", "doc1": "Anna won the race on Sunday.",
     "q2": "Who did not win the race?", "doc2": "Anna did not win the race on Sunday."},
    {"id": "n3", "q1": "Which metal does not rust?", "doc1": "Gold is a metal that does not rust.",
     "q2": "Which metal rusts?", "doc2": "Iron is a metal that rusts in damp air."},
]


def script_module():
    return load_script("scripts/reproduce/generalisation")


def write_birco(root: Path) -> Path:
    """One task (wtb) in the release layout: three queries, graded pools over eight passages."""
    corpus = {f"c{i}": f"a book about {'a dragon and a girl' if i % 2 else 'a whale and a ship'}, part {i}"
              for i in range(1, 9)}
    data = {"query": {"q1": "A novel about a whale hunt.", "q2": "A story of a girl and her dragon.",
                      "q3": "A sea voyage book."},
            "corpus": corpus,
            "qrel": {"q1": {"c2": 1, "c4": 0, "c1": 0, "c3": 0}, "q2": {"c1": 1, "c3": 1, "c2": 0},
                     "q3": {"c6": 1, "c8": 0, "c5": 0, "c7": 0}}}
    (root / "wtb").mkdir(parents=True)
    (root / "wtb" / "test_set.pickle").write_bytes(pickle.dumps(data, protocol=4))
    return root


def test_variant_option_parses_overrides_with_commas_in_values():
    g = script_module()
    name, overrides = g.parse_variant("wide=train.operators=[not,and],train.retention.weight=0, train.lr=1e-4")
    assert name == "wide"
    assert overrides == ["train.operators=[not,and]", "train.retention.weight=0", "train.lr=1e-4"]
    chosen = g.resolve_variants(["paper-not", "not_plus"], ["wide=train.retention.weight=0"])
    assert list(chosen) == ["base", "paper-not", "not_plus", "wide"] and chosen["base"] is None
    assert chosen["not_plus"] == [] and chosen["wide"] == ["train.retention.weight=0"]
    for bad in ("nothing", "x-s2=train.lr=1", "not_plus=train.lr=1", "y=train.lr"):
        with pytest.raises(ValueError):
            g.resolve_variants([], [bad])
    with pytest.raises(ValueError, match="unknown variant"):
        g.resolve_variants(["no-such-variant"], [])
    # key=value after a list option is an override, not a variant or a data set
    args, variants = g.parse_args(["--only-data", "sample", "birco", "train.max_steps=2", "--variants", "not_plus",
                                   "train.lr=1e-4"])
    assert args.only_data == ["sample", "birco"] and list(variants) == ["base", "not_plus"]
    assert args.overrides == ["train.max_steps=2", "train.lr=1e-4"] and args.seeds == [1, 2, 3]


def test_soup_option_names_two_variants_and_a_share(capsys):
    g = script_module()
    args, _ = g.parse_args(["--variant", "lr3=train.lr=3e-4", "--variants", "not_plus",
                            "--soup", "mix=lr3+not_plus@0.5", "--soup", "back=mix+base@0.7"])
    assert args.soups == {"mix": ("lr3", "not_plus", 0.5), "back": ("mix", "base", 0.7)}  # a soup of a soup
    for bad, said in (("mix=lr3+nothing@0.5", "nothing is not a variant"),
                      ("mix=lr3+not_plus@1.5", "between 0 and 1"),
                      ("mix=lr3+not_plus", "expected NAME=A+B@W"), ("not_plus=lr3+base@0.5", "name is taken"),
                      ("mix=base+lr3@0.5", "must be a trained variant"), ("mix=lr3+base@x", "between 0 and 1"),
                      ("mix=later+base@0.5", "later is not a variant"),
                      ("mix=lr3+base@0.5,layers:0=2", "between 0 and 1"),
                      ("mix=lr3+base@0.5,layer:0=1", "a part is embeddings, head")):
        with pytest.raises(SystemExit):
            g.parse_args(["--variant", "lr3=train.lr=3e-4", "--variants", "not_plus", "--soup", bad])
        assert said in capsys.readouterr().err, bad


def test_a_soup_may_give_parts_shares_of_their_own():
    from boolcl.retrieval.interpolate import Shares

    g = script_module()
    args, _ = g.parse_args(["--variant", "lr3=train.lr=3e-4", "--variants", "not_plus",
                            "--soup", "lay=lr3+not_plus@0.4,embeddings=1,layers:0-2=1,head=0.6"])
    assert args.soups == {"lay": ("lr3", "not_plus", Shares(0.4, {"embeddings": 1.0, "layers:0-2": 1.0,
                                                                      "head": 0.6}))}


def test_a_soup_is_mixed_again_when_either_model_changed(tiny_model_dir, tmp_path):
    from boolcl.retrieval.interpolate import Shares
    from boolcl.retrieval.models import load_model

    g = script_module()
    a = tmp_path / "a"
    model = load_model(str(tiny_model_dir))
    with torch.no_grad():
        next(model.parameters()).add_(1.0)
    model.save(str(a))
    said = io.StringIO()
    console = Console(file=said)
    folder = tmp_path / "runs" / "mix-s1"
    assert g.soup_once("mix", 1, a, str(tiny_model_dir), 0.5, folder, console) is True
    assert g.soup_once("mix", 1, a, str(tiny_model_dir), 0.5, folder, console) is False  # kept
    assert g.soup_once("mix", 1, a, str(tiny_model_dir), 0.25, folder, console) is True  # another share
    with torch.no_grad():
        next(model.parameters()).add_(1.0)
    model.save(str(a))  # A trained again
    assert g.soup_once("mix", 1, a, str(tiny_model_dir), 0.25, folder, console) is True
    assert json.loads((folder / "variant.json").read_text())["weight"] == 0.25
    by_part = Shares(0.25, {"layers:1": 1.0})
    assert g.soup_once("mix", 1, a, str(tiny_model_dir), by_part, folder, console) is True  # another mix
    assert g.soup_once("mix", 1, a, str(tiny_model_dir), by_part, folder, console) is False
    assert json.loads((folder / "variant.json").read_text())["parts"] == {"layers:1": 1.0}
    assert json.loads((folder / "interpolation.json").read_text())["by_part"]["layers:1"] > 0


def test_unseen_set_is_written_once_and_absent_sets_say_why(tmp_path):
    g = script_module()
    spec, why = g.unseen_set(tmp_path)
    rows = (tmp_path / "data" / "unseen" / "eval.jsonl").read_text().splitlines()
    assert spec == str(tmp_path / "data" / "unseen") and len(rows) > 100 and "reworded" in why
    assert (tmp_path / "data" / "unseen" / "corpus.jsonl").is_file()
    (tmp_path / "data" / "unseen" / "eval.jsonl").write_text(rows[0] + "\n")
    assert g.unseen_set(tmp_path)[0] == spec and len((Path(spec) / "eval.jsonl").read_text().splitlines()) == 1
    assert g.nevir_source(str(tmp_path / "nowhere"))[0] is None
    assert g.birco_source(str(tmp_path))[0] is None and "test_set.pickle" in g.birco_source(str(tmp_path))[1]
    write_birco(tmp_path / "birco")
    assert g.birco_source(str(tmp_path / "birco")) == (str(tmp_path / "birco"),
                                                        f"BIRCO test tasks wtb from {tmp_path / 'birco'}")


@pytest.mark.parametrize("name", ["foldoc", "gcide"])
def test_built_set_is_given_or_built_once_or_skipped_saying_how(name, tmp_path, monkeypatch):
    import importlib
    import sys

    import test_devset_foldoc
    import test_devset_gcide

    g = script_module()
    module, _, label, package, env = g.BUILT_SETS[name]
    entries = test_devset_foldoc.ENTRIES if name == "foldoc" else test_devset_gcide.ENTRIES
    monkeypatch.delenv(env, raising=False)
    spec, why = g.built_source(name, str(tmp_path / "nowhere"), tmp_path)
    assert spec is None and str(tmp_path / "nowhere") in why
    monkeypatch.syspath_prepend(str(Path(g.ROOT) / "scripts" / "devsets"))
    builder = importlib.import_module(module)

    monkeypatch.setattr(builder, "DEFAULT_DICT", tmp_path / "none.dict.dz")
    monkeypatch.setattr(builder, "DEFAULT_INDEX", tmp_path / "none.index")
    spec, why = g.built_source(name, None, tmp_path / "report")
    assert spec is None and f"apt-get install {package}" in why
    assert sys.modules[module] is builder  # the report read the patched module
    dict_path, index_path = test_devset_foldoc.write_dictd(tmp_path, entries)
    monkeypatch.setattr(builder, "DEFAULT_DICT", dict_path)
    monkeypatch.setattr(builder, "DEFAULT_INDEX", index_path)
    built = tmp_path / "report" / "data" / name
    assert g.built_source(name, None, tmp_path / "report") == (
        str(built), f"{len((built / 'eval.jsonl').read_text().splitlines())} {label} questions built -> {built}")
    stamp = (built / "eval.jsonl").stat().st_mtime_ns
    spec, why = g.built_source(name, None, tmp_path / "report")
    assert spec == str(built) and "built earlier" in why and (built / "eval.jsonl").stat().st_mtime_ns == stamp
    broken = tmp_path / "broken.index"  # a damaged dictionary: skipped, saying which line
    broken.write_text("no tabs here\n", encoding="utf-8")
    monkeypatch.setattr(builder, "DEFAULT_INDEX", broken)
    spec, why = g.built_source(name, None, tmp_path / "report2")
    assert spec is None and f"{broken.name}:1" in why and not (tmp_path / "report2" / "data" / name).exists()
    monkeypatch.setenv(env, str(built))  # a folder given wins
    assert g.built_source(name, None, tmp_path / "elsewhere")[0] == str(built)


def test_a_run_folder_trained_otherwise_is_refused(tmp_path):
    g = script_module()
    folder = tmp_path / "not_plus-s1"
    folder.mkdir()
    (folder / "modules.json").write_text("[]")
    (folder / g.RUN_FILE).write_text(json.dumps({"recipe": g.RECIPE, "variant": "not_plus", "seed": 1,
                                                  "overrides": [], "extra": ["train.max_steps=1"]}))
    said = io.StringIO()
    assert g.train_once("not_plus", 1, [], ["train.max_steps=1"], folder, Console(file=said)) is False  # kept
    assert "was trained at None" in said.getvalue()  # another commit (here: none recorded) is named, not refused
    with pytest.raises(SystemExit, match="remove it or use another --out"):
        g.train_once("not_plus", 1, [], ["train.max_steps=2"], folder, None)


def test_generalisation_report_end_to_end_resumes_and_skips_absent_sets(tiny_model_dir, tmp_path, monkeypatch,
                                                                         capsys):
    """Two trained variants (paper-not and one given with --variant), one seed, one step each."""
    out = tmp_path / "report"
    nevir = tmp_path / "nevir.json"
    birco = write_birco(tmp_path / "birco")
    args = ["--seeds", "1", "--out", str(out), "--only-data", "sample", "nevir", "birco",
            "--variants", "paper-not", "--variant", "lean=train.retention.weight=0,train.decomposition.weight=0",
            "--soup", "mix=lean+paper-not@0.25", "--birco", str(birco),
            "--nevir", str(nevir), f"model={tiny_model_dir}",
            "train.max_steps=1", "train.batch_size=8", "compare.samples=2000"]
    monkeypatch.setenv("BOOLCL_NEVIR", str(tmp_path / "elsewhere"))  # --nevir wins over the variable
    monkeypatch.chdir(tmp_path)
    report = script_module()

    def command():  # the command line, in this process (a fresh interpreter per run costs 5 s of imports)
        code = report.main(args)
        return code, capsys.readouterr().out

    code, stdout = command()
    assert code == 0, stdout[-3000:]
    text = " ".join(stdout.split())
    assert f"nevir: skipped: no NevIR test split at {nevir}" in text  # absent: skipped, saying why
    assert not (out / "nevir").exists()
    assert sorted(p.name for p in (out / "runs").iterdir()) == ["lean-s1", "mix-s1", "paper-not-s1"]
    weights = {r: load_file(out / "runs" / f"{r}-s1" / "model.safetensors") for r in ("lean", "paper-not", "mix")}
    assert all(torch.allclose(v, 0.25 * weights["lean"][k] + 0.75 * weights["paper-not"][k], atol=1e-6)
               for k, v in weights["mix"].items() if v.is_floating_point())
    assert any(not torch.equal(v, weights["paper-not"][k]) for k, v in weights["lean"].items())  # two models
    recorded = json.loads((out / "runs" / "lean-s1" / "variant.json").read_text())
    assert recorded["overrides"] == ["train.retention.weight=0", "train.decomposition.weight=0"]

    for data in ("sample", "birco"):
        runs = sorted(p.name for p in (out / data / "runs").iterdir())
        assert runs == ["base", "lean-s1", "mix-s1", "paper-not-s1"]
        vs_base = json.loads((out / data / "compare" / "compare.json").read_text())
        vs_paper = json.loads((out / data / "compare-vs-paper" / "compare.json").read_text())
        assert vs_base["baseline"] == "base" and vs_paper["baseline"] == "paper-not-s1"  # one seed: its own name
        assert list(vs_base["cells"]) == ["base", "paper-not-s1", "lean-s1", "mix-s1"]
        assert all((out / data / folder / "compare.md").is_file() for folder in ("compare", "compare-vs-paper"))
        checked = 0
        for run in runs:  # the tables' figures are the runs' own
            results = json.loads((out / data / "runs" / run / "results.json").read_text())
            for measure, groups in results["metrics"].items():
                for group, cell in groups.items():
                    if cell["value"] is not None and measure in vs_base["measures"]:
                        for payload in (vs_base, vs_paper):
                            assert payload["cells"][run][measure][group]["value"] == pytest.approx(100 * cell["value"])
                            checked += 1
        assert checked >= 3 * 2 * (8 if data == "sample" else 4)
    birco_md = (out / "birco" / "compare" / "compare.md").read_text()
    assert "nDCG@10 WTB" in birco_md  # BIRCO's table shows nDCG@10, not MRR/NegRecall alone
    birco_base = json.loads((out / "birco" / "runs" / "base" / "results.json").read_text())
    summary = (out / "summary.md").read_text()
    assert "**sample**" in summary and "**birco**" in summary and "**nevir**" not in summary
    assert f"| base | {100 * birco_base['metrics']['nDCG@10']['WTB']['value']:.2f} |" in summary
    lean = json.loads((out / "sample" / "runs" / "lean-s1" / "results.json").read_text())
    assert f"{100 * lean['metrics']['NegRecall@10']['NOT']['value']:.2f}" in summary.split("| lean |")[1].split("\n")[0]
    # every training run and evaluation records the library versions, and the summary names them
    now = library_versions()
    assert lean["versions"] == now and now["torch"] == package_version("torch") and now["python"] == python_version()
    assert json.loads((out / "runs" / "lean-s1" / "data_manifest.json").read_text())["versions"] == now
    assert f"Library versions (every trained model and every evaluation): {describe(now)}." in summary

    # the data set now present: nothing trained again, the finished evaluations kept, only NevIR scored
    nevir.write_text(json.dumps(PAIRS), encoding="utf-8")
    stamps = {p: p.stat().st_mtime_ns for p in out.glob("*/runs/*/results.json")}
    assert len(stamps) == 8
    model_stamp = (out / "runs" / "lean-s1" / "model.safetensors").stat().st_mtime_ns
    code, stdout = command()
    assert code == 0, stdout[-3000:]
    assert "train lean" not in stdout and "training" not in stdout
    assert (out / "runs" / "lean-s1" / "model.safetensors").stat().st_mtime_ns == model_stamp
    assert all(p.stat().st_mtime_ns == t for p, t in stamps.items())
    assert "0 trained, 4 evaluated, 8 evaluations kept" in " ".join(stdout.split())
    assert "interpolate mix" not in stdout  # the mix of the same two models is kept
    nevir_base = json.loads((out / "nevir" / "compare" / "compare.json").read_text())
    for run in ("base", "paper-not-s1", "lean-s1", "mix-s1"):
        results = json.loads((out / "nevir" / "runs" / run / "results.json").read_text())
        assert nevir_base["cells"][run]["PairedAcc"]["ALL"]["value"] == pytest.approx(
            100 * results["metrics"]["PairedAcc"]["ALL"]["value"])
    assert "paired accuracy" in (out / "summary.md").read_text()
    # NevIR is scored at 256 tokens (cut at the recipe's 128 its two documents can be the same text);
    # a result scored at another length is scored again rather than kept
    length = lambda data, run: json.loads((out / data / "runs" / run / "results.json").read_text())[  # noqa: E731
        "settings"]["max_seq_length"]
    assert length("nevir", "base") == 256 and length("sample", "base") == 128
    stale = out / "nevir" / "runs" / "base" / "results.json"
    record = json.loads(stale.read_text())
    record["settings"]["max_seq_length"] = 128
    stale.write_text(json.dumps(record))
    code, stdout = command()
    assert code == 0, stdout[-3000:]
    text = " ".join(stdout.split())
    assert "scored at max length 128, now 256" in text and "0 trained, 1 evaluated, 11 evaluations kept" in text
    assert length("nevir", "base") == 256


def test_summary_marks_tests_against_base_and_paper_and_drops_a_repeated_all_column():
    g = script_module()

    def payload(baseline, significant):
        cell = lambda run, v: {"value": v, "std": 1.0 if run != "base" else None,  # noqa: E731
                               "significant": run in significant}
        runs = {"base": 60.0, "paper-not (3 seeds)": 70.0, "not_plus (3 seeds)": 80.0}
        return {"k": 10, "groups": ["ALL", "NOT"], "group_sizes": {"ALL": 5, "NOT": 5}, "baseline": baseline,
                "measures": ["MRR@10", "NegRecall@10"], "questions": 5, "data": {"name": "unseen"},
                "cells": {r: {m: {gr: cell(r, v) for gr in ("ALL", "NOT")} for m in ("MRR@10", "NegRecall@10")}
                          for r, v in runs.items()}}

    ds = g.DataSet("unseen", "x")
    rows = [("base", "base"), ("paper-not", "paper-not (3 seeds)"), ("not_plus", "not_plus (3 seeds)")]
    text = g.summary_table(ds, rows, payload("base", {"not_plus (3 seeds)"}),
                           payload("paper-not", {"base", "not_plus (3 seeds)"}))
    lines = text.splitlines()
    assert lines[2] == "| run | MRR@10 NOT ↑ | NegRecall@10 NOT ↓ |"  # NOT only: ALL would repeat it
    assert lines[4] == "| base | 60.00 | 60.00 |"  # base against paper-not is paper-not's own test
    assert lines[5] == "| paper-not | 70.00±1.00 | 70.00±1.00 |"
    assert lines[6] == "| not_plus | 80.00±1.00†‡ | 80.00±1.00†‡ |"


def test_summary_lists_each_set_of_library_versions_with_what_was_made_with_it(tmp_path):
    g = script_module()
    now = {"python": "3.11.7", "torch": "2.13.0+cpu"}
    older = {"python": "3.11.7", "torch": "2.12.1+cpu"}
    run_a, run_b, run_c = (tmp_path / "runs" / n for n in ("a-s1", "b-s1", "c-s1"))
    for folder, versions in ((run_a, now), (run_b, older), (run_c, None)):
        folder.mkdir(parents=True)
        (folder / "data_manifest.json").write_text(json.dumps({"mix": {}} | ({"versions": versions} if versions else {})))
    result = tmp_path / "sample" / "runs" / "a-s1" / "results.json"
    result.parent.mkdir(parents=True)
    result.write_text(json.dumps({"versions": now}))
    assert g.versions_lines([run_a], [result]) == [
        "Library versions (every trained model and every evaluation): python 3.11.7, torch 2.13.0+cpu.", ""]
    lines = g.versions_lines([run_a, run_b, run_c], [result])
    assert lines[0].startswith("Library versions differ")
    assert "- python 3.11.7, torch 2.13.0+cpu: runs/a-s1, sample/runs/a-s1" in lines
    assert "- python 3.11.7, torch 2.12.1+cpu: runs/b-s1" in lines
    assert "- not recorded: runs/c-s1" in lines


def test_library_versions_name_python_and_each_library_or_say_absent(monkeypatch):
    import boolcl.versions as v

    monkeypatch.setattr(v, "LIBRARIES", ("torch", "no-such-library-boolcl"))
    assert v.library_versions() == {"python": python_version(), "torch": package_version("torch"),
                                    "no-such-library-boolcl": "absent"}
